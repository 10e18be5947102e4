//! `coldwire trace`: synthetic access-log traces and their statistics. `generate` writes a
//! trace of a named shape (`nasa`, `worldcup`: `coldwire_workload::trace::generate`),
//! byte-identical for the same shape, request count and seed; `stats` reads a Common Log
//! Format or Squid native log and prints what `traces/README.md` documents.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use coldwire_workload::trace::generate::{Shape, generate};
use coldwire_workload::trace::{Trace, TraceFormat, TraceStats, parse_trace};

/// `coldwire trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: TraceCommand,
}

/// The `coldwire trace` subcommands.
#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Write a synthetic trace in Common Log Format (same arguments, same bytes).
    Generate(GenerateArgs),
    /// Print a trace's statistics: requests, clients, URLs, sizes, popularity,
    /// connections and sessions, rate over time.
    Stats(StatsArgs),
}

/// `coldwire trace generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The trace family: `nasa` (NASA-HTTP-like) or `worldcup` (WorldCup98-like).
    #[arg(long, value_parser = ["nasa", "worldcup"])]
    pub shape: String,
    /// Records to write (default: the shape's, as in traces/).
    #[arg(long, value_name = "N")]
    pub requests: Option<usize>,
    /// Seed of every draw.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Where to write it (`-` for stdout).
    #[arg(long, default_value = "-", value_name = "FILE")]
    pub out: PathBuf,
}

/// `coldwire trace stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The log to read.
    pub file: PathBuf,
    /// Its format: `clf` (Common Log Format, plain or combined) or `squid` (native
    /// access.log); detected from the first record line when not given.
    #[arg(long)]
    pub format: Option<TraceFormat>,
}

/// Reads and parses a trace file, telling on stderr what was skipped.
pub fn read_trace(path: &Path, format: Option<TraceFormat>) -> anyhow::Result<Trace> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read the trace {}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let trace = parse_trace(&text, format);
    if trace.malformed > 0 {
        coldwire_server::errln!("{}: {}", path.display(), trace.malformed_summary());
    }
    if trace.records.is_empty() {
        anyhow::bail!(
            "{} holds no request in {} format — is it a Common Log Format or Squid native access log? (--format clf|squid)",
            path.display(),
            trace.format.map_or("any known", TraceFormat::name)
        );
    }
    Ok(trace)
}

/// Runs `coldwire trace`.
pub fn run(arguments: TraceArgs) -> anyhow::Result<()> {
    match arguments.command {
        TraceCommand::Generate(arguments) => {
            let shape = Shape::named(&arguments.shape)
                .with_context(|| format!("unknown shape {:?}", arguments.shape))?;
            let text = generate(
                shape,
                arguments.requests.unwrap_or(shape.requests),
                arguments.seed,
            );
            if arguments.out.as_os_str() == "-" {
                // A closed pipe (`| head`) ends the output, not the process.
                let _ = std::io::stdout().lock().write_all(text.as_bytes());
            } else {
                std::fs::write(&arguments.out, text).with_context(|| {
                    format!(
                        "cannot write {} — does its directory exist?",
                        arguments.out.display()
                    )
                })?;
            }
            Ok(())
        }
        TraceCommand::Stats(arguments) => {
            let trace = read_trace(&arguments.file, arguments.format)?;
            coldwire_server::outln!(
                "format                {}",
                trace.format.map_or("-", TraceFormat::name)
            );
            coldwire_server::outln!("malformed lines       {}", trace.malformed);
            let stats = TraceStats::of(&trace.records).to_string();
            coldwire_server::outln!("{}", stats.trim_end());
            Ok(())
        }
    }
}
