//! `coldwire bench`: the flags (clap), the built-in quick-start scenario, the progress bar,
//! and the output (table on stdout, JSON file). The generator itself is the
//! `coldwire-bench` crate; this file only assembles a plan, picks the event backend with
//! one `match`, and reports.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Args;
use coldwire_bench::report::{BenchReport, MachineInfo, RunReport, ServerInfo};
use coldwire_bench::saturate::SaturateConfig;
use coldwire_bench::{
    Arrivals, BenchError, BenchPlan, ColdMode, Engine, LoadConfig, PhaseObserver, PhasePlan,
    Progress, Rate, SCHEMA_VERSION, ServerWatch, Target, run_benchmark,
};
use coldwire_io::{Backend, Driver, DriverConfig, UringOptions, WithDriver};
use coldwire_process::{Launch, Process, Stderr, Stdout};
use coldwire_server::system;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// `coldwire bench`: with no `--url`, the built-in scenario (starts `coldwire serve` itself).
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Target URL, `http://HOST[:PORT]/PATH`, optionally followed by @WEIGHT (repeatable;
    /// each request picks one by weight). `{seq}` in the path or query is replaced by a
    /// counter of the requests sent to that URL (0, 1, 2, …), so every request asks for a
    /// distinct URL, e.g. `http://127.0.0.1:8080/64k?v={seq}`. Without any, the built-in
    /// scenario runs.
    #[arg(long = "url", value_name = "URL")]
    pub urls: Vec<String>,
    /// Send every request to this proxy, with absolute-form request lines.
    #[arg(long, value_name = "HOST:PORT")]
    pub proxy: Option<SocketAddr>,
    /// Offered requests per second (open loop), or `max` (closed loop, as wrk: for ceilings,
    /// not latency).
    #[arg(long, default_value = "1000", value_parser = parse_rate)]
    pub rate: Rate,
    /// Arrival process: constant or poisson.
    #[arg(long, default_value = "constant", value_parser = parse_arrivals)]
    pub arrivals: Arrivals,
    /// Most hot connections open at once (each carries one request at a time).
    #[arg(long, default_value_t = 50)]
    pub connections: usize,
    /// Requests per hot connection before it is replaced (1 = a new connection per request;
    /// 0 = unlimited keep-alive).
    #[arg(long, default_value_t = 0, value_name = "K")]
    pub requests_per_connection: u64,
    /// Seconds before an unanswered request (or connect, or a request waiting for a free
    /// connection) is abandoned and counted.
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
    pub timeout: f64,
    /// Cold connections opened before measurement and held for the whole run.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub cold: usize,
    /// What cold connections do: idle (send nothing) or trickle (a request head, one byte
    /// per --trickle-interval).
    #[arg(long, default_value = "idle", value_parser = parse_cold_mode)]
    pub cold_mode: ColdMode,
    /// Send the cold connections here instead of the (first) target's address.
    #[arg(long, value_name = "HOST:PORT")]
    pub cold_target: Option<SocketAddr>,
    /// Cold connections opened per second.
    #[arg(long, default_value_t = 2000.0, value_name = "PER_SECOND")]
    pub cold_rate: f64,
    /// Emulated round-trip time in milliseconds: after each response a hot connection rests
    /// this long before carrying the next request (a client far away); latencies exclude it.
    #[arg(long, default_value_t = 0.0, value_name = "MS")]
    pub rtt: f64,
    /// Seconds between two trickled bytes.
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS")]
    pub trickle_interval: f64,
    /// Measured seconds (per phase or saturation step).
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub duration: f64,
    /// Seconds of load before measuring (per phase or step).
    #[arg(long, default_value_t = 2.0, value_name = "SECONDS")]
    pub warmup: f64,
    /// Step the rate up from --rate until achieved < 95% of offered or p99 > --saturate-p99;
    /// report the saturation throughput and the curve.
    #[arg(long)]
    pub saturate: bool,
    /// Rate multiplier per saturation step.
    #[arg(long, default_value_t = 1.5, value_name = "FACTOR")]
    pub saturate_factor: f64,
    /// Most saturation steps.
    #[arg(long, default_value_t = 12, value_name = "N")]
    pub saturate_steps: usize,
    /// Corrected p99 (milliseconds) beyond which a step counts as saturated.
    #[arg(long, default_value_t = 100.0, value_name = "MS")]
    pub saturate_p99: f64,
    /// A slot the generator reaches this many milliseconds late is skipped (counted as
    /// missed), never sent in a burst.
    #[arg(long, default_value_t = 5.0, value_name = "MS")]
    pub late_limit: f64,
    /// Measure this process (and its children) as the server: CPU per request, RSS, fds.
    #[arg(long, value_name = "PID", conflicts_with = "spawn")]
    pub server_pid: Option<u32>,
    /// Start the server with this shell command (in the foreground), measure it, stop it.
    #[arg(long, value_name = "CMD")]
    pub spawn: Option<String>,
    /// Seconds --spawn's server gets to start accepting connections on the target (or
    /// proxy) address before the run gives up.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub spawn_wait: f64,
    /// coldwire's stats endpoint (serve --admin ADDR → http://ADDR/stats): syscalls, waits
    /// and events per request.
    #[arg(long, value_name = "URL")]
    pub server_stats: Option<String>,
    /// Write every figure and the run's parameters as JSON (schema: docs/bench-json.md).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Event mechanism of the generator's own sockets (default: the best available).
    #[arg(long = "io", value_name = "BACKEND", value_parser = crate::cli::backend_parser())]
    pub backend: Option<Backend>,
    /// Pin the generator to this CPU.
    #[arg(long, value_name = "CPU")]
    pub cpu: Option<usize>,
    /// Do not poll before slots while responses are awaited: wait in the kernel instead
    /// (slots may go out up to 1 ms late; kinder to other work on the generator's core).
    #[arg(long)]
    pub no_poll: bool,
    /// Seed of the Poisson arrivals and target choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Replay this access log (Common Log Format or Squid native) against the server
    /// --url names: each logged client from its own address, with its own persistent
    /// connections, its requests in logged order at the logged times (docs/replay.md).
    #[arg(long, value_name = "FILE", help_heading = "Trace replay")]
    pub replay: Option<PathBuf>,
    /// Replay this many times faster than logged (1: the original pace).
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "N",
        requires = "replay",
        help_heading = "Trace replay"
    )]
    pub speedup: f64,
    /// The --replay file's format, `clf` or `squid` (default: detected).
    #[arg(
        long,
        value_name = "FORMAT",
        requires = "replay",
        help_heading = "Trace replay"
    )]
    pub replay_format: Option<coldwire_workload::trace::TraceFormat>,
    /// A client's request logged more than this many seconds after its previous one goes
    /// on a new connection (a server's keep-alive timeout would have closed the old one).
    #[arg(
        long,
        default_value_t = 15.0,
        value_name = "SECONDS",
        requires = "replay",
        help_heading = "Trace replay"
    )]
    pub replay_idle_gap: f64,
    /// Requests per replayed connection at most (0: no limit).
    #[arg(
        long,
        default_value_t = 100,
        value_name = "N",
        requires = "replay",
        help_heading = "Trace replay"
    )]
    pub replay_max_requests: u64,
    /// What the requests are: `urls` (the --url list) or `polymix` (Web Polygraph's
    /// PolyMix-4 robots; without --url the bench starts coldwire origin servers, WAN
    /// relays and a coldwire proxy itself — docs/polymix.md).
    #[arg(long, default_value = "urls", value_name = "NAME", value_parser = ["urls", "polymix"])]
    pub workload: String,
    /// The PolyMix scenario file (TOML; unknown keys are errors; what it leaves out keeps
    /// PolyMix-4's values).
    #[arg(long, value_name = "FILE", requires = "workload")]
    pub scenario: Option<PathBuf>,
    /// PolyMix scaled to run in under a minute (200 robots; ramp, fill, top, decline in 45 s).
    #[arg(long)]
    pub quick: bool,
    /// PolyMix robots at 100% population (overrides the scenario's robots.count).
    #[arg(long, value_name = "N")]
    pub robots: Option<usize>,
}

