//! [`Fill`]: a response body collected for the store while it streams to the client,
//! written into the storage piece by piece and indexed only once complete
//! ([`Fill::finish`]); a `206`'s pieces are collected in memory for the partial store.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use coldwire_http::owned_fields::Fields;

use super::{PartialStored, Store, StoredResponse};
use crate::policy::vary::VaryKey;
use crate::storage::{Body, Finished, MemoryWriter, Writer};

/// A response body being collected for the store while it streams to the client. It
/// becomes a stored object only through [`Fill::finish`], called once the whole body has
/// arrived; dropping it (the response ended early, or grew past the limit) stores nothing
/// and abandons what the storage took. Its limit is [`Store::body_limit`]: once past it,
/// nothing more is collected.
#[derive(Debug)]
pub struct Fill {
    key: String,
    status: u16,
    /// Where the body goes; `None` once the fill is over its limit or refused.
    writer: Option<Writer>,
    length: u64,
    limit: u64,
}

impl Store {
    /// Starts collecting a response with `status` for the store, unless its announced
    /// length is already over what could ever be stored under the key
    /// ([`Store::body_limit`]) or the storage cannot take it. A `206` is collected in
    /// memory: its pieces are combined as partial content ([`Store::add_partial`]).
    pub fn begin_fill(&self, key: String, status: u16, announced: Option<u64>) -> Option<Fill> {
        let limit = self.body_limit(&key);
        if announced.is_some_and(|length| length > limit) {
            return None;
        }
        let writer = if status == 206 {
            Writer::Memory(MemoryWriter::default())
        } else {
            self.storage.writer(&key, announced)?
        };
        Some(Fill {
            key,
            status,
            writer: Some(writer),
            length: 0,
            limit,
        })
    }
}

impl Fill {
    /// Whether `more` body bytes would still fit under the limit.
    pub fn fits(&self, more: u64) -> bool {
        self.length.saturating_add(more) <= self.limit
    }

    /// Adds a piece of body. Returns false once the body is over the limit (what was
    /// collected so far is freed) or the storage refused it; the caller then drops the fill.
    pub fn push(&mut self, piece: Bytes) -> bool {
        self.length += piece.len() as u64;
        if self.length > self.limit {
            self.writer = None;
            return false;
        }
        let Some(writer) = self.writer.as_mut() else {
            return false;
        };
        if piece.is_empty() {
            return true;
        }
        if !writer.push(piece) {
            self.writer = None;
            return false;
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
        fields: Fields,
        vary: VaryKey,
        request_time: SystemTime,
        response_time: SystemTime,
    ) -> bool {
        let times = (request_time, response_time);
        let Some(writer) = self.writer else {
            return false;
        };
        if self.status == 206 {
            let Finished::Body(Body::Memory(pieces)) = writer.finish(&placeholder()) else {
                return false;
            };
            return store.add_partial(&self.key, fields, vary, pieces, times) != PartialStored::No;
        }
        let mut response = StoredResponse::new_targeted(
            self.status,
            fields,
            Body::default(),
            vary,
            times,
            store.targets(),
        );
        match writer.finish(&response) {
            Finished::Body(body) => {
                response.body_len = body.len();
                response.body = body;
                store.insert_kept(&self.key, Arc::new(response))
            }
            // Indexed by the storage once written.
            Finished::Deferred => true,
            Finished::Dropped => false,
        }
    }
}

/// The metadata handed to a memory writer's `finish` (which ignores it).
fn placeholder() -> StoredResponse {
    let epoch = SystemTime::UNIX_EPOCH;
    StoredResponse::new(
        200,
        Fields::new(),
        Body::default(),
        VaryKey::default(),
        epoch,
        epoch,
    )
}
