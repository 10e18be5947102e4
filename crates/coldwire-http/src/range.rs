//! Single byte-range requests (RFC 9110 §14): [`evaluate_range`] and the `Content-Range`
//! writers.
//!
//! Invariants: a [`RangeOutcome::Partial`] always satisfies
//! `start <= end_inclusive < representation_len`, whatever the input. Only one range is ever
//! served; a request for several gets the full representation (the RFC lets a server ignore
//! `Range`), as does any `Range` value that is invalid or not in `bytes` units (§14.2: an
//! invalid `Range` is ignored).

use crate::fields::trim_ows;

/// What to send in answer to a `Range` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeOutcome {
    /// Send the whole representation with 200 (no, invalid, multiple or ignored ranges).
    Full,
    /// Send bytes `start..=end_inclusive` with 206 and `Content-Range`.
    Partial {
        /// First byte offset.
        start: u64,
        /// Last byte offset (inclusive), always `< representation_len`.
        end_inclusive: u64,
    },
    /// Answer 416 with `Content-Range: bytes */len`.
    Unsatisfiable,
}

impl RangeOutcome {
    /// Bytes in a `Partial` range (`end - start + 1`); `None` for the other outcomes.
    pub fn partial_len(self) -> Option<u64> {
        match self {
            RangeOutcome::Partial {
                start,
                end_inclusive,
            } => Some(end_inclusive - start + 1),
            RangeOutcome::Full | RangeOutcome::Unsatisfiable => None,
        }
    }
}

/// Evaluates a `Range` field value against a representation of `representation_len` bytes.
///
/// Accepted: `bytes=a-b`, `bytes=a-`, `bytes=-n` (unit case-insensitive, optional whitespace
/// around the range). Rules:
/// - no header, other units, syntax errors, `a > b`, or more than one range → `Full`;
/// - `a >= len`, `bytes=-0`, or any range on an empty representation → `Unsatisfiable`;
/// - `b` is clamped to `len - 1`; a suffix longer than `len` means the whole representation
///   (still served as 206 with a `Content-Range`).
pub fn evaluate_range(header: Option<&[u8]>, representation_len: u64) -> RangeOutcome {
    let Some(value) = header else {
        return RangeOutcome::Full;
    };
    let Some(spec) = parse_single_spec(value) else {
        return RangeOutcome::Full;
    };
    if representation_len == 0 {
        return RangeOutcome::Unsatisfiable;
    }
    let last = representation_len - 1;
    match spec {
        RangeSpec::Suffix(0) => RangeOutcome::Unsatisfiable,
        RangeSpec::Suffix(suffix) => RangeOutcome::Partial {
            start: representation_len - suffix.min(representation_len),
            end_inclusive: last,
        },
        RangeSpec::From(start) if start > last => RangeOutcome::Unsatisfiable,
        RangeSpec::From(start) => RangeOutcome::Partial {
            start,
            end_inclusive: last,
        },
        RangeSpec::Bounded(start, _) if start > last => RangeOutcome::Unsatisfiable,
        RangeSpec::Bounded(start, end) => RangeOutcome::Partial {
            start,
            end_inclusive: end.min(last),
        },
    }
}

enum RangeSpec {
    /// `a-b`, with `a <= b` checked.
    Bounded(u64, u64),
    /// `a-`.
    From(u64),
    /// `-n`.
    Suffix(u64),
}

fn parse_single_spec(value: &[u8]) -> Option<RangeSpec> {
    let value = trim_ows(value);
    let (unit, set) = value.split_at(value.iter().position(|&byte| byte == b'=')?);
    if !trim_ows(unit).eq_ignore_ascii_case(b"bytes") {
        return None;
    }
    let spec = trim_ows(set.get(1..)?);
    if spec.contains(&b',') {
        return None;
    }
    let dash = spec.iter().position(|&byte| byte == b'-')?;
    let first = spec.get(..dash)?;
    let last = spec.get(dash + 1..)?;
    match (first.is_empty(), last.is_empty()) {
        (true, true) => None,
        (true, false) => Some(RangeSpec::Suffix(parse_saturating(last)?)),
        (false, true) => Some(RangeSpec::From(parse_saturating(first)?)),
        (false, false) => {
            let start = parse_saturating(first)?;
            let end = parse_saturating(last)?;
            (start <= end).then_some(RangeSpec::Bounded(start, end))
        }
    }
}

