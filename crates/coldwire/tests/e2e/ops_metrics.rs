//! Watching a running coldwire as an operator does (docs/metrics.md): `/metrics` read by a
//! real Prometheus parser (origin server on every backend, and the proxy's cache series),
//! the stats log written while requests arrive, `coldwire report --stats-log` turning it
//! into figures and a regression, `coldwire top --once`, and the live page in headless
//! Chromium.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use coldwire_testkit::{
    DocumentRoot, Origin, Proxy, Server, ServerOptions, coldwire_binary, curl, via_proxy,
};
use prometheus_parse::{Scrape, Value};

use crate::browser::{check_script, chromium_installed};

coldwire_testkit::backend_tests! {
    metrics_parse_as_prometheus_text_with_the_requests_served,
    the_stats_log_gets_a_line_per_interval_holding_the_requests,
}

const REQUESTS: u64 = 20;

fn serve_requests(server: &Server, count: u64) {
    for _ in 0..count {
        curl(&["--fail", "-s", &server.url("/small.txt")]);
    }
}

fn scrape(url: &str) -> Scrape {
    let text = String::from_utf8(curl(&["--fail", "-s", url])).expect("UTF-8 metrics");
    Scrape::parse(text.lines().map(|line| Ok(line.to_owned())))
        .unwrap_or_else(|error| panic!("not Prometheus text ({error}): {text}"))
}

/// The sum over every sample of `name` whose labels include `labels`.
fn total(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|sample| {
            sample.metric == name
                && labels
                    .iter()
                    .all(|(label, value)| sample.labels.get(label) == Some(*value))
        })
        .map(|sample| match &sample.value {
            Value::Counter(value) | Value::Gauge(value) | Value::Untyped(value) => *value,
            Value::Histogram(buckets) => buckets.last().map_or(0.0, |bucket| bucket.count),
            Value::Summary(_) => 0.0,
        })
        .sum()
}

fn metrics_parse_as_prometheus_text_with_the_requests_served(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).admin().start();
    serve_requests(&server, REQUESTS);
    server.wait_for_total("http", "requests", Duration::from_secs(5), |n| {
        n >= REQUESTS
    });
    let admin = server.admin.expect("admin address");
    let metrics = scrape(&format!("http://{admin}/metrics"));
    assert_eq!(
        total(&metrics, "coldwire_requests_total", &[("worker", "0")]),
        REQUESTS as f64
    );
    assert_eq!(
        total(&metrics, "coldwire_responses_total", &[("class", "2xx")]),
        REQUESTS as f64
    );
    // Readiness backends make one recv per request at least; the io_uring completion
    // backend submits its receives, entering the kernel with io_uring_enter.
    let kind = if backend == "uring" {
        "io_uring_enter"
    } else {
        "recv"
    };
    assert!(
        total(
            &metrics,
            "coldwire_syscalls_total",
            &[("kind", kind), ("backend", backend)]
        ) >= 1.0,
        "no {kind} calls counted"
    );
    assert!(total(&metrics, "coldwire_bytes_sent_total", &[]) > 0.0);
    assert!(total(&metrics, "coldwire_cpu_seconds_total", &[]) > 0.0);
    // Every response was timed: the histogram's +Inf bucket holds them all.
    assert_eq!(
        total(&metrics, "coldwire_response_seconds", &[("worker", "0")]),
        REQUESTS as f64
    );
    assert_eq!(
        metrics
            .docs
            .get("coldwire_connections_open")
            .map(String::as_str),
        Some("Connections open now (clients and origins).")
    );
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("every stats-log line is JSON"))
        .collect()
}

