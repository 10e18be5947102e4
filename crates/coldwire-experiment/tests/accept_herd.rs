//! `accept-herd` run with its quick scenario in a temporary directory: the record has one
//! line per mode and a point per N in every figure, the numbers are sane, the raw data is
//! written; bad parameters are refused with a message naming the key.

mod micro_support;

use micro_support::{assert_series, figure, raw_files, run_in, scenario, xs};

const MODES: usize = 4;

fn run(scenario: serde_json::Value) -> anyhow::Result<coldwire_experiment::ExperimentRecord> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    run_in(dir.path(), "accept-herd", scenario)
}

#[test]
fn quick_run_measures_every_mode_at_every_n() {
    let quick = scenario("accept-herd", true);
    let workers = xs(&quick, "workers");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let record = run_in(dir.path(), "accept-herd", quick.clone()).expect("it runs");

    assert_eq!(record.experiment, "accept-herd");
    assert!(record.quick);
    for id in [
        "sleeps-per-connection",
        "returns-per-connection",
        "accept-spread",
        "cpu-per-connection",
        "throughput",
    ] {
        assert_series(figure(&record, id), MODES, &workers);
    }
    // Every accepted connection needs at least one return from accept()/epoll_wait().
    for line in &figure(&record, "returns-per-connection").series {
        for point in &line.points {
            assert!(
                point.y >= 1.0,
                "{}: {} returns per connection",
                line.name,
                point.y
            );
        }
    }
    for line in &figure(&record, "accept-spread").series {
        for point in &line.points {
            assert!(point.y <= 1.0 + 1e-9, "Jain's index {} above 1", point.y);
        }
    }
    assert_eq!(record.tables[0].rows.len(), MODES * workers.len());
    assert!(
        record.tables[0]
            .rows
            .iter()
            .all(|row| row.len() == record.tables[0].columns.len())
    );
    assert!(!record.findings.is_empty() && !record.seed_comparison.is_empty());

    let raw = raw_files(&record, dir.path());
    let points = raw[0]["points"].as_array().expect("points");
    let repetitions = quick["repetitions"].as_u64().expect("a count") as usize;
    assert_eq!(points.len(), MODES * workers.len() * repetitions);
    let connections = quick["connections_per_point"].as_u64().expect("a count");
    for point in points {
        let per_worker = point["per_worker"].as_array().expect("per_worker");
        assert_eq!(
            per_worker.len() as u64,
            point["workers"].as_u64().expect("N")
        );
        let accepted: u64 = per_worker
            .iter()
            .map(|worker| worker["accepted"].as_u64().expect("accepted"))
            .sum();
        assert_eq!(
            accepted, connections,
            "every connection accepted exactly once"
        );
    }
}

fn error_of(scenario: serde_json::Value) -> String {
    format!(
        "{:#}",
        run(scenario).expect_err("bad parameters are refused")
    )
}

#[test]
fn bad_parameters_are_refused_with_the_key_named() {
    let good = serde_json::json!({
        "workers": [1], "connections_per_point": 1, "client_threads": 1, "repetitions": 1
    });
    let with = |key: &str, value: serde_json::Value| {
        let mut scenario = good.clone();
        scenario[key] = value;
        scenario
    };
    assert!(error_of(with("workers", serde_json::json!([]))).contains("workers"));
    assert!(error_of(with("workers", serde_json::json!([0, 2]))).contains("workers"));
    assert!(
        error_of(with("connections_per_point", serde_json::json!(0)))
            .contains("connections_per_point")
    );
    assert!(error_of(with("client_threads", serde_json::json!(0))).contains("client_threads"));
    assert!(error_of(with("repetitions", serde_json::json!(0))).contains("repetitions"));
    assert!(error_of(with("workers", serde_json::json!("four"))).contains("accept-herd"));
    assert!(error_of(with("wokers", serde_json::json!([1]))).contains("wokers"));
}
