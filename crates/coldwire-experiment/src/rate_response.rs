//! The `rate-response` experiment (seed 000 Fig. 3, 5 and 8): response time against offered
//! request rate up to saturation, for the naive benchmark (no cold connections) and the
//! realistic one (750 idle cold connections held open), with a 1,259-byte and an 8 KiB
//! file, per backend.
//!
//! Each curve is one `coldwire bench --saturate` run against a fresh `coldwire serve`
//! (pinned to the server CPU; the generator on the other): the open-loop rate starts at
//! `start_rate` and grows by `factor` per step until the achieved rate falls below 95% of
//! the offered one or the corrected p99 passes `p99_limit_ms`.

use std::net::SocketAddr;
use std::time::Duration;

use coldwire_report::{ExperimentRecord, Scale, Table};
use serde::{Deserialize, Serialize};

use crate::RunContext;
use crate::figures::{
    axis, figure, format_percent, machine_load_warning, percent_change, series, thousands,
};
use crate::serve::{DocumentRoot, Pinning, ServerSetup, available_backends, measure};

/// The scenario's parameters (`experiments/rate-response.toml`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Parameters {
    backends: Vec<String>,
    /// File sizes (seed 000: 1,259 and 8,192 bytes).
    file_bytes: Vec<u64>,
    /// Cold connection counts, one curve each (seed 000: 0 = naive, 750 = realistic).
    cold: Vec<u64>,
    /// Open-loop arrivals: constant or poisson.
    arrivals: String,
    /// Hot keep-alive connections available to the open loop.
    connections: u64,
    /// First offered rate, requests/s.
    start_rate: f64,
    /// Rate multiplier per step.
    factor: f64,
    /// Most steps per curve.
    max_steps: u64,
    /// Corrected p99 beyond which a step counts as saturated, ms.
    p99_limit_ms: f64,
    warmup: f64,
    duration: f64,
    /// The generator polls before each slot (precise timing, a busy core); `false` passes
    /// `--no-poll` (kinder to a machine shared with other work; slots up to 1 ms late).
    #[serde(default = "yes")]
    generator_poll: bool,
    #[serde(default)]
    pinning: Option<Pinning>,
}

fn yes() -> bool {
    true
}

/// One curve's points: (offered, achieved, p50 corrected µs, p99 corrected µs).
struct Curve {
    backend: String,
    file: u64,
    cold: u64,
    points: Vec<(f64, f64, f64, f64)>,
    saturation: f64,
}

fn load_name(cold: u64) -> String {
    if cold == 0 {
        "naive".to_owned()
    } else {
        format!("{} cold", thousands(cold as f64))
    }
}

