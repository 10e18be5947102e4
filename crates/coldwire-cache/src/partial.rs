//! Partial content (RFC 9111 §3.3, §3.4): what a `206` must carry to be stored
//! ([`partial_storable`]), its `Content-Range` ([`ContentRange`]), whether two responses
//! are the same representation by a strong validator ([`same_strong_validator`]), and the
//! byte [`Segments`] of one representation combined from several `206`s.
//!
//! Invariants: only a single-part `206` with a complete length (`bytes a-b/N`, `b < N`) and a
//! strong validator is stored; pieces are combined only while the strong validator (a
//! strong `ETag`, or without any `ETag` a `Last-Modified` at least 60 s before the
//! response's `Date`, RFC 9110 §8.8.2.2) is the same, otherwise the newer piece replaces
//! what was held. Segments are kept sorted, non-overlapping and non-adjacent (each one
//! contiguous `Bytes`), so a range is served from the cache only when one segment covers it.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use coldwire_http::{ETag, parse_http_date};

use coldwire_http::owned_fields::Fields;

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

/// The byte segments held of one representation of `complete_len` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segments {
    complete_len: u64,
    /// (first byte, bytes), sorted, non-overlapping, non-adjacent.
    pieces: Vec<(u64, Bytes)>,
}

impl Segments {
    /// Nothing held yet of a representation of `complete_len` bytes.
    pub fn new(complete_len: u64) -> Segments {
        Segments {
            complete_len,
            pieces: Vec::new(),
        }
    }

    /// The complete representation's length.
    pub fn complete_len(&self) -> u64 {
        self.complete_len
    }

    /// Bytes held.
    pub fn held(&self) -> u64 {
        self.pieces
            .iter()
            .map(|(_, bytes)| bytes.len() as u64)
            .sum()
    }

    /// Adds `bytes` starting at `first` (clipped to the representation), merging with the
    /// segments it overlaps or touches.
    pub fn add(&mut self, first: u64, bytes: Bytes) {
        if first >= self.complete_len || bytes.is_empty() {
            return;
        }
        let room = usize::try_from(self.complete_len - first).unwrap_or(usize::MAX);
        let mut start = first;
        let mut end = first + bytes.len().min(room) as u64;
        let bytes = bytes.slice(..bytes.len().min(room));
        let mut merged: Vec<(u64, Bytes)> = Vec::new();
        let mut kept = Vec::with_capacity(self.pieces.len() + 1);
        for (piece_start, piece) in self.pieces.drain(..) {
            let piece_end = piece_start + piece.len() as u64;
            if piece_end < start || piece_start > end {
                kept.push((piece_start, piece));
            } else {
                start = start.min(piece_start);
                end = end.max(piece_end);
                merged.push((piece_start, piece));
            }
        }
        let joined = if merged.is_empty() {
            bytes
        } else {
            let mut out = BytesMut::zeroed(usize::try_from(end - start).unwrap_or(0));
            // Older pieces first, the new bytes last: where they overlap the new ones win.
            merged.push((first, bytes));
            for (piece_start, piece) in merged {
                let at = usize::try_from(piece_start - start).unwrap_or(0);
                out[at..at + piece.len()].copy_from_slice(&piece);
            }
            out.freeze()
        };
        kept.push((start, joined));
        kept.sort_by_key(|(piece_start, _)| *piece_start);
        self.pieces = kept;
    }

    /// The bytes `first..=last` when one segment holds all of them (shared, not copied).
    pub fn covering(&self, first: u64, last: u64) -> Option<Bytes> {
        self.pieces.iter().find_map(|(start, bytes)| {
            let end = start + bytes.len() as u64;
            (*start <= first && last < end).then(|| {
                let from = usize::try_from(first - start).unwrap_or(0);
                let to = usize::try_from(last - start + 1).unwrap_or(0);
                bytes.slice(from..to)
            })
        })
    }

    /// The whole representation, once the segments cover it.
    pub fn complete(&self) -> Option<Bytes> {
        if self.complete_len == 0 {
            return None;
        }
        self.covering(0, self.complete_len - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        let mut fields = Fields::new();
        for (name, value) in pairs {
            fields.push(name, value.as_bytes());
        }
        fields
    }

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

    const MONDAY: &str = "Mon, 02 Nov 2026 00:00:00 GMT";
    const TUESDAY: &str = "Tue, 03 Nov 2026 00:00:00 GMT";

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

    #[test]
    fn segments_merge_and_cover() {
        let mut segments = Segments::new(10);
        segments.add(0, Bytes::from_static(b"012"));
        segments.add(6, Bytes::from_static(b"678"));
        assert_eq!(segments.held(), 6);
        assert_eq!(segments.covering(0, 2).as_deref(), Some(&b"012"[..]));
        assert_eq!(segments.covering(1, 7), None);
        assert_eq!(segments.complete(), None);
        segments.add(3, Bytes::from_static(b"345"));
        assert_eq!(segments.covering(1, 7).as_deref(), Some(&b"1234567"[..]));
        segments.add(8, Bytes::from_static(b"89XX"));
        assert_eq!(segments.complete().as_deref(), Some(&b"0123456789"[..]));
        assert_eq!(segments.held(), 10);
        let mut overlapping = Segments::new(6);
        overlapping.add(2, Bytes::from_static(b"cd"));
        overlapping.add(0, Bytes::from_static(b"ABCDEF"));
        assert_eq!(overlapping.complete().as_deref(), Some(&b"ABCDEF"[..]));
    }
}
