//! `--access-log-format clf|squid|json` and `--access-log -`: each format parsed as the
//! tools that read it would (CLF by its fields, Squid's native log by its ten columns,
//! JSON lines by a JSON parser), for the proxy (a miss, a hit, a refused origin) and for
//! `coldwire serve` writing JSON lines to stdout.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use coldwire_process::Stderr;
use coldwire_testkit::{Origin, Proxy, coldwire, connect, via_proxy};

fn log_lines(path: &std::path::Path, lines: usize) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let found: Vec<String> = text.lines().map(str::to_owned).collect();
        if found.len() >= lines || std::time::Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A miss, a hit and a refused origin through a proxy logging in `format`.
fn three_lines(format: &str) -> (Origin, u16, Vec<String>) {
    let origin = Origin::start();
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("access.log");
    let proxy = Proxy::start(
        "epoll",
        &[
            "--access-log",
            path.to_str().unwrap(),
            "--access-log-format",
            format,
        ],
    );
    let url = origin.url("/cacheable");
    via_proxy(&proxy, &[], &url);
    via_proxy(&proxy, &[], &url);
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let (status, _, _) = via_proxy(&proxy, &[], &format!("http://127.0.0.1:{port}/gone"));
    assert_eq!(status, 502);
    let lines = log_lines(&path, 3);
    assert_eq!(lines.len(), 3, "{lines:?}");
    (origin, port, lines)
}

#[test]
fn clf_lines_have_the_common_fields_then_cache_upstream_and_error() {
    let (origin, port, lines) = three_lines("clf");
    let url = origin.url("/cacheable");
    let fields: Vec<Vec<&str>> = lines
        .iter()
        .map(|line| {
            // host ident user [date] "request" status bytes cache upstream error
            let (before, rest) = line.split_once(" \"").unwrap();
            let (request, after) = rest.split_once("\" ").unwrap();
            let mut fields: Vec<&str> = before.splitn(4, ' ').collect();
            fields.push(request);
            fields.extend(after.split(' '));
            fields
        })
        .collect();
    for line in &fields {
        assert_eq!(&line[..3], ["127.0.0.1", "-", "-"], "{line:?}");
        assert!(
            line[3].starts_with('[') && line[3].ends_with(" +0000]"),
            "{line:?}"
        );
        assert_eq!(line.len(), 10, "{line:?}");
    }
    assert_eq!(fields[0][4], format!("GET {url} HTTP/1.1"));
    assert_eq!(&fields[0][5..7], ["200", "14"]);
    assert_eq!(fields[0][7], "miss");
    assert!(fields[0][8].parse::<f64>().is_ok(), "{:?}", fields[0]);
    assert_eq!(fields[0][9], "-");
    assert_eq!(&fields[1][7..], ["hit", "-", "-"]);
    assert_eq!(
        fields[2][4],
        format!("GET http://127.0.0.1:{port}/gone HTTP/1.1")
    );
    assert_eq!(fields[2][5], "502");
    assert_eq!(fields[2][9], "connection_refused");
}

#[test]
fn squid_lines_have_squids_ten_columns() {
    let (origin, port, lines) = three_lines("squid");
    let columns: Vec<Vec<&str>> = lines
        .iter()
        .map(|line| line.split_whitespace().collect())
        .collect();
    for line in &columns {
        assert_eq!(line.len(), 10, "{line:?}");
        let (seconds, milliseconds) = line[0].split_once('.').unwrap();
        assert!(seconds.parse::<u64>().unwrap() > 1_700_000_000, "{line:?}");
        assert_eq!(milliseconds.len(), 3, "{line:?}");
        assert!(line[1].parse::<u64>().is_ok(), "{line:?}");
        assert_eq!(line[2], "127.0.0.1");
        assert_eq!(line[5], "GET");
        assert_eq!(line[7], "-");
        assert_eq!(line[9], "-");
    }
    let origin_ip = origin.address.ip().to_string();
    assert_eq!(columns[0][3], "TCP_MISS/200");
    assert_eq!(columns[0][4], "14");
    assert_eq!(columns[0][6], origin.url("/cacheable"));
    assert_eq!(columns[0][8], format!("HIER_DIRECT/{origin_ip}"));
    assert_eq!(columns[1][3], "TCP_HIT/200");
    assert_eq!(columns[1][8], "HIER_NONE/-");
    assert_eq!(columns[2][3], "TCP_MISS/502");
    assert_eq!(columns[2][6], format!("http://127.0.0.1:{port}/gone"));
}

#[test]
fn json_lines_parse_with_named_fields() {
    let (origin, port, lines) = three_lines("json");
    let parsed: Vec<serde_json::Value> = lines
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(parsed[0]["client"], "127.0.0.1");
    assert_eq!(parsed[0]["method"], "GET");
    assert_eq!(parsed[0]["target"], origin.url("/cacheable"));
    assert_eq!(parsed[0]["version"], "HTTP/1.1");
    assert_eq!(parsed[0]["status"], 200);
    assert_eq!(parsed[0]["bytes"], 14);
    assert_eq!(parsed[0]["cache"], "miss");
    assert_eq!(parsed[0]["upstream"], origin.address.to_string());
    assert!(parsed[0]["upstream_ms"].as_f64().is_some(), "{}", parsed[0]);
    assert!(parsed[0]["elapsed_ms"].as_f64().is_some(), "{}", parsed[0]);
    assert!(parsed[0]["time"].as_f64().unwrap() > 1.7e9);
    assert_eq!(parsed[0]["error"], serde_json::Value::Null);
    assert_eq!(parsed[1]["cache"], "hit");
    assert_eq!(parsed[1]["upstream_ms"], serde_json::Value::Null);
    assert_eq!(parsed[2]["status"], 502);
    assert_eq!(parsed[2]["error"], "connection_refused");
    assert_eq!(parsed[2]["upstream"], format!("127.0.0.1:{port}"));
}

#[test]
fn serve_writes_json_lines_to_stdout_with_a_dash() {
    let root = format!("{}/../../docs", env!("CARGO_MANIFEST_DIR"));
    let mut process = coldwire([
        "serve",
        "--root",
        root.as_str(),
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--access-log",
        "-",
        "--access-log-format",
        "json",
    ])
    .stderr(Stderr::Null)
    .spawn()
    .unwrap();
    let address = process
        .wait_for_line("listening on http://", Duration::from_secs(10))
        .unwrap();
    let address = address.rsplit("http://").next().unwrap().to_owned();
    let mut stream = connect(address.parse().unwrap());
    stream
        .write_all(b"GET /bench.md HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    assert!(answer.starts_with(b"HTTP/1.1 200"));
    let line = process
        .wait_for_line("{", Duration::from_secs(10))
        .expect("a JSON access-log line on stdout");
    let parsed: serde_json::Value = serde_json::from_str(&format!("{{{line}")).unwrap();
    assert_eq!(parsed["target"], "/bench.md");
    assert_eq!(parsed["status"], 200);
    assert!(parsed.get("cache").is_none(), "{parsed}");
}
