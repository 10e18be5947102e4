//! The `connections-latency` experiment (seed 001 Fig. 2 and 3): throughput and server CPU
//! per request against the number of active (hot) connections, and against an emulated
//! round-trip time with a fixed, large number of connections.
//!
//! Every point is a fresh `coldwire serve` (pinned to the server CPU) driven in a closed loop
//! by `coldwire bench` (pinned to the other CPU): each connection sends its next request as
//! soon as the previous response is complete — or, with `--rtt`, one round trip later (the
//! client-side delay stands in for a WAN; a relay that delays packets comes later).

use std::net::SocketAddr;
use std::time::Duration;

use coldwire_report::{ExperimentRecord, Scale, Table};
use serde::{Deserialize, Serialize};

use crate::RunContext;
use crate::figures::{
    axis, figure, format_percent, machine_load_warning, percent_change, series, short, thousands,
};
use crate::serve::{DocumentRoot, Pinning, ServerSetup, available_backends, measure};

/// The scenario's parameters (`experiments/connections-latency.toml`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Parameters {
    backends: Vec<String>,
    /// The file requested.
    file_bytes: u64,
    /// Active connection counts of the first sweep (no delay).
    connections: Vec<u64>,
    /// Emulated round-trip times of the second sweep, milliseconds.
    rtt_ms: Vec<f64>,
    /// Active connections during the round-trip sweep.
    rtt_connections: u64,
    warmup: f64,
    duration: f64,
    #[serde(default)]
    pinning: Option<Pinning>,
}

/// (x, requests/s, CPU µs per request, content Mbit/s).
type Point = (f64, f64, f64, f64);

