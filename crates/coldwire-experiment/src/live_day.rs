//! The `live-day` experiment (issue 14, seed 000 Tables 3–16): a compressed "day" — a
//! committed access log replayed with a speedup, so its diurnal rate curve passes in
//! seconds or minutes — through `coldwire proxy` (reverse, one worker, pinned) in front of
//! `coldwire origin --trace`, with caching off and on, per backend, while `coldwire bench`
//! holds cold connections to the proxy through a `coldwire wan` relay. The proxy's own
//! per-second stats log (`--stats-log`, docs/metrics.md) gives the seed's statistics
//! tables and the least-squares lines of CPU time against request rate (slope = CPU per
//! request, intercept = idle cost, R²; full range and above a rate threshold), and, where
//! `perf` is installed, a `perf record -e cpu-clock -g` sampling profile of the proxy
//! during the replay, grouped like the seed's profile tables ([`profile`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use coldwire_process::{Launch, Process};
use coldwire_report::ExperimentRecord;
use serde::{Deserialize, Serialize};

mod flame;
mod profile;
mod summary;

use crate::RunContext;
use crate::figures::machine_load_warning;
use crate::process::{ProxyMode, ProxyUnderTest, run_bench, start_listening, start_server};
use crate::serve::{Pinning, available_backends};

/// The scenario's parameters (`experiments/live-day.toml`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Parameters {
    /// The access log replayed (relative to the working directory), e.g.
    /// `traces/nasa-like.log`.
    pub trace: String,
    /// Replay only the log's first this many lines (`None`: all of it); the quick form's
    /// shorter day.
    #[serde(default)]
    pub requests: Option<usize>,
    /// Replay speedup: the log's span divided by this is the "day"'s length.
    pub speedup: f64,
    /// Backends of the proxy.
    pub backends: Vec<String>,
    /// Cache settings: `off` (`--cache-bytes 0`) and/or `on` (`--cache-bytes 256MiB`).
    pub caching: Vec<String>,
    /// Cold connections held to the proxy through the WAN relay (0: none, no relay).
    pub cold: u64,
    /// The relay's round-trip time, milliseconds.
    pub wan_rtt_ms: f64,
    /// The truncated regression keeps the seconds at or above this fraction of the run's
    /// peak rate (the seed's "above 20 requests/second" at a peak of about 45).
    pub threshold_fraction: f64,
    /// Profile the proxy with `perf record` when perf is installed.
    pub profile: bool,
    #[serde(default)]
    pub pinning: Option<Pinning>,
}

/// One run: a backend with caching off or on, replaying the whole "day".
#[derive(Clone, Debug)]
pub(crate) struct Run {
    pub backend: String,
    pub caching: bool,
    /// The proxy's stats log, one JSON value per second.
    pub samples: Vec<serde_json::Value>,
    /// The same, as the report's typed samples (for the regressions).
    pub typed: Vec<coldwire_report::stats_log::StatsSample>,
    /// The profile, when one was taken.
    pub profile: Option<profile::Profile>,
    /// Failed requests of the replay.
    pub errors: u64,
}

impl Run {
    pub fn label(&self) -> String {
        format!(
            "{} cache {}",
            self.backend,
            if self.caching { "on" } else { "off" }
        )
    }
}

