//! The exposition parsed back with a real parser (the `prometheus-parse` crate) and
//! checked line by line against the format's rules.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use coldwire_cache::{Store, StoreConfig};
use prometheus_parse::{Scrape, Value};

use super::render;
use crate::stats::{Stats, WorkerSnapshot};

fn sample_stats() -> Stats {
    let stats = Stats::new("epoll", 2).with_store(Arc::new(Store::new(StoreConfig::default())));
    let mut first = WorkerSnapshot::default();
    first.http.requests = 5;
    for _ in 0..4 {
        first
            .http
            .count_timed_response(200, Duration::from_micros(300));
    }
    first.http.count_timed_response(503, Duration::from_secs(3));
    first.loop_counters.recv_calls = 11;
    first.loop_counters.wait_calls = 7;
    first.loop_counters.open_connections = 3;
    first.loop_counters.bytes_sent = 4096;
    let mut second = WorkerSnapshot::default();
    second.http.requests = 1;
    second
        .http
        .count_timed_response(404, Duration::from_millis(2));
    stats.publish(0, first);
    stats.publish(1, second);
    stats
}

fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let sample = scrape
        .samples
        .iter()
        .find(|sample| {
            sample.metric == name
                && labels
                    .iter()
                    .all(|(label, text)| sample.labels.get(label) == Some(*text))
        })
        .unwrap_or_else(|| panic!("no sample {name} {labels:?}"));
    match &sample.value {
        Value::Counter(value) | Value::Gauge(value) | Value::Untyped(value) => *value,
        other => panic!("{name} is not a plain value: {other:?}"),
    }
}

#[test]
fn a_real_parser_reads_every_family_with_its_values() {
    let text = render(&sample_stats().report());
    let scrape = Scrape::parse(text.lines().map(|line| Ok(line.to_owned()))).expect("parses");
    assert_eq!(
        value(&scrape, "coldwire_requests_total", &[("worker", "0")]),
        5.0
    );
    assert_eq!(
        value(
            &scrape,
            "coldwire_responses_total",
            &[("worker", "0"), ("class", "2xx")]
        ),
        4.0
    );
    assert_eq!(
        value(
            &scrape,
            "coldwire_responses_total",
            &[("worker", "1"), ("class", "4xx")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &scrape,
            "coldwire_syscalls_total",
            &[("worker", "0"), ("kind", "recv"), ("backend", "epoll")]
        ),
        11.0
    );
    assert_eq!(
        value(&scrape, "coldwire_connections_open", &[("worker", "0")]),
        3.0
    );
    assert_eq!(
        value(&scrape, "coldwire_bytes_sent_total", &[("worker", "0")]),
        4096.0
    );
    assert_eq!(
        value(
            &scrape,
            "coldwire_cache_requests_total",
            &[("status", "hit")]
        ),
        0.0
    );
    assert!(value(&scrape, "coldwire_cpu_seconds_total", &[("mode", "user")]) >= 0.0);
    assert!(scrape.docs["coldwire_requests_total"].len() > 10);

    // The histogram: cumulative buckets, +Inf = count, the sum in seconds.
    let histogram = scrape
        .samples
        .iter()
        .find(|sample| {
            sample.metric == "coldwire_response_seconds" && sample.labels.get("worker") == Some("0")
        })
        .expect("the histogram of worker 0");
    let Value::Histogram(buckets) = &histogram.value else {
        panic!("coldwire_response_seconds is {:?}", histogram.value);
    };
    let at = |bound: f64| {
        buckets
            .iter()
            .find(|bucket| bucket.less_than == bound || (bucket.less_than - bound).abs() < 1e-12)
            .map(|bucket| bucket.count)
            .unwrap_or_else(|| panic!("no bucket le={bound}"))
    };
    assert_eq!(at(0.00025), 0.0);
    assert_eq!(at(0.0005), 4.0);
    assert_eq!(at(2.5), 4.0);
    assert_eq!(at(5.0), 5.0);
    assert_eq!(at(f64::INFINITY), 5.0);
}

/// The rules the parser above is lenient about: every sample belongs to a family declared
/// by `# TYPE` before it, names and labels are well formed, counters end in `_total`, and
/// no series appears twice.
#[test]
fn the_text_follows_the_exposition_format_rules() {
    follows_the_exposition_format_rules(&render(&sample_stats().report()));
}

fn follows_the_exposition_format_rules(text: &str) {
    assert!(text.ends_with('\n'));
    let mut typed: Vec<(String, String)> = Vec::new();
    let mut series = HashSet::new();
    let name_ok = |name: &str| {
        name.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(name_ok(name), "{line}");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            if kind == "counter" {
                assert!(name.ends_with("_total"), "counter without _total: {line}");
            }
            assert!(
                typed.iter().all(|(seen, _)| seen != name),
                "family declared twice: {name}"
            );
            typed.push((name.to_owned(), kind.to_owned()));
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (key, number) = line.rsplit_once(' ').expect("sample: name value");
        assert!(
            number == "+Inf" || number.parse::<f64>().is_ok(),
            "bad value: {line}"
        );
        let name = key.split('{').next().unwrap();
        let (family, kind) = typed.last().expect("a sample before any # TYPE");
        let allowed = if kind == "histogram" {
            [
                format!("{family}_bucket"),
                format!("{family}_sum"),
                format!("{family}_count"),
            ]
            .contains(&name.to_owned())
        } else {
            name == family
        };
        assert!(allowed, "sample {name} outside its family {family}: {line}");
        if let Some(labels) = key.strip_prefix(name)
            && !labels.is_empty()
        {
            assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
            for pair in labels[1..labels.len() - 1].split(',') {
                let (label, quoted) = pair.split_once('=').expect("label=\"value\"");
                assert!(name_ok(label), "{line}");
                assert!(quoted.starts_with('"') && quoted.ends_with('"'), "{line}");
            }
        }
        assert!(series.insert(key.to_owned()), "series twice: {key}");
    }
}

/// With a disk store, its counters are series of their own, the four ring counters
/// (`--io uring`'s segment writes and syncs) included, each with its value.
#[test]
fn the_disk_store_counters_are_series_ring_writes_included() {
    let mut report = sample_stats().report();
    let cache = report.cache.as_mut().expect("the sample has a store");
    cache.disk = Some(coldwire_cache::DiskCounters {
        objects_written: 4,
        segments: 2,
        ring_writes_submitted: 9,
        ring_writes_completed: 8,
        ring_syncs_submitted: 3,
        ring_syncs_completed: 2,
        ..Default::default()
    });
    let text = render(&report);
    let scrape = Scrape::parse(text.lines().map(|line| Ok(line.to_owned()))).expect("parses");
    for (name, expected) in [
        ("coldwire_cache_disk_objects_written_total", 4.0),
        ("coldwire_cache_disk_segments", 2.0),
        ("coldwire_cache_disk_ring_writes_submitted_total", 9.0),
        ("coldwire_cache_disk_ring_writes_completed_total", 8.0),
        ("coldwire_cache_disk_ring_syncs_submitted_total", 3.0),
        ("coldwire_cache_disk_ring_syncs_completed_total", 2.0),
    ] {
        assert_eq!(value(&scrape, name, &[]), expected, "{name}");
        assert!(
            text.contains(&format!("# HELP {name} ")),
            "{name} has no help"
        );
    }
    assert!(
        text.contains("# TYPE coldwire_cache_disk_ring_syncs_completed_total counter\n"),
        "{text}"
    );
    follows_the_exposition_format_rules(&text);
}
