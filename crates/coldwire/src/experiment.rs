//! `coldwire experiment`: runs named experiments (crate `coldwire-experiment`) and writes
//! each one's directory; the flags only fill a `RunnerOptions`.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use coldwire_experiment::runner::{self, RunnerOptions};

/// `coldwire experiment NAME...`; the help ends with every experiment and its summary,
/// from `coldwire_experiment::EXPERIMENTS`.
#[derive(Debug, Args)]
#[command(after_help = coldwire_experiment::names_help())]
pub struct ExperimentArgs {
    /// Experiments to run (`all` for every one; the list is below).
    #[arg(required_unless_present = "list", value_name = "NAME")]
    pub names: Vec<String>,
    /// Print the experiments' names and summaries (the list below) and exit.
    #[arg(long, conflicts_with = "names")]
    pub list: bool,
    /// Scaled-down versions (the whole set in under two minutes): proves the pipeline.
    #[arg(long)]
    pub quick: bool,
    /// Machine label for the results directory (default: the short host name).
    #[arg(long, value_name = "LABEL")]
    pub machine: Option<String>,
    /// Results directory (default: results/YYYY-MM-DD-LABEL); one subdirectory per
    /// experiment.
    #[arg(long, value_name = "DIR")]
    pub results: Option<PathBuf>,
    /// Directory of the scenario files (NAME.toml); when the default `experiments` is
    /// missing (run outside the repository), the built-in copies are used.
    #[arg(long, value_name = "DIR", default_value = coldwire_experiment::DEFAULT_SCENARIOS)]
    pub scenarios: PathBuf,
    /// Install missing peer programs (nginx, Squid, Varnish, HAProxy) with apt-get; without
    /// it a missing peer is skipped with a line saying how to install it.
    #[arg(long)]
    pub install_peers: bool,
    /// The coldwire executable servers and generators are started from (default: this one).
    #[arg(long, value_name = "PATH")]
    pub coldwire: Option<PathBuf>,
}

/// Runs `coldwire experiment`.
pub fn run(arguments: ExperimentArgs) -> anyhow::Result<()> {
    if arguments.list {
        coldwire_server::outln!("{}", coldwire_experiment::names_help().trim_end());
        return Ok(());
    }
    let coldwire = match arguments.coldwire {
        Some(path) => path,
        None => std::env::current_exe()
            .context("cannot find the coldwire executable: give --coldwire PATH")?,
    };
    let options = RunnerOptions {
        names: arguments.names,
        quick: arguments.quick,
        machine_label: arguments.machine,
        results: arguments.results,
        scenarios: arguments.scenarios,
        coldwire,
        install_peers: arguments.install_peers,
    };
    let outcomes = runner::run(&options)?;
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|outcome| outcome.result.is_err())
        .map(|outcome| outcome.name)
        .collect();
    for outcome in &outcomes {
        match &outcome.result {
            Ok(()) => coldwire_server::outln!("{}: {}", outcome.name, outcome.dir.display()),
            Err(_) => coldwire_server::outln!("{}: FAILED (see above)", outcome.name),
        }
    }
    if let Some(results) = outcomes
        .iter()
        .find(|outcome| outcome.result.is_ok())
        .and_then(|outcome| outcome.dir.parent())
    {
        coldwire_server::outln!(
            "the page with every figure: coldwire report {}",
            results.display()
        );
    }
    if !failed.is_empty() {
        bail!(
            "{} of {} experiments failed: {}",
            failed.len(),
            outcomes.len(),
            failed.join(", ")
        );
    }
    Ok(())
}
