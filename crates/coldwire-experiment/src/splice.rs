//! The `splice` experiment (seed 002, Fig. 7 and 9): `coldwire proxy` as a reverse proxy at
//! 0% hits in front of `coldwire serve`, for objects from 4 KiB to 1 MiB, with each data
//! path of the proxy:
//!
//! - `copy`: `--data-path copy`, cache off (recv + send through user space);
//! - `copy+store`: copying, every response collected for the store — the baseline for
//!   "+tee";
//! - `splice`: `--data-path splice --splice-threshold 1`, cache off (socket → pipe →
//!   socket);
//! - `splice+tee`: splicing, every response tee'd and kept for the store.
//!
//! Every request is a distinct miss: its URL ends in `?v={seq}`, which `coldwire bench`
//! replaces by a per-request counter (the origin ignores the query). With "+store" and
//! "+tee" each response is collected in full and stored in a 64 MiB store that evicts the
//! least recently used objects once full — the realistic miss workload (as in
//! `bench/proxy-data-paths.sh`).
//!
//! The proxy runs on the server CPU with one worker; the origin and the generator share the
//! other CPU. Part one measures the proxy's CPU per request (`--server-pid`) at one fixed
//! open-loop rate, every size × path, the paths interleaved within each size and the grid
//! repeated `rounds` times (ratios are medians of per-round ratios). Part two raises the
//! offered rate step by step (`coldwire bench --saturate`) for a few sizes and paths: the
//! response time against the offered rate.

use std::time::Duration;

use coldwire_report::{ExperimentRecord, Scale, Table};
use serde::{Deserialize, Serialize};

mod response;
mod tunnels;

use response::{ResponseParameters, response_curves, summarise_response};
use tunnels::{TunnelParameters, run_tunnels};

use crate::RunContext;
use crate::figures::{axis, figure, machine_load_warning, median, series, short, thousands};
use crate::peers::contenders::{Contender, Target, measure_started};
use crate::peers::origin::Origin;
use crate::serve::{DocumentRoot, Pinning};

/// The scenario's parameters (`experiments/splice.toml`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Parameters {
    /// Object sizes of the CPU-per-request part, bytes.
    object_bytes: Vec<u64>,
    /// Data paths: copy, copy+store, splice, splice+tee.
    paths: Vec<String>,
    /// The fixed offered rate, requests/s.
    rate: f64,
    /// Keep-alive connections of the open loop.
    connections: u64,
    warmup: f64,
    duration: f64,
    /// Repetitions of the grid.
    rounds: u64,
    /// The response-time-vs-rate part.
    response: ResponseParameters,
    #[serde(default)]
    pinning: Option<Pinning>,
    /// CONNECT tunnels by data path, copy vs splice vs sockmap (part three, `tunnels.rs`).
    #[serde(default)]
    tunnels: Option<TunnelParameters>,
}

/// `coldwire proxy` flags of a data path: "+store" and "+tee" store every response (each
/// request asks for a new URL, so each is a miss; the store evicts the oldest).
/// The store of the "+store" and "+tee" paths: 64 MiB.
const STORE_BYTES: &str = "67108864";
/// Objects up to 2 MiB are stored (the largest measured is 1 MiB).
const MAX_OBJECT_BYTES: &str = "2097152";

fn path_flags(path: &str) -> anyhow::Result<Vec<String>> {
    let flags: &[&str] = match path {
        "copy" => &["--data-path", "copy", "--cache-bytes", "0"],
        "copy+store" => &[
            "--data-path",
            "copy",
            "--cache-bytes",
            STORE_BYTES,
            "--max-object-bytes",
            MAX_OBJECT_BYTES,
        ],
        "splice" => &[
            "--data-path",
            "splice",
            "--splice-threshold",
            "1",
            "--cache-bytes",
            "0",
        ],
        "splice+tee" => &[
            "--data-path",
            "splice",
            "--splice-threshold",
            "1",
            "--cache-bytes",
            STORE_BYTES,
            "--max-object-bytes",
            MAX_OBJECT_BYTES,
        ],
        other => anyhow::bail!(
            "unknown data path {other:?} in experiments/splice.toml: use copy, copy+store, splice or splice+tee"
        ),
    };
    Ok(flags.iter().map(|flag| (*flag).to_owned()).collect())
}

fn proxy(path: &str) -> anyhow::Result<Contender> {
    Ok(Contender::ColdwireProxy {
        label: path.to_owned(),
        flags: path_flags(path)?,
    })
}

