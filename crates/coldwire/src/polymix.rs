//! `coldwire bench --workload polymix`: PolyMix-4 robots (`coldwire_bench::workload::
//! polymix`) on the population engine. Without `--url` it starts the whole set-up itself —
//! `coldwire origin` servers (PolyMix-4 content and think time), a `coldwire wan` relay in
//! front of each (80 ms round trip, 0.05% loss: PolyMix-4's server side), and a
//! `coldwire proxy` the robots go through (unless `--proxy` names one) — runs the
//! scenario's phases, prints a table per phase and writes the JSON. With `--url`, the
//! URLs' `HOST:PORT`s are the origin servers (robots go straight to them without
//! `--proxy`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use coldwire_bench::population::PopulationConfig;
use coldwire_bench::population::run::run_population_on;
use coldwire_bench::report::{BenchReport, MachineInfo, ServerInfo};
use coldwire_bench::workload::polymix::PolyMix;
use coldwire_bench::workload::polymix::scenario::Scenario;
use coldwire_bench::{BenchError, SCHEMA_VERSION, ServerWatch, Target};
use coldwire_io::{Backend, DriverConfig};
use coldwire_process::{Launch, Process, Stderr};
use coldwire_server::system;

use crate::bench::{Bar, BenchArgs, unix_seconds};

/// Descriptors kept for everything but the robots' connections.
const SPARE_DESCRIPTORS: usize = 200;

/// The processes this run started, stopped when dropped (the proxy first).
struct Stack {
    processes: Vec<Process>,
    origins: Vec<SocketAddr>,
    proxy: Option<(SocketAddr, u32, String, String)>,
}

impl Drop for Stack {
    fn drop(&mut self) {
        for process in self.processes.iter_mut().rev() {
            process.stop_within(Duration::from_secs(5));
        }
    }
}

fn start(
    executable: &std::path::Path,
    arguments: &[String],
    ready: &str,
) -> anyhow::Result<(Process, String)> {
    let mut process = Launch::new(executable)
        .args(arguments)
        .stderr(Stderr::Inherit)
        .spawn()
        .map_err(BenchError::from)?;
    let line = process
        .wait_for_line(ready, Duration::from_secs(10))
        .map_err(BenchError::from)?;
    Ok((process, line))
}

fn strings(words: &[&str]) -> Vec<String> {
    words.iter().map(|word| (*word).to_owned()).collect()
}

/// Starts the origins, their relays and (without `--proxy`) the proxy.
fn start_stack(scenario: &Scenario, with_proxy: bool) -> anyhow::Result<Stack> {
    let executable = std::env::current_exe().context("cannot find the coldwire executable")?;
    let origin = &scenario.origin;
    let mut stack = Stack {
        processes: Vec::new(),
        origins: Vec::new(),
        proxy: None,
    };
    for _ in 0..origin.servers {
        let mut arguments = strings(&["origin", "--listen", "127.0.0.1:0", "--workers", "1"]);
        arguments.extend([
            "--think".to_owned(),
            format!("{}ms", origin.think.as_millis()),
            "--think-sd".to_owned(),
            format!("{}ms", origin.think_sd.as_millis()),
            "--seed".to_owned(),
            origin.seed.to_string(),
        ]);
        let (process, line) = start(&executable, &arguments, "origin listening on http://")?;
        stack.processes.push(process);
        let mut address: SocketAddr = line
            .parse()
            .with_context(|| format!("coldwire origin printed an unexpected address `{line}`"))?;
        if !origin.rtt.is_zero() {
            let mut arguments = strings(&["wan", "--listen", "127.0.0.1:0", "--to"]);
            arguments.extend([
                address.to_string(),
                "--rtt".to_owned(),
                format!("{}ms", origin.rtt.as_millis()),
                "--loss".to_owned(),
                format!("{}%", origin.loss * 100.0),
            ]);
            let (process, line) = start(&executable, &arguments, "wan listening on http://")?;
            stack.processes.push(process);
            address = line
                .parse()
                .with_context(|| format!("coldwire wan printed an unexpected address `{line}`"))?;
        }
        stack.origins.push(address);
    }
    if with_proxy {
        let arguments = strings(&[
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "--workers",
            "1",
        ]);
        let (mut process, line) = start(&executable, &arguments, "proxy listening on http://")?;
        let stats = process
            .wait_for_line("stats on ", Duration::from_secs(10))
            .map_err(BenchError::from)?;
        let address: SocketAddr = line
            .parse()
            .with_context(|| format!("coldwire proxy printed an unexpected address `{line}`"))?;
        stack.proxy = Some((address, process.pid(), process.command().to_owned(), stats));
        stack.processes.push(process);
    }
    Ok(stack)
}

/// The scenario the flags name: `--scenario FILE`, else `--quick`'s or PolyMix-4's, with
/// `--robots` on top.
fn scenario(arguments: &BenchArgs) -> anyhow::Result<Scenario> {
    let mut scenario = match &arguments.scenario {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the scenario file {}", path.display()))?;
            let mut scenario = Scenario::from_toml(&text)?;
            if arguments.quick && !text.contains("[[phase]]") {
                scenario.phases = Scenario::quick().phases;
            }
            scenario
        }
        None if arguments.quick => Scenario::quick(),
        None => Scenario::default(),
    };
    if let Some(robots) = arguments.robots {
        scenario.robots.count = robots;
    }
    scenario.validate()?;
    Ok(scenario)
}