fn the_stats_log_gets_a_line_per_interval_holding_the_requests(backend: &str) {
    let root = DocumentRoot::new();
    let log = root.scratch("stats.log");
    let mut server = ServerOptions::new(backend, &root)
        .flag("--stats-log", &log)
        .flag("--stats-interval", "100ms")
        .start();
    serve_requests(&server, REQUESTS);
    let deadline = Instant::now() + Duration::from_secs(10);
    let counted = loop {
        let counted: u64 = lines(&log)
            .iter()
            .map(|line| line["requests"].as_u64().expect("requests"))
            .sum();
        if counted >= REQUESTS || Instant::now() > deadline {
            break counted;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(counted, REQUESTS, "{:?}", lines(&log));
    server.terminate();
    server.wait_exit(Duration::from_secs(10));
    let written = lines(&log);
    let line = written
        .iter()
        .find(|line| line["requests"].as_u64() > Some(0))
        .expect("a line with requests");
    assert_eq!(line["schema"], 1);
    assert!(line["responses"]["2xx"].as_u64() > Some(0), "{line}");
    assert!(line["syscalls"]["total"].as_u64() > Some(0), "{line}");
    assert!(line["requests_per_second"].as_f64() > Some(0.0), "{line}");
    assert!(line["cpu"]["user_seconds"].as_f64().is_some(), "{line}");
    assert!(line["connections"]["open"].as_u64().is_some(), "{line}");
    let total: u64 = written
        .iter()
        .map(|line| line["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(total, REQUESTS, "the last, partial interval loses nothing");
}

/// The proxy's cache appears as `coldwire_cache_requests_total{status=...}` and in the
/// stats JSON as `cache.hits` / `cache.misses`.
#[test]
fn proxy_metrics_count_cache_hits_and_misses() {
    let origin = Origin::start();
    let proxy = Proxy::start("epoll", &["--admin", "127.0.0.1:0"]);
    for _ in 0..3 {
        via_proxy(&proxy, &[], &origin.url("/cacheable"));
    }
    let stats_url = proxy.stats_url.clone().expect("a stats line");
    let metrics_url = stats_url.replace("/stats", "/metrics");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let metrics = scrape(&metrics_url);
        if total(&metrics, "coldwire_requests_total", &[]) >= 3.0 {
            assert_eq!(
                total(
                    &metrics,
                    "coldwire_cache_requests_total",
                    &[("status", "hit")]
                ),
                2.0
            );
            assert_eq!(
                total(
                    &metrics,
                    "coldwire_cache_requests_total",
                    &[("status", "miss")]
                ),
                1.0
            );
            assert_eq!(total(&metrics, "coldwire_cache_objects", &[]), 1.0);
            let stats = proxy.stats();
            assert_eq!(stats["cache"]["hits"], 2, "{stats}");
            assert_eq!(stats["cache"]["misses"], 1, "{stats}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the proxy never counted 3 requests"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// With `--cache-dir`, the disk store's series: hits by tier, bytes read and written,
/// the queue, errors by kind, segments, and the same numbers in the stats JSON.
#[test]
fn proxy_metrics_count_the_disk_store() {
    let origin = Origin::start();
    let dir = tempfile::tempdir().expect("a directory");
    let dir_arg = dir.path().to_str().expect("a UTF-8 path");
    // 4 KiB over --max-object-bytes: kept on disk only, so its hit is a disk hit.
    let proxy = Proxy::start(
        "epoll",
        &[
            "--admin",
            "127.0.0.1:0",
            "--cache-dir",
            dir_arg,
            "--max-object-bytes",
            "1024",
        ],
    );
    let big = origin.url("/big?n=4096");
    via_proxy(&proxy, &[], &origin.url("/cacheable"));
    via_proxy(&proxy, &[], &big);
    // Both written (the disk-only one is indexed only then).
    let deadline = Instant::now() + Duration::from_secs(20);
    while proxy.stats()["cache"]["disk"]["objects_written"] != 2 {
        assert!(Instant::now() < deadline, "the disk store never wrote both");
        std::thread::sleep(Duration::from_millis(20));
    }
    via_proxy(&proxy, &[], &origin.url("/cacheable"));
    let (status, head, body) = via_proxy(&proxy, &[], &big);
    assert_eq!((status, body.len()), (200, 4096));
    assert!(head.to_ascii_lowercase().contains("hit"), "{head}");
    let metrics_url = proxy
        .stats_url
        .clone()
        .expect("a stats line")
        .replace("/stats", "/metrics");
    let metrics = scrape(&metrics_url);
    let value = |name: &str, labels: &[(&str, &str)]| total(&metrics, name, labels);
    assert_eq!(
        value("coldwire_cache_hits_total", &[("tier", "memory")]),
        1.0
    );
    assert_eq!(value("coldwire_cache_hits_total", &[("tier", "disk")]), 1.0);
    assert_eq!(
        value("coldwire_cache_disk_read_bytes_total", &[("by", "hits")]),
        4096.0
    );
    assert_eq!(value("coldwire_cache_disk_objects_written_total", &[]), 2.0);
    assert!(value("coldwire_cache_disk_written_bytes_total", &[]) > 4096.0);
    assert_eq!(value("coldwire_cache_disk_queue_depth", &[]), 0.0);
    assert_eq!(value("coldwire_cache_disk_dropped_total", &[]), 0.0);
    assert_eq!(value("coldwire_cache_disk_segments", &[]), 1.0);
    assert_eq!(value("coldwire_cache_disk_recovered_objects", &[]), 0.0);
    // epoll: the store's I/O thread writes, nothing goes through a ring.
    assert_eq!(
        value("coldwire_cache_disk_ring_writes_submitted_total", &[]),
        0.0
    );
    assert_eq!(
        value("coldwire_cache_disk_evacuated_objects_total", &[]),
        0.0
    );
    for kind in ["no_space", "io", "other"] {
        assert_eq!(
            value("coldwire_cache_disk_io_errors_total", &[("kind", kind)]),
            0.0,
            "{kind}"
        );
    }
    let stats = proxy.stats();
    let cache = &stats["cache"];
    assert_eq!(cache["hits_on_disk"], 1, "{stats}");
    assert_eq!(cache["hits_in_memory"], 1, "{stats}");
    assert_eq!(cache["hit_bytes_on_disk"], 4096, "{stats}");
    assert_eq!(cache["disk"]["io_errors_by_kind"]["io"], 0, "{stats}");
}

/// On `--io uring` the disk store's segment writes and syncs go through the workers'
/// rings: the four ring counters are Prometheus series with the numbers `/stats` has
/// (writes submitted, all completed once the queue is empty).
#[test]
fn proxy_metrics_count_the_disk_store_ring_writes_on_uring() {
    if !coldwire_io::backend::test_can_run(coldwire_io::Backend::Uring) {
        return;
    }
    let origin = Origin::start();
    let dir = tempfile::tempdir().expect("a directory");
    let dir_arg = dir.path().to_str().expect("a UTF-8 path");
    let proxy = Proxy::start("uring", &["--admin", "127.0.0.1:0", "--cache-dir", dir_arg]);
    via_proxy(&proxy, &[], &origin.url("/cacheable"));
    via_proxy(&proxy, &[], &origin.url("/big?n=4096"));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let disk = proxy.stats()["cache"]["disk"].clone();
        if disk["objects_written"] == 2 && disk["queue_depth"] == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the disk store never wrote both: {disk}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let metrics_url = proxy
        .stats_url
        .clone()
        .expect("a stats line")
        .replace("/stats", "/metrics");
    let fields = [
        "ring_writes_submitted",
        "ring_writes_completed",
        "ring_syncs_submitted",
        "ring_syncs_completed",
    ];
    let ring = |disk: &serde_json::Value| fields.map(|field| disk[field].as_u64());
    // The store syncs on a timer of its own: compare with a scrape that falls between two
    // reads of /stats that agree.
    let (metrics, disk) = loop {
        let before = proxy.stats()["cache"]["disk"].clone();
        let metrics = scrape(&metrics_url);
        let after = proxy.stats()["cache"]["disk"].clone();
        if ring(&before) == ring(&after) {
            break (metrics, after);
        }
        assert!(Instant::now() < deadline, "the ring counters never settled");
    };
    for field in fields {
        let name = format!("coldwire_cache_disk_{field}_total");
        assert!(
            metrics.samples.iter().any(|sample| sample.metric == name),
            "no {name} series"
        );
        assert_eq!(
            total(&metrics, &name, &[]),
            disk[field].as_u64().expect("a counter") as f64,
            "{name} against /stats: {disk}"
        );
    }
    assert!(disk["ring_writes_submitted"].as_u64() > Some(0), "{disk}");
    assert_eq!(disk["ring_writes_submitted"], disk["ring_writes_completed"]);
}

fn run(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(coldwire_binary())
        .args(args)
        .output()
        .expect("coldwire runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `coldwire report --stats-log` reads a log with known numbers back into figures and the
/// regression (slope = CPU per request) in its summary.
#[test]
fn report_turns_a_stats_log_into_figures_and_a_regression() {
    let directory = tempfile::tempdir().unwrap();
    let log = directory.path().join("stats.log");
    let mut text = String::new();
    for (second, rate) in [0.0, 500.0, 1000.0, 2000.0, 1500.0].iter().enumerate() {
        // 30 µs of CPU per request, 0.02 cores idle.
        let cores = 0.02 + rate * 30e-6;
        text.push_str(
            &serde_json::json!({
                "schema": 1, "unix_seconds": 1_800_000_000.0 + second as f64,
                "uptime_seconds": second as f64 + 1.0, "interval_seconds": 1.0,
                "requests": *rate as u64, "requests_per_second": rate,
                "cpu": {"user_seconds": cores / 2.0, "system_seconds": cores / 2.0, "cores": cores}
            })
            .to_string(),
        );
        text.push('\n');
    }
    std::fs::write(&log, text).unwrap();
    let out = directory.path().join("report");
    let (ok, stdout, stderr) = run(&[
        "report",
        "--stats-log",
        log.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.trim().ends_with("index.html"), "{stdout}");
    assert!(stderr.contains("30.00 µs"), "{stderr}");
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("30.00 µs"), "{summary}");
    assert!(summary.contains("0.0200 cores"), "{summary}");
    for figure in ["rate-over-time", "cpu-over-time", "cpu-against-rate"] {
        assert!(
            out.join("figures").join(format!("{figure}.svg")).is_file(),
            "{figure}"
        );
    }
    assert!(out.join("index.html").is_file());
    if chromium_installed() {
        let (passed, text) = check_script("check-report-in-browser.sh", out.join("index.html"));
        assert!(passed, "{text}");
    }

    std::fs::write(&log, "{\"not\": \"a stats line\"}\n").unwrap();
    let (ok, _, stderr) = run(&["report", "--stats-log", log.to_str().unwrap()]);
    assert!(!ok);
    assert!(stderr.contains("line 1"), "{stderr}");
}

/// `coldwire top ADDR --once` prints one frame as text, no terminal needed.
#[test]
fn top_once_prints_a_frame_with_the_live_numbers() {
    let root = DocumentRoot::new();
    let server = ServerOptions::new("epoll", &root).admin().start();
    let admin = server.admin.expect("admin").to_string();
    let url = server.url("/small.txt");
    let serving = std::thread::spawn(move || {
        for _ in 0..40 {
            curl(&["--fail", "-s", &url]);
        }
    });
    let (ok, stdout, stderr) = run(&["top", &admin, "--once", "--interval", "500ms"]);
    serving.join().expect("requests");
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains(&format!("coldwire top {admin} — epoll, 1 worker(s)")),
        "{stdout}"
    );
    for label in [
        "requests/s",
        "p50 / p99",
        "open/active/cold",
        "CPU (cores)",
        "syscalls/request",
        "cache hit ratio no cache",
        "worker",
    ] {
        assert!(stdout.contains(label), "no {label:?} in:\n{stdout}");
    }
    let (ok, _, stderr) = run(&["top", "127.0.0.1:1", "--once"]);
    assert!(!ok);
    assert!(stderr.contains("127.0.0.1:1"), "{stderr}");
    // The server's --listen address instead of its --admin one: the error says which
    // address top wants (it named the bench's --server-stats before).
    let (ok, _, stderr) = run(&["top", &server.addr.to_string(), "--once"]);
    assert!(!ok);
    assert!(
        stderr.contains("--admin") && !stderr.contains("--server-stats"),
        "{stderr}"
    );
}

/// The admin listener's page, in headless Chromium: it loads, updates from /stats and
/// logs no error (skipped where Chromium is missing; CI installs it).
#[test]
fn the_live_page_updates_in_a_browser_without_errors() {
    let root = DocumentRoot::new();
    let server = ServerOptions::new("epoll", &root).admin().start();
    let admin = server.admin.expect("admin");
    let page = String::from_utf8(curl(&["--fail", "-s", &format!("http://{admin}/")])).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    assert!(
        !page.contains("src=\"http") && !page.contains("href=\"http"),
        "the page loads nothing from outside"
    );
    if !chromium_installed() {
        eprintln!("skipped: browser check (chromium not installed)");
        return;
    }
    serve_requests(&server, 10);
    let (passed, text) = live_page_check(&format!("http://{admin}/"));
    assert!(passed, "{text}");
    assert!(text.contains("ok:"), "{text}");
    // The check can fail: a page that never updates (the metrics text) does not pass.
    let (passed, text) = live_page_check(&format!("http://{admin}/metrics"));
    assert!(!passed && text.contains("updated 0 time(s)"), "{text}");
}

fn live_page_check(url: &str) -> (bool, String) {
    check_script("check-live-page-in-browser.sh", url)
}
