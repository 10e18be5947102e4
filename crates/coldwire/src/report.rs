//! `coldwire report`: builds the self-contained HTML report from experiment directories
//! (crate `coldwire-report`), or from a server's stats log (`--stats-log FILE`: rate and
//! CPU over time, CPU against request rate with its regression). The page's path goes to
//! stdout; warnings to stderr.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

/// `coldwire report DIR...` or `coldwire report --stats-log FILE`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Experiment directories (holding experiment.json), or results directories holding
    /// several (e.g. results/2026-11-22-vm).
    #[arg(required_unless_present = "stats_log", value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// A server's stats log (written by --stats-log) to plot instead: request rate and CPU
    /// over time, CPU against request rate and its linear regression. With it, --out is
    /// a directory (default: FILE.report) receiving the figures and index.html.
    #[arg(long, value_name = "FILE", conflicts_with = "dirs")]
    pub stats_log: Option<PathBuf>,
    /// Where to write the page (default: index.html inside the first DIR). Links to raw
    /// files are relative to it.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Runs `coldwire report`.
pub fn run(arguments: ReportArgs) -> anyhow::Result<()> {
    if let Some(log) = &arguments.stats_log {
        return report_stats_log(log, arguments.out);
    }
    let out = arguments
        .out
        .unwrap_or_else(|| arguments.dirs[0].join("index.html"));
    let outcome = coldwire_report::build_report(&arguments.dirs, &out)?;
    for warning in &outcome.warnings {
        coldwire_server::errln!("warning: {warning}");
    }
    coldwire_server::errln!(
        "coldwire report: {} experiment(s): {}",
        outcome.experiments.len(),
        outcome.experiments.join(", ")
    );
    coldwire_server::outln!("{}", outcome.out.display());
    Ok(())
}

/// The stats-log report: an experiment directory at `out` (figures, summary.md, CSV) and
/// its index.html.
fn report_stats_log(log: &Path, out: Option<PathBuf>) -> anyhow::Result<()> {
    use coldwire_report::stats_log::{read_stats_log, stats_log_record};
    let samples = read_stats_log(log)?;
    let out = out.unwrap_or_else(|| {
        let mut name = log.as_os_str().to_owned();
        name.push(".report");
        PathBuf::from(name)
    });
    std::fs::create_dir_all(&out)
        .with_context(|| format!("cannot create the report directory {}", out.display()))?;
    let source = log.file_name().map_or_else(
        || log.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    );
    let record = stats_log_record(&samples, &source);
    for finding in &record.findings {
        coldwire_server::errln!("{finding}");
    }
    for warning in &record.warnings {
        coldwire_server::errln!("warning: {warning}");
    }
    coldwire_report::write_experiment(&out, &record)?;
    let outcome =
        coldwire_report::build_report(std::slice::from_ref(&out), &out.join("index.html"))?;
    coldwire_server::outln!("{}", outcome.out.display());
    Ok(())
}
