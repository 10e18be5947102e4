//! Message-level RFC 9110 / 9112 rules of `coldwire proxy` that the conformance audit
//! (docs/conformance.md) found broken and that are fixed: `Max-Forwards` on `TRACE` and
//! `OPTIONS`, no `Content-Length` on a `204`, status codes outside 100–599, `OPTIONS *`
//! from an absolute-form target with an empty path, unknown expectations, an origin's
//! malformed chunked body cutting the client off at once, targets that are not URIs, and
//! response transfer codings other than one `chunked`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use coldwire_testkit::scripted::{Reply, ScriptedOrigin, ScriptedRequest as Request, raw_exchange};
use coldwire_testkit::{Proxy, header};

/// The origin of these tests: echoes the `Max-Forwards` it got, sends a `204` with a
/// `Content-Length` (and no body), and a status line with a two-digit code.
fn messages_script(request: &Request) -> Reply {
    let got = request.header("max-forwards").unwrap_or("none").to_owned();
    match request.path.as_str() {
        "/no-content" => Reply::head(
            "204 No Content",
            &[("Content-Length", "2"), ("Cache-Control", "max-age=60")],
        ),
        "/two-digits" => Reply::new("099 Odd", &[], b"ok"),
        "/six-hundred" => Reply::new("600 Odd", &[], b"ok"),
        // A body under a transfer coding the proxy does not decode (nor does the script).
        "/gzip-coded" => Reply {
            pieces: vec![
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nzz\r\n0\r\n\r\n"
                    .to_vec(),
            ],
            pause: Duration::ZERO,
            close: false,
        },
        "/chunked-twice" => Reply {
            pieces: vec![
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n\
                  7\r\n2\r\nzz\r\n\r\n0\r\n\r\n"
                    .to_vec(),
            ],
            pause: Duration::ZERO,
            close: false,
        },
        // A valid first chunk, then a size line that is not hex; the connection stays open.
        "/bad-chunk" => Reply {
            pieces: vec![
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n"
                    .to_vec(),
            ],
            pause: Duration::ZERO,
            close: false,
        },
        _ => Reply::new("200 OK", &[("X-Got-Max-Forwards", &got)], b"from origin"),
    }
}

/// RFC 9110 §7.6.2: a `TRACE` or `OPTIONS` with `Max-Forwards: 0` is answered by the proxy
/// as its final recipient and never reaches the origin (a `TRACE` echo leaves `Cookie`
/// and `Authorization` out, §9.3.8); a larger value goes on one less; other methods pass
/// the field on as received.
pub(super) fn rfc9110_7_6_2_max_forwards_on_trace_and_options(backend: &str) {
    let origin = ScriptedOrigin::start(messages_script);
    let proxy = Proxy::start(backend, &[]);
    let url = origin.url("/mf");
    let host = origin.address;
    let trace = format!(
        "TRACE {url} HTTP/1.1\r\nHost: {host}\r\nMax-Forwards: 0\r\nCookie: secret=1\r\n\
         Authorization: Basic eDp5\r\nX-Probe: 1\r\nConnection: close\r\n\r\n"
    );
    let text = raw_exchange(proxy.address, trace.as_bytes());
    assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
    assert!(text.contains("Content-Type: message/http\r\n"), "{text}");
    let (_, body) = text.split_once("\r\n\r\n").expect(&text);
    assert!(
        body.starts_with(&format!("TRACE {url} HTTP/1.1\r\n")),
        "{text}"
    );
    assert!(body.contains("X-Probe: 1\r\n"), "{text}");
    assert!(!body.contains("secret") && !body.contains("eDp5"), "{text}");
    let options = format!(
        "OPTIONS {url} HTTP/1.1\r\nHost: {host}\r\nMax-Forwards: 0\r\nConnection: close\r\n\r\n"
    );
    let text = raw_exchange(proxy.address, options.as_bytes());
    assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
    assert!(text.contains("Content-Length: 0\r\n"), "{text}");
    assert_eq!(origin.requests("TRACE", "/mf"), 0);
    assert_eq!(origin.requests("OPTIONS", "/mf"), 0);
    for (method, sent, expected) in [
        ("OPTIONS", "3", "2"),
        ("TRACE", "1", "0"),
        ("GET", "0", "0"),
    ] {
        let request = format!(
            "{method} {url} HTTP/1.1\r\nHost: {host}\r\nMax-Forwards: {sent}\r\n\
             Connection: close\r\n\r\n"
        );
        let text = raw_exchange(proxy.address, request.as_bytes());
        let (head, body) = text.split_once("\r\n\r\n").expect(&text);
        assert_eq!(body, "from origin", "{method}: {text}");
        assert_eq!(
            header(head, "x-got-max-forwards"),
            Some(expected),
            "{method} with Max-Forwards: {sent}"
        );
    }
}

/// RFC 9110 §8.6: a `204` carries no `Content-Length`, neither when the origin sent one
/// nor when it is served from the cache.
pub(super) fn rfc9110_8_6_a_204_has_no_content_length(backend: &str) {
    let origin = ScriptedOrigin::start(messages_script);
    let proxy = Proxy::start(backend, &[]);
    let url = origin.url("/no-content");
    let request = format!(
        "GET {url} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        origin.address
    );
    for round in ["miss", "hit"] {
        let text = raw_exchange(proxy.address, request.as_bytes());
        assert!(text.starts_with("HTTP/1.1 204 "), "{round}: {text}");
        assert!(
            !text.to_ascii_lowercase().contains("content-length"),
            "{round}: {text}"
        );
        assert!(text.ends_with("\r\n\r\n"), "{round}: {text}");
    }
    assert_eq!(origin.requests("GET", "/no-content"), 1);
}

