//! Request head parsing ([`parse_request`]) into a borrowed, allocation-free [`RequestHead`].
//!
//! Invariants:
//! - Parsing never allocates and never panics, whatever the bytes. httparse does the syntax
//!   work into an uninitialised on-stack array; the head keeps only a compact index (the
//!   offset of each field line, [`MAX_HEADERS_CAP`] entries of 4 bytes) into the caller's
//!   buffer, so a `RequestHead` is small enough to move around cheaply.
//! - Only the first [`Limits::max_head_bytes`] bytes are ever examined, so the work per call is
//!   bounded however much has been buffered.
//! - A successfully parsed head has already passed every check a server must make before
//!   reading a body: known version, `Host` rules (RFC 9112 §3.2), and body framing (see
//!   [`crate::framing`]). Getters are therefore cheap and infallible.

use std::mem::MaybeUninit;

use crate::error::HttpError;
use crate::fields::{comma_list, has_token, trim_ows};
use crate::framing::{BodyFraming, FramingScan};
use crate::limits::{Limits, MAX_HEADERS_CAP};
use crate::method::Method;
use crate::version::Version;

/// Result of [`parse_request`] on a buffer that holds no invalid bytes so far.
#[derive(Debug, Clone)]
#[expect(
    clippy::large_enum_variant,
    reason = "boxing the head would allocate per request; Parsed is a short-lived stack value"
)]
pub enum Parsed<'b> {
    /// A whole head was found. The body (if any) and further pipelined requests start at
    /// `buf[head_len..]`.
    Complete {
        /// The parsed head, borrowing from the buffer.
        head: RequestHead<'b>,
        /// Bytes occupied by the head, including its terminating blank line.
        head_len: usize,
    },
    /// The buffer holds a valid prefix of a head; read more bytes and call again with the
    /// whole buffer.
    Partial,
}

/// Bit flags for header fields that later stages look up, recorded while parsing so that
/// absent fields cost nothing.
pub(crate) mod field_flags {
    /// `If-Match`.
    pub(crate) const IF_MATCH: u8 = 1;
    /// `If-None-Match`.
    pub(crate) const IF_NONE_MATCH: u8 = 1 << 1;
    /// `If-Modified-Since`.
    pub(crate) const IF_MODIFIED_SINCE: u8 = 1 << 2;
    /// `If-Unmodified-Since`.
    pub(crate) const IF_UNMODIFIED_SINCE: u8 = 1 << 3;
    /// `If-Range`.
    pub(crate) const IF_RANGE: u8 = 1 << 4;
    /// `Range`.
    pub(crate) const RANGE: u8 = 1 << 5;
    /// Any of the four precondition fields.
    pub(crate) const PRECONDITIONS: u8 =
        IF_MATCH | IF_NONE_MATCH | IF_MODIFIED_SINCE | IF_UNMODIFIED_SINCE;
}

/// A parsed request head: request line and header fields, borrowing from the input buffer.
///
/// It owns no heap memory. Header fields are indexed by the offset of each field line in the
/// buffer (4 bytes per field, inline); names and values are re-derived from the validated
/// bytes on lookup, which for a lookup by name is a length check, one `:` check and one
/// case-insensitive compare per field.
#[derive(Debug, Clone)]
pub struct RequestHead<'b> {
    buf: &'b [u8],
    method: Method,
    method_str: &'b str,
    target: &'b str,
    version: Version,
    header_count: usize,
    line_starts: [u32; MAX_HEADERS_CAP],
    host: Option<&'b [u8]>,
    framing: BodyFraming,
    keep_alive: bool,
    expects_continue: bool,
    present_fields: u8,
}

