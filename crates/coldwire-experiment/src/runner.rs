//! Running named experiments one after another: for each, `<results>/<name>/raw/` is
//! created, the scenario loaded (with `--quick` overrides), the experiment run, its record
//! stamped with timing, command and machine, and written with [`crate::output::write`]. A
//! failing experiment (an error or a panic) is reported and the next one still runs.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};

use crate::{EXPERIMENTS, Experiment, RunContext, machine, output, scenario};

/// What to run and where.
#[derive(Clone, Debug)]
pub struct RunnerOptions {
    /// Experiment names, or `all`.
    pub names: Vec<String>,
    /// Scaled-down runs.
    pub quick: bool,
    /// Machine label (default: the short host name).
    pub machine_label: Option<String>,
    /// Results directory (default `results/<YYYY-MM-DD>-<label>`).
    pub results: Option<PathBuf>,
    /// Where the scenario files are.
    pub scenarios: PathBuf,
    /// The `coldwire` binary to start servers and generators from.
    pub coldwire: PathBuf,
    /// Install missing peer programs with apt-get (`--install-peers`); otherwise a missing
    /// peer is skipped with a line saying how to install it.
    pub install_peers: bool,
}

/// How one experiment ended.
#[derive(Debug)]
pub struct Outcome {
    /// Its name.
    pub name: &'static str,
    /// Its directory.
    pub dir: PathBuf,
    /// `Err` with the message when it failed.
    pub result: Result<(), String>,
}

/// The experiments `names` stand for (`all` is every one), in the order given; an unknown
/// name is an error listing the known ones.
pub fn resolve(names: &[String]) -> anyhow::Result<Vec<&'static Experiment>> {
    let mut chosen: Vec<&'static Experiment> = Vec::new();
    for name in names {
        let found: Vec<&'static Experiment> = if name == "all" {
            EXPERIMENTS.iter().collect()
        } else {
            match crate::find(name) {
                Some(experiment) => vec![experiment],
                None => bail!(
                    "no experiment called {name:?}; known: {}, or all",
                    EXPERIMENTS
                        .iter()
                        .map(|experiment| experiment.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        };
        for experiment in found {
            if !chosen.iter().any(|known| known.name == experiment.name) {
                chosen.push(experiment);
            }
        }
    }
    if chosen.is_empty() {
        bail!("name at least one experiment (or all)");
    }
    Ok(chosen)
}

/// `YYYY-MM-DD` (UTC) of a Unix time.
pub use coldwire_report::time::utc_date;

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

/// The command that reproduces one experiment's directory.
fn reproducing_command(
    options: &RunnerOptions,
    name: &str,
    label: &str,
    results: &Path,
) -> Vec<String> {
    let mut command = vec![
        "coldwire".to_owned(),
        "experiment".to_owned(),
        name.to_owned(),
    ];
    if options.quick {
        command.push("--quick".into());
    }
    if options.install_peers {
        command.push("--install-peers".into());
    }
    command.extend(["--machine".to_owned(), label.to_owned()]);
    command.extend(["--results".to_owned(), results.display().to_string()]);
    if options.scenarios != Path::new(crate::DEFAULT_SCENARIOS) {
        command.extend([
            "--scenarios".to_owned(),
            options.scenarios.display().to_string(),
        ]);
    }
    command
}

/// Runs the experiments; returns one outcome per experiment (errors before any ran — an
/// unknown name, an unwritable results directory — are returned as `Err`).
pub fn run(options: &RunnerOptions) -> anyhow::Result<Vec<Outcome>> {
    let experiments = resolve(&options.names)?;
    let open_files_limit =
        machine::raise_open_files_limit().context("cannot read or raise the open-files limit")?;
    let label = options
        .machine_label
        .clone()
        .unwrap_or_else(machine::short_hostname);
    let results = options.results.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(format!("{}-{label}", utc_date(unix_now())))
    });
    let machine = machine::current(&label, open_files_limit);
    eprintln!(
        "coldwire experiment: {} ({}), results in {}, open-files limit {open_files_limit}",
        experiments
            .iter()
            .map(|experiment| experiment.name)
            .collect::<Vec<_>>()
            .join(", "),
        if options.quick { "quick" } else { "full" },
        results.display()
    );
    let mut outcomes = Vec::new();
    for experiment in experiments {
        let dir = results.join(experiment.name);
        let started = Instant::now();
        eprintln!("[{}] starting: {}", experiment.name, experiment.summary);
        let result = run_one(experiment, options, &dir, &label, &results, &machine)
            .map_err(|error| format!("{error:#}"));
        match &result {
            Ok(()) => eprintln!(
                "[{}] done in {:.0} s: {}",
                experiment.name,
                started.elapsed().as_secs_f64(),
                dir.join(output::RECORD_FILE).display()
            ),
            Err(error) => eprintln!("[{}] FAILED: {error}", experiment.name),
        }
        outcomes.push(Outcome {
            name: experiment.name,
            dir,
            result,
        });
    }
    Ok(outcomes)
}

