//! The server's cost read from inside: coldwire's stats endpoint (`coldwire serve --admin
//! ADDR` → `http://ADDR/stats`), fetched before and after the measured window. The deltas
//! give system calls, waits and events per request — the profile the seed papers read
//! from DCPI. Fetched with a plain blocking request (it happens twice per phase, at the
//! window's edges, never during measurement).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde::Serialize;

use crate::error::BenchError;

/// The counters of one stats document that matter per request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerCounters {
    /// Event mechanism the server runs.
    pub backend: String,
    /// Requests answered.
    pub requests: u64,
    /// System calls by kind (`accept_calls`, `recv_calls`, …, `wait_calls`, `control_calls`).
    pub calls: BTreeMap<String, u64>,
    /// Readiness events returned by waits.
    pub events: u64,
    /// Waits that returned nothing.
    pub empty_wakeups: u64,
    /// Open connections (gauge).
    pub open_connections: u64,
    /// Active connections (gauge).
    pub active_connections: u64,
    /// Receive buffers in use (gauge).
    pub buffers_in_use: u64,
}

/// Per-request figures over a window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ServerCountersDelta {
    /// Event mechanism.
    pub backend: String,
    /// Requests the server answered in the window.
    pub requests: u64,
    /// All system calls per request.
    pub syscalls_per_request: f64,
    /// Waits (epoll_wait, poll, select) per request.
    pub waits_per_request: f64,
    /// Readiness events per wait.
    pub events_per_wait: f64,
    /// Empty wake-ups per wait.
    pub empty_wakeups_per_wait: f64,
    /// Each kind of system call per request.
    pub calls_per_request: BTreeMap<String, f64>,
    /// Open connections at the window's start and end.
    pub open_connections: (u64, u64),
    /// Receive buffers in use at the window's end (an idle connection should hold none).
    pub buffers_in_use_at_end: u64,
}

/// Fetches `url` (`http://HOST:PORT/PATH`) and returns the body.
pub fn fetch(url: &str) -> Result<String, BenchError> {
    let fail = |reason: String| BenchError::ServerStats {
        url: url.to_owned(),
        reason,
    };
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| fail("only http:// URLs are supported".into()))?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let address = authority
        .to_socket_addrs()
        .map_err(|error| fail(error.to_string()))?
        .next()
        .ok_or_else(|| fail("no address".into()))?;
    let timeout = Duration::from_secs(3);
    let mut stream =
        TcpStream::connect_timeout(&address, timeout).map_err(|error| fail(error.to_string()))?;
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .map_err(|error| fail(error.to_string()))?;
    let mut response = Vec::new();
    stream
        .take(16 << 20)
        .read_to_end(&mut response)
        .map_err(|error| fail(error.to_string()))?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| fail("no complete HTTP response".into()))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(fail(format!(
            "status line `{}`",
            head.lines().next().unwrap_or_default()
        )));
    }
    Ok(body.to_owned())
}

/// Reads coldwire's stats document (`total.loop`, `total.http.requests`: the same in
/// schemas 1 and 2, docs/stats-json.md).
pub fn parse_counters(document: &str) -> Option<ServerCounters> {
    let value: serde_json::Value = serde_json::from_str(document).ok()?;
    let total = value.get("total")?;
    let loop_counters = total.get("loop")?.as_object()?;
    let number = |name: &str| {
        loop_counters
            .get(name)
            .and_then(|v| v.as_u64())
            .unwrap_or(0)
    };
    let calls = loop_counters
        .iter()
        .filter(|(name, _)| name.ends_with("_calls"))
        .map(|(name, count)| (name.clone(), count.as_u64().unwrap_or(0)))
        .collect();
    Some(ServerCounters {
        backend: value
            .get("backend")
            .and_then(|v| v.as_str())
            .unwrap_or("unknown")
            .to_owned(),
        requests: total
            .get("http")
            .and_then(|http| http.get("requests"))
            .and_then(|v| v.as_u64())
            .unwrap_or(0),
        calls,
        events: number("events"),
        empty_wakeups: number("empty_wakeups"),
        open_connections: number("open_connections"),
        active_connections: number("active_connections"),
        buffers_in_use: number("buffers_in_use"),
    })
}

