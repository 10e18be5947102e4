//! The human-readable result: one row per phase (runs one after the other, so a naive and
//! a realistic run read side by side), latencies in milliseconds, then the server's cost
//! per request when it was measured.

use std::fmt::Write;

use crate::report::{BenchReport, PhaseReport};

fn rate(value: f64) -> String {
    if value >= 10_000.0 {
        format!("{:.1}k", value / 1000.0)
    } else {
        format!("{value:.0}")
    }
}

fn millis(micros: f64) -> String {
    if micros >= 100_000.0 {
        format!("{:.0}", micros / 1000.0)
    } else if micros >= 1_000.0 {
        format!("{:.1}", micros / 1000.0)
    } else {
        format!("{:.3}", micros / 1000.0)
    }
}

fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|cell| cell.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: Vec<String>| {
        for (index, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            if index == 0 {
                let _ = write!(out, "{cell:<width$}");
            } else {
                let _ = write!(out, "  {cell:>width$}");
            }
        }
        out.push('\n');
    };
    line(
        &mut out,
        header.iter().map(|cell| (*cell).to_owned()).collect(),
    );
    line(
        &mut out,
        widths.iter().map(|width| "-".repeat(*width)).collect(),
    );
    for row in rows {
        line(&mut out, row.clone());
    }
    out
}

fn phase_name(run: &str, phase: &PhaseReport) -> String {
    if run == "run" {
        phase.label.clone()
    } else {
        format!("{run}: {}", phase.label)
    }
}

