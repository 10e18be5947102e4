//! coldwire-report: what an experiment produced and how it is shown. An experiment (crate
//! `coldwire-experiment`) fills an [`ExperimentRecord`]; this crate writes its directory
//! (`experiment.json`, `series.csv`, `summary.md`, every figure as SVG and PNG) and builds
//! the self-contained `index.html` of `coldwire report`. It opens no sockets and runs
//! nothing: everything here is a pure function of records on disk.

pub mod csv;
pub mod directory;
pub mod font;
pub mod html;
pub mod model;
pub mod plan;
pub mod render;
pub mod stats_log;
pub mod summary;
pub mod ticks;
pub mod time;

pub use directory::{read_experiment, write_experiment};
pub use html::{ReportOutcome, build_report};
pub use model::{
    Axis, ExperimentRecord, Figure, MachineRecord, Point, RECORD_SCHEMA_VERSION, Scale, Series,
    Table,
};
pub use render::{render_png, render_svg};
