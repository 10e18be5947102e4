//! Tests for [`super::parse_request`] and [`super::RequestHead`].

use super::*;
use proptest::prelude::*;

fn parse(input: &[u8]) -> Result<Parsed<'_>, HttpError> {
    parse_request(input, &Limits::default())
}

fn complete(input: &[u8]) -> (RequestHead<'_>, usize) {
    match parse(input) {
        Ok(Parsed::Complete { head, head_len }) => (head, head_len),
        other => panic!("expected a complete head, got {other:?}"),
    }
}

fn status_of(input: &[u8]) -> u16 {
    match parse(input) {
        Err(error) => error.status().code(),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn parses_a_simple_get() {
    let input = b"GET /index.html?x=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n";
    let (head, head_len) = complete(input);
    assert_eq!(head_len, input.len());
    assert_eq!(head.method(), Method::Get);
    assert_eq!(head.method_str(), "GET");
    assert_eq!(head.target(), "/index.html?x=1");
    assert_eq!(head.version(), Version::Http11);
    assert_eq!(head.host(), Some(&b"example.com"[..]));
    assert_eq!(head.header("accept"), Some(&b"*/*"[..]));
    assert_eq!(head.header("ACCEPT"), Some(&b"*/*"[..]));
    assert_eq!(head.header("missing"), None);
    assert_eq!(head.header_count(), 2);
    assert_eq!(head.raw(), &input[..]);
    let headers: Vec<_> = head.headers().collect();
    assert_eq!(
        headers,
        vec![("Host", &b"example.com"[..]), ("Accept", &b"*/*"[..])]
    );
    assert!(head.keep_alive());
    assert_eq!(head.body_framing(), BodyFraming::None);
    assert!(!head.expects_continue());
}

#[test]
fn partial_until_the_blank_line() {
    let input = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    for end in 0..input.len() {
        assert!(
            matches!(parse(&input[..end]), Ok(Parsed::Partial)),
            "prefix of {end} bytes"
        );
    }
    assert!(matches!(parse(input), Ok(Parsed::Complete { .. })));
}

#[test]
fn pipelined_requests_parse_one_at_a_time() {
    let input = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n";
    let (first, first_len) = complete(input);
    assert_eq!(first.target(), "/a");
    assert_eq!(&input[first_len..first_len + 6], b"GET /b");
    let (second, second_len) = complete(&input[first_len..]);
    assert_eq!(second.target(), "/b");
    assert_eq!(first_len + second_len, input.len());
}

#[test]
fn methods_and_versions() {
    let (head, _) = complete(b"PROPFIND / HTTP/1.0\r\n\r\n");
    assert_eq!(head.method(), Method::Other);
    assert_eq!(head.method_str(), "PROPFIND");
    assert_eq!(head.version(), Version::Http10);
    assert_eq!(head.host(), None);
    // RFC 9110 §15.6.6: a well-formed version we do not speak is 505, garbage is 400.
    assert_eq!(status_of(b"GET / HTTP/2.0\r\n\r\n"), 505);
    assert_eq!(status_of(b"GET / HTTP/1.2\r\nHost: a\r\n\r\n"), 505);
    assert_eq!(status_of(b"GET / HTTP/1.10\r\n\r\n"), 400);
    assert_eq!(status_of(b"GET / http/1.1\r\n\r\n"), 400);
    assert_eq!(status_of(b"GET / FTP/1.1\r\n\r\n"), 400);
    assert_eq!(status_of(b"G@T / HTTP/1.1\r\n\r\n"), 400);
}

#[test]
fn keep_alive_rules() {
    let cases: [(&[u8], bool); 8] = [
        (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", true),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            false,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, CLOSE\r\n\r\n",
            false,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: closed\r\n\r\n",
            true,
        ),
        (b"GET / HTTP/1.0\r\n\r\n", false),
        (b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true),
        (
            b"GET / HTTP/1.0\r\nConnection: foo\r\nConnection: keep-alive\r\n\r\n",
            true,
        ),
        (
            b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
            false,
        ),
    ];
    for (input, expected) in cases {
        let (head, _) = complete(input);
        assert_eq!(
            head.keep_alive(),
            expected,
            "{}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn host_rules() {
    assert_eq!(status_of(b"GET / HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(
        status_of(b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"),
        400
    );
    assert_eq!(status_of(b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), 400);
    assert_eq!(status_of(b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), 400);
    let (head, _) = complete(b"GET / HTTP/1.1\r\nhost: [::1]:8080\r\n\r\n");
    assert_eq!(head.host(), Some(&b"[::1]:8080"[..]));
    let (head, _) = complete(b"GET / HTTP/1.1\r\nHost:\r\n\r\n");
    assert_eq!(head.host(), Some(&b""[..]));
}

#[test]
fn rfc9112_section_3_2_host_must_be_uri_host_and_port() {
    for bad in [
        "a:b", "a:1:2", "[::1", "[::1]x", "[::1]:8x", "[]", "a%zz", "a%4", "[a::1", "a]", "a[",
    ] {
        let input = format!("GET / HTTP/1.1\r\nHost: {bad}\r\n\r\n");
        assert_eq!(status_of(input.as_bytes()), 400, "Host: {bad}");
    }
    for good in [
        "example.com",
        "example.com:8080",
        "a:",
        "127.0.0.1:80",
        "[::1]",
        "[::1]:443",
        "%41b.example",
        "under_score.example",
    ] {
        let input = format!("GET / HTTP/1.1\r\nHost: {good}\r\n\r\n");
        let (head, _) = complete(input.as_bytes());
        assert_eq!(head.host(), Some(good.as_bytes()), "Host: {good}");
    }
}

#[test]
fn framing_is_validated_while_parsing() {
    let (head, head_len) =
        complete(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
    assert_eq!(head.body_framing(), BodyFraming::Length(5));
    assert_eq!(head_len, 47);
    let (head, _) = complete(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(head.body_framing(), BodyFraming::Chunked);

    let bad: [&[u8]; 7] = [
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
        b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
    ];
    for input in bad {
        assert_eq!(status_of(input), 400, "{}", String::from_utf8_lossy(input));
    }
    assert_eq!(
        status_of(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
        501
    );
}

#[test]
fn expect_continue_only_for_http11() {
    let (head, _) = complete(b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\n\r\n");
    assert!(head.expects_continue());
    let (head, _) = complete(b"PUT / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n");
    assert!(!head.expects_continue());
}

#[test]
fn rfc9110_section_10_1_1_unknown_expectations_are_417() {
    for input in [
        &b"GET / HTTP/1.1\r\nHost: a\r\nExpect: foo\r\n\r\n"[..],
        b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue, x=y\r\nContent-Length: 1\r\n\r\n",
        b"GET / HTTP/1.0\r\nExpect: 200-ok\r\n\r\n",
    ] {
        assert_eq!(status_of(input), 417, "{}", String::from_utf8_lossy(input));
    }
    // Framing errors still win: the connection cannot be trusted either way.
    assert_eq!(
        status_of(b"POST / HTTP/1.1\r\nHost: a\r\nExpect: foo\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
        400
    );
    // An empty list expects nothing.
    let (head, _) = complete(b"GET / HTTP/1.1\r\nHost: a\r\nExpect: ,\r\n\r\n");
    assert!(!head.expects_continue());
}

#[test]
fn repeated_headers_are_all_visible() {
    let (head, _) = complete(
        b"GET / HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"a\"\r\nif-none-match: \"b\"\r\n\r\n",
    );
    let values: Vec<_> = head.header_values("If-None-Match").collect();
    assert_eq!(values, vec![&b"\"a\""[..], b"\"b\""]);
}

#[test]
fn size_limits() {
    let limits = Limits {
        max_head_bytes: 64,
        max_headers: 2,
        max_request_line_bytes: 32,
    };
    let long_target = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(40));
    assert_eq!(
        parse_request(long_target.as_bytes(), &limits).map(|_| ()),
        Err(HttpError::UriTooLong)
    );
    // Still incomplete, but the request line is already too long.
    assert_eq!(
        parse_request(&long_target.as_bytes()[..36], &limits).map(|_| ()),
        Err(HttpError::UriTooLong)
    );
    let big_head = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n", "b".repeat(60));
    assert_eq!(
        parse_request(big_head.as_bytes(), &limits).map(|_| ()),
        Err(HttpError::HeadTooLarge)
    );
    let many = b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n";
    assert_eq!(
        parse_request(many, &limits).map(|_| ()),
        Err(HttpError::TooManyHeaders)
    );
    assert_eq!(HttpError::TooManyHeaders.status().code(), 431);
}

#[test]
fn default_limits_accept_exactly_the_maximum_head() {
    let limits = Limits::default();
    let prefix = b"GET / HTTP/1.1\r\nHost: a\r\nX: ";
    let filler = limits.max_head_bytes - prefix.len() - 4;
    let mut input = prefix.to_vec();
    input.extend(std::iter::repeat_n(b'v', filler));
    input.extend_from_slice(b"\r\n\r\n");
    assert_eq!(input.len(), limits.max_head_bytes);
    assert!(matches!(
        parse_request(&input, &limits),
        Ok(Parsed::Complete { .. })
    ));
    input.insert(prefix.len(), b'v');
    assert_eq!(
        parse_request(&input, &limits).map(|_| ()),
        Err(HttpError::HeadTooLarge)
    );
}

#[test]
fn obsolete_line_folding_is_rejected() {
    assert_eq!(
        status_of(b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n"),
        400
    );
}

#[test]
fn leading_blank_lines_are_skipped() {
    let (head, head_len) = complete(b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(head.target(), "/");
    assert_eq!(head_len, 29);
}

proptest! {
    #[test]
    fn never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse(&bytes);
    }

    #[test]
    fn never_panics_on_request_like_bytes(
        method in "(GET|POST|HEAD|X)",
        target in "[ -~]{0,30}",
        headers in prop::collection::vec(
            "(Host|Content-Length|Transfer-Encoding|Connection|Expect|X-[a-z]{1,5}): [ -~]{0,20}",
            0..6,
        ),
        version in "HTTP/1\\.[01]",
    ) {
        let mut input = format!("{method} {target} {version}\r\n");
        for header in headers {
            input.push_str(&header);
            input.push_str("\r\n");
        }
        input.push_str("\r\n");
        if let Ok(Parsed::Complete { head, head_len }) = parse(input.as_bytes()) {
            prop_assert!(head_len <= input.len());
            prop_assert_eq!(head.headers().count(), head.header_count());
            let _ = (head.keep_alive(), head.body_framing(), head.host());
        }
        // Every prefix is either partial or an error, never a different complete head.
        for end in 0..input.len() {
            if let Ok(Parsed::Complete { head_len, .. }) = parse(&input.as_bytes()[..end]) {
                prop_assert!(head_len <= end);
            }
        }
    }
}
