//! The `polymix` experiment (seed 002 Figs 11–13): PolyMix-4 robots (`coldwire bench
//! --workload polymix`) through a forward proxy (one worker, pinned to the server CPU) to
//! `coldwire origin` servers behind `coldwire wan` relays (80 ms round trip, 0.05% loss:
//! PolyMix-4's server side). The proxies: `coldwire proxy` per backend and Squid
//! (`experiments/peers/squid-forward.conf.in`, configured equivalently), each with the
//! memory store and, in the disk variant, coldwire's disk store (`--cache-dir`) and Squid's
//! rock store. The robot count rises along a ladder (0.4 requests/s each: the request
//! rate, the seeds' x axis), every configuration measured at one rung before the next
//! rung; a configuration leaves the ladder once its proxy saturates (CPU at ~95% of its
//! core) or its response time breaks down ([`point::stop_reason`]). Per point: a fresh
//! proxy, the scenario's fill and top phases; from the top phase the proxy's CPU, the hit
//! and miss mean response times, document and byte hit ratios offered vs measured, and
//! errors.

mod point;
mod summary;

use std::net::SocketAddr;

use coldwire_report::ExperimentRecord;
use serde::{Deserialize, Serialize};

use crate::RunContext;
use crate::figures::{machine_load_warning, short, thousands};
use crate::peers::contenders::SQUID;
use crate::peers::install;
use crate::process::start_listening;
use crate::serve::{Pinning, available_backends};

use point::{Point, Proxy};

/// The scenario's parameters (`experiments/polymix.toml`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Parameters {
    /// Backends of `coldwire proxy` with the memory store, in plotting order.
    pub backends: Vec<String>,
    /// Backends with the disk store (`--cache-dir`); default: `backends`.
    #[serde(default)]
    pub disk_backends: Option<Vec<String>>,
    /// Squid beside coldwire in every store (rock in the disk variant).
    #[serde(default = "yes")]
    pub squid: bool,
    /// Install Squid with apt-get when it is missing (as `--install-peers`); otherwise it is
    /// skipped with a line saying how to install it.
    #[serde(default)]
    pub install: bool,
    /// The ladder of robot counts (request rate = 0.4/s × robots).
    pub robots: Vec<u64>,
    /// Stores: `memory`, `disk`.
    pub stores: Vec<String>,
    /// Origin servers, each behind its own relay.
    pub servers: u64,
    /// The origins' think time and its standard deviation, e.g. `2.5s`.
    pub think: String,
    pub think_sd: String,
    /// The relays' round trip and loss.
    pub rtt: String,
    pub loss: String,
    /// The memory cache (coldwire `--cache-bytes`, Squid `cache_mem`).
    pub cache_bytes: String,
    /// The largest object kept (coldwire `--max-object-bytes`, Squid
    /// `maximum_object_size[_in_memory]`).
    #[serde(default = "default_max_object")]
    pub max_object_bytes: String,
    /// The disk store's size (coldwire `--cache-dir-size`, Squid's rock `cache_dir`).
    #[serde(default = "default_cache_dir")]
    pub cache_dir_bytes: String,
    /// Seconds of the fill phase (half the robots) and of the top phase (measured).
    pub fill: f64,
    pub top: f64,
    /// A configuration leaves the ladder at this proxy CPU (cores).
    #[serde(default = "default_saturation_cpu")]
    pub saturation_cpu: f64,
    /// … or when its hit or miss mean response time exceeds this multiple of its value
    /// at the first rung and by 100 ms (or under 90% of the offered rate, and 10
    /// requests/s less, is answered, or over 1% fails).
    #[serde(default = "default_breakdown")]
    pub breakdown: f64,
    #[serde(default)]
    pub pinning: Option<Pinning>,
}

fn yes() -> bool {
    true
}
fn default_max_object() -> String {
    "8MiB".to_owned()
}
fn default_cache_dir() -> String {
    "1GiB".to_owned()
}
fn default_saturation_cpu() -> f64 {
    0.95
}
fn default_breakdown() -> f64 {
    3.0
}

/// One configuration: a store and a proxy.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub store: String,
    pub proxy: Proxy,
}

