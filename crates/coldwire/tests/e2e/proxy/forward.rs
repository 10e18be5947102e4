//! `coldwire proxy` forwarding: pipelining, chunked POST, upstream resets and
//! close-delimited bodies, the client ACL, unreachable and silent origins, reverse mode,
//! large bodies through every data path, stale pooled connections, stats, hop-by-hop
//! fields, garbage requests and the access log.

use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

use coldwire_testkit::{
    Origin, Proxy, body_of, connect, connect_through, curl_output, curl_sha256, expected_sha256s,
    header, via_proxy,
};

pub(super) fn pipelined_requests_are_answered_in_order(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let mut stream = connect(proxy.address);
    let mut requests = String::new();
    for path in [
        "/cacheable",
        "/vary",
        "/cacheable",
        "/nostore",
        "/cacheable",
    ] {
        requests.push_str(&format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\n\r\n",
            origin.url(path),
            origin.address
        ));
    }
    requests.push_str(&format!(
        "GET {} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        origin.url("/echo")
    ));
    stream.write_all(requests.as_bytes()).unwrap();
    let mut all = Vec::new();
    stream.read_to_end(&mut all).unwrap();
    let text = String::from_utf8_lossy(&all);
    let bodies: Vec<usize> = ["cacheable body", "language=", "fresh "]
        .iter()
        .map(|needle| text.matches(needle).count())
        .collect();
    assert_eq!(bodies, vec![3, 1, 1], "{text}");
    assert_eq!(text.matches("HTTP/1.1 200").count(), 6, "{text}");
    let first_vary = text.find("language=").unwrap();
    let second_cacheable = text[text.find("cacheable body").unwrap() + 1..]
        .find("cacheable body")
        .unwrap();
    assert!(first_vary < second_cacheable + text.find("cacheable body").unwrap() + 1);
}

pub(super) fn chunked_post_reaches_the_origin_and_its_answer_comes_back(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let payload = "x".repeat(100_000);
    let (status, head, body) = via_proxy(
        &proxy,
        &[
            "-H",
            "Transfer-Encoding: chunked",
            "--data-binary",
            &payload,
        ],
        &origin.url("/echo"),
    );
    assert_eq!(status, 200);
    assert_eq!(header(&head, "x-method"), Some("POST"));
    assert_eq!(body, payload.as_bytes());
    let (_, _, body) = via_proxy(
        &proxy,
        &["--data-binary", "small body"],
        &origin.url("/echo"),
    );
    assert_eq!(body, b"small body");
}

pub(super) fn upstream_reset_mid_body_is_an_error_and_nothing_is_cached(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let proxy_url = proxy.url();
    for _ in 0..2 {
        let output = curl_output(&["-x", &proxy_url, &origin.url("/reset")]);
        assert_ne!(output.code, 0, "curl must report the truncated body");
        assert!(output.stdout.len() < 100_000);
    }
    assert_eq!(
        origin.requests("/reset"),
        2,
        "the truncated response was not cached"
    );
}

pub(super) fn close_delimited_response_is_rechunked_and_complete(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let (status, head, body) = via_proxy(&proxy, &[], &origin.url("/close-delimited"));
    assert_eq!(status, 200);
    assert_eq!(
        header(&head, "transfer-encoding"),
        Some("chunked"),
        "{head}"
    );
    assert_eq!(body, b"until the end");
    let (_, head, body) = via_proxy(&proxy, &[], &origin.url("/close-delimited"));
    assert_eq!(body, b"until the end");
    assert!(
        header(&head, "cache-status").unwrap().contains("hit"),
        "{head}"
    );
}