fn parse_rate(text: &str) -> Result<Rate, String> {
    if text.eq_ignore_ascii_case("max") {
        return Ok(Rate::Max);
    }
    match text.parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(Rate::PerSecond(rate)),
        _ => Err("expected a positive number of requests per second, or `max`".into()),
    }
}

fn parse_arrivals(text: &str) -> Result<Arrivals, String> {
    match text {
        "constant" => Ok(Arrivals::Constant),
        "poisson" => Ok(Arrivals::Poisson),
        _ => Err("expected constant or poisson".into()),
    }
}

fn parse_cold_mode(text: &str) -> Result<ColdMode, String> {
    match text {
        "idle" => Ok(ColdMode::Idle),
        "trickle" => Ok(ColdMode::Trickle),
        _ => Err("expected idle or trickle".into()),
    }
}

fn seconds(value: f64, flag: &str) -> anyhow::Result<Duration> {
    if !(value.is_finite() && value >= 0.0) {
        bail!("{flag} must be a number of seconds ≥ 0, got {value}");
    }
    Ok(Duration::from_secs_f64(value))
}

/// The progress bar (stderr, only on a terminal and without --quiet).
pub(crate) struct Bar {
    bar: Option<ProgressBar>,
}

impl Bar {
    pub(crate) fn new(quiet: bool) -> Bar {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template("{prefix:>28} [{bar:30}] {msg}") {
                bar.set_style(style.progress_chars("=> "));
            }
            bar
        });
        Bar { bar }
    }

    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl PhaseObserver for Bar {
    fn progress(&mut self, progress: &Progress) {
        let Some(bar) = &self.bar else {
            return;
        };
        let planned = progress.planned.as_secs_f64().max(1e-3);
        bar.set_prefix(progress.label.clone());
        bar.set_position(((progress.elapsed.as_secs_f64() / planned) * 1000.0).min(1000.0) as u64);
        if progress.opening_cold {
            bar.set_message(format!(
                "{} established, {} failed",
                progress.completed, progress.errors
            ));
            return;
        }
        bar.set_message(format!(
            "{} responses, {} errors, {} cold held{}",
            progress.completed,
            progress.errors,
            progress.cold_held,
            if progress.measuring {
                ""
            } else {
                " (not measuring)"
            }
        ));
    }
}

