//! What an experiment is given to run: where to write, which binary to start, its scenario
//! (with `--quick` overrides already applied) and the machine.

use std::path::PathBuf;

use coldwire_report::MachineRecord;

/// The inputs of one experiment run.
#[derive(Clone, Debug)]
pub struct RunContext {
    /// The `coldwire` binary that servers and load generators are started from.
    pub coldwire: PathBuf,
    /// This experiment's directory, `results/<date>-<machine>/<experiment>/`; it exists,
    /// and raw files go under `raw/` inside it.
    pub dir: PathBuf,
    /// The scenario file's contents after the `[quick]` table's overrides (when `quick`).
    pub scenario: serde_json::Value,
    /// A `--quick` run: scaled down, proves the pipeline end to end, not the speed.
    pub quick: bool,
    /// The machine.
    pub machine: MachineRecord,
    /// The command line that reproduces this run.
    pub command: Vec<String>,
}
