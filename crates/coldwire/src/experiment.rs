//! `coldwire experiment`: runs named experiments (crate `coldwire-experiment`) and writes
//! each one's directory with `coldwire-report`.

use clap::Args;

/// `coldwire experiment NAME...`.
#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// Experiments to run (`all` for every one).
    #[arg(required = true)]
    pub names: Vec<String>,
    /// Scaled-down versions (the whole set in under two minutes): proves the pipeline.
    #[arg(long)]
    pub quick: bool,
}

/// Runs `coldwire experiment`.
pub fn run(arguments: ExperimentArgs) -> anyhow::Result<()> {
    for name in &arguments.names {
        let Some(experiment) = coldwire_experiment::find(name) else {
            anyhow::bail!("no experiment called {name:?}");
        };
        let _ = (experiment, arguments.quick);
        anyhow::bail!("coldwire experiment is not built yet");
    }
    Ok(())
}