fn run_one(
    experiment: &Experiment,
    options: &RunnerOptions,
    dir: &Path,
    label: &str,
    results: &Path,
    machine: &coldwire_report::MachineRecord,
) -> anyhow::Result<()> {
    let raw = dir.join("raw");
    std::fs::create_dir_all(&raw).with_context(|| {
        format!(
            "cannot create {} — is the results directory writable?",
            raw.display()
        )
    })?;
    let scenario = scenario::load(&options.scenarios, experiment.name, options.quick)?;
    let context = RunContext {
        name: experiment.name.to_owned(),
        coldwire: options.coldwire.clone(),
        dir: dir.to_owned(),
        scenario,
        quick: options.quick,
        install_peers: options.install_peers,
        machine: machine.clone(),
        command: reproducing_command(options, experiment.name, label, results),
    };
    let started_unix = unix_now();
    let started = Instant::now();
    let mut record = match std::panic::catch_unwind(AssertUnwindSafe(|| (experiment.run)(&context)))
    {
        Ok(result) => result?,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_owned()))
                .unwrap_or_else(|| "no message".into());
            bail!("the experiment panicked: {message} (a bug: please report it)");
        }
    };
    record.started_unix_seconds = started_unix;
    record.duration_seconds = started.elapsed().as_secs_f64();
    record.commit = source_commit();
    record.command = context.command.clone();
    record.machine = context.machine.clone();
    record.quick = context.quick;
    record.experiment = experiment.name.to_owned();
    output::write(dir, &record)
}

/// `git describe --always --dirty` of the working directory, when it is a git checkout
/// with git installed (a result then names the source it came from).
fn source_commit() -> Option<String> {
    let output = std::process::Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let commit = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (output.status.success() && !commit.is_empty()).then_some(commit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_calendar_days() {
        assert_eq!(utc_date(0.0), "1970-01-01");
        assert_eq!(utc_date(951_782_400.0), "2000-02-29");
        assert_eq!(utc_date(1_795_305_600.0 + 86_399.0), "2026-11-22");
    }

    #[test]
    fn names_resolve_in_order_without_duplicates() {
        let names = |list: &[&str]| {
            list.iter()
                .map(|name| (*name).to_owned())
                .collect::<Vec<_>>()
        };
        let chosen = resolve(&names(&["rate-response", "cold-scaling", "rate-response"])).unwrap();
        let chosen: Vec<&str> = chosen.iter().map(|experiment| experiment.name).collect();
        assert_eq!(chosen, ["rate-response", "cold-scaling"]);
        assert_eq!(resolve(&names(&["all"])).unwrap().len(), EXPERIMENTS.len());
        let error = match resolve(&names(&["cold-scalin"])) {
            Ok(_) => panic!("an unknown name must be refused"),
            Err(error) => error.to_string(),
        };
        assert!(
            error.contains("no experiment called \"cold-scalin\""),
            "{error}"
        );
        assert!(
            error.contains("cold-scaling"),
            "lists the known ones: {error}"
        );
    }
}
