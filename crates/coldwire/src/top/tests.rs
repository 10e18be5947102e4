//! `top`'s numbers from two stats documents, and its frame rendered on ratatui's test
//! backend.

use super::model::{StatsDocument, View};
use super::render_text;

/// A schema-2 document with `requests` answered, all in the (0.5 ms, 1 ms] bucket.
fn document(uptime: f64, requests: u64, cpu: f64, hits: u64, misses: u64) -> StatsDocument {
    let snapshot = serde_json::json!({
        "loop": {"recv_calls": requests, "send_calls": requests, "wait_calls": requests / 2,
                 "open_connections": 12, "active_connections": 3},
        "http": {"requests": requests, "responses": {"2xx": requests},
                 "response_time": {"count": requests, "sum_seconds": 0.0, "buckets": [
                     {"le_seconds": 0.0005, "count": 0},
                     {"le_seconds": 0.001, "count": requests},
                     {"le_seconds": 0.0025, "count": requests}]}}
    });
    serde_json::from_value(serde_json::json!({
        "schema": 2, "backend": "epoll", "uptime_seconds": uptime, "workers": 1,
        "process": {"cpu_user_seconds": cpu * 0.75, "cpu_system_seconds": cpu * 0.25},
        "total": snapshot, "per_worker": [snapshot],
        "cache": {"hits": hits, "misses": misses, "stored": 0}
    }))
    .unwrap()
}

#[test]
fn the_view_computes_rates_quantiles_and_ratios_over_the_interval() {
    let then = document(10.0, 1000, 1.0, 100, 100);
    let now = document(12.0, 3000, 1.5, 1600, 600);
    let view = View::between("127.0.0.1:9000", &then, &now);
    assert!((view.rate - 1000.0).abs() < 1e-9);
    assert!((view.cpu_cores - 0.25).abs() < 1e-9);
    assert!((view.hit_ratio.unwrap() - 0.75).abs() < 1e-9);
    assert!((view.syscalls_per_request.unwrap() - 2.5).abs() < 1e-9);
    let p50 = view.p50.unwrap();
    assert!((p50 - 0.00075).abs() < 1e-9, "{p50}");
    assert_eq!((view.open, view.active), (12, 3));
    assert_eq!(view.workers.len(), 1);
    assert!((view.workers[0].waits_per_request.unwrap() - 0.5).abs() < 1e-9);
}

#[test]
fn a_frame_shows_every_number_as_text() {
    let then = document(10.0, 1000, 1.0, 100, 100);
    let now = document(12.0, 3000, 1.5, 1600, 600);
    let view = View::between("127.0.0.1:9000", &then, &now);
    let text = render_text(&view, 100, 10).unwrap();
    assert!(
        text.contains("coldwire top 127.0.0.1:9000 — epoll, 1 worker(s), up 12 s"),
        "{text}"
    );
    assert!(text.contains("requests/s 1000"), "{text}");
    assert!(text.contains("CPU (cores) 0.25"), "{text}");
    assert!(text.contains("p50 / p99 750 µs / 995 µs"), "{text}");
    assert!(text.contains("syscalls/request 2.50"), "{text}");
    assert!(text.contains("open/active/cold 12 / 3 / 9"), "{text}");
    assert!(text.contains("cache hit ratio 75.0 %"), "{text}");
    let worker_row = text
        .lines()
        .find(|line| line.trim_start().starts_with('0'))
        .unwrap_or_else(|| panic!("no worker row: {text}"));
    let cells: Vec<&str> = worker_row.split_whitespace().collect();
    assert_eq!(
        cells,
        ["0", "1000", "12", "3", "9", "2.50", "0.50"],
        "{text}"
    );
}

#[test]
fn durations_say_what_the_histogram_can_tell() {
    use super::view::duration;
    assert_eq!(duration(None), "–");
    assert_eq!(duration(Some(0.00005)), "≤100 µs");
    assert_eq!(duration(Some(0.00075)), "750 µs");
    assert_eq!(duration(Some(0.0123)), "12.30 ms");
    assert_eq!(duration(Some(2.5)), "2.50 s");
}