impl Config {
    /// `epoll (memory)`, `squid (disk: rock)`.
    pub fn name(&self) -> String {
        match (&self.proxy, self.store.as_str()) {
            (Proxy::Squid, "disk") => "squid (disk: rock)".to_owned(),
            (Proxy::Squid, store) => format!("squid ({store})"),
            (Proxy::Coldwire(backend), store) => format!("{backend} ({store})"),
        }
    }
}

fn owned(words: &[&str]) -> Vec<String> {
    words.iter().map(|word| (*word).to_owned()).collect()
}

/// The origins and their relays, stopped when dropped.
struct ServerSide {
    _processes: Vec<coldwire_process::Process>,
    relays: Vec<SocketAddr>,
}

fn start_server_side(
    context: &RunContext,
    parameters: &Parameters,
    pinning: Pinning,
) -> anyhow::Result<ServerSide> {
    let mut processes = Vec::new();
    let mut relays = Vec::new();
    for _ in 0..parameters.servers.max(1) {
        let mut args = owned(&[
            "origin",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--idle-timeout",
            "600",
        ]);
        args.extend([
            "--think".into(),
            parameters.think.clone(),
            "--think-sd".into(),
            parameters.think_sd.clone(),
        ]);
        let (origin, address) = start_listening(
            &context.coldwire,
            &args,
            pinning.generator_cpu,
            "origin listening on http://",
        )?;
        processes.push(origin);
        let mut args = owned(&["wan", "--listen", "127.0.0.1:0", "--workers", "1", "--to"]);
        args.extend([
            address.to_string(),
            "--rtt".into(),
            parameters.rtt.clone(),
            "--loss".into(),
            parameters.loss.clone(),
        ]);
        let (relay, address) = start_listening(
            &context.coldwire,
            &args,
            pinning.generator_cpu,
            "wan listening on http://",
        )?;
        processes.push(relay);
        relays.push(address);
    }
    Ok(ServerSide {
        _processes: processes,
        relays,
    })
}

/// The configurations, store by store: coldwire's backends, then Squid when it is there.
fn configurations(
    parameters: &Parameters,
    backends: &[String],
    disk_backends: &[String],
    squid: bool,
) -> Vec<Config> {
    let mut configs = Vec::new();
    for store in &parameters.stores {
        let chosen = if store == "disk" {
            disk_backends
        } else {
            backends
        };
        configs.extend(chosen.iter().map(|backend| Config {
            store: store.clone(),
            proxy: Proxy::Coldwire(backend.clone()),
        }));
        if squid {
            configs.push(Config {
                store: store.clone(),
                proxy: Proxy::Squid,
            });
        }
    }
    configs
}

