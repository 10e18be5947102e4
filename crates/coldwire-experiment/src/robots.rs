//! The `robots` experiment (seed 002 Figs 4, 5, 6): `coldwire proxy` (reverse, one worker,
//! pinned to the server CPU, its cache on) in front of `coldwire origin` (8 KiB objects),
//! reached through a `coldwire wan` relay (80 ms round trip, 0.05% loss) the way robots
//! behind a wide-area path reach it. `coldwire bench` holds N idle robot connections
//! (`--cold N`, through the relay: the proxy sees N mostly idle connections) and sends a
//! fixed request rate for one cached object (100% hits) over a few active connections.
//! Per backend and robot count: the proxy's CPU (cores and per request) against its
//! concurrent connections (Figs 4, 5), and the mean response time, whose relative reduction
//! between backends, 100·(1 − A/B), is Fig. 6.
//!
//! Per point (backend × robots × round): a fresh proxy and relay; the backends interleaved
//! within each robot count, their order reversed in even rounds.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use coldwire_report::{ExperimentRecord, Scale, Table};
use serde::{Deserialize, Serialize};

use crate::RunContext;
use crate::figures::{axis, figure, machine_load_warning, median, series, short, thousands};
use crate::peers::contenders::{self, Contender, Target};
use crate::process::start_listening;
use crate::serve::{Pinning, available_backends};
use crate::slow_clients::stats;

/// The scenario's parameters (`experiments/robots.toml`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Parameters {
    /// Backends of the proxy, in plotting order.
    pub backends: Vec<String>,
    /// Idle robot connections held through the relay (the x axis).
    pub robots: Vec<u64>,
    /// The fixed request rate, requests/s (open loop).
    pub rate: f64,
    /// Keep-alive connections carrying the requests.
    pub active_connections: u64,
    /// The relay's round trip, e.g. `80ms`.
    pub rtt: String,
    /// The relay's loss, e.g. `0.05%`.
    pub loss: String,
    /// The origin's objects (`coldwire origin --mix`).
    pub object: String,
    /// Seconds of load before measuring, and measured seconds, per point.
    pub warmup: f64,
    pub duration: f64,
    /// Repetitions of the grid.
    pub rounds: u64,
    /// The backend B of Fig. 6's 100·(1 − A/B).
    pub reference: String,
    /// Robots per relay process: a relay holds two descriptors per robot (client and
    /// proxy side) within the 20,000 a process may open, so 10,000 robots take several
    /// relays, each with its share (default 4,000).
    #[serde(default = "default_robots_per_relay")]
    pub robots_per_relay: u64,
    #[serde(default)]
    pub pinning: Option<Pinning>,
}

fn default_robots_per_relay() -> u64 {
    4_000
}

/// The relay processes `robots` idle connections need (at least one: it also carries the
/// active connections).
fn relays_for(robots: u64, per_relay: u64) -> u64 {
    robots.div_ceil(per_relay.max(1)).max(1)
}

/// One measured point.
#[derive(Clone, Debug)]
struct Point {
    round: u64,
    backend: usize,
    robots: usize,
    /// Proxy CPU per request, µs, and in cores.
    cpu_us: f64,
    cpu_cores: f64,
    /// Mean response time, ms.
    mean_ms: f64,
    achieved: f64,
    errors: u64,
    /// The proxy's open connections halfway through.
    open_connections: f64,
}

