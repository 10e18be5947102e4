//! Response head templates ([`PrebuiltHead`]): built once (e.g. per cached file), then written
//! per response with one copy plus a 29-byte `Date` patch.
//!
//! Invariants: a template holds a status line (optional) and complete header lines, never the
//! `Connection` line and never the final blank line; those depend on the request and are added
//! by [`PrebuiltHead::write_complete`] or by the caller after [`PrebuiltHead::write_to`]. If the
//! template has a `Date` field, its recorded offset always points at exactly 29 bytes inside
//! the template.

use crate::date::HTTP_DATE_LEN;
use crate::response::{write_content_length, write_header, write_status_line};
use crate::status::Status;
use crate::version::Version;

/// A response head template with an optional `Date` slot patched on every write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrebuiltHead {
    bytes: Vec<u8>,
    date_offset: Option<usize>,
}

/// Builder for a [`PrebuiltHead`]; fields appear in the order the methods are called.
#[derive(Debug, Clone, Default)]
pub struct PrebuiltHeadBuilder {
    bytes: Vec<u8>,
    date_offset: Option<usize>,
}

impl PrebuiltHeadBuilder {
    /// An empty template.
    pub fn new() -> PrebuiltHeadBuilder {
        PrebuiltHeadBuilder::default()
    }

    /// Appends a status line. Omit it to build a template of shared header fields that is
    /// written after a status line chosen per response (e.g. 200 vs 206 vs 304).
    pub fn status_line(mut self, version: Version, status: Status) -> PrebuiltHeadBuilder {
        write_status_line(&mut self.bytes, version, status);
        self
    }

    /// Appends a `Date` field whose 29-byte value is patched on every write. Only the first
    /// call has an effect.
    pub fn date(mut self) -> PrebuiltHeadBuilder {
        if self.date_offset.is_none() {
            self.bytes.extend_from_slice(b"Date: ");
            self.date_offset = Some(self.bytes.len());
            self.bytes.extend_from_slice(&[b' '; HTTP_DATE_LEN]);
            self.bytes.extend_from_slice(b"\r\n");
        }
        self
    }

    /// Appends `name: value` (sanitised like [`write_header`]).
    pub fn header(mut self, name: &[u8], value: &[u8]) -> PrebuiltHeadBuilder {
        write_header(&mut self.bytes, name, value);
        self
    }

    /// Appends `Content-Length: <length>`.
    pub fn content_length(mut self, length: u64) -> PrebuiltHeadBuilder {
        write_content_length(&mut self.bytes, length);
        self
    }

    /// Finishes the template (the buffer is shrunk to fit).
    pub fn build(mut self) -> PrebuiltHead {
        self.bytes.shrink_to_fit();
        PrebuiltHead {
            bytes: self.bytes,
            date_offset: self.date_offset,
        }
    }
}

impl PrebuiltHead {
    /// Starts a builder.
    pub fn builder() -> PrebuiltHeadBuilder {
        PrebuiltHeadBuilder::new()
    }

    /// Appends the template to `out`, with the `Date` slot (if any) set to `date`. Nothing else
    /// is appended: the caller may add more fields (e.g. `Content-Range`), then the
    /// [`connection_header`](crate::connection_header) line, then
    /// [`finish`](crate::finish).
    pub fn write_to(&self, out: &mut Vec<u8>, date: &[u8; HTTP_DATE_LEN]) {
        let start = out.len();
        out.extend_from_slice(&self.bytes);
        if let Some(offset) = self.date_offset {
            let slot_start = start + offset;
            if let Some(slot) = out.get_mut(slot_start..slot_start + HTTP_DATE_LEN) {
                slot.copy_from_slice(date);
            }
        }
    }

    /// Appends a complete head: the template with `date`, then `connection_line` (normally
    /// [`connection_header`](crate::connection_header)`(request_version, keep_alive)`, which
    /// may be empty), then the blank line.
    pub fn write_complete(
        &self,
        out: &mut Vec<u8>,
        date: &[u8; HTTP_DATE_LEN],
        connection_line: &[u8],
    ) {
        self.write_to(out, date);
        out.extend_from_slice(connection_line);
        out.extend_from_slice(b"\r\n");
    }

    /// The template bytes (with spaces in the `Date` slot).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Length of the template in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True for an empty template.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::connection_header;

    const DATE: &[u8; 29] = b"Sun, 06 Nov 1994 08:49:37 GMT";

    fn file_template() -> PrebuiltHead {
        PrebuiltHead::builder()
            .status_line(Version::Http11, Status::OK)
            .header(b"Server", b"coldwire")
            .date()
            .header(b"Content-Type", b"text/html; charset=utf-8")
            .content_length(5)
            .header(b"ETag", b"\"1-5\"")
            .header(b"Accept-Ranges", b"bytes")
            .build()
    }

    #[test]
    fn writes_template_with_patched_date() {
        let template = file_template();
        let mut out = b"previous response".to_vec();
        template.write_complete(&mut out, DATE, connection_header(Version::Http10, true));
        assert_eq!(
            out,
            b"previous responseHTTP/1.1 200 OK\r\nServer: coldwire\r\n\
              Date: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Type: text/html; charset=utf-8\r\n\
              Content-Length: 5\r\nETag: \"1-5\"\r\nAccept-Ranges: bytes\r\n\
              Connection: keep-alive\r\n\r\n"
        );
    }

    #[test]
    fn template_is_reusable_and_unchanged() {
        let template = file_template();
        let before = template.as_bytes().to_vec();
        let mut first = Vec::new();
        template.write_to(&mut first, DATE);
        let mut second = Vec::new();
        template.write_to(&mut second, b"Mon, 07 Nov 1994 08:49:37 GMT");
        assert_eq!(template.as_bytes(), &before[..]);
        assert_eq!(first.len(), second.len());
        assert_ne!(first, second);
    }

    #[test]
    fn template_without_date_or_status() {
        let template = PrebuiltHead::builder()
            .header(b"Server", b"coldwire")
            .date()
            .date()
            .build();
        let mut out = Vec::new();
        template.write_to(&mut out, DATE);
        assert_eq!(
            out,
            b"Server: coldwire\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
        );
        assert!(!template.is_empty());
        assert_eq!(template.len(), out.len());
        let empty = PrebuiltHead::builder().build();
        let mut out = Vec::new();
        empty.write_complete(&mut out, DATE, b"");
        assert_eq!(out, b"\r\n");
    }
}