/// Runs the experiment.
pub fn run(context: &RunContext) -> anyhow::Result<ExperimentRecord> {
    let parameters: Parameters = context.parameters()?;
    anyhow::ensure!(
        !parameters.backends.is_empty()
            && !parameters.caching.is_empty()
            && parameters.speedup > 0.0,
        "the scenario needs backends, caching settings and a positive speedup"
    );
    for setting in &parameters.caching {
        anyhow::ensure!(
            setting == "on" || setting == "off",
            "caching settings are `on` or `off`, not {setting:?}"
        );
    }
    let trace = PathBuf::from(&parameters.trace);
    anyhow::ensure!(
        trace.is_file(),
        "the trace {} is not there: run from the repository's root (traces/ is committed)",
        trace.display()
    );
    // A shortened log lives in a scratch directory kept until the end of the run.
    let mut _scratch = None;
    let trace = match parameters.requests {
        Some(requests) => {
            let text = std::fs::read_to_string(&trace)
                .with_context(|| format!("cannot read the trace {}", trace.display()))?;
            let head: String = text
                .lines()
                .take(requests)
                .flat_map(|line| [line, "\n"])
                .collect();
            let dir = crate::output::scratch_dir("coldwire-live-day")?;
            let path = dir.join("trace-head.log");
            std::fs::write(&path, head)?;
            _scratch = Some(ScratchDir(dir));
            path
        }
        None => trace,
    };
    let (backends, mut warnings) = available_backends(&parameters.backends)?;
    warnings.extend(machine_load_warning());
    let pinning = parameters.pinning.unwrap_or_default();
    let perf = if parameters.profile {
        let found = profile::perf_available();
        if !found {
            let message = "perf is not installed (or not allowed here): no profile was taken \
                           (apt-get install linux-perf)"
                .to_owned();
            context.progress(&message);
            warnings.push(message);
        }
        found
    } else {
        false
    };
    let origin = start_origin(&context.coldwire, &trace, pinning.generator_cpu)?;
    let mut runs = Vec::new();
    let mut raw_files = Vec::new();
    for backend in &backends {
        for setting in &parameters.caching {
            let caching = setting == "on";
            let stem = format!("{backend}-cache-{setting}");
            context.progress(&format!("{backend}, caching {setting}: replaying the day"));
            match run_one(
                context,
                &parameters,
                &trace,
                origin.1,
                pinning,
                backend,
                caching,
                perf,
                &stem,
            ) {
                Ok((run, files)) => {
                    raw_files.extend(files);
                    if run.errors > 0 {
                        warnings.push(format!("{}: {} requests failed", run.label(), run.errors));
                    }
                    if let Some(profile) = &run.profile {
                        warnings.extend(profile.warning.clone());
                    }
                    runs.push(run);
                }
                Err(error) => {
                    let message = format!("{backend}, caching {setting} failed: {error:#}");
                    context.progress(&format!("warning: {message}"));
                    warnings.push(message);
                }
            }
        }
    }
    drop(origin);
    anyhow::ensure!(
        !runs.is_empty(),
        "no run completed: {}",
        warnings.join("; ")
    );
    let mut record = context.record(
        "A live day: proxy CPU against request rate (regressions) and where the time goes",
        &["seed 000, Tables 1–16, Figs 10–12"],
        summary::description(&parameters, pinning, perf),
    );
    record.parameters = serde_json::to_value(&parameters)?;
    record.raw_files = raw_files;
    summary::summarise(&mut record, &parameters, &runs);
    record.warnings = warnings;
    Ok(record)
}

