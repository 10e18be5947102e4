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
//! The peers (`peers`: Squid as an accelerator, Varnish, nginx proxy_cache, HAProxy's cache,
//! from the `peers` experiment's committed configurations: one worker or thread pool, a
//! memory cache) run in the same rounds under the same load, in front of the same origin.
//!
//! Per point (contender × robots × round): a fresh proxy and relay; the backends and peers
//! interleaved within each robot count, their order reversed in even rounds. The summary is
//! in [`summary`].

mod summary;

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use coldwire_report::ExperimentRecord;
use serde::{Deserialize, Serialize};

use crate::RunContext;
use crate::figures::{machine_load_warning, short, thousands};
use crate::peers::contenders::{self, Contender, Target};
use crate::peers::install;
use crate::process::start_listening;
use crate::serve::{Pinning, available_backends};
use crate::slow_clients::stats;

/// The scenario's parameters (`experiments/robots.toml`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Parameters {
    /// Backends of the proxy, in plotting order.
    pub backends: Vec<String>,
    /// Peers measured beside them (`squid`, `varnish`, `nginx`, `haproxy`), plotted after
    /// them; none when absent.
    #[serde(default)]
    pub peers: Vec<String>,
    /// Install missing peers with apt-get without being asked (as `--install-peers`);
    /// false when absent.
    #[serde(default)]
    pub install: bool,
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

/// A peer of the scenario as the reverse caching proxy it means (the `peers` experiment's
/// cache-hit contenders).
fn peer_contender(name: &str) -> anyhow::Result<Contender> {
    Contender::cache_peer(name, "peer", "experiments/robots.toml")
}

/// One measured point.
#[derive(Clone, Debug)]
struct Point {
    round: u64,
    /// Index in the contenders: the backends, then the peers.
    contender: usize,
    robots: usize,
    /// Proxy CPU per request, µs, and in cores.
    cpu_us: f64,
    cpu_cores: f64,
    /// Mean response time, ms.
    mean_ms: f64,
    achieved: f64,
    errors: u64,
    /// The proxy's open connections halfway through (or, when the robots were not all
    /// open yet, the most read after that up to the end of the run).
    open_connections: f64,
    /// Robots whose connection the proxy (through the relay) closed during the run.
    robots_lost: u64,
}

