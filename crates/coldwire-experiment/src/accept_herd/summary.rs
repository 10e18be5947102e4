//! Turns `accept-herd`'s measured points into the experiment record: per-point metrics,
//! the four figures, the table, and findings and seed comparisons computed from the data.

use coldwire_report::{
    Axis, ExperimentRecord, Figure, Point, RECORD_SCHEMA_VERSION, Scale, Series, Table,
};

use super::NAME;
use super::workers::{Mode, PointResult};
use crate::RunContext;

/// The seed figure every plot here corresponds to.
const SEED_FIGURE: &str =
    "seed 004, Accept scalability (micro-benchmark: cost of one accept vs threads)";
/// Worker sleeps per connection at or below which a mode is "wake one".
const WAKE_ONE_LIMIT: f64 = 2.0;

/// The derived numbers of one point.
#[derive(Clone, Copy, Debug)]
struct Metrics {
    mode: Mode,
    workers: usize,
    returns_per_connection: f64,
    wasted_per_connection: f64,
    sleeps_per_connection: f64,
    jain_index: f64,
    min_accepted: u64,
    max_accepted: u64,
    connections_per_second: f64,
    cpu_microseconds_per_connection: f64,
}

impl Metrics {
    fn of(point: &PointResult) -> Self {
        let connections = point.connections.max(1) as f64;
        let sum = |field: fn(&super::workers::WorkerCounts) -> u64| {
            point.per_worker.iter().map(field).sum::<u64>() as f64
        };
        let accepted: Vec<f64> = point
            .per_worker
            .iter()
            .map(|counts| counts.accepted as f64)
            .collect();
        Metrics {
            mode: point.mode,
            workers: point.workers,
            returns_per_connection: sum(|counts| counts.returns) / connections,
            wasted_per_connection: sum(|counts| counts.wasted_returns) / connections,
            sleeps_per_connection: sum(|counts| counts.sleeps) / connections,
            jain_index: jain_index(&accepted),
            min_accepted: point
                .per_worker
                .iter()
                .map(|c| c.accepted)
                .min()
                .unwrap_or(0),
            max_accepted: point
                .per_worker
                .iter()
                .map(|c| c.accepted)
                .max()
                .unwrap_or(0),
            connections_per_second: point.connections as f64 / point.elapsed_seconds.max(1e-9),
            cpu_microseconds_per_connection: point.cpu_seconds * 1e6 / connections,
        }
    }
}

/// Median of `values` (upper median for an even count); 0 when empty.
fn median<T: Copy + PartialOrd>(mut values: Vec<T>, zero: T) -> T {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    values.get(values.len() / 2).copied().unwrap_or(zero)
}

/// One [`Metrics`] per (mode, N), each field the median over that point's repetitions, in
/// the order the points were first measured.
fn median_metrics(points: &[PointResult]) -> Vec<Metrics> {
    let mut keys: Vec<(Mode, usize)> = Vec::new();
    for point in points {
        if !keys.contains(&(point.mode, point.workers)) {
            keys.push((point.mode, point.workers));
        }
    }
    keys.sort_by_key(|&(mode, workers)| {
        (
            workers,
            Mode::ALL.iter().position(|&m| m == mode).unwrap_or(0),
        )
    });
    keys.into_iter()
        .map(|(mode, workers)| {
            let runs: Vec<Metrics> = points
                .iter()
                .filter(|p| p.mode == mode && p.workers == workers)
                .map(Metrics::of)
                .collect();
            let f = |field: fn(&Metrics) -> f64| median(runs.iter().map(field).collect(), 0.0);
            let n = |field: fn(&Metrics) -> u64| median(runs.iter().map(field).collect(), 0);
            Metrics {
                mode,
                workers,
                returns_per_connection: f(|m| m.returns_per_connection),
                wasted_per_connection: f(|m| m.wasted_per_connection),
                sleeps_per_connection: f(|m| m.sleeps_per_connection),
                jain_index: f(|m| m.jain_index),
                min_accepted: n(|m| m.min_accepted),
                max_accepted: n(|m| m.max_accepted),
                connections_per_second: f(|m| m.connections_per_second),
                cpu_microseconds_per_connection: f(|m| m.cpu_microseconds_per_connection),
            }
        })
        .collect()
}

