//! `coldwire serve` against RFC 9110 rules a conformance suite checks from outside (see
//! docs/conformance.md): a method the server does not know is 501 (not 405), an
//! expectation other than `100-continue` is 417, a malformed `Host` is 400 — each on a
//! connection that goes on (or closes, for the 417 and 400) as the status line says — and
//! two `Range` fields are ignored.

use std::io::Write;

use coldwire_testkit::{
    DocumentRoot, ServerOptions, exchange, get_request, read_until_closed, split_response,
};

/// RFC 9110 §9.1: methods are case-sensitive tokens; one the server does not implement
/// (`BREW`, and `get`, which is not `GET`) is 501 Not Implemented with no `Allow`; a known
/// method it does not allow (`DELETE`) stays 405 with `Allow`. The connection stays usable.
pub(super) fn unknown_methods_get_501_and_known_ones_405(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    for method in ["BREW", "get", "PROPFIND"] {
        let request = format!("{method} /small.txt HTTP/1.1\r\nHost: x\r\n\r\n");
        let response = exchange(&server, request.as_bytes());
        assert_eq!(response.status, 501, "{method}: {}", response.status_line);
        assert_eq!(response.header("allow"), None, "{method}");
        assert!(response.header("date").is_some(), "{method}: no Date");
    }
    let response = exchange(&server, b"DELETE /small.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(response.status, 405, "{}", response.status_line);
    assert_eq!(response.header("allow"), Some("GET, HEAD"));
    // Pipelined behind a 501, a GET is still answered on the same connection.
    let mut stream = server.connect();
    let mut batch = b"BREW /small.txt HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    batch.extend_from_slice(b"GET /small.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(&batch).expect("sending");
    let (raw, _) = read_until_closed(&mut stream).expect("reading");
    let text = String::from_utf8_lossy(&raw);
    let second = text.find("HTTP/1.1 200 OK").expect(&text);
    assert!(text.starts_with("HTTP/1.1 501 "), "{text}");
    assert!(raw.ends_with(&root.small), "{text}");
    assert!(second > 0);
}

/// RFC 9110 §10.1.1: a server may answer an expectation it cannot meet with 417; coldwire
/// does, then closes (the body, if any, is never read). `100-continue` is still met.
pub(super) fn unknown_expectation_gets_417(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    for expect in ["foo", "100-continue, bar=1"] {
        let mut stream = server.connect();
        let request = format!("GET /small.txt HTTP/1.1\r\nHost: x\r\nExpect: {expect}\r\n\r\n");
        stream.write_all(request.as_bytes()).expect("sending");
        let (raw, _) = read_until_closed(&mut stream).expect("the server should close");
        let (response, _) = split_response(&raw);
        assert_eq!(response.status, 417, "{expect}: {}", response.status_line);
    }
    let good = exchange(
        &server,
        b"GET /small.txt HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n",
    );
    assert_eq!(good.status, 200);
    let after = exchange(&server, &get_request("/small.txt"));
    assert_eq!(after.body, root.small);
}

/// RFC 9112 §3.2: a `Host` that is not `uri-host [":" port]` (a second colon, an unclosed
/// IPv6 bracket, a bad `%` escape) is 400 and the connection closes; valid forms are served.
pub(super) fn malformed_host_values_get_400(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    for host in ["a:b", "a:1:2", "[::1", "x%zz"] {
        let mut stream = server.connect();
        let request = format!("GET /small.txt HTTP/1.1\r\nHost: {host}\r\n\r\n");
        stream.write_all(request.as_bytes()).expect("sending");
        let (raw, _) = read_until_closed(&mut stream).expect("the server should close");
        let (response, _) = split_response(&raw);
        assert_eq!(
            response.status, 400,
            "Host: {host}: {}",
            response.status_line
        );
    }
    for host in ["[::1]:8080", "example.com:", "127.0.0.1"] {
        let request = format!("GET /small.txt HTTP/1.1\r\nHost: {host}\r\n\r\n");
        let response = exchange(&server, request.as_bytes());
        assert_eq!(response.status, 200, "Host: {host}");
    }
}

/// RFC 9110 §14.2: `Range` is not a list field; with two of them the request is answered
/// in full (a server may ignore `Range`) rather than by whichever one this server picks.
pub(super) fn two_range_fields_get_the_full_representation(backend: &str) {
    let root = DocumentRoot::new();
    let server = ServerOptions::new(backend, &root).start();
    let response = exchange(
        &server,
        b"GET /small.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\nRange: bytes=5-9\r\n\r\n",
    );
    assert_eq!(response.status, 200, "{}", response.status_line);
    assert_eq!(response.body, root.small);
    let single = exchange(
        &server,
        b"GET /small.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=5-9\r\n\r\n",
    );
    assert_eq!(single.status, 206);
    assert_eq!(single.body, root.small[5..10]);
}
