//! The human-readable result, narrow enough for an 80-column terminal: a requests table
//! (one row per phase; runs one after the other, so a naive and a realistic run read side
//! by side), a latency table (milliseconds; "–" where nothing succeeded), the server's
//! cost per request (only the columns that were measured, with a line saying how to get
//! the others), errors by cause, and notes (repeated warnings collapsed into one line with
//! a count). Tables are laid out by comfy-table with a width of [`WIDTH`]; every number
//! in a column has the same format (same unit, same decimals).

use std::collections::BTreeMap;

use comfy_table::{CellAlignment, ContentArrangement, Table, TableComponent};

use crate::report::{BenchReport, PhaseReport, RunReport};

/// Widest line printed.
pub const WIDTH: usize = 80;

/// Header underline only: no borders, no column separators.
const STYLE: &str = "     -             ";

/// A table of `header` and `rows`, the first column left-aligned, the others right.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut table = Table::new();
    table.load_preset(STYLE);
    for border in [
        TableComponent::LeftBorder,
        TableComponent::RightBorder,
        TableComponent::TopBorder,
        TableComponent::BottomBorder,
        TableComponent::LeftHeaderIntersection,
        TableComponent::RightHeaderIntersection,
    ] {
        table.remove_style(border);
    }
    table
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(WIDTH as u16)
        .set_header(header.to_vec());
    for row in rows {
        table.add_row(row.clone());
    }
    for index in 0..header.len() {
        if let Some(column) = table.column_mut(index) {
            // Two spaces between columns, none at the line's start.
            column.set_padding(if index == 0 { (0, 0) } else { (2, 0) });
            if index > 0 {
                column.set_cell_alignment(CellAlignment::Right);
            }
        }
    }
    let mut out = String::new();
    for line in table.lines().skip_while(|line| line.trim().is_empty()) {
        out += line.trim_end();
        out.push('\n');
    }
    out
}

/// `text` wrapped at [`WIDTH`], continuation lines indented by `indent` spaces.
pub fn wrap(text: &str, indent: usize) -> String {
    let pad = " ".repeat(indent);
    // Lines break at spaces only: `keep-alive` and `--server-pid` stay whole.
    let options = textwrap::Options::new(WIDTH)
        .subsequent_indent(&pad)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    let mut out = textwrap::fill(text, options);
    out.push('\n');
    out
}

/// Requests per second, one format per column: whole numbers, or thousands with one
/// decimal (`12.5k`) when the column reaches 10,000.
pub fn rate_column(values: &[Option<f64>]) -> Vec<String> {
    let thousands = values.iter().flatten().any(|&value| value >= 10_000.0);
    values
        .iter()
        .map(|value| match value {
            None => "max".to_owned(),
            Some(value) if thousands => format!("{:.1}k", value / 1000.0),
            Some(value) => format!("{value:.0}"),
        })
        .collect()
}

/// Latencies (given in µs) in milliseconds, one number of decimals per column chosen by
/// its largest value (3 below 1 ms, 2 below 10 ms, 1 below 100 ms, else 0); a value that
/// would round to zero is `<1` (`<0.1`, ...); `None` (no successful response measured) is
/// "–".
pub fn latency_column(values: &[Option<f64>]) -> Vec<String> {
    let largest = values
        .iter()
        .flatten()
        .fold(0.0_f64, |max, &value| max.max(value));
    let decimals = if largest < 1_000.0 {
        3
    } else if largest < 10_000.0 {
        2
    } else if largest < 100_000.0 {
        1
    } else {
        0
    };
    values
        .iter()
        .map(|value| {
            value.map_or("–".to_owned(), |value| {
                let text = format!("{:.decimals$}", value / 1000.0);
                // A latency that rounds to zero at the column's precision is not zero:
                // `<1` (or `<0.1`...), never `0`.
                if value > 0.0 && text.bytes().all(|byte| byte == b'0' || byte == b'.') {
                    let unit = ["1", "0.1", "0.01", "0.001"][decimals.min(3)];
                    format!("<{unit}")
                } else {
                    text
                }
            })
        })
        .collect()
}

