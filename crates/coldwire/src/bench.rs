//! `coldwire bench`: the flags (clap; their parsers and the request, TLS and threshold
//! settings in [`crate::bench_args`]), the built-in quick-start scenario, the progress
//! bar, and the output (table on stdout, JSON when asked, the exit status of the
//! thresholds). The generator itself is the `coldwire-bench` crate; this file only
//! assembles a plan, picks the event backend with one `match`, and reports.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::Args;
use coldwire_bench::report::Document;
use coldwire_bench::report::{BenchReport, MachineInfo, RunReport, ServerInfo};
use coldwire_bench::saturate::SaturateConfig;
use coldwire_bench::thresholds::{Check, FAILED_EXIT_STATUS};
use coldwire_bench::{
    Arrivals, BenchError, BenchPlan, ColdMode, Engine, LoadConfig, PhaseObserver, PhasePlan,
    Progress, Rate, SCHEMA_VERSION, ServerWatch, Target, run_benchmark,
};
use coldwire_io::{Backend, Driver, DriverConfig, UringOptions, WithDriver};
use coldwire_process::{Launch, Process, Stderr, Stdout};
use coldwire_server::system;

use crate::runtime_args::parse_duration;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// `coldwire bench`: with no URL, the built-in scenario (starts `coldwire serve` itself).
#[derive(Debug, Args)]
#[command(after_help = crate::bench_args::AFTER_HELP)]
pub struct BenchArgs {
    /// Target URL, `http[s]://HOST[:PORT]/PATH`, optionally followed by @WEIGHT (several
    /// may be given; each request picks one by weight). `{seq}` in the path or query is
    /// replaced by a counter of the requests sent to that URL (0, 1, 2, …), so every
    /// request asks for a distinct URL, e.g. `http://127.0.0.1:8080/64k?v={seq}`. Without
    /// any, the built-in scenario runs.
    #[arg(value_name = "URL")]
    pub positional_urls: Vec<String>,
    /// The same as a URL argument (repeatable).
    #[arg(long = "url", value_name = "URL")]
    pub urls: Vec<String>,
    /// Request method.
    #[arg(short, long, default_value = "GET", value_name = "METHOD")]
    pub method: String,
    /// Add a header field to every request, `'Name: value'` (repeatable); a Host or
    /// User-Agent given here replaces the generator's own.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE", value_parser = coldwire_bench::target::parse_header)]
    pub headers: Vec<(String, String)>,
    /// Request body (sent with Content-Length).
    #[arg(long, value_name = "TEXT", conflicts_with = "body_file")]
    pub body: Option<String>,
    /// Request body read from this file (sent with Content-Length).
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<PathBuf>,
    /// https:// targets: accept any certificate (self-signed, another name), as curl -k.
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// https:// targets: also trust the CA certificates of this PEM file.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Fail (exit status 99) when more than this share of the requests failed: a
    /// percentage, `1%`, `0.5` (= 0.5 %) or `100%` (never fail on errors).
    #[arg(long, default_value = "1%", value_name = "PERCENT", value_parser = crate::bench_args::parse_percent)]
    pub max_error_rate: f64,
    /// Fail (exit status 99) when the median corrected latency exceeds this (`20ms`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub p50: Option<Duration>,
    /// Fail (exit status 99) when the 90th percentile exceeds this.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub p90: Option<Duration>,
    /// Fail (exit status 99) when the 99th percentile exceeds this (`--p99 20ms`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub p99: Option<Duration>,
    /// Fail (exit status 99) when the 99.9th percentile exceeds this.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub p999: Option<Duration>,
    /// Send every request to this proxy, with absolute-form request lines (`HOST:PORT`, or
    /// `http://HOST:PORT` as curl's -x).
    #[arg(long, value_name = "HOST:PORT", value_parser = crate::values::parse_proxy)]
    pub proxy: Option<SocketAddr>,
    /// Offered requests per second (open loop, as wrk2's -R), or `max` (closed loop, as
    /// wrk: for ceilings, not latency). Default: 1000 (open loop); with -n, `max`.
    #[arg(short = 'R', long, value_parser = parse_rate)]
    pub rate: Option<Rate>,
    /// Arrival process: constant or poisson.
    #[arg(long, default_value = "constant", value_name = "constant|poisson", value_parser = parse_arrivals)]
    pub arrivals: Arrivals,
    /// Most hot connections open at once (each carries one request at a time).
    #[arg(short, long, default_value_t = 50, value_name = "N")]
    pub connections: usize,
    /// wrk's thread count, accepted so that wrk's command lines run: the generator is one
    /// event loop on one thread whatever the value (tens of thousands of requests/s on a
    /// core; for more, run one instance per core). A value other than 1 prints a note.
    #[arg(short = 't', long, value_name = "N")]
    pub threads: Option<usize>,
    /// wrk's `--latency`, accepted: the latency distribution is always printed.
    #[arg(long)]
    pub latency: bool,
    /// Send exactly N requests (ab's, hey's and oha's `-n`), then report: the measured
    /// window ends when the last of them completed or failed (with -d too: whichever comes
    /// first). Without -R they go as fast as the connections allow (-R max); no warm-up
    /// unless --warmup is given; at most N connections are opened.
    #[arg(short = 'n', long = "requests", value_name = "N")]
    pub requests: Option<u64>,
    /// Requests per hot connection before it is replaced (1 = a new connection per request;
    /// 0 = unlimited keep-alive).
    #[arg(long, default_value_t = 0, value_name = "K")]
    pub requests_per_connection: u64,
    /// Time before an unanswered request (or connect, or a request waiting for a free
    /// connection) is abandoned and counted (`5s`, `500ms`; a plain number is seconds).
    /// Held as seconds (the other run modes read it so).
    #[arg(long, default_value = "5s", value_name = "DURATION", value_parser = crate::bench_args::parse_seconds)]
    pub timeout: f64,
    /// Cold connections opened before measurement and held for the whole run.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub cold: usize,
    /// What cold connections do: idle (send nothing) or trickle (a request head, one byte
    /// per --trickle-interval).
    #[arg(long, default_value = "idle", value_name = "idle|trickle", value_parser = parse_cold_mode)]
    pub cold_mode: ColdMode,
    /// Send the cold connections here instead of the (first) target's address; repeated,
    /// they are shared out among the addresses in turn (several relays).
    #[arg(long, value_name = "HOST:PORT", value_parser = crate::values::parse_connect_to)]
    pub cold_target: Vec<SocketAddr>,
    /// Cold connections opened per second.
    #[arg(long, default_value_t = 2000.0, value_name = "PER_SECOND")]
    pub cold_rate: f64,
    /// Emulated round-trip time: after each response a hot connection rests this long
    /// before carrying the next request (a client far away); latencies exclude it (`80ms`;
    /// a plain number is milliseconds, as before units were accepted).
    #[arg(long, default_value = "0", value_name = "DURATION", value_parser = crate::bench_args::parse_millis)]
    pub rtt: Duration,
    /// Time between two trickled bytes (a plain number is seconds).
    #[arg(long, default_value = "5s", value_name = "DURATION", value_parser = parse_duration)]
    pub trickle_interval: Duration,
    /// Measured time per phase or saturation step (`30s`, `2m`; a plain number is seconds;
    /// `-z` as oha's). Default: 10s; with -n, none (the request count ends the run).
    #[arg(short, short_alias = 'z', long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Load before measuring, per phase or step (a plain number is seconds). Default: 2s;
    /// with -n, none.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub warmup: Option<Duration>,
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
    /// Corrected p99 beyond which a step counts as saturated (`100ms`; a plain number is
    /// milliseconds).
    #[arg(long, default_value = "100", value_name = "DURATION", value_parser = crate::bench_args::parse_millis)]
    pub saturate_p99: Duration,
    /// A slot the generator reaches this late is skipped (counted as missed), never sent
    /// in a burst (`5ms`; a plain number is milliseconds). Held as milliseconds (the other
    /// run modes read it so).
    #[arg(long, default_value = "5", value_name = "DURATION", value_parser = crate::bench_args::parse_milliseconds)]
    pub late_limit: f64,
    /// Measure this process (and its children) as the server: CPU per request, RSS, fds.
    #[arg(long, value_name = "PID", conflicts_with = "spawn")]
    pub server_pid: Option<u32>,
    /// Start the server with this shell command (in the foreground), measure it, stop it.
    #[arg(long, value_name = "CMD")]
    pub spawn: Option<String>,
    /// Time --spawn's server gets to start accepting connections on the target (or
    /// proxy) address before the run gives up (a plain number is seconds).
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_duration)]
    pub spawn_wait: Duration,
    /// coldwire's stats endpoint (serve --admin ADDR → http://ADDR/stats, or ADDR alone, as
    /// `coldwire top` takes it): syscalls, waits and events per request.
    #[arg(long, value_name = "URL", value_parser = crate::values::parse_stats_url)]
    pub server_stats: Option<String>,
    /// Write every figure and the run's parameters as JSON (schema: docs/bench-json.md);
    /// `-` writes it to stdout (the table then goes to stderr). No JSON is written unless
    /// asked.
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
    /// No progress bar and no line describing the run on stderr (the results still go to
    /// stdout).
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
    /// Replay in a closed loop on N connections instead of at the logged pace: each
    /// connection replays one logged connection after another (taken in logged order,
    /// the trace starting again at its end), sending the next request as soon as the
    /// previous answer arrives; measured for --duration after --warmup.
    #[arg(
        long,
        value_name = "N",
        requires = "replay",
        help_heading = "Trace replay"
    )]
    pub replay_connections: Option<usize>,
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

