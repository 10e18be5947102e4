//! `slot-alloc` run with its quick scenario in a temporary directory: one line per
//! allocator with a point per K, finite positive costs, the raw data written; bad
//! parameters (and more descriptors than the hard limit allows) are refused clearly.

mod micro_support;

use micro_support::{assert_series, figure, raw_files, run_in, scenario, xs};

const ALLOCATORS: usize = 4;

fn run(scenario: serde_json::Value) -> anyhow::Result<coldwire_experiment::ExperimentRecord> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    run_in(dir.path(), "slot-alloc", scenario)
}

#[test]
fn quick_run_measures_every_allocator_at_every_k() {
    let quick = scenario("slot-alloc", true);
    let opens = xs(&quick, "open");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let record = run_in(dir.path(), "slot-alloc", quick.clone()).expect("it runs");

    assert_eq!(record.experiment, "slot-alloc");
    let plot = figure(&record, "ns-per-allocation");
    assert_series(plot, ALLOCATORS, &opens);
    assert_eq!(plot.x.scale, coldwire_report::Scale::Log);
    assert_eq!(record.tables[0].rows.len(), opens.len());
    assert!(!record.findings.is_empty() && !record.seed_comparison.is_empty());

    let raw = raw_files(&record, dir.path());
    let measurements = raw[0]["measurements"].as_array().expect("measurements");
    assert_eq!(measurements.len(), ALLOCATORS * opens.len());
    let repetitions = quick["repetitions"].as_u64().expect("a count") as usize;
    for measurement in measurements {
        let values = measurement["nanoseconds_per_operation"]
            .as_array()
            .expect("values");
        assert_eq!(values.len(), repetitions);
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
    let good = serde_json::json!({ "open": [10], "operations": 10, "repetitions": 1, "seed": 1 });
    let with = |key: &str, value: serde_json::Value| {
        let mut scenario = good.clone();
        scenario[key] = value;
        scenario
    };
    assert!(error_of(with("open", serde_json::json!([]))).contains("open"));
    assert!(error_of(with("open", serde_json::json!([0]))).contains("open"));
    assert!(error_of(with("operations", serde_json::json!(0))).contains("operations"));
    assert!(error_of(with("repetitions", serde_json::json!(0))).contains("repetitions"));
    assert!(error_of(with("seed", serde_json::json!(-1))).contains("slot-alloc"));
    assert!(error_of(with("opne", serde_json::json!([1]))).contains("opne"));
}

#[test]
fn more_descriptors_than_the_hard_limit_are_refused_before_measuring() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a live rlimit the kernel fills.
    let result = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(result, 0, "getrlimit failed");
    if limit.rlim_max >= 1_000_000 {
        eprintln!(
            "skipped: the hard open-files limit ({}) is above what the scenario allows",
            limit.rlim_max
        );
        return;
    }
    let scenario = serde_json::json!({
        "open": [limit.rlim_max], "operations": 10, "repetitions": 1, "seed": 1
    });
    let message = error_of(scenario);
    assert!(message.contains("hard open-files limit"), "{message}");
}