/// Numbers with a fixed number of decimals; `None` is "–".
pub fn fixed_column(values: &[Option<f64>], decimals: usize) -> Vec<String> {
    values
        .iter()
        .map(|value| value.map_or("–".to_owned(), |value| format!("{value:.decimals$}")))
        .collect()
}

/// Rows from columns (each column as long as `names`).
fn rows(names: &[String], columns: &[Vec<String>]) -> Vec<Vec<String>> {
    names
        .iter()
        .enumerate()
        .map(|(index, name)| {
            let mut row = vec![name.clone()];
            row.extend(columns.iter().map(|column| column[index].clone()));
            row
        })
        .collect()
}

fn phase_name(run: &str, phase: &PhaseReport) -> String {
    if run == "run" {
        phase.label.clone()
    } else {
        format!("{run}: {}", phase.label)
    }
}

/// Every phase of the report with its run.
fn phases(report: &BenchReport) -> Vec<(&RunReport, &PhaseReport)> {
    report
        .runs
        .iter()
        .flat_map(|run| run.phases.iter().map(move |phase| (run, phase)))
        .collect()
}

fn requests_table(report: &BenchReport) -> String {
    let all = phases(report);
    let names: Vec<String> = all
        .iter()
        .map(|(run, phase)| phase_name(&run.name, phase))
        .collect();
    let mut header = vec![
        "phase",
        "offered/s",
        "achieved/s",
        "errors",
        "missed",
        "MB/s",
    ];
    let mut columns = vec![
        rate_column(
            &all.iter()
                .map(|(_, phase)| phase.offered_rate)
                .collect::<Vec<_>>(),
        ),
        rate_column(
            &all.iter()
                .map(|(_, phase)| Some(phase.achieved_rate))
                .collect::<Vec<_>>(),
        ),
        all.iter()
            .map(|(_, phase)| phase.errors_total.to_string())
            .collect(),
        all.iter()
            .map(|(_, phase)| phase.missed_slots.to_string())
            .collect(),
        fixed_column(
            &all.iter()
                .map(|(_, phase)| Some(phase.bytes_per_second / 1e6))
                .collect::<Vec<_>>(),
            1,
        ),
    ];
    if report.runs.iter().any(|run| run.cold.requested > 0) {
        header.push("cold held");
        columns.push(
            all.iter()
                .map(|(run, phase)| format!("{}/{}", phase.cold_held.1, run.cold.requested))
                .collect(),
        );
    }
    format!("Requests\n\n{}", render(&header, &rows(&names, &columns)))
}

fn latency_table(report: &BenchReport) -> String {
    let all = phases(report);
    let names: Vec<String> = all
        .iter()
        .map(|(run, phase)| phase_name(&run.name, phase))
        .collect();
    let pick = |figure: fn(&PhaseReport) -> (u64, f64)| -> Vec<String> {
        latency_column(
            &all.iter()
                .map(|(_, phase)| {
                    let (count, value) = figure(phase);
                    (count > 0).then_some(value)
                })
                .collect::<Vec<_>>(),
        )
    };
    let columns = vec![
        pick(|phase| {
            (
                phase.latency.corrected.count,
                phase.latency.corrected.p50_us,
            )
        }),
        pick(|phase| {
            (
                phase.latency.corrected.count,
                phase.latency.corrected.p90_us,
            )
        }),
        pick(|phase| {
            (
                phase.latency.corrected.count,
                phase.latency.corrected.p99_us,
            )
        }),
        pick(|phase| {
            (
                phase.latency.corrected.count,
                phase.latency.corrected.p99_9_us,
            )
        }),
        pick(|phase| {
            (
                phase.latency.corrected.count,
                phase.latency.corrected.max_us,
            )
        }),
        pick(|phase| (phase.latency.raw.count, phase.latency.raw.p50_us)),
        pick(|phase| (phase.latency.raw.count, phase.latency.raw.p99_us)),
    ];
    format!(
        "\n{}\n{}",
        wrap(
            "Latency of successful responses, ms (corrected: from the intended start; \
             raw: from the send)",
            0
        ),
        render(
            &[
                "phase", "p50", "p90", "p99", "p99.9", "max", "raw p50", "raw p99"
            ],
            &rows(&names, &columns)
        )
    )
}

