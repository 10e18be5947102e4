//! [`Fill`]: a response body collected for the store while it streams to the client,
//! stored only once complete ([`Fill::finish`]); a `206` goes to the partial store.

use std::time::SystemTime;

use bytes::Bytes;

use super::{PartialStored, Store, StoredResponse};
use crate::vary::VaryKey;
use coldwire_http::owned_fields::Fields;

/// A response body being collected for the store while it streams to the client. It
/// becomes a stored object only through [`Fill::finish`], called once the whole body has
/// arrived; dropping it (the response ended early, or grew past the limit) stores nothing.
/// Its limit is [`Store::body_limit`]: once past it, nothing more is collected.
#[derive(Debug)]
pub struct Fill {
    pub(super) key: String,
    pub(super) body: Vec<Bytes>,
    pub(super) length: u64,
    pub(super) limit: u64,
}

impl Fill {
    /// Whether `more` body bytes would still fit under the limit.
    pub fn fits(&self, more: u64) -> bool {
        self.length.saturating_add(more) <= self.limit
    }

    /// Adds a piece of body. Returns false once the body is over the limit (the pieces
    /// collected so far are freed); the caller then drops the fill.
    pub fn push(&mut self, piece: Bytes) -> bool {
        self.length += piece.len() as u64;
        if self.length > self.limit {
            self.body.clear();
            return false;
        }
        if !piece.is_empty() {
            self.body.push(piece);
        }
        true
    }

    /// Body bytes collected.
    pub fn len(&self) -> u64 {
        self.length
    }

    /// True before any body byte.
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The key it will be stored under.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Stores the complete response — a `206`'s body as partial content, combined with the
    /// pieces held (see [`Store::add_partial`]). Returns whether it was stored.
    pub fn finish(
        self,
        store: &Store,
        status: u16,
        fields: Fields,
        vary: VaryKey,
        request_time: SystemTime,
        response_time: SystemTime,
    ) -> bool {
        let times = (request_time, response_time);
        if status == 206 {
            return store.add_partial(&self.key, fields, vary, self.body, times)
                != PartialStored::No;
        }
        let response =
            StoredResponse::new_targeted(status, fields, self.body, vary, times, store.targets());
        store.insert(&self.key, response)
    }
}
