//! Part two of the `splice` experiment (seed 002, Fig. 9): the offered rate is raised step
//! by step (`coldwire bench --saturate`) for a few object sizes and data paths. Each step
//! records the response time and the proxy's CPU per request, so two figures come out of
//! one run: response time vs offered rate, and the proxy's CPU (share of one core) vs
//! offered rate — Fig. 9's axes — with splice / copy per step in the findings. At low
//! rates every request pays the fixed costs of an idle loop (a wake-up per event, the
//! peers' wake-ups on loopback); as the rate grows those are shared, and what the data
//! path saves weighs more.

use std::time::Duration;

use coldwire_report::{ExperimentRecord, Scale, Table};
use serde::{Deserialize, Serialize};

use super::{measure_point, proxy, size_name};
use crate::RunContext;
use crate::figures::{axis, figure, series, short, thousands};
use crate::peers::contenders::Target;
use crate::serve::{DocumentRoot, Pinning};

/// Response time vs offered rate (`[response]` in `experiments/splice.toml`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ResponseParameters {
    /// Object sizes (seed 002 Fig. 9: 8 KiB).
    pub(super) object_bytes: Vec<u64>,
    pub(super) paths: Vec<String>,
    pub(super) connections: u64,
    pub(super) start_rate: f64,
    pub(super) factor: f64,
    pub(super) max_steps: u64,
    pub(super) p99_limit_ms: f64,
    pub(super) warmup: f64,
    pub(super) duration: f64,
}

/// One step of a curve.
#[derive(Clone, Copy, Debug)]
pub(super) struct Step {
    offered: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// The proxy's CPU per answered request, µs.
    cpu_us: f64,
    achieved: f64,
}

/// One curve: a size and a data path, step by step.
pub(super) struct Curve {
    size: u64,
    path: String,
    steps: Vec<Step>,
    saturation: f64,
}