/// The cost tables: the server's CPU per request (from `/proc`) and its own counters
/// (from its stats endpoint), only the columns some phase measured, and a line for each
/// missing group saying which flag measures it.
fn cost_table(report: &BenchReport) -> String {
    let all = phases(report);
    let measured: Vec<_> = all
        .iter()
        .filter(|(_, phase)| {
            phase.server.is_some() || phase.server_counters.is_some() || phase.machine.is_some()
        })
        .collect();
    if measured.is_empty() {
        return String::new();
    }
    let names: Vec<String> = measured
        .iter()
        .map(|(run, phase)| phase_name(&run.name, phase))
        .collect();
    // Per-request figures of a phase without a response would divide by zero: "–".
    let column = |figure: &dyn Fn(&PhaseReport) -> Option<f64>, decimals| {
        fixed_column(
            &measured
                .iter()
                .map(|(_, phase)| figure(phase).filter(|_| phase.completed_in_window > 0))
                .collect::<Vec<_>>(),
            decimals,
        )
    };
    // Gauges, not per request: shown whether or not a response completed.
    let gauge = |figure: fn(&crate::report::ServerCost) -> f64, decimals| {
        fixed_column(
            &measured
                .iter()
                .map(|(_, phase)| phase.server.as_ref().map(figure))
                .collect::<Vec<_>>(),
            decimals,
        )
    };
    let server = measured.iter().any(|(_, phase)| phase.server.is_some());
    let mut header = vec!["phase"];
    let mut columns = Vec::new();
    let mut hints = Vec::new();
    if server {
        header.push("server µs");
        columns.push(column(
            &|phase| phase.server.as_ref().map(|cost| cost.cpu_us_per_request),
            2,
        ));
    } else {
        hints.push(
            "Server CPU, memory and descriptors were not measured: give --server-pid PID \
             (or let the bench start the server with --spawn CMD).",
        );
    }
    if measured.iter().any(|(_, phase)| phase.machine.is_some()) {
        header.extend(["machine µs", "other µs"]);
        columns.push(column(
            &|phase| phase.machine.as_ref().map(|cost| cost.busy_us_per_request),
            2,
        ));
        columns.push(column(
            &|phase| phase.machine.as_ref().map(|cost| cost.other_us_per_request),
            2,
        ));
    }
    if measured.iter().any(|(_, phase)| phase.generator.is_some()) {
        header.push("bench µs");
        columns.push(column(
            &|phase| {
                phase
                    .generator
                    .as_ref()
                    .map(|cost| cost.cpu_us_per_response)
            },
            2,
        ));
    }
    if server {
        header.extend(["RSS MiB", "fds"]);
        columns.push(gauge(|cost| cost.rss_bytes.1 as f64 / 1_048_576.0, 1));
        columns.push(gauge(|cost| cost.open_descriptors.1 as f64, 0));
    }
    let mut out = format!(
        "\n{}\n",
        wrap(
            "Server cost per request, µs of CPU (machine: all cores busy; other: machine − \
             server − bench)",
            0
        )
    );
    out += &render(&header, &rows(&names, &columns));
    if measured
        .iter()
        .any(|(_, phase)| phase.server_counters.is_some())
    {
        let counter = |figure: fn(&crate::server_stats::ServerCountersDelta) -> f64, decimals| {
            column(
                &|phase| phase.server_counters.as_ref().map(figure),
                decimals,
            )
        };
        let columns = vec![
            counter(|counters| counters.syscalls_per_request, 2),
            counter(|counters| counters.waits_per_request, 3),
            counter(|counters| counters.events_per_wait, 1),
        ];
        out += "\nThe server's own counters, per request (from --server-stats)\n\n";
        out += &render(
            &["phase", "syscalls", "waits", "events/wait"],
            &rows(&names, &columns),
        );
    } else {
        hints.push(
            "Syscalls and waits per request were not measured: for a coldwire server give \
             --server-stats http://ADDR/stats (coldwire serve --admin ADDR).",
        );
    }
    if !hints.is_empty() {
        out.push('\n');
    }
    for hint in hints {
        out += &wrap(hint, 0);
    }
    out
}