/// Runs the experiment.
pub fn run(context: &RunContext) -> anyhow::Result<ExperimentRecord> {
    let parameters: Parameters = context.parameters()?;
    anyhow::ensure!(
        !parameters.backends.is_empty() && !parameters.robots.is_empty() && parameters.rate > 0.0,
        "the scenario needs backends, robot counts and a positive rate"
    );
    let (backends, mut warnings) = available_backends(&parameters.backends)?;
    warnings.extend(machine_load_warning());
    let pinning = parameters.pinning.unwrap_or_default();
    let origin_args: Vec<String> = [
        "origin",
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--io",
        "epoll",
        "--mix",
        &parameters.object,
        "--think",
        "0s",
        "--idle-timeout",
        "600",
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect();
    let (_origin, origin) = start_listening(
        &context.coldwire,
        &origin_args,
        pinning.generator_cpu,
        "origin listening on http://",
    )?;
    let target = Target {
        coldwire: &context.coldwire,
        root: Path::new("/"),
        origin: Some(origin),
        cpu: pinning.server_cpu,
    };
    let rounds = parameters.rounds.max(1);
    let mut points = Vec::new();
    let mut raw_files = Vec::new();
    for round in 1..=rounds {
        for (robots_index, &robots) in parameters.robots.iter().enumerate() {
            let mut order: Vec<usize> = (0..backends.len()).collect();
            if round % 2 == 0 {
                order.reverse();
            }
            for backend in order {
                let name = &backends[backend];
                let what = format!(
                    "{name} with {} robots, round {round}",
                    thousands(robots as f64)
                );
                context.progress(&format!("round {round}/{rounds}: {what}"));
                match measure_point(context, &parameters, &target, pinning, name, robots, round) {
                    Ok((point, raw)) => {
                        context.progress(&format!(
                            "  {} µs CPU per request, {} ms mean, {} open connections, {} errors",
                            short(point.cpu_us),
                            short(point.mean_ms),
                            thousands(point.open_connections),
                            point.errors
                        ));
                        if point.achieved < 0.9 * parameters.rate {
                            warnings.push(format!(
                                "{what}: only {} of {} requests/s were answered",
                                thousands(point.achieved),
                                thousands(parameters.rate)
                            ));
                        }
                        if point.errors > 0 {
                            warnings.push(format!("{what}: {} requests failed", point.errors));
                        }
                        raw_files.extend(raw);
                        points.push(Point {
                            round,
                            backend,
                            robots: robots_index,
                            ..point
                        });
                    }
                    Err(error) => {
                        let message = format!("{what} failed: {error:#}");
                        context.progress(&format!("warning: {message}"));
                        warnings.push(message);
                    }
                }
            }
        }
    }
    anyhow::ensure!(
        !points.is_empty(),
        "no point could be measured: {}",
        warnings.join("; ")
    );
    let mut record = context.record(
        "Robots: proxy CPU and response time vs concurrent (mostly idle) connections, per backend",
        &["seed 002 Fig. 4", "seed 002 Fig. 5", "seed 002 Fig. 6"],
        format!(
            "coldwire proxy (reverse, one worker, cache on{}) in front of coldwire origin (objects `{}`, no think \
             time), reached through coldwire wan ({} round trip, {} loss). coldwire bench{} holds N idle robot \
             connections through the relay (`--cold N`) and sends {} requests/s (open loop) for one cached object \
             (100% hits) over {} keep-alive connections through the same relay. Per point a fresh proxy and relay, \
             {} s warm-up, {} s measured; backends interleaved, order reversed in even rounds; {} round(s), medians \
             shown. Scaled to this machine (20,000 open files per process): a relay holds two descriptors per \
             robot, so the robots are shared out among ceil(N / {}) relay processes (10,000 robots: {}); the \
             generator holds one per robot plus its {} active connections, the proxy one per robot plus its \
             origin connections.",
            pinning
                .server_cpu
                .map_or(String::new(), |cpu| format!(", pinned to CPU {cpu}")),
            parameters.object,
            parameters.rtt,
            parameters.loss,
            pinning
                .generator_cpu
                .map_or(String::new(), |cpu| format!(" (with origin and relay, on CPU {cpu})")),
            thousands(parameters.rate),
            parameters.active_connections,
            parameters.warmup,
            parameters.duration,
            rounds,
            thousands(parameters.robots_per_relay as f64),
            relays_for(10_000, parameters.robots_per_relay),
            parameters.active_connections,
        ),
    );
    record.parameters = serde_json::to_value(&parameters)?;
    record.raw_files = raw_files;
    summarise(&mut record, &parameters, &backends, &points);
    record.warnings = warnings;
    Ok(record)
}

/// One point: a fresh proxy on `backend` and a relay before it, the bench with `robots`
/// idle connections through the relay.
fn measure_point(
    context: &RunContext,
    parameters: &Parameters,
    target: &Target<'_>,
    pinning: Pinning,
    backend: &str,
    robots: u64,
    round: u64,
) -> anyhow::Result<(Point, Vec<String>)> {
    let contender = Contender::ColdwireProxy {
        label: backend.to_owned(),
        flags: vec!["--io".into(), backend.into()],
    };
    let mut running = contenders::start(&contender, target)?;
    let stats_url = running
        .stats_url
        .clone()
        .context("the proxy printed no stats URL")?;
    // Several relays when one cannot hold every robot's pair of descriptors; the active
    // connections go through the first, the robots are shared out among all of them.
    let mut relays = Vec::new();
    let mut relay_addresses = Vec::new();
    for _ in 0..relays_for(robots, parameters.robots_per_relay) {
        let relay_args: Vec<String> = vec![
            "wan".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--to".into(),
            running.address.to_string(),
            "--rtt".into(),
            parameters.rtt.clone(),
            "--loss".into(),
            parameters.loss.clone(),
            "--workers".into(),
            "1".into(),
        ];
        let (relay, address) = start_listening(
            &context.coldwire,
            &relay_args,
            pinning.generator_cpu,
            "wan listening on http://",
        )?;
        relays.push(relay);
        relay_addresses.push(address);
    }
    let relay_address = relay_addresses[0];
    let mut args = vec![
        format!("--url=http://{relay_address}/obj/1"),
        format!("--rate={}", parameters.rate),
        format!("--connections={}", parameters.active_connections),
        format!("--cold={robots}"),
        "--timeout=10".to_owned(),
        format!("--warmup={}", parameters.warmup),
        format!("--duration={}", parameters.duration),
    ];
    args.extend(
        relay_addresses
            .iter()
            .map(|address| format!("--cold-target={address}")),
    );
    let halfway = Duration::from_secs_f64(parameters.warmup + parameters.duration / 2.0);
    let sampler = {
        let url = stats_url.clone();
        std::thread::spawn(move || {
            std::thread::sleep(halfway);
            stats(&url).ok()
        })
    };
    let stem = format!("{backend}-{robots}-r{round}");
    let timeout = Duration::from_secs_f64(120.0 + 2.0 * (parameters.warmup + parameters.duration));
    let measured = contenders::measure(
        context,
        &mut running,
        args,
        pinning.generator_cpu,
        &stem,
        timeout,
    );
    let middle = sampler.join().ok().flatten();
    running.stop();
    for mut relay in relays {
        relay.stop_within(Duration::from_secs(5));
    }
    let (document, raw) = measured?;
    let phase = document.phase()?;
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(context.dir.join(&raw))?)?;
    let mean_us = json["runs"][0]["phases"]
        .as_array()
        .and_then(|phases| {
            phases
                .iter()
                .find(|candidate| candidate["label"] == phase.label.as_str())
        })
        .and_then(|found| found["latency"]["corrected"]["mean_us"].as_f64())
        .unwrap_or(f64::NAN);
    let point = Point {
        round,
        backend: 0,
        robots: 0,
        cpu_us: phase
            .server
            .as_ref()
            .map_or(f64::NAN, |server| server.cpu_us_per_request),
        cpu_cores: phase
            .server
            .as_ref()
            .map_or(f64::NAN, |server| server.cpu_cores),
        mean_ms: mean_us / 1000.0,
        achieved: phase.achieved_rate,
        errors: phase.errors_total,
        open_connections: middle
            .as_ref()
            .and_then(|stats| stats["total"]["loop"]["open_connections"].as_f64())
            .unwrap_or(f64::NAN),
    };
    Ok((point, vec![raw, format!("raw/{stem}.txt")]))
}

