//! Writing an experiment's directory. One function, so that the whole output format is
//! decided in one place: `coldwire_report::write_experiment` writes `experiment.json`,
//! `series.csv`, `summary.md` and every figure as SVG and PNG; its warnings (e.g. a log
//! axis that had to fall back to linear) are printed on stderr. And the scratch
//! directories experiments work in ([`scratch_dir`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;

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

/// A new, empty directory under the system's temporary directory (`TMPDIR`), named
/// `PREFIX-PID-N` so that runs and parallel callers never share one. The caller removes it.
pub fn scratch_dir(prefix: &str) -> anyhow::Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&path)
        .with_context(|| format!("cannot create {} (TMPDIR)", path.display()))?;
    Ok(path)
}
