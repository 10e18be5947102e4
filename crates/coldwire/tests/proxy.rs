//! End-to-end tests of `coldwire proxy`: the real binary between curl (or raw sockets) and
//! a test origin whose answers the tests control. Every test runs on every I/O backend
//! (select, poll, epoll, uring-poll, uring; io_uring ones skip themselves where the kernel
//! refuses io_uring) through `backend_tests!`: miss then hit, revalidation observed at
//! the origin, no-store not stored, Vary, pipelining, chunked POST, an upstream reset
//! mid-body (error to the client, nothing cached), a denied client, reverse mode, CONNECT
//! to a TLS server, and 1 MiB bodies byte for byte.

mod proxy_support;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use proxy_support::{
    Origin, Proxy, body_of, connect, connect_through, curl, curl_sha256, expected_sha256s, header,
    read_once, read_rest, start_echo_server, via_proxy,
};

macro_rules! backend_tests {
    ($($backend:ident),+ $(,)?) => {
        $(backend_tests!(@module $backend [
            miss_then_hit_is_served_from_the_cache,
            stale_entry_is_revalidated_and_a_304_refreshes_it,
            revalidate_always_asks_the_origin_every_time,
            no_store_is_never_stored,
            vary_keeps_variants_apart,
            pipelined_requests_are_answered_in_order,
            chunked_post_reaches_the_origin_and_its_answer_comes_back,
            upstream_reset_mid_body_is_an_error_and_nothing_is_cached,
            close_delimited_response_is_rechunked_and_complete,
            client_outside_the_acl_gets_403,
            unreachable_origin_gets_502,
            reverse_proxy_forwards_origin_form_requests,
            megabyte_bodies_are_byte_identical_on_miss_and_hit,
            connect_tunnel_reaches_a_tls_server,
            spliced_connect_tunnel_reaches_a_tls_server,
            bodies_are_identical_through_every_data_path,
            stale_pooled_connection_is_retried_on_a_fresh_one,
            silent_origin_gets_504,
            stats_endpoint_counts_requests_and_responses,
            hop_by_hop_and_proxy_headers_never_reach_the_origin,
            garbage_request_gets_400,
            connect_is_limited_to_allowed_ports,
            access_log_has_a_line_per_response_with_cache_status,
            silent_tunnels_are_closed_and_active_ones_kept,
            purge_removes_every_variant_for_allowed_clients_only,
            ranges_are_served_from_cached_objects,
            stale_while_revalidate_answers_at_once_and_refreshes_once,
            stale_if_error_answers_when_the_origin_fails,
            concurrent_misses_send_one_request_to_the_origin,
        ]);)+
    };
    (@module $backend:ident [$($test:ident),+ $(,)?]) => {
        mod $backend {
            $(
                #[test]
                fn $test() {
                    // Module names use '_', `--io` names '-' (uring_poll → uring-poll).
                    let name = stringify!($backend).replace('_', "-");
                    if super::proxy_support::backend_available(&name) {
                        super::$test(&name);
                    }
                }
            )+
        }
    };
}

backend_tests! { select, poll, epoll, uring_poll, uring }

fn miss_then_hit_is_served_from_the_cache(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let (status, head, body) = via_proxy(&proxy, &[], &origin.url("/cacheable"));
    assert_eq!(status, 200);
    assert_eq!(body, b"cacheable body");
    assert!(
        header(&head, "cache-status")
            .unwrap()
            .contains("fwd=uri-miss"),
        "{head}"
    );
    assert!(header(&head, "via").unwrap().contains("coldwire"), "{head}");
    let (status, head, body) = via_proxy(&proxy, &[], &origin.url("/cacheable"));
    assert_eq!(status, 200);
    assert_eq!(body, b"cacheable body");
    assert!(
        header(&head, "cache-status").unwrap().contains("hit"),
        "{head}"
    );
    assert!(header(&head, "age").is_some(), "{head}");
    assert_eq!(
        origin.requests("/cacheable"),
        1,
        "the second request was a hit"
    );
    // A client conditional is answered from the cache.
    let (status, _, body) = via_proxy(
        &proxy,
        &["-H", "If-None-Match: \"v1\""],
        &origin.url("/cacheable"),
    );
    assert_eq!((status, body.len()), (304, 0));
    assert_eq!(origin.requests("/cacheable"), 1);
}