fn generator_config(load: &LoadConfig) -> DriverConfig {
    let mut config = DriverConfig {
        max_connections: load.connections + load.cold + 64,
        ..DriverConfig::default()
    };
    if !load.rtt.is_zero() {
        // The rests are timers: a 1 ms tick keeps them within a millisecond (8,192 slots
        // still cover the default 5 s timeout in one rotation).
        config.timer_tick = Duration::from_millis(1);
    }
    config
}

/// The generator's run on whichever driver [`Backend::dispatch`] built.
struct RunOn<'a> {
    load: LoadConfig,
    plan: &'a BenchPlan,
    stop: &'a Arc<AtomicBool>,
    observer: &'a mut dyn PhaseObserver,
}

impl WithDriver for RunOn<'_> {
    type Output = anyhow::Result<RunReport>;

    fn run<D: Driver + Send + 'static>(self, driver: D) -> Self::Output {
        let mut engine = Engine::new(driver, self.load, self.stop.clone())?;
        Ok(run_benchmark(&mut engine, self.plan, self.observer)?)
    }
}

pub(crate) fn run_one(
    backend: Backend,
    load: LoadConfig,
    plan: &BenchPlan,
    stop: &Arc<AtomicBool>,
    observer: &mut dyn PhaseObserver,
) -> anyhow::Result<RunReport> {
    let config = generator_config(&load);
    let job = RunOn {
        load,
        plan,
        stop,
        observer,
    };
    backend
        .dispatch(&config, UringOptions::default(), job)
        .context("cannot create the generator's event loop")?
}

/// Starts the thread that turns SIGINT/SIGTERM into a stop request (results so far are
/// reported; a second signal is not needed).
fn stop_on_signal() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let _ = std::thread::Builder::new()
        .name("coldwire-bench-signals".into())
        .spawn(move || {
            while let Ok(signal) = system::wait_for_signal() {
                if system::is_termination(signal) {
                    coldwire_server::console::err(format_args!(
                        "coldwire bench: interrupted, reporting what ran"
                    ));
                    flag.store(true, Ordering::Relaxed);
                }
            }
        });
    stop
}

pub(crate) fn check_descriptors(needed: usize) -> anyhow::Result<()> {
    let limit = system::raise_open_files_limit().context("cannot read the open-files limit")?;
    if (limit as usize) < needed + 64 {
        bail!(
            "the open-files limit is {limit} but this run needs about {} descriptors: \
             lower --cold/--connections or raise the hard limit (ulimit -Hn)",
            needed + 64
        );
    }
    Ok(())
}

pub(crate) fn unix_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

pub(crate) fn finish(report: &BenchReport, json: Option<&Path>) -> anyhow::Result<()> {
    print!("{}", coldwire_bench::table::format_report(report));
    if let Some(path) = json {
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
    }
    Ok(())
}