/// Runs the experiment.
pub fn run(context: &RunContext) -> anyhow::Result<ExperimentRecord> {
    let parameters: Parameters = context.parameters()?;
    anyhow::ensure!(
        parameters.factor > 1.0 && parameters.start_rate > 0.0,
        "start_rate must be positive and factor above 1"
    );
    let (backends, mut warnings) = available_backends(&parameters.backends)?;
    warnings.extend(machine_load_warning());
    let pinning = parameters.pinning.unwrap_or_default();
    let root = DocumentRoot::create(&parameters.file_bytes)?;
    let mut raw_files = Vec::new();
    let mut curves = Vec::new();
    for &file in &parameters.file_bytes {
        for &cold in &parameters.cold {
            for backend in &backends {
                context.progress(&format!("{backend}, {file}-byte file, {}", load_name(cold)));
                let name = DocumentRoot::file_name(file);
                let bench_args = |server: SocketAddr| {
                    vec![
                        format!("--url=http://{server}/{name}"),
                        "--saturate".to_owned(),
                        format!("--rate={}", parameters.start_rate),
                        format!("--saturate-factor={}", parameters.factor),
                        format!("--saturate-steps={}", parameters.max_steps),
                        format!("--saturate-p99={}", parameters.p99_limit_ms),
                        format!("--arrivals={}", parameters.arrivals),
                        format!("--connections={}", parameters.connections),
                        format!("--cold={cold}"),
                        "--cold-rate=10000".to_owned(),
                        format!("--warmup={}", parameters.warmup),
                        format!("--duration={}", parameters.duration),
                    ]
                    .into_iter()
                    .chain((!parameters.generator_poll).then(|| "--no-poll".to_owned()))
                    .collect()
                };
                let stem = format!("{backend}-{file}-cold{cold}");
                let steps = parameters.max_steps as f64;
                let timeout = Duration::from_secs_f64(
                    60.0 + steps * (parameters.warmup + parameters.duration + 6.0),
                );
                let setup = ServerSetup {
                    root: root.path(),
                    backend,
                    extra: &[],
                    pinning,
                };
                let outcome = measure(context, &setup, &bench_args, &stem, timeout);
                let Some(document) =
                    context.keep(&stem, &stem, outcome, &mut raw_files, &mut warnings)
                else {
                    continue;
                };
                let run = document.run()?;
                let points: Vec<(f64, f64, f64, f64)> = run
                    .phases
                    .iter()
                    .map(|phase| {
                        (
                            phase.offered_rate.unwrap_or(f64::NAN),
                            phase.achieved_rate,
                            phase.latency.corrected.p50_us,
                            phase.latency.corrected.p99_us,
                        )
                    })
                    .collect();
                let saturation = run
                    .saturation
                    .as_ref()
                    .map_or(f64::NAN, |saturation| saturation.saturation_throughput);
                if run
                    .saturation
                    .as_ref()
                    .is_some_and(|saturation| saturation.saturated_at_offered.is_none())
                {
                    warnings.push(format!(
                        "{stem}: not saturated within {} steps (the last offered rate was still met): raise max_steps",
                        parameters.max_steps
                    ));
                }
                let missed: u64 = run.phases.iter().map(|phase| phase.missed_slots).sum();
                let last_step = run.phases.last();
                let generator_bound = last_step.is_some_and(|step| {
                    // Achieved counts only the slots sent: when the generator skipped more
                    // than 5 % of them, the "saturation" is its own, not the server's.
                    step.missed_slots as f64 > 0.05 * step.offered_requests.max(1) as f64
                });
                if generator_bound && let Some(step) = last_step {
                    warnings.push(format!(
                        "{stem}: the curve ends at {} requests/s because the generator missed {} of {} slots there \
                         (it waited {:.1} s for a CPU): the generator, not the server, saturated; rerun on a quiet \
                         machine or with generator_poll = false",
                        thousands(step.offered_rate.unwrap_or(f64::NAN)),
                        step.missed_slots,
                        step.offered_requests,
                        step.generator.map_or(f64::NAN, |generator| generator.runqueue_wait_seconds)
                    ));
                } else if missed > 0 {
                    warnings.push(format!(
                        "{stem}: the generator missed {missed} slots (it was descheduled or overloaded)"
                    ));
                }
                context.progress(&format!(
                    "  saturation throughput {} requests/s",
                    thousands(saturation)
                ));
                curves.push(Curve {
                    backend: backend.clone(),
                    file,
                    cold,
                    points,
                    saturation,
                });
            }
        }
    }
    anyhow::ensure!(
        !curves.is_empty(),
        "no curve could be measured: {}",
        warnings.join("; ")
    );
    let mut record = context.record(
        "Response time vs request rate: naive vs realistic load",
        &["seed 000, Fig. 3", "seed 000, Fig. 5", "seed 000, Fig. 8"],
        format!(
            "For each backend ({}), file size ({} bytes) and load ({}), a fresh coldwire serve (one worker{}) \
             was offered an open-loop {} rate starting at {} requests/s and growing {}× per step ({} s warm-up, \
             {} s measured) until it saturated (achieved < 95% of offered, or corrected p99 > {} ms), on up to \
             {} keep-alive connections. Response time is corrected (from each request's intended start).",
            backends.join(", "),
            parameters.file_bytes.iter().map(|size| size.to_string()).collect::<Vec<_>>().join(" and "),
            parameters.cold.iter().map(|cold| load_name(*cold)).collect::<Vec<_>>().join(", "),
            pinning.server_cpu.map_or(String::new(), |cpu| format!(", CPU {cpu}")),
            parameters.arrivals,
            thousands(parameters.start_rate),
            parameters.factor,
            parameters.warmup,
            parameters.duration,
            parameters.p99_limit_ms,
            parameters.connections
        ),
    );
    let mut used = parameters.clone();
    used.pinning = Some(pinning);
    record.parameters = serde_json::to_value(&used)?;
    record.raw_files = raw_files;
    for &file in &parameters.file_bytes {
        let reproduces = if file == 1259 {
            Some("seed 000, Fig. 3 and 8")
        } else {
            Some("seed 000, Fig. 5")
        };
        for (id, label, pick) in [
            ("p50", "median", 2usize),
            ("p99", "99th percentile", 3usize),
        ] {
            let lines = curves
                .iter()
                .filter(|curve| curve.file == file)
                .map(|curve| {
                    series(
                        &format!("{} {}", curve.backend, load_name(curve.cold)),
                        curve.points.iter().map(|point| {
                            let y = if pick == 2 { point.2 } else { point.3 };
                            (point.0, y / 1000.0)
                        }),
                    )
                })
                .collect();
            record.figures.push(figure(
                &format!("response-{file}-{id}"),
                &format!("Response time ({label}) vs offered rate, {file}-byte file"),
                reproduces,
                axis("offered rate", "requests/s", Scale::Linear),
                axis(&format!("response time, {label} (corrected)"), "ms", Scale::Log),
                lines,
                "Each curve ends where the server saturated; seed 000: cold connections pulled the original kernel's curve to lower rates.",
            ));
        }
    }
    let mut rows = Vec::new();
    let mut changes = Vec::new();
    for &file in &parameters.file_bytes {
        for backend in &backends {
            let find = |cold: u64| {
                curves
                    .iter()
                    .find(|curve| {
                        curve.file == file && &curve.backend == backend && curve.cold == cold
                    })
                    .map(|curve| curve.saturation)
            };
            let naive = parameters.cold.first().and_then(|&cold| find(cold));
            let mut row = vec![backend.clone(), file.to_string()];
            for &cold in &parameters.cold {
                row.push(find(cold).map_or("n/a".into(), thousands));
            }
            if let (Some(naive), Some(&last_cold)) = (naive, parameters.cold.last())
                && let Some(realistic) = find(last_cold)
                && parameters.cold.len() > 1
            {
                let change = percent_change(naive, realistic);
                row.push(format_percent(change));
                changes.push(format!("{backend} {} ({file} B)", format_percent(change)));
                record.findings.push(format!(
                    "{backend}, {file}-byte file: saturation throughput {} requests/s naive, {} with {} ({}).",
                    thousands(naive),
                    thousands(realistic),
                    load_name(last_cold),
                    format_percent(change)
                ));
            } else {
                row.push("n/a".into());
            }
            rows.push(row);
        }
    }
    let mut columns = vec!["backend".to_owned(), "file bytes".to_owned()];
    columns.extend(
        parameters
            .cold
            .iter()
            .map(|cold| format!("saturation, {} (requests/s)", load_name(*cold))),
    );
    columns.push("change".into());
    record.tables.push(Table {
        title: "Saturation throughput, naive vs realistic load".into(),
        columns,
        rows,
    });
    record.seed_comparison.push(
        "Seed 000 (Fig. 3, 5): with 750 cold connections the unmodified kernel's Squid saturated far below the \
         naive benchmark's rate, while with scalable select() and ufalloc() the realistic curve nearly matched the \
         naive one; thttpd's saturation throughput rose 58% (1,259 B) and 37% (8 KiB) with the new kernel (Fig. 8). \
         The table above gives the same naive-vs-realistic change per backend here."
            .to_owned(),
    );
    if !changes.is_empty() {
        record.seed_comparison.push(format!(
            "Saturation throughput, realistic vs naive, measured here: {}.",
            changes.join(", ")
        ));
    }
    record.warnings = warnings;
    Ok(record)
}
