//! The experiment record: the contract between `coldwire experiment` (which measures) and
//! `coldwire report` (which shows). One record per experiment directory, stored as
//! `experiment.json`. Readers ignore fields they do not know; removing or renaming a field,
//! or changing a unit, bumps [`RECORD_SCHEMA_VERSION`].

use serde::{Deserialize, Serialize};

/// Version of the `experiment.json` layout.
pub const RECORD_SCHEMA_VERSION: u32 = 1;

/// Everything one experiment run produced, as the report needs it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ExperimentRecord {
    /// [`RECORD_SCHEMA_VERSION`] when written.
    pub schema_version: u32,
    /// Short name, also the directory name: `cold-scaling`, `rate-response`, …
    pub experiment: String,
    /// One-line title for the report's section heading.
    pub title: String,
    /// The seed figures this experiment reproduces, e.g. `"seed 000, Fig. 1"`.
    pub reproduces: Vec<String>,
    /// What was run, in prose (a paragraph: setup, pinning, durations).
    pub description: String,
    /// The command that reproduces this directory (argv).
    pub command: Vec<String>,
    /// A `--quick` run (scaled down: proves the pipeline, not the speed).
    pub quick: bool,
    /// The source it ran from: `git describe --always --dirty` of the working directory
    /// (absent when that is not a git checkout, and in records written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Unix time the experiment started.
    pub started_unix_seconds: f64,
    /// Wall-clock seconds it took.
    pub duration_seconds: f64,
    /// The machine it ran on.
    pub machine: MachineRecord,
    /// The scenario's parameters as they were used (after `--quick` overrides).
    pub parameters: serde_json::Value,
    /// The plots, in reading order.
    pub figures: Vec<Figure>,
    /// Tables of headline numbers, in reading order.
    pub tables: Vec<Table>,
    /// Headline findings, one sentence each (`summary.md` and the report list them).
    pub findings: Vec<String>,
    /// How the numbers compare with the seed's, one sentence each.
    pub seed_comparison: Vec<String>,
    /// Raw result files, relative to the experiment directory (e.g. `raw/epoll-0.json`).
    pub raw_files: Vec<String>,
    /// Problems met while measuring (a peer missing, a step that failed, noise).
    pub warnings: Vec<String>,
}

/// The machine an experiment ran on.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct MachineRecord {
    /// Label used in the results directory name (`results/<date>-<label>/`).
    pub label: String,
    /// `hostname`.
    pub hostname: String,
    /// `uname -r`.
    pub kernel: String,
    /// CPUs available.
    pub cpus: usize,
    /// `model name` from /proc/cpuinfo, if any.
    pub cpu_model: String,
    /// MemTotal in bytes.
    pub memory_bytes: u64,
    /// Soft limit on open files the experiment ran with.
    pub open_files_limit: u64,
}

/// One plot: lines with markers, one per series.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Figure {
    /// File stem: the plot is written as `<id>.svg` and `<id>.png`; unique in the record.
    pub id: String,
    /// Title drawn above the plot.
    pub title: String,
    /// The seed figure it corresponds to (`"seed 000, Fig. 9"`), shown under the plot.
    pub reproduces: Option<String>,
    /// Horizontal axis.
    pub x: Axis,
    /// Vertical axis.
    pub y: Axis,
    /// The lines.
    pub series: Vec<Series>,
    /// A sentence under the plot saying what to look at (optional).
    pub caption: Option<String>,
}

/// An axis: its label, unit and scale.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Axis {
    /// What is measured, e.g. `"cold connections"`.
    pub label: String,
    /// Unit, e.g. `"requests/s"`, `"µs"`; empty for counts.
    pub unit: String,
    /// Linear or logarithmic.
    pub scale: Scale,
}

/// Axis scale. Use `Log` when the data spans decades (the renderer falls back to linear
/// when a value is not positive, and says so in a warning).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// Linear.
    Linear,
    /// Base-10 logarithmic.
    Log,
}

/// One line of a figure.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Series {
    /// Legend entry, e.g. `"epoll"`.
    pub name: String,
    /// Points in x order.
    pub points: Vec<Point>,
}

/// One measured point.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct Point {
    /// Horizontal value.
    pub x: f64,
    /// Vertical value.
    pub y: f64,
}

/// A table of strings (numbers already formatted with their units).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Table {
    /// Caption.
    pub title: String,
    /// Column headings.
    pub columns: Vec<String>,
    /// Rows, each as long as `columns`.
    pub rows: Vec<Vec<String>>,
}
