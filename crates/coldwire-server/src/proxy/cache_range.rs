//! Byte ranges served from the cache: a `GET` with one `Range` that hits a fresh stored
//! `200` gets `206` with `Content-Range` and just those bytes (slices of the stored
//! `Bytes`, no copy), `416` with `Content-Range: bytes */LEN` when the range is
//! unsatisfiable; `If-Range` (strong ETag or exact Last-Modified) that does not match the
//! stored response means the whole `200`. The rules are coldwire-http's
//! (`evaluate_request_range`), the same as `coldwire serve`'s for files.
//!
//! On a miss the request goes to the origin as it came, `Range` included; its `206` is
//! passed on and never stored (a later full `GET` fills the cache).

use bytes::Bytes;
use coldwire_cache::StoredResponse;
use coldwire_http::range::{write_content_range, write_unsatisfied_content_range};
use coldwire_http::{ETag, RangeOutcome, RequestHead, Validators, parse_http_date};

/// The range to serve from `stored` for `head` (only `200`s are ever sliced).
pub(super) fn range_for(head: &RequestHead<'_>, stored: &StoredResponse) -> RangeOutcome {
    if stored.status != 200 {
        return RangeOutcome::Full;
    }
    let validators = Validators {
        last_modified: stored.fields.get("last-modified").and_then(parse_http_date),
        etag: stored.fields.get("etag").and_then(ETag::parse),
    };
    coldwire_http::evaluate_request_range(head, &validators, stored.body_len)
}

/// The pieces of `body` covering bytes `start..=end_inclusive` (shared, not copied).
pub(super) fn slice_body(body: &[Bytes], start: u64, end_inclusive: u64) -> Vec<Bytes> {
    let mut pieces = Vec::new();
    let mut offset = 0u64;
    for piece in body {
        let piece_start = offset;
        let piece_end = offset + piece.len() as u64;
        offset = piece_end;
        if piece_end <= start || piece_start > end_inclusive {
            continue;
        }
        let from = start.saturating_sub(piece_start);
        let to = (end_inclusive + 1).min(piece_end) - piece_start;
        let (Ok(from), Ok(to)) = (usize::try_from(from), usize::try_from(to)) else {
            continue;
        };
        pieces.push(piece.slice(from..to));
    }
    pieces
}

/// Inserts `Content-Range` into a complete response head written at the end of `out`
/// (before its final empty line).
pub(super) fn add_content_range(out: &mut Vec<u8>, range: RangeOutcome, complete_len: u64) {
    if !out.ends_with(b"\r\n\r\n") {
        return;
    }
    out.truncate(out.len() - 2);
    match range {
        RangeOutcome::Partial {
            start,
            end_inclusive,
        } => write_content_range(out, start, end_inclusive, complete_len),
        RangeOutcome::Unsatisfiable => write_unsatisfied_content_range(out, complete_len),
        RangeOutcome::Full => {}
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_span_pieces_without_copying() {
        let body = vec![Bytes::from_static(b"abcd"), Bytes::from_static(b"efgh")];
        let joined = |pieces: Vec<Bytes>| pieces.concat();
        assert_eq!(joined(slice_body(&body, 2, 5)), b"cdef");
        assert_eq!(joined(slice_body(&body, 0, 7)), b"abcdefgh");
        assert_eq!(joined(slice_body(&body, 4, 4)), b"e");
        assert_eq!(joined(slice_body(&body, 7, 7)), b"h");
    }

    #[test]
    fn content_range_goes_before_the_empty_line() {
        let mut out = b"HTTP/1.1 206 Partial Content\r\nA: b\r\n\r\n".to_vec();
        add_content_range(
            &mut out,
            RangeOutcome::Partial {
                start: 0,
                end_inclusive: 1,
            },
            10,
        );
        assert_eq!(
            out,
            b"HTTP/1.1 206 Partial Content\r\nA: b\r\nContent-Range: bytes 0-1/10\r\n\r\n"
        );
    }
}