impl BenchArgs {
    /// The offered rate: `--rate`, or when it is not given 1,000 requests/s (open loop) —
    /// or, with a request count (`-n`), the closed loop (as fast as possible, as ab's).
    pub fn rate(&self) -> Rate {
        match (self.rate, self.requests) {
            (Some(rate), _) => rate,
            (None, Some(_)) => Rate::Max,
            (None, None) => DEFAULT_RATE,
        }
    }

    /// The measured duration: `--duration`, or 10 s.
    pub fn duration(&self) -> Duration {
        self.duration.unwrap_or(DEFAULT_DURATION)
    }

    /// The warm-up: `--warmup`, or 2 s — none with a request count (`-n`), as ab's.
    pub fn warmup(&self) -> Duration {
        match (self.warmup, self.requests) {
            (Some(warmup), _) => warmup,
            (None, Some(_)) => Duration::ZERO,
            (None, None) => DEFAULT_WARMUP,
        }
    }
}

/// The rate offered when `--rate` is not given.
pub const DEFAULT_RATE: Rate = Rate::PerSecond(1000.0);
/// The measured duration when `--duration` is not given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// The warm-up when `--warmup` is not given (and no request count is).
pub const DEFAULT_WARMUP: Duration = Duration::from_secs(2);
/// The longest window of a request-count run without `--duration` (only a bound: the
/// count ends it).
const REQUEST_COUNT_BOUND: Duration = Duration::from_secs(365 * 24 * 3600);

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
        let done = match progress.requests_planned {
            // A request count: the share of the requests ended.
            Some(requests) if progress.measuring => {
                (progress.completed + progress.errors) as f64 / requests.max(1) as f64
            }
            Some(_) => 0.0,
            None => progress.elapsed.as_secs_f64() / progress.planned.as_secs_f64().max(1e-3),
        };
        bar.set_prefix(progress.label.clone());
        bar.set_position((done * 1000.0).min(1000.0) as u64);
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