/// Parses the request head at the start of `buf`.
///
/// Returns [`Parsed::Partial`] while more bytes are needed. Errors, each with its status via
/// [`HttpError::status`]:
/// - request line longer than [`Limits::max_request_line_bytes`] → [`HttpError::UriTooLong`] (414);
/// - no complete head within [`Limits::max_head_bytes`] → [`HttpError::HeadTooLarge`] (431);
/// - more than [`Limits::max_headers`] fields → [`HttpError::TooManyHeaders`] (431);
/// - syntax errors, bad `Host` or bad framing → [`HttpError::BadRequest`] (400);
/// - a transfer coding other than `chunked` → [`HttpError::NotImplemented`] (501);
/// - an `Expect` member other than `100-continue` → [`HttpError::ExpectationFailed`] (417,
///   checked after framing, so a smuggling attempt is still a 400).
///
/// Leading empty lines before the request line are skipped (RFC 9112 §2.2) and count towards
/// `head_len`. Bare LF line endings are accepted in the head, as httparse does.
///
/// Each call re-parses from the start of `buf` (parsing is stateless), so a caller that
/// receives a head in many small reads should call again only when the newly read bytes
/// contain a `\n`; otherwise the head cannot have completed.
pub fn parse_request<'b>(buf: &'b [u8], limits: &Limits) -> Result<Parsed<'b>, HttpError> {
    let max_head_bytes = limits.effective_max_head_bytes();
    let window = buf.get(..buf.len().min(max_head_bytes)).unwrap_or(buf);
    let mut raw_headers: [MaybeUninit<httparse::Header<'b>>; MAX_HEADERS_CAP] =
        [const { MaybeUninit::uninit() }; MAX_HEADERS_CAP];
    let header_slots = raw_headers
        .get_mut(..limits.effective_max_headers())
        .unwrap_or(&mut []);
    let mut request = httparse::Request::new(&mut []);
    let parse_result = httparse::ParserConfig::default().parse_request_with_uninit_headers(
        &mut request,
        window,
        header_slots,
    );
    let head_len = match parse_result {
        Ok(httparse::Status::Complete(head_len)) => head_len,
        Ok(httparse::Status::Partial) => {
            if request_line_too_long(window, limits.max_request_line_bytes) {
                return Err(HttpError::UriTooLong);
            }
            if buf.len() >= max_head_bytes {
                return Err(HttpError::HeadTooLarge);
            }
            return Ok(Parsed::Partial);
        }
        Err(error) => {
            if request_line_too_long(window, limits.max_request_line_bytes) {
                return Err(HttpError::UriTooLong);
            }
            if error == httparse::Error::Version && names_other_http_version(window) {
                return Err(HttpError::VersionNotSupported);
            }
            return Err(map_httparse_error(error));
        }
    };

    let (Some(method_str), Some(target), Some(minor_version)) =
        (request.method, request.path, request.version)
    else {
        return Err(HttpError::BadRequest("incomplete request line"));
    };
    let base = window.as_ptr() as usize;
    let target_end = (target.as_ptr() as usize)
        .wrapping_sub(base)
        .saturating_add(target.len());
    // " HTTP/1.x" follows the target on the request line.
    if target_end.saturating_add(9) > limits.max_request_line_bytes {
        return Err(HttpError::UriTooLong);
    }
    let version = match minor_version {
        0 => Version::Http10,
        1 => Version::Http11,
        _ => return Err(HttpError::BadRequest("unsupported HTTP version")),
    };

    let head_bytes = window.get(..head_len).unwrap_or(window);
    let mut head = RequestHead {
        buf: head_bytes,
        method: Method::from_bytes(method_str.as_bytes()),
        method_str,
        target,
        version,
        header_count: 0,
        line_starts: [0; MAX_HEADERS_CAP],
        host: None,
        framing: BodyFraming::None,
        keep_alive: version == Version::Http11,
        expects_continue: false,
        present_fields: 0,
    };

    let mut framing = FramingScan::default();
    let mut host_count = 0u32;
    let mut connection_close = false;
    let mut connection_keep_alive = false;
    let mut unknown_expectation = false;
    for (slot, header) in head.line_starts.iter_mut().zip(request.headers.iter()) {
        // The window is at most MAX_HEAD_BYTES_CAP long, so offsets fit in u32.
        *slot = (header.name.as_ptr() as usize).wrapping_sub(base) as u32;
        head.header_count += 1;
        let name = header.name.as_bytes();
        let value = header.value;
        match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => {
                host_count += 1;
                head.host = Some(value);
                if !is_valid_host(value) {
                    return Err(HttpError::BadRequest("invalid Host"));
                }
            }
            5 if name.eq_ignore_ascii_case(b"range") => head.present_fields |= field_flags::RANGE,
            6 if name.eq_ignore_ascii_case(b"expect") => {
                for expectation in comma_list(value) {
                    if expectation.eq_ignore_ascii_case(b"100-continue") {
                        head.expects_continue = version == Version::Http11;
                    } else {
                        unknown_expectation = true;
                    }
                }
            }
            8 if name.eq_ignore_ascii_case(b"if-match") => {
                head.present_fields |= field_flags::IF_MATCH;
            }
            8 if name.eq_ignore_ascii_case(b"if-range") => {
                head.present_fields |= field_flags::IF_RANGE;
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                // Fast paths for the two values browsers and benchmarks actually send.
                if value.eq_ignore_ascii_case(b"keep-alive") {
                    connection_keep_alive = true;
                } else if value.eq_ignore_ascii_case(b"close") {
                    connection_close = true;
                } else {
                    connection_close |= has_token(value, b"close");
                    connection_keep_alive |= has_token(value, b"keep-alive");
                }
            }
            13 if name.eq_ignore_ascii_case(b"if-none-match") => {
                head.present_fields |= field_flags::IF_NONE_MATCH;
            }
            14 if name.eq_ignore_ascii_case(b"content-length") => framing.content_length(value),
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                framing.transfer_encoding(value);
            }
            17 if name.eq_ignore_ascii_case(b"if-modified-since") => {
                head.present_fields |= field_flags::IF_MODIFIED_SINCE;
            }
            19 if name.eq_ignore_ascii_case(b"if-unmodified-since") => {
                head.present_fields |= field_flags::IF_UNMODIFIED_SINCE;
            }
            _ => {}
        }
    }

    if host_count > 1 {
        return Err(HttpError::BadRequest("multiple Host fields"));
    }
    if host_count == 0 && version == Version::Http11 {
        return Err(HttpError::BadRequest("missing Host"));
    }
    head.framing = framing.finish_request(version)?;
    if unknown_expectation {
        return Err(HttpError::ExpectationFailed);
    }
    head.keep_alive = match version {
        Version::Http11 => !connection_close,
        Version::Http10 => connection_keep_alive && !connection_close,
    };
    Ok(Parsed::Complete { head, head_len })
}