/// 1*DIGIT, saturating at `u64::MAX` (every position that large is past any representation).
fn parse_saturating(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    let mut number: u64 = 0;
    for &byte in digits {
        if !byte.is_ascii_digit() {
            return None;
        }
        number = number
            .saturating_mul(10)
            .saturating_add(u64::from(byte - b'0'));
    }
    Some(number)
}

/// Appends `Content-Range: bytes <start>-<end_inclusive>/<complete_len>\r\n` (for a 206).
pub fn write_content_range(out: &mut Vec<u8>, start: u64, end_inclusive: u64, complete_len: u64) {
    let mut digits = itoa::Buffer::new();
    out.extend_from_slice(b"Content-Range: bytes ");
    out.extend_from_slice(digits.format(start).as_bytes());
    out.push(b'-');
    out.extend_from_slice(digits.format(end_inclusive).as_bytes());
    out.push(b'/');
    out.extend_from_slice(digits.format(complete_len).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends `Content-Range: bytes */<complete_len>\r\n` (for a 416).
pub fn write_unsatisfied_content_range(out: &mut Vec<u8>, complete_len: u64) {
    out.extend_from_slice(b"Content-Range: bytes */");
    out.extend_from_slice(itoa::Buffer::new().format(complete_len).as_bytes());
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(value: &str, len: u64) -> RangeOutcome {
        evaluate_range(Some(value.as_bytes()), len)
    }

    fn partial(start: u64, end_inclusive: u64) -> RangeOutcome {
        RangeOutcome::Partial {
            start,
            end_inclusive,
        }
    }

    #[test]
    fn satisfiable_ranges() {
        assert_eq!(eval("bytes=5-", 10), partial(5, 9));
        assert_eq!(eval("bytes=0-0", 10), partial(0, 0));
        assert_eq!(eval("bytes=2-4", 10), partial(2, 4));
        assert_eq!(eval("bytes=2-400", 10), partial(2, 9));
        assert_eq!(eval("bytes=-3", 10), partial(7, 9));
        assert_eq!(eval("bytes=-30", 10), partial(0, 9));
        assert_eq!(eval("Bytes = 1-2 ", 10), partial(1, 2));
        assert_eq!(eval("bytes=0-99999999999999999999999", 10), partial(0, 9));
        assert_eq!(eval("bytes=5-", 10).partial_len(), Some(5));
    }

    #[test]
    fn unsatisfiable_ranges() {
        assert_eq!(eval("bytes=-0", 10), RangeOutcome::Unsatisfiable);
        assert_eq!(eval("bytes=10-", 10), RangeOutcome::Unsatisfiable);
        assert_eq!(eval("bytes=10-20", 10), RangeOutcome::Unsatisfiable);
        assert_eq!(eval("bytes=0-", 0), RangeOutcome::Unsatisfiable);
        assert_eq!(eval("bytes=-5", 0), RangeOutcome::Unsatisfiable);
    }

    #[test]
    fn ignored_ranges_serve_full() {
        assert_eq!(evaluate_range(None, 10), RangeOutcome::Full);
        for value in [
            "bytes=0-1,3-4",
            "bytes=5-2",
            "items=0-1",
            "bytes=",
            "bytes=-",
            "bytes=a-b",
            "bytes 0-1",
            "bytes=1-2-3",
            "bytes=+1-2",
            "bytes=0-1,",
        ] {
            assert_eq!(eval(value, 10), RangeOutcome::Full, "{value}");
        }
    }

    #[test]
    fn content_range_lines() {
        let mut out = Vec::new();
        write_content_range(&mut out, 5, 9, 10);
        write_unsatisfied_content_range(&mut out, 10);
        assert_eq!(
            out,
            b"Content-Range: bytes 5-9/10\r\nContent-Range: bytes */10\r\n"
        );
    }

    proptest::proptest! {
        #[test]
        fn partial_ranges_are_in_bounds(
            value in "(bytes|BYTES|x)=[0-9]{0,21}-[0-9]{0,21}",
            len in proptest::prop_oneof![0u64..20, proptest::num::u64::ANY],
        ) {
            if let RangeOutcome::Partial { start, end_inclusive } = eval(&value, len) {
                proptest::prop_assert!(start <= end_inclusive);
                proptest::prop_assert!(end_inclusive < len);
            }
        }

        #[test]
        fn never_panics(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..40),
            len in proptest::num::u64::ANY,
        ) {
            if let RangeOutcome::Partial { start, end_inclusive } = evaluate_range(Some(&bytes), len) {
                proptest::prop_assert!(start <= end_inclusive && end_inclusive < len);
            }
        }
    }
}