/// `4 KiB`, `1 MiB`.
fn size_name(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

/// One CPU-per-request point.
#[derive(Clone, Copy, Debug)]
struct CpuPoint {
    round: u64,
    size: u64,
    path_index: usize,
    cpu_us: f64,
    achieved: f64,
}

/// Seed 002's reduction of CPU per request by splicing (non-cacheable), from its text.
fn seed_reduction(size: u64) -> Option<&'static str> {
    match size {
        4096 => Some("15%"),
        65536 | 131072 => Some("68%"),
        _ => None,
    }
}

/// Runs the experiment.
pub fn run(context: &RunContext) -> anyhow::Result<ExperimentRecord> {
    let parameters: Parameters = context.parameters()?;
    let responses =
        !parameters.object_bytes.is_empty() || !parameters.response.object_bytes.is_empty();
    anyhow::ensure!(
        (parameters.object_bytes.is_empty()
            || (!parameters.paths.is_empty() && parameters.rate > 0.0))
            && (responses || parameters.tunnels.is_some()),
        "the scenario needs object sizes, data paths and a positive rate (or only [tunnels])"
    );
    for path in parameters.paths.iter().chain(&parameters.response.paths) {
        path_flags(path)?;
    }
    let pinning = parameters.pinning.unwrap_or_default();
    let mut warnings: Vec<String> = machine_load_warning().into_iter().collect();
    let mut sizes = parameters.object_bytes.clone();
    sizes.extend(&parameters.response.object_bytes);
    sizes.sort_unstable();
    sizes.dedup();
    let origin = Origin::start(&context.coldwire, &sizes, pinning.generator_cpu)?;
    let target = Target {
        coldwire: &context.coldwire,
        root: origin.root(),
        origin: Some(origin.address()),
        cpu: pinning.server_cpu,
    };
    let mut raw_files = Vec::new();
    let mut points = Vec::new();
    let rounds = parameters.rounds.max(1);
    for round in 1..=rounds {
        for &size in &parameters.object_bytes {
            for (path_index, path) in parameters.paths.iter().enumerate() {
                context.progress(&format!(
                    "round {round}/{rounds}: {} {path}",
                    size_name(size)
                ));
                let stem = format!("cpu-{size}-{}-r{round}", path.replace('+', "-"));
                let args = vec![
                    format!(
                        "--url=http://{{}}/{}?v={{seq}}",
                        DocumentRoot::file_name(size)
                    ),
                    format!("--rate={}", parameters.rate),
                    "--arrivals=constant".to_owned(),
                    format!("--connections={}", parameters.connections),
                    format!("--warmup={}", parameters.warmup),
                    format!("--duration={}", parameters.duration),
                ];
                let timeout =
                    Duration::from_secs_f64(60.0 + 2.0 * (parameters.warmup + parameters.duration));
                let outcome = measure_point(
                    context,
                    &proxy(path)?,
                    &target,
                    args,
                    pinning,
                    &stem,
                    timeout,
                );
                let what = format!("{} {path}, round {round}", size_name(size));
                let Some(document) =
                    context.keep(&what, &stem, outcome, &mut raw_files, &mut warnings)
                else {
                    continue;
                };
                let phase = document.phase()?;
                if phase.errors_total > 0 {
                    warnings.push(format!("{what}: {} requests failed", phase.errors_total));
                }
                if phase.achieved_rate < 0.95 * parameters.rate {
                    warnings.push(format!(
                        "{what}: only {} of {} requests/s were answered — \
                         the proxy or the origin/generator CPU was saturated; its CPU per request is not at the fixed rate",
                        thousands(phase.achieved_rate),
                        thousands(parameters.rate)
                    ));
                }
                let cpu_us = phase
                    .server
                    .map_or(f64::NAN, |server| server.cpu_us_per_request);
                context.progress(&format!(
                    "  {} µs proxy CPU per request, {} requests/s",
                    short(cpu_us),
                    thousands(phase.achieved_rate)
                ));
                points.push(CpuPoint {
                    round,
                    size,
                    path_index,
                    cpu_us,
                    achieved: phase.achieved_rate,
                });
            }
        }
    }
    let curves = response_curves(
        context,
        &parameters.response,
        &target,
        pinning,
        &mut raw_files,
        &mut warnings,
    );
    anyhow::ensure!(
        !responses || !points.is_empty() || !curves.is_empty(),
        "no point could be measured: {}",
        warnings.join("; ")
    );
    drop(origin);
    let mut record = context.record(
        "Proxy CPU per request on cache misses: copy vs splice vs splice+tee",
        &["seed 002, Fig. 7", "seed 002, Fig. 9"],
        format!(
            "coldwire proxy (reverse proxy, one worker{}) in front of coldwire serve (the origin, objects \
             in memory{}), every request a miss. Data paths: {}. CPU per request: the proxy's on-CPU time \
             (all threads, schedstat) over {} s at a fixed open-loop rate of {} requests/s on {} keep-alive \
             connections after {} s of warm-up, for objects of {}; {} round(s), the paths interleaved \
             within each size, a fresh proxy per point. Response time: coldwire bench --saturate from {} \
             requests/s, ×{} per step, for {} objects. Every request asks for a new URL (`?v={{seq}}`), so every request misses; copy+store and \
             splice+tee store every response in a 64 MiB store that evicts the least recently used.",
            pinning.server_cpu.map_or(String::new(), |cpu| format!(", pinned to CPU {cpu}")),
            pinning.generator_cpu.map_or(String::new(), |cpu| format!(", with the generator on CPU {cpu}")),
            parameters.paths.join(", "),
            parameters.duration,
            thousands(parameters.rate),
            parameters.connections,
            parameters.warmup,
            parameters.object_bytes.iter().map(|size| size_name(*size)).collect::<Vec<_>>().join(", "),
            rounds,
            thousands(parameters.response.start_rate),
            parameters.response.factor,
            parameters.response.object_bytes.iter().map(|size| size_name(*size)).collect::<Vec<_>>().join(" and "),
        ),
    );
    record.parameters = serde_json::to_value(&parameters)?;
    record.raw_files = raw_files;
    if !points.is_empty() {
        summarise_cpu(&mut record, &parameters, &points);
    }
    summarise_response(&mut record, &curves);
    if let Some(tunnels) = &parameters.tunnels {
        if !responses {
            // A run of the tunnel part alone: its own title, no word of the others.
            record.title =
                "Proxy CPU per MiB of CONNECT tunnels: copy vs splice vs sockmap".to_owned();
            record.description.clear();
        }
        record.description.push_str(&format!(
            " CONNECT tunnels (part three): coldwire proxy as a forward proxy (one worker, --io epoll, on the \
             server CPU) with data paths {}, tunnels of {} from an in-process origin to \
             in-process clients on the generator CPU; proxy CPU per MiB (schedstat) at {} MiB/s offered \
             (at most {} tunnels/s) and at saturation ({} clients back to back), {} s after {} s of \
             warm-up, {} round(s), the paths interleaved (order rotated per round), a fresh proxy per point.",
            tunnels.paths.join(", "),
            tunnels.object_bytes.iter().map(|size| size_name(*size)).collect::<Vec<_>>().join(", "),
            tunnels.rate_mib,
            tunnels.max_tunnels_per_second,
            tunnels.saturation_clients,
            tunnels.duration,
            tunnels.warmup,
            tunnels.rounds,
        ));
        record.description = record.description.trim_start().to_owned();
        run_tunnels(context, tunnels, pinning, &mut record, &mut warnings)?;
    }
    record.warnings = warnings;
    Ok(record)
}

