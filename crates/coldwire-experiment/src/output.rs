//! Writing an experiment's directory. One function, so that the whole output format is
//! decided in one place: for now `experiment.json` (the record, pretty-printed);
//! `coldwire_report::write_experiment` replaces the body once the renderer exists (it also
//! writes `series.csv`, `summary.md` and every figure as SVG and PNG).

use std::path::Path;

use anyhow::Context;
use coldwire_report::ExperimentRecord;

/// The record's file name inside an experiment directory.
pub const RECORD_FILE: &str = "experiment.json";

/// Writes `record` into the experiment directory `dir` (which exists).
pub fn write(dir: &Path, record: &ExperimentRecord) -> anyhow::Result<()> {
    let path = dir.join(RECORD_FILE);
    let text = serde_json::to_string_pretty(record).context("cannot serialize the record")?;
    std::fs::write(&path, text + "\n").with_context(|| {
        format!(
            "cannot write {} — is the directory writable?",
            path.display()
        )
    })
}