/// True when `window` shows a request line longer than `max_line` bytes (before its line
/// ending), looking only at the first `max_line + 2` bytes.
fn request_line_too_long(window: &[u8], max_line: usize) -> bool {
    let Some(examined) = window.get(..max_line.saturating_add(2)) else {
        return false;
    };
    match examined.iter().position(|&byte| byte == b'\n') {
        None => true,
        Some(newline) => {
            let line_len = if newline > 0 && examined.get(newline - 1) == Some(&b'\r') {
                newline - 1
            } else {
                newline
            };
            line_len > max_line
        }
    }
}

/// True when the request line ends in a well-formed `HTTP/D.D` other than 1.0 and 1.1
/// (which httparse refuses as a syntax error): the answer is 505, not 400.
fn names_other_http_version(window: &[u8]) -> bool {
    let line_end = window
        .iter()
        .position(|&byte| byte == b'\n')
        .unwrap_or(window.len());
    let line = window.get(..line_end).unwrap_or(&[]);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let version = line.rsplit(|&byte| byte == b' ').next().unwrap_or(&[]);
    matches!(version, [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
        if major.is_ascii_digit() && minor.is_ascii_digit())
}

fn map_httparse_error(error: httparse::Error) -> HttpError {
    match error {
        httparse::Error::TooManyHeaders => HttpError::TooManyHeaders,
        httparse::Error::HeaderName => HttpError::BadRequest("invalid header name"),
        httparse::Error::HeaderValue => HttpError::BadRequest("invalid header value"),
        httparse::Error::NewLine => HttpError::BadRequest("invalid line ending"),
        httparse::Error::Token => HttpError::BadRequest("invalid request line"),
        httparse::Error::Version => HttpError::BadRequest("invalid HTTP version"),
        httparse::Error::Status => HttpError::BadRequest("invalid status"),
    }
}

/// `Host` = uri-host [ ":" port ] (RFC 9112 §3.2, RFC 3986 §3.2.2): an IP-literal in
/// brackets, or a reg-name / IPv4 address of unreserved, sub-delims and well-formed `%HH`
/// characters; then optionally `:` and digits. Anything else — a second `:`, an unclosed
/// bracket, `%zz`, `/`, `\`, spaces, controls — is invalid (400), so a host can never
/// smuggle a path or a second port into virtual-host lookups, upstream `Host` or logs. An
/// empty value is allowed (RFC 9112 §3.2).
pub(crate) fn is_valid_host(value: &[u8]) -> bool {
    let (host, port) = if let Some(inside) = value.strip_prefix(b"[") {
        let Some(close) = inside.iter().position(|&byte| byte == b']') else {
            return false;
        };
        let (literal, after) = inside.split_at(close);
        let literal_is_valid = !literal.is_empty()
            && literal
                .iter()
                .all(|&byte| byte.is_ascii_hexdigit() || matches!(byte, b':' | b'.' | b'v' | b'V'));
        if !literal_is_valid {
            return false;
        }
        (&[][..], after.get(1..).unwrap_or(&[]))
    } else {
        match value.iter().position(|&byte| byte == b':') {
            Some(colon) => (&value[..colon], &value[colon..]),
            None => (value, &[][..]),
        }
    };
    let port_is_valid = match port.split_first() {
        None => true,
        Some((b':', digits)) => digits.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    };
    port_is_valid && is_reg_name(host)
}

/// RFC 3986 reg-name: unreserved, sub-delims and `%HH` (also covers IPv4 addresses).
fn is_reg_name(host: &[u8]) -> bool {
    crate::target::is_uri_text(host, |_| false)
}

impl<'b> RequestHead<'b> {
    /// The method, classified. See [`RequestHead::method_str`] for the exact token.
    pub fn method(&self) -> Method {
        self.method
    }

    /// The method token exactly as received, e.g. `"GET"` or `"PROPFIND"`.
    pub fn method_str(&self) -> &'b str {
        self.method_str
    }

    /// The raw request-target, e.g. `"/index.html?x=1"` (not decoded; see
    /// [`parse_target`](crate::parse_target)).
    pub fn target(&self) -> &'b str {
        self.target
    }

    /// The protocol version of the request.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The raw head bytes, from the start of the buffer up to and including the blank line.
    pub fn raw(&self) -> &'b [u8] {
        self.buf
    }

    /// Number of header fields.
    pub fn header_count(&self) -> usize {
        self.header_count
    }

    /// All header fields in received order, as (name, value). Values have surrounding
    /// whitespace removed; repeated fields appear repeatedly.
    pub fn headers(&self) -> Headers<'_, 'b> {
        Headers {
            buf: self.buf,
            line_starts: self
                .line_starts
                .get(..self.header_count)
                .unwrap_or(&[])
                .iter(),
        }
    }

    /// Value of the first field named `name` (ASCII case-insensitive), if any.
    pub fn header(&self, name: &str) -> Option<&'b [u8]> {
        self.header_values(name).next()
    }

    /// Values of every field named `name` (ASCII case-insensitive), in received order. Use
    /// this for list-valued fields that may be split over several lines (RFC 9110 §5.3).
    pub fn header_values<'h>(&'h self, name: &'h str) -> impl Iterator<Item = &'b [u8]> + 'h {
        let buf = self.buf;
        let name = name.as_bytes();
        self.line_starts
            .get(..self.header_count)
            .unwrap_or(&[])
            .iter()
            .filter_map(move |&start| {
                let line = buf.get(start as usize..)?;
                if line.get(name.len()) != Some(&b':')
                    || !line.get(..name.len())?.eq_ignore_ascii_case(name)
                {
                    return None;
                }
                Some(value_after_colon(line, name.len()))
            })
    }

    /// The `Host` field value (validated, possibly empty); `None` only for HTTP/1.0 requests
    /// without one.
    pub fn host(&self) -> Option<&'b [u8]> {
        self.host
    }

    /// True if any field flagged in `flags` (see `field_flags`) is present.
    pub(crate) fn has_any_field(&self, flags: u8) -> bool {
        self.present_fields & flags != 0
    }

    /// Whether the connection may stay open after the response: HTTP/1.1 unless a
    /// `Connection: close` token; HTTP/1.0 only with a `Connection: keep-alive` token (and no
    /// `close`). Tokens are matched case-insensitively across all `Connection` fields.
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }

    /// How the body is framed; validated during parsing, so this is a plain getter.
    pub fn body_framing(&self) -> BodyFraming {
        self.framing
    }

    /// True for an HTTP/1.1 request with `Expect: 100-continue` (RFC 9110 §10.1.1: ignored
    /// for HTTP/1.0). The server should send `100 Continue` before reading the body, or answer
    /// immediately with a final status.
    pub fn expects_continue(&self) -> bool {
        self.expects_continue
    }
}

