//! Regression tests for the proxy's message framing (RFC 9112 §6, §7; RFC 9110 §6.5,
//! §7.6.1), on every backend: each one failed on the code before the framing fixes.
//! - A malformed chunked request body is answered with 400 at once and the half-sent
//!   upstream request is aborted (the origin connection closed), instead of stalling until
//!   the upstream timeout and ending in a 504.
//! - An origin that answers before the request body has all been sent: the client gets one
//!   answer and the connection closes, so the rest of the body is never read as a request.
//! - `Connection: Content-Length` never strips the framing of a body that is forwarded.
//! - Chunked responses reach the client in canonical form: no chunk extensions, trailer
//!   fields only those allowed and only for `TE: trailers`, decoded for HTTP/1.0.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use coldwire_testkit::{Proxy, connect, read_once, spawn_server};

coldwire_testkit::backend_tests! {
    malformed_chunked_body_gets_400_at_once_and_the_upstream_request_is_aborted,
    early_answer_closes_the_connection_so_the_rest_of_the_body_is_no_request,
    connection_naming_content_length_is_refused,
    chunked_responses_are_normalised_for_the_client,
}

/// Everything a recording origin received, one entry per connection, and how many of its
/// connections the proxy closed.
#[derive(Default)]
struct Recorded {
    connections: Mutex<Vec<Arc<Mutex<Vec<u8>>>>>,
    closed_by_peer: AtomicUsize,
}

impl Recorded {
    fn all_bytes(&self) -> String {
        let connections = self.connections.lock().unwrap();
        connections
            .iter()
            .map(|bytes| String::from_utf8_lossy(&bytes.lock().unwrap()).into_owned())
            .collect::<Vec<_>>()
            .join("\n--- next connection ---\n")
    }

    fn start_connection(&self) -> Arc<Mutex<Vec<u8>>> {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        self.connections.lock().unwrap().push(bytes.clone());
        bytes
    }
}