/// With several runs of the same phases (the built-in scenario's naive and realistic
/// runs), one row per phase with the runs' key figures next to each other.
fn side_by_side(report: &BenchReport) -> String {
    let runs = &report.runs;
    if runs.len() < 2
        || runs
            .iter()
            .any(|run| run.phases.len() != runs[0].phases.len())
    {
        return String::new();
    }
    let mut header = vec!["offered/s".to_owned()];
    for figure in ["achieved/s", "p99 ms", "p99.9 ms", "server µs/req"] {
        for run in runs {
            header.push(format!("{figure} {}", run.name));
        }
    }
    let mut rows = Vec::new();
    for index in 0..runs[0].phases.len() {
        let phases: Vec<&PhaseReport> = runs.iter().map(|run| &run.phases[index]).collect();
        let mut row = vec![phases[0].offered_rate.map_or("max".into(), rate)];
        row.extend(phases.iter().map(|phase| rate(phase.achieved_rate)));
        row.extend(
            phases
                .iter()
                .map(|phase| millis(phase.latency.corrected.p99_us)),
        );
        row.extend(
            phases
                .iter()
                .map(|phase| millis(phase.latency.corrected.p99_9_us)),
        );
        row.extend(phases.iter().map(|phase| {
            phase
                .server
                .as_ref()
                .map_or("-".into(), |cost| format!("{:.2}", cost.cpu_us_per_request))
        }));
        rows.push(row);
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    format!(
        "\nSide by side (corrected latency)\n\n{}",
        render(&header, &rows)
    )
}

/// The tables for a report.
pub fn format_report(report: &BenchReport) -> String {
    let mut rows = Vec::new();
    let mut cost_rows = Vec::new();
    for run in &report.runs {
        for phase in &run.phases {
            let name = phase_name(&run.name, phase);
            let corrected = &phase.latency.corrected;
            let raw = &phase.latency.raw;
            rows.push(vec![
                name.clone(),
                phase.offered_rate.map_or("max".into(), rate),
                rate(phase.achieved_rate),
                phase.missed_slots.to_string(),
                phase.errors_total.to_string(),
                millis(corrected.p50_us),
                millis(corrected.p90_us),
                millis(corrected.p99_us),
                millis(corrected.p99_9_us),
                millis(corrected.max_us),
                millis(raw.p50_us),
                millis(raw.p99_us),
                millis(raw.max_us),
                format!("{:.1}", phase.bytes_per_second / 1e6),
                format!("{}/{}", phase.cold_held.1, run.cold.requested),
            ]);
            if phase.server.is_some() || phase.server_counters.is_some() || phase.machine.is_some()
            {
                let server = phase.server.as_ref();
                let counters = phase.server_counters.as_ref();
                let machine = phase.machine.as_ref();
                let number = |value: Option<f64>, digits: usize| {
                    value.map_or("-".into(), |value| format!("{value:.digits$}"))
                };
                cost_rows.push(vec![
                    name,
                    number(server.map(|cost| cost.cpu_us_per_request), 2),
                    number(server.map(|cost| cost.cpu_cores), 2),
                    number(machine.map(|cost| cost.busy_us_per_request), 2),
                    number(machine.map(|cost| cost.other_us_per_request), 2),
                    number(
                        phase
                            .generator
                            .as_ref()
                            .map(|cost| cost.cpu_us_per_response),
                        2,
                    ),
                    number(counters.map(|counters| counters.syscalls_per_request), 2),
                    number(counters.map(|counters| counters.waits_per_request), 3),
                    number(counters.map(|counters| counters.events_per_wait), 1),
                    server.map_or("-".into(), |cost| {
                        format!("{:.1}", cost.rss_bytes.1 as f64 / 1048576.0)
                    }),
                    server.map_or("-".into(), |cost| cost.open_descriptors.1.to_string()),
                ]);
            }
        }
    }
    let mut out = String::from(
        "Requests (latency in ms; corrected = from the intended start, raw = from the send)\n\n",
    );
    out += &render(
        &[
            "phase",
            "offered/s",
            "achieved/s",
            "missed",
            "errors",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max",
            "raw p50",
            "raw p99",
            "raw max",
            "MB/s",
            "cold held",
        ],
        &rows,
    );
    if !cost_rows.is_empty() {
        out += "\nServer cost per request (µs of CPU; machine = all cores busy, other = machine − server − generator)\n\n";
        out += &render(
            &[
                "phase",
                "server µs",
                "server cores",
                "machine µs",
                "other µs",
                "generator µs",
                "syscalls",
                "waits",
                "events/wait",
                "RSS MiB",
                "fds",
            ],
            &cost_rows,
        );
    }
    out += &side_by_side(report);
    let mut notes = Vec::new();
    for run in &report.runs {
        if run.cold.requested > 0 {
            notes.push(format!(
                "{}: cold connections {} requested, {} established, {} failed, {} closed by the server",
                run.name, run.cold.requested, run.cold.established, run.cold.failed, run.cold.closed_by_server
            ));
        }
        for phase in &run.phases {
            if let Some(generator) = &phase.generator
                && generator.runqueue_wait_seconds > 0.05 * phase.window_seconds
            {
                notes.push(format!(
                    "{}: the generator waited {:.2} s of {:.1} s for a CPU (other processes ran on its core): \
                     missed slots and corrected latency include that; run it on a core nothing else uses",
                    phase_name(&run.name, phase),
                    generator.runqueue_wait_seconds,
                    phase.window_seconds
                ));
            }
            if phase.errors_total > 0 {
                let errors = serde_json::to_value(phase.errors)
                    .ok()
                    .and_then(|value| value.as_object().cloned())
                    .map(|map| {
                        map.into_iter()
                            .filter(|(_, count)| count.as_u64().unwrap_or(0) > 0)
                            .map(|(kind, count)| format!("{kind} {count}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                notes.push(format!(
                    "{}: errors: {errors}",
                    phase_name(&run.name, phase)
                ));
            }
        }
        if let Some(saturation) = &run.saturation {
            notes.push(format!(
                "{}: saturation throughput {:.0}/s{}",
                run.name,
                saturation.saturation_throughput,
                match (&saturation.saturated_at_offered, &saturation.reason) {
                    (Some(offered), Some(reason)) =>
                        format!(", saturated at offered {offered:.0}/s ({reason})"),
                    _ => " (not saturated within the steps: raise --saturate-steps)".into(),
                }
            ));
        }
        for warning in &run.warnings {
            notes.push(format!("{}: warning: {warning}", run.name));
        }
    }
    if report.interrupted {
        notes.push("interrupted: the results cover what ran".into());
    }
    if !notes.is_empty() {
        out.push('\n');
        for note in notes {
            out += &note;
            out.push('\n');
        }
    }
    out
}