/// Starts the thread that turns SIGINT/SIGTERM/SIGQUIT into a stop request (results so far are
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

/// Prints the report's tables and writes its JSON when asked (no thresholds, no
/// conclusion): see [`finish_with`].
pub(crate) fn finish(report: &BenchReport, json: Option<&Path>) -> anyhow::Result<()> {
    finish_with(report, json, &[], None)
}

/// Prints the report (the tables, the thresholds, the quick start's conclusion) and writes
/// the JSON when asked (`-`: to stdout, the tables then to stderr). A failed threshold
/// ends the process with exit status 99 once everything is written.
pub(crate) fn finish_with(
    report: &BenchReport,
    json: Option<&Path>,
    thresholds: &[Check],
    conclusion: Option<String>,
) -> anyhow::Result<()> {
    let json_to_stdout = json.is_some_and(|path| path == Path::new("-"));
    let document = Document { report, thresholds };
    let mut text = coldwire_bench::table::format_report(report);
    let checks = coldwire_bench::thresholds::format_checks(thresholds);
    if !checks.is_empty() {
        text += "\n";
        text += &checks;
    }
    if let Some(conclusion) = conclusion {
        text += "\n";
        text += &coldwire_bench::table::wrap(&conclusion, 0);
    }
    if json_to_stdout {
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    } else {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
    }
    match json {
        Some(_) if json_to_stdout => {
            let mut stdout = std::io::stdout().lock();
            let _ = serde_json::to_writer_pretty(&mut stdout, &document);
            let _ = stdout.write_all(b"\n");
            let _ = stdout.flush();
        }
        Some(path) => {
            let file = std::fs::File::create(path).with_context(|| {
                format!(
                    "cannot write {} — check the directory exists and is writable",
                    path.display()
                )
            })?;
            let mut writer = std::io::BufWriter::new(file);
            serde_json::to_writer_pretty(&mut writer, &document)
                .map_err(anyhow::Error::from)
                .and_then(|()| Ok(writer.flush()?))
                .with_context(|| format!("cannot write {}", path.display()))?;
            coldwire_server::outln!(
                "\nJSON (schema version {SCHEMA_VERSION}, see docs/bench-json.md): {}",
                path.display()
            );
        }
        None => {}
    }
    if thresholds.iter().any(|check| !check.passed) {
        coldwire_server::errln!(
            "coldwire bench: a threshold failed (✗ above): exit status {FAILED_EXIT_STATUS}"
        );
        // Everything is written and every child stopped: only the exit status is left.
        std::process::exit(i32::from(FAILED_EXIT_STATUS));
    }
    Ok(())
}

