//! Trace replay end to end: `coldwire origin --trace FILE` serves every logged path with
//! its logged size and a body that verifies byte for byte (both log formats, every
//! backend), 404 for paths the trace does not name; `coldwire trace generate` writes the
//! committed traces byte for byte and `coldwire trace stats` reads them.

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use coldwire_process::{Process, Stderr};
use coldwire_testkit::{coldwire, read_response};
use coldwire_workload::fill_body;
use coldwire_workload::trace::catalogue::path_id;

/// A CLF trace with a 304, a 404-only path, a query and an absolute URL.
const CLF_TRACE: &str = "\
a.example - - [01/Jul/1995:00:00:01 -0400] \"GET /index.html HTTP/1.0\" 200 6245
a.example - - [01/Jul/1995:00:00:01 -0400] \"GET /images/logo.gif HTTP/1.0\" 200 1713
b.example - - [01/Jul/1995:00:00:02 -0400] \"GET /index.html HTTP/1.0\" 304 -
b.example - - [01/Jul/1995:00:00:03 -0400] \"GET /missing.html HTTP/1.0\" 404 -
this line is malformed
c.example - - [01/Jul/1995:00:00:04 -0400] \"GET /search?q=apollo HTTP/1.0\" 200 0
c.example - - [01/Jul/1995:00:00:05 -0400] \"GET /big.mpg HTTP/1.0\" 200 300000
";

/// A Squid native trace naming objects by absolute URL.
const SQUID_TRACE: &str = "\
1066036250.618    340 192.168.1.1 TCP_MISS/200 1514 GET http://www.example.com/a.html - DIRECT/1.2.3.4 text/html
1066036251.002     12 192.168.1.2 TCP_HIT/200 1514 GET http://www.example.com/a.html - NONE/- text/html
1066036252.500     90 192.168.1.1 TCP_MISS/200 70000 GET http://www.example.com/b.jpg - DIRECT/1.2.3.4 image/jpeg
";

struct TraceOrigin {
    _process: Process,
    address: String,
}

fn start_trace_origin(trace: &Path, backend: &str) -> TraceOrigin {
    let mut process = coldwire([
        "origin",
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--think",
        "0",
        "--io",
        backend,
        "--trace",
    ])
    .arg(trace)
    .stderr(Stderr::Inherit)
    .spawn()
    .unwrap();
    let address = process
        .wait_for_line("origin listening on http://", Duration::from_secs(10))
        .unwrap();
    TraceOrigin {
        _process: process,
        address,
    }
}

/// GET (or HEAD) `target` on a kept-alive connection: (status, content length, body).
fn fetch(
    stream: &mut TcpStream,
    reader: &mut BufReader<TcpStream>,
    method: &str,
    target: &str,
) -> (u16, Option<u64>, Vec<u8>, String) {
    write!(stream, "{method} {target} HTTP/1.1\r\nHost: origin\r\n\r\n").unwrap();
    let response = read_response(reader, method == "HEAD").unwrap();
    let length = response
        .header("content-length")
        .map(|value| value.parse().unwrap());
    let object = response
        .header("x-coldwire-object")
        .unwrap_or("")
        .to_owned();
    (response.status, length, response.body, object)
}

fn expected_body(path: &str, size: u64) -> Vec<u8> {
    let mut body = Vec::new();
    fill_body(&mut body, path_id(path), 0, 0, size);
    body
}

fn origin_serves_the_logged_sizes(backend: &str) {
    if !coldwire_testkit::backend_available(backend) {
        return;
    }
    let directory = tempfile::tempdir().unwrap();
    let clf = directory.path().join("access.log");
    std::fs::write(&clf, CLF_TRACE).unwrap();
    let origin = start_trace_origin(&clf, backend);
    let mut stream = TcpStream::connect(&origin.address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    // Every request below goes on the one connection: a 404 does not close it.
    for (target, path, size) in [
        ("/index.html", "/index.html", 6245),
        ("/images/logo.gif", "/images/logo.gif", 1713),
        ("/search?q=apollo", "/search?q=apollo", 0),
        ("/big.mpg", "/big.mpg", 300_000),
        ("http://www.nasa.gov/index.html", "/index.html", 6245),
    ] {
        let (status, length, body, object) = fetch(&mut stream, &mut reader, "GET", target);
        assert_eq!(status, 200, "{target}");
        assert_eq!(length, Some(size), "{target}");
        assert!(body == expected_body(path, size), "{target}: body differs");
        assert_eq!(
            object,
            format!("id={:x}; v=0; size={size}", path_id(path)),
            "{target}"
        );
    }
    let (status, length, body, _) = fetch(&mut stream, &mut reader, "HEAD", "/big.mpg");
    assert_eq!((status, length, body.len()), (200, Some(300_000), 0));
    for target in ["/missing.html", "/nowhere", "/index.htm"] {
        let (status, _, _, _) = fetch(&mut stream, &mut reader, "GET", target);
        assert_eq!(status, 404, "{target}");
    }

    let squid = directory.path().join("squid.log");
    std::fs::write(&squid, SQUID_TRACE).unwrap();
    let origin = start_trace_origin(&squid, backend);
    let mut stream = TcpStream::connect(&origin.address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    for (path, size) in [("/a.html", 1514), ("/b.jpg", 70_000)] {
        let (status, length, body, _) = fetch(&mut stream, &mut reader, "GET", path);
        assert_eq!((status, length), (200, Some(size)), "{path}");
        assert!(body == expected_body(path, size), "{path}: body differs");
    }
}

coldwire_testkit::backend_tests! { origin_serves_the_logged_sizes }

#[test]
fn a_trace_with_no_record_is_refused_with_a_hint() {
    let directory = tempfile::tempdir().unwrap();
    let empty = directory.path().join("empty.log");
    std::fs::write(&empty, "not a log\nat all\n").unwrap();
    let output = std::process::Command::new(coldwire_testkit::coldwire_binary())
        .args(["origin", "--listen", "127.0.0.1:0", "--trace"])
        .arg(&empty)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("2 malformed line(s) skipped"), "{stderr}");
    assert!(stderr.contains("holds no request"), "{stderr}");
}

#[test]
fn committed_traces_are_what_the_generator_writes() {
    let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces");
    for (shape, seed, file) in [
        ("nasa", "4", "nasa-like.log"),
        ("worldcup", "1", "worldcup-like.log"),
    ] {
        let output = std::process::Command::new(coldwire_testkit::coldwire_binary())
            .args(["trace", "generate", "--shape", shape, "--seed", seed])
            .output()
            .unwrap();
        assert!(output.status.success());
        let committed = std::fs::read(traces.join(file)).unwrap();
        assert!(
            output.stdout == committed,
            "traces/{file} differs from the generator's output"
        );
        let stats = std::process::Command::new(coldwire_testkit::coldwire_binary())
            .args(["trace", "stats"])
            .arg(traces.join(file))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&stats.stdout);
        assert!(text.contains("malformed lines       0"), "{text}");
        let requests = if shape == "nasa" { "12000" } else { "15000" };
        assert!(
            text.contains(&format!("requests              {requests}")),
            "{text}"
        );
    }
}
