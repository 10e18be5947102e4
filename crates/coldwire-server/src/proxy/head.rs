//! Message heads as the proxy rewrites them: the request sent upstream (origin-form target,
//! `Host`, hop-by-hop fields removed, `Via` added, validators for a revalidation), the
//! response head parsed from the origin into owned [`Fields`], and the response head
//! written to the client (its own framing, `Via`, `Age`, `Cache-Status`, `Connection`);
//! and the end of a chunked body the proxy re-encodes (the last chunk with only the
//! trailer fields allowed there), in either direction.
//!
//! Invariants: hop-by-hop fields — `Connection` and every field it names, `Keep-Alive`,
//! `Proxy-*`, `TE`, `Trailer`, `Upgrade` — never cross the proxy. A request's framing is
//! written by the proxy itself, as exactly one canonical `Content-Length` or
//! `Transfer-Encoding: chunked` line taken from the parsed framing; the client's own framing
//! lines, and fields that differ from them only by `_` (`Content_Length`), are never copied,
//! so the origin cannot read the body's end anywhere but where the proxy did. A request
//! whose `Connection` names a framing or routing field is refused
//! ([`connection_names_framing`]) rather than forwarded without it. Every field value
//! written comes from a parsed (validated) head, so no CR or LF can be injected.

use std::net::IpAddr;

use coldwire_cache::{CacheStatus, StoredResponse, Targets};
use coldwire_http::fields::comma_list;
use coldwire_http::owned_fields::Fields;
use coldwire_http::{
    BodyFraming, HTTP_DATE_LEN, HttpError, RequestHead, ResponseFraming, Version,
    connection_header, format_http_date, parse_response_head_with,
};

fn is_hop_by_hop(name: &[u8]) -> bool {
    const FIXED: [&[u8]; 6] = [
        b"connection",
        b"keep-alive",
        b"te",
        b"trailer",
        b"upgrade",
        b"transfer-encoding",
    ];
    FIXED.iter().any(|fixed| name.eq_ignore_ascii_case(fixed))
        || name
            .get(..6)
            .is_some_and(|prefix| prefix.eq_ignore_ascii_case(b"proxy-"))
}

/// Names listed in `Connection` fields (they are hop-by-hop too).
fn connection_named<'a>(connection_values: impl Iterator<Item = &'a [u8]>) -> Vec<&'a [u8]> {
    connection_values.flat_map(comma_list).collect()
}

fn named_in(list: &[&[u8]], name: &[u8]) -> bool {
    list.iter().any(|named| named.eq_ignore_ascii_case(name))
}

/// The request's fields as the cache keeps them for what goes forward (`Vary` keys of the
/// stored answer, conditionals after a `304`): the end-to-end ones only. A field the
/// proxy removes before forwarding — hop-by-hop, or named in `Connection` — never reaches
/// the origin, so the stored answer must not be keyed on its value: with
/// `Connection: X-Mobile` and `X-Mobile: 1` the origin answers as for no `X-Mobile`, and
/// keying that answer under `X-Mobile: 1` would hand it to every mobile client
/// (hop-by-hop cache poisoning).
pub fn cache_request_fields(head: &RequestHead<'_>) -> Fields {
    let named = connection_named(head.header_values("connection"));
    let mut fields = Fields::new();
    for (name, value) in head.headers() {
        let bytes = name.as_bytes();
        if !(is_hop_by_hop(bytes) || named_in(&named, bytes)) {
            fields.push(name, value);
        }
    }
    fields
}

/// True when the request's `Connection` names a field that decides the message's framing
/// or routing (`Content-Length`, `Transfer-Encoding`, `Host`, or a spelling of them with
/// `_`). Removing such a field as hop-by-hop would forward the body without its framing —
/// the origin would read the body as the next request — so the request is refused (400).
pub fn connection_names_framing(head: &RequestHead<'_>) -> bool {
    head.header_values("connection")
        .flat_map(comma_list)
        .any(|named| is_framing_field(named) || named.eq_ignore_ascii_case(b"host"))
}

