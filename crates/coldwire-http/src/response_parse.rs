//! Response-head parsing for clients (the load generator, later the proxy's upstream side):
//! [`parse_response_head`] on httparse, and the body framing of RFC 9112 §6.3 as a client
//! sees it ([`ResponseFraming`]).
//!
//! Invariants: never panics on input; borrows nothing past the call (the result is plain
//! data); a head that is not complete yet is `Ok(None)`, so callers feed it again with more
//! bytes; framing is strict where ambiguity would desynchronise a keep-alive connection
//! (conflicting `Content-Length` values, `Content-Length` beside `Transfer-Encoding`, a
//! transfer coding that does not end in `chunked`).

use crate::error::HttpError;
use crate::fields::{comma_list, has_token, trim_ows};
use crate::framing::parse_content_length;

/// Most header fields accepted in a response head.
pub const MAX_RESPONSE_HEADERS: usize = 100;

/// How the body of a response is delimited, from the client's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseFraming {
    /// No body at all: 1xx, 204, 304, or the answer to a `HEAD` request.
    Empty,
    /// Exactly this many bytes follow the head.
    Length(u64),
    /// Chunked transfer coding (decode with [`crate::ChunkedDecoder`]).
    Chunked,
    /// The body runs until the server closes the connection.
    UntilClose,
}

/// What a client needs from a response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status code.
    pub status: u16,
    /// The minor HTTP version (`1` for HTTP/1.1, `0` for HTTP/1.0).
    pub minor_version: u8,
    /// Bytes of the head, CRLFCRLF included; the body starts there.
    pub head_len: usize,
    /// How the body is delimited.
    pub framing: ResponseFraming,
    /// Whether the connection may carry another request afterwards (HTTP/1.1 without
    /// `Connection: close`, or HTTP/1.0 with `Connection: keep-alive`, and a body that is not
    /// close-delimited).
    pub keep_alive: bool,
}

/// Parses a response head at the start of `input`.
///
/// Returns `Ok(None)` while the head is incomplete, `Ok(Some(head))` once it is, and an
/// error for a malformed head or ambiguous framing. `request_was_head` says whether the
/// request was `HEAD` (its response has no body whatever the fields say).
pub fn parse_response_head(
    input: &[u8],
    request_was_head: bool,
) -> Result<Option<ResponseHead>, HttpError> {
    parse_response_head_with(input, request_was_head, |_| {})
}

/// The parts of a complete response head that [`ResponseHead`] does not keep, lent to the
/// visitor of [`parse_response_head_with`].
#[derive(Debug)]
pub struct ResponseParts<'h, 'b> {
    /// The reason phrase as sent (may be empty).
    pub reason: &'b str,
    /// Every field as sent, in order.
    pub fields: &'h [httparse::Header<'b>],
}

