//! The `polymix` experiment (seed 002 Figs 11–13): PolyMix-4 robots (`coldwire bench
//! --workload polymix`) through `coldwire proxy` (forward, one worker, pinned to the server
//! CPU) to `coldwire origin` servers behind `coldwire wan` relays (80 ms round trip, 0.05%
//! loss: PolyMix-4's server side), per store (memory; `--cache-dir` disk) and backend, at
//! rising robot counts (0.4 requests/s each: the request rate, the seeds' x axis). Per
//! point: a fresh proxy, the scenario's fill and top phases; from the top phase the
//! proxy's CPU, the hit and miss mean response times, document and byte hit ratios
//! offered vs measured, and errors.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use coldwire_process::Process;
use coldwire_report::{ExperimentRecord, Scale, Table};
use serde::{Deserialize, Serialize};

use crate::RunContext;
use crate::figures::{axis, figure, machine_load_warning, series, short, thousands};
use crate::process::{run_bench, server_error, start_server};
use crate::serve::{Pinning, available_backends};

/// The scenario's parameters (`experiments/polymix.toml`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Parameters {
    /// Backends of the proxy, in plotting order.
    pub backends: Vec<String>,
    /// Robot counts (request rate = 0.4/s × robots).
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
    /// The proxy's cache size.
    pub cache_bytes: String,
    /// Seconds of the fill phase (half the robots) and of the top phase (measured).
    pub fill: f64,
    pub top: f64,
    #[serde(default)]
    pub pinning: Option<Pinning>,
}

/// One measured point (the top phase).
#[derive(Clone, Debug, Default)]
struct Point {
    config: usize,
    offered: f64,
    achieved: f64,
    cpu_cores: f64,
    cpu_us: f64,
    hit_ms: f64,
    miss_ms: f64,
    dhr: (f64, f64),
    bhr: (f64, f64),
    errors: u64,
}

fn start_listening(
    coldwire: &Path,
    args: &[String],
    cpu: Option<usize>,
    ready: &str,
) -> anyhow::Result<(Process, SocketAddr)> {
    let mut process = start_server(coldwire, args, cpu)?;
    let line = process
        .wait_for_line(ready, Duration::from_secs(20))
        .map_err(server_error)?;
    let address = line
        .parse()
        .with_context(|| format!("`{ready}` was followed by an unexpected address `{line}`"))?;
    Ok((process, address))
}

fn owned(words: &[&str]) -> Vec<String> {
    words.iter().map(|word| (*word).to_owned()).collect()
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
    let (backends, mut warnings) = available_backends(&parameters.backends)?;
    warnings.extend(machine_load_warning());
    warnings.push(
        "Squid is not in this run: the experiment has no forward-proxy configuration for it yet (the peers \
         experiment's is an accelerator)."
            .to_owned(),
    );
    let pinning = parameters.pinning.unwrap_or_default();
    let mut servers = Vec::new();
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
        servers.push(origin);
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
        servers.push(relay);
        relays.push(address);
    }
    let scenario_path = context.raw_dir().join("scenario.toml");
    std::fs::create_dir_all(context.raw_dir())?;
    std::fs::write(
        &scenario_path,
        format!(
            "[origin]\nthink = \"{}\"\nthink_sd = \"{}\"\n\n[[phase]]\nname = \"fill\"\nduration = \"{}s\"\nrobots = [0.5, 0.5]\nrecurrence = [0.0909, 0.0909]\nfreeze_working_set = true\n\n[[phase]]\nname = \"top\"\nduration = \"{}s\"\nrobots = [1.0, 1.0]\n",
            parameters.think, parameters.think_sd, parameters.fill, parameters.top
        ),
    )?;
    let configs: Vec<(String, String)> = parameters
        .stores
        .iter()
        .flat_map(|store| {
            backends
                .iter()
                .map(move |backend| (store.clone(), backend.clone()))
        })
        .collect();
    let mut points = Vec::new();
    let mut raw_files = vec!["raw/scenario.toml".to_owned()];
    for &robots in &parameters.robots {
        for (config, (store, backend)) in configs.iter().enumerate() {
            let what = format!(
                "{backend} ({store}) with {} robots",
                thousands(robots as f64)
            );
            context.progress(&what);
            match measure_point(
                context,
                &parameters,
                &relays,
                &scenario_path,
                pinning,
                (store, backend),
                robots,
            ) {
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
                    points.push(Point { config, ..point });
                }
                Err(error) => {
                    let message = format!("{what} failed: {error:#}");
                    context.progress(&format!("warning: {message}"));
                    warnings.push(message);
                }
            }
        }
    }
    drop(servers);
    anyhow::ensure!(
        !points.is_empty(),
        "no point could be measured: {}",
        warnings.join("; ")
    );
    let mut record = context.record(
        "PolyMix-4 through the proxy: CPU, hit and miss response time, hit ratios vs request rate",
        &["seed 002 Fig. 11", "seed 002 Fig. 12", "seed 002 Fig. 13"],
        format!(
            "PolyMix-4 robots (coldwire bench --workload polymix{}, 0.4 requests/s each) through coldwire proxy \
             (forward, one worker, cache {}{}) to {} coldwire origin server(s) (think time {} ± {}), each behind \
             coldwire wan ({} round trip, {} loss). Per point a fresh proxy; phases fill ({} s, half the robots, \
             recurrence 5%) and top ({} s, all robots, measured). Robots {}: request rates {} per second. Scaled \
             to this machine: one generator process and one proxy process hold at most 20,000 descriptors; a robot \
             holds about one connection, so the robot counts stay far below that, and the rate stops where the \
             proxy (one core shared with nothing else) or the generator's core saturates.",
            pinning.generator_cpu.map_or(String::new(), |cpu| format!(", with origins and relays on CPU {cpu}")),
            parameters.cache_bytes,
            pinning.server_cpu.map_or(String::new(), |cpu| format!(", pinned to CPU {cpu}")),
            parameters.servers,
            parameters.think,
            parameters.think_sd,
            parameters.rtt,
            parameters.loss,
            parameters.fill,
            parameters.top,
            parameters.robots.iter().map(|robots| thousands(*robots as f64)).collect::<Vec<_>>().join(", "),
            parameters.robots.iter().map(|robots| thousands(*robots as f64 * 0.4)).collect::<Vec<_>>().join(", "),
        ),
    );
    record.parameters = serde_json::to_value(&parameters)?;
    record.raw_files = raw_files;
    summarise(&mut record, &configs, &points);
    record.warnings = warnings;
    Ok(record)
}