/// `Content-Length` or `Transfer-Encoding`, in any case, with `_` read as `-`.
fn is_framing_field(name: &[u8]) -> bool {
    let same = |canonical: &[u8]| {
        canonical.len() == name.len()
            && canonical.iter().zip(name).all(|(&want, &got)| {
                want == if got == b'_' {
                    b'-'
                } else {
                    got.to_ascii_lowercase()
                }
            })
    };
    same(b"content-length") || same(b"transfer-encoding")
}

/// True for `Expect: 100-continue`: the proxy answers it itself and streams the body, so
/// the origin is not asked again.
fn is_expect_continue(name: &[u8], value: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"expect")
        && coldwire_http::fields::trim_ows(value).eq_ignore_ascii_case(b"100-continue")
}

/// The last chunk, the trailer fields that may be forwarded, and the final CRLF.
pub fn write_last_chunk_with_trailers(
    out: &mut Vec<u8>,
    decoder: &coldwire_http::ChunkedDecoder,
    with_trailers: bool,
) {
    out.extend_from_slice(b"0\r\n");
    for (name, value) in decoder.trailers() {
        if with_trailers && coldwire_http::allowed_in_trailers(name) {
            out.extend_from_slice(name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// How many `Via` members of a request name this proxy (`1.1 NAME`): a request that has
/// passed through us before is a loop.
pub fn via_hops(head: &RequestHead<'_>, name: &str) -> usize {
    head.header_values("via")
        .flat_map(comma_list)
        .filter(|member| {
            member
                .split(|&byte| byte == b' ')
                .nth(1)
                .is_some_and(|received_by| received_by == name.as_bytes())
        })
        .count()
}

/// Writes the request head sent to the origin: `METHOD path HTTP/1.1`, `Host`, the
/// client's end-to-end fields, the body's framing (one canonical line), `Via`, and — for a revalidation on the cache's behalf — the
/// stored response's validators instead of the client's conditionals.
pub fn write_upstream_request(
    out: &mut Vec<u8>,
    head: &RequestHead<'_>,
    path_and_query: &str,
    host: &str,
    via_name: &str,
    revalidate: Option<&StoredResponse>,
) {
    write_upstream_request_for(
        out,
        head,
        (path_and_query, host),
        via_name,
        revalidate,
        None,
    );
}

/// [`write_upstream_request`], and with `client` (a reverse proxy's client) the client's
/// address appended to `X-Forwarded-For` — one field, after the values the request
/// brought — so that the origin can log who asked, as behind Varnish or nginx's usual
/// `proxy_add_x_forwarded_for`.
pub fn write_upstream_request_for(
    out: &mut Vec<u8>,
    head: &RequestHead<'_>,
    (path_and_query, host): (&str, &str),
    via_name: &str,
    revalidate: Option<&StoredResponse>,
    client: Option<IpAddr>,
) {
    out.extend_from_slice(head.method_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(path_and_query.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\n");
    let named = connection_named(head.header_values("connection"));
    // RFC 9110 §7.6.2: a TRACE or OPTIONS goes on with `Max-Forwards` one less (a 0 never
    // gets here: `max_forwards.rs` answers it).
    let max_forwards = super::max_forwards::max_forwards(head);
    for (name, value) in head.headers() {
        let bytes = name.as_bytes();
        if bytes.eq_ignore_ascii_case(b"host")
            || (max_forwards.is_some() && bytes.eq_ignore_ascii_case(b"max-forwards"))
            || is_hop_by_hop(bytes)
            || named_in(&named, bytes)
            || is_framing_field(bytes)
            || is_expect_continue(bytes, value)
            || (client.is_some() && bytes.eq_ignore_ascii_case(b"x-forwarded-for"))
        {
            continue;
        }
        if revalidate.is_some()
            && (bytes.eq_ignore_ascii_case(b"if-none-match")
                || bytes.eq_ignore_ascii_case(b"if-modified-since")
                || bytes.eq_ignore_ascii_case(b"if-match")
                || bytes.eq_ignore_ascii_case(b"if-unmodified-since")
                || bytes.eq_ignore_ascii_case(b"if-range")
                || bytes.eq_ignore_ascii_case(b"range"))
        {
            continue;
        }
        write_field(out, bytes, value);
    }
    if let Some(hops) = max_forwards {
        let left = hops.saturating_sub(1);
        write_field(
            out,
            b"Max-Forwards",
            itoa::Buffer::new().format(left).as_bytes(),
        );
    }
    match head.body_framing() {
        BodyFraming::None => {}
        BodyFraming::Length(length) => write_field(
            out,
            b"Content-Length",
            itoa::Buffer::new().format(length).as_bytes(),
        ),
        BodyFraming::Chunked => write_field(out, b"Transfer-Encoding", b"chunked"),
    }
    if let Some(stored) = revalidate {
        if let Some(etag) = stored.fields.get("etag") {
            write_field(out, b"If-None-Match", etag);
        }
        if let Some(modified) = stored
            .fields
            .get("last-modified")
            .or_else(|| stored.fields.get("date"))
        {
            write_field(out, b"If-Modified-Since", modified);
        }
    }
    if let Some(client) = client {
        write_forwarded_for(out, head, client);
    }
    write_via(out, via_name);
    out.extend_from_slice(b"\r\n");
}

/// `X-Forwarded-For: <the request's values>, <client>` (IPv4-mapped addresses as IPv4).
fn write_forwarded_for(out: &mut Vec<u8>, head: &RequestHead<'_>, client: IpAddr) {
    use std::io::Write as _;
    out.extend_from_slice(b"X-Forwarded-For: ");
    for value in head.header_values("x-forwarded-for") {
        let value = value.trim_ascii();
        if !value.is_empty() {
            out.extend_from_slice(value);
            out.extend_from_slice(b", ");
        }
    }
    let _ = write!(out, "{}", client.to_canonical());
    out.extend_from_slice(b"\r\n");
}

/// `Via: 1.1 NAME` (RFC 9110 §7.6.3), without formatting.
fn write_via(out: &mut Vec<u8>, name: &str) {
    out.extend_from_slice(b"Via: 1.1 ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn write_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// An origin's response head, owned.
#[derive(Debug)]
pub struct UpstreamResponse {
    /// Status code.
    pub status: u16,
    /// Reason phrase as sent (may be empty).
    pub reason: String,
    /// Every field as sent.
    pub fields: Fields,
    /// How the body is delimited.
    pub framing: ResponseFraming,
    /// Whether the origin connection may be reused afterwards.
    pub keep_alive: bool,
    /// Bytes of the head.
    pub head_len: usize,
}

/// Parses an origin's response head; `Ok(None)` while incomplete. Heads over `max_bytes`
/// and malformed ones are errors (the proxy answers 502).
pub fn parse_upstream_response(
    input: &[u8],
    request_was_head: bool,
    max_bytes: usize,
) -> Result<Option<UpstreamResponse>, HttpError> {
    let mut kept = None;
    let parsed = parse_response_head_with(input, request_was_head, |parts| {
        let name_bytes = parts.fields.iter().map(|field| field.name.len()).sum();
        let value_bytes = parts.fields.iter().map(|field| field.value.len()).sum();
        let mut fields = Fields::with_capacity(parts.fields.len(), name_bytes, value_bytes);
        for field in parts.fields {
            fields.push(field.name, field.value);
        }
        kept = Some((parts.reason.to_owned(), fields));
    })?;
    let (Some(head), Some((reason, fields))) = (parsed, kept) else {
        if input.len() > max_bytes {
            return Err(HttpError::HeadTooLarge);
        }
        return Ok(None);
    };
    // Only `chunked` is decoded; a body under another transfer coding (`gzip, chunked`)
    // would reach the client still coded but without the field saying so (it is
    // hop-by-hop and rewritten here), and would be stored so: refused (502) instead.
    // `chunked` twice is as bad: the client would get the inner chunking as content.
    let (mut chunked, mut other_coding) = (0, false);
    for coding in fields.values("transfer-encoding").flat_map(comma_list) {
        if coding.eq_ignore_ascii_case(b"chunked") {
            chunked += 1;
        } else {
            other_coding = true;
        }
    }
    if (other_coding || chunked > 1) && head.framing != ResponseFraming::Empty {
        return Err(HttpError::NotImplemented(
            "a transfer coding other than chunked from the origin",
        ));
    }
    Ok(Some(UpstreamResponse {
        status: head.status,
        reason,
        fields,
        framing: head.framing,
        keep_alive: head.keep_alive,
        head_len: head.head_len,
    }))
}

/// The end-to-end fields of a response, as the cache stores them (hop-by-hop and framing
/// fields removed).
pub fn end_to_end(fields: &Fields) -> Fields {
    let named = connection_named(fields.values("connection"));
    let (name_bytes, value_bytes) = fields.byte_counts();
    let mut kept = Fields::with_capacity(fields.len(), name_bytes, value_bytes);
    for (name, value) in fields.iter() {
        let bytes = name.as_bytes();
        if is_hop_by_hop(bytes)
            || named_in(&named, bytes)
            || bytes.eq_ignore_ascii_case(b"content-length")
        {
            continue;
        }
        kept.push(name, value);
    }
    kept
}

/// How the body written to the client is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientFraming {
    /// No body follows; a `Content-Length` the origin sent (HEAD, 304) is passed on.
    Empty(Option<u64>),
    /// `Content-Length`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the connection closes.
    UntilClose,
}

/// What goes into a response head written to the client.
pub struct ClientHead<'a> {
    /// Version of the client's request (decides `Connection`).
    pub version: Version,
    /// Status code.
    pub status: u16,
    /// Reason phrase.
    pub reason: &'a str,
    /// End-to-end fields (hop-by-hop ones are skipped anyway).
    pub fields: &'a Fields,
    /// Body framing towards the client.
    pub framing: ClientFraming,
    /// Whether the client connection stays open.
    pub keep_alive: bool,
    /// `Age` to send (replacing the field's), on responses served from the cache.
    pub age: Option<u64>,
    /// This proxy's name (Via, Cache-Status).
    pub name: &'a str,
    /// `Cache-Status` to send, if the cache is on.
    pub cache_status: Option<CacheStatus>,
    /// The current date, used when the origin sent none.
    pub date: &'a [u8; HTTP_DATE_LEN],
    /// Targeted cache-control fields this proxy obeyed, not passed on (RFC 9213).
    pub hidden: &'a Targets,
}

/// Writes a response head for the client.
pub fn write_client_head(out: &mut Vec<u8>, head: &ClientHead<'_>) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(itoa::Buffer::new().format(head.status).as_bytes());
    out.push(b' ');
    let reason = if head.reason.is_empty() {
        coldwire_http::Status::from_u16(head.status).map_or("Unknown", |status| status.reason())
    } else {
        head.reason
    };
    out.extend_from_slice(reason.as_bytes());
    out.extend_from_slice(b"\r\n");
    let named = connection_named(head.fields.values("connection"));
    // RFC 9110 §8.6: no `Content-Length` in a 1xx or 204 response, whatever the origin
    // (or the stored copy) says; a client could otherwise wait for a body that never comes.
    let no_length = (100..200).contains(&head.status) || head.status == 204;
    let mut has_date = false;
    for (name, value) in head.fields.iter() {
        let bytes = name.as_bytes();
        if is_hop_by_hop(bytes) || named_in(&named, bytes) || head.hidden.is_target(name) {
            continue;
        }
        if bytes.eq_ignore_ascii_case(b"content-length")
            && (no_length || !matches!(head.framing, ClientFraming::Empty(_)))
        {
            continue;
        }
        if bytes.eq_ignore_ascii_case(b"age") && head.age.is_some() {
            continue;
        }
        has_date |= bytes.eq_ignore_ascii_case(b"date");
        write_field(out, bytes, value);
    }
    if !has_date {
        write_field(out, b"Date", head.date);
    }
    match head.framing {
        _ if no_length => {}
        ClientFraming::Length(length) => {
            write_field(
                out,
                b"Content-Length",
                itoa::Buffer::new().format(length).as_bytes(),
            );
        }
        ClientFraming::Empty(Some(length)) if head.fields.get("content-length").is_none() => {
            write_field(
                out,
                b"Content-Length",
                itoa::Buffer::new().format(length).as_bytes(),
            );
        }
        ClientFraming::Chunked => write_field(out, b"Transfer-Encoding", b"chunked"),
        ClientFraming::Empty(_) | ClientFraming::UntilClose => {}
    }
    if let Some(age) = head.age {
        write_field(out, b"Age", itoa::Buffer::new().format(age).as_bytes());
    }
    write_via(out, head.name);
    if let Some(status) = head.cache_status {
        out.extend_from_slice(b"Cache-Status: ");
        status.write_value(head.name, out);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(connection_header(head.version, head.keep_alive));
    out.extend_from_slice(b"\r\n");
}

/// The current date as a header value (for tests and callers without a date cache).
pub fn date_now() -> [u8; HTTP_DATE_LEN] {
    format_http_date(std::time::SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldwire_http::{Limits, Parsed, parse_request};

    fn request(text: &str) -> Vec<u8> {
        let bytes = text.as_bytes();
        let Ok(Parsed::Complete { head, .. }) = parse_request(bytes, &Limits::default()) else {
            panic!("bad test request");
        };
        let mut out = Vec::new();
        write_upstream_request(
            &mut out,
            &head,
            "/p?q=1",
            "example.test:8080",
            "coldwire",
            None,
        );
        out
    }

    #[test]
    fn a_reverse_proxy_appends_the_client_to_x_forwarded_for() {
        let upstream = |raw: &str, client: &str| {
            let Ok(Parsed::Complete { head, .. }) =
                parse_request(raw.as_bytes(), &Limits::default())
            else {
                panic!("bad test request");
            };
            let mut out = Vec::new();
            let client: IpAddr = client.parse().unwrap();
            write_upstream_request_for(&mut out, &head, ("/", "o"), "cw", None, Some(client));
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            upstream("GET / HTTP/1.1\r\nHost: o\r\nX-A: 1\r\n\r\n", "192.0.2.7"),
            "GET / HTTP/1.1\r\nHost: o\r\nX-A: 1\r\nX-Forwarded-For: 192.0.2.7\r\nVia: 1.1 cw\r\n\r\n"
        );
        assert_eq!(
            upstream(
                "GET / HTTP/1.1\r\nHost: o\r\nX-Forwarded-For: 1.2.3.4\r\n\
                 x-forwarded-for: 5.6.7.8, ::1\r\n\r\n",
                "::ffff:127.0.0.1"
            ),
            "GET / HTTP/1.1\r\nHost: o\r\n\
             X-Forwarded-For: 1.2.3.4, 5.6.7.8, ::1, 127.0.0.1\r\nVia: 1.1 cw\r\n\r\n"
        );
    }

    #[test]
    fn upstream_request_drops_hop_by_hop_and_adds_via() {
        let out = request(
            "GET http://example.test:8080/p?q=1 HTTP/1.1\r\nHost: example.test:8080\r\n\
             Connection: keep-alive, X-Secret\r\nX-Secret: 1\r\nKeep-Alive: 5\r\n\
             Proxy-Authorization: Basic x\r\nTE: trailers\r\nUpgrade: h2c\r\n\
             Accept: */*\r\n\r\n",
        );
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "GET /p?q=1 HTTP/1.1\r\nHost: example.test:8080\r\nAccept: */*\r\nVia: 1.1 coldwire\r\n\r\n"
        );
    }

    #[test]
    fn rfc9110_section_7_6_2_max_forwards_is_decremented_for_trace_and_options() {
        let text = |raw: &str| String::from_utf8(request(raw)).unwrap();
        assert_eq!(
            text(
                "OPTIONS http://example.test:8080/p HTTP/1.1\r\nHost: x\r\nMax-Forwards: 5\r\nX-A: 1\r\n\r\n"
            ),
            "OPTIONS /p?q=1 HTTP/1.1\r\nHost: example.test:8080\r\nX-A: 1\r\n\
             Max-Forwards: 4\r\nVia: 1.1 coldwire\r\n\r\n"
        );
        assert!(
            text("TRACE http://example.test:8080/p HTTP/1.1\r\nHost: x\r\nMax-Forwards: 1\r\n\r\n")
                .contains("\r\nMax-Forwards: 0\r\n")
        );
        // Other methods (and malformed values) pass it on as received.
        assert!(
            text("GET http://example.test:8080/p HTTP/1.1\r\nHost: x\r\nMax-Forwards: 5\r\n\r\n")
                .contains("\r\nMax-Forwards: 5\r\n")
        );
        assert!(
            text("TRACE http://example.test:8080/p HTTP/1.1\r\nHost: x\r\nMax-Forwards: x\r\n\r\n")
                .contains("\r\nMax-Forwards: x\r\n")
        );
    }

    #[test]
    fn chunked_request_keeps_its_framing() {
        let out = request(
            "POST http://example.test:8080/p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        assert!(
            String::from_utf8(out)
                .unwrap()
                .contains("Transfer-Encoding: chunked\r\n")
        );
    }

    #[test]
    fn rfc9112_section_6_framing_is_written_once_by_the_proxy() {
        let text = |raw: &str| String::from_utf8(request(raw)).unwrap();
        assert_eq!(
            text(
                "POST http://example.test:8080/p HTTP/1.1\r\nHost: x\r\n\
                 Content-Length:  5 \r\nX-A: 1\r\nContent_Length: 99\r\n\
                 Transfer_Encoding: chunked\r\n\r\n"
            ),
            "POST /p?q=1 HTTP/1.1\r\nHost: example.test:8080\r\nX-A: 1\r\n\
             Content-Length: 5\r\nVia: 1.1 coldwire\r\n\r\n"
        );
        assert_eq!(
            text(
                "POST http://example.test:8080/p HTTP/1.1\r\nHost: x\r\n\
                 Transfer-Encoding: CHUNKED \r\nExpect: 100-continue\r\n\r\n"
            ),
            "POST /p?q=1 HTTP/1.1\r\nHost: example.test:8080\r\n\
             Transfer-Encoding: chunked\r\nVia: 1.1 coldwire\r\n\r\n"
        );
        assert_eq!(
            text("POST http://example.test:8080/p HTTP/1.0\r\nContent-Length: 0\r\n\r\n"),
            "POST /p?q=1 HTTP/1.1\r\nHost: example.test:8080\r\n\
             Content-Length: 0\r\nVia: 1.1 coldwire\r\n\r\n"
        );
    }

    #[test]
    fn rfc9110_section_7_6_1_connection_may_not_name_framing_or_routing_fields() {
        let names = |raw: &str| {
            let Ok(Parsed::Complete { head, .. }) =
                parse_request(raw.as_bytes(), &Limits::default())
            else {
                panic!("bad test request");
            };
            connection_names_framing(&head)
        };
        for connection in [
            "Content-Length",
            "close, content-length",
            "Transfer-Encoding",
            "keep-alive,Transfer_Encoding",
            "Host",
            "CONTENT_LENGTH",
        ] {
            assert!(
                names(&format!(
                    "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nConnection: {connection}\r\n\r\n"
                )),
                "{connection}"
            );
        }
        assert!(!names(
            "GET / HTTP/1.1\r\nHost: x\r\nConnection: close, X-Length\r\n\r\n"
        ));
    }

    #[test]
    fn response_parsing_and_client_head() {
        let raw = b"HTTP/1.1 200 Fine\r\nConnection: close, X-Hop\r\nX-Hop: a\r\n\
                    Content-Length: 3\r\nAge: 4\r\nETag: \"v\"\r\n\r\nabc";
        let response = parse_upstream_response(raw, false, 1024).unwrap().unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.framing, ResponseFraming::Length(3));
        assert!(!response.keep_alive);
        let stored = end_to_end(&response.fields);
        assert!(stored.get("x-hop").is_none() && stored.get("content-length").is_none());
        let mut out = Vec::new();
        let date = *b"Sun, 22 Nov 2026 10:00:00 GMT";
        write_client_head(
            &mut out,
            &ClientHead {
                version: Version::Http11,
                status: response.status,
                reason: &response.reason,
                fields: &response.fields,
                framing: ClientFraming::Length(3),
                keep_alive: true,
                age: Some(9),
                name: "coldwire",
                cache_status: Some(CacheStatus::hit(1)),
                date: &date,
                hidden: &Targets::default(),
            },
        );
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "HTTP/1.1 200 Fine\r\nETag: \"v\"\r\nDate: Sun, 22 Nov 2026 10:00:00 GMT\r\n\
             Content-Length: 3\r\nAge: 9\r\nVia: 1.1 coldwire\r\n\
             Cache-Status: coldwire; hit; ttl=1\r\n\r\n"
        );
    }

    #[test]
    fn rfc9110_section_8_6_no_content_length_in_204_or_1xx() {
        let fields = {
            let mut fields = Fields::with_capacity(2, 32, 16);
            fields.push("Content-Length", b"2");
            fields.push("X-A", b"1");
            fields
        };
        let date = *b"Sun, 22 Nov 2026 10:00:00 GMT";
        for (status, framing) in [
            (204, ClientFraming::Empty(Some(2))),
            (204, ClientFraming::Length(0)),
            (103, ClientFraming::Empty(None)),
        ] {
            let mut out = Vec::new();
            write_client_head(
                &mut out,
                &ClientHead {
                    version: Version::Http11,
                    status,
                    reason: "",
                    fields: &fields,
                    framing,
                    keep_alive: true,
                    age: None,
                    name: "coldwire",
                    cache_status: None,
                    date: &date,
                    hidden: &Targets::default(),
                },
            );
            let text = String::from_utf8(out).unwrap();
            assert!(!text.contains("Content-Length"), "{status}: {text}");
            assert!(text.contains("X-A: 1\r\n"), "{text}");
        }
    }

    #[test]
    fn rfc9112_section_6_1_only_chunked_is_taken_from_an_origin() {
        for coding in [
            "gzip, chunked",
            "gzip",
            "chunked, identity",
            "chunked, chunked",
        ] {
            let raw = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: {coding}\r\n\r\n");
            assert!(
                parse_upstream_response(raw.as_bytes(), false, 1024).is_err(),
                "{coding}"
            );
        }
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n";
        assert!(parse_upstream_response(chunked, false, 1024).is_ok());
        // No body at all (HEAD, 204, 304): the field describes nothing that is sent.
        let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
        assert!(parse_upstream_response(head, true, 1024).is_ok());
    }

    #[test]
    fn oversized_and_garbage_heads_are_errors() {
        assert!(parse_upstream_response(b"HTTP/1.1 200 OK\r\nX: y", false, 10).is_err());
        assert!(parse_upstream_response(b"garbage\r\n\r\n", false, 1000).is_err());
        assert!(
            parse_upstream_response(b"HTTP/1.1 200 OK\r\n", false, 1000)
                .unwrap()
                .is_none()
        );
    }
}