pub(super) fn client_outside_the_acl_gets_403(backend: &str) {
    // The proxy listens on every address; a client reaching it through a non-loopback
    // address is not in the default ACL.
    let Some(address) = non_loopback_address() else {
        println!("skipped: this machine has no non-loopback IPv4 address");
        return;
    };
    let origin = Origin::start();
    let proxy = Proxy::start_on("0.0.0.0:0", backend, &[]);
    let url = format!("http://{address}:{}", proxy.address.port());
    let output = curl_output(&["-i", "-x", &url, &origin.url("/cacheable")]);
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("HTTP/1.1 403"));
    assert_eq!(origin.requests("/cacheable"), 0);
    let allowed = Proxy::start_on("0.0.0.0:0", backend, &["--allow", &format!("{address}/32")]);
    let url = format!("http://{address}:{}", allowed.address.port());
    let output = curl_output(&["-i", "-x", &url, &origin.url("/cacheable")]);
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("HTTP/1.1 200"));
}

pub(super) fn non_loopback_address() -> Option<String> {
    let output = Command::new("hostname").arg("-I").output().ok()?;
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .find(|address| address.contains('.') && !address.starts_with("127."))
        .map(str::to_owned)
}

pub(super) fn unreachable_origin_gets_502(backend: &str) {
    let proxy = Proxy::start(backend, &["--upstream-timeout", "5"]);
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let (status, _, _) = via_proxy(&proxy, &[], &format!("http://127.0.0.1:{port}/"));
    assert_eq!(status, 502);
    let (status, _, _) = via_proxy(&proxy, &[], "http://no-such-host.invalid/");
    assert_eq!(status, 502);
}

pub(super) fn reverse_proxy_forwards_origin_form_requests(backend: &str) {
    let origin = Origin::start();
    let reverse = format!("http://{}", origin.address);
    let proxy = Proxy::start(backend, &["--reverse", &reverse]);
    for expected in ["fwd=uri-miss", "hit"] {
        let output = curl_output(&["-i", &format!("{}/cacheable", proxy.url())]);
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            text.starts_with("HTTP/1.1 200") && text.ends_with("cacheable body"),
            "{text}"
        );
        assert!(text.contains(expected), "{text}");
    }
    assert_eq!(origin.requests("/cacheable"), 1);
}

/// A forward proxy in front of a reverse proxy, both coldwire: with the same (default)
/// name the second sees its name in `Via` and refuses a loop, saying to use `--name`; with
/// `--name edge` on one, requests pass both, each cache answering under its own name.
pub(super) fn two_chained_proxies_need_their_own_names(backend: &str) {
    let origin = Origin::start();
    let reverse = format!("http://{}", origin.address);
    let inner = Proxy::start(backend, &["--reverse", &reverse]);
    let url = format!("{}/cacheable", inner.url());
    let same_name = Proxy::start(backend, &[]);
    let (status, head, body) = via_proxy(&same_name, &[], &url);
    assert_eq!(status, 403, "{head}");
    assert!(head.contains("proxy_loop_detected"), "{head}");
    assert!(
        String::from_utf8_lossy(&body).contains("--name"),
        "says how"
    );
    assert_eq!(origin.requests("/cacheable"), 0);
    let edge = Proxy::start(backend, &["--name", "edge"]);
    for expected in ["edge; fwd=uri-miss", "edge; hit"] {
        let (status, head, body) = via_proxy(&edge, &[], &url);
        assert_eq!(status, 200, "{head}");
        assert_eq!(body, b"cacheable body");
        assert!(head.contains(expected), "{head}");
        assert!(
            head.contains("1.1 coldwire") && head.contains("1.1 edge"),
            "{head}"
        );
    }
    assert_eq!(origin.requests("/cacheable"), 1);
}

pub(super) fn megabyte_bodies_are_byte_identical_on_miss_and_hit(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let expected = body_of(1 << 20);
    for _ in 0..2 {
        let (status, _, body) = via_proxy(&proxy, &[], &origin.url("/big?n=1048576"));
        assert_eq!(status, 200);
        assert!(body == expected, "body differs ({} bytes)", body.len());
    }
    assert_eq!(origin.requests("/big?n=1048576"), 1);
}

pub(super) fn garbage_request_gets_400(backend: &str) {
    let proxy = Proxy::start(backend, &[]);
    let mut stream = connect(proxy.address);
    stream.write_all(b"THIS IS NOT HTTP\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 400"));
    // An origin-form request to a forward proxy is a 400 too, not a loop.
    let mut stream = connect(proxy.address);
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 400"));
}