/// Starts the proxy, measures, stops it.
fn measure_point(
    context: &RunContext,
    contender: &Contender,
    target: &Target<'_>,
    args: Vec<String>,
    pinning: Pinning,
    stem: &str,
    timeout: Duration,
) -> anyhow::Result<(crate::bench_result::BenchDocument, String)> {
    measure_started(
        context,
        contender,
        target,
        args,
        pinning.generator_cpu,
        stem,
        timeout,
    )
}

/// Median over rounds of `cpu_us` of (`size`, `path_index`).
fn median_cpu(points: &[CpuPoint], size: u64, path_index: usize) -> f64 {
    median(
        &points
            .iter()
            .filter(|point| point.size == size && point.path_index == path_index)
            .map(|point| point.cpu_us)
            .collect::<Vec<_>>(),
    )
}

/// Median over rounds of the per-round ratio `numerator / denominator` at `size`.
fn median_ratio(points: &[CpuPoint], size: u64, numerator: usize, denominator: usize) -> f64 {
    let of = |round: u64, path_index: usize| {
        points
            .iter()
            .find(|point| {
                point.round == round && point.size == size && point.path_index == path_index
            })
            .map(|point| point.cpu_us)
    };
    let rounds: Vec<u64> = points.iter().map(|point| point.round).collect();
    let mut ratios = Vec::new();
    for round in 1..=rounds.iter().copied().max().unwrap_or(0) {
        if let (Some(top), Some(bottom)) = (of(round, numerator), of(round, denominator))
            && bottom > 0.0
        {
            ratios.push(top / bottom);
        }
    }
    median(&ratios)
}

