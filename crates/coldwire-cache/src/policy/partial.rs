//! Partial content (RFC 9111 §3.3, §3.4): what a `206` must carry to be stored
//! ([`partial_storable`]), its `Content-Range` ([`ContentRange`]), whether two responses
//! are the same representation by a strong validator ([`same_strong_validator`]), and
//! whether a new piece combines with the pieces held ([`combines`]). The bytes held are the
//! index's [`Segments`](crate::index::Segments).
//!
//! Invariants: only a single-part `206` with a complete length (`bytes a-b/N`, `b < N`) and a
//! strong validator is stored; pieces are combined only while the complete length and the
//! strong validator (a strong `ETag`, or without any `ETag` a `Last-Modified` at least 60 s
//! before the response's `Date`, RFC 9110 §8.8.2.2) are the same, otherwise the newer piece
//! replaces what was held.

use std::time::Duration;

use coldwire_http::owned_fields::Fields;
use coldwire_http::{ETag, parse_http_date};

/// `Content-Range: bytes first-last/complete` of a single-part `206`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContentRange {
    /// First byte.
    pub first: u64,
    /// Last byte (inclusive).
    pub last: u64,
    /// The complete representation's length.
    pub complete: u64,
}

impl ContentRange {
    /// Parses `bytes first-last/complete` (an unknown complete length `*` gives `None`).
    pub fn parse(value: &[u8]) -> Option<ContentRange> {
        let text = std::str::from_utf8(coldwire_http::fields::trim_ows(value)).ok()?;
        let (unit, rest) = text.split_once(' ')?;
        if !unit.eq_ignore_ascii_case("bytes") {
            return None;
        }
        let (range, complete) = rest.trim().split_once('/')?;
        let (first, last) = range.split_once('-')?;
        let number = |digits: &str| {
            (!digits.is_empty() && digits.bytes().all(|byte| byte.is_ascii_digit()))
                .then(|| digits.parse::<u64>().ok())
                .flatten()
        };
        let range = ContentRange {
            first: number(first)?,
            last: number(last)?,
            complete: number(complete)?,
        };
        (range.first <= range.last && range.last < range.complete).then_some(range)
    }

    /// Bytes in the range.
    pub fn len(&self) -> u64 {
        self.last - self.first + 1
    }

    /// Never empty (`first <= last`); present for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Whether a `206` with these fields (as received) may be stored as partial content:
/// single-part with a complete length, a strong validator, and — when the body's length is
/// announced (`announced`) — exactly the range's length.
pub fn partial_storable(fields: &Fields, announced: Option<u64>) -> bool {
    let Some(range) = fields.get("content-range").and_then(ContentRange::parse) else {
        return false;
    };
    has_strong_validator(fields) && announced.is_none_or(|length| length == range.len())
}

/// Whether `fields` carry a strong validator (RFC 9110 §8.8.2.2, §8.8.3): a strong `ETag`;
/// without an `ETag`, a `Last-Modified` at least 60 s before the `Date`.
pub fn has_strong_validator(fields: &Fields) -> bool {
    match fields.get("etag") {
        Some(etag) => ETag::parse(etag).is_some_and(|etag| !etag.is_weak()),
        None => strong_last_modified(fields).is_some(),
    }
}

fn strong_last_modified(fields: &Fields) -> Option<std::time::SystemTime> {
    let modified = fields.get("last-modified").and_then(parse_http_date)?;
    let date = fields.get("date").and_then(parse_http_date)?;
    let gap = date.duration_since(modified).ok()?;
    (gap >= Duration::from_secs(60)).then_some(modified)
}

/// RFC 9111 §3.4: whether two responses are the same representation by a strong validator:
/// the same strong `ETag` (strong comparison), or, when neither has an `ETag`, the same
/// strong `Last-Modified`.
pub fn same_strong_validator(one: &Fields, other: &Fields) -> bool {
    match (one.get("etag"), other.get("etag")) {
        (Some(one), Some(other)) => match (ETag::parse(one), ETag::parse(other)) {
            (Some(one), Some(other)) => {
                !one.is_weak() && !other.is_weak() && one.as_bytes() == other.as_bytes()
            }
            _ => false,
        },
        (None, None) => match (strong_last_modified(one), strong_last_modified(other)) {
            (Some(one), Some(other)) => one == other,
            _ => false,
        },
        _ => false,
    }
}

/// RFC 9111 §3.4: whether a new piece (`fields`, of a representation `complete_len` bytes
/// long) combines with the pieces held (`held` fields, `held_len` complete length): the same
/// complete length and the same strong validator. Otherwise the new piece replaces them.
pub fn combines(held: &Fields, held_len: u64, fields: &Fields, complete_len: u64) -> bool {
    held_len == complete_len && same_strong_validator(held, fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{MONDAY, TUESDAY, fields};

    #[test]
    fn content_ranges() {
        assert_eq!(
            ContentRange::parse(b"bytes 0-9/100"),
            Some(ContentRange {
                first: 0,
                last: 9,
                complete: 100
            })
        );
        for invalid in [
            &b"bytes 0-9/*"[..],
            b"bytes */100",
            b"bytes 9-0/100",
            b"bytes 0-100/100",
            b"items 0-9/100",
            b"bytes 0-/100",
        ] {
            assert_eq!(ContentRange::parse(invalid), None, "{invalid:?}");
        }
    }

    #[test]
    fn rfc9111_3_3_only_single_part_206s_with_a_strong_validator_are_stored() {
        let range = ("Content-Range", "bytes 0-9/100");
        assert!(partial_storable(
            &fields(&[range, ("ETag", "\"a\"")]),
            Some(10)
        ));
        assert!(partial_storable(
            &fields(&[range, ("Last-Modified", MONDAY), ("Date", TUESDAY)]),
            None
        ));
        assert!(!partial_storable(
            &fields(&[range, ("ETag", "\"a\"")]),
            Some(11)
        ));
        assert!(!partial_storable(
            &fields(&[range, ("ETag", "W/\"a\"")]),
            Some(10)
        ));
        assert!(!partial_storable(
            &fields(&[range, ("Last-Modified", MONDAY), ("Date", MONDAY)]),
            Some(10)
        ));
        assert!(!partial_storable(&fields(&[("ETag", "\"a\"")]), Some(10)));
    }

    #[test]
    fn rfc9111_3_4_combining_needs_the_same_strong_validator() {
        let a = fields(&[("ETag", "\"a\"")]);
        assert!(same_strong_validator(&a, &fields(&[("ETag", "\"a\"")])));
        assert!(!same_strong_validator(&a, &fields(&[("ETag", "\"b\"")])));
        assert!(combines(&a, 10, &a.clone(), 10));
        assert!(!combines(&a, 10, &a.clone(), 11), "another complete length");
        assert!(!same_strong_validator(
            &fields(&[("ETag", "W/\"a\"")]),
            &fields(&[("ETag", "W/\"a\"")])
        ));
        let dated = fields(&[("Last-Modified", MONDAY), ("Date", TUESDAY)]);
        assert!(same_strong_validator(&dated, &dated.clone()));
        assert!(!same_strong_validator(
            &dated,
            &fields(&[("Last-Modified", TUESDAY), ("Date", TUESDAY)])
        ));
        assert!(!same_strong_validator(&dated, &a));
    }
}