/// 1 MiB and 64 MiB bodies through copy, splice and splice+tee (cache on), as a miss and,
/// when cached, as a hit: the SHA-256 of what curl receives equals the origin's.
pub(super) fn bodies_are_identical_through_every_data_path(backend: &str) {
    let origin = Origin::start();
    let directory = tempfile::tempdir().unwrap();
    let sizes = [1usize << 20, 64 << 20];
    let expected = expected_sha256s(directory.path(), &sizes);
    let paths: [(&str, &[&str]); 4] = [
        ("copy", &["--data-path", "copy", "--cache-bytes", "0"]),
        (
            "copy+cache",
            &["--data-path", "copy", "--max-object-bytes", "100000000"],
        ),
        ("splice", &["--data-path", "splice", "--cache-bytes", "0"]),
        (
            "splice+tee",
            &["--data-path", "splice", "--max-object-bytes", "100000000"],
        ),
    ];
    for (name, args) in paths {
        let proxy = Proxy::start(backend, args);
        let rounds = if name.ends_with("cache") || name.ends_with("tee") {
            2
        } else {
            1
        };
        for (size, expected) in sizes.iter().zip(&expected) {
            let path = format!("/big?n={size}&path={name}");
            let url = origin.url(&path);
            for round in 0..rounds {
                let (code, received) = curl_sha256(directory.path(), &["-x", &proxy.url(), &url]);
                assert_eq!(code, 0, "{name}, {size} bytes, round {round}");
                assert_eq!(&received, expected, "{name}, {size} bytes, round {round}");
            }
            let requests = origin.requests(&path);
            assert_eq!(
                requests, 1,
                "{name}: {rounds} rounds cost {requests} origin requests"
            );
        }
    }
}

/// The origin closes idle keep-alive connections; the next request on the pooled one
/// fails before any response byte and is retried on a fresh connection, unseen by curl.
pub(super) fn stale_pooled_connection_is_retried_on_a_fresh_one(backend: &str) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let served = Arc::new(AtomicUsize::new(0));
    let counter = served.clone();
    std::thread::spawn(move || {
        // One request per connection, answered with keep-alive promised; then the
        // connection is closed 100 ms later without a word, so the pooled one goes stale.
        for stream in listener.incoming().flatten() {
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read(&mut byte).unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                counter.fetch_add(1, Ordering::SeqCst);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Length: 2\r\n\r\nok",
                );
                std::thread::sleep(Duration::from_millis(100));
            });
        }
    });
    let proxy = Proxy::start(backend, &[]);
    let url = format!("http://{address}/x");
    for _ in 0..3 {
        let (status, _, body) = via_proxy(&proxy, &[], &url);
        assert_eq!((status, &body[..]), (200, &b"ok"[..]));
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(served.load(Ordering::SeqCst), 3);
}

/// An origin that accepts and never answers gets a 504 after --upstream-timeout.
pub(super) fn silent_origin_gets_504(backend: &str) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let proxy = Proxy::start(backend, &["--upstream-timeout", "1"]);
    let started = std::time::Instant::now();
    let (status, _, _) = via_proxy(&proxy, &[], &format!("http://{address}/slow"));
    assert_eq!(status, 504);
    assert!(started.elapsed() < Duration::from_secs(10));
    drop(listener);
}