/// An origin that never answers: it records what arrives until the proxy closes.
fn silent_origin(mut stream: TcpStream, recorded: &Recorded) {
    let bytes = recorded.start_connection();
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => {
                recorded.closed_by_peer.fetch_add(1, Ordering::SeqCst);
                return;
            }
            Ok(read) => bytes.lock().unwrap().extend_from_slice(&buffer[..read]),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// An origin that answers `413` (keep-alive) as soon as a request head is complete,
/// without reading the body, and answers any later head on the connection too.
fn early_answer_origin(stream: TcpStream, recorded: &Recorded) {
    answer_every_head(
        stream,
        recorded,
        b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 4\r\n\r\nbig!",
    );
}

/// An origin that answers every request with a chunked body carrying a chunk extension
/// and trailer fields, one of them (`Content-Length`) never allowed in a trailer.
fn chunked_trailer_origin(stream: TcpStream, recorded: &Recorded) {
    answer_every_head(
        stream,
        recorded,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\
          Cache-Control: no-store\r\n\r\n\
          5;ext=\"x\"\r\nhello\r\n6\r\n world\r\n0\r\n\
          X-Checksum: 42\r\nContent-Length: 99\r\n\r\n",
    );
}

/// Records what arrives and writes `answer` once per complete request head (bodies are
/// never read), until the proxy closes.
fn answer_every_head(mut stream: TcpStream, recorded: &Recorded, answer: &[u8]) {
    let bytes = recorded.start_connection();
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buffer = [0u8; 4096];
    let mut answered = 0;
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(read) => {
                let mut seen = bytes.lock().unwrap();
                seen.extend_from_slice(&buffer[..read]);
                let heads = seen.windows(4).filter(|w| w == b"\r\n\r\n").count();
                while answered < heads {
                    answered += 1;
                    if stream.write_all(answer).is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// Reads one response head (and what came with it) within `limit`.
fn read_head(stream: &mut TcpStream, limit: Duration) -> String {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match read_once(stream, &mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// Reads until the proxy closes the connection; `None` if it stays open past `limit`.
fn read_until_close(stream: &mut TcpStream, limit: Duration) -> Option<Vec<u8>> {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut rest = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match read_once(stream, &mut buffer) {
            Ok(0) => return Some(rest),
            Ok(read) => rest.extend_from_slice(&buffer[..read]),
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => {
                return Some(rest);
            }
            Err(_) => return None,
        }
    }
}

fn wait_until(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    condition()
}

fn start_proxy(backend: &str) -> Proxy {
    Proxy::start(backend, &["--upstream-timeout", "30"])
}

fn malformed_chunked_body_gets_400_at_once_and_the_upstream_request_is_aborted(backend: &str) {
    let (origin, recorded) = spawn_server::<Recorded>(silent_origin);
    let proxy = start_proxy(backend);
    for (name, bad_chunk) in [
        ("0x prefix", &b"0x5\r\nabcde\r\n"[..]),
        ("sign", b"+5\r\nabcde\r\n"),
        ("space after size", b"5 \r\nabcde\r\n"),
        ("bare LF", b"5\nabcde\r\n"),
        ("data longer than its size", b"3\r\nabcde\r\n"),
        ("empty extension", b"5;\r\nabcde\r\n"),
        ("trailer line that is no field", b"0\r\nnot a field\r\n\r\n"),
    ] {
        let before = recorded.closed_by_peer.load(Ordering::SeqCst);
        let mut client = connect(proxy.address);
        let mut request = format!(
            "POST http://{origin}/upload HTTP/1.1\r\nHost: {origin}\r\n\
             Transfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n"
        )
        .into_bytes();
        request.extend_from_slice(bad_chunk);
        request.extend_from_slice(b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n");
        client.write_all(&request).unwrap();
        let head = read_head(&mut client, Duration::from_secs(5));
        assert!(
            head.starts_with("HTTP/1.1 400 "),
            "{backend}, {name}: expected an immediate 400, got {head:?}"
        );
        assert!(
            head.to_ascii_lowercase().contains("connection: close"),
            "{backend}, {name}: {head:?}"
        );
        assert!(
            read_until_close(&mut client, Duration::from_secs(5)).is_some(),
            "{backend}, {name}: the proxy must close the client connection"
        );
        assert!(
            wait_until(Duration::from_secs(5), || {
                recorded.closed_by_peer.load(Ordering::SeqCst) > before
            }),
            "{backend}, {name}: the half-sent upstream request must be aborted"
        );
    }
    let seen = recorded.all_bytes();
    assert!(
        !seen.contains("abcde") && !seen.contains("smuggled") && !seen.contains("not a field"),
        "{backend}: bytes after a framing error reached the origin:\n{seen}"
    );
}

fn early_answer_closes_the_connection_so_the_rest_of_the_body_is_no_request(backend: &str) {
    let (origin, recorded) = spawn_server::<Recorded>(early_answer_origin);
    let proxy = start_proxy(backend);
    let smuggled = format!("GET http://{origin}/smuggled HTTP/1.1\r\nHost: {origin}\r\n\r\n");
    let body_len = 10 + smuggled.len();
    let mut client = connect(proxy.address);
    client
        .write_all(
            format!(
                "POST http://{origin}/upload HTTP/1.1\r\nHost: {origin}\r\n\
                 Content-Length: {body_len}\r\n\r\n0123456789"
            )
            .as_bytes(),
        )
        .unwrap();
    let head = read_head(&mut client, Duration::from_secs(5));
    assert!(head.starts_with("HTTP/1.1 413 "), "{backend}: {head:?}");
    // The rest of the body: bytes a desynchronised proxy would read as a request.
    let _ = client.write_all(smuggled.as_bytes());
    let rest = read_until_close(&mut client, Duration::from_secs(5));
    let rest = rest.unwrap_or_else(|| {
        panic!("{backend}: the connection must close after an answer that left the body unread")
    });
    let rest = String::from_utf8_lossy(&rest);
    assert!(
        !rest.contains("HTTP/1.1"),
        "{backend}: a second answer on the connection: {rest:?}"
    );
    std::thread::sleep(Duration::from_millis(200));
    let seen = recorded.all_bytes();
    assert!(
        seen.matches("GET http").count() + seen.matches("GET /smuggled").count() == 0,
        "{backend}: the rest of a body reached the origin as a request:\n{seen}"
    );
}

fn connection_naming_content_length_is_refused(backend: &str) {
    let (origin, recorded) = spawn_server::<Recorded>(silent_origin);
    let proxy = start_proxy(backend);
    for connection in [
        "Content-Length",
        "close, content-length",
        "Transfer-Encoding",
    ] {
        let framing = if connection.contains("Transfer") {
            "Transfer-Encoding: chunked\r\n\r\n1d\r\nGET /smuggled HTTP/1.1\r\nHost:\r\n\r\n0\r\n\r\n"
        } else {
            "Content-Length: 29\r\n\r\nGET /smuggled HTTP/1.1\r\nHost:\r\n\r\n"
        };
        let mut client = connect(proxy.address);
        client
            .write_all(
                format!(
                    "POST http://{origin}/form HTTP/1.1\r\nHost: {origin}\r\n\
                     Connection: {connection}\r\n{framing}"
                )
                .as_bytes(),
            )
            .unwrap();
        let head = read_head(&mut client, Duration::from_secs(5));
        assert!(
            head.starts_with("HTTP/1.1 400 "),
            "{backend}, Connection: {connection}: {head:?}"
        );
        assert!(read_until_close(&mut client, Duration::from_secs(5)).is_some());
    }
    std::thread::sleep(Duration::from_millis(200));
    let seen = recorded.all_bytes();
    assert!(seen.is_empty(), "{backend}: the origin got {seen:?}");
}

fn chunked_responses_are_normalised_for_the_client(backend: &str) {
    let (origin, _recorded) = spawn_server::<Recorded>(chunked_trailer_origin);
    let proxy = start_proxy(backend);
    let exchange = |version: &str, te: &str, path: &str| -> Vec<u8> {
        let mut client = connect(proxy.address);
        let connection = if version == "1.0" {
            ""
        } else {
            "Connection: close\r\n"
        };
        client
            .write_all(
                format!(
                    "GET http://{origin}{path} HTTP/{version}\r\nHost: {origin}\r\n{te}{connection}\r\n"
                )
                .as_bytes(),
            )
            .unwrap();
        read_until_close(&mut client, Duration::from_secs(5))
            .unwrap_or_else(|| panic!("{backend}: HTTP/{version} {path}: no close"))
    };
    let split = |raw: &[u8]| -> (String, String) {
        let text = String::from_utf8_lossy(raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").expect("a head");
        (head.to_owned(), body.to_owned())
    };

    let (head, body) = split(&exchange("1.1", "TE: trailers\r\n", "/with-te"));
    assert!(
        head.contains("Transfer-Encoding: chunked"),
        "{backend}: {head}"
    );
    assert!(
        !body.contains(';'),
        "{backend}: chunk extension forwarded: {body:?}"
    );
    assert_eq!(
        decode_chunked(&body),
        ("hello world".to_owned(), vec!["X-Checksum: 42".to_owned()]),
        "{backend}: {body:?}"
    );

    let (_, body) = split(&exchange("1.1", "", "/without-te"));
    assert_eq!(
        decode_chunked(&body),
        ("hello world".to_owned(), vec![]),
        "{backend}: trailers go only to a client that accepts them: {body:?}"
    );

    let (head, body) = split(&exchange("1.0", "", "/http10"));
    assert!(
        !head.to_ascii_lowercase().contains("transfer-encoding"),
        "{backend}: chunked sent to an HTTP/1.0 client: {head}"
    );
    assert_eq!(body, "hello world", "{backend}");
}

/// Strictly decodes a chunked body written by the proxy: (body, trailer lines).
fn decode_chunked(mut text: &str) -> (String, Vec<String>) {
    let mut body = String::new();
    loop {
        let (size_line, rest) = text.split_once("\r\n").expect("a size line");
        let size = usize::from_str_radix(size_line, 16)
            .unwrap_or_else(|_| panic!("canonical size line expected, got {size_line:?}"));
        if size == 0 {
            let trailers = rest.strip_suffix("\r\n").expect("final CRLF");
            let lines = trailers
                .split("\r\n")
                .filter(|line| !line.is_empty())
                .map(str::to_owned)
                .collect();
            return (body, lines);
        }
        body.push_str(&rest[..size]);
        text = rest[size..]
            .strip_prefix("\r\n")
            .expect("CRLF after chunk data");
    }
}