/// Measures every curve; failures become warnings.
pub(super) fn response_curves(
    context: &RunContext,
    response: &ResponseParameters,
    target: &Target<'_>,
    pinning: Pinning,
    raw_files: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Vec<Curve> {
    let mut curves = Vec::new();
    for &size in &response.object_bytes {
        for path in &response.paths {
            context.progress(&format!(
                "response time vs rate: {} {path}",
                size_name(size)
            ));
            let stem = format!("response-{size}-{}", path.replace('+', "-"));
            let args = vec![
                format!(
                    "--url=http://{{}}/{}?v={{seq}}",
                    DocumentRoot::file_name(size)
                ),
                "--saturate".to_owned(),
                format!("--rate={}", response.start_rate),
                format!("--saturate-factor={}", response.factor),
                format!("--saturate-steps={}", response.max_steps),
                format!("--saturate-p99={}", response.p99_limit_ms),
                "--arrivals=constant".to_owned(),
                format!("--connections={}", response.connections),
                format!("--warmup={}", response.warmup),
                format!("--duration={}", response.duration),
            ];
            let timeout = Duration::from_secs_f64(
                60.0 + response.max_steps as f64 * (response.warmup + response.duration + 6.0),
            );
            let contender = match proxy(path) {
                Ok(contender) => contender,
                Err(error) => {
                    warnings.push(format!("{error:#}"));
                    continue;
                }
            };
            let outcome = measure_point(context, &contender, target, args, pinning, &stem, timeout);
            let what = format!("response time, {} {path}", size_name(size));
            let Some(document) = context.keep(&what, &stem, outcome, raw_files, warnings) else {
                continue;
            };
            let Ok(run) = document.run() else { continue };
            let steps = run
                .phases
                .iter()
                .map(|phase| Step {
                    offered: phase.offered_rate.unwrap_or(f64::NAN),
                    p50_ms: phase.latency.corrected.p50_us / 1000.0,
                    p99_ms: phase.latency.corrected.p99_us / 1000.0,
                    cpu_us: phase
                        .server
                        .as_ref()
                        .map_or(f64::NAN, |server| server.cpu_us_per_request),
                    achieved: phase.achieved_rate,
                })
                .collect();
            let saturation = run
                .saturation
                .as_ref()
                .map_or(f64::NAN, |saturation| saturation.saturation_throughput);
            context.progress(&format!(
                "  saturation throughput {} requests/s",
                thousands(saturation)
            ));
            curves.push(Curve {
                size,
                path: path.clone(),
                steps,
                saturation,
            });
        }
    }
    curves
}

/// The figures, table and findings of part two.
pub(super) fn summarise_response(record: &mut ExperimentRecord, curves: &[Curve]) {
    let mut sizes: Vec<u64> = curves.iter().map(|curve| curve.size).collect();
    sizes.dedup();
    for size in sizes {
        let of_size: Vec<&Curve> = curves.iter().filter(|curve| curve.size == size).collect();
        plot_response_time(record, size, &of_size);
        plot_cpu(record, size, &of_size);
        tabulate_cpu(record, size, &of_size);
        let saturations: Vec<String> = of_size
            .iter()
            .map(|curve| format!("{} {} requests/s", curve.path, thousands(curve.saturation)))
            .collect();
        record.findings.push(format!(
            "{} objects, highest rate reached before saturating: {}.",
            size_name(size),
            saturations.join(", ")
        ));
    }
}

fn plot_response_time(record: &mut ExperimentRecord, size: u64, curves: &[&Curve]) {
    let mut lines = Vec::new();
    for curve in curves {
        lines.push(series(
            &format!("{} p50", curve.path),
            curve.steps.iter().map(|step| (step.offered, step.p50_ms)),
        ));
        lines.push(series(
            &format!("{} p99", curve.path),
            curve.steps.iter().map(|step| (step.offered, step.p99_ms)),
        ));
    }
    record.figures.push(figure(
        &format!("response-{size}"),
        &format!("Response time vs offered rate, {} objects, 0% hits", size_name(size)),
        (size == 8192).then_some("seed 002, Fig. 9"),
        axis("offered rate", "requests/s", Scale::Linear),
        axis("response time (corrected)", "ms", Scale::Log),
        lines,
        "Each curve ends where the proxy (or the origin and generator sharing the other CPU) saturated.",
    ));
}

/// Seed 002 Fig. 9's axes: the proxy's CPU utilisation (share of one core) vs the rate.
fn plot_cpu(record: &mut ExperimentRecord, size: u64, curves: &[&Curve]) {
    let lines = curves
        .iter()
        .map(|curve| {
            series(
                &curve.path,
                curve
                    .steps
                    .iter()
                    .map(|step| (step.offered, step.cpu_us * step.achieved / 1e4)),
            )
        })
        .collect();
    record.figures.push(figure(
        &format!("cpu-vs-rate-{size}"),
        &format!("Proxy CPU vs offered rate, {} objects, 0% hits", size_name(size)),
        Some("seed 002, Fig. 9"),
        axis("offered rate", "requests/s", Scale::Linear),
        axis("proxy CPU", "% of one core", Scale::Linear),
        lines,
        "The proxy's on-CPU time (all threads) per second of each step, one run per data path. Seed 002 \
         found the gap between splicing and copying grows with the rate.",
    ));
}

/// CPU per request step by step, and splice / copy where both curves have the step.
fn tabulate_cpu(record: &mut ExperimentRecord, size: u64, curves: &[&Curve]) {
    let copy = curves.iter().find(|curve| curve.path == "copy");
    let longest = curves
        .iter()
        .map(|curve| curve.steps.len())
        .max()
        .unwrap_or(0);
    let mut columns = vec!["offered (requests/s)".to_owned()];
    columns.extend(curves.iter().map(|curve| format!("{} (µs)", curve.path)));
    let others: Vec<&&Curve> = curves.iter().filter(|curve| curve.path != "copy").collect();
    if copy.is_some() {
        columns.extend(others.iter().map(|curve| format!("{} / copy", curve.path)));
    }
    let mut rows = Vec::new();
    let mut splice_ratios = Vec::new();
    for index in 0..longest {
        let offered = curves
            .iter()
            .find_map(|curve| curve.steps.get(index))
            .map_or(f64::NAN, |step| step.offered);
        let mut row = vec![thousands(offered)];
        row.extend(curves.iter().map(|curve| {
            curve
                .steps
                .get(index)
                .map_or("—".to_owned(), |step| short(step.cpu_us))
        }));
        if let Some(copy) = copy {
            for curve in &others {
                let ratio = match (curve.steps.get(index), copy.steps.get(index)) {
                    (Some(step), Some(base)) if base.cpu_us > 0.0 => step.cpu_us / base.cpu_us,
                    _ => f64::NAN,
                };
                if curve.path == "splice" && ratio.is_finite() {
                    splice_ratios.push(format!("{:.2} at {}/s", ratio, thousands(offered)));
                }
                row.push(if ratio.is_finite() {
                    format!("{ratio:.2}")
                } else {
                    "—".to_owned()
                });
            }
        }
        rows.push(row);
    }
    if !splice_ratios.is_empty() {
        record.findings.push(format!(
            "{} objects, proxy CPU per request splice / copy step by step: {}.",
            size_name(size),
            splice_ratios.join(", ")
        ));
    }
    record.tables.push(Table {
        title: format!(
            "Proxy CPU per request (µs) vs offered rate, {} objects, one run per path",
            size_name(size)
        ),
        columns,
        rows,
    });
}
