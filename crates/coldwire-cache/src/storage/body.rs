//! [`Body`]: where a stored body's bytes are, as a hit sends them — shared memory pieces, or
//! a byte range of an open file — and [`Pieces`], the body (or a byte range of it) cut into
//! what the I/O layer sends without copying: `Bytes` for `sendmsg`, a [`FileRange`] for
//! `sendfile` / `splice`.
//!
//! Invariants: the set of forms is closed on purpose — they are the two ways coldwire's
//! drivers send stored bytes without a copy in user space, so the hit path never asks which
//! [`Storage`](super::Storage) a body came from (no virtual call, no lock, no allocation per
//! hit: cutting clones reference counts only). The set of storages stays open: each hands
//! out one of these forms. A [`FileRange`]'s bytes must not change while any clone of its
//! `Arc<File>` lives (see the storage contract in [`super`]).

use std::fs::File;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use bytes::Bytes;

/// A stored body, as the index keeps it and a hit reads it.
#[derive(Clone, Debug)]
pub enum Body {
    /// In memory, in the pieces it arrived in; charged against the store's byte budget.
    Memory(Vec<Bytes>),
    /// A byte range of an open file (a disk storage); its bytes are the storage's to account,
    /// not the memory budget's.
    File(FileRange),
}

/// A byte range of an open file: what `sendfile(2)` and `splice(2)` take.
#[derive(Clone, Debug)]
pub struct FileRange {
    /// The open file, shared: it stays open while a hit is being sent from it.
    pub file: Arc<File>,
    /// First byte of the range in the file.
    pub offset: u64,
    /// Bytes in the range.
    pub length: u64,
    /// When a hit last found it (shared by its clones; the disk store's second chance).
    pub hit: HitMark,
}

/// When a hit last found a [`FileRange`], in unix milliseconds (0: never since it was written),
/// shared by the range's clones: the disk store re-appends a hit object rather than lose
/// it with its segment (docs/disk-store.md). Marking is one relaxed atomic store.
#[derive(Clone, Debug, Default)]
pub struct HitMark(Arc<AtomicU64>);

impl HitMark {
    /// Records a hit now.
    #[inline]
    pub fn mark(&self) {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(1, |since| (since.as_millis() as u64).max(1));
        self.0.store(now, Ordering::Relaxed);
    }

    /// The last hit (unix milliseconds), 0 when none.
    pub fn last(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// One piece of a body to send: shared memory, or a file range.
#[derive(Clone, Debug)]
pub enum BodyPiece {
    /// Shared bytes (written with the others in one `sendmsg`, no copy in user space).
    Shared(Bytes),
    /// A file range (written with `sendfile` / `splice`).
    File(FileRange),
}

impl BodyPiece {
    /// Bytes this piece puts on the wire.
    #[inline]
    pub fn len(&self) -> u64 {
        match self {
            BodyPiece::Shared(bytes) => bytes.len() as u64,
            BodyPiece::File(range) => range.length,
        }
    }

    /// True for a piece with nothing to send.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for Body {
    /// An empty body in memory.
    fn default() -> Self {
        Body::Memory(Vec::new())
    }
}

impl From<Vec<Bytes>> for Body {
    /// A body in memory, in these pieces.
    fn from(pieces: Vec<Bytes>) -> Self {
        Body::Memory(pieces)
    }
}

impl Body {
    /// Body length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Body::Memory(pieces) => pieces.iter().map(|piece| piece.len() as u64).sum(),
            Body::File(range) => range.length,
        }
    }

    /// True for an empty body.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the bytes are in memory (and so charged against the store's byte budget).
    pub fn is_in_memory(&self) -> bool {
        matches!(self, Body::Memory(_))
    }

    /// The pieces in memory, when the body is there.
    pub fn memory(&self) -> Option<&[Bytes]> {
        match self {
            Body::Memory(pieces) => Some(pieces),
            Body::File(_) => None,
        }
    }

    /// Every piece, as stored (empty pieces included).
    #[inline]
    pub fn pieces(&self) -> Pieces<'_> {
        self.cut(None)
    }

    /// The pieces holding bytes `first..=last`, cut to that range (slices of the shared
    /// bytes, or a narrower file range: nothing is copied).
    pub fn range(&self, first: u64, last: u64) -> Pieces<'_> {
        self.cut(Some((first, last)))
    }

    #[inline]
    fn cut(&self, range: Option<(u64, u64)>) -> Pieces<'_> {
        let cut = match (self, range) {
            (Body::Memory(pieces), None) => Cut::Whole(pieces.iter()),
            (Body::Memory(pieces), Some((first, last))) => Cut::Range {
                pieces: pieces.iter(),
                offset: 0,
                first,
                last,
            },
            (Body::File(file), range) => Cut::File(Some(file), range),
        };
        Pieces { cut }
    }

    /// Whether both describe the same stored bytes (a freshened copy shares its original's
    /// body; a new response from the origin does not).
    pub fn shares(&self, other: &Body) -> bool {
        match (self, other) {
            (Body::Memory(one), Body::Memory(other)) => {
                one.len() == other.len()
                    && one.iter().zip(other).all(|(one, other)| {
                        one.as_ptr() == other.as_ptr() && one.len() == other.len()
                    })
            }
            (Body::File(one), Body::File(other)) => {
                Arc::ptr_eq(&one.file, &other.file)
                    && one.offset == other.offset
                    && one.length == other.length
            }
            _ => false,
        }
    }
}

