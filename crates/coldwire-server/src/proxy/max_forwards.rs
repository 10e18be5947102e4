//! `Max-Forwards` on `TRACE` and `OPTIONS` (RFC 9110 §7.6.2): a request whose value is `0`
//! is answered here, as its final recipient, and never forwarded; a larger value is sent
//! on decremented by one (`head.rs`). Other methods pass the field on untouched (the RFC
//! lets a proxy ignore it for them).
//!
//! The answers: `OPTIONS` gets `200` with an empty body; `TRACE` gets `200` with the
//! request as received echoed as `message/http`, without the fields likely to carry
//! secrets (`Cookie`, `Authorization`, `Proxy-Authorization`; RFC 9110 §9.3.8), so a
//! `TRACE` cannot be used to read credentials a script may not (cross-site tracing).

use coldwire_http::{BodyFraming, Method, RequestHead, connection_header};
use coldwire_io::Driver;

use super::state::{Client, Routed};
use super::worker::Worker;
use crate::output::Output;

/// The `Max-Forwards` value of a `TRACE` or `OPTIONS` request: its first field's, when that
/// is a valid non-negative integer (values past `u32::MAX` count as `u32::MAX`); `None`
/// for other methods, without the field, or with a malformed value (then it passes on as
/// received).
pub fn max_forwards(head: &RequestHead<'_>) -> Option<u32> {
    if !matches!(head.method(), Method::Trace | Method::Options) {
        return None;
    }
    let value = head.header("max-forwards")?;
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(value.iter().fold(0u32, |total, &digit| {
        total
            .saturating_mul(10)
            .saturating_add(u32::from(digit - b'0'))
    }))
}

/// Fields a `TRACE` echo leaves out: they may hold credentials.
fn is_sensitive(name: &str) -> bool {
    ["cookie", "authorization", "proxy-authorization"]
        .iter()
        .any(|sensitive| name.eq_ignore_ascii_case(sensitive))
}

/// The body of a `TRACE` answer: the request line and fields as received (bare LF line
/// ends normalised to CRLF), sensitive fields left out.
pub fn trace_echo(head: &RequestHead<'_>) -> Vec<u8> {
    let mut echo = Vec::with_capacity(head.raw().len());
    echo.extend_from_slice(head.method_str().as_bytes());
    echo.push(b' ');
    echo.extend_from_slice(head.target().as_bytes());
    echo.push(b' ');
    echo.extend_from_slice(head.version().as_str().as_bytes());
    for (name, value) in head.headers() {
        if is_sensitive(name) {
            continue;
        }
        echo.extend_from_slice(b"\r\n");
        echo.extend_from_slice(name.as_bytes());
        echo.extend_from_slice(b": ");
        echo.extend_from_slice(value);
    }
    echo.extend_from_slice(b"\r\n\r\n");
    echo
}

impl<D: Driver> Worker<D> {
    /// Answers a `TRACE` or `OPTIONS` with `Max-Forwards: 0` as its final recipient (see
    /// the module doc). A request with a body closes the connection afterwards (the body
    /// is not read).
    pub(super) fn answer_as_final_recipient(
        &mut self,
        client: &mut Client,
        head: &RequestHead<'_>,
        output: &mut Output,
    ) -> Routed {
        let no_body = matches!(
            head.body_framing(),
            BodyFraming::None | BodyFraming::Length(0)
        );
        let keep_alive = head.keep_alive() && no_body && self.drain_deadline.is_none();
        let trace = head.method() == Method::Trace;
        let body = if trace { trace_echo(head) } else { Vec::new() };
        let date = *self.date.bytes();
        let out = output.bytes(&mut self.driver);
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\nDate: ");
        out.extend_from_slice(&date);
        out.extend_from_slice(b"\r\n");
        if trace {
            out.extend_from_slice(b"Content-Type: message/http\r\n");
        }
        out.extend_from_slice(b"Content-Length: ");
        out.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(connection_header(head.version(), keep_alive));
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&body);
        let length = body.len() as u64;
        self.http
            .count_timed_response(200, client.session.request_elapsed(self.driver.now()));
        self.http.body_bytes += length;
        self.log_answer(client, 200, length, None);
        Routed::answered(keep_alive)
    }
}

#[cfg(test)]
mod tests {
    use coldwire_http::{Limits, Parsed, parse_request};

    use super::*;

    fn with_head<T>(raw: &str, check: impl FnOnce(&RequestHead<'_>) -> T) -> T {
        let Ok(Parsed::Complete { head, .. }) = parse_request(raw.as_bytes(), &Limits::default())
        else {
            panic!("bad test request: {raw}");
        };
        check(&head)
    }

    #[test]
    fn rfc9110_section_7_6_2_only_trace_and_options_count() {
        let value = |raw: &str| with_head(raw, max_forwards);
        assert_eq!(
            value("TRACE / HTTP/1.1\r\nHost: x\r\nMax-Forwards: 0\r\n\r\n"),
            Some(0)
        );
        assert_eq!(
            value("OPTIONS * HTTP/1.1\r\nHost: x\r\nMax-Forwards: 7\r\nMax-Forwards: 0\r\n\r\n"),
            Some(7)
        );
        assert_eq!(
            value("OPTIONS * HTTP/1.1\r\nHost: x\r\nMax-Forwards: 99999999999\r\n\r\n"),
            Some(u32::MAX)
        );
        assert_eq!(
            value("GET / HTTP/1.1\r\nHost: x\r\nMax-Forwards: 0\r\n\r\n"),
            None
        );
        assert_eq!(
            value("TRACE / HTTP/1.1\r\nHost: x\r\nMax-Forwards: -1\r\n\r\n"),
            None
        );
        assert_eq!(value("TRACE / HTTP/1.1\r\nHost: x\r\n\r\n"), None);
    }

    #[test]
    fn rfc9110_section_9_3_8_trace_echo_leaves_credentials_out() {
        let echo = with_head(
            "TRACE /t?q HTTP/1.1\r\nHost: x\r\nCookie: s=1\r\nX-A: 1\r\n\
             authorization: Basic eDp5\r\nProxy-Authorization: Basic eDp5\r\n\r\n",
            trace_echo,
        );
        assert_eq!(
            String::from_utf8(echo).unwrap(),
            "TRACE /t?q HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\r\n"
        );
    }
}