/// Runs the experiment.
pub fn run(context: &RunContext) -> anyhow::Result<ExperimentRecord> {
    let parameters: Parameters = context.parameters()?;
    let (backends, mut warnings) = available_backends(&parameters.backends)?;
    warnings.extend(machine_load_warning());
    let pinning = parameters.pinning.unwrap_or_default();
    let root = DocumentRoot::create(&[parameters.file_bytes])?;
    let name = DocumentRoot::file_name(parameters.file_bytes);
    let mut raw_files = Vec::new();
    // by_connections[backend] and by_rtt[backend]: points.
    let mut by_connections: Vec<Vec<Point>> = vec![Vec::new(); backends.len()];
    let mut by_rtt: Vec<Vec<Point>> = vec![Vec::new(); backends.len()];
    let sweeps = sweeps(
        &parameters.connections,
        &parameters.rtt_ms,
        parameters.rtt_connections,
    );
    for &(is_rtt, x, connections) in &sweeps {
        for (index, backend) in backends.iter().enumerate() {
            let rtt = if is_rtt { x } else { 0.0 };
            context.progress(&format!(
                "{backend}: {connections} connections, round trip {rtt} ms"
            ));
            let bench_args = |server: SocketAddr| {
                vec![
                    format!("--url=http://{server}/{name}"),
                    "--rate=max".to_owned(),
                    format!("--connections={connections}"),
                    format!("--rtt={rtt}"),
                    format!("--warmup={}", parameters.warmup),
                    format!("--duration={}", parameters.duration),
                ]
            };
            let stem = if is_rtt {
                format!("{backend}-rtt{rtt}ms-{connections}conn")
            } else {
                format!("{backend}-{connections}conn")
            };
            let timeout =
                Duration::from_secs_f64(60.0 + 2.0 * (parameters.warmup + parameters.duration));
            let setup = ServerSetup {
                root: root.path(),
                backend,
                extra: &[],
                pinning,
            };
            let outcome = measure(context, &setup, &bench_args, &stem, timeout);
            let Some(document) = context.keep(&stem, &stem, outcome, &mut raw_files, &mut warnings)
            else {
                continue;
            };
            let phase = document.phase()?;
            if phase.errors_total > 0 {
                warnings.push(format!("{stem}: {} requests failed", phase.errors_total));
            }
            let point = (
                x,
                phase.achieved_rate,
                phase
                    .server
                    .map_or(f64::NAN, |server| server.cpu_us_per_request),
                phase.achieved_rate * parameters.file_bytes as f64 * 8.0 / 1e6,
            );
            context.progress(&format!(
                "  {} requests/s, {} µs CPU/request",
                thousands(point.1),
                short(point.2)
            ));
            if is_rtt {
                by_rtt[index].push(point);
            } else {
                by_connections[index].push(point);
            }
        }
    }
    anyhow::ensure!(
        by_connections
            .iter()
            .chain(&by_rtt)
            .any(|points| !points.is_empty()),
        "no point could be measured: {}",
        warnings.join("; ")
    );
    let mut record = context.record(
        "Throughput and CPU per request vs active connections and round-trip time",
        &["seed 001, Fig. 2", "seed 001, Fig. 3"],
        format!(
            "For each backend ({}), a fresh coldwire serve (one worker{}) answered GET /{name} ({} bytes) to \
             coldwire bench in a closed loop: first on {} active keep-alive connections with no delay, then on {} \
             connections with an emulated round-trip time of {} ms (each connection rests that long after every \
             response before its next request). {} s warm-up and {} s measured per point.",
            backends.join(", "),
            pinning.server_cpu.map_or(String::new(), |cpu| format!(", CPU {cpu}")),
            parameters.file_bytes,
            parameters.connections.iter().map(|count| thousands(*count as f64)).collect::<Vec<_>>().join(", "),
            thousands(parameters.rtt_connections as f64),
            parameters.rtt_ms.iter().map(|rtt| rtt.to_string()).collect::<Vec<_>>().join(", "),
            parameters.warmup,
            parameters.duration
        ),
    );
    let mut used = parameters.clone();
    used.pinning = Some(pinning);
    record.parameters = serde_json::to_value(&used)?;
    record.raw_files = raw_files;
    let lines = |points: &[Vec<Point>], pick: fn(&Point) -> f64| {
        backends
            .iter()
            .zip(points)
            .map(|(backend, points)| {
                series(backend, points.iter().map(|point| (point.0, pick(point))))
            })
            .collect::<Vec<_>>()
    };
    let connections_axis = || axis("active connections", "", Scale::Log);
    let rtt_axis = || axis("emulated round-trip time", "ms", Scale::Linear);
    record.figures = vec![
        figure(
            "throughput-vs-connections",
            "Throughput vs active connections",
            Some("seed 001, Fig. 2"),
            connections_axis(),
            axis("throughput", "requests/s", Scale::Linear),
            lines(&by_connections, |point| point.1),
            "Seed 001: throughput first rises quickly with connections, then falls slowly.",
        ),
        figure(
            "cpu-vs-connections",
            "Server CPU per request vs active connections",
            None,
            connections_axis(),
            axis("server CPU per request", "µs", Scale::Log),
            lines(&by_connections, |point| point.2),
            "",
        ),
        figure(
            "throughput-vs-rtt",
            &format!(
                "Throughput vs round-trip time, {} connections",
                thousands(parameters.rtt_connections as f64)
            ),
            Some("seed 001, Fig. 3"),
            rtt_axis(),
            axis("throughput", "requests/s", Scale::Log),
            lines(&by_rtt, |point| point.1),
            "With a round trip per request, each connection carries at most one request per round trip.",
        ),
        figure(
            "cpu-vs-rtt",
            "Server CPU per request vs round-trip time",
            None,
            rtt_axis(),
            axis("server CPU per request", "µs", Scale::Log),
            lines(&by_rtt, |point| point.2),
            "Seed 001: cost per request grows with latency (fewer requests per wake-up, more cache misses).",
        ),
    ];
    let mut rows = Vec::new();
    for (index, backend) in backends.iter().enumerate() {
        let peak = by_connections[index]
            .iter()
            .copied()
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let (Some(peak), Some(last)) = (peak, by_connections[index].last()) {
            if peak.0 == last.0 {
                record.findings.push(format!(
                    "{backend}: throughput still rises at the largest count measured, {} requests/s with {} \
                     connections (CPU per request {} µs).",
                    thousands(last.1),
                    thousands(last.0),
                    short(last.2)
                ));
            } else {
                record.findings.push(format!(
                    "{backend}: throughput peaks at {} requests/s with {} connections and is {} requests/s \
                     with {} ({} from the peak); CPU per request {} µs at the peak, {} µs at {} connections.",
                    thousands(peak.1),
                    thousands(peak.0),
                    thousands(last.1),
                    thousands(last.0),
                    format_percent(percent_change(peak.1, last.1)),
                    short(peak.2),
                    short(last.2),
                    thousands(last.0)
                ));
            }
            rows.push(vec![
                backend.clone(),
                format!("{} at {}", thousands(peak.1), thousands(peak.0)),
                format!("{} at {}", thousands(last.1), thousands(last.0)),
                by_rtt[index].first().map_or("n/a".into(), |point| {
                    format!("{} at {} ms", thousands(point.1), point.0)
                }),
                by_rtt[index].last().map_or("n/a".into(), |point| {
                    format!("{} at {} ms", thousands(point.1), point.0)
                }),
            ]);
        }
        if let (Some(first), Some(last)) = (by_rtt[index].first(), by_rtt[index].last())
            && last.0 > first.0
        {
            let bound = parameters.rtt_connections as f64 / (last.0 / 1000.0);
            record.findings.push(format!(
                "{backend}: with {} connections, throughput goes from {} requests/s at {} ms to {} at {} ms \
                 (the round trip alone allows at most {}); CPU per request {} → {} µs ({}).",
                thousands(parameters.rtt_connections as f64),
                thousands(first.1),
                first.0,
                thousands(last.1),
                last.0,
                thousands(bound),
                short(first.2),
                short(last.2),
                format_percent(percent_change(first.2, last.2))
            ));
        }
    }
    record.tables.push(Table {
        title: "Throughput (requests/s)".into(),
        columns: vec![
            "backend".into(),
            "peak vs connections".into(),
            "at most connections".into(),
            "lowest round trip".into(),
            "highest round trip".into(),
        ],
        rows,
    });
    record.seed_comparison.push(
        "Seed 001 (Flash on FreeBSD, four web traces): throughput rose quickly with connections and then fell \
         slowly, and fell as network latency grew with 2,048 connections; the findings above give this run's \
         peak, its fall beyond it, and the fall with round-trip time, computed from the points plotted."
            .to_owned(),
    );
    record.warnings = warnings;
    Ok(record)
}

/// The points of the two sweeps of seed 001 (also network-cost's), in order: each
/// connection count with no added latency, then each round-trip time (ms) with
/// `rtt_connections` connections, as `(is_rtt, x, connections)`.
pub(crate) fn sweeps(
    connections: &[u64],
    rtt_ms: &[f64],
    rtt_connections: u64,
) -> Vec<(bool, f64, u64)> {
    connections
        .iter()
        .map(|&connections| (false, connections as f64, connections))
        .chain(rtt_ms.iter().map(|&rtt| (true, rtt, rtt_connections)))
        .collect()
}
