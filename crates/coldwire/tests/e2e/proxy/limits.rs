//! The proxy out of connections (issue 19): when the worker is at `--max-connections` or
//! the process is out of descriptors, a request that needs a new upstream connection gets
//! a `503` with `Proxy-Status: coldwire; error=connection_limit_reached` (RFC 9209) and a
//! one-line body — not a 502, not a reset — on a connection that stays open; the proxy
//! counts it, says it on stderr, and serves the request once connections free up. A CONNECT
//! tunnel out of connections gets the same 503 (and closes, as every failed tunnel); a
//! refused one stays a 502.

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use coldwire_testkit::{
    Origin, Proxy, Response, connect, connect_through, read_response, read_rest, start_echo_server,
};

/// How long the proxy gets to notice what the test did (stats published, closes seen).
const SETTLE: Duration = Duration::from_secs(10);

/// Sends a GET for the origin's `/cacheable` through the proxy on `stream` and reads the
/// answer.
fn get_cacheable(stream: &mut TcpStream, origin: &Origin) -> Response {
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\n\r\n",
        origin.url("/cacheable"),
        origin.address
    );
    stream.write_all(request.as_bytes()).expect("request");
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    read_response(&mut reader, false).expect("a response, not a reset")
}

/// The answer a request that found no connection to spare must get.
fn assert_connection_limit_answer(response: &Response) {
    assert_eq!(response.status, 503, "{}", response.status_line);
    let proxy_status = response.header("proxy-status").unwrap_or_default();
    assert!(
        proxy_status.starts_with("coldwire; error=connection_limit_reached;"),
        "{:?}",
        response.headers
    );
    assert_eq!(response.header("retry-after"), Some("1"));
    assert_ne!(
        response.header("connection"),
        Some("close"),
        "the client's connection stays open"
    );
    let body = response.body_text();
    assert!(
        body.contains("--max-connections"),
        "the body says why: {body}"
    );
}