/// A scratch directory, removed when dropped.
struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `coldwire origin --trace` (every logged path at its logged size, no think time).
fn start_origin(
    coldwire: &Path,
    trace: &Path,
    cpu: Option<usize>,
) -> anyhow::Result<(Process, std::net::SocketAddr)> {
    let args = [
        "origin".to_owned(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--workers".into(),
        "1".into(),
        "--trace".into(),
        trace.display().to_string(),
        "--think".into(),
        "0".into(),
        "--idle-timeout".into(),
        "600".into(),
    ];
    start_listening(coldwire, &args, cpu, "origin listening on http://")
        .context("cannot start the origin (coldwire origin)")
}

/// One replay of the day through a fresh proxy; returns the run and its raw files.
#[allow(clippy::too_many_arguments)]
fn run_one(
    context: &RunContext,
    parameters: &Parameters,
    trace: &Path,
    origin: std::net::SocketAddr,
    pinning: Pinning,
    backend: &str,
    caching: bool,
    perf: bool,
    stem: &str,
) -> anyhow::Result<(Run, Vec<String>)> {
    let raw = context.raw_dir();
    let stats_log = raw.join(format!("{stem}.stats.jsonl"));
    let _ = std::fs::remove_file(&stats_log);
    let flags = [
        "--io".to_owned(),
        backend.into(),
        "--cache-bytes".into(),
        if caching { "256MiB" } else { "0" }.into(),
        "--stats-log".into(),
        stats_log.display().to_string(),
        "--stats-interval".into(),
        "1s".into(),
    ];
    let ProxyUnderTest {
        process: mut proxy,
        address: listen,
        ..
    } = ProxyUnderTest::start(
        &context.coldwire,
        ProxyMode::Reverse(origin),
        &flags,
        pinning.server_cpu,
    )?;
    let mut relay = None;
    let bench: Vec<String> = vec![
        format!("--replay={}", trace.display()),
        format!("--speedup={}", parameters.speedup),
        format!("--url=http://{listen}/"),
    ];
    if parameters.cold > 0 {
        let wan_args = [
            "wan".to_owned(),
            "--to".into(),
            listen.to_string(),
            "--rtt".into(),
            format!("{}ms", parameters.wan_rtt_ms),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--workers".into(),
            "1".into(),
        ];
        let (wan, wan_address) = start_listening(
            &context.coldwire,
            &wan_args,
            pinning.generator_cpu,
            "wan listening on http://",
        )
        .context("cannot start the WAN relay (coldwire wan)")?;
        // The replay does not open cold connections itself: a second generator holds
        // them (through the relay) for the whole day, sending one request a second of its
        // own; it is stopped after the replay.
        let holder_args = vec![
            "bench".to_owned(),
            format!("--url=http://{listen}/"),
            "--rate=1".into(),
            "--connections=1".into(),
            format!("--cold={}", parameters.cold),
            format!("--cold-target={wan_address}"),
            "--warmup=0".into(),
            "--duration=1h".into(),
            "-q".into(),
            "--max-error-rate=100%".into(),
        ];
        let holder = start_server(&context.coldwire, &holder_args, pinning.generator_cpu)
            .context("cannot start the generator of cold connections (coldwire bench --cold)")?;
        // Cold connections open at the bench's --cold-rate (2,000/s), one relay RTT each.
        std::thread::sleep(Duration::from_secs_f64(
            1.0 + parameters.cold as f64 / 2000.0 + parameters.wan_rtt_ms / 1000.0,
        ));
        relay = Some((wan, holder));
    }
    let recorder = if perf {
        Some(profile::Recorder::start(
            proxy.pid(),
            &raw.join(format!("{stem}.perf.data")),
            pinning.generator_cpu,
        )?)
    } else {
        None
    };
    let json = raw.join(format!("{stem}.json"));
    let timeout = Duration::from_secs(600);
    let outcome = run_bench(
        &context.coldwire,
        &bench,
        pinning.generator_cpu,
        &json,
        timeout,
    );
    let profile = recorder.map(|recorder| recorder.finish(&raw, stem));
    // One more interval so the last second is logged, then stop the proxy.
    std::thread::sleep(Duration::from_millis(1200));
    if let Some((mut wan, mut holder)) = relay {
        holder.stop();
        wan.stop();
    }
    proxy.stop();
    let document = outcome?;
    let errors = document
        .runs
        .first()
        .and_then(|run| run.phases.first())
        .map_or(0, |phase| phase.errors_total);
    let text = std::fs::read_to_string(&stats_log)
        .with_context(|| format!("the proxy wrote no stats log at {}", stats_log.display()))?;
    let samples: Vec<serde_json::Value> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()
        .context("the proxy's stats log is not JSON lines")?;
    let typed = coldwire_report::stats_log::read_stats_log(&stats_log)?;
    let mut files = vec![
        format!("raw/{stem}.json"),
        format!("raw/{stem}.txt"),
        format!("raw/{stem}.stats.jsonl"),
    ];
    let profile = match profile {
        Some(Ok(profile)) => {
            files.extend(profile.files.clone());
            Some(profile)
        }
        Some(Err(error)) => Some(profile::Profile::failed(format!(
            "the profile of {backend} (caching {}) failed: {error:#}",
            if caching { "on" } else { "off" }
        ))),
        None => None,
    };
    Ok((
        Run {
            backend: backend.to_owned(),
            caching,
            samples,
            typed,
            profile,
            errors,
        },
        files,
    ))
}

/// `perf` as a pinned child (used by [`profile`]).
pub(crate) fn launch(program: &str, args: &[String], cpu: Option<usize>) -> Launch {
    Launch::new(program).args(args).cpu(cpu)
}
