//! An experiment directory as `coldwire experiment` leaves it: every file present, the
//! record read back unchanged, `series.csv` holding every plotted point, `summary.md`
//! saying what a reader needs, and clear errors for records this build cannot read.

mod common;

use coldwire_report::{Scale, read_experiment, write_experiment};

fn csv_rows(text: &str) -> Vec<Vec<String>> {
    // The fixtures have no quoted fields except where a test puts them on purpose.
    text.lines()
        .map(|line| line.split(',').map(String::from).collect())
        .collect()
}

#[test]
fn write_then_read_round_trips_and_writes_every_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let record = common::record("cold-scaling");
    let warnings = write_experiment(dir.path(), &record).expect("writes");
    assert!(warnings.is_empty(), "{warnings:?}");
    for file in [
        "experiment.json",
        "series.csv",
        "summary.md",
        "figures/throughput.svg",
        "figures/throughput.png",
    ] {
        let path = dir.path().join(file);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        assert!(size > 0, "{file} missing or empty");
    }
    assert_eq!(read_experiment(dir.path()).expect("reads"), record);
}

#[test]
fn series_csv_holds_every_point_with_its_axes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let record = common::record("cold-scaling");
    write_experiment(dir.path(), &record).expect("writes");
    let text = std::fs::read_to_string(dir.path().join("series.csv")).expect("csv");
    let rows = csv_rows(&text);
    assert_eq!(
        rows[0],
        [
            "figure", "series", "x", "y", "x_label", "x_unit", "y_label", "y_unit"
        ]
    );
    let figure = &record.figures[0];
    let expected: Vec<(String, f64, f64)> = figure
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| (s.name.clone(), p.x, p.y)))
        .collect();
    assert_eq!(rows.len() - 1, expected.len(), "one row per point");
    for (row, (series, x, y)) in rows[1..].iter().zip(&expected) {
        assert_eq!(row[0], "throughput");
        assert_eq!(&row[1], series);
        assert_eq!(row[2].parse::<f64>().expect("x is a number"), *x);
        assert_eq!(row[3].parse::<f64>().expect("y is a number"), *y);
        assert_eq!(
            row[4..],
            [
                "cold connections",
                "",
                "saturation throughput",
                "requests/s"
            ]
        );
    }
}

#[test]
fn series_names_with_commas_are_quoted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut record = common::record("cold-scaling");
    record.figures[0].series[0].name = "select, 1 worker".to_string();
    write_experiment(dir.path(), &record).expect("writes");
    let text = std::fs::read_to_string(dir.path().join("series.csv")).expect("csv");
    assert!(
        text.contains("throughput,\"select, 1 worker\",100,"),
        "{text}"
    );
}

#[test]
fn summary_says_what_was_run_found_and_compared() {
    let dir = tempfile::tempdir().expect("tempdir");
    let record = common::record("cold-scaling");
    write_experiment(dir.path(), &record).expect("writes");
    let summary = std::fs::read_to_string(dir.path().join("summary.md")).expect("summary");
    for needle in [
        "# Cold scaling (cold-scaling)",
        "Quick run",
        "seed 000, Fig. 1; seed 002, Fig. 4",
        "Synthetic test data",
        "coldwire experiment cold-scaling",
        "Started 2026-11-22 12:20 UTC, took 42.5 s",
        "test-host",
        "6.18.0",
        "\"duration_seconds\": 5",
        "select loses 88%",
        "The seed measured a 44% drop",
        "| backend | requests/s |",
        "| select | 1,176 |",
        "![Throughput vs cold connections (throughput)](figures/throughput.svg)",
        "[PNG](figures/throughput.png)",
        "raw/select-15000.json",
        "the machine was shared with other builds",
    ] {
        assert!(
            summary.contains(needle),
            "summary.md lacks `{needle}`:\n{summary}"
        );
    }
}

#[test]
fn the_commit_is_kept_and_named_and_older_records_without_it_still_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut record = common::record("cold-scaling");
    record.commit = Some("9dd9307-dirty".to_owned());
    write_experiment(dir.path(), &record).expect("writes");
    let summary = std::fs::read_to_string(dir.path().join("summary.md")).expect("summary");
    assert!(
        summary.contains("took 42.5 s, at commit 9dd9307-dirty."),
        "{summary}"
    );
    assert_eq!(read_experiment(dir.path()).expect("reads"), record);

    // A record written before the field existed has no `commit` key at all.
    let path = dir.path().join("experiment.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    json.as_object_mut().unwrap().remove("commit");
    std::fs::write(&path, json.to_string()).unwrap();
    assert_eq!(read_experiment(dir.path()).expect("reads").commit, None);
}

#[test]
fn renderer_warnings_are_returned_and_listed_in_the_summary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut record = common::record("cold-scaling");
    record.figures[0].series[1].points[0].y = 0.0;
    record.figures[0].y.scale = Scale::Log;
    let warnings = write_experiment(dir.path(), &record).expect("writes");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("saturation throughput"),
        "{warnings:?}"
    );
    let summary = std::fs::read_to_string(dir.path().join("summary.md")).expect("summary");
    assert!(summary.contains(&warnings[0]), "{summary}");
}

#[test]
fn unknown_schema_version_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut record = common::record("cold-scaling");
    record.schema_version = 99;
    let json = serde_json::to_string(&record).expect("serialises");
    std::fs::write(dir.path().join("experiment.json"), json).expect("write");
    let error = format!(
        "{:#}",
        read_experiment(dir.path()).expect_err("must refuse")
    );
    assert!(error.contains("schema version 99"), "{error}");
    assert!(error.contains("reads schema version 1"), "{error}");
    assert!(error.contains("re-run"), "{error}");
}

#[test]
fn missing_record_and_duplicate_figure_ids_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let error = format!("{:#}", read_experiment(dir.path()).expect_err("no record"));
    assert!(error.contains("experiment.json"), "{error}");

    let mut record = common::record("cold-scaling");
    record.figures.push(record.figures[0].clone());
    let error = format!(
        "{:#}",
        write_experiment(dir.path(), &record).expect_err("duplicate")
    );
    assert!(error.contains("appears twice"), "{error}");
}