/// Jain's fairness index of the shares: 1 when equal, 1/n when one takes everything.
fn jain_index(shares: &[f64]) -> f64 {
    let sum: f64 = shares.iter().sum();
    let squares: f64 = shares.iter().map(|share| share * share).sum();
    if squares == 0.0 {
        return 0.0;
    }
    sum * sum / (shares.len() as f64 * squares)
}

/// Log scale when the positive values span a decade or more.
fn scale_for(values: impl Iterator<Item = f64>) -> Scale {
    let (mut low, mut high) = (f64::INFINITY, 0.0f64);
    for value in values {
        if value <= 0.0 {
            return Scale::Linear;
        }
        low = low.min(value);
        high = high.max(value);
    }
    if high >= 10.0 * low {
        Scale::Log
    } else {
        Scale::Linear
    }
}

fn figure(
    metrics: &[Metrics],
    id: &str,
    title: &str,
    y: (&str, &str),
    value: fn(&Metrics) -> f64,
    caption: &str,
    forced_scale: Option<Scale>,
) -> Figure {
    let series: Vec<Series> = Mode::ALL
        .iter()
        .map(|&mode| Series {
            name: mode.label().to_owned(),
            points: metrics
                .iter()
                .filter(|m| m.mode == mode)
                .map(|m| Point {
                    x: m.workers as f64,
                    y: value(m),
                })
                .collect(),
        })
        .collect();
    let y_scale = forced_scale.unwrap_or_else(|| scale_for(metrics.iter().map(value)));
    Figure {
        id: id.to_owned(),
        title: title.to_owned(),
        reproduces: Some(SEED_FIGURE.to_owned()),
        x: Axis {
            label: "worker threads N".to_owned(),
            unit: "threads".to_owned(),
            scale: scale_for(metrics.iter().map(|m| m.workers as f64)),
        },
        y: Axis {
            label: y.0.to_owned(),
            unit: y.1.to_owned(),
            scale: y_scale,
        },
        series,
        caption: Some(caption.to_owned()),
    }
}

fn figures(metrics: &[Metrics]) -> Vec<Figure> {
    vec![
        figure(
            metrics,
            "sleeps-per-connection",
            "Kernel wake-ups per accepted connection (worker sleeps)",
            (
                "voluntary context switches of the workers per connection",
                "",
            ),
            |m| m.sleeps_per_connection,
            "One per connection is wake-one; N per connection is the thundering herd. Counts \
             wake-ups that never returned to user space too.",
            None,
        ),
        figure(
            metrics,
            "returns-per-connection",
            "Returns from accept()/epoll_wait() per accepted connection",
            ("returns per connection", ""),
            |m| m.returns_per_connection,
            "Every return above one per connection found nothing to accept (EAGAIN).",
            None,
        ),
        figure(
            metrics,
            "accept-spread",
            "How evenly the workers shared the connections (Jain's fairness index)",
            (
                "Jain's index of accepts per worker (1 = equal, 1/N = one worker)",
                "",
            ),
            |m| m.jain_index,
            "Wake-one does not promise fairness: see which modes hand most connections to \
             a few workers.",
            Some(Scale::Linear),
        ),
        figure(
            metrics,
            "cpu-per-connection",
            "CPU time per accepted connection (workers and client)",
            ("process CPU time (user + system) per connection", "µs"),
            |m| m.cpu_microseconds_per_connection,
            "What the herd costs in cycles; less sensitive than the rate to other work on a \
             shared machine.",
            None,
        ),
        figure(
            metrics,
            "throughput",
            "Connections accepted per second",
            ("accepted connections", "connections/s"),
            |m| m.connections_per_second,
            "Connect, accept, close with one connection in flight per client thread.",
            None,
        ),
    ]
}

fn table(metrics: &[Metrics]) -> Table {
    Table {
        title: "Per mode and N: wake-ups, spread and rate (medians over the repetitions)"
            .to_owned(),
        columns: [
            "mode",
            "N",
            "sleeps/conn",
            "returns/conn",
            "wasted/conn",
            "Jain index",
            "min..max accepts/worker",
            "CPU µs/conn",
            "conn/s",
        ]
        .map(str::to_owned)
        .to_vec(),
        rows: metrics
            .iter()
            .map(|m| {
                vec![
                    m.mode.label().to_owned(),
                    m.workers.to_string(),
                    format!("{:.2}", m.sleeps_per_connection),
                    format!("{:.2}", m.returns_per_connection),
                    format!("{:.2}", m.wasted_per_connection),
                    format!("{:.3}", m.jain_index),
                    format!("{}..{}", m.min_accepted, m.max_accepted),
                    format!("{:.1}", m.cpu_microseconds_per_connection),
                    format!("{:.0}", m.connections_per_second),
                ]
            })
            .collect(),
    }
}

