//! Records the tests write and read: synthetic (made up here, not measured), shaped like
//! what `coldwire experiment` produces.

use coldwire_report::{
    Axis, ExperimentRecord, Figure, MachineRecord, Point, RECORD_SCHEMA_VERSION, Scale, Series,
    Table,
};

/// A series whose y falls as x grows, so the plot has something to show.
pub fn series(name: &str, xs: &[f64], start: f64, slope: f64) -> Series {
    Series {
        name: name.to_string(),
        points: xs
            .iter()
            .map(|&x| Point {
                x,
                y: start / (1.0 + slope * x),
            })
            .collect(),
    }
}

/// A figure with the given axes' scales and series.
pub fn figure(id: &str, x_scale: Scale, y_scale: Scale, series: Vec<Series>) -> Figure {
    Figure {
        id: id.to_string(),
        title: format!("Throughput vs cold connections ({id})"),
        reproduces: Some("seed 000, Fig. 1".to_string()),
        x: Axis {
            label: "cold connections".to_string(),
            unit: String::new(),
            scale: x_scale,
        },
        y: Axis {
            label: "saturation throughput".to_string(),
            unit: "requests/s".to_string(),
            scale: y_scale,
        },
        series,
        caption: Some("select and poll fall as idle descriptors grow.".to_string()),
    }
}

/// A complete record named `name` with one four-series figure on a log x axis.
pub fn record(name: &str) -> ExperimentRecord {
    let xs = [100.0, 1_000.0, 5_000.0, 15_000.0];
    ExperimentRecord {
        schema_version: RECORD_SCHEMA_VERSION,
        experiment: name.to_string(),
        title: format!("Cold scaling ({name})"),
        reproduces: vec![
            "seed 000, Fig. 1".to_string(),
            "seed 002, Fig. 4".to_string(),
        ],
        description: "Synthetic test data: four backends, 100 to 15,000 cold connections."
            .to_string(),
        command: vec![
            "coldwire".to_string(),
            "experiment".to_string(),
            name.to_string(),
        ],
        quick: true,
        commit: None,
        started_unix_seconds: 1_795_350_000.0,
        duration_seconds: 42.5,
        machine: MachineRecord {
            label: "vm".to_string(),
            hostname: "test-host".to_string(),
            kernel: "6.18.0".to_string(),
            cpus: 2,
            cpu_model: "Test CPU".to_string(),
            memory_bytes: 24 << 30,
            open_files_limit: 20_000,
        },
        parameters: serde_json::json!({"backends": ["select", "poll", "epoll", "uring"], "duration_seconds": 5}),
        figures: vec![figure(
            "throughput",
            Scale::Log,
            Scale::Linear,
            vec![
                series("select", &xs, 10_000.0, 0.0005),
                series("poll", &xs, 10_500.0, 0.0003),
                series("epoll", &xs, 11_000.0, 0.00001),
                series("uring", &xs, 11_500.0, 0.000005),
            ],
        )],
        tables: vec![Table {
            title: "Throughput at 15,000 cold connections".to_string(),
            columns: vec!["backend".to_string(), "requests/s".to_string()],
            rows: vec![
                vec!["select".to_string(), "1,176".to_string()],
                vec!["epoll".to_string(), "9,565".to_string()],
            ],
        }],
        findings: vec![
            "select loses 88% of its throughput at 15,000 cold connections.".to_string(),
        ],
        seed_comparison: vec!["The seed measured a 44% drop for select.".to_string()],
        raw_files: vec!["raw/select-15000.json".to_string()],
        warnings: vec!["the machine was shared with other builds".to_string()],
    }
}