/// Sends the request again (same connection) until it is answered 200, for at most
/// [`SETTLE`]: closes the test made must first reach the proxy.
fn served_again(stream: &mut TcpStream, origin: &Origin) -> Response {
    let deadline = Instant::now() + SETTLE;
    loop {
        let response = get_cacheable(stream, origin);
        if response.status != 503 || Instant::now() >= deadline {
            return response;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A stats counter (`total.SECTION.NAME`) once it satisfies `done`, or its last value.
fn wait_for_total(proxy: &Proxy, section: &str, name: &str, done: impl Fn(u64) -> bool) -> u64 {
    let deadline = Instant::now() + SETTLE;
    loop {
        let value = proxy.stats()["total"][section][name].as_u64().unwrap_or(0);
        if done(value) || Instant::now() >= deadline {
            return value;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `--max-connections 3`: three clients fill the worker, so the first one's request finds
/// no room for an upstream connection: 503 with Proxy-Status, counted; once a client
/// leaves, the same connection's next request is served.
pub(super) fn connection_limit_answers_503_with_proxy_status_and_keeps_serving(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start(
        backend,
        &["--max-connections", "3", "--admin", "127.0.0.1:0"],
    );
    let mut first = connect(proxy.address);
    let second = connect(proxy.address);
    let third = connect(proxy.address);
    let accepted = wait_for_total(&proxy, "loop", "accepted", |n| n >= 3);
    assert_eq!(accepted, 3, "three clients accepted");
    let refused = get_cacheable(&mut first, &origin);
    assert_connection_limit_answer(&refused);
    assert_eq!(
        proxy.stats()["total"]["http"]["connection_limit_reached"],
        1
    );
    assert_eq!(
        proxy.stats()["total"]["http"]["connection_limit_descriptors"],
        0,
        "the cause is --max-connections, not descriptors"
    );
    assert_eq!(
        origin.requests("/cacheable"),
        0,
        "nothing reached the origin"
    );
    drop(third);
    let served = served_again(&mut first, &origin);
    assert_eq!(served.status, 200, "{}", served.status_line);
    assert_eq!(served.body_text(), "cacheable body");
    drop(second);
}

/// Under an open-files limit of 64 the proxy runs out of descriptors long before 80
/// clients are in: it says it paused accepting, answers an accepted client's request with
/// the 503 (and says so, and counts it as a shortage of descriptors), and serves it once
/// clients leave.
pub(super) fn running_out_of_descriptors_answers_503_and_says_so(backend: &str) {
    let origin = Origin::start();
    let proxy = Proxy::start_with_open_files(backend, &["--admin", "127.0.0.1:0"], 64);
    let mut clients: Vec<TcpStream> = (0..80).map(|_| connect(proxy.address)).collect();
    assert!(
        proxy.wait_for_stderr("accepting paused", SETTLE),
        "no line about the pause: {}",
        proxy.stderr_tail()
    );
    let refused = get_cacheable(&mut clients[0], &origin);
    assert_connection_limit_answer(&refused);
    assert!(
        proxy.wait_for_stderr("answered 503 (connection_limit_reached)", SETTLE),
        "no line about the 503: {}",
        proxy.stderr_tail()
    );
    clients.truncate(1);
    let served = served_again(&mut clients[0], &origin);
    assert_eq!(served.status, 200, "{}", served.status_line);
    assert_eq!(served.body_text(), "cacheable body");
    // Only now: the stats endpoint needs a descriptor of its own to answer.
    assert!(
        wait_for_total(&proxy, "http", "connection_limit_descriptors", |n| n >= 1) >= 1,
        "counted as a shortage of descriptors: {}",
        proxy.stats()["total"]["http"]
    );
}

/// `--max-connections 3`: with two clients in, a third one's CONNECT finds no room for its
/// upstream connection: 503 `connection_limit_reached` with `Retry-After`, counted and
/// said, and the tunnel's client let go at the linger deadline even though it keeps its end
/// open (on uring that once waited for the write timeout); once there is room, a CONNECT to
/// a port nothing listens on is the origin's failure: 502 `connection_refused`.
pub(super) fn a_tunnel_out_of_connections_is_503_and_a_refused_one_502(backend: &str) {
    let echo = start_echo_server();
    // Started with an open-files limit (a generous one) for its stderr to be kept.
    let proxy = Proxy::start_with_open_files(
        backend,
        &[
            "--max-connections",
            "3",
            "--connect-any-port",
            "--admin",
            "127.0.0.1:0",
        ],
        1024,
    );
    let first = connect(proxy.address);
    let second = connect(proxy.address);
    let accepted = wait_for_total(&proxy, "loop", "accepted", |n| n >= 2);
    assert_eq!(accepted, 2, "two clients accepted");
    let (mut stream, head) = connect_through(&proxy, &echo.to_string());
    let answer = format!("{head}{}", String::from_utf8_lossy(&read_rest(&mut stream)));
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(
        answer.contains(&format!(
            "\r\nProxy-Status: coldwire; error=connection_limit_reached; next-hop=\"{echo}\""
        )),
        "{answer}"
    );
    assert!(answer.contains("\r\nRetry-After: 1\r\n"), "{answer}");
    assert!(answer.contains("--max-connections"), "{answer}");
    // The answered client keeps its end open (`stream` lives on): the proxy's lingering
    // close must still free the slot at its deadline (2 s), on every backend.
    assert_eq!(
        wait_for_total(&proxy, "http", "connection_limit_reached", |n| n >= 1),
        1
    );
    assert!(
        proxy.wait_for_stderr("answered 503 (connection_limit_reached)", SETTLE),
        "no line about the 503: {}",
        proxy.stderr_tail()
    );
    drop(first);
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    // The closes must reach the proxy first: retry while the answer is still the 503.
    let deadline = Instant::now() + SETTLE;
    let answer = loop {
        let (mut stream, head) = connect_through(&proxy, &closed.to_string());
        let answer = format!("{head}{}", String::from_utf8_lossy(&read_rest(&mut stream)));
        if !answer.starts_with("HTTP/1.1 503 ") || Instant::now() >= deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        answer.starts_with("HTTP/1.1 502 "),
        "{answer}\nstats: {}\nstderr: {}",
        proxy.stats()["total"]["loop"],
        proxy.stderr_tail()
    );
    assert!(
        answer.contains("\r\nProxy-Status: coldwire; error=connection_refused;"),
        "{answer}"
    );
    drop(second);
    drop(stream);
}
