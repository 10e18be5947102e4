//! The `rate-response` experiment (not built yet: see issue 6).

use crate::{ExperimentRecord, RunContext};

/// Runs the experiment.
pub fn run(_context: &RunContext) -> anyhow::Result<ExperimentRecord> {
    anyhow::bail!("the rate-response experiment is not built yet")
}