/// One figure of a phase, if it was measured.
type Figure = fn(&PhaseReport) -> Option<f64>;

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
    let mut columns: Vec<Vec<String>> = Vec::new();
    let figures: [(&str, Figure); 3] = [
        ("achieved/s", |phase| Some(phase.achieved_rate)),
        ("p99 ms", |phase| {
            (phase.latency.corrected.count > 0).then_some(phase.latency.corrected.p99_us)
        }),
        ("server µs", |phase| {
            phase.server.as_ref().map(|cost| cost.cpu_us_per_request)
        }),
    ];
    for (index, (figure, value)) in figures.iter().enumerate() {
        for run in runs {
            header.push(format!("{figure}\n{}", run.name));
            let values: Vec<Option<f64>> = run.phases.iter().map(value).collect();
            columns.push(match index {
                0 => rate_column(&values),
                1 => latency_column(&values),
                _ => fixed_column(&values, 2),
            });
        }
    }
    let names = rate_column(
        &runs[0]
            .phases
            .iter()
            .map(|phase| phase.offered_rate)
            .collect::<Vec<_>>(),
    );
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    format!(
        "\nSide by side (corrected latency)\n\n{}",
        render(&header, &rows(&names, &columns))
    )
}

/// Each error cause of each phase with its count: `connect: ECONNREFUSED (111) × 42`.
fn errors(report: &BenchReport) -> String {
    let mut out = String::new();
    for (run, phase) in phases(report) {
        for (cause, count) in &phase.error_causes {
            out += &wrap(
                &format!("  {}: {cause} × {count}", phase_name(&run.name, phase)),
                4,
            );
        }
    }
    if out.is_empty() {
        out
    } else {
        format!("\nErrors\n{out}")
    }
}

