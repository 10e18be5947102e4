//! The server half of `peers`: `coldwire serve` (epoll, one worker) and nginx (one worker)
//! on the same document root, the same CPU and the same load. Like `cold-scaling`: a closed
//! loop of hot keep-alive connections while 0 to ~15,000 idle ("cold") connections are held
//! open — saturation throughput and server CPU per request. Like `rate-response`: response
//! time against the offered rate up to saturation, naive (no cold connections) vs realistic
//! (750 cold). Every point is a fresh server; the contenders alternate within each point.

use std::time::Duration;

use coldwire_report::{ExperimentRecord, Scale, Table};
use serde::{Deserialize, Serialize};

use super::contenders::{Contender, Target, measure_started};
use crate::RunContext;
use crate::figures::{axis, figure, format_percent, percent_change, series, short, thousands};
use crate::serve::{DocumentRoot, Pinning};

/// `[server]` of `experiments/peers.toml`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerParameters {
    /// Peers next to coldwire serve: `nginx`.
    pub peers: Vec<String>,
    /// The file requested (seed 000: 1,259 bytes).
    pub file_bytes: u64,
    /// Cold connection counts of the saturation runs.
    pub cold: Vec<u64>,
    /// Hot connections of the closed loop.
    pub connections: u64,
    /// Cold connections opened per second.
    pub cold_rate: f64,
    pub warmup: f64,
    pub duration: f64,
    /// The response-time-vs-rate runs.
    pub rate: RateParameters,
}

/// `[server.rate]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RateParameters {
    /// One curve per count (0: naive, 750: seed 000's realistic load).
    pub cold: Vec<u64>,
    pub connections: u64,
    pub start_rate: f64,
    pub factor: f64,
    pub max_steps: u64,
    pub p99_limit_ms: f64,
    pub warmup: f64,
    pub duration: f64,
}

fn load_name(cold: u64) -> String {
    if cold == 0 {
        "naive".to_owned()
    } else {
        format!("{} cold", thousands(cold as f64))
    }
}

