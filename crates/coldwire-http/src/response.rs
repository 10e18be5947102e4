//! Writing response heads into a caller-owned `Vec<u8>`: status line, header fields,
//! `Content-Length`, `Date`, `Connection`, and the final blank line.
//!
//! Invariants: writers only append (never clear or reallocate more than `Vec` growth
//! requires), use no formatting machinery (integers go through `itoa`), and can never emit a
//! line break inside a field: CR, LF and NUL in names or values are replaced by spaces, so no
//! caller can be tricked into response splitting.
//!
//! A head is: [`write_status_line`], any number of [`write_header`] / [`write_content_length`]
//! / [`write_date`], the line from [`connection_header`] (may be empty), then [`finish`].

use crate::date::HTTP_DATE_LEN;
use crate::status::Status;
use crate::version::Version;

/// Appends the status line, e.g. `HTTP/1.1 200 OK\r\n`.
///
/// Servers answer with [`Version::Http11`] even to HTTP/1.0 clients (RFC 9110 §2.5: a server
/// sends the highest minor version it conforms to); `version` exists for tests and proxies.
/// Codes outside the built-in table are written with an empty reason phrase (`HTTP/1.1 599 `).
pub fn write_status_line(out: &mut Vec<u8>, version: Version, status: Status) {
    if let Some(line) = status.status_line(version) {
        out.extend_from_slice(line);
        return;
    }
    out.extend_from_slice(version.as_bytes());
    out.push(b' ');
    out.extend_from_slice(itoa::Buffer::new().format(status.code()).as_bytes());
    out.extend_from_slice(b" \r\n");
}

/// Appends `name: value\r\n`. CR, LF and NUL bytes in either are written as spaces.
pub fn write_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    push_sanitized(out, name);
    out.extend_from_slice(b": ");
    push_sanitized(out, value);
    out.extend_from_slice(b"\r\n");
}

fn push_sanitized(out: &mut Vec<u8>, bytes: &[u8]) {
    if !bytes.iter().any(|&byte| is_line_breaking(byte)) {
        out.extend_from_slice(bytes);
        return;
    }
    out.extend(
        bytes
            .iter()
            .map(|&byte| if is_line_breaking(byte) { b' ' } else { byte }),
    );
}

fn is_line_breaking(byte: u8) -> bool {
    matches!(byte, b'\r' | b'\n' | 0)
}

/// Appends `Content-Length: <length>\r\n`.
pub fn write_content_length(out: &mut Vec<u8>, length: u64) {
    out.extend_from_slice(b"Content-Length: ");
    out.extend_from_slice(itoa::Buffer::new().format(length).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends `Date: <date>\r\n`, typically with [`DateCache::bytes`](crate::DateCache::bytes).
pub fn write_date(out: &mut Vec<u8>, date: &[u8; HTTP_DATE_LEN]) {
    out.extend_from_slice(b"Date: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\n");
}

/// Appends the blank line that ends a head.
pub fn finish(out: &mut Vec<u8>) {
    out.extend_from_slice(b"\r\n");
}

/// The `Connection` line a response needs, given the request's version and whether the
/// connection stays open after this response:
///
/// | request  | keep open | line                        |
/// |----------|-----------|-----------------------------|
/// | HTTP/1.1 | yes       | (empty: persistence is the default) |
/// | HTTP/1.0 | yes       | `Connection: keep-alive\r\n` |
/// | any      | no        | `Connection: close\r\n`      |
///
/// The result is `b""` when nothing must be sent, so it can always be appended.
pub const fn connection_header(request_version: Version, keep_alive: bool) -> &'static [u8] {
    match (keep_alive, request_version) {
        (false, _) => b"Connection: close\r\n",
        (true, Version::Http10) => b"Connection: keep-alive\r\n",
        (true, Version::Http11) => b"",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_complete_head() {
        let mut out = Vec::new();
        write_status_line(&mut out, Version::Http11, Status::NOT_FOUND);
        write_header(&mut out, b"Server", b"coldwire");
        write_date(&mut out, b"Sun, 06 Nov 1994 08:49:37 GMT");
        write_content_length(&mut out, 1234);
        out.extend_from_slice(connection_header(Version::Http11, false));
        finish(&mut out);
        assert_eq!(
            out,
            b"HTTP/1.1 404 Not Found\r\nServer: coldwire\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
              Content-Length: 1234\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn unknown_status_has_empty_reason() {
        let mut out = Vec::new();
        let status = Status::from_u16(599).expect("three digits");
        write_status_line(&mut out, Version::Http11, status);
        assert_eq!(out, b"HTTP/1.1 599 \r\n");
    }

    #[test]
    fn header_values_cannot_split_the_response() {
        let mut out = Vec::new();
        write_header(&mut out, b"Location", b"/a\r\nSet-Cookie: x\0");
        assert_eq!(out, b"Location: /a  Set-Cookie: x \r\n");
    }

    #[test]
    fn connection_lines() {
        assert_eq!(connection_header(Version::Http11, true), b"");
        assert_eq!(
            connection_header(Version::Http10, true),
            b"Connection: keep-alive\r\n"
        );
        assert_eq!(
            connection_header(Version::Http10, false),
            b"Connection: close\r\n"
        );
        assert_eq!(
            connection_header(Version::Http11, false),
            b"Connection: close\r\n"
        );
    }

    #[test]
    fn content_length_extremes() {
        let mut out = Vec::new();
        write_content_length(&mut out, 0);
        write_content_length(&mut out, u64::MAX);
        assert_eq!(
            out,
            b"Content-Length: 0\r\nContent-Length: 18446744073709551615\r\n"
        );
    }
}
