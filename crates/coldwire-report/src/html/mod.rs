//! `coldwire report`: one self-contained `index.html` for any number of experiment
//! directories. [`build_report`] finds the experiments, re-renders every figure from its
//! record (so the page always matches the data) and writes the page (module `page`). The page
//! loads nothing from outside: plots are `data:` URIs, the style sheet is inline, and
//! links to raw files are relative to the page.

mod escape;
mod page;

use std::fs;
use std::path::{Component, Path, PathBuf};

use anyhow::Context;

pub use escape::escape_html;

use crate::directory::{RECORD_FILE, read_experiment};
use crate::model::ExperimentRecord;

/// One experiment as the report shows it.
#[derive(Clone, Debug)]
pub struct LoadedExperiment {
    /// Its directory as given or found.
    pub dir: PathBuf,
    /// The directory relative to the page (for links to raw files), `/`-separated.
    pub link_base: String,
    /// Its record.
    pub record: ExperimentRecord,
}

/// What [`build_report`] did.
#[derive(Clone, Debug)]
pub struct ReportOutcome {
    /// The page written.
    pub out: PathBuf,
    /// The experiments it shows, in page order.
    pub experiments: Vec<String>,
    /// Renderer warnings (also shown on the page, in each experiment's section).
    pub warnings: Vec<String>,
}

/// Builds the report at `out` from `inputs`, each an experiment directory (holding
/// `experiment.json`) or a results directory whose subdirectories are experiment
/// directories (taken in name order). The parent of `out` is created if missing.
pub fn build_report(inputs: &[PathBuf], out: &Path) -> anyhow::Result<ReportOutcome> {
    anyhow::ensure!(
        !inputs.is_empty(),
        "no directories given: pass experiment directories or a results directory"
    );
    // The inputs are checked before anything is created: a mistyped directory must not be
    // left behind, empty, by the page's default place inside it.
    let dirs = experiment_dirs(inputs)?;
    let out_dir = out
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    let out_dir = out_dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", out_dir.display()))?;
    let mut experiments = Vec::new();
    for dir in dirs {
        let record = read_experiment(&dir)?;
        let absolute = dir
            .canonicalize()
            .with_context(|| format!("cannot resolve {}", dir.display()))?;
        experiments.push(LoadedExperiment {
            link_base: relative_link(&out_dir, &absolute),
            dir,
            record,
        });
    }
    let (html, warnings) = page::render_page(&experiments)?;
    fs::write(out, html).with_context(|| format!("cannot write {}", out.display()))?;
    Ok(ReportOutcome {
        out: out.to_path_buf(),
        experiments: experiments
            .iter()
            .map(|e| e.record.experiment.clone())
            .collect(),
        warnings,
    })
}

/// The experiment directories named by `inputs`, in order, each once.
pub fn experiment_dirs(inputs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut found: Vec<PathBuf> = Vec::new();
    for input in inputs {
        anyhow::ensure!(
            input.exists(),
            "{}: no such directory — pass an experiment directory \
             (results/<date>-<machine>/<experiment>) or a results directory \
             (results/<date>-<machine>)",
            input.display()
        );
        anyhow::ensure!(input.is_dir(), "{} is not a directory", input.display());
        if input.join(RECORD_FILE).is_file() {
            found.push(input.clone());
            continue;
        }
        let mut children: Vec<PathBuf> = fs::read_dir(input)
            .with_context(|| format!("cannot list {}", input.display()))?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.join(RECORD_FILE).is_file())
            .collect();
        anyhow::ensure!(
            !children.is_empty(),
            "{} holds no {RECORD_FILE}, nor do its subdirectories: pass an experiment directory \
             (results/<date>-<machine>/<experiment>) or a results directory (results/<date>-<machine>)",
            input.display()
        );
        children.sort();
        found.extend(children);
    }
    let mut unique = Vec::new();
    for dir in found {
        let key = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        if !unique.iter().any(|(seen, _)| *seen == key) {
            unique.push((key, dir));
        }
    }
    Ok(unique.into_iter().map(|(_, dir)| dir).collect())
}

/// `target` relative to `from` (both absolute), `/`-separated, ending in `/` unless empty.
fn relative_link(from: &Path, target: &Path) -> String {
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = target.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); from.len() - common];
    parts.extend(
        to[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    if parts.is_empty() {
        String::new()
    } else {
        format!("{}/", parts.join("/"))
    }
}

#[cfg(test)]
mod tests {
    use super::relative_link;
    use std::path::Path;

    #[test]
    fn relative_links_walk_up_then_down() {
        let link = |from: &str, to: &str| relative_link(Path::new(from), Path::new(to));
        assert_eq!(link("/r/2026", "/r/2026/cold-scaling"), "cold-scaling/");
        assert_eq!(link("/r/2026/cold-scaling", "/r/2026/cold-scaling"), "");
        assert_eq!(link("/out", "/r/2026/splice"), "../r/2026/splice/");
    }
}