/// `--admin` serves the same JSON statistics as `coldwire serve`.
pub(super) fn stats_endpoint_counts_requests_and_responses(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &["--admin", "127.0.0.1:0"]);
    for _ in 0..3 {
        via_proxy(&proxy, &[], &origin.url("/cacheable"));
    }
    let stats_url = proxy.stats_url.clone().expect("a stats line");
    // Workers publish once per loop turn: allow a moment.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let output = curl_output(&[&stats_url]);
        let stats: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let requests = stats["total"]["http"]["requests"].as_u64().unwrap_or(0);
        if requests >= 3 {
            assert_eq!(stats["backend"], backend);
            assert!(stats["total"]["http"]["responses"]["2xx"].as_u64().unwrap() >= 3);
            // One miss stored, then two hits.
            assert_eq!(stats["cache"]["stored"].as_u64(), Some(1), "{stats}");
            assert!(stats["cache"]["hits"].as_u64().unwrap() >= 2, "{stats}");
            assert_eq!(stats["cache"]["objects"].as_u64(), Some(1), "{stats}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "stats: {stats}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `--proxy-header` fields (`Proxy-*`) and fields named by `Connection` are hop-by-hop:
/// the origin never sees them, and it sees this proxy's `Via`.
pub(super) fn hop_by_hop_and_proxy_headers_never_reach_the_origin(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let (status, _, body) = via_proxy(
        &proxy,
        &[
            "--proxy-header",
            "Proxy-Authorization: Basic Zm9vOmJhcg==",
            "-H",
            "Connection: X-Secret",
            "-H",
            "X-Secret: 1",
            "-H",
            "X-Kept: 2",
        ],
        &origin.url("/headers"),
    );
    assert_eq!(status, 200);
    let seen = String::from_utf8_lossy(&body).to_ascii_lowercase();
    assert!(!seen.contains("proxy-authorization"), "{seen}");
    assert!(!seen.contains("x-secret"), "{seen}");
    assert!(seen.contains("x-kept: 2"), "{seen}");
    assert!(seen.contains("via: 1.1 coldwire"), "{seen}");
    assert!(
        !seen.contains("x-forwarded-for"),
        "a forward proxy does not announce its clients: {seen}"
    );
}

/// A reverse proxy appends its client's address to `X-Forwarded-For` (after what the
/// request brought), so the origin can log who asked.
pub(super) fn a_reverse_proxy_tells_the_origin_who_asked(backend: &str) {
    let origin = Origin::start();
    let reverse = format!("http://{}", origin.address);
    let proxy = Proxy::start(backend, &["--reverse", &reverse]);
    for (sent, expected) in [
        (None, "x-forwarded-for: 127.0.0.1"),
        (
            Some("X-Forwarded-For: 192.0.2.1"),
            "x-forwarded-for: 192.0.2.1, 127.0.0.1",
        ),
    ] {
        let mut args = vec!["-s".to_owned()];
        if let Some(field) = sent {
            args.extend(["-H".to_owned(), field.to_owned()]);
        }
        args.push(format!("{}/headers", proxy.url()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = curl_output(&args);
        let seen = String::from_utf8_lossy(&output.stdout).to_ascii_lowercase();
        let lines: Vec<&str> = seen
            .lines()
            .filter(|line| line.starts_with("x-forwarded-for"))
            .collect();
        assert_eq!(lines, [expected], "{seen}");
    }
}

/// Waits (bounded) until the access log holds `lines` lines and returns them.
pub(super) fn log_lines(path: &std::path::Path, lines: usize) -> Vec<String> {
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

/// `--access-log`: one Common Log Format line per response, with the cache status and the
/// upstream time appended.
pub(super) fn access_log_has_a_line_per_response_with_cache_status(backend: &str) {
    let origin = Origin::start();
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("access.log");
    let proxy = Proxy::start(backend, &["--access-log", path.to_str().unwrap()]);
    let url = origin.url("/cacheable");
    via_proxy(&proxy, &[], &url);
    via_proxy(&proxy, &[], &url);
    let (_, head) = connect_through(&proxy, &origin.address.to_string());
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let lines = log_lines(&path, 3);
    assert_eq!(lines.len(), 3, "{lines:?}");
    let request = format!("\"GET {url} HTTP/1.1\" 200 14");
    assert!(lines[0].starts_with("127.0.0.1 - - ["), "{lines:?}");
    assert!(
        lines[0].contains(&format!("{request} miss 0.")),
        "{lines:?}"
    );
    assert!(
        lines[1].ends_with(&format!("{request} hit - -")),
        "{lines:?}"
    );
    assert!(
        lines[2].contains(&format!("\"CONNECT {} HTTP/1.1\" 403", origin.address))
            && lines[2].ends_with(" - - http_request_denied"),
        "{lines:?}"
    );
}
