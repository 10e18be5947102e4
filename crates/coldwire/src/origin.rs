//! `coldwire origin`: builds a [`SimulatorConfig`] from the flags, starts the origin
//! simulator, prints where it listens (stdout, for scripts), reloads its configuration
//! file on SIGHUP (the think time and timeouts change live, the objects do not), and stops
//! it on SIGINT, SIGTERM or SIGQUIT. With `--trace FILE` it serves the objects of an access log
//! instead.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use coldwire_server::simulator::{RunningSimulator, SimulatorConfig, ThinkTime};
use coldwire_server::system;
use coldwire_workload::ContentMix;
use coldwire_workload::trace::{Catalogue, TraceFormat};

use crate::runtime_args::RuntimeArgs;
use crate::values::{parse_duration, parse_size};

/// `coldwire origin`.
#[derive(Debug, Args)]
pub struct OriginArgs {
    /// The objects served: `polymix4` (Web Polygraph's PolyMix-4 content mix) or a fixed
    /// size for every object (`8KiB`, `1259`), all cachable.
    #[arg(long, default_value = "polymix4", value_name = "MIX")]
    pub mix: String,
    /// Mean server think time before each answer (PolyMix-4: 2.5s; 0 for microbenchmarks).
    #[arg(long, default_value = "2.5s", value_name = "DURATION", value_parser = parse_duration)]
    pub think: Duration,
    /// Standard deviation of the think time (normal, never below zero; PolyMix-4: 1s).
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = parse_duration)]
    pub think_sd: Duration,
    /// Serve the objects of this access log (Common Log Format or Squid native) instead of
    /// the mix: each logged path with the size it logged, 404 for any other path
    /// (docs/replay.md). Think time still applies (`--think 0` to replay a trace's pace).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// The --trace file's format (`clf` or `squid`); detected when not given.
    #[arg(long, value_name = "FORMAT", requires = "trace")]
    pub trace_format: Option<TraceFormat>,
    /// Seed of the objects (the robots must use the same) and of the think times.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// What every server subcommand shares.
    #[command(flatten, next_help_heading = "Every server")]
    pub runtime: RuntimeArgs,
}

fn config(arguments: OriginArgs) -> anyhow::Result<SimulatorConfig> {
    let listen = arguments
        .runtime
        .listen
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8090)));
    let mut config = SimulatorConfig::new(listen);
    arguments.runtime.apply(&mut config.runtime)?;
    config.mix = match arguments.mix.trim() {
        "polymix4" | "polymix-4" => ContentMix::polymix4(arguments.seed),
        size => ContentMix::fixed(
            parse_size(size).map_err(|error| {
                anyhow::anyhow!("--mix {size:?}: expected polymix4 or a size ({error})")
            })?,
            arguments.seed,
        ),
    };
    config.think = ThinkTime {
        mean: arguments.think,
        sd: arguments.think_sd,
    };
    if arguments.think.is_zero() {
        config.think = ThinkTime::NONE;
    }
    config.seed = arguments.seed;
    if let Some(path) = &arguments.trace {
        let trace = crate::trace::read_trace(path, arguments.trace_format)?;
        let catalogue = Catalogue::from_records(&trace.records);
        if catalogue.is_empty() {
            anyhow::bail!(
                "{} names no object (every record has an error status) — nothing to serve",
                path.display()
            );
        }
        config.trace = Some(Arc::new(catalogue));
    }
    Ok(config)
}

/// The `--trace` the simulator started with: a reload does not read the file again.
struct StartedTrace {
    path: Option<PathBuf>,
    format: Option<TraceFormat>,
    catalogue: Option<Arc<Catalogue>>,
}

/// The configuration a reload asks for, and the settings it wanted changed that are kept
/// here (the trace, which is not read again); the server keeps and names the others.
fn reload_config(
    mut arguments: OriginArgs,
    started: &StartedTrace,
) -> anyhow::Result<(SimulatorConfig, Vec<&'static str>)> {
    let mut kept = Vec::new();
    if arguments.trace != started.path || arguments.trace_format != started.format {
        kept.push("--trace");
    }
    arguments.trace = None;
    arguments.trace_format = None;
    let mut config = config(arguments)?;
    config.trace = started.catalogue.clone();
    Ok((config, kept))
}

/// Runs the simulator until a termination signal.
pub fn run(arguments: OriginArgs) -> anyhow::Result<()> {
    let trace_path = arguments.trace.clone();
    let trace_format = arguments.trace_format;
    let config = config(arguments).map_err(crate::exit_status::usage)?;
    let started = StartedTrace {
        path: trace_path,
        format: trace_format,
        catalogue: config.trace.clone(),
    };
    let objects = match &config.trace {
        Some(catalogue) => format!(
            "{} trace objects, {:.1} MB in all",
            catalogue.len(),
            catalogue.total_bytes() as f64 / 1e6
        ),
        None => format!("mean object {:.1} KB", config.mix.mean_size() / 1024.0),
    };
    let summary = format!(
        "coldwire origin: {objects}, think {:?} ± {:?}, backend {}, {} worker(s); \
         Ctrl-C stops",
        config.think.mean, config.think.sd, config.runtime.backend, config.runtime.workers,
    );
    let origin = RunningSimulator::start(config).context("coldwire origin could not start")?;
    coldwire_server::errln!("{summary}");
    coldwire_server::outln!("origin listening on http://{}", origin.local_addr());
    if let Some(admin) = origin.admin_addr() {
        coldwire_server::outln!("stats on http://{admin}/stats");
    }
    let stop = origin.stop_handle();
    let reloader = origin.reload_handle();
    system::take_signals(system::SignalActions {
        program: "coldwire origin",
        message: "finishing answers",
        stop: Box::new(move || stop.stop()),
        reload: Some(Box::new(move || {
            crate::reload::reload("coldwire origin", |command| match command {
                crate::cli::Command::Origin(arguments) => {
                    let (config, mut kept) = reload_config(arguments, &started)?;
                    kept.extend(reloader.reload(config)?);
                    Ok(kept)
                }
                _ => anyhow::bail!("the command line is no longer `coldwire origin`"),
            })
        })),
        upgrade: Some(crate::reload::upgrade_action(
            "coldwire origin",
            origin.upgrade_handle(),
        )),
    })
    .context("cannot start the signal thread")?;
    coldwire_server::notify::ready();
    origin
        .join()
        .context("coldwire origin stopped with an error")?;
    Ok(())
}
