//! Request body framing ([`BodyFraming`]) decided from `Content-Length` and
//! `Transfer-Encoding`, following RFC 9112 §6.3 with deliberately stricter rules.
//!
//! Invariants: a request either has exactly one well-formed framing or is rejected; the codec
//! never guesses, because disagreement between front-end and back-end framing is what request
//! smuggling exploits. Rules, in order:
//! - `Transfer-Encoding` in an HTTP/1.0 request → 400.
//! - Both `Transfer-Encoding` and `Content-Length` → 400 (RFC 9112 allows dropping
//!   `Content-Length`; we refuse instead).
//! - `Transfer-Encoding` whose final coding is not `chunked`, or with `chunked` twice → 400.
//! - `Transfer-Encoding` with any coding besides `chunked` (e.g. `gzip, chunked`) → 501.
//! - More than one `Content-Length` field, a list (`5, 5`), a non-digit or an overflowing
//!   value → 400, even when the values are identical.
//! - Neither header → no body.

use crate::error::HttpError;
use crate::fields::{comma_list, strip_parameters, trim_ows};
use crate::version::Version;

/// How the body of a request is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body (neither `Content-Length` nor `Transfer-Encoding`).
    None,
    /// Exactly this many body bytes follow the head (`Content-Length`; may be 0).
    Length(u64),
    /// The body is chunked; decode it with [`ChunkedDecoder`](crate::ChunkedDecoder).
    Chunked,
}

impl BodyFraming {
    /// True when body bytes may follow the head (`Length(n)` with `n > 0`, or `Chunked`).
    pub const fn has_body(self) -> bool {
        match self {
            BodyFraming::None | BodyFraming::Length(0) => false,
            BodyFraming::Length(_) | BodyFraming::Chunked => true,
        }
    }
}

/// Parses a `Content-Length` value: optional surrounding whitespace and 1*DIGIT that fits in a
/// `u64`. Lists, signs, empty values and overflow are [`HttpError::BadRequest`].
pub fn parse_content_length(value: &[u8]) -> Result<u64, HttpError> {
    let digits = trim_ows(value);
    if digits.is_empty() {
        return Err(HttpError::BadRequest("empty Content-Length"));
    }
    let mut length: u64 = 0;
    for &byte in digits {
        if !byte.is_ascii_digit() {
            return Err(HttpError::BadRequest("invalid Content-Length"));
        }
        length = length
            .checked_mul(10)
            .and_then(|tens| tens.checked_add(u64::from(byte - b'0')))
            .ok_or(HttpError::BadRequest("Content-Length overflow"))?;
    }
    Ok(length)
}

/// Accumulates the framing-relevant header fields of one message, in field order.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FramingScan {
    content_length_fields: u32,
    content_length: u64,
    content_length_error: Option<HttpError>,
    transfer_encoding_fields: u32,
    coding_count: u32,
    chunked_count: u32,
    last_coding_is_chunked: bool,
    other_coding_seen: bool,
    chunked_has_parameters: bool,
}

impl FramingScan {
    /// Records one `Content-Length` field.
    pub(crate) fn content_length(&mut self, value: &[u8]) {
        self.content_length_fields = self.content_length_fields.saturating_add(1);
        match parse_content_length(value) {
            Ok(length) => self.content_length = length,
            Err(error) => self.content_length_error = Some(error),
        }
    }

    /// Records one `Transfer-Encoding` field (a list of codings; fields concatenate).
    pub(crate) fn transfer_encoding(&mut self, value: &[u8]) {
        self.transfer_encoding_fields = self.transfer_encoding_fields.saturating_add(1);
        for member in comma_list(value) {
            self.coding_count = self.coding_count.saturating_add(1);
            let name = strip_parameters(member);
            let is_chunked = name.eq_ignore_ascii_case(b"chunked");
            if is_chunked {
                self.chunked_count = self.chunked_count.saturating_add(1);
                // RFC 9112 §7.1: chunked has no parameters; a recipient should treat one as
                // an error (another parser may not see `chunked` at all).
                self.chunked_has_parameters |= name.len() != member.len();
            } else {
                self.other_coding_seen = true;
            }
            self.last_coding_is_chunked = is_chunked;
        }
    }