/// Fetches and parses the counters.
pub fn read_counters(url: &str) -> Result<ServerCounters, BenchError> {
    let body = fetch(url)?;
    parse_counters(&body).ok_or_else(|| BenchError::ServerStats {
        url: url.to_owned(),
        reason: "the body is not coldwire's stats JSON (no total.loop)".into(),
    })
}

fn ratio(numerator: u64, denominator: u64) -> f64 {
    if denominator == 0 {
        0.0
    } else {
        numerator as f64 / denominator as f64
    }
}

/// Per-request figures between two documents.
pub fn delta(before: &ServerCounters, after: &ServerCounters) -> ServerCountersDelta {
    let requests = after.requests.saturating_sub(before.requests);
    let mut calls_per_request = BTreeMap::new();
    let mut syscalls = 0;
    for (name, count) in &after.calls {
        let difference = count.saturating_sub(before.calls.get(name).copied().unwrap_or(0));
        syscalls += difference;
        calls_per_request.insert(name.clone(), ratio(difference, requests));
    }
    let difference = |name: &str| {
        after
            .calls
            .get(name)
            .copied()
            .unwrap_or(0)
            .saturating_sub(before.calls.get(name).copied().unwrap_or(0))
    };
    let waits = difference("wait_calls");
    // io_uring backends wait inside `io_uring_enter`: both counters count those enters, so
    // each is one system call (as `LoopCounters::syscalls` counts them).
    syscalls -= waits.min(difference("uring_enter_calls"));
    ServerCountersDelta {
        backend: after.backend.clone(),
        requests,
        syscalls_per_request: ratio(syscalls, requests),
        waits_per_request: ratio(waits, requests),
        events_per_wait: ratio(after.events.saturating_sub(before.events), waits),
        empty_wakeups_per_wait: ratio(
            after.empty_wakeups.saturating_sub(before.empty_wakeups),
            waits,
        ),
        calls_per_request,
        open_connections: (before.open_connections, after.open_connections),
        buffers_in_use_at_end: after.buffers_in_use,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A schema-2 document (docs/stats-json.md), trimmed.
    const DOCUMENT: &str = r#"{"schema":2,"backend":"epoll","uptime_seconds":1.0,"workers":1,
        "process":{"cpu_user_seconds":0.5,"cpu_system_seconds":0.25},
        "total":{"loop":{"accept_calls":2,"recv_calls":100,"send_calls":100,"wait_calls":50,
        "control_calls":2,"events":150,"empty_wakeups":5,"open_connections":7,
        "active_connections":1,"buffers_in_use":0,"bytes_sent":9},
        "http":{"requests":100,"responses":{"1xx":0,"2xx":100,"3xx":0,"4xx":0,"5xx":0},
        "response_time":{"count":100,"sum_seconds":0.01,"buckets":[{"le_seconds":0.0001,"count":100}]}}},
        "per_worker":[]}"#;

    #[test]
    fn parses_and_computes_per_request_figures() {
        let after = parse_counters(DOCUMENT).unwrap();
        assert_eq!(after.requests, 100);
        assert_eq!(after.calls.len(), 5);
        assert_eq!(after.open_connections, 7);
        let before = ServerCounters {
            open_connections: 3,
            ..ServerCounters::default()
        };
        let delta = delta(&before, &after);
        assert_eq!(delta.requests, 100);
        assert!((delta.syscalls_per_request - 2.54).abs() < 1e-9);
        assert!((delta.waits_per_request - 0.5).abs() < 1e-9);
        assert!((delta.events_per_wait - 3.0).abs() < 1e-9);
        assert_eq!(delta.open_connections, (3, 7));
        assert!(parse_counters("{\"total\":{}}").is_none());
        assert!(parse_counters("not json").is_none());
    }

    #[test]
    fn an_io_uring_wait_is_one_system_call() {
        let document = DOCUMENT.replace(
            r#""wait_calls":50,"#,
            r#""wait_calls":50,"uring_enter_calls":60,"#,
        );
        let after = parse_counters(&document).unwrap();
        let delta = delta(&ServerCounters::default(), &after);
        // 2 accepts + 100 receives + 100 sends + 2 controls + 60 enters (50 of them waits).
        assert!((delta.syscalls_per_request - 2.64).abs() < 1e-9);
        assert!((delta.waits_per_request - 0.5).abs() < 1e-9);
    }
}