fn slug(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// Runs both parts, adds figures, tables and findings to `record`; returns a description.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    context: &RunContext,
    parameters: &ServerParameters,
    contenders: &[Contender],
    pinning: Pinning,
    record: &mut ExperimentRecord,
    raw_files: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> anyhow::Result<String> {
    let root = DocumentRoot::create(&[parameters.file_bytes])?;
    let target = Target {
        coldwire: &context.coldwire,
        root: root.path(),
        origin: None,
        cpu: pinning.server_cpu,
    };
    let file = DocumentRoot::file_name(parameters.file_bytes);
    // (contender index, cold, throughput, cpu µs/request)
    let mut saturation = Vec::new();
    for &cold in &parameters.cold {
        for (index, contender) in contenders.iter().enumerate() {
            let name = contender.name();
            context.progress(&format!("server: {name}, {cold} cold connections"));
            let stem = format!("server-{}-cold{cold}", slug(&name));
            let args = vec![
                format!("--url=http://{{}}/{file}"),
                "--rate=max".to_owned(),
                format!("--connections={}", parameters.connections),
                format!("--cold={cold}"),
                format!("--cold-rate={}", parameters.cold_rate),
                format!("--warmup={}", parameters.warmup),
                format!("--duration={}", parameters.duration),
            ];
            let opening = cold as f64 / parameters.cold_rate;
            let timeout = Duration::from_secs_f64(
                60.0 + 2.0 * (opening + parameters.warmup + parameters.duration),
            );
            let generator = pinning.generator_cpu;
            let result =
                measure_started(context, contender, &target, args, generator, &stem, timeout);
            match result {
                Ok((document, raw)) => {
                    raw_files.push(raw);
                    raw_files.push(format!("raw/{stem}.txt"));
                    let phase = document.phase()?;
                    let established = document.run()?.cold.established;
                    if established < cold {
                        warnings.push(format!(
                            "{name}: only {established} of {cold} cold connections were established"
                        ));
                    }
                    if phase.errors_total > 0 {
                        warnings.push(format!(
                            "{name}, {cold} cold: {} requests failed",
                            phase.errors_total
                        ));
                    }
                    let cpu = phase
                        .server
                        .map_or(f64::NAN, |server| server.cpu_us_per_request);
                    context.progress(&format!(
                        "  {} requests/s, {} µs CPU/request",
                        thousands(phase.achieved_rate),
                        short(cpu)
                    ));
                    if let Some(server) = phase.server
                        && server.cpu_cores < 0.85
                    {
                        warnings.push(format!(
                            "server {name}, {cold} cold: the server used only {:.2} of its core (its threads \
                             waited {:.1} s for a CPU) — other work on the machine or the generator set the pace, \
                             so this throughput is the share of the CPU it got, not its capacity: compare CPU per request",
                            server.cpu_cores, server.runqueue_wait_seconds
                        ));
                    }
                    saturation.push((index, cold, phase.achieved_rate, cpu));
                }
                Err(error) => {
                    let message = format!("server {name}, {cold} cold failed: {error:#}");
                    context.progress(&format!("warning: {message}"));
                    warnings.push(message);
                }
            }
        }
    }
    // (contender index, cold, points (offered, p50 ms, p99 ms), saturation throughput)
    let mut curves = Vec::new();
    let rate = &parameters.rate;
    for &cold in &rate.cold {
        for (index, contender) in contenders.iter().enumerate() {
            let name = contender.name();
            context.progress(&format!(
                "server: {name}, response time vs rate, {}",
                load_name(cold)
            ));
            let stem = format!("rate-{}-cold{cold}", slug(&name));
            let args = vec![
                format!("--url=http://{{}}/{file}"),
                "--saturate".to_owned(),
                format!("--rate={}", rate.start_rate),
                format!("--saturate-factor={}", rate.factor),
                format!("--saturate-steps={}", rate.max_steps),
                format!("--saturate-p99={}", rate.p99_limit_ms),
                "--arrivals=constant".to_owned(),
                format!("--connections={}", rate.connections),
                format!("--cold={cold}"),
                "--cold-rate=10000".to_owned(),
                format!("--warmup={}", rate.warmup),
                format!("--duration={}", rate.duration),
            ];
            let timeout = Duration::from_secs_f64(
                60.0 + rate.max_steps as f64 * (rate.warmup + rate.duration + 6.0),
            );
            let generator = pinning.generator_cpu;
            let result =
                measure_started(context, contender, &target, args, generator, &stem, timeout);
            match result {
                Ok((document, raw)) => {
                    raw_files.push(raw);
                    raw_files.push(format!("raw/{stem}.txt"));
                    let run = document.run()?;
                    let points: Vec<(f64, f64, f64)> = run
                        .phases
                        .iter()
                        .map(|phase| {
                            (
                                phase.offered_rate.unwrap_or(f64::NAN),
                                phase.latency.corrected.p50_us / 1000.0,
                                phase.latency.corrected.p99_us / 1000.0,
                            )
                        })
                        .collect();
                    let top = run
                        .saturation
                        .as_ref()
                        .map_or(f64::NAN, |saturation| saturation.saturation_throughput);
                    context.progress(&format!(
                        "  saturation throughput {} requests/s",
                        thousands(top)
                    ));
                    curves.push((index, cold, points, top));
                }
                Err(error) => {
                    let message = format!(
                        "server {name}, rate curve {} failed: {error:#}",
                        load_name(cold)
                    );
                    context.progress(&format!("warning: {message}"));
                    warnings.push(message);
                }
            }
        }
    }
    anyhow::ensure!(
        !saturation.is_empty() || !curves.is_empty(),
        "no server point could be measured"
    );
    let names: Vec<String> = contenders.iter().map(Contender::name).collect();
    let per_contender = |pick: fn(&(usize, u64, f64, f64)) -> f64| {
        names
            .iter()
            .enumerate()
            .map(|(index, name)| {
                series(
                    name,
                    saturation
                        .iter()
                        .filter(|point| point.0 == index)
                        .map(|point| (point.1 as f64, pick(point))),
                )
            })
            .collect::<Vec<_>>()
    };
    record.figures.push(figure(
        "server-throughput",
        &format!(
            "Saturation throughput vs cold connections, {}-byte file",
            parameters.file_bytes
        ),
        Some("seed 000, Fig. 9"),
        axis("cold connections", "", Scale::Linear),
        axis("throughput", "requests/s", Scale::Linear),
        per_contender(|point| point.2),
        "coldwire serve and nginx, one worker each on the same CPU, the same closed loop.",
    ));
    record.figures.push(figure(
        "server-cpu-per-request",
        "Server CPU per request vs cold connections",
        Some("seed 002, Fig. 4"),
        axis("cold connections", "", Scale::Linear),
        axis("server CPU per request", "µs", Scale::Log),
        per_contender(|point| point.3),
        "On-CPU time of the server's processes (nginx: master and worker) per answered request.",
    ));
    for (id, label, pick) in [
        ("p50", "median", 1usize),
        ("p99", "99th percentile", 2usize),
    ] {
        let lines = curves
            .iter()
            .map(|(index, cold, points, _)| {
                series(
                    &format!("{} {}", names[*index], load_name(*cold)),
                    points
                        .iter()
                        .map(|point| (point.0, if pick == 1 { point.1 } else { point.2 })),
                )
            })
            .collect();
        record.figures.push(figure(
            &format!("server-response-{id}"),
            &format!(
                "Response time ({label}) vs offered rate, {}-byte file",
                parameters.file_bytes
            ),
            Some("seed 000, Fig. 3 and 8"),
            axis("offered rate", "requests/s", Scale::Linear),
            axis(
                &format!("response time, {label} (corrected)"),
                "ms",
                Scale::Log,
            ),
            lines,
            "Each curve ends where the server saturated.",
        ));
    }
    let mut rows = Vec::new();
    for (index, name) in names.iter().enumerate() {
        let points: Vec<_> = saturation.iter().filter(|point| point.0 == index).collect();
        let (Some(first), Some(last)) = (points.first(), points.last()) else {
            continue;
        };
        let curve = |cold: u64| {
            curves
                .iter()
                .find(|curve| curve.0 == index && curve.1 == cold)
                .map(|curve| curve.3)
        };
        let naive = rate.cold.first().and_then(|&cold| curve(cold));
        let realistic = rate.cold.last().and_then(|&cold| curve(cold));
        rows.push(vec![
            name.clone(),
            thousands(first.2),
            format!("{} ({} cold)", thousands(last.2), thousands(last.1 as f64)),
            format_percent(percent_change(first.2, last.2)),
            format!("{} → {}", short(first.3), short(last.3)),
            naive.map_or("n/a".into(), thousands),
            realistic.map_or("n/a".into(), thousands),
        ]);
        record.findings.push(format!(
            "{name} (server): {} → {} requests/s ({}) from {} to {} cold connections, CPU per request {} → {} µs.",
            thousands(first.2),
            thousands(last.2),
            format_percent(percent_change(first.2, last.2)),
            thousands(first.1 as f64),
            thousands(last.1 as f64),
            short(first.3),
            short(last.3),
        ));
    }
    // coldwire against each peer, point by point (side by side).
    for (index, name) in names.iter().enumerate().skip(1) {
        // coldwire / this peer of one figure of a point, at every cold count both have.
        let ratios_of = |figure: fn(&(usize, u64, f64, f64)) -> f64| -> Vec<String> {
            parameters
                .cold
                .iter()
                .filter_map(|&cold| {
                    let of = |who: usize| {
                        saturation
                            .iter()
                            .find(|point| point.0 == who && point.1 == cold)
                    };
                    let (ours, theirs) = (figure(of(0)?), figure(of(index)?));
                    (theirs > 0.0 && ours.is_finite()).then(|| {
                        format!("{:.2}× at {} cold", ours / theirs, thousands(cold as f64))
                    })
                })
                .collect()
        };
        let ratios = ratios_of(|point| point.2);
        let cpu_ratios = ratios_of(|point| point.3);
        if !cpu_ratios.is_empty() {
            record.findings.push(format!(
                "Server CPU per request coldwire / {name} (the figure to compare when a server did not get its \
                 whole core): {}.",
                cpu_ratios.join(", ")
            ));
        }
        if !ratios.is_empty() {
            record.findings.push(format!(
                "Saturation throughput coldwire / {name}: {}.",
                ratios.join(", ")
            ));
        }
    }
    record.tables.push(Table {
        title: "Servers: saturation throughput (requests/s) and CPU per request (µs)".into(),
        columns: vec![
            "server".into(),
            "throughput, 0 cold".into(),
            "throughput, most cold".into(),
            "change".into(),
            "CPU per request".into(),
            format!(
                "rate curve saturation, {}",
                rate.cold
                    .first()
                    .map_or("naive".into(), |cold| load_name(*cold))
            ),
            format!(
                "rate curve saturation, {}",
                rate.cold
                    .last()
                    .map_or("n/a".into(), |cold| load_name(*cold))
            ),
        ],
        rows,
    });
    Ok(format!(
        "Servers: {} each serving GET /{file} ({} bytes) with one worker pinned to the server CPU; \
         saturation: a closed loop of {} keep-alive connections with {} cold connections held open \
         ({} s warm-up, {} s measured, a fresh server per point); response time: coldwire bench --saturate \
         from {} requests/s ×{} per step on {} connections, {}.",
        names.join(" and "),
        parameters.file_bytes,
        parameters.connections,
        parameters
            .cold
            .iter()
            .map(|cold| thousands(*cold as f64))
            .collect::<Vec<_>>()
            .join(", "),
        parameters.warmup,
        parameters.duration,
        thousands(rate.start_rate),
        rate.factor,
        rate.connections,
        rate.cold
            .iter()
            .map(|cold| load_name(*cold))
            .collect::<Vec<_>>()
            .join(" and "),
    ))
}