fn median_of(
    points: &[Point],
    backend: usize,
    robots: usize,
    value: impl Fn(&Point) -> f64,
) -> f64 {
    median(
        &points
            .iter()
            .filter(|point| point.backend == backend && point.robots == robots)
            .map(value)
            .filter(|value| value.is_finite())
            .collect::<Vec<_>>(),
    )
}

/// Fig. 6's 100·(1 − A/B) of mean response time, median of per-round values.
fn reduction(points: &[Point], a: usize, b: usize, robots: usize) -> f64 {
    let of = |round: u64, backend: usize| {
        points
            .iter()
            .find(|point| {
                point.round == round && point.backend == backend && point.robots == robots
            })
            .map(|point| point.mean_ms)
    };
    let last = points.iter().map(|point| point.round).max().unwrap_or(0);
    median(
        &(1..=last)
            .filter_map(|round| match (of(round, a), of(round, b)) {
                (Some(a), Some(b)) if b > 0.0 => Some(100.0 * (1.0 - a / b)),
                _ => None,
            })
            .collect::<Vec<_>>(),
    )
}

fn summarise(
    record: &mut ExperimentRecord,
    parameters: &Parameters,
    backends: &[String],
    points: &[Point],
) {
    let counts = parameters.robots.len();
    let x = |backend: usize, robots: usize| {
        let open = median_of(points, backend, robots, |point| point.open_connections);
        if open.is_finite() {
            open
        } else {
            parameters.robots[robots] as f64
        }
    };
    let per_backend = |value: fn(&Point) -> f64| -> Vec<coldwire_report::Series> {
        backends
            .iter()
            .enumerate()
            .map(|(backend, name)| {
                series(
                    name,
                    (0..counts).map(|robots| {
                        (
                            x(backend, robots),
                            median_of(points, backend, robots, value),
                        )
                    }),
                )
            })
            .collect()
    };
    record.figures.push(figure(
        "cpu",
        "Proxy CPU vs concurrent connections at a fixed request rate (100% hits)",
        Some("seed 002 Fig. 4"),
        axis("open connections at the proxy", "connections", Scale::Log),
        axis("proxy CPU", "% of a core", Scale::Linear),
        per_backend(|point| point.cpu_cores * 100.0),
        "Median over rounds. The work (requests/s, all hits) is the same at every point: only the idle \
         connections grow. Flat is scalable.",
    ));
    record.figures.push(figure(
        "cpu-per-request",
        "Proxy CPU per request vs concurrent connections",
        Some("seed 002 Fig. 5"),
        axis("open connections at the proxy", "connections", Scale::Log),
        axis("proxy CPU per request", "µs", Scale::Linear),
        per_backend(|point| point.cpu_us),
        "Median over rounds; CPU per request is the robust figure on this shared machine.",
    ));
    let reference = backends
        .iter()
        .position(|name| *name == parameters.reference);
    if let Some(reference) = reference {
        record.figures.push(figure(
            "response-time-reduction",
            &format!("Reduction of mean response time relative to {}: 100·(1 − A/B)", parameters.reference),
            Some("seed 002 Fig. 6"),
            axis("idle robot connections", "robots", Scale::Log),
            axis("mean response time reduction", "%", Scale::Linear),
            backends
                .iter()
                .enumerate()
                .filter(|(backend, _)| *backend != reference)
                .map(|(backend, name)| {
                    series(
                        &format!("{name} vs {}", parameters.reference),
                        (0..counts).map(|robots| {
                            (parameters.robots[robots] as f64, reduction(points, backend, reference, robots))
                        }),
                    )
                })
                .collect(),
            "Median of per-round values (A and B measured side by side). Above 0: A answers faster than B. \
             Response times include the relay's 80 ms round trip.",
        ));
    }
    let mut columns = vec!["robots".to_owned(), "open connections".to_owned()];
    for name in backends {
        columns.push(format!("{name} µs/request"));
        columns.push(format!("{name} mean ms"));
    }
    columns.push("failed requests".to_owned());
    let rows = (0..counts)
        .map(|robots| {
            let open: Vec<f64> = (0..backends.len())
                .map(|backend| x(backend, robots))
                .collect();
            let mut row = vec![
                thousands(parameters.robots[robots] as f64),
                thousands(median(&open)),
            ];
            for backend in 0..backends.len() {
                row.push(short(median_of(points, backend, robots, |point| {
                    point.cpu_us
                })));
                row.push(short(median_of(points, backend, robots, |point| {
                    point.mean_ms
                })));
            }
            let failed: u64 = points
                .iter()
                .filter(|point| point.robots == robots)
                .map(|point| point.errors)
                .sum();
            row.push(failed.to_string());
            row
        })
        .collect();
    record.tables.push(Table {
        title: "Proxy CPU per request and mean response time per backend (medians over rounds)"
            .to_owned(),
        columns,
        rows,
    });
    findings(record, parameters, backends, points, reference);
}

