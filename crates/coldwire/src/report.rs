//! `coldwire report`: builds the HTML report from experiment directories
//! (crate `coldwire-report`).

use std::path::PathBuf;

use clap::Args;

/// `coldwire report DIR...`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Experiment directories, or results directories holding several.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
}

/// Runs `coldwire report`.
pub fn run(arguments: ReportArgs) -> anyhow::Result<()> {
    let _ = arguments;
    anyhow::bail!("coldwire report is not built yet")
}