/// The points of `mode` at the smallest and the largest N.
fn ends(metrics: &[Metrics], mode: Mode) -> Option<(Metrics, Metrics)> {
    let mut of_mode = metrics.iter().filter(|m| m.mode == mode);
    let first = *of_mode.next()?;
    let last = *of_mode.next_back().unwrap_or(&first);
    Some((first, last))
}

fn verdict(first: &Metrics, last: &Metrics) -> &'static str {
    if last.sleeps_per_connection <= WAKE_ONE_LIMIT {
        "about one wake-up per connection whatever N: wake-one"
    } else if last.sleeps_per_connection >= 2.0 * first.sleeps_per_connection {
        "wake-ups grow with N: a thundering herd"
    } else {
        "more than one wake-up per connection, but not growing with N"
    }
}

fn findings(metrics: &[Metrics]) -> Vec<String> {
    let mut findings = Vec::new();
    for mode in Mode::ALL {
        let Some((first, last)) = ends(metrics, mode) else {
            continue;
        };
        findings.push(format!(
            "{}: {:.2} worker sleeps per connection at N={} and {:.2} at N={} ({}); at N={} \
             {:.2} returns per connection ({:.2} wasted), Jain index {:.3}, {:.1} µs of CPU and \
             {:.0} connections/s.",
            mode.label(),
            first.sleeps_per_connection,
            first.workers,
            last.sleeps_per_connection,
            last.workers,
            verdict(&first, &last),
            last.workers,
            last.returns_per_connection,
            last.wasted_per_connection,
            last.jain_index,
            last.cpu_microseconds_per_connection,
            last.connections_per_second,
        ));
    }
    if let (Some((_, shared)), Some((_, exclusive))) = (
        ends(metrics, Mode::EpollShared),
        ends(metrics, Mode::EpollExclusive),
    ) {
        findings.push(format!(
            "At N={}, EPOLLEXCLUSIVE cut worker wake-ups per connection from {:.2} to {:.2} \
             ({:.1}x fewer), CPU per connection from {:.1} to {:.1} µs ({:.2}x), and changed \
             the connection rate by {:.2}x.",
            shared.workers,
            shared.sleeps_per_connection,
            exclusive.sleeps_per_connection,
            shared.sleeps_per_connection / exclusive.sleeps_per_connection.max(1e-9),
            shared.cpu_microseconds_per_connection,
            exclusive.cpu_microseconds_per_connection,
            shared.cpu_microseconds_per_connection
                / exclusive.cpu_microseconds_per_connection.max(1e-9),
            exclusive.connections_per_second / shared.connections_per_second.max(1e-9),
        ));
    }
    let largest = metrics.iter().map(|m| m.workers).max().unwrap_or(0);
    let at_largest = metrics
        .iter()
        .filter(|m| m.workers == largest && largest > 1);
    let most_even = at_largest
        .clone()
        .max_by(|a, b| a.jain_index.total_cmp(&b.jain_index));
    let least_even = at_largest.min_by(|a, b| a.jain_index.total_cmp(&b.jain_index));
    if let (Some(most), Some(least)) = (most_even, least_even) {
        findings.push(format!(
            "Spread at N={largest}: {} shared connections most evenly (Jain {:.3}, {}..{} \
             per worker); {} least (Jain {:.3}: its busiest worker took {} and the idlest {}).",
            most.mode.label(),
            most.jain_index,
            most.min_accepted,
            most.max_accepted,
            least.mode.label(),
            least.jain_index,
            least.max_accepted,
            least.min_accepted,
        ));
    }
    findings
}