fn stale_entry_is_revalidated_and_a_304_refreshes_it(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let (_, _, body) = via_proxy(&proxy, &[], &origin.url("/revalidate"));
    assert_eq!(body, b"revalidated body");
    let (status, head, body) = via_proxy(&proxy, &[], &origin.url("/revalidate"));
    assert_eq!(status, 200);
    assert_eq!(body, b"revalidated body", "the body comes from the cache");
    let cache_status = header(&head, "cache-status").unwrap();
    assert!(
        cache_status.contains("fwd=stale") && cache_status.contains("fwd-status=304"),
        "{head}"
    );
    assert_eq!(origin.requests("/revalidate"), 2);
    assert_eq!(
        origin.conditional("/revalidate"),
        1,
        "the origin saw one If-None-Match"
    );
}

fn revalidate_always_asks_the_origin_every_time(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &["--revalidate-always"]);
    for _ in 0..3 {
        let (_, _, body) = via_proxy(&proxy, &[], &origin.url("/cacheable"));
        assert_eq!(body, b"cacheable body");
    }
    assert_eq!(origin.requests("/cacheable"), 3);
    assert_eq!(origin.conditional("/cacheable"), 2);
}

fn no_store_is_never_stored(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    // The first answer says why it was not stored; it marks the key hit-for-miss, so the
    // next miss goes forward at once (proxy_collapse.rs tests that further).
    for detail in ["detail=no-store", "detail=hit-for-miss"] {
        let (status, head, _) = via_proxy(&proxy, &[], &origin.url("/nostore"));
        assert_eq!(status, 200);
        assert!(
            header(&head, "cache-status").unwrap().contains(detail),
            "{head}"
        );
    }
    assert_eq!(origin.requests("/nostore"), 2);
}

fn vary_keeps_variants_apart(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let url = origin.url("/vary");
    let (_, _, french) = via_proxy(&proxy, &["-H", "Accept-Language: fr"], &url);
    let (_, _, german) = via_proxy(&proxy, &["-H", "Accept-Language: de"], &url);
    let (_, head, french_again) = via_proxy(&proxy, &["-H", "Accept-Language: fr"], &url);
    assert_eq!(french, b"language=fr");
    assert_eq!(german, b"language=de");
    assert_eq!(french_again, b"language=fr");
    assert!(
        header(&head, "cache-status").unwrap().contains("hit"),
        "{head}"
    );
    assert_eq!(origin.requests("/vary"), 2);
}

fn pipelined_requests_are_answered_in_order(backend: &str) {
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

fn chunked_post_reaches_the_origin_and_its_answer_comes_back(backend: &str) {
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

fn upstream_reset_mid_body_is_an_error_and_nothing_is_cached(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let proxy_url = proxy.url();
    for _ in 0..2 {
        let output = curl(&["-x", &proxy_url, &origin.url("/reset")]);
        assert_ne!(output.code, 0, "curl must report the truncated body");
        assert!(output.stdout.len() < 100_000);
    }
    assert_eq!(
        origin.requests("/reset"),
        2,
        "the truncated response was not cached"
    );
}

fn close_delimited_response_is_rechunked_and_complete(backend: &str) {
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

fn client_outside_the_acl_gets_403(backend: &str) {
    // The proxy listens on every address; a client reaching it through a non-loopback
    // address is not in the default ACL.
    let Some(address) = non_loopback_address() else {
        println!("skipped: this machine has no non-loopback IPv4 address");
        return;
    };
    let origin = Origin::start();
    let proxy = Proxy::start_on("0.0.0.0:0", backend, &[]);
    let url = format!("http://{address}:{}", proxy.address.port());
    let output = curl(&["-i", "-x", &url, &origin.url("/cacheable")]);
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("HTTP/1.1 403"));
    assert_eq!(origin.requests("/cacheable"), 0);
    let allowed = Proxy::start_on("0.0.0.0:0", backend, &["--allow", &format!("{address}/32")]);
    let url = format!("http://{address}:{}", allowed.address.port());
    let output = curl(&["-i", "-x", &url, &origin.url("/cacheable")]);
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("HTTP/1.1 200"));
}

fn non_loopback_address() -> Option<String> {
    let output = Command::new("hostname").arg("-I").output().ok()?;
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .find(|address| address.contains('.') && !address.starts_with("127."))
        .map(str::to_owned)
}

fn unreachable_origin_gets_502(backend: &str) {
    let proxy = Proxy::start(backend, &["--upstream-timeout", "5"]);
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let (status, _, _) = via_proxy(&proxy, &[], &format!("http://127.0.0.1:{port}/"));
    assert_eq!(status, 502);
    let (status, _, _) = via_proxy(&proxy, &[], "http://no-such-host.invalid/");
    assert_eq!(status, 502);
}

fn reverse_proxy_forwards_origin_form_requests(backend: &str) {
    let origin = Origin::start();
    let reverse = format!("http://{}", origin.address);
    let proxy = Proxy::start(backend, &["--reverse", &reverse]);
    for expected in ["fwd=uri-miss", "hit"] {
        let output = curl(&["-i", &format!("{}/cacheable", proxy.url())]);
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            text.starts_with("HTTP/1.1 200") && text.ends_with("cacheable body"),
            "{text}"
        );
        assert!(text.contains(expected), "{text}");
    }
    assert_eq!(origin.requests("/cacheable"), 1);
}

