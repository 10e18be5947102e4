//! Shared by the `accept-herd` and `slot-alloc` tests: the scenario files read as the
//! runner reads them (TOML, `[quick]` overrides applied), a `RunContext` in a temporary
//! directory, and checks on a record's figures and raw files.

use std::path::{Path, PathBuf};

use coldwire_experiment::{ExperimentRecord, RunContext};
use coldwire_report::{Figure, MachineRecord};

/// The repository's `experiments/` directory.
pub fn experiments_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments")
}

/// `experiments/<name>.toml` as JSON, with its `[quick]` table applied when `quick`.
pub fn scenario(name: &str, quick: bool) -> serde_json::Value {
    let path = experiments_dir().join(format!("{name}.toml"));
    let text = std::fs::read_to_string(&path).expect("the scenario file exists");
    let mut table: toml::Table = toml::from_str(&text).expect("the scenario is valid TOML");
    let overrides = table.remove("quick");
    if quick {
        let Some(toml::Value::Table(overrides)) = overrides else {
            panic!("{name}.toml has no [quick] table");
        };
        table.extend(overrides);
    }
    serde_json::to_value(table).expect("TOML converts to JSON")
}

/// A context writing into `dir`, as the runner would build it.
pub fn context(dir: &Path, scenario: serde_json::Value, quick: bool) -> RunContext {
    RunContext {
        name: "micro-experiment".to_owned(),
        coldwire: PathBuf::from("coldwire"),
        dir: dir.to_path_buf(),
        scenario,
        quick,
        install_peers: false,
        machine: MachineRecord {
            label: "test".to_owned(),
            kernel: "test-kernel".to_owned(),
            ..MachineRecord::default()
        },
        command: vec!["coldwire".to_owned(), "experiment".to_owned()],
    }
}

/// Runs experiment `name` with `scenario` (as a quick run) writing into `dir`.
pub fn run_in(
    dir: &Path,
    name: &str,
    scenario: serde_json::Value,
) -> anyhow::Result<ExperimentRecord> {
    let experiment = coldwire_experiment::find(name).expect("registered");
    (experiment.run)(&context(dir, scenario, true))
}

/// The figure called `id`; fails the test when it is missing.
pub fn figure<'a>(record: &'a ExperimentRecord, id: &str) -> &'a Figure {
    record
        .figures
        .iter()
        .find(|figure| figure.id == id)
        .unwrap_or_else(|| panic!("figure {id} is missing"))
}

/// Every series of `figure` has one point per `xs`, in order, with finite positive values;
/// there are `series` of them with distinct names.
pub fn assert_series(figure: &Figure, series: usize, xs: &[f64]) {
    assert_eq!(figure.series.len(), series, "{}: series", figure.id);
    let mut names: Vec<&str> = figure.series.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(
        names.len(),
        series,
        "{}: series names must differ",
        figure.id
    );
    for line in &figure.series {
        let got: Vec<f64> = line.points.iter().map(|point| point.x).collect();
        assert_eq!(got, xs, "{} / {}: x values", figure.id, line.name);
        for point in &line.points {
            assert!(
                point.y.is_finite() && point.y > 0.0,
                "{} / {}: y = {} at x = {}",
                figure.id,
                line.name,
                point.y,
                point.x
            );
        }
    }
}

/// Every raw file the record lists exists under `dir` and is JSON; returns them parsed.
pub fn raw_files(record: &ExperimentRecord, dir: &Path) -> Vec<serde_json::Value> {
    assert!(!record.raw_files.is_empty(), "no raw files listed");
    record
        .raw_files
        .iter()
        .map(|file| {
            assert!(file.starts_with("raw/"), "{file} is not under raw/");
            let text = std::fs::read_to_string(dir.join(file)).expect("the raw file exists");
            serde_json::from_str(&text).expect("the raw file is JSON")
        })
        .collect()
}

/// The x values a scenario's list key asks for, as plotted.
pub fn xs(scenario: &serde_json::Value, key: &str) -> Vec<f64> {
    let mut values: Vec<f64> = scenario[key]
        .as_array()
        .expect("the key is a list")
        .iter()
        .map(|value| value.as_f64().expect("a number"))
        .collect();
    values.sort_by(f64::total_cmp);
    values.dedup();
    values
}
