//! What an experiment is given to run: where to write, which binary to start, its scenario
//! (with `--quick` overrides already applied) and the machine; plus the small conveniences
//! every experiment needs (its typed parameters, a record to fill, progress lines).

use std::path::PathBuf;

use coldwire_report::{ExperimentRecord, MachineRecord, RECORD_SCHEMA_VERSION};

use crate::bench_result::BenchDocument;
use serde::de::DeserializeOwned;

/// The inputs of one experiment run.
#[derive(Clone, Debug)]
pub struct RunContext {
    /// The experiment's name (`cold-scaling`, …): its scenario file's stem.
    pub name: String,
    /// The `coldwire` binary that servers and load generators are started from.
    pub coldwire: PathBuf,
    /// This experiment's directory, `results/<date>-<machine>/<experiment>/`; it exists,
    /// and raw files go under `raw/` inside it.
    pub dir: PathBuf,
    /// The scenario file's contents after the `[quick]` table's overrides (when `quick`).
    pub scenario: serde_json::Value,
    /// A `--quick` run: scaled down, proves the pipeline end to end, not the speed.
    pub quick: bool,
    /// `--install-peers`: missing peer programs may be installed with apt-get.
    pub install_peers: bool,
    /// The machine.
    pub machine: MachineRecord,
    /// The command line that reproduces this run.
    pub command: Vec<String>,
}

impl RunContext {
    /// `<dir>/raw/`, where raw result files go (it exists).
    pub fn raw_dir(&self) -> PathBuf {
        self.dir.join("raw")
    }

    /// The experiment's typed parameters from its scenario (errors name the file and key).
    pub fn parameters<T: DeserializeOwned>(&self) -> anyhow::Result<T> {
        crate::scenario::parameters(&self.name, &self.scenario)
    }

    /// A record with everything but the measurements filled in: name, `quick`, machine,
    /// command and the scenario as parameters. The runner stamps the timing afterwards.
    pub fn record(
        &self,
        title: &str,
        reproduces: &[&str],
        description: String,
    ) -> ExperimentRecord {
        ExperimentRecord {
            schema_version: RECORD_SCHEMA_VERSION,
            experiment: self.name.clone(),
            title: title.to_owned(),
            reproduces: reproduces
                .iter()
                .map(|figure| (*figure).to_owned())
                .collect(),
            description,
            command: self.command.clone(),
            quick: self.quick,
            commit: None,
            started_unix_seconds: 0.0,
            duration_seconds: 0.0,
            machine: self.machine.clone(),
            parameters: self.scenario.clone(),
            figures: Vec::new(),
            tables: Vec::new(),
            findings: Vec::new(),
            seed_comparison: Vec::new(),
            raw_files: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// A progress line on stderr, prefixed with the experiment's name.
    pub fn progress(&self, message: &str) {
        eprintln!("[{}] {message}", self.name);
    }

    /// Files one measurement's outcome: on success its raw files (`raw/<stem>.json`, given,
    /// and `raw/<stem>.txt`) go into `raw_files` and its document comes back; a failure is
    /// shown as progress and added to `warnings` as "`what` failed: …", so one failed point
    /// never stops the others.
    pub fn keep(
        &self,
        what: &str,
        stem: &str,
        outcome: anyhow::Result<(BenchDocument, String)>,
        raw_files: &mut Vec<String>,
        warnings: &mut Vec<String>,
    ) -> Option<BenchDocument> {
        match outcome {
            Ok((document, raw)) => {
                raw_files.push(raw);
                raw_files.push(format!("raw/{stem}.txt"));
                Some(document)
            }
            Err(error) => {
                let message = format!("{what} failed: {error:#}");
                self.progress(&format!("warning: {message}"));
                warnings.push(message);
                None
            }
        }
    }
}