fn megabyte_bodies_are_byte_identical_on_miss_and_hit(backend: &str) {
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

fn connect_tunnel_reaches_a_tls_server(backend: &str) {
    tunnel_to_tls_server(backend, &[]);
}

fn spliced_connect_tunnel_reaches_a_tls_server(backend: &str) {
    tunnel_to_tls_server(backend, &["--data-path", "splice"]);
}

fn tunnel_to_tls_server(backend: &str, proxy_args: &[&str]) {
    if Command::new("openssl").arg("version").output().is_err() {
        println!("skipped: openssl is not installed (the CI script installs it)");
        return;
    }
    let directory = tempfile::tempdir().unwrap();
    let key = directory.path().join("key.pem");
    let certificate = directory.path().join("certificate.pem");
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&certificate)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(made.success());
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let mut server = Command::new("openssl")
        .args(["s_server", "-www", "-quiet", "-accept", &port.to_string()])
        .arg("-key")
        .arg(&key)
        .arg("-cert")
        .arg(&certificate)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "openssl s_server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let port_text = port.to_string();
    let mut args = vec!["--connect-port", &port_text];
    args.extend_from_slice(proxy_args);
    let proxy = Proxy::start(backend, &args);
    let output = curl(&[
        "-k",
        "-x",
        &proxy.url(),
        &format!("https://localhost:{port}/"),
    ]);
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(output.code, 0);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("s_server"), "{text}");
}

