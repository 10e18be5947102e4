//! `coldwire experiment splice` and `coldwire experiment peers` end to end, with the
//! committed scenarios' `[quick]` tables (`--quick`, results in a temporary directory):
//! each writes its record with the expected figures, one series per data path or
//! contender, a point per size or cold count, and raw files that exist. A peer that
//! genuinely cannot be installed on this machine is reported as `skipped: <reason>` (the
//! record's warning), never silently missing. Every server runs on 127.0.0.1 on a port
//! picked at run time and is stopped by the experiment.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `coldwire experiment NAME --quick` with the committed scenarios; returns the record.
fn quick_run(name: &str) -> (Value, PathBuf, tempfile::TempDir) {
    let temp = tempfile::tempdir().unwrap();
    let results = temp.path().join("results");
    let output = Command::new(env!("CARGO_BIN_EXE_coldwire"))
        .args([
            "experiment",
            name,
            "--quick",
            "--machine",
            "test",
            "--results",
        ])
        .arg(&results)
        .arg("--scenarios")
        .arg(repository().join("experiments"))
        .output()
        .expect("run coldwire");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr:\n{stderr}");
    let dir = results.join(name);
    let text = std::fs::read_to_string(dir.join("experiment.json")).expect("experiment.json");
    (serde_json::from_str(&text).unwrap(), dir, temp)
}

fn figure<'a>(record: &'a Value, id: &str) -> Option<&'a Value> {
    record["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|figure| figure["id"] == id)
}

fn series_names(figure: &Value) -> Vec<String> {
    figure["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|line| line["name"].as_str().unwrap().to_owned())
        .collect()
}

fn xs(figure: &Value, name: &str) -> Vec<f64> {
    figure["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|line| line["name"] == name)
        .unwrap_or_else(|| panic!("a series {name}"))["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|point| point["x"].as_f64().unwrap())
        .collect()
}

fn assert_raw_files_exist(record: &Value, dir: &Path) {
    let raw = record["raw_files"].as_array().unwrap();
    assert!(!raw.is_empty());
    for file in raw {
        let path = dir.join(file.as_str().unwrap());
        assert!(path.is_file(), "{} exists", path.display());
    }
}

/// The warning that explains why `peer` has no series, if it could not be installed.
fn skip_reason(record: &Value, peer: &str) -> Option<String> {
    record["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|warning| {
            warning.contains(peer)
                && (warning.contains("not installed") || warning.contains("could not install"))
        })
        .map(str::to_owned)
}

#[test]
fn quick_splice_has_a_line_per_data_path_and_a_point_per_size() {
    let (record, dir, _temp) = quick_run("splice");
    assert_eq!(record["experiment"], "splice");
    assert_eq!(record["quick"], true);
    let paths: Vec<String> = record["parameters"]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|path| path.as_str().unwrap().to_owned())
        .collect();
    let sizes_kib: Vec<f64> = record["parameters"]["object_bytes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|size| size.as_f64().unwrap() / 1024.0)
        .collect();
    let cpu = figure(&record, "cpu-per-request").expect("a CPU-per-request figure");
    assert_eq!(series_names(cpu), paths);
    for path in &paths {
        assert_eq!(xs(cpu, path), sizes_kib, "{path}: a point per object size");
    }
    for line in cpu["series"].as_array().unwrap() {
        for point in line["points"].as_array().unwrap() {
            assert!(
                point["y"].as_f64().unwrap() > 0.0,
                "CPU was measured: {point}"
            );
        }
    }
    let ratio = figure(&record, "ratio").expect("a ratio figure");
    assert!(series_names(ratio).contains(&"splice / copy".to_owned()));
    for size in record["parameters"]["response"]["object_bytes"]
        .as_array()
        .unwrap()
    {
        let response =
            figure(&record, &format!("response-{size}")).expect("a response-time figure");
        assert!(!series_names(response).is_empty());
    }
    assert!(
        record["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|finding| finding.as_str().unwrap().contains("splice / copy")),
        "findings give the splice/copy ratio: {}",
        record["findings"]
    );
    // Part three: CONNECT tunnels, copy vs sockmap (spliced in the kernel).
    let tunnels = figure(&record, "tunnel-cpu-per-mib-fixed").expect("a tunnel CPU figure");
    assert_eq!(series_names(tunnels), ["copy", "sockmap"]);
    for line in tunnels["series"].as_array().unwrap() {
        for point in line["points"].as_array().unwrap() {
            assert!(
                point["y"].as_f64().unwrap() > 0.0,
                "tunnel CPU was measured: {point}"
            );
        }
    }
    let ratio = figure(&record, "tunnel-ratio-saturation").expect("a tunnel ratio figure");
    assert_eq!(series_names(ratio), ["sockmap / copy"]);
    assert_raw_files_exist(&record, &dir);
    assert!(dir.join("figures/cpu-per-request.svg").is_file());
}

#[test]
fn quick_peers_measures_coldwire_next_to_each_peer() {
    let (record, dir, _temp) = quick_run("peers");
    assert_eq!(record["experiment"], "peers");
    let server = figure(&record, "server-throughput").expect("a server throughput figure");
    let cold: Vec<f64> = record["parameters"]["server"]["cold"]
        .as_array()
        .unwrap()
        .iter()
        .map(|count| count.as_f64().unwrap())
        .collect();
    assert_eq!(
        xs(server, "coldwire (epoll)"),
        cold,
        "a point per cold count"
    );
    match skip_reason(&record, "nginx") {
        Some(reason) => println!("skipped: {reason}"),
        None => assert_eq!(xs(server, "nginx"), cold, "nginx: a point per cold count"),
    }
    assert!(figure(&record, "server-response-p50").is_some());
    let hits = figure(&record, "hits-throughput").expect("a cache-hit figure");
    assert!(series_names(hits).contains(&"coldwire".to_owned()));
    for peer in record["parameters"]["hits"]["peers"].as_array().unwrap() {
        let peer = peer.as_str().unwrap();
        let name = match peer {
            "haproxy" => "haproxy cache",
            "nginx" => "nginx proxy_cache",
            other => other,
        };
        match skip_reason(&record, peer) {
            Some(reason) => println!("skipped: {reason}"),
            None => assert!(
                series_names(hits).contains(&name.to_owned()),
                "{name} measured: {:?}; warnings: {}",
                series_names(hits),
                record["warnings"]
            ),
        }
    }
    let misses = figure(&record, "misses-cpu-per-request").expect("a 0%-hit figure");
    assert!(series_names(misses).contains(&"coldwire copy".to_owned()));
    let hit_table = record["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|table| table["title"].as_str().unwrap().starts_with("Cache hits"))
        .expect("a cache-hit table");
    for row in hit_table["rows"].as_array().unwrap() {
        assert_eq!(row[4], "0", "every measured request was a cache hit: {row}");
    }
    assert_raw_files_exist(&record, &dir);
}