/// Runs `coldwire bench --workload polymix`.
pub fn run(arguments: &BenchArgs, stop: &Arc<AtomicBool>) -> anyhow::Result<()> {
    let scenario = scenario(arguments)?;
    let robots = scenario.robots.count;
    let limit =
        system::raise_open_files_limit().context("cannot read the open-files limit")? as usize;
    let wanted = robots * scenario.robots.open_connections;
    let max_open = wanted.min(limit.saturating_sub(SPARE_DESCRIPTORS));
    if max_open < robots {
        bail!(
            "the open-files limit is {limit}: too few for {robots} robots (each needs at least one \
             connection): lower robots.count (--robots) or raise the hard limit (ulimit -Hn)"
        );
    }
    let stack = if arguments.urls.is_empty() {
        if arguments.server_pid.is_some() || arguments.spawn.is_some() {
            bail!("--server-pid/--spawn need --url (without it the bench starts its own servers)");
        }
        Some(start_stack(&scenario, arguments.proxy.is_none())?)
    } else {
        None
    };
    let origins: Vec<SocketAddr> = match &stack {
        Some(stack) => stack.origins.clone(),
        None => arguments
            .urls
            .iter()
            .map(|url| Target::parse(url)?.resolve())
            .collect::<Result<_, _>>()?,
    };
    let proxy = arguments.proxy.or(stack
        .as_ref()
        .and_then(|stack| stack.proxy.as_ref().map(|proxy| proxy.0)));
    let spawned_proxy = stack.as_ref().and_then(|stack| stack.proxy.clone());
    let watch = ServerWatch {
        pid: arguments
            .server_pid
            .or(spawned_proxy.as_ref().map(|proxy| proxy.1)),
        stats_url: arguments
            .server_stats
            .clone()
            .or(spawned_proxy.as_ref().map(|proxy| proxy.3.clone())),
    };
    if let Some(cpu) = arguments.cpu {
        system::pin_current_thread(cpu)
            .with_context(|| format!("cannot pin the generator to CPU {cpu}"))?;
    }
    let timeout = Duration::from_secs_f64(arguments.timeout.max(0.001))
        .max(scenario.origin.think + scenario.origin.think_sd * 6 + Duration::from_secs(5));
    let polymix = PolyMix::new(scenario.clone(), &origins, proxy);
    let plan = polymix.plan(watch.clone(), arguments.seed, timeout);
    let config = PopulationConfig {
        timeout,
        late_limit: Duration::from_secs_f64((arguments.late_limit / 1000.0).max(0.0))
            .max(Duration::from_millis(50)),
        max_open,
        drain: timeout,
        seed: arguments.seed,
    };
    coldwire_server::errln!(
        "coldwire bench: PolyMix robots — {robots} robots at {}/s each (peak {:.0} requests/s), \
         {} phases over {:?}, {} origin server(s){}{}",
        scenario.robots.rate,
        scenario.peak_rate(),
        scenario.phases.len(),
        scenario.duration(),
        origins.len(),
        if stack.is_some() && !scenario.origin.rtt.is_zero() {
            format!(" behind WAN relays ({:?} round trip)", scenario.origin.rtt)
        } else {
            String::new()
        },
        match proxy {
            Some(proxy) => format!(", through the proxy at {proxy}"),
            None => ", straight to the origins".to_owned(),
        }
    );
    let started = unix_seconds();
    let mut bar = Bar::new(arguments.quiet);
    let backend = arguments.backend.unwrap_or_else(Backend::best_available);
    let driver_config = DriverConfig {
        max_connections: max_open + 64,
        timer_tick: Duration::from_millis(10),
        ..DriverConfig::default()
    };
    let result = run_population_on(
        backend,
        &driver_config,
        Box::new(polymix),
        config,
        &plan,
        stop,
        &mut bar,
    );
    bar.finish();
    let command = spawned_proxy.as_ref().map(|proxy| proxy.2.clone());
    drop(stack);
    let run = result?;
    let report = BenchReport::of_this_process(
        started,
        MachineInfo::current(arguments.cpu),
        ServerInfo {
            command,
            pid: watch.pid,
            stats_url: watch.stats_url.clone(),
        },
        vec![run],
        stop.load(Ordering::Relaxed),
    );
    print!("{}", coldwire_bench::population::summary::format(&report));
    // No JSON unless asked (`--json FILE`, `-` for stdout), as the bench's other modes.
    write_json(&report, arguments.json.as_deref())
}

fn write_json(report: &BenchReport, json: Option<&std::path::Path>) -> anyhow::Result<()> {
    let Some(path) = json else {
        return Ok(());
    };
    if path.as_os_str() == "-" {
        let mut stdout = std::io::stdout().lock();
        let _ = serde_json::to_writer_pretty(&mut stdout, report);
        let _ = std::io::Write::write_all(&mut stdout, b"\n");
        return Ok(());
    }
    let file = std::fs::File::create(path).with_context(|| {
        format!(
            "cannot write {} — check the directory exists and is writable",
            path.display()
        )
    })?;
    serde_json::to_writer_pretty(std::io::BufWriter::new(file), report)
        .with_context(|| format!("cannot write {}", path.display()))?;
    coldwire_server::outln!(
        "\nJSON (schema version {SCHEMA_VERSION}, see docs/bench-json.md): {}",
        path.display()
    );
    Ok(())
}