fn findings(
    record: &mut ExperimentRecord,
    parameters: &Parameters,
    backends: &[String],
    points: &[Point],
    reference: Option<usize>,
) {
    let last = parameters.robots.len() - 1;
    for (backend, name) in backends.iter().enumerate() {
        let first = median_of(points, backend, 0, |point| point.cpu_us);
        let most = median_of(points, backend, last, |point| point.cpu_us);
        if first.is_finite() && most.is_finite() && first > 0.0 {
            record.findings.push(format!(
                "{name}: proxy CPU per request {} µs with {} robots, {} µs with {} ({:+.0}%).",
                short(first),
                thousands(parameters.robots[0] as f64),
                short(most),
                thousands(parameters.robots[last] as f64),
                (most / first - 1.0) * 100.0
            ));
        }
    }
    if let Some(reference) = reference {
        for (backend, name) in backends
            .iter()
            .enumerate()
            .filter(|(backend, _)| *backend != reference)
        {
            let value = reduction(points, backend, reference, last);
            if value.is_finite() {
                record.findings.push(format!(
                    "With {} robots, {name}'s mean response time is {:.1}% {} than {}'s (Fig. 6's 100·(1 − A/B) = {:.1}).",
                    thousands(parameters.robots[last] as f64),
                    value.abs(),
                    if value >= 0.0 { "lower" } else { "higher" },
                    parameters.reference,
                    value
                ));
            }
        }
    }
    let failed: u64 = points.iter().map(|point| point.errors).sum();
    record.findings.push(if failed == 0 {
        "No request failed.".to_owned()
    } else {
        format!("{failed} requests failed over the run (see the warnings).")
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn robots_are_shared_out_among_relays_within_their_descriptors() {
        assert_eq!(relays_for(0, 4_000), 1, "the active connections need one");
        assert_eq!(relays_for(250, 4_000), 1);
        assert_eq!(relays_for(4_000, 4_000), 1);
        assert_eq!(relays_for(5_000, 4_000), 2);
        assert_eq!(relays_for(10_000, 4_000), 3);
        assert_eq!(relays_for(10, 0), 10, "a zero share is read as one");
    }
}
