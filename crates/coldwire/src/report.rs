//! `coldwire report`: builds the self-contained HTML report from experiment directories
//! (crate `coldwire-report`). The page's path goes to stdout; warnings to stderr.

use std::path::PathBuf;

use clap::Args;

/// `coldwire report DIR...`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Experiment directories (holding experiment.json), or results directories holding
    /// several (e.g. results/2026-11-22-vm).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Where to write the page (default: index.html inside the first DIR). Links to raw
    /// files are relative to it.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Runs `coldwire report`.
pub fn run(arguments: ReportArgs) -> anyhow::Result<()> {
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