/// The pieces of a body, or of a byte range of it (see [`Body::pieces`], [`Body::range`]);
/// the default is no piece at all.
#[derive(Clone, Debug)]
pub struct Pieces<'a> {
    cut: Cut<'a>,
}

/// What is left to hand out.
#[derive(Clone, Debug)]
enum Cut<'a> {
    /// Every memory piece as stored (a hit's usual case: nothing to compute).
    Whole(std::slice::Iter<'a, Bytes>),
    /// Memory pieces cut to bytes `first..=last`; `offset` is where the next piece starts.
    Range {
        pieces: std::slice::Iter<'a, Bytes>,
        offset: u64,
        first: u64,
        last: u64,
    },
    /// A file range (taken once), whole or cut to `first..=last`.
    File(Option<&'a FileRange>, Option<(u64, u64)>),
}

impl Default for Pieces<'_> {
    fn default() -> Self {
        Pieces {
            cut: Cut::Whole([].iter()),
        }
    }
}

impl Iterator for Pieces<'_> {
    type Item = BodyPiece;

    #[inline]
    fn next(&mut self) -> Option<BodyPiece> {
        match &mut self.cut {
            Cut::Whole(pieces) => pieces.next().map(|piece| BodyPiece::Shared(piece.clone())),
            Cut::Range {
                pieces,
                offset,
                first,
                last,
            } => loop {
                let piece = pieces.next()?;
                let piece_start = *offset;
                let piece_end = piece_start + piece.len() as u64;
                *offset = piece_end;
                if piece_start > *last {
                    return None;
                }
                if piece_end <= *first {
                    continue;
                }
                let from = first.saturating_sub(piece_start);
                let to = (*last + 1).min(piece_end) - piece_start;
                let (Ok(from), Ok(to)) = (usize::try_from(from), usize::try_from(to)) else {
                    continue;
                };
                return Some(BodyPiece::Shared(piece.slice(from..to)));
            },
            Cut::File(file, range) => {
                let file = file.take()?;
                let Some((first, last)) = *range else {
                    return Some(BodyPiece::File(file.clone()));
                };
                if first >= file.length || first > last {
                    return None;
                }
                let last = last.min(file.length - 1);
                Some(BodyPiece::File(FileRange {
                    file: file.file.clone(),
                    offset: file.offset + first,
                    length: last - first + 1,
                    hit: file.hit.clone(),
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(pieces: Pieces<'_>) -> Vec<u8> {
        pieces
            .map(|piece| match piece {
                BodyPiece::Shared(bytes) => bytes.to_vec(),
                BodyPiece::File(_) => panic!("a memory body cut into a file range"),
            })
            .collect::<Vec<_>>()
            .concat()
    }

    #[test]
    fn slices_span_pieces_without_copying() {
        let body = Body::from(vec![
            Bytes::from_static(b"abcd"),
            Bytes::from_static(b"efgh"),
        ]);
        assert_eq!(joined(body.range(2, 5)), b"cdef");
        assert_eq!(joined(body.range(0, 7)), b"abcdefgh");
        assert_eq!(joined(body.range(4, 4)), b"e");
        assert_eq!(joined(body.range(7, 7)), b"h");
        assert_eq!(joined(body.pieces()), b"abcdefgh");
        let Some(BodyPiece::Shared(cut)) = body.range(5, 6).next() else {
            panic!("one piece");
        };
        let Body::Memory(pieces) = &body else {
            unreachable!()
        };
        assert_eq!(cut.as_ptr(), pieces[1][1..].as_ptr(), "a slice, not a copy");
    }

    #[test]
    fn the_whole_body_keeps_its_pieces_as_stored() {
        let body = Body::from(vec![Bytes::new()]);
        assert_eq!(body.pieces().count(), 1);
        assert_eq!(body.len(), 0);
        assert_eq!(Pieces::default().count(), 0);
    }

    #[test]
    fn a_file_range_is_cut_by_offset_and_length() {
        let file = Arc::new(tempfile::tempfile().expect("a temporary file"));
        let body = Body::File(FileRange {
            file: file.clone(),
            offset: 100,
            length: 10,
            hit: HitMark::default(),
        });
        assert_eq!(body.len(), 10);
        assert!(!body.is_in_memory());
        let cut: Vec<BodyPiece> = body.range(2, 50).collect();
        match cut.as_slice() {
            [BodyPiece::File(range)] => {
                assert!(Arc::ptr_eq(&range.file, &file));
                assert_eq!((range.offset, range.length), (102, 8));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(body.range(10, 12).count(), 0, "past the end");
        assert!(body.shares(&body.clone()));
        assert!(!body.shares(&Body::default()));
    }

    #[test]
    fn a_copy_shares_its_pieces_and_a_new_body_does_not() {
        let body = Body::from(vec![Bytes::from(vec![1u8; 4])]);
        assert!(body.shares(&body.clone()));
        assert!(!body.shares(&Body::from(vec![Bytes::from(vec![1u8; 4])])));
    }
}
