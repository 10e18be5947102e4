//! The `slow-clients` experiment (issue 19): `coldwire proxy` (reverse, one worker, pinned
//! to the server CPU) in front of `coldwire origin`, which answers every request after a
//! think time (PolyMix-4's 2.5 s ± 1 s by default), driven by `coldwire bench` at a fixed
//! open-loop rate with a new client connection per request (`--requests-per-connection
//! 1`, as HTTP/1.0 robots do). Every request is a miss (`/obj/{seq}`), so each holds a
//! client connection and an upstream connection for the whole think time: the number of
//! concurrent connections grows with the offered rate (Little's law: rate × think time of
//! each), while the work per request stays the same. A backend that scales keeps its CPU
//! per request flat as the rate — and so the connections — grow.
//!
//! Per point (backend × rate × round): a fresh proxy; the bench measures the proxy's CPU
//! per request (`--server-pid`, schedstat) and its counters; halfway through the measured
//! phase the proxy's open connections are read from its stats (the x axis), and after the
//! run its cancellations and 503s. The backends are interleaved within each rate, their
//! order reversed in even rounds, so a drift in the machine's other load does not follow
//! one backend; the ratios to epoll are medians of per-round ratios.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use coldwire_process::Process;
use coldwire_report::ExperimentRecord;
use serde::{Deserialize, Serialize};

mod summary;

use crate::RunContext;
use crate::figures::{machine_load_warning, short, thousands};
use crate::peers::contenders::{self, Contender, Target};
use crate::peers::origin::get;
use crate::process::start_listening;
use crate::serve::{Pinning, available_backends};

/// The most connections the generator opens: it checks its open-files limit (20,000 here)
/// against them before it starts.
const MAX_GENERATOR_CONNECTIONS: u64 = 16_000;

/// The scenario's parameters (`experiments/slow-clients.toml`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Parameters {
    /// Backends of the proxy, in plotting order.
    pub backends: Vec<String>,
    /// Offered rates, requests/s (open loop, constant arrivals).
    pub rates: Vec<f64>,
    /// The origin's mean think time, seconds.
    pub think: f64,
    /// Its standard deviation, seconds.
    pub think_sd: f64,
    /// The origin's objects (`coldwire origin --mix`).
    pub object: String,
    /// Requests per client connection (1: a new connection per request).
    pub requests_per_connection: u64,
    /// Seconds of load before measuring (the connections build up over one think time).
    pub warmup: f64,
    /// Measured seconds per point.
    pub duration: f64,
    /// Repetitions of the grid.
    pub rounds: u64,
    /// The rate at which the uring / epoll ratio is held against its aim.
    pub reference_rate: f64,
    /// The aim for uring / epoll at `reference_rate` (issue 19: 0.8).
    pub aim_ratio: f64,
    #[serde(default)]
    pub pinning: Option<Pinning>,
    /// Named variants of a backend, usable in `backends` by their label: more proxy flags
    /// (`--uring-min-wait 250us`) or another coldwire binary (a before/after comparison in
    /// one run).
    #[serde(default)]
    pub variants: Vec<Variant>,
}

/// A backend run with more flags, or by another binary, under its own label.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Variant {
    /// The name in `backends`, tables and legends.
    pub label: String,
    /// The proxy's `--io`.
    pub backend: String,
    /// More flags for `coldwire proxy`.
    #[serde(default)]
    pub flags: Vec<String>,
    /// Another coldwire binary for the proxy (default: the one running the experiment).
    #[serde(default)]
    pub binary: Option<std::path::PathBuf>,
}

/// How a name in `backends` is run: its `--io`, more flags, and the binary if not ours.
fn resolve<'a>(
    parameters: &'a Parameters,
    name: &'a str,
) -> (&'a str, &'a [String], Option<&'a Path>) {
    match parameters
        .variants
        .iter()
        .find(|variant| variant.label == name)
    {
        Some(variant) => (&variant.backend, &variant.flags, variant.binary.as_deref()),
        None => (name, &[], None),
    }
}

/// One measured point.
#[derive(Clone, Debug)]
pub(crate) struct Point {
    pub round: u64,
    pub backend: usize,
    pub rate: usize,
    /// Proxy CPU per answered request, µs.
    pub cpu_us: f64,
    /// Requests/s answered.
    pub achieved: f64,
    /// Failed requests (timeouts, resets, non-2xx).
    pub errors: u64,
    /// The proxy's open connections (clients + upstream) halfway through the measurement.
    pub open_connections: f64,
    /// System calls per request (the proxy's counters).
    pub syscalls_per_request: f64,
    /// Cancellations per request submitted by the uring driver (`None`: not counted by
    /// this build).
    pub cancellations_per_request: Option<f64>,
    /// Requests answered 503 for want of connections (`None`: not counted by this build).
    pub limit_503s: Option<u64>,
    /// The uring driver's ring pressure over the whole point (`None`: not counted by this
    /// build): receives ended by `ENOBUFS` per request, completions that overflowed the
    /// completion queue, enters forced by a full submission queue.
    pub ring_pressure: Option<RingPressure>,
}

