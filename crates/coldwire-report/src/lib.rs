//! coldwire-report: what an experiment produced and how it is shown. An experiment (crate
//! `coldwire-experiment`) fills an [`ExperimentRecord`]; this crate writes its directory
//! (`experiment.json`, `series.csv`, `summary.md`, every figure as SVG and PNG) and builds
//! the self-contained `index.html` of `coldwire report`. It opens no sockets and runs
//! nothing: everything here is a pure function of records on disk.

pub mod model;

pub use model::{
    Axis, ExperimentRecord, Figure, MachineRecord, Point, RECORD_SCHEMA_VERSION, Scale, Series,
    Table,
};