/// Runs the experiment.
pub fn run(context: &RunContext) -> anyhow::Result<ExperimentRecord> {
    let parameters: Parameters = context.parameters()?;
    anyhow::ensure!(
        !parameters.backends.is_empty() && !parameters.robots.is_empty() && parameters.rate > 0.0,
        "the scenario needs backends, robot counts and a positive rate"
    );
    let (backends, mut warnings) = available_backends(&parameters.backends)?;
    let peers: Vec<Contender> = parameters
        .peers
        .iter()
        .map(|name| peer_contender(name))
        .collect::<anyhow::Result<_>>()?;
    let mut programs = Vec::new();
    for program in peers.iter().filter_map(Contender::program) {
        if !programs.contains(&program) {
            programs.push(program);
        }
    }
    let peer_warnings = install::ensure(
        &programs,
        parameters.install || context.install_peers,
        &|line| context.progress(line),
    );
    for warning in &peer_warnings {
        context.progress(&format!("warning: {warning}"));
    }
    warnings.extend(peer_warnings);
    warnings.extend(machine_load_warning());
    // The contenders: every backend's proxy, then every installed peer.
    let mut contenders: Vec<Contender> = backends
        .iter()
        .map(|backend| Contender::ColdwireProxy {
            label: backend.clone(),
            flags: vec!["--io".into(), backend.clone()],
        })
        .collect();
    contenders.extend(peers.into_iter().filter(|peer| {
        peer.program()
            .is_some_and(|program| install::find(program.binary).is_some())
    }));
    let names: Vec<String> = contenders.iter().map(Contender::name).collect();
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
            let mut order: Vec<usize> = (0..contenders.len()).collect();
            if round % 2 == 0 {
                order.reverse();
            }
            for contender in order {
                let name = &names[contender];
                let what = format!(
                    "{name} with {} robots, round {round}",
                    thousands(robots as f64)
                );
                context.progress(&format!("round {round}/{rounds}: {what}"));
                let measured = measure_point(
                    context,
                    &parameters,
                    &target,
                    pinning,
                    &contenders[contender],
                    robots,
                    round,
                );
                match measured {
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
                        if point.robots_lost > 0 {
                            warnings.push(format!(
                                "{what}: {} robot connections were closed by the proxy during the run",
                                point.robots_lost
                            ));
                        }
                        raw_files.extend(raw);
                        points.push(Point {
                            round,
                            contender,
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
        "Robots: proxy CPU and response time vs concurrent (mostly idle) connections, per backend and peer",
        &["seed 002 Fig. 4", "seed 002 Fig. 5", "seed 002 Fig. 6"],
        format!(
            "coldwire proxy (reverse, one worker, cache on{}) in front of coldwire origin (objects `{}`, no think \
             time), reached through coldwire wan ({} round trip, {} loss). coldwire bench{} holds N idle robot \
             connections through the relay (`--cold N`) and sends {} requests/s (open loop) for one cached object \
             (100% hits) over {} keep-alive connections through the same relay. Per point a fresh proxy and relay, \
             {} s warm-up, {} s measured; backends (and peers) interleaved, order reversed in even rounds; {} round(s), medians \
             shown. Scaled to this machine (20,000 open files per process): a relay holds two descriptors per \
             robot, so the robots are shared out among ceil(N / {}) relay processes (10,000 robots: {}); the \
             generator holds one per robot plus its {} active connections, the proxy one per robot plus its \
             origin connections.{}",
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
            peers_description(&names[backends.len()..]),
        ),
    );
    record.parameters = serde_json::to_value(&parameters)?;
    record.raw_files = raw_files;
    summary::summarise(
        &mut record,
        &summary::Measured {
            parameters: &parameters,
            names: &names,
            backends: backends.len(),
            points: &points,
        },
    );
    record.warnings = warnings;
    Ok(record)
}

/// The description's sentence on the peers measured (none: nothing).
fn peers_description(peers: &[String]) -> String {
    if peers.is_empty() {
        return String::new();
    }
    format!(
        " In the same rounds under the same load, in front of the same origin: {} (the `peers` experiment's \
         committed configurations under experiments/peers/: one worker or thread pool, a memory cache, \
         idle connections kept; CPU of all their processes and threads; their open connections counted \
         in /proc/net/tcp).",
        peers.join(", ")
    )
}

/// The established TCP connections whose local port is `port` (IPv4, this network
/// namespace): a peer's open client connections, which it has no stats endpoint to report.
fn established_on(port: u16) -> anyhow::Result<u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").context("cannot read /proc/net/tcp")?;
    let port = format!(":{port:04X}");
    Ok(table
        .lines()
        .skip(1)
        .filter(|line| {
            let mut fields = line.split_whitespace();
            let local = fields.nth(1).unwrap_or_default();
            // local address, remote address, state (01: established).
            local.ends_with(&port) && fields.nth(1) == Some("01")
        })
        .count() as u64)
}

/// One point: a fresh `contender` and a relay before it, the bench with `robots` idle
/// connections through the relay.
fn measure_point(
    context: &RunContext,
    parameters: &Parameters,
    target: &Target<'_>,
    pinning: Pinning,
    contender: &Contender,
    robots: u64,
    round: u64,
) -> anyhow::Result<(Point, Vec<String>)> {
    let mut running = contenders::start(contender, target)?;
    let stats_url = running.stats_url.clone();
    let port = running.address.port();
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
    let end = Duration::from_secs_f64(parameters.warmup + parameters.duration);
    // The open connections halfway: coldwire's from its stats, a peer's from the kernel.
    // Until they include every robot (a generator or relay starved of CPU can still be
    // opening them), read again every 100 ms up to the end of the run, keeping the most:
    // one read when all is well, so the proxy's CPU is not spent answering reads.
    let sampler = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        std::thread::sleep(halfway);
        let read = || match &stats_url {
            Some(url) => stats(url)
                .ok()
                .and_then(|stats| stats["total"]["loop"]["open_connections"].as_f64()),
            None => established_on(port).ok().map(|open| open as f64),
        };
        let mut most = read();
        while most.is_none_or(|open| open < robots as f64) && started.elapsed() < end {
            std::thread::sleep(Duration::from_millis(100));
            most = match (most, read()) {
                (Some(most), Some(open)) => Some(most.max(open)),
                (most, open) => most.or(open),
            };
        }
        most
    });
    let stem = format!("{}-{robots}-r{round}", contender.name().replace(' ', "-"));
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
        contender: 0,
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
        open_connections: middle.unwrap_or(f64::NAN),
        robots_lost: json["runs"][0]["cold"]["closed_by_server"]
            .as_u64()
            .unwrap_or(0),
    };
    Ok((point, vec![raw, format!("raw/{stem}.txt")]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_the_cache_hit_contenders_and_unknown_ones_say_which_exist() {
        assert_eq!(peer_contender("squid").unwrap(), Contender::Squid);
        assert_eq!(peer_contender("varnish").unwrap(), Contender::Varnish);
        assert_eq!(
            peer_contender("nginx").unwrap(),
            Contender::NginxProxy { cache: true }
        );
        let error = peer_contender("apache").unwrap_err().to_string();
        assert!(
            error.contains("squid, varnish, nginx or haproxy"),
            "{error}"
        );
    }

    #[test]
    fn counts_established_connections_on_a_listening_port() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(
            established_on(port).unwrap(),
            0,
            "the listener is not counted"
        );
        let _client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (_server, _) = listener.accept().unwrap();
        assert_eq!(established_on(port).unwrap(), 1, "only the server side is");
    }

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