fn seed_comparison(metrics: &[Metrics], kernel: &str) -> Vec<String> {
    let kernel = if kernel.is_empty() {
        "this kernel"
    } else {
        kernel
    };
    let mut lines = vec![
        "Seed 004 (Linux 2.2.9): each connection woke every thread blocked in accept() and \
         all but one went back to sleep, so the cost of one accept grew with the number of \
         threads; with the wake-one or task-exclusive patch it was constant, and a web server \
         gained just over 50% throughput."
            .to_owned(),
    ];
    let sentence = |mode: Mode, what: &str| {
        ends(metrics, mode).map(|(first, last)| {
            format!(
                "{what} on {kernel}: {:.2} wake-ups per connection at N={}, {:.2} at N={} — {}.",
                first.sleeps_per_connection,
                first.workers,
                last.sleeps_per_connection,
                last.workers,
                verdict(&first, &last),
            )
        })
    };
    lines.extend(sentence(
        Mode::BlockingAccept,
        "The seed's own case, N threads blocking in accept()",
    ));
    lines.extend(sentence(
        Mode::EpollShared,
        "The same listener watched by N level-triggered epoll instances (the seed's \
         wake-all wait queue, moved to epoll)",
    ));
    lines.extend(sentence(
        Mode::EpollExclusive,
        "With EPOLLEXCLUSIVE (Linux 4.5, today's task-exclusive wait for epoll)",
    ));
    lines.extend(sentence(
        Mode::ReusePort,
        "With one SO_REUSEPORT listener per thread (no shared wait queue at all)",
    ));
    if let (Some((_, shared)), Some((_, exclusive))) = (
        ends(metrics, Mode::EpollShared),
        ends(metrics, Mode::EpollExclusive),
    ) {
        lines.push(format!(
            "The seed's throughput gain: at N={} exclusive wake-ups used {:.2}x less CPU per \
             connection than the herd and accepted {:.2}x the connections per second (seed \
             004: about 1.5x on SPECweb99 with Apache); here the client shares the machine's \
             cores, so both numbers include the client.",
            shared.workers,
            shared.cpu_microseconds_per_connection
                / exclusive.cpu_microseconds_per_connection.max(1e-9),
            exclusive.connections_per_second / shared.connections_per_second.max(1e-9),
        ));
    }
    lines
}

/// The record of a run that measured `points`.
pub(super) fn record(
    context: &RunContext,
    parameters: serde_json::Value,
    points: &[PointResult],
    raw_files: Vec<String>,
) -> ExperimentRecord {
    let metrics = median_metrics(points);
    let mut warnings = Vec::new();
    let timeouts: u64 = points
        .iter()
        .flat_map(|point| &point.per_worker)
        .map(|counts| counts.timeouts)
        .sum();
    if timeouts > 0 {
        warnings.push(format!(
            "{timeouts} waits ended by the 2 s backstop timeout instead of a connection or the \
             stop signal (not counted as wake-ups, but their sleeps are)"
        ));
    }
    ExperimentRecord {
        schema_version: RECORD_SCHEMA_VERSION,
        experiment: NAME.to_owned(),
        title: "accept() thundering herd: wake-ups per connection with N waiting threads"
            .to_owned(),
        reproduces: vec![SEED_FIGURE.to_owned()],
        description: "In one process, N worker threads wait for connections on 127.0.0.1 in \
            four ways: blocking accept() on one listener; one epoll instance per thread \
            watching the shared non-blocking listener, level-triggered, without and with \
            EPOLLEXCLUSIVE (then one accept() per return); one SO_REUSEPORT listener per \
            thread with blocking accept(). Client threads connect a fixed number of times, \
            each waiting for the server to close (SO_LINGER 0) its connection before the next. \
            Each worker counts its returns from accept()/epoll_wait() (a return whose accept() \
            gets EAGAIN is wasted) and its voluntary context switches (getrusage \
            RUSAGE_THREAD), which count the kernel's wake-ups including those that never \
            reach user space; each worker's count includes one final wake-up for the stop \
            signal. Threads are not pinned; the machine has few cores and was shared with \
            other work."
            .to_owned(),
        command: context.command.clone(),
        quick: context.quick,
        commit: None,
        started_unix_seconds: 0.0,
        duration_seconds: 0.0,
        machine: context.machine.clone(),
        parameters,
        figures: figures(&metrics),
        tables: vec![table(&metrics)],
        findings: findings(&metrics),
        seed_comparison: seed_comparison(&metrics, &context.machine.kernel),
        raw_files,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_index_is_one_for_equal_shares_and_one_over_n_for_one_taker() {
        assert!((jain_index(&[5.0, 5.0, 5.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((jain_index(&[20.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
    }

    #[test]
    fn log_scale_only_when_values_span_a_decade() {
        assert_eq!(scale_for([1.0, 2.0, 9.0].into_iter()), Scale::Linear);
        assert_eq!(scale_for([1.0, 32.0].into_iter()), Scale::Log);
        assert_eq!(scale_for([0.0, 32.0].into_iter()), Scale::Linear);
    }
}