/// [`parse_response_head`] that also lends the reason phrase and the fields to `visit` (in
/// the same pass, before the framing is checked), for a caller that keeps them — a proxy.
pub fn parse_response_head_with(
    input: &[u8],
    request_was_head: bool,
    visit: impl FnOnce(ResponseParts<'_, '_>),
) -> Result<Option<ResponseHead>, HttpError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
    let mut response = httparse::Response::new(&mut fields);
    let head_len = match response.parse(input) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(HttpError::TooManyHeaders),
        Err(_) => return Err(HttpError::BadRequest("malformed response head")),
    };
    visit(ResponseParts {
        reason: response.reason.unwrap_or(""),
        fields: &*response.headers,
    });
    let status = response.code.unwrap_or(0);
    // RFC 9110 §15: a status code is three digits from 100 to 599; `099` parses as 99 and
    // would be passed on as a two-digit status line.
    if !(100..=599).contains(&status) {
        return Err(HttpError::BadRequest("status code outside 100-599"));
    }
    let minor_version = response.version.unwrap_or(1);
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut transfer_encoding = false;
    let mut close = false;
    let mut keep_alive_token = false;
    for field in response.headers.iter() {
        let name = field.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            let length = parse_content_length(field.value)?;
            if content_length.is_some_and(|previous| previous != length) {
                return Err(HttpError::BadRequest("conflicting Content-Length values"));
            }
            content_length = Some(length);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            transfer_encoding = true;
            // Only the last coding decides whether the body is chunked.
            chunked = comma_list(field.value)
                .last()
                .is_some_and(|coding| trim_ows(coding).eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case(b"connection") {
            close |= has_token(field.value, b"close");
            keep_alive_token |= has_token(field.value, b"keep-alive");
        }
    }
    let bodiless =
        request_was_head || (100..200).contains(&status) || status == 204 || status == 304;
    let framing = if bodiless {
        ResponseFraming::Empty
    } else if transfer_encoding {
        if content_length.is_some() {
            return Err(HttpError::BadRequest(
                "both Content-Length and Transfer-Encoding",
            ));
        }
        if chunked {
            ResponseFraming::Chunked
        } else {
            ResponseFraming::UntilClose
        }
    } else if let Some(length) = content_length {
        ResponseFraming::Length(length)
    } else {
        ResponseFraming::UntilClose
    };
    let persistent = if minor_version >= 1 {
        !close
    } else {
        // RFC 9112 §6.1: `Transfer-Encoding` in an HTTP/1.0 message means its framing may
        // be faulty; the connection is closed after it, whatever `Connection` says.
        keep_alive_token && !close && !transfer_encoding
    };
    Ok(Some(ResponseHead {
        status,
        minor_version,
        head_len,
        framing,
        keep_alive: persistent && framing != ResponseFraming::UntilClose,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_visitor_gets_reason_and_fields_in_order() {
        let input = b"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\nX-A: 1\r\nx-a: 2\r\n\r\nabc";
        let mut seen = (String::new(), Vec::new());
        let head = parse_response_head_with(input, false, |parts| {
            seen.0 = parts.reason.to_owned();
            seen.1 = parts
                .fields
                .iter()
                .map(|field| (field.name.to_owned(), field.value.to_vec()))
                .collect();
        })
        .unwrap()
        .unwrap();
        assert_eq!(head.status, 404);
        assert_eq!(head.framing, ResponseFraming::Length(3));
        assert_eq!(seen.0, "Not Found");
        assert_eq!(
            seen.1,
            vec![
                ("Content-Length".to_owned(), b"3".to_vec()),
                ("X-A".to_owned(), b"1".to_vec()),
                ("x-a".to_owned(), b"2".to_vec()),
            ]
        );
        let mut called = false;
        let partial = parse_response_head_with(b"HTTP/1.1 200 OK\r\nX: 1\r\n", false, |_| {
            called = true;
        });
        assert!(
            matches!(partial, Ok(None)) && !called,
            "no visit before the head is complete"
        );
    }

    fn parse(input: &str) -> ResponseHead {
        parse_response_head(input.as_bytes(), false)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn content_length_response_keeps_alive() {
        let head = parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
        assert_eq!(head.status, 200);
        assert_eq!(head.framing, ResponseFraming::Length(5));
        assert_eq!(head.head_len, 38);
        assert!(head.keep_alive);
    }

    #[test]
    fn rfc9110_section_15_status_codes_are_100_to_599() {
        for status in ["099", "000", "600", "999"] {
            let input = format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n");
            assert!(
                parse_response_head(input.as_bytes(), false).is_err(),
                "{status}"
            );
        }
        assert_eq!(parse("HTTP/1.1 100 Continue\r\n\r\n").status, 100);
        assert_eq!(
            parse("HTTP/1.1 599 X\r\nContent-Length: 0\r\n\r\n").status,
            599
        );
    }

    #[test]
    fn rfc9112_section_6_1_transfer_encoding_in_http10_is_never_persistent() {
        let head = parse(
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        assert_eq!(head.framing, ResponseFraming::Chunked);
        assert!(!head.keep_alive);
        let head = parse("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n");
        assert!(head.keep_alive);
    }

    #[test]
    fn partial_head_asks_for_more() {
        assert_eq!(
            parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Le", false),
            Ok(None)
        );
    }

    #[test]
    fn chunked_close_delimited_and_bodiless() {
        assert_eq!(
            parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n").framing,
            ResponseFraming::Chunked
        );
        let until_close = parse("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!(until_close.framing, ResponseFraming::UntilClose);
        assert!(!until_close.keep_alive);
        assert_eq!(
            parse("HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n").framing,
            ResponseFraming::Empty
        );
        let head = parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true)
            .unwrap()
            .unwrap();
        assert_eq!(head.framing, ResponseFraming::Empty);
    }

    #[test]
    fn connection_tokens_and_versions() {
        assert!(
            !parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").keep_alive
        );
        assert!(!parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").keep_alive);
        assert!(
            parse("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n")
                .keep_alive
        );
    }

    #[test]
    fn ambiguous_framing_and_garbage_are_errors() {
        for input in [
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "SSH-2.0-OpenSSH\r\n\r\n",
        ] {
            assert!(
                parse_response_head(input.as_bytes(), false).is_err(),
                "{input}"
            );
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..2000 {
            let mut bytes = b"HTTP/1.1 200 OK\r\n".to_vec();
            for _ in 0..(seed % 64) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                bytes.push(b"\r\n:aZ0 ,;-\t\x80"[(seed % 12) as usize]);
            }
            let _ = parse_response_head(&bytes, false);
        }
    }
}