    /// Decides the request framing (see the module doc for the rules).
    pub(crate) fn finish_request(&self, version: Version) -> Result<BodyFraming, HttpError> {
        if self.transfer_encoding_fields > 0 {
            if version == Version::Http10 {
                return Err(HttpError::BadRequest(
                    "Transfer-Encoding in HTTP/1.0 request",
                ));
            }
            if self.content_length_fields > 0 {
                return Err(HttpError::BadRequest(
                    "both Transfer-Encoding and Content-Length",
                ));
            }
            if self.coding_count == 0 {
                return Err(HttpError::BadRequest("empty Transfer-Encoding"));
            }
            if self.chunked_has_parameters {
                return Err(HttpError::BadRequest("parameters on the chunked coding"));
            }
            if !self.last_coding_is_chunked || self.chunked_count > 1 {
                return Err(HttpError::BadRequest(
                    "Transfer-Encoding must end with a single chunked",
                ));
            }
            if self.other_coding_seen {
                return Err(HttpError::NotImplemented(
                    "transfer coding other than chunked",
                ));
            }
            return Ok(BodyFraming::Chunked);
        }
        match self.content_length_fields {
            0 => Ok(BodyFraming::None),
            1 => match self.content_length_error {
                Some(error) => Err(error),
                None => Ok(BodyFraming::Length(self.content_length)),
            },
            _ => Err(HttpError::BadRequest("multiple Content-Length fields")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decide(
        content_lengths: &[&[u8]],
        transfer_encodings: &[&[u8]],
        version: Version,
    ) -> Result<BodyFraming, HttpError> {
        let mut scan = FramingScan::default();
        for value in content_lengths {
            scan.content_length(value);
        }
        for value in transfer_encodings {
            scan.transfer_encoding(value);
        }
        scan.finish_request(version)
    }

    #[test]
    fn content_length_values() {
        assert_eq!(parse_content_length(b"0"), Ok(0));
        assert_eq!(parse_content_length(b" 42 "), Ok(42));
        assert_eq!(parse_content_length(b"18446744073709551615"), Ok(u64::MAX));
        assert!(parse_content_length(b"18446744073709551616").is_err());
        assert!(parse_content_length(b"").is_err());
        assert!(parse_content_length(b"+5").is_err());
        assert!(parse_content_length(b"5, 5").is_err());
        assert!(parse_content_length(b"0x10").is_err());
    }

    #[test]
    fn framing_rules() {
        use Version::{Http10, Http11};
        assert_eq!(decide(&[], &[], Http11), Ok(BodyFraming::None));
        assert_eq!(decide(&[b"5"], &[], Http11), Ok(BodyFraming::Length(5)));
        assert_eq!(decide(&[b"5"], &[], Http10), Ok(BodyFraming::Length(5)));
        assert!(decide(&[b"5", b"5"], &[], Http11).is_err());
        assert_eq!(decide(&[], &[b"chunked"], Http11), Ok(BodyFraming::Chunked));
        assert_eq!(decide(&[], &[b"Chunked"], Http11), Ok(BodyFraming::Chunked));
        assert!(decide(&[b"5"], &[b"chunked"], Http11).is_err());
        assert!(decide(&[], &[b"chunked"], Http10).is_err());
        assert!(decide(&[], &[b"chunked, identity"], Http11).is_err());
        assert!(decide(&[], &[b"chunked", b"chunked"], Http11).is_err());
        assert!(decide(&[], &[b""], Http11).is_err());
        assert!(decide(&[], &[b"chunked;q=1"], Http11).is_err());
        assert!(decide(&[], &[b"chunked ; x"], Http11).is_err());
        assert_eq!(
            decide(&[], &[b"gzip, chunked"], Http11),
            Err(HttpError::NotImplemented(
                "transfer coding other than chunked"
            ))
        );
        assert_eq!(
            decide(&[], &[b"gzip", b"chunked"], Http11).map_err(|error| error.status().code()),
            Err(501)
        );
    }

    #[test]
    fn has_body() {
        assert!(!BodyFraming::None.has_body());
        assert!(!BodyFraming::Length(0).has_body());
        assert!(BodyFraming::Length(1).has_body());
        assert!(BodyFraming::Chunked.has_body());
    }
}
