//! [`MemoryStorage`]: bodies kept in memory as the shared `Bytes` they arrived in — the
//! first [`Storage`], and today's behaviour: a hit sends the very `Bytes` the fill
//! collected, without copying them.
//!
//! Invariants: it holds nothing itself (a body lives in its `Body::Memory` handle, shared by
//! the index and the hits under way, and is freed with the last of them), so removing is
//! free and it never asks the index to evict: the index's byte budget is its budget.

use bytes::Bytes;

use super::{Body, Storage, Writer};
use crate::stored::StoredResponse;

/// Bodies in memory (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct MemoryStorage;

/// A body being collected in memory: the pieces as they arrived (see [`Writer::Memory`]).
#[derive(Debug, Default)]
pub struct MemoryWriter {
    pieces: Vec<Bytes>,
}

impl MemoryWriter {
    /// Appends the next piece; memory always takes it.
    #[inline]
    pub fn push(&mut self, piece: Bytes) -> bool {
        self.pieces.push(piece);
        true
    }

    /// The body, in the pieces collected.
    #[inline]
    pub fn finish(self) -> Body {
        Body::Memory(self.pieces)
    }
}

impl Storage for MemoryStorage {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn writer(&self, _key: &str, _announced: Option<u64>) -> Option<Writer> {
        Some(Writer::Memory(MemoryWriter::default()))
    }

    /// A body in memory is kept as it is (no copy).
    fn adopt(&self, _key: &str, body: Body, _response: &StoredResponse) -> Option<Body> {
        Some(body)
    }

    /// Nothing to do: the bytes go with the last handle.
    fn remove(&self, _key: &str, _body: &Body) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_keeps_the_pieces_it_arrived_in() {
        let storage = MemoryStorage;
        let mut writer = storage.writer("k", None).expect("a writer");
        let piece = Bytes::from_static(b"abc");
        assert!(writer.push(piece.clone()));
        assert!(writer.push(Bytes::from_static(b"de")));
        let response = StoredResponse::new(
            200,
            coldwire_http::owned_fields::Fields::new(),
            Body::default(),
            crate::policy::vary::VaryKey::default(),
            std::time::UNIX_EPOCH,
            std::time::UNIX_EPOCH,
        );
        let crate::storage::Finished::Body(body) = writer.finish(&response) else {
            panic!("memory keeps every body");
        };
        assert_eq!(body.len(), 5);
        assert_eq!(
            body.memory().expect("in memory")[0].as_ptr(),
            piece.as_ptr()
        );
        let adopted = storage.adopt("k", body.clone(), &response).expect("kept");
        assert!(adopted.shares(&body), "adopted without a copy");
    }
}
