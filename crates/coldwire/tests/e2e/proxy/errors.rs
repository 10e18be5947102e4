//! The proxy's own error answers, one test per error kind: the status, `Via`,
//! `Cache-Status` and `Proxy-Status` (RFC 9209 error type, `next-hop`, `details`), a body
//! saying what happened and what to check; the same word in the access log (each format)
//! and a line in the error log.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::Duration;

use coldwire_testkit::{Origin, Proxy, connect, connect_through, read_rest};

use super::forward::log_lines;

/// Sends `request` (which asks for `Connection: close`) and reads the whole answer.
fn ask(proxy: &Proxy, request: &str) -> String {
    let mut stream = connect(proxy.address);
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

fn get(proxy: &Proxy, url: &str) -> String {
    ask(
        proxy,
        &format!("GET {url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    )
}

/// Asserts the common shape of an error answer of `status` and `error`; returns its
/// `Proxy-Status` value.
fn assert_problem(answer: &str, status: u16, error: &str) -> String {
    assert!(
        answer.starts_with(&format!("HTTP/1.1 {status} ")),
        "expected {status}: {answer}"
    );
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
    let field = |name: &str| {
        head.lines()
            .find_map(|line| {
                line.split_once(": ")
                    .filter(|(field, _)| field.eq_ignore_ascii_case(name))
                    .map(|(_, value)| value.to_owned())
            })
            .unwrap_or_else(|| panic!("no {name}: {answer}"))
    };
    assert_eq!(field("Via"), "1.1 coldwire", "{answer}");
    assert!(
        field("Cache-Status").starts_with("coldwire")
            && field("Cache-Status").ends_with(&format!("detail={error}")),
        "{answer}"
    );
    let proxy_status = field("Proxy-Status");
    assert!(
        proxy_status.starts_with(&format!("coldwire; error={error}")),
        "{answer}"
    );
    assert_eq!(field("Content-Length"), body.len().to_string(), "{answer}");
    // What happened, then what to check, then the error's name.
    assert!(body.lines().count() >= 3, "{body}");
    assert!(
        body.ends_with(&format!("(Proxy-Status error: {error})\n")),
        "{body}"
    );
    proxy_status
}

fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// An origin that answers each connection with `answer` (after reading the request), then
/// closes it.
fn scripted_origin(answer: &'static [u8]) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(answer);
        }
    });
    address
}

pub(super) fn refused_origin_says_connection_refused_everywhere(backend: &str) {
    let directory = tempfile::tempdir().unwrap();
    let access = directory.path().join("access.log");
    let errors = directory.path().join("error.log");
    let proxy = Proxy::start(
        backend,
        &[
            "--access-log",
            access.to_str().unwrap(),
            "--access-log-format",
            "json",
            "--error-log",
            errors.to_str().unwrap(),
        ],
    );
    let port = closed_port();
    let answer = get(&proxy, &format!("http://127.0.0.1:{port}/page"));
    let proxy_status = assert_problem(&answer, 502, "connection_refused");
    assert!(
        proxy_status.contains(&format!("next-hop=\"127.0.0.1:{port}\""))
            && proxy_status.contains("details=\"Connection refused (os error 111)\""),
        "{proxy_status}"
    );
    assert!(answer.contains("fwd=uri-miss"), "{answer}");
    assert!(
        answer.contains("listens on that address and port"),
        "{answer}"
    );
    let line: serde_json::Value = serde_json::from_str(&log_lines(&access, 1)[0]).unwrap();
    assert_eq!(line["error"], "connection_refused", "{line}");
    assert_eq!(line["status"], 502, "{line}");
    let error_line = wait_for_text(&errors);
    assert!(
        error_line.contains("[error] connection_refused: 502 Bad Gateway, client 127.0.0.1:")
            && error_line.contains(&format!(
                "origin 127.0.0.1:{port}, phase connect: Connection refused"
            ))
            && error_line.contains(&format!(
                "request \"GET http://127.0.0.1:{port}/page HTTP/1.1\""
            )),
        "{error_line}"
    );
    // Without an access log (the default) the error line still names the request: the
    // line sent to the origin; and a refused CONNECT the client's line.
    let errors = directory.path().join("error-only.log");
    let proxy = Proxy::start(backend, &["--error-log", errors.to_str().unwrap()]);
    let answer = get(&proxy, &format!("http://127.0.0.1:{port}/page"));
    assert_problem(&answer, 502, "connection_refused");
    let error_line = wait_for_text(&errors);
    assert!(
        error_line.contains(", request \"GET /page HTTP/1.1\", origin 127.0.0.1:"),
        "{error_line}"
    );
    let (_, head) = coldwire_testkit::connect_through(&proxy, &format!("127.0.0.1:{port}"));
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = std::fs::read_to_string(&errors).unwrap_or_default();
        if text.lines().count() >= 2 || std::time::Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        text.contains("[warn] http_request_denied: 403 Forbidden, client 127.0.0.1:")
            && text.contains(&format!(
                ", request \"CONNECT 127.0.0.1:{port} HTTP/1.1\", origin -, phase route: \
             CONNECT to port {port} refused"
            )),
        "{text}"
    );
}