/// How hard the uring driver's queues and receive buffer ring were pressed in one point.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RingPressure {
    /// Receives ended by `ENOBUFS` (the buffer ring was empty), per request.
    pub no_buffers_per_request: f64,
    /// Completions that found the completion queue full.
    pub cq_overflows: u64,
    /// `io_uring_enter` calls made because the submission queue was full.
    pub sq_full_enters: u64,
}

/// `coldwire origin` with the scenario's think time, pinned to the generator's CPU.
struct ThinkingOrigin {
    /// The running origin, stopped when this is dropped.
    _process: Process,
    address: SocketAddr,
}

impl ThinkingOrigin {
    fn start(
        coldwire: &Path,
        parameters: &Parameters,
        cpu: Option<usize>,
    ) -> anyhow::Result<ThinkingOrigin> {
        let args = [
            "origin".to_owned(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--workers".into(),
            "1".into(),
            "--io".into(),
            "epoll".into(),
            "--mix".into(),
            parameters.object.clone(),
            "--think".into(),
            format!("{}s", parameters.think),
            "--think-sd".into(),
            format!("{}s", parameters.think_sd),
            "--idle-timeout".into(),
            "600".into(),
        ];
        let (process, address) =
            start_listening(coldwire, &args, cpu, "origin listening on http://")
                .context("cannot start the origin (coldwire origin)")?;
        Ok(ThinkingOrigin {
            _process: process,
            address,
        })
    }
}

/// The stats document at `url` (`http://ADDR/stats`).
pub(crate) fn stats(url: &str) -> anyhow::Result<serde_json::Value> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("unexpected stats URL {url}"))?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let address: SocketAddr = host
        .parse()
        .with_context(|| format!("unexpected stats address in {url}"))?;
    let (_, body) = get(address, &format!("/{path}"))?;
    serde_json::from_slice(&body).with_context(|| format!("the stats at {url} are not JSON"))
}

/// Runs the experiment.
pub fn run(context: &RunContext) -> anyhow::Result<ExperimentRecord> {
    let parameters: Parameters = context.parameters()?;
    anyhow::ensure!(
        !parameters.backends.is_empty()
            && !parameters.rates.is_empty()
            && parameters.rates.iter().all(|rate| *rate > 0.0)
            && parameters.think >= 0.0,
        "the scenario needs backends, positive rates and a think time"
    );
    let mechanisms: Vec<String> = parameters
        .backends
        .iter()
        .map(|name| resolve(&parameters, name).0.to_owned())
        .collect();
    let (available, mut warnings) = available_backends(&mechanisms)?;
    let backends: Vec<String> = parameters
        .backends
        .iter()
        .zip(&mechanisms)
        .filter(|(_, mechanism)| available.contains(mechanism))
        .map(|(name, _)| name.clone())
        .collect();
    warnings.extend(machine_load_warning());
    let pinning = parameters.pinning.unwrap_or_default();
    let origin = ThinkingOrigin::start(&context.coldwire, &parameters, pinning.generator_cpu)?;
    let target = Target {
        coldwire: &context.coldwire,
        root: Path::new("/"),
        origin: Some(origin.address),
        cpu: pinning.server_cpu,
    };
    let rounds = parameters.rounds.max(1);
    let mut raw_files = Vec::new();
    let mut points = Vec::new();
    for round in 1..=rounds {
        for (rate_index, &rate) in parameters.rates.iter().enumerate() {
            let mut order: Vec<usize> = (0..backends.len()).collect();
            if round % 2 == 0 {
                order.reverse();
            }
            for backend_index in order {
                let backend = &backends[backend_index];
                context.progress(&format!(
                    "round {round}/{rounds}: {backend} at {} requests/s",
                    thousands(rate)
                ));
                let what = format!("{backend} at {} requests/s, round {round}", thousands(rate));
                let stem = format!("{backend}-{rate}-r{round}");
                let outcome = measure_point(
                    context,
                    &parameters,
                    &target,
                    pinning.generator_cpu,
                    (backend, rate),
                    &stem,
                );
                let Some((point, raw)) = outcome
                    .map(|(point, raw)| {
                        (
                            Point {
                                round,
                                backend: backend_index,
                                rate: rate_index,
                                ..point
                            },
                            raw,
                        )
                    })
                    .map_err(|error| {
                        let message = format!("{what} failed: {error:#}");
                        context.progress(&format!("warning: {message}"));
                        warnings.push(message);
                    })
                    .ok()
                else {
                    continue;
                };
                raw_files.extend(raw);
                context.progress(&format!(
                    "  {} µs proxy CPU per request, {} requests/s, {} open connections, {} errors",
                    short(point.cpu_us),
                    thousands(point.achieved),
                    thousands(point.open_connections),
                    point.errors
                ));
                if point.achieved < 0.95 * rate {
                    warnings.push(format!(
                        "{what}: only {} of {} requests/s were answered",
                        thousands(point.achieved),
                        thousands(rate)
                    ));
                }
                if point.errors > 0 {
                    warnings.push(format!("{what}: {} requests failed", point.errors));
                }
                points.push(point);
            }
        }
    }
    drop(origin);
    anyhow::ensure!(
        !points.is_empty(),
        "no point could be measured: {}",
        warnings.join("; ")
    );
    let mut record = context.record(
        "Slow clients: proxy CPU per request vs concurrent connections, per backend",
        &["issue 19"],
        summary::description(&parameters, pinning, rounds),
    );
    record.parameters = serde_json::to_value(&parameters)?;
    record.raw_files = raw_files;
    summary::summarise(&mut record, &parameters, &backends, &points);
    record.warnings = warnings;
    Ok(record)
}

