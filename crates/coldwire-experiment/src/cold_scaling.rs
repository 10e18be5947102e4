//! The `cold-scaling` experiment (seed 000 Fig. 1 and 9, seed 002 Fig. 4): for every
//! backend, idle ("cold") connections from 0 to about 15,000 held open while hot keep-alive
//! connections drive `coldwire serve` (one worker) as hard as they can (closed loop):
//! saturation throughput, server CPU per request, system calls per request and events per
//! wait, each against the number of cold connections.
//!
//! Every point is a fresh server (pinned to the server CPU) and one `coldwire bench` run
//! (pinned to the generator CPU) that opens the cold connections, warms up and measures.
//! Points run cold count by cold count, the backends interleaved, so machine noise hits
//! them alike; with `rounds` > 1 each point is the median of its rounds.

use std::net::SocketAddr;
use std::time::Duration;

use coldwire_report::{ExperimentRecord, Scale, Table};
use serde::Deserialize;

use crate::RunContext;
use crate::bench_result::BenchDocument;
use crate::figures::{
    axis, figure, format_percent, machine_load_warning, median, percent_change, series, short,
    thousands,
};
use crate::serve::{DocumentRoot, Pinning, ServerSetup, available_backends, measure};

/// The scenario's parameters (`experiments/cold-scaling.toml`).
#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct Parameters {
    /// Backends, in plotting order.
    backends: Vec<String>,
    /// Cold connection counts (the first should be 0: changes are relative to it).
    cold: Vec<u64>,
    /// Size of the one file requested (seed 000: 1,259 bytes).
    file_bytes: u64,
    /// Hot keep-alive connections of the closed loop.
    connections: u64,
    /// Seconds of load before measuring.
    warmup: f64,
    /// Measured seconds.
    duration: f64,
    /// Cold connections opened per second.
    cold_rate: f64,
    /// Seconds a connect (cold or hot) or a request may take before it counts as failed
    /// (a server scanning 15,000 descriptors per wait accepts slowly).
    #[serde(default = "ten")]
    timeout: f64,
    /// Also measure the server's CPU at this fixed, open-loop rate (requests/s) at every
    /// point, with the same cold connections: seed 002 Fig. 4 and seed 000 Fig. 1 measured
    /// CPU at a fixed, low rate (100 requests/s). Off when absent.
    #[serde(default)]
    fixed_rate: Option<f64>,
    /// Measured seconds of the fixed-rate run (default: `duration`).
    #[serde(default)]
    fixed_duration: Option<f64>,
    /// Repetitions of the whole grid (each point: the median).
    #[serde(default = "one")]
    rounds: u64,
    /// Where the server and generator run (default CPU 0 and CPU 1).
    #[serde(default)]
    pinning: Option<Pinning>,
}

fn one() -> u64 {
    1
}

fn ten() -> f64 {
    10.0
}

/// One measured point (medians over rounds).
#[derive(Clone, Copy, Debug)]
struct PointResult {
    cold: u64,
    throughput: f64,
    cpu_us_per_request: f64,
    syscalls_per_request: f64,
    events_per_wait: f64,
    server_cores: f64,
    /// Server CPU at the fixed rate, percent of one core (NaN when not measured).
    fixed_cpu_percent: f64,
}

/// The load of one bench run: closed loop (`None`) or a fixed open-loop rate, for
/// `duration` measured seconds.
#[derive(Clone, Copy)]
struct Load {
    rate: Option<f64>,
    duration: f64,
}

fn measure_once(
    context: &RunContext,
    parameters: &Parameters,
    setup: &ServerSetup<'_>,
    cold: u64,
    load: Load,
    stem: &str,
) -> anyhow::Result<(BenchDocument, String)> {
    let file = DocumentRoot::file_name(parameters.file_bytes);
    let bench_args = |server: SocketAddr| {
        vec![
            format!("--url=http://{server}/{file}"),
            load.rate
                .map_or("--rate=max".to_owned(), |rate| format!("--rate={rate}")),
            format!("--connections={}", parameters.connections),
            format!("--cold={cold}"),
            format!("--cold-rate={}", parameters.cold_rate),
            format!("--timeout={}", parameters.timeout),
            format!("--warmup={}", parameters.warmup),
            format!("--duration={}", load.duration),
        ]
    };
    let opening = cold as f64 / parameters.cold_rate;
    let timeout = Duration::from_secs_f64(
        60.0 + 2.0 * (opening + parameters.timeout + parameters.warmup + load.duration),
    );
    measure(context, setup, &bench_args, stem, timeout)
}