/// One point: a fresh proxy for (`store`, `backend`), the robots' fill and top phases.
fn measure_point(
    context: &RunContext,
    parameters: &Parameters,
    relays: &[SocketAddr],
    scenario: &Path,
    pinning: Pinning,
    (store, backend): (&str, &str),
    robots: u64,
) -> anyhow::Result<(Point, Vec<String>)> {
    // The disk store's directory, removed after the point.
    let cache_dir = std::env::temp_dir().join(format!(
        "coldwire-polymix-{}-{backend}-{robots}",
        std::process::id()
    ));
    let mut args = owned(&[
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--admin",
        "127.0.0.1:0",
        "--workers",
        "1",
    ]);
    args.extend([
        "--io".into(),
        backend.to_owned(),
        "--cache-bytes".into(),
        parameters.cache_bytes.clone(),
    ]);
    args.extend(["--idle-timeout".into(), "600".into()]);
    if store == "disk" {
        args.extend(["--cache-dir".into(), cache_dir.display().to_string()]);
    }
    let mut proxy = start_server(&context.coldwire, &args, pinning.server_cpu)?;
    let listen = proxy
        .wait_for_line("proxy listening on http://", Duration::from_secs(20))
        .map_err(server_error)?;
    let stats = proxy
        .wait_for_line("stats on ", Duration::from_secs(20))
        .map_err(server_error)?;
    let mut bench = owned(&["--workload", "polymix", "--scenario"]);
    bench.push(scenario.display().to_string());
    bench.extend([
        "--robots".into(),
        robots.to_string(),
        "--proxy".into(),
        listen,
    ]);
    bench.extend([
        "--server-pid".into(),
        proxy.pid().to_string(),
        "--server-stats".into(),
        stats,
    ]);
    for relay in relays {
        bench.push(format!("--url=http://{relay}/"));
    }
    let stem = format!("{store}-{backend}-{robots}");
    let relative = format!("raw/{stem}.json");
    let timeout = Duration::from_secs_f64(180.0 + 2.0 * (parameters.fill + parameters.top));
    let result = run_bench(
        &context.coldwire,
        &bench,
        pinning.generator_cpu,
        &context.dir.join(&relative),
        timeout,
    );
    proxy.stop_within(Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&cache_dir);
    if let Err(error) = result {
        // The population JSON may not fit the fixed-rate reader; what matters is that it was written.
        if !context.dir.join(&relative).is_file() {
            return Err(error);
        }
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(context.dir.join(&relative))?)
            .context("the bench's JSON")?;
    let phase = json["runs"][0]["phases"]
        .as_array()
        .and_then(|phases| phases.iter().find(|phase| phase["label"] == "top"))
        .context("the bench's JSON has no `top` phase")?;
    let population = &phase["population"];
    let number = |value: &serde_json::Value| value.as_f64().unwrap_or(f64::NAN);
    let point = Point {
        offered: number(&phase["offered_rate"]),
        achieved: number(&phase["achieved_rate"]),
        cpu_cores: number(&phase["server"]["cpu_cores"]),
        cpu_us: number(&phase["server"]["cpu_us_per_request"]),
        hit_ms: number(&population["hit_latency"]["mean_us"]) / 1000.0,
        miss_ms: number(&population["miss_latency"]["mean_us"]) / 1000.0,
        dhr: (
            number(&population["offered_document_hit_ratio"]),
            number(&population["measured_document_hit_ratio"]),
        ),
        bhr: (
            number(&population["offered_byte_hit_ratio"]),
            number(&population["measured_byte_hit_ratio"]),
        ),
        errors: phase["errors_total"].as_u64().unwrap_or(0),
        ..Point::default()
    };
    Ok((point, vec![relative, format!("raw/{stem}.txt")]))
}

