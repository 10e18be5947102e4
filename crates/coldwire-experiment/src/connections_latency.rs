//! The `connections-latency` experiment (not built yet: see issue 6).

use crate::{ExperimentRecord, RunContext};

/// Runs the experiment.
pub fn run(_context: &RunContext) -> anyhow::Result<ExperimentRecord> {
    anyhow::bail!("the connections-latency experiment is not built yet")
}
