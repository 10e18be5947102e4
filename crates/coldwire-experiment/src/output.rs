//! Writing an experiment's directory. One function, so that the whole output format is
//! decided in one place: `coldwire_report::write_experiment` writes `experiment.json`,
//! `series.csv`, `summary.md` and every figure as SVG and PNG; its warnings (e.g. a log
//! axis that had to fall back to linear) are printed on stderr.

use std::path::Path;

use coldwire_report::ExperimentRecord;

/// The record's file name inside an experiment directory.
pub use coldwire_report::directory::RECORD_FILE;

/// Writes `record` into the experiment directory `dir` (which exists).
pub fn write(dir: &Path, record: &ExperimentRecord) -> anyhow::Result<()> {
    for warning in coldwire_report::write_experiment(dir, record)? {
        eprintln!("warning: {}: {warning}", record.experiment);
    }
    Ok(())
}