/// Runs the experiment.
pub fn run(context: &RunContext) -> anyhow::Result<ExperimentRecord> {
    let parameters: Parameters = context.parameters()?;
    anyhow::ensure!(
        !parameters.cold.is_empty() && !parameters.backends.is_empty(),
        "the scenario needs at least one backend and one cold count"
    );
    let (backends, mut warnings) = available_backends(&parameters.backends)?;
    for warning in &warnings {
        context.progress(&format!("warning: {warning}"));
    }
    warnings.extend(machine_load_warning());
    let pinning = parameters.pinning.unwrap_or_default();
    let root = DocumentRoot::create(&[parameters.file_bytes])?;
    let mut raw_files = Vec::new();
    // samples[backend][cold index] = one PointResult per round.
    let mut samples: Vec<Vec<Vec<PointResult>>> =
        vec![vec![Vec::new(); parameters.cold.len()]; backends.len()];
    for round in 1..=parameters.rounds.max(1) {
        // Even rounds walk the cold counts backwards, so a drift in the machine's other
        // load over time does not line up with the cold count.
        let mut order: Vec<(usize, u64)> = parameters.cold.iter().copied().enumerate().collect();
        if round.is_multiple_of(2) {
            order.reverse();
        }
        for (cold_index, cold) in order {
            for (backend_index, backend) in backends.iter().enumerate() {
                context.progress(&format!(
                    "round {round}/{}: {backend}, {cold} cold connections",
                    parameters.rounds.max(1)
                ));
                let stem = format!("{backend}-{cold}-r{round}");
                let setup = ServerSetup {
                    root: root.path(),
                    backend,
                    extra: &[],
                    pinning,
                };
                let saturating = Load {
                    rate: None,
                    duration: parameters.duration,
                };
                let outcome = measure_once(context, &parameters, &setup, cold, saturating, &stem);
                let what = format!("{backend} with {cold} cold connections (round {round})");
                let Some(document) =
                    context.keep(&what, &stem, outcome, &mut raw_files, &mut warnings)
                else {
                    continue;
                };
                let phase = document.phase()?;
                let run = document.run()?;
                if run.cold.established < cold {
                    warnings.push(format!(
                        "{backend}, round {round}: only {} of {cold} cold connections were established",
                        run.cold.established
                    ));
                }
                if phase.errors_total > 0 {
                    warnings.push(format!(
                        "{backend}, {cold} cold, round {round}: {} requests failed",
                        phase.errors_total
                    ));
                }
                let counters = phase.server_counters.as_ref();
                let mut point = PointResult {
                    cold,
                    throughput: phase.achieved_rate,
                    cpu_us_per_request: phase
                        .server
                        .map_or(f64::NAN, |server| server.cpu_us_per_request),
                    syscalls_per_request: counters
                        .map_or(f64::NAN, |counters| counters.syscalls_per_request),
                    events_per_wait: counters.map_or(f64::NAN, |counters| counters.events_per_wait),
                    server_cores: phase.server.map_or(f64::NAN, |server| server.cpu_cores),
                    fixed_cpu_percent: f64::NAN,
                };
                if let Some(rate) = parameters.fixed_rate {
                    let fixed = Load {
                        rate: Some(rate),
                        duration: parameters.fixed_duration.unwrap_or(parameters.duration),
                    };
                    let fixed_stem = format!("{backend}-{cold}-at{rate}-r{round}");
                    match measure_once(context, &parameters, &setup, cold, fixed, &fixed_stem) {
                        Ok((document, raw)) => {
                            raw_files.push(raw);
                            raw_files.push(format!("raw/{fixed_stem}.txt"));
                            point.fixed_cpu_percent = document
                                .phase()?
                                .server
                                .map_or(f64::NAN, |server| server.cpu_cores * 100.0);
                        }
                        Err(error) => warnings.push(format!(
                            "{backend} with {cold} cold connections at {rate} requests/s (round {round}) failed: {error:#}"
                        )),
                    }
                }
                context.progress(&format!(
                    "  {} requests/s, {} µs CPU/request, {} syscalls/request, {} events/wait, server {} cores; {}% CPU at the fixed rate",
                    thousands(point.throughput),
                    short(point.cpu_us_per_request),
                    short(point.syscalls_per_request),
                    short(point.events_per_wait),
                    short(point.server_cores),
                    short(point.fixed_cpu_percent)
                ));
                samples[backend_index][cold_index].push(point);
            }
        }
    }
    let results: Vec<Vec<PointResult>> = samples
        .iter()
        .map(|per_cold| {
            per_cold
                .iter()
                .filter(|rounds| !rounds.is_empty())
                .map(|rounds| {
                    let of = |field: fn(&PointResult) -> f64| {
                        median(&rounds.iter().map(field).collect::<Vec<_>>())
                    };
                    PointResult {
                        cold: rounds[0].cold,
                        throughput: of(|point| point.throughput),
                        cpu_us_per_request: of(|point| point.cpu_us_per_request),
                        syscalls_per_request: of(|point| point.syscalls_per_request),
                        events_per_wait: of(|point| point.events_per_wait),
                        server_cores: of(|point| point.server_cores),
                        fixed_cpu_percent: of(|point| point.fixed_cpu_percent),
                    }
                })
                .collect()
        })
        .collect();
    anyhow::ensure!(
        results.iter().any(|points| !points.is_empty()),
        "no point could be measured: {}",
        warnings.join("; ")
    );
    let mut record = context.record(
        "Throughput and cost vs cold connections, per backend",
        &["seed 000, Fig. 1", "seed 000, Fig. 9", "seed 002, Fig. 4"],
        format!(
            "For each backend ({}), coldwire serve (one worker{}) answered GET /{} ({} bytes) on {} \
             hot keep-alive connections driven in a closed loop by coldwire bench{}, while {} idle cold \
             connections were held open (opened at {}/s before measuring). Each point: a fresh server, \
             {} s warm-up, {} s measured, {} round(s) (median). Throughput is the saturation throughput \
             (closed loop); CPU per request is the server's on-CPU time (all threads, schedstat); system \
             calls and events per wait come from the server's own counters.",
            backends.join(", "),
            pinning.server_cpu.map_or(String::new(), |cpu| format!(", pinned to CPU {cpu}")),
            DocumentRoot::file_name(parameters.file_bytes),
            parameters.file_bytes,
            parameters.connections,
            pinning.generator_cpu.map_or(String::new(), |cpu| format!(" (pinned to CPU {cpu})")),
            parameters
                .cold
                .iter()
                .map(|cold| thousands(*cold as f64))
                .collect::<Vec<_>>()
                .join(", "),
            thousands(parameters.cold_rate),
            parameters.warmup,
            parameters.duration,
            parameters.rounds.max(1)
        ),
    );
    let mut used = parameters.clone();
    used.pinning = Some(pinning);
    record.parameters = serde_json::to_value(&used)?;
    record.raw_files = raw_files;
    let per_backend = |field: fn(&PointResult) -> f64| {
        backends
            .iter()
            .zip(&results)
            .map(|(backend, points)| {
                series(
                    backend,
                    points.iter().map(|point| (point.cold as f64, field(point))),
                )
            })
            .collect::<Vec<_>>()
    };
    let cold_axis = || axis("cold connections", "", Scale::Linear);
    record.figures = vec![
        figure(
            "throughput",
            "Saturation throughput vs cold connections",
            Some("seed 000, Fig. 9"),
            cold_axis(),
            axis("throughput", "requests/s", Scale::Linear),
            per_backend(|point| point.throughput),
            "A flat line: the backend's cost does not grow with idle connections.",
        ),
        figure(
            "cpu-per-request",
            "Server CPU per request at saturation vs cold connections",
            None,
            cold_axis(),
            axis("server CPU per request", "µs", Scale::Log),
            per_backend(|point| point.cpu_us_per_request),
            "Work per request that grows with idle connections (select and poll scan every descriptor per wait).",
        ),
        figure(
            "syscalls-per-request",
            "System calls per request vs cold connections",
            None,
            cold_axis(),
            axis("system calls per request", "", Scale::Linear),
            per_backend(|point| point.syscalls_per_request),
            "",
        ),
        figure(
            "events-per-wait",
            "Events per wait vs cold connections",
            Some("seed 000, Fig. 1"),
            cold_axis(),
            axis("events per wait", "", Scale::Log),
            per_backend(|point| point.events_per_wait),
            "Seed 000: as each select() gets costlier, calls thin out and each returns more events, amortising its cost.",
        ),
    ];
    if let Some(rate) = parameters.fixed_rate {
        record.description.push_str(&format!(
            " At every point a second run, with the same cold connections, offered a constant {} requests/s \
             (open loop) for {} s: the server's CPU at a fixed load.",
            thousands(rate),
            parameters.fixed_duration.unwrap_or(parameters.duration)
        ));
        record.figures.push(figure(
            "cpu-at-fixed-rate",
            &format!("Server CPU at {} requests/s vs cold connections", thousands(rate)),
            Some("seed 002, Fig. 4"),
            cold_axis(),
            axis("server CPU", "% of one core", Scale::Linear),
            per_backend(|point| point.fixed_cpu_percent),
            "The same offered load for every point: what grows is the cost of the idle connections.",
        ));
        for (backend, points) in backends.iter().zip(&results) {
            if let (Some(first), Some(last)) = (points.first(), points.last())
                && last.cold > first.cold
                && first.fixed_cpu_percent.is_finite()
            {
                record.findings.push(format!(
                    "{backend} at {} requests/s: server CPU {}% of a core with {} cold connections, {}% with {}.",
                    thousands(rate),
                    short(first.fixed_cpu_percent),
                    thousands(first.cold as f64),
                    short(last.fixed_cpu_percent),
                    thousands(last.cold as f64)
                ));
            }
        }
    }
    summarise(&mut record, &backends, &results, &mut warnings);
    record.warnings = warnings;
    Ok(record)
}

