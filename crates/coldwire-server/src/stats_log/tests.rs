//! The stats log: lines are interval differences with named fields, written by its own
//! thread, and `reopen` moves writing to a fresh file after a rotation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::stats::WorkerSnapshot;

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("every line is JSON"))
        .collect()
}

fn wait_for_lines(path: &Path, count: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = lines(path);
        if found.len() >= count || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_line_holds_the_differences_of_its_interval() {
    let stats = Stats::new("epoll", 1);
    let earlier = stats.report();
    let mut snapshot = WorkerSnapshot::default();
    snapshot.http.requests = 40;
    for _ in 0..30 {
        snapshot
            .http
            .count_timed_response(200, Duration::from_micros(700));
    }
    for _ in 0..10 {
        snapshot.http.count_response(404);
    }
    snapshot.loop_counters.recv_calls = 40;
    snapshot.loop_counters.send_calls = 40;
    snapshot.loop_counters.wait_calls = 20;
    snapshot.loop_counters.open_connections = 4;
    snapshot.loop_counters.active_connections = 1;
    stats.publish(0, snapshot);
    let mut later = stats.report();
    later.uptime_seconds = earlier.uptime_seconds + 2.0;
    let line = serde_json::to_value(line_between(&earlier, &later, 1.0)).unwrap();
    assert_eq!(line["requests"], 40);
    let rate = line["requests_per_second"].as_f64().unwrap();
    assert!((rate - 20.0).abs() < 1e-6, "{rate}");
    assert_eq!(line["responses"]["2xx"], 30);
    assert_eq!(line["responses"]["4xx"], 10);
    assert_eq!(line["syscalls"]["recv"], 40);
    assert_eq!(line["syscalls"]["total"], 100);
    assert_eq!(line["waits"], 20);
    assert_eq!(line["connections"]["open"], 4);
    assert_eq!(line["connections"]["active"], 1);
    let p50 = line["response_seconds"]["p50"].as_f64().unwrap();
    assert!(p50 > 0.0005 && p50 <= 0.001, "{line}");
    assert!(line.get("cache").is_none());
    assert!(line["cpu"]["user_seconds"].as_f64().unwrap() >= 0.0);
}

#[test]
fn the_thread_writes_lines_and_reopen_follows_a_rotation() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("stats.log");
    let stats = Arc::new(Stats::new("poll", 1));
    let log = StatsLog::start(&path, Duration::from_millis(20), stats.clone()).unwrap();
    // The thread has taken its first report once a line is out.
    assert!(!wait_for_lines(&path, 1).is_empty());
    let mut snapshot = WorkerSnapshot::default();
    snapshot.http.requests = 5;
    stats.publish(0, snapshot);
    let first = wait_for_lines(&path, 3);
    assert!(first.len() >= 3, "no lines written: {first:?}");
    let requests: u64 = first
        .iter()
        .map(|line| line["requests"].as_u64().unwrap())
        .sum();
    assert!(requests <= 5);
    assert!(first.iter().all(|line| line["schema"] == 1));

    let rotated = directory.path().join("stats.log.1");
    std::fs::rename(&path, &rotated).unwrap();
    log.handle().reopen().unwrap();
    let fresh = wait_for_lines(&path, 1);
    assert!(!fresh.is_empty(), "nothing written after reopen");
    log.stop();
    let total: u64 = lines(&rotated)
        .iter()
        .chain(&lines(&path))
        .map(|line| line["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 5, "every request counted once across both files");
}