fn wait_for_text(path: &Path) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if !text.is_empty() || std::time::Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(super) fn unknown_host_is_a_dns_error(backend: &str) {
    let proxy = Proxy::start(backend, &[]);
    let answer = get(&proxy, "http://no-such-host.invalid/");
    let proxy_status = assert_problem(&answer, 502, "dns_error");
    assert!(
        proxy_status.contains("next-hop=\"no-such-host.invalid:80\""),
        "{proxy_status}"
    );
    assert!(answer.contains("resolver"), "{answer}");
}

pub(super) fn silent_origin_is_a_response_timeout(backend: &str) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let proxy = Proxy::start(backend, &["--upstream-timeout", "500ms"]);
    let answer = get(&proxy, &format!("http://{address}/slow"));
    assert_problem(&answer, 504, "http_response_timeout");
    assert!(answer.contains("--upstream-timeout"), "{answer}");
    drop(listener);
}

pub(super) fn origin_closing_without_an_answer_is_connection_terminated(backend: &str) {
    let origin = scripted_origin(b"");
    let proxy = Proxy::start(backend, &[]);
    let answer = get(&proxy, &format!("http://{origin}/"));
    assert_problem(&answer, 502, "connection_terminated");
}

pub(super) fn half_a_response_head_is_incomplete(backend: &str) {
    let origin = scripted_origin(b"HTTP/1.1 200 OK\r\nContent-Le");
    let proxy = Proxy::start(backend, &[]);
    let answer = get(&proxy, &format!("http://{origin}/"));
    assert_problem(&answer, 502, "http_response_incomplete");
}

pub(super) fn garbage_from_the_origin_is_a_protocol_error(backend: &str) {
    let origin = scripted_origin(b"SSH-2.0-OpenSSH_9.6\r\n\r\n");
    let proxy = Proxy::start(backend, &[]);
    let answer = get(&proxy, &format!("http://{origin}/"));
    assert_problem(&answer, 502, "http_protocol_error");
    assert!(answer.contains("plain HTTP/1.x"), "{answer}");
}

pub(super) fn malformed_and_oversized_requests_are_request_errors(backend: &str) {
    let proxy = Proxy::start(backend, &["--max-head-bytes", "4K"]);
    let answer = ask(&proxy, "THIS IS NOT HTTP\r\n\r\n");
    let proxy_status = assert_problem(&answer, 400, "http_request_error");
    assert!(
        proxy_status.contains("details=\"bad request"),
        "{proxy_status}"
    );
    let long = "a".repeat(8 * 1024);
    let answer = ask(
        &proxy,
        &format!("GET http://127.0.0.1/ HTTP/1.1\r\nHost: x\r\nX-Long: {long}\r\n\r\n"),
    );
    let proxy_status = assert_problem(&answer, 431, "http_request_error");
    assert!(
        proxy_status.contains("over 4096 bytes (--max-head-bytes)"),
        "{proxy_status}"
    );
}