/// The change of `field` from the first point (0 cold) to the point at `cold` (or the
/// largest count at most `cold`).
fn change_to(
    points: &[PointResult],
    cold: u64,
    field: fn(&PointResult) -> f64,
) -> Option<(u64, f64)> {
    let first = points.first()?;
    let last = points.iter().rev().find(|point| point.cold <= cold)?;
    (last.cold > first.cold)
        .then(|| percent_change(field(first), field(last)).map(|change| (last.cold, change)))
        .flatten()
}

/// The seed's comparison point: Fig. 9 goes from 0 to 2,000 cold connections.
const SEED_COLD: u64 = 2000;

fn summarise(
    record: &mut ExperimentRecord,
    backends: &[String],
    results: &[Vec<PointResult>],
    warnings: &mut Vec<String>,
) {
    let mut rows = Vec::new();
    for (backend, points) in backends.iter().zip(results) {
        let (Some(first), Some(last)) = (points.first(), points.last()) else {
            continue;
        };
        let throughput = |point: &PointResult| point.throughput;
        let to_seed = change_to(points, SEED_COLD, throughput);
        let to_max = change_to(points, u64::MAX, throughput);
        rows.push(vec![
            backend.clone(),
            thousands(first.throughput),
            thousands(last.throughput),
            to_seed.map_or("n/a".into(), |(cold, change)| {
                format!(
                    "{} (0→{})",
                    format_percent(Some(change)),
                    thousands(cold as f64)
                )
            }),
            format_percent(to_max.map(|(_, change)| change)),
            format!(
                "{} → {}",
                short(first.cpu_us_per_request),
                short(last.cpu_us_per_request)
            ),
            format!(
                "{} → {}",
                short(first.syscalls_per_request),
                short(last.syscalls_per_request)
            ),
            format!(
                "{} → {}",
                short(first.events_per_wait),
                short(last.events_per_wait)
            ),
        ]);
        if last.cold > first.cold {
            record.findings.push(format!(
                "{backend}: {} → {} requests/s ({}) from {} to {} cold connections; server CPU per request {} → {} µs ({}).",
                thousands(first.throughput),
                thousands(last.throughput),
                format_percent(percent_change(first.throughput, last.throughput)),
                thousands(first.cold as f64),
                thousands(last.cold as f64),
                short(first.cpu_us_per_request),
                short(last.cpu_us_per_request),
                format_percent(percent_change(first.cpu_us_per_request, last.cpu_us_per_request)),
            ));
        }
        if first.server_cores.is_finite() && first.server_cores < 0.85 {
            warnings.push(format!(
                "{backend}: with {} cold connections the server used only {:.2} of its core — the generator \
                 (or other work on the machine) set the pace there, so the throughput change understates the \
                 server's own cost: read CPU per request",
                thousands(first.cold as f64),
                first.server_cores
            ));
        }
    }
    let last_cold = results
        .iter()
        .filter_map(|points| points.last().map(|point| point.cold))
        .max()
        .unwrap_or(0);
    record.tables.push(Table {
        title: "Saturation throughput and cost per request, first vs last cold count".into(),
        columns: vec![
            "backend".into(),
            "requests/s at 0 cold".into(),
            format!("requests/s at {} cold", thousands(last_cold as f64)),
            "change 0→2,000 (seed's range)".into(),
            format!("change 0→{}", thousands(last_cold as f64)),
            "CPU µs/request".into(),
            "syscalls/request".into(),
            "events/wait".into(),
        ],
        rows,
    });
    let changes: Vec<String> = backends
        .iter()
        .zip(results)
        .filter_map(|(backend, points)| {
            let (cold, change) = change_to(points, SEED_COLD, |point| point.throughput)?;
            Some(format!(
                "{backend} {} (0→{})",
                format_percent(Some(change)),
                thousands(cold as f64)
            ))
        })
        .collect();
    record.seed_comparison.push(format!(
        "Seed 000 (Fig. 9, Squid on Digital UNIX, 1998): throughput fell 44% from 0 to 2,000 cold connections \
         with the original select() and ufalloc(), and only 14% with the scalable versions of both. Here, over \
         the same range: {}.",
        if changes.is_empty() {
            "not measured (no cold count above 0 up to 2,000)".to_owned()
        } else {
            changes.join(", ")
        }
    ));
    let worst = backends
        .iter()
        .zip(results)
        .filter_map(|(backend, points)| {
            change_to(points, u64::MAX, |point| point.throughput)
                .map(|(cold, change)| (backend, cold, change))
        })
        .min_by(|a, b| a.2.total_cmp(&b.2));
    if let Some((backend, cold, change)) = worst {
        record.seed_comparison.push(format!(
            "Over this machine's whole range (0→{} cold connections), the backend that lost most throughput is \
             {backend} ({}); seed 000 measured only up to 2,000 and attributed the 14% that remained to \
             select()'s interface itself, which epoll and io_uring do not have.",
            thousands(cold as f64),
            format_percent(Some(change))
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(cold: u64, throughput: f64) -> PointResult {
        PointResult {
            cold,
            throughput,
            cpu_us_per_request: 1e6 / throughput,
            syscalls_per_request: 2.0,
            events_per_wait: 10.0,
            server_cores: 1.0,
            fixed_cpu_percent: f64::NAN,
        }
    }

    #[test]
    fn changes_are_computed_from_the_points_for_the_seed_range_and_the_whole_range() {
        let select = vec![point(0, 1000.0), point(2000, 500.0), point(15000, 100.0)];
        assert_eq!(
            change_to(&select, SEED_COLD, |p| p.throughput),
            Some((2000, -50.0))
        );
        assert_eq!(
            change_to(&select, u64::MAX, |p| p.throughput),
            Some((15000, -90.0))
        );
        assert_eq!(change_to(&select[..1], u64::MAX, |p| p.throughput), None);

        let epoll = vec![point(0, 1000.0), point(1000, 990.0), point(15000, 950.0)];
        let context = RunContext {
            name: "cold-scaling".into(),
            coldwire: "coldwire".into(),
            dir: ".".into(),
            scenario: serde_json::Value::Null,
            quick: false,
            install_peers: false,
            machine: Default::default(),
            command: Vec::new(),
        };
        let mut record = context.record("t", &[], String::new());
        let mut warnings = Vec::new();
        summarise(
            &mut record,
            &["select".into(), "epoll".into()],
            &[select, epoll],
            &mut warnings,
        );
        let comparison = record.seed_comparison.join(" ");
        assert!(comparison.contains("select −50% (0→2,000)"), "{comparison}");
        assert!(
            comparison.contains("epoll −1% (0→1,000)"),
            "largest count up to 2,000: {comparison}"
        );
        assert!(comparison.contains("is select (−90%)"), "{comparison}");
        assert_eq!(record.findings.len(), 2);
        assert_eq!(record.tables[0].rows[0][4], "−90%");
        assert!(
            warnings.is_empty(),
            "the server used its whole core: {warnings:?}"
        );
    }
}