fn garbage_request_gets_400(backend: &str) {
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
fn bodies_are_identical_through_every_data_path(backend: &str) {
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
fn stale_pooled_connection_is_retried_on_a_fresh_one(backend: &str) {
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
fn silent_origin_gets_504(backend: &str) {
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
fn stats_endpoint_counts_requests_and_responses(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &["--admin", "127.0.0.1:0"]);
    for _ in 0..3 {
        via_proxy(&proxy, &[], &origin.url("/cacheable"));
    }
    let stats_url = proxy.stats_url.clone().expect("a stats line");
    // Workers publish once per loop turn: allow a moment.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let output = curl(&[&stats_url]);
        let stats: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let requests = stats["total"]["http"]["requests"].as_u64().unwrap_or(0);
        if requests >= 3 {
            assert_eq!(stats["backend"], backend);
            assert!(
                stats["total"]["http"]["responses_by_class"][1]
                    .as_u64()
                    .unwrap()
                    >= 3
            );
            // One miss stored, then two hits.
            assert_eq!(stats["cache"]["stored"].as_u64(), Some(1), "{stats}");
            assert!(stats["cache"]["found"].as_u64().unwrap() >= 2, "{stats}");
            assert_eq!(stats["cache"]["objects"].as_u64(), Some(1), "{stats}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "stats: {stats}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `--proxy-header` fields (`Proxy-*`) and fields named by `Connection` are hop-by-hop:
/// the origin never sees them, and it sees this proxy's `Via`.
fn hop_by_hop_and_proxy_headers_never_reach_the_origin(backend: &str) {
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
}

/// CONNECT reaches port 443 only by default: another port gets a 403 that says which flag
/// allows it; `--connect-port N` and `--connect-any-port` open it.
fn connect_is_limited_to_allowed_ports(backend: &str) {
    let echo = start_echo_server();
    let target = echo.to_string();
    let proxy = Proxy::start(backend, &[]);
    let (mut stream, head) = connect_through(&proxy, &target);
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let body = String::from_utf8_lossy(&read_rest(&mut stream)).into_owned();
    assert!(
        body.contains(&format!("--connect-port {}", echo.port())),
        "{body}"
    );
    // Port 443 passes the policy (nothing listens there: the answer is 502, not 403).
    let (_, head) = connect_through(&proxy, "127.0.0.1:443");
    assert!(head.starts_with("HTTP/1.1 502"), "{head}");
    let port = echo.port().to_string();
    for args in [
        &["--connect-port", &port[..]][..],
        &["--connect-any-port"][..],
    ] {
        let proxy = Proxy::start(backend, args);
        let (mut stream, head) = connect_through(&proxy, &target);
        assert!(head.starts_with("HTTP/1.1 200"), "{args:?}: {head}");
        stream.write_all(b"ping").unwrap();
        let mut echoed = [0u8; 4];
        stream.read_exact(&mut echoed).unwrap();
        assert_eq!(&echoed, b"ping");
    }
}

/// Waits (bounded) until the access log holds `lines` lines and returns them.
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

/// `--access-log`: one Common Log Format line per response, with the cache status and the
/// upstream time appended.
fn access_log_has_a_line_per_response_with_cache_status(backend: &str) {
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
    assert!(lines[1].ends_with(&format!("{request} hit -")), "{lines:?}");
    assert!(
        lines[2].contains(&format!("\"CONNECT {} HTTP/1.1\" 403", origin.address)),
        "{lines:?}"
    );
}

/// `--idle-timeout` on CONNECT tunnels, copied and spliced: a tunnel with traffic every
/// 300 ms outlives several 1 s timeouts; one silent both ways is closed by the proxy.
fn silent_tunnels_are_closed_and_active_ones_kept(backend: &str) {
    let echo = start_echo_server();
    let port = echo.port().to_string();
    for data_path in ["copy", "splice"] {
        let proxy = Proxy::start(
            backend,
            &[
                "--connect-port",
                &port,
                "--idle-timeout",
                "1",
                "--data-path",
                data_path,
            ],
        );
        let (mut active, head) = connect_through(&proxy, &echo.to_string());
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let (mut silent, head) = connect_through(&proxy, &echo.to_string());
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        silent.write_all(b"once").unwrap();
        let mut echoed = [0u8; 4];
        silent.read_exact(&mut echoed).unwrap();
        for round in 0..10 {
            active.write_all(b"ping").unwrap();
            active
                .read_exact(&mut echoed)
                .unwrap_or_else(|error| panic!("{data_path}: round {round}: {error}"));
            assert_eq!(&echoed, b"ping");
            std::thread::sleep(Duration::from_millis(300));
        }
        // The proxy closes the silent one: its read ends (the echo server would keep it
        // for 120 s, and the test's 20 s read timeout reports an error instead of an end).
        let mut probe = [0u8; 16];
        let end = read_once(&mut silent, &mut probe);
        assert!(
            matches!(end, Ok(0)),
            "{data_path}: the silent tunnel must be closed by the proxy, got {end:?}"
        );
    }
}

/// `PURGE URL`: 200 when something was removed (every Vary variant: both languages go to
/// the origin again afterwards), 404 when nothing is cached, 403 outside the ACL.
fn purge_removes_every_variant_for_allowed_clients_only(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start_on("0.0.0.0:0", backend, &[]);
    let local = format!("http://127.0.0.1:{}", proxy.address.port());
    let url = origin.url("/vary");
    let get = |language: &str| {
        let output = curl(&[
            "-x",
            &local,
            "-H",
            &format!("Accept-Language: {language}"),
            &url,
        ]);
        assert_eq!(output.code, 0);
        output.stdout
    };
    let purge = |proxy_url: &str| {
        let output = curl(&["-i", "-x", proxy_url, "-X", "PURGE", &url]);
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    get("fr");
    get("de");
    get("fr");
    assert_eq!(origin.requests("/vary"), 2, "two variants stored");
    if let Some(address) = non_loopback_address() {
        let outside = format!("http://{address}:{}", proxy.address.port());
        let answer = purge(&outside);
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    } else {
        println!("skipped the 403 part: this machine has no non-loopback IPv4 address");
    }
    let answer = purge(&local);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("purged 2"), "{answer}");
    assert_eq!(get("fr"), b"language=fr");
    assert_eq!(get("de"), b"language=de");
    assert_eq!(origin.requests("/vary"), 4, "both variants were gone");
    let answer = purge(&local);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let answer = purge(&local);
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    assert!(answer.contains("nothing cached"), "{answer}");
    assert_eq!(
        origin.requests("/vary"),
        4,
        "PURGE never reaches the origin"
    );
    // A reverse proxy takes the origin-form target.
    let reverse = Proxy::start(
        backend,
        &["--reverse", &format!("http://{}", origin.address)],
    );
    let url = format!("{}/cacheable", reverse.url());
    assert_eq!(curl(&[&url]).stdout, b"cacheable body");
    let answer = String::from_utf8_lossy(&curl(&["-i", "-X", "PURGE", &url]).stdout).into_owned();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(curl(&[&url]).stdout, b"cacheable body");
    assert_eq!(origin.requests("/cacheable"), 2, "purged, so fetched again");
}

/// A `Range` on a hit is cut from the cached object: 206 with `Content-Range`, 416 when
/// unsatisfiable, the whole 200 when `If-Range` does not match; the origin is not asked.
/// On a miss the request goes as it came (this origin ignores `Range`: a full 200).
fn ranges_are_served_from_cached_objects(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let url = origin.url("/cacheable");
    let (status, _, body) = via_proxy(&proxy, &["-r", "0-8"], &url);
    assert_eq!((status, &body[..]), (200, &b"cacheable body"[..]), "miss");
    let (status, head, body) = via_proxy(&proxy, &["-r", "0-8"], &url);
    assert_eq!((status, &body[..]), (206, &b"cacheable"[..]), "{head}");
    assert_eq!(header(&head, "content-range"), Some("bytes 0-8/14"));
    assert!(header(&head, "cache-status").unwrap().contains("hit"));
    let (status, head, body) = via_proxy(&proxy, &["-r", "-4"], &url);
    assert_eq!((status, &body[..]), (206, &b"body"[..]), "{head}");
    assert_eq!(header(&head, "content-range"), Some("bytes 10-13/14"));
    let (status, head, body) = via_proxy(&proxy, &["-r", "100-"], &url);
    assert_eq!((status, body.len()), (416, 0), "{head}");
    assert_eq!(header(&head, "content-range"), Some("bytes */14"));
    let (status, _, body) = via_proxy(&proxy, &["-r", "0-8", "-H", "If-Range: \"v1\""], &url);
    assert_eq!((status, &body[..]), (206, &b"cacheable"[..]));
    let (status, _, body) = via_proxy(&proxy, &["-r", "0-8", "-H", "If-Range: \"v0\""], &url);
    assert_eq!((status, &body[..]), (200, &b"cacheable body"[..]));
    assert_eq!(
        origin.requests("/cacheable"),
        1,
        "every range came from the cache"
    );
}

/// `stale-while-revalidate`: stale hits are answered at once, marked stale, and one
/// background revalidation (the origin takes 2 s to answer it) refreshes the entry.
fn stale_while_revalidate_answers_at_once_and_refreshes_once(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    let url = origin.url("/swr");
    let (status, _, body) = via_proxy(&proxy, &[], &url);
    assert_eq!((status, &body[..]), (200, &b"swr body"[..]));
    for _ in 0..3 {
        let (status, head, body) = via_proxy(&proxy, &[], &url);
        assert_eq!((status, &body[..]), (200, &b"swr body"[..]), "{head}");
        let cache_status = header(&head, "cache-status").unwrap();
        assert!(
            cache_status.contains("hit") && cache_status.contains("stale-while-revalidate"),
            "{head}"
        );
        assert!(header(&head, "x-refreshed").is_none(), "{head}");
    }
    // max-stale accepts the stale entry without starting another revalidation: poll
    // (bounded) until the refreshed fields show.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let (_, head, _) = via_proxy(&proxy, &["-H", "Cache-Control: max-stale"], &url);
        if header(&head, "x-refreshed") == Some("yes") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never refreshed: {head}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        origin.requests("/swr"),
        2,
        "one miss, one background revalidation"
    );
    assert_eq!(origin.conditional("/swr"), 1);
}

/// `stale-if-error`: a 5xx or an unreachable origin is answered with the stored response
/// within the window (response or request directive); without a window the error passes.
fn stale_if_error_answers_when_the_origin_fails(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &["--upstream-timeout", "5"]);
    let url = origin.url("/flaky?cc=max-age=0,_stale-if-error=60");
    let (status, _, body) = via_proxy(&proxy, &[], &url);
    assert_eq!((status, &body[..]), (200, &b"flaky body"[..]));
    let (status, head, body) = via_proxy(&proxy, &[], &url);
    assert_eq!((status, &body[..]), (200, &b"flaky body"[..]), "{head}");
    let cache_status = header(&head, "cache-status").unwrap();
    assert!(
        cache_status.contains("fwd-status=500") && cache_status.contains("stale-if-error"),
        "{head}"
    );
    assert_eq!(origin.requests("/flaky?cc=max-age=0,_stale-if-error=60"), 2);
    // No window in the response: the 500 passes, unless the request grants one.
    let url = origin.url("/flaky?cc=max-age=0");
    via_proxy(&proxy, &[], &url);
    let (status, _, body) = via_proxy(&proxy, &[], &url);
    assert_eq!((status, &body[..]), (500, &b"origin broke"[..]));
    let (status, _, body) = via_proxy(&proxy, &["-H", "Cache-Control: stale-if-error=60"], &url);
    assert_eq!((status, &body[..]), (200, &b"flaky body"[..]));
    // An origin that is gone: connection refused instead of 502.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let once = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && read_once(&mut stream, &mut byte).unwrap_or(0) == 1 {
            head.push(byte[0]);
        }
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\nCache-Control: max-age=0, stale-if-error=60\r\n\
              Connection: close\r\nContent-Length: 9\r\n\r\nlast word",
        );
        // The listener closes here: later connections are refused.
    });
    let url = format!("http://{address}/gone");
    let (status, _, body) = via_proxy(&proxy, &[], &url);
    assert_eq!((status, &body[..]), (200, &b"last word"[..]));
    once.join().unwrap();
    let (status, head, body) = via_proxy(&proxy, &[], &url);
    assert_eq!((status, &body[..]), (200, &b"last word"[..]), "{head}");
    assert!(
        header(&head, "cache-status")
            .unwrap()
            .contains("stale-if-error"),
        "{head}"
    );
}

/// Collapsed forwarding: five concurrent misses for a URI the origin takes 1.5 s to answer
/// cost the origin one request, and all five get the body; when the answer turns out
/// uncacheable, the waiting requests go to the origin themselves.
fn concurrent_misses_send_one_request_to_the_origin(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(backend, &[]);
    for (path, expected_requests) in [("/slow", 1), ("/slow?nostore", 5)] {
        let url = origin.url(path);
        let clients: Vec<_> = (0..5)
            .map(|_| {
                let proxy_url = proxy.url();
                let url = url.clone();
                std::thread::spawn(move || curl(&["-i", "-x", &proxy_url, &url]))
            })
            .collect();
        let mut collapsed = 0;
        for client in clients {
            let output = client.join().unwrap();
            assert_eq!(output.code, 0, "{path}");
            let text = String::from_utf8_lossy(&output.stdout).into_owned();
            assert!(
                text.starts_with("HTTP/1.1 200") && text.ends_with("slow body"),
                "{path}: {text}"
            );
            collapsed += usize::from(text.contains("detail=collapsed"));
        }
        assert_eq!(origin.requests(path), expected_requests, "{path}");
        if expected_requests == 1 {
            assert_eq!(collapsed, 4, "four waited for the first");
        }
    }
}