/// Runs `coldwire bench`.
pub fn run(arguments: BenchArgs) -> anyhow::Result<()> {
    let stop = stop_on_signal();
    // A URL given as a positional argument (wrk, oha) joins the --url list, first.
    let mut arguments = arguments;
    let positional = std::mem::take(&mut arguments.positional_urls);
    arguments.urls.splice(0..0, positional);
    crate::bench_args::check_request_count(&arguments)?;
    if arguments.workload == "polymix" {
        return crate::polymix::run(&arguments, &stop);
    }
    if arguments.quick || arguments.scenario.is_some() || arguments.robots.is_some() {
        bail!("--quick, --scenario and --robots are PolyMix's: add --workload polymix");
    }
    if let Some(trace) = &arguments.replay {
        return crate::replay::run(&arguments, trace, &stop);
    }
    crate::bench_args::check_habits(&arguments)?;
    crate::bench_args::adopt_connection_header(&mut arguments)?;
    let urls: Vec<&String> = arguments.urls.iter().collect();
    if urls.is_empty() {
        if arguments.spawn.is_some() || arguments.server_pid.is_some() || arguments.proxy.is_some()
        {
            bail!(
                "give the target URL (coldwire bench http://HOST:PORT/PATH; without one, coldwire bench runs its built-in scenario and starts its own server)"
            );
        }
        return quickstart(&arguments, &stop);
    }
    let targets = urls
        .iter()
        .map(|url| Target::parse(url))
        .collect::<Result<Vec<_>, _>>()?;
    let mut load = LoadConfig::new(targets);
    load.proxy = arguments.proxy;
    load.request = crate::bench_args::request_options(&arguments)?;
    load.insecure = arguments.insecure;
    load.ca_file = arguments.cacert.clone();
    load.arrivals = arguments.arrivals;
    load.connections = arguments.connections;
    load.requests_per_connection = arguments.requests_per_connection;
    load.timeout = Duration::from_secs_f64(arguments.timeout);
    load.cold = arguments.cold;
    load.cold_mode = arguments.cold_mode;
    load.cold_addresses = arguments.cold_target.clone();
    load.cold_connect_rate = arguments.cold_rate;
    load.trickle_interval = arguments.trickle_interval;
    load.late_limit = Duration::from_secs_f64(arguments.late_limit / 1000.0);
    load.seed = arguments.seed;
    load.poll = !arguments.no_poll;
    load.rtt = arguments.rtt;
    load.requests = arguments.requests;
    if let Some(requests) = arguments.requests {
        // More connections than requests would only be opened and left unused.
        load.connections = load
            .connections
            .min(usize::try_from(requests).unwrap_or(usize::MAX));
    }
    // Before anything is started or printed: a bad value is the only message.
    load.validate()?;
    check_descriptors(load.connections + load.cold)?;
    let warmup = arguments.warmup();
    let duration = match (arguments.duration, arguments.requests) {
        (None, Some(_)) => REQUEST_COUNT_BOUND,
        _ => arguments.duration(),
    };
    let saturate = if arguments.saturate {
        let Rate::PerSecond(start_rate) = arguments.rate() else {
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
                p99_limit: arguments.saturate_p99,
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
                .wait_for_port(address, arguments.spawn_wait)
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
            label: match arguments.rate() {
                Rate::PerSecond(rate) => format!("{rate:.0}/s"),
                Rate::Max => "max".into(),
            },
            rate: arguments.rate(),
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
    if !arguments.quiet {
        let mut line = crate::bench_args::describe(&load, &plan);
        if arguments.rate.is_none() && arguments.requests.is_some() {
            line.push_str(
                " (with -n and no -R the requests go as fast as the connections allow, as \
                 ab's: -R N offers them at N/s instead)",
            );
        } else if arguments.rate.is_none() && !arguments.saturate {
            line.push_str(
                " (1,000/s is the default: -R N sets the rate, -R max runs wrk's closed loop)",
            );
        }
        let line = coldwire_bench::table::wrap(&line, 2);
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
    let thresholds = crate::bench_args::thresholds(&arguments);
    let mut bar = Bar::new(arguments.quiet);
    let backend = arguments.backend.unwrap_or_else(Backend::best_available);
    let result = run_one(backend, load, &plan, &stop, &mut bar);
    bar.finish();
    if let Some(server) = spawned.as_mut() {
        server.stop_within(Duration::from_secs(10));
    }
    let run = result?;
    let report = BenchReport::of_this_process(
        started,
        MachineInfo::current(arguments.cpu),
        ServerInfo {
            command: arguments.spawn.clone(),
            pid,
            stats_url: arguments.server_stats.clone(),
        },
        vec![run],
        stop.load(Ordering::Relaxed),
    );
    if plan.saturate.is_some() {
        // Steps are run until one fails on purpose: no objective to check.
        return finish(&report, arguments.json.as_deref());
    }
    let checks: Vec<Check> = report
        .runs
        .iter()
        .flat_map(|run| &run.phases)
        .flat_map(|phase| thresholds.check(&phase.label, phase))
        .collect();
    finish_with(&report, arguments.json.as_deref(), &checks, None)
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
    let intro = format!(
        "coldwire bench: built-in scenario — coldwire serve (pid {}{}) on {listen}, files of \
         1,259 B and 8 KiB; naive run (constant arrivals, 50 keep-alive connections) then \
         realistic run (Poisson arrivals, 2,000 cold connections) at 5,000, 20,000 and \
         50,000 requests/s, {} s + {} s warm-up each",
        server.pid(),
        if two_cores {
            ", worker on CPU 0, generator on CPU 1"
        } else {
            ""
        },
        quickstart::DURATION.as_secs(),
        quickstart::WARMUP.as_secs(),
    );
    let _ = std::io::stderr()
        .lock()
        .write_all(coldwire_bench::table::wrap(&intro, 2).as_bytes());
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
    let report = BenchReport::of_this_process(
        started,
        MachineInfo::current(generator_cpu),
        ServerInfo {
            command: Some(server.command().to_owned()),
            pid: Some(server.pid()),
            stats_url: Some(admin),
        },
        runs,
        stop.load(Ordering::Relaxed),
    );
    let conclusion = quickstart::conclusion(&report);
    finish_with(&report, arguments.json.as_deref(), &[], conclusion)
}
