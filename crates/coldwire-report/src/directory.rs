//! An experiment directory on disk: `experiment.json` (the record), `series.csv`,
//! `summary.md` and `figures/<id>.svg` + `.png`, written together by
//! [`write_experiment`] and read back by [`read_experiment`].

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use anyhow::Context;

use crate::csv::series_csv;
use crate::model::{ExperimentRecord, RECORD_SCHEMA_VERSION};
use crate::render::{render_png, render_svg};
use crate::summary::{figure_stem, summary_markdown};

/// The record's file name inside an experiment directory.
pub const RECORD_FILE: &str = "experiment.json";

/// Writes `record` into `dir` (created if missing): `experiment.json`, `series.csv`,
/// `summary.md`, and every figure as `figures/<id>.svg` and `figures/<id>.png`. Returns
/// the renderer's warnings (a log axis drawn linear, points left out); they are also
/// listed in `summary.md`, after the record's own warnings. Existing files are replaced.
pub fn write_experiment(dir: &Path, record: &ExperimentRecord) -> anyhow::Result<Vec<String>> {
    check_figure_ids(record)?;
    let figures_dir = dir.join("figures");
    fs::create_dir_all(&figures_dir)
        .with_context(|| format!("cannot create {}", figures_dir.display()))?;
    let mut render_warnings = Vec::new();
    for figure in &record.figures {
        let stem = dir.join(figure_stem(&figure.id));
        let (svg, warnings) = render_svg(figure)?;
        write(&stem.with_extension("svg"), svg.as_bytes())?;
        // The PNG is planned exactly as the SVG was, so its warnings repeat the SVG's.
        render_png(figure, &stem.with_extension("png"))?;
        render_warnings.extend(warnings);
    }
    let json = serde_json::to_string_pretty(record).context("cannot serialise the record")?;
    write(&dir.join(RECORD_FILE), json.as_bytes())?;
    write(&dir.join("series.csv"), series_csv(record).as_bytes())?;
    let all_warnings: Vec<String> = record
        .warnings
        .iter()
        .chain(&render_warnings)
        .cloned()
        .collect();
    write(
        &dir.join("summary.md"),
        summary_markdown(record, &all_warnings).as_bytes(),
    )?;
    Ok(render_warnings)
}

/// Reads `dir/experiment.json`. Fails, saying what to do, when the file is missing, is
/// not JSON, or has a schema version this build does not know.
pub fn read_experiment(dir: &Path) -> anyhow::Result<ExperimentRecord> {
    let path = dir.join(RECORD_FILE);
    let text = fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {}: is {} an experiment directory (written by `coldwire experiment`)?",
            path.display(),
            dir.display()
        )
    })?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", path.display()))?;
    let version = value
        .get("schema_version")
        .and_then(serde_json::Value::as_u64);
    if version != Some(u64::from(RECORD_SCHEMA_VERSION)) {
        let found = version.map_or_else(
            || "no schema_version".to_string(),
            |v| format!("schema version {v}"),
        );
        anyhow::bail!(
            "{} has {found}, but this coldwire reads schema version {RECORD_SCHEMA_VERSION}: \
             re-run the experiment with this build, or build the coldwire revision that wrote it",
            path.display()
        );
    }
    serde_json::from_value(value).with_context(|| {
        format!(
            "{} does not match the experiment record layout (schema version {RECORD_SCHEMA_VERSION})",
            path.display()
        )
    })
}

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// Figure ids become file names: they must be unique and safe as one path component.
fn check_figure_ids(record: &ExperimentRecord) -> anyhow::Result<()> {
    let mut seen = HashSet::new();
    for figure in &record.figures {
        let id = figure.id.as_str();
        let safe = !id.is_empty()
            && !id.starts_with('.')
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        anyhow::ensure!(
            safe,
            "figure id `{id}` in experiment `{}` cannot be a file name: use letters, digits, `-`, `_` and `.` only",
            record.experiment
        );
        anyhow::ensure!(
            seen.insert(id),
            "figure id `{id}` appears twice in experiment `{}`: ids name files and must be unique",
            record.experiment
        );
    }
    Ok(())
}