fn summarise(record: &mut ExperimentRecord, configs: &[(String, String)], points: &[Point]) {
    let name = |config: usize| format!("{} ({})", configs[config].1, configs[config].0);
    let per_config = |value: fn(&Point) -> f64| -> Vec<coldwire_report::Series> {
        (0..configs.len())
            .map(|config| {
                series(
                    &name(config),
                    points
                        .iter()
                        .filter(|point| point.config == config)
                        .map(|point| (point.offered, value(point))),
                )
            })
            .collect()
    };
    let rate = || axis("offered request rate", "requests/s", Scale::Linear);
    record.figures.push(figure(
        "cpu",
        "Proxy CPU vs request rate (PolyMix-4)",
        Some("seed 002 Fig. 11"),
        rate(),
        axis("proxy CPU", "% of a core", Scale::Linear),
        per_config(|point| point.cpu_cores * 100.0),
        "The top phase; one point per robot count.",
    ));
    record.figures.push(figure(
        "cpu-per-request",
        "Proxy CPU per request vs request rate (PolyMix-4)",
        Some("seed 002 Fig. 11"),
        rate(),
        axis("proxy CPU per request", "µs", Scale::Linear),
        per_config(|point| point.cpu_us),
        "CPU per request is the robust figure on this shared machine.",
    ));
    record.figures.push(figure(
        "hit-response",
        "Hit mean response time vs request rate",
        Some("seed 002 Fig. 12"),
        rate(),
        axis("hit mean response time", "ms", Scale::Log),
        per_config(|point| point.hit_ms),
        "Hits include collapsed requests that waited for another's fetch.",
    ));
    record.figures.push(figure(
        "miss-response",
        "Miss mean response time vs request rate",
        Some("seed 002 Fig. 13"),
        rate(),
        axis("miss mean response time", "ms", Scale::Linear),
        per_config(|point| point.miss_ms),
        "A miss waits for the origin's think time and the relay's round trips.",
    ));
    let percent = |value: f64| {
        if value.is_finite() {
            format!("{:.1}%", value * 100.0)
        } else {
            "–".to_owned()
        }
    };
    record.tables.push(Table {
        title: "Top phase per configuration and rate: hit ratios offered / measured, errors"
            .to_owned(),
        columns: owned(&[
            "configuration",
            "offered/s",
            "achieved/s",
            "CPU %",
            "µs/request",
            "hit ms",
            "miss ms",
            "DHR off/meas",
            "BHR off/meas",
            "errors",
        ]),
        rows: points
            .iter()
            .map(|point| {
                vec![
                    name(point.config),
                    thousands(point.offered),
                    thousands(point.achieved),
                    short(point.cpu_cores * 100.0),
                    short(point.cpu_us),
                    short(point.hit_ms),
                    short(point.miss_ms),
                    format!("{} / {}", percent(point.dhr.0), percent(point.dhr.1)),
                    format!("{} / {}", percent(point.bhr.0), percent(point.bhr.1)),
                    point.errors.to_string(),
                ]
            })
            .collect(),
    });
    for config in 0..configs.len() {
        let mine: Vec<&Point> = points
            .iter()
            .filter(|point| point.config == config)
            .collect();
        if let (Some(first), Some(last)) = (mine.first(), mine.last()) {
            record.findings.push(format!(
                "{}: from {} to {} requests/s offered, proxy CPU {}% → {}% of a core ({} → {} µs per request), hits \
                 {} → {} ms, misses {} → {} ms mean; measured document hit ratio {} at the top rate (offered {}).",
                name(config),
                thousands(first.offered),
                thousands(last.offered),
                short(first.cpu_cores * 100.0),
                short(last.cpu_cores * 100.0),
                short(first.cpu_us),
                short(last.cpu_us),
                short(first.hit_ms),
                short(last.hit_ms),
                short(first.miss_ms),
                short(last.miss_ms),
                percent(last.dhr.1),
                percent(last.dhr.0),
            ));
        }
    }
    let failed: u64 = points.iter().map(|point| point.errors).sum();
    record.findings.push(if failed == 0 {
        "No request failed.".to_owned()
    } else {
        format!("{failed} requests failed over the run (see the table).")
    });
}