/// One point: a fresh proxy on `backend`, the bench at `rate`, the proxy's stats sampled
/// halfway and at the end. Returns the point (round and indices left to the caller) and
/// its raw files.
fn measure_point(
    context: &RunContext,
    parameters: &Parameters,
    target: &Target<'_>,
    generator_cpu: Option<usize>,
    (backend, rate): (&str, f64),
    stem: &str,
) -> anyhow::Result<(Point, Vec<String>)> {
    let (mechanism, extra, binary) = resolve(parameters, backend);
    let mut flags = vec!["--io".to_owned(), mechanism.to_owned()];
    flags.extend(extra.iter().cloned());
    let contender = Contender::ColdwireProxy {
        label: backend.to_owned(),
        flags,
    };
    let target = Target {
        coldwire: binary.unwrap_or(target.coldwire),
        ..*target
    };
    let mut running = contenders::start(&contender, &target)?;
    let stats_url = running
        .stats_url
        .clone()
        .context("the proxy printed no stats URL")?;
    // The longest a request can take: the think time's tail plus a margin.
    let longest = parameters.think + 4.0 * parameters.think_sd + 5.0;
    // Enough connections for every request in flight at once (rate × the think time's
    // tail), within the generator's own descriptors.
    let connections = ((rate * (parameters.think + 3.0 * parameters.think_sd + 1.0)).ceil() as u64
        + 64)
        .min(MAX_GENERATOR_CONNECTIONS);
    let args = vec![
        "--url=http://{}/obj/{seq}".to_owned(),
        format!("--rate={rate}"),
        "--arrivals=constant".to_owned(),
        format!("--connections={connections}"),
        format!(
            "--requests-per-connection={}",
            parameters.requests_per_connection
        ),
        format!("--timeout={longest}"),
        format!("--warmup={}", parameters.warmup),
        format!("--duration={}", parameters.duration),
    ]
    .into_iter()
    .map(|arg| arg.replace("{}", &running.address.to_string()))
    .collect();
    let halfway = Duration::from_secs_f64(parameters.warmup + parameters.duration / 2.0);
    let sampler = {
        let url = stats_url.clone();
        std::thread::spawn(move || {
            std::thread::sleep(halfway);
            stats(&url).ok()
        })
    };
    let timeout = Duration::from_secs_f64(60.0 + 2.0 * (parameters.warmup + parameters.duration));
    let measured = contenders::measure(context, &mut running, args, generator_cpu, stem, timeout);
    let middle = sampler.join().ok().flatten();
    let end = stats(&stats_url).ok();
    running.stop();
    let (document, raw) = measured?;
    let phase = document.phase()?;
    let open_connections = middle
        .as_ref()
        .and_then(|stats| stats["total"]["loop"]["open_connections"].as_f64())
        .unwrap_or(f64::NAN);
    let total = |section: &str, name: &str| {
        end.as_ref()
            .and_then(|stats| stats["total"][section][name].as_u64())
    };
    let requests = total("http", "requests").unwrap_or(0).max(1) as f64;
    let point = Point {
        round: 0,
        backend: 0,
        rate: 0,
        cpu_us: phase
            .server
            .as_ref()
            .map_or(f64::NAN, |server| server.cpu_us_per_request),
        achieved: phase.achieved_rate,
        errors: phase.errors_total,
        open_connections,
        syscalls_per_request: phase
            .server_counters
            .as_ref()
            .map_or(f64::NAN, |counters| counters.syscalls_per_request),
        cancellations_per_request: total("loop", "uring_cancellations")
            .map(|count| count as f64 / requests),
        limit_503s: total("http", "connection_limit_reached"),
        ring_pressure: total("loop", "uring_recv_no_buffers").map(|no_buffers| RingPressure {
            no_buffers_per_request: no_buffers as f64 / requests,
            cq_overflows: total("loop", "uring_cq_overflows").unwrap_or(0),
            sq_full_enters: total("loop", "uring_sq_full_enters").unwrap_or(0),
        }),
    };
    Ok((point, vec![raw, format!("raw/{stem}.txt")]))
}