pub(super) fn a_forwarding_loop_is_detected(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let answer = ask(
        &proxy,
        &format!(
            "GET {} HTTP/1.1\r\nHost: x\r\nVia: 1.1 coldwire\r\nConnection: close\r\n\r\n",
            origin.url("/cacheable")
        ),
    );
    assert_problem(&answer, 403, "proxy_loop_detected");
    assert_eq!(origin.requests("/cacheable"), 0);
}

pub(super) fn only_if_cached_with_nothing_stored_is_an_internal_response(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let answer = ask(
        &proxy,
        &format!(
            "GET {} HTTP/1.1\r\nHost: x\r\nCache-Control: only-if-cached\r\nConnection: close\r\n\r\n",
            origin.url("/cacheable")
        ),
    );
    assert_problem(&answer, 504, "proxy_internal_response");
    assert!(
        answer.contains("Cache-Status: coldwire; fwd=uri-miss"),
        "{answer}"
    );
    assert_eq!(origin.requests("/cacheable"), 0);
}

pub(super) fn refused_tunnels_say_why(backend: &str) {
    let proxy = Proxy::start(backend, &["--connect-any-port"]);
    let target = format!("127.0.0.1:{}", closed_port());
    let (mut stream, head) = connect_through(&proxy, &target);
    let answer = format!("{head}{}", String::from_utf8_lossy(&read_rest(&mut stream)));
    let proxy_status = assert_problem(&answer, 502, "connection_refused");
    assert!(
        proxy_status.contains(&format!("next-hop=\"{target}\"")),
        "{answer}"
    );
    let strict = Proxy::start(backend, &[]);
    let (mut stream, head) = connect_through(&strict, "127.0.0.1:25");
    let answer = format!("{head}{}", String::from_utf8_lossy(&read_rest(&mut stream)));
    assert_problem(&answer, 403, "http_request_denied");
    assert!(answer.contains("--connect-port 25"), "{answer}");
}

/// A flood of failures writes at most `--error-log-rate` lines a second, and says how many
/// it held back.
#[test]
fn an_error_flood_is_cut_to_the_rate_and_summarised() {
    let directory = tempfile::tempdir().unwrap();
    let errors = directory.path().join("error.log");
    let proxy = Proxy::start(
        "epoll",
        &[
            "--error-log",
            errors.to_str().unwrap(),
            "--error-log-rate",
            "5",
        ],
    );
    let url = format!("http://127.0.0.1:{}/", closed_port());
    let started = std::time::Instant::now();
    for _ in 0..60 {
        assert!(get(&proxy, &url).starts_with("HTTP/1.1 502"));
    }
    let seconds = started.elapsed().as_secs() + 2;
    // Every line is accounted for once the last second's summary is written.
    let count = |text: &str| {
        let written = text.lines().filter(|line| line.contains("[error]")).count() as u64;
        let suppressed: u64 = text
            .lines()
            .filter_map(|line| line.split("suppressed ").nth(1))
            .filter_map(|rest| rest.split(' ').next()?.parse::<u64>().ok())
            .sum();
        (written, suppressed)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = std::fs::read_to_string(&errors).unwrap_or_default();
        let (written, suppressed) = count(&text);
        if written + suppressed >= 60 || std::time::Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let (written, suppressed) = count(&text);
    assert!(
        written >= 5 && written <= 5 * seconds,
        "{written} lines:\n{text}"
    );
    assert_eq!(written + suppressed, 60, "{text}");
    assert!(
        text.contains("similar lines (connection_refused) in the last second"),
        "{text}"
    );
}