/// Runs `coldwire bench`.
pub fn run(arguments: BenchArgs) -> anyhow::Result<()> {
    let stop = stop_on_signal();
    if arguments.workload == "polymix" {
        return crate::polymix::run(&arguments, &stop);
    }
    if arguments.quick || arguments.scenario.is_some() || arguments.robots.is_some() {
        bail!("--quick, --scenario and --robots are PolyMix's: add --workload polymix");
    }
    if let Some(trace) = &arguments.replay {
        return crate::replay::run(&arguments, trace, &stop);
    }
    if arguments.urls.is_empty() {
        if arguments.spawn.is_some() || arguments.server_pid.is_some() || arguments.proxy.is_some()
        {
            bail!(
                "give the target with --url (without --url, coldwire bench runs its built-in scenario and starts its own server)"
            );
        }
        return quickstart(&arguments, &stop);
    }
    let targets = arguments
        .urls
        .iter()
        .map(|url| Target::parse(url))
        .collect::<Result<Vec<_>, _>>()?;
    let mut load = LoadConfig::new(targets);
    load.proxy = arguments.proxy;
    load.arrivals = arguments.arrivals;
    load.connections = arguments.connections;
    load.requests_per_connection = arguments.requests_per_connection;
    load.timeout = seconds(arguments.timeout, "--timeout")?;
    load.cold = arguments.cold;
    load.cold_mode = arguments.cold_mode;
    load.cold_address = arguments.cold_target;
    load.cold_connect_rate = arguments.cold_rate;
    load.trickle_interval = seconds(arguments.trickle_interval, "--trickle-interval")?;
    load.late_limit = seconds(arguments.late_limit / 1000.0, "--late-limit")?;
    load.seed = arguments.seed;
    load.poll = !arguments.no_poll;
    load.rtt = seconds(arguments.rtt / 1000.0, "--rtt")?;
    check_descriptors(load.connections + load.cold)?;
    let warmup = seconds(arguments.warmup, "--warmup")?;
    let duration = seconds(arguments.duration, "--duration")?;
    let saturate = if arguments.saturate {
        let Rate::PerSecond(start_rate) = arguments.rate else {
            bail!("--saturate steps an open-loop rate: give the first one with --rate N");
        };
        if !(arguments.saturate_factor.is_finite() && arguments.saturate_factor > 1.0) {
            bail!("--saturate-factor must be greater than 1");
        }
        Some((
            SaturateConfig {
                start_rate,
                factor: arguments.saturate_factor,
                max_steps: arguments.saturate_steps.max(1),
                achieved_fraction: 0.95,
                p99_limit: seconds(arguments.saturate_p99 / 1000.0, "--saturate-p99")?,
            },
            warmup,
            duration,
        ))
    } else {
        None
    };
    let mut spawned = match &arguments.spawn {
        Some(command) => {
            // Its output goes to the generator's stderr: stdout keeps the results.
            let mut server = Launch::shell(command)
                .stdout(Stdout::ToStderr)
                .stderr(Stderr::Inherit)
                .spawn()
                .map_err(BenchError::from)?;
            let address = match load.proxy {
                Some(proxy) => proxy,
                None => load.targets[0].resolve()?,
            };
            server
                .wait_for_port(address, seconds(arguments.spawn_wait, "--spawn-wait")?)
                .map_err(BenchError::from)?;
            Some(server)
        }
        None => None,
    };
    if let Some(cpu) = arguments.cpu {
        system::pin_current_thread(cpu)
            .with_context(|| format!("cannot pin the generator to CPU {cpu}"))?;
    }
    let pid = arguments.server_pid.or(spawned.as_ref().map(Process::pid));
    let plan = BenchPlan {
        name: "run".into(),
        phases: vec![PhasePlan {
            label: match arguments.rate {
                Rate::PerSecond(rate) => format!("{rate:.0}/s"),
                Rate::Max => "max".into(),
            },
            rate: arguments.rate,
            warmup,
            duration,
        }],
        saturate,
        watch: ServerWatch {
            pid,
            stats_url: arguments.server_stats.clone(),
        },
    };
    let started = unix_seconds();
    let mut bar = Bar::new(arguments.quiet);
    let backend = arguments.backend.unwrap_or_else(Backend::best_available);
    let result = run_one(backend, load, &plan, &stop, &mut bar);
    bar.finish();
    if let Some(server) = spawned.as_mut() {
        server.stop_within(Duration::from_secs(10));
    }
    let run = result?;
    let report = BenchReport {
        schema_version: SCHEMA_VERSION,
        tool: "coldwire-bench",
        tool_version: env!("CARGO_PKG_VERSION"),
        started_unix_seconds: started,
        command_line: std::env::args().collect(),
        machine: MachineInfo::current(arguments.cpu),
        server: ServerInfo {
            command: arguments.spawn.clone(),
            pid,
            stats_url: arguments.server_stats.clone(),
        },
        runs: vec![run],
        interrupted: stop.load(Ordering::Relaxed),
    };
    finish(&report, arguments.json.as_deref())
}