/// Runs the experiment.
pub fn run(context: &RunContext) -> anyhow::Result<ExperimentRecord> {
    let parameters: Parameters = context.parameters()?;
    anyhow::ensure!(
        !parameters.backends.is_empty()
            && !parameters.robots.is_empty()
            && !parameters.stores.is_empty(),
        "the scenario needs backends, robot counts and stores"
    );
    anyhow::ensure!(
        parameters
            .stores
            .iter()
            .all(|store| store == "memory" || store == "disk"),
        "stores are `memory` and `disk`"
    );
    let (backends, mut warnings) = available_backends(&parameters.backends)?;
    let (disk_backends, _) = match &parameters.disk_backends {
        Some(names) => available_backends(names)?,
        None => (backends.clone(), Vec::new()),
    };
    warnings.extend(machine_load_warning());
    let squid = parameters.squid
        && {
            warnings.extend(install::ensure(
                &[SQUID],
                parameters.install || context.install_peers,
                &|message| context.progress(message),
            ));
            let found = install::find(SQUID.binary).is_some();
            if !found {
                context.progress(
                "Squid is not installed: skipped (apt-get install -y squid, or run with --install-peers)",
            );
            }
            found
        };
    let squid_version = squid.then(|| install::version(SQUID)).flatten();
    let pinning = parameters.pinning.unwrap_or_default();
    let server_side = start_server_side(context, &parameters, pinning)?;
    let scenario_path = context.raw_dir().join("scenario.toml");
    std::fs::create_dir_all(context.raw_dir())?;
    std::fs::write(&scenario_path, point::robots_scenario(&parameters))?;
    let configs = configurations(&parameters, &backends, &disk_backends, squid);
    let mut points: Vec<Point> = Vec::new();
    let mut stopped: Vec<Option<String>> = vec![None; configs.len()];
    let mut raw_files = vec!["raw/scenario.toml".to_owned()];
    for (rung, &robots) in parameters.robots.iter().enumerate() {
        // Interleaved: every configuration still climbing at this rung, the order reversed
        // on every other rung.
        let mut order: Vec<usize> = (0..configs.len()).collect();
        if rung % 2 == 1 {
            order.reverse();
        }
        for config in order {
            if stopped[config].is_some() {
                continue;
            }
            let what = format!(
                "{} with {} robots",
                configs[config].name(),
                thousands(robots as f64)
            );
            context.progress(&what);
            let measured = point::measure(
                context,
                &parameters,
                &server_side.relays,
                &scenario_path,
                pinning,
                &configs[config],
                robots,
            );
            match measured {
                Ok((point, raw)) => {
                    context.progress(&format!(
                        "  {} requests/s, {}% CPU, hits {} ms, misses {} ms, {} errors",
                        thousands(point.achieved),
                        short(point.cpu_cores * 100.0),
                        short(point.hit_ms),
                        short(point.miss_ms),
                        point.errors
                    ));
                    if point.errors > 0 {
                        warnings.push(format!("{what}: {} requests failed", point.errors));
                    }
                    raw_files.extend(raw);
                    let first = points
                        .iter()
                        .find(|earlier| earlier.config == config)
                        .cloned();
                    let point = Point {
                        config,
                        robots,
                        ..point
                    };
                    if let Some(reason) =
                        point::stop_reason(&point, first.as_ref().unwrap_or(&point), &parameters)
                    {
                        context.progress(&format!("  stops climbing: {reason}"));
                        stopped[config] = Some(reason);
                    }
                    points.push(point);
                }
                Err(error) => {
                    let message = format!("{what} failed: {error:#}");
                    context.progress(&format!("warning: {message}"));
                    stopped[config] = Some(format!(
                        "the point with {} robots failed (see the warnings)",
                        thousands(robots as f64)
                    ));
                    warnings.push(message);
                }
            }
        }
    }
    drop(server_side);
    anyhow::ensure!(
        !points.is_empty(),
        "no point could be measured: {}",
        warnings.join("; ")
    );
    let mut record = context.record(
        "PolyMix-4 through the proxy: CPU, hit and miss response time, hit ratios vs request rate, up to saturation",
        &["seed 002 Fig. 11", "seed 002 Fig. 12", "seed 002 Fig. 13"],
        summary::description(&parameters, pinning, squid_version.as_deref(), squid),
    );
    record.parameters = serde_json::to_value(&parameters)?;
    record.raw_files = raw_files;
    summary::summarise(&mut record, &parameters, &configs, &points, &stopped);
    record.warnings = warnings;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squid_joins_every_store_and_disk_has_its_own_backends() {
        let parameters: Parameters = toml::from_str(
            r#"
            backends = ["select", "epoll"]
            disk_backends = ["epoll"]
            robots = [10]
            stores = ["memory", "disk"]
            servers = 1
            think = "1s"
            think_sd = "0s"
            rtt = "80ms"
            loss = "0%"
            cache_bytes = "64MiB"
            fill = 1.0
            top = 1.0
            "#,
        )
        .unwrap();
        let names: Vec<String> = configurations(
            &parameters,
            &parameters.backends,
            parameters.disk_backends.as_deref().unwrap(),
            true,
        )
        .iter()
        .map(Config::name)
        .collect();
        assert_eq!(
            names,
            [
                "select (memory)",
                "epoll (memory)",
                "squid (memory)",
                "epoll (disk)",
                "squid (disk: rock)"
            ]
        );
        assert!(parameters.squid && !parameters.install);
        assert_eq!(parameters.saturation_cpu, 0.95);
    }
}