/// Notes and warnings, each distinct text once (with `× N` when it repeats).
fn notes(report: &BenchReport) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut note = |text: String| {
        let count = counts.entry(text.clone()).or_default();
        if *count == 0 {
            order.push(text);
        }
        *count += 1;
    };
    for run in &report.runs {
        if run.cold.requested > 0 {
            note(format!(
                "{}: cold connections {} requested, {} established, {} failed, {} closed by the server",
                run.name,
                run.cold.requested,
                run.cold.established,
                run.cold.failed,
                run.cold.closed_by_server
            ));
        }
        if let Some(saturation) = &run.saturation {
            note(format!(
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
            note(format!("warning: {warning}"));
        }
    }
    // The generator short of CPU: one line for every phase it happened in.
    let starved: Vec<(String, f64, f64)> = phases(report)
        .into_iter()
        .filter_map(|(run, phase)| {
            let waited = phase.generator.as_ref()?.runqueue_wait_seconds;
            (waited > 0.05 * phase.window_seconds)
                .then(|| (phase_name(&run.name, phase), waited, phase.window_seconds))
        })
        .collect();
    if let Some(worst) = starved
        .iter()
        .max_by(|a, b| (a.1 / a.2).total_cmp(&(b.1 / b.2)))
    {
        let phases = if starved.len() == 1 {
            worst.0.clone()
        } else {
            format!("{} phases", starved.len())
        };
        note(format!(
            "the generator waited for a CPU in {phases} (at worst {} of {}, {}): other \
             processes ran on its core, and missed slots and corrected latency include that; \
             run it on a core nothing else uses (--cpu)",
            short_seconds(worst.1),
            short_seconds(worst.2),
            worst.0
        ));
    }
    for (run, phase) in phases(report) {
        if let Some(planned) = phase.requests_planned {
            note(request_count_note(
                &phase_name(&run.name, phase),
                phase,
                planned,
            ));
        }
    }
    if report.interrupted {
        note("interrupted: the results cover what ran".into());
    }
    let mut out = String::new();
    for text in order {
        let count = counts[&text];
        let line = if count > 1 {
            format!("{text} (× {count})")
        } else {
            text
        };
        out += &wrap(&line, 2);
    }
    if out.is_empty() {
        out
    } else {
        format!("\n{out}")
    }
}

/// What ended a phase with a request budget (`-n`): the count, or the duration first.
fn request_count_note(name: &str, phase: &PhaseReport, planned: u64) -> String {
    let ended = phase.sent_requests.min(planned);
    match phase.ended_by {
        crate::config::PhaseEnd::Requests => format!(
            "{name}: the request count (-n {planned}) ended the run: {} responses and {} \
             errors in {:.3} s",
            phase.completed_in_window, phase.errors_total, phase.window_seconds
        ),
        crate::config::PhaseEnd::Duration => format!(
            "{name}: the duration (-d) ended the run before the request count: {ended} of \
             -n {planned} requests sent in {:.3} s",
            phase.window_seconds
        ),
        crate::config::PhaseEnd::Interrupted => {
            format!("{name}: interrupted after {ended} of -n {planned} requests")
        }
    }
}

/// The tables for a report, every line at most [`WIDTH`] columns.
pub fn format_report(report: &BenchReport) -> String {
    let mut out = requests_table(report);
    out += &latency_table(report);
    out += &cost_table(report);
    out += &side_by_side(report);
    out += &errors(report);
    out += &notes(report);
    out
}

/// A span for a note: milliseconds below a second (a `-n` run's window can be a few ms),
/// seconds with one or two decimals above.
fn short_seconds(seconds: f64) -> String {
    if seconds < 1.0 {
        format!("{:.1} ms", seconds * 1000.0)
    } else {
        format!("{seconds:.2} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_keep_one_format() {
        assert_eq!(
            rate_column(&[Some(950.0), Some(20_000.0)]),
            ["0.9k", "20.0k"]
        );
        assert_eq!(rate_column(&[Some(950.4), None]), ["950", "max"]);
        assert_eq!(
            latency_column(&[Some(120.0), Some(2_500.0), None]),
            ["0.12", "2.50", "–"]
        );
        assert_eq!(
            latency_column(&[Some(120.0), Some(450.0)]),
            ["0.120", "0.450"]
        );
        assert_eq!(
            latency_column(&[Some(150_000.0), Some(900.0)]),
            ["150", "1"]
        );
        assert_eq!(
            latency_column(&[Some(569_000.0), Some(34.0), Some(0.0)]),
            ["569", "<1", "0"]
        );
        assert_eq!(
            latency_column(&[Some(20_000.0), Some(40.0)]),
            ["20.0", "<0.1"]
        );
        assert_eq!(fixed_column(&[Some(1.234), None], 1), ["1.2", "–"]);
    }

    #[test]
    fn tables_fit_in_eighty_columns() {
        let header = [
            "phase", "p50", "p90", "p99", "p99.9", "max", "raw p50", "raw p99",
        ];
        let row: Vec<String> = std::iter::once("realistic: step 12 (123456/s)".to_owned())
            .chain((0..7).map(|_| "123456.789".to_owned()))
            .collect();
        let text = render(&header, &[row.clone(), row]);
        assert!(
            text.lines().all(|line| line.chars().count() <= WIDTH),
            "{text}"
        );
        assert!(text.lines().nth(1).unwrap().starts_with("-"), "{text}");
        let words = wrap(&"keep-alive --server-pid ".repeat(10), 0);
        assert!(
            words
                .lines()
                .all(|line| line.ends_with("keep-alive --server-pid")),
            "{words}"
        );
        let note = wrap(&"word ".repeat(40), 2);
        assert!(note.lines().count() > 2);
        assert!(note.lines().all(|line| line.chars().count() <= WIDTH));
    }

    #[test]
    fn short_spans_read_in_milliseconds() {
        assert_eq!(short_seconds(0.0096), "9.6 ms");
        assert_eq!(short_seconds(0.031), "31.0 ms");
        assert_eq!(short_seconds(2.5), "2.50 s");
    }
}