/// RFC 9110 §15: status codes are 100 to 599; an origin's `099` (which would go out as a
/// two-digit status line) or `600` is a 502.
pub(super) fn rfc9110_15_status_codes_outside_100_to_599_are_502(backend: &str) {
    let origin = ScriptedOrigin::start(messages_script);
    let proxy = Proxy::start(backend, &[]);
    for path in ["/two-digits", "/six-hundred"] {
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            origin.url(path),
            origin.address
        );
        let text = raw_exchange(proxy.address, request.as_bytes());
        assert!(text.starts_with("HTTP/1.1 502 "), "{path}: {text}");
    }
}

/// RFC 9112 §3.2.4: `OPTIONS http://host:port` (empty path, no query) reaches the origin
/// as `OPTIONS *`; with a query it is `/?query`.
pub(super) fn rfc9112_3_2_4_options_with_an_empty_path_is_forwarded_as_asterisk(backend: &str) {
    let origin = ScriptedOrigin::start(messages_script);
    let proxy = Proxy::start(backend, &[]);
    let host = origin.address;
    for (target, seen) in [
        (format!("http://{host}"), "*"),
        (format!("http://{host}?q"), "/?q"),
    ] {
        let request =
            format!("OPTIONS {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let text = raw_exchange(proxy.address, request.as_bytes());
        assert!(text.starts_with("HTTP/1.1 200 "), "{target}: {text}");
        assert_eq!(origin.requests("OPTIONS", seen), 1, "{target}");
    }
}

/// RFC 9110 §10.1.1: an expectation other than `100-continue` is answered 417 by the proxy
/// (then close) and not forwarded.
pub(super) fn rfc9110_10_1_1_unknown_expectations_get_417(backend: &str) {
    let origin = ScriptedOrigin::start(messages_script);
    let proxy = Proxy::start(backend, &[]);
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nExpect: x-fancy\r\n\r\n",
        origin.url("/expect"),
        origin.address
    );
    let text = raw_exchange(proxy.address, request.as_bytes());
    assert!(text.starts_with("HTTP/1.1 417 "), "{text}");
    assert!(text.contains("Connection: close\r\n"), "{text}");
    assert_eq!(origin.requests("GET", "/expect"), 0);
}

/// RFC 9112 §7.1: an origin's chunked body that stops being one (a size line that is not
/// hex) cuts the client's connection at once — it sees a truncated response (or none),
/// never a complete one — even though the origin keeps its connection open (`--upstream-timeout`
/// is far away). Nothing is stored: the next request goes to the origin again.
pub(super) fn rfc9112_7_1_a_malformed_chunked_response_is_cut_at_once(backend: &str) {
    let origin = ScriptedOrigin::start(messages_script);
    let proxy = Proxy::start(backend, &["--upstream-timeout", "120s"]);
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\n\r\n",
        origin.url("/bad-chunk"),
        origin.address
    );
    for round in 1..=2 {
        let mut stream = TcpStream::connect(proxy.address).unwrap();
        // The origin holds its connection for 20 s; the proxy must not wait for that.
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut all = Vec::new();
        let closed = stream.read_to_end(&mut all);
        let text = String::from_utf8_lossy(&all);
        assert!(
            closed.is_ok(),
            "round {round}: the proxy kept the client waiting ({closed:?}): {text}"
        );
        // The head may or may not have left before the cut; a complete body never does.
        assert!(
            text.is_empty() || text.starts_with("HTTP/1.1 200 "),
            "round {round}: {text}"
        );
        assert!(
            !text.ends_with("0\r\n\r\n"),
            "round {round}: complete? {text}"
        );
    }
    assert_eq!(origin.requests("GET", "/bad-chunk"), 2);
}

/// RFC 9112 §3: a target with characters no URI holds (`\`, `|`, `{`) or a broken `%`
/// escape is refused (400, close) rather than forwarded for the origin to read its own way
/// (a backslash read as `/` by one server and not by another is a path-confusion vector).
pub(super) fn rfc9112_3_targets_that_are_not_uris_are_not_forwarded(backend: &str) {
    let origin = ScriptedOrigin::start(messages_script);
    let reverse = format!("http://{}", origin.address);
    let proxy = Proxy::start(backend, &["--reverse", &reverse]);
    for target in ["/a\\..\\b", "/a%zz", "/x|y", "/{x}"] {
        let request = format!("GET {target} HTTP/1.1\r\nHost: site.test\r\n\r\n");
        let text = raw_exchange(proxy.address, request.as_bytes());
        assert!(text.starts_with("HTTP/1.1 400 "), "{target}: {text}");
        assert_eq!(origin.requests("GET", target), 0, "{target}");
    }
    let text = raw_exchange(
        proxy.address,
        b"GET /ok%20fine?q=(1) HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n",
    );
    assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
}

/// RFC 9112 §6.1: a response body under a transfer coding other than one `chunked`
/// (`gzip, chunked`; `chunked` twice) is a 502: the proxy rewrites `Transfer-Encoding` (it
/// is hop-by-hop) and decodes only one `chunked`, so passing the rest on would hand the
/// client coded bytes as content, and store them so.
pub(super) fn rfc9112_6_1_transfer_codings_other_than_chunked_from_an_origin_are_502(
    backend: &str,
) {
    let origin = ScriptedOrigin::start(messages_script);
    let proxy = Proxy::start(backend, &[]);
    for path in ["/gzip-coded", "/chunked-twice"] {
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            origin.url(path),
            origin.address
        );
        let text = raw_exchange(proxy.address, request.as_bytes());
        assert!(text.starts_with("HTTP/1.1 502 "), "{path}: {text}");
    }
}