fn summarise_cpu(record: &mut ExperimentRecord, parameters: &Parameters, points: &[CpuPoint]) {
    let paths = &parameters.paths;
    let index = |name: &str| paths.iter().position(|path| path == name);
    let kib = |size: u64| size as f64 / 1024.0;
    record.figures.push(figure(
        "cpu-per-request",
        &format!("Proxy CPU per request vs object size, 0% hits, {} requests/s", thousands(parameters.rate)),
        Some("seed 002, Fig. 7"),
        axis("object size", "KiB", Scale::Log),
        axis("proxy CPU per request", "µs", Scale::Log),
        paths
            .iter()
            .enumerate()
            .map(|(path_index, path)| {
                series(
                    path,
                    parameters
                        .object_bytes
                        .iter()
                        .map(|&size| (kib(size), median_cpu(points, size, path_index))),
                )
            })
            .collect(),
        "Median over rounds. Seed 002: splicing saves more the larger the object (no copy through user space).",
    ));
    // The ratios: splice against copy, and the cacheable pair against its copying baseline.
    let mut pairs = Vec::new();
    if let (Some(splice), Some(copy)) = (index("splice"), index("copy")) {
        pairs.push(("splice / copy", splice, copy));
    }
    if let (Some(tee), Some(store)) = (index("splice+tee"), index("copy+store")) {
        pairs.push(("splice+tee / copy+store", tee, store));
    } else if let (Some(tee), Some(copy)) = (index("splice+tee"), index("copy")) {
        pairs.push(("splice+tee / copy", tee, copy));
    }
    if !pairs.is_empty() {
        record.figures.push(figure(
            "ratio",
            "CPU per request, splicing relative to copying, vs object size",
            Some("seed 002, Fig. 7"),
            axis("object size", "KiB", Scale::Log),
            axis("CPU per request relative to copying", "ratio", Scale::Linear),
            pairs
                .iter()
                .map(|(name, top, bottom)| {
                    series(
                        name,
                        parameters
                            .object_bytes
                            .iter()
                            .map(|&size| (kib(size), median_ratio(points, size, *top, *bottom))),
                    )
                })
                .collect(),
            "Below 1: splicing costs less CPU per request. Median of per-round ratios (runs side by side).",
        ));
    }
    let mut columns = vec!["object".to_owned()];
    columns.extend(paths.iter().map(|path| format!("{path} (µs)")));
    columns.extend(pairs.iter().map(|(name, _, _)| (*name).to_owned()));
    columns.push("seed 002 reduction (non-cacheable)".into());
    let mut rows = Vec::new();
    for &size in &parameters.object_bytes {
        let mut row = vec![size_name(size)];
        row.extend((0..paths.len()).map(|path_index| short(median_cpu(points, size, path_index))));
        let mut sentence = Vec::new();
        for (name, top, bottom) in &pairs {
            let ratio = median_ratio(points, size, *top, *bottom);
            row.push(if ratio.is_finite() {
                format!("{ratio:.2}")
            } else {
                "n/a".into()
            });
            if ratio.is_finite() {
                sentence.push(format!(
                    "{name} = {ratio:.2} ({}{:.0}%)",
                    if ratio <= 1.0 { "−" } else { "+" },
                    (ratio - 1.0).abs() * 100.0
                ));
            }
        }
        row.push(seed_reduction(size).map_or("—".into(), |reduction| format!("−{reduction}")));
        rows.push(row);
        if !sentence.is_empty() {
            record.findings.push(format!(
                "{}: {}{}.",
                size_name(size),
                sentence.join(", "),
                seed_reduction(size).map_or(String::new(), |reduction| format!(
                    "; seed 002 measured −{reduction} for splice at this size"
                ))
            ));
        }
    }
    let achieved: Vec<f64> = points.iter().map(|point| point.achieved).collect();
    record.tables.push(Table {
        title: format!(
            "Proxy CPU per request (µs, median over rounds) at {} requests/s, and ratios (median of per-round ratios); achieved rate median {} requests/s",
            thousands(parameters.rate),
            thousands(median(&achieved))
        ),
        columns,
        rows,
    });
    record.seed_comparison.push(
        "Seed 002 (Fig. 7): splicing non-cacheable responses cut the proxy's CPU per request by 15% at 4 KiB, \
         growing to 68% at 64 and 128 KiB; for cacheable responses kept with tee (KeepCopy) the reduction was \
         10–60%. The splice / copy and splice+tee / copy+store columns above are the same ratios measured here \
         (1 − ratio is the reduction)."
            .to_owned(),
    );
}
