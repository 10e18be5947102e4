//! [`Segments`]: the byte pieces held of one representation as partial content (RFC 9111
//! §3.3, §3.4) — what the index keeps for a key's `206` pieces until they cover the whole
//! representation. Whether two pieces may be combined at all is policy
//! ([`crate::policy::partial`]); this is how the bytes are merged and cut.
//!
//! Invariants: segments are kept sorted, non-overlapping and non-adjacent (each one
//! contiguous `Bytes`), so a range is served from them only when one segment covers it;
//! where a new piece overlaps held bytes, the new bytes win.

use bytes::{Bytes, BytesMut};

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