/// The built-in scenario: see `coldwire_bench::quickstart`.
fn quickstart(arguments: &BenchArgs, stop: &Arc<AtomicBool>) -> anyhow::Result<()> {
    use coldwire_bench::quickstart;
    check_descriptors(quickstart::COLD_CONNECTIONS + 200)?;
    let root = quickstart::DocumentRoot::create()
        .context("cannot write the scenario's files in the temporary directory (TMPDIR)")?;
    let two_cores = system::cpu_count() >= 2;
    let executable = std::env::current_exe().context("cannot find the coldwire executable")?;
    let mut server = Launch::new(&executable)
        .args(quickstart::serve_arguments(root.path(), two_cores))
        .stderr(Stderr::Inherit)
        .spawn()
        .map_err(BenchError::from)?;
    let listen = server
        .wait_for_line("listening on http://", Duration::from_secs(10))
        .map_err(BenchError::from)?;
    let admin = server
        .wait_for_line("stats on ", Duration::from_secs(10))
        .map_err(BenchError::from)?;
    let listen: SocketAddr = listen
        .parse()
        .with_context(|| format!("coldwire serve printed an unexpected address `{listen}`"))?;
    let generator_cpu = two_cores.then_some(1);
    if let Some(cpu) = generator_cpu
        && let Err(error) = system::pin_current_thread(cpu)
    {
        coldwire_server::errln!("warning: cannot pin the generator to CPU {cpu}: {error}");
    }
    coldwire_server::errln!(
        "coldwire bench: built-in scenario — coldwire serve (pid {}{}) on {listen}, files of 1,259 B and 8 KiB; \
         naive run (constant arrivals, 50 keep-alive connections) then realistic run (Poisson arrivals, {} cold connections) \
         at {:?} requests/s, {} s + {} s warm-up each",
        server.pid(),
        if two_cores {
            ", worker on CPU 0, generator on CPU 1"
        } else {
            ""
        },
        quickstart::COLD_CONNECTIONS,
        quickstart::RATES,
        quickstart::DURATION.as_secs(),
        quickstart::WARMUP.as_secs(),
    );
    let watch = ServerWatch {
        pid: Some(server.pid()),
        stats_url: Some(admin.clone()),
    };
    let backend = arguments.backend.unwrap_or_else(Backend::best_available);
    let started = unix_seconds();
    let mut bar = Bar::new(arguments.quiet);
    let mut runs = Vec::new();
    for (name, load) in [
        ("naive", quickstart::naive_load(listen)),
        ("realistic", quickstart::realistic_load(listen)),
    ] {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let plan = BenchPlan {
            name: name.into(),
            phases: quickstart::phases(),
            saturate: None,
            watch: watch.clone(),
        };
        match run_one(backend, load, &plan, stop, &mut bar) {
            Ok(run) => runs.push(run),
            Err(error) => {
                bar.finish();
                server.stop_within(Duration::from_secs(10));
                return Err(error.context(format!("the {name} run failed")));
            }
        }
    }
    bar.finish();
    server.stop_within(Duration::from_secs(10));
    let report = BenchReport {
        schema_version: SCHEMA_VERSION,
        tool: "coldwire-bench",
        tool_version: env!("CARGO_PKG_VERSION"),
        started_unix_seconds: started,
        command_line: std::env::args().collect(),
        machine: MachineInfo::current(generator_cpu),
        server: ServerInfo {
            command: Some(server.command().to_owned()),
            pid: Some(server.pid()),
            stats_url: Some(admin),
        },
        runs,
        interrupted: stop.load(Ordering::Relaxed),
    };
    let json = arguments.json.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("coldwire-bench-{}.json", started as u64))
    });
    finish(&report, Some(&json))
}
