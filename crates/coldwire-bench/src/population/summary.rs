//! The table people read after a population run: per phase, the robots, offered and
//! achieved rate, offered and measured document and byte hit ratios, hit and miss response
//! times, errors, integrity failures and connections (the JSON has everything).

use std::fmt::Write;

use crate::report::{BenchReport, PhaseReport};

fn percent(value: Option<f64>) -> String {
    value.map_or("-".to_owned(), |value| format!("{:.1}%", value * 100.0))
}

fn millis(microseconds: f64, count: u64) -> String {
    if count == 0 {
        "-".to_owned()
    } else {
        format!("{:.0}", microseconds / 1000.0)
    }
}

fn row(out: &mut String, phase: &PhaseReport) {
    let Some(population) = &phase.population else {
        return;
    };
    let (hit, miss) = (&population.hit_latency, &population.miss_latency);
    let _ = writeln!(
        out,
        "{:<8} {:>6} {:>8.1} {:>8.1} {:>6}/{:<6} {:>6}/{:<6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>5}",
        phase.label,
        population.max_active_users,
        phase.offered_rate.unwrap_or(0.0),
        phase.achieved_rate,
        percent(population.offered_document_hit_ratio),
        percent(population.measured_document_hit_ratio),
        percent(population.offered_byte_hit_ratio),
        percent(population.measured_byte_hit_ratio),
        millis(hit.mean_us, hit.count),
        millis(hit.p99_us, hit.count),
        millis(miss.mean_us, miss.count),
        millis(miss.p99_us, miss.count),
        phase.errors_total,
        population.integrity_failures,
        population.max_open_connections,
        phase.missed_slots,
    );
}

/// The table of every population run in `report` (empty when there is none).
pub fn format(report: &BenchReport) -> String {
    let mut out = String::new();
    for run in &report.runs {
        if run.phases.iter().all(|phase| phase.population.is_none()) {
            continue;
        }
        let _ = writeln!(out, "\n{} ({} generator)", run.name, run.generator_backend);
        let _ = writeln!(
            out,
            "{:<8} {:>6} {:>8} {:>8} {:>13} {:>13} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>5}",
            "phase",
            "robots",
            "offered",
            "achieved",
            "DHR off/meas",
            "BHR off/meas",
            "hit ms",
            "hit99",
            "miss",
            "miss99",
            "errors",
            "integ",
            "conns",
            "late",
        );
        for phase in &run.phases {
            row(&mut out, phase);
        }
        let verified: u64 = run
            .phases
            .iter()
            .filter_map(|phase| phase.population.as_ref())
            .map(|population| population.verified)
            .sum();
        let failures: u64 = run
            .phases
            .iter()
            .filter_map(|phase| phase.population.as_ref())
            .map(|population| population.integrity_failures)
            .sum();
        let _ = writeln!(
            out,
            "rates in requests/s; DHR/BHR: document/byte hit ratio of basic GETs answered 200, \
             offered by the robots vs measured (Cache-Status); hit/miss: mean and p99 response \
             time from the intended start, ms; {verified} bodies verified, {failures} integrity failures"
        );
        for warning in &run.warnings {
            let _ = writeln!(out, "warning: {warning}");
        }
    }
    out
}