/// The value of the validated field line `line` whose name ends at `colon`: everything up to
/// the line's LF, without the CR and surrounding whitespace (exactly what httparse reports).
fn value_after_colon(line: &[u8], colon: usize) -> &[u8] {
    let after = line.get(colon + 1..).unwrap_or(&[]);
    let end = after
        .iter()
        .position(|&byte| byte == b'\n')
        .unwrap_or(after.len());
    let raw = after.get(..end).unwrap_or(&[]);
    trim_ows(raw.strip_suffix(b"\r").unwrap_or(raw))
}

/// Iterator over a head's header fields, returned by [`RequestHead::headers`].
#[derive(Debug, Clone)]
pub struct Headers<'h, 'b> {
    buf: &'b [u8],
    line_starts: std::slice::Iter<'h, u32>,
}

impl<'b> Iterator for Headers<'_, 'b> {
    type Item = (&'b str, &'b [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let start = *self.line_starts.next()?;
        let line = self.buf.get(start as usize..).unwrap_or(&[]);
        let colon = line
            .iter()
            .position(|&byte| byte == b':')
            .unwrap_or(line.len());
        // httparse only accepts token characters in names, which are ASCII.
        let name = std::str::from_utf8(line.get(..colon).unwrap_or(&[])).unwrap_or("");
        Some((name, value_after_colon(line, colon)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.line_starts.size_hint()
    }
}

impl ExactSizeIterator for Headers<'_, '_> {}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
