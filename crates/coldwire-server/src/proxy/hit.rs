//! Answers from the store: a stored response written for the client (`Age`,
//! `Cache-Status`, the body's shared `Bytes` without a copy, a byte range or a `304` for
//! the client's conditionals). Used by the cache lookup (fresh and
//! `stale-while-revalidate` hits), by the response head phase (a `304` that freshened the
//! stored response: the client is answered from the freshened copy) and by `stale.rs`
//! (stored content in place of an origin error).
//!
//! Invariants: a stored body is never copied (its shared `Bytes`, or slices of them, are
//! queued); a `304` or `HEAD` answer carries no body; every answer is counted here.

use coldwire_cache::{BodyPiece, CacheStatus, Pieces, StoredResponse};
use coldwire_http::{RangeOutcome, Version};
use coldwire_io::{Chunk, Driver};

use super::cache_range::add_content_range;
use super::head::{ClientFraming, ClientHead, write_client_head};
use super::state::Client;
use super::worker::Worker;
use crate::output::Output;

/// Whether a client's conditionals (`If-None-Match`, else `If-Modified-Since`) are
/// satisfied by a stored response, so the answer is `304` (RFC 9110 §13.2.2, RFC 9111
/// §4.3.2; the rules are coldwire-cache's). `values` returns the request's field values.
pub(super) fn client_not_modified<'a>(
    values: impl Fn(&str) -> Vec<&'a [u8]>,
    stored: &StoredResponse,
) -> bool {
    coldwire_cache::policy::validation::client_not_modified_at(
        values,
        stored.status,
        &stored.fields,
        Some(stored.response_time),
    )
}

/// A stored body's piece as the driver sends it: shared bytes, or a file range
/// (`sendfile`), neither copied.
fn chunk(piece: BodyPiece) -> Chunk {
    match piece {
        BodyPiece::Shared(bytes) => Chunk::Shared(bytes),
        BodyPiece::File(range) => Chunk::File {
            file: range.file,
            offset: range.offset,
            length: range.length,
        },
    }
}

/// A response answered from the store.
pub(super) struct FromStore<'a> {
    pub stored: &'a StoredResponse,
    pub version: Version,
    pub keep_alive: bool,
    pub head_only: bool,
    pub not_modified: bool,
    pub status: CacheStatus,
    /// The byte range asked for (`Full` when none applies).
    pub range: RangeOutcome,
}

impl<D: Driver> Worker<D> {
    /// Writes a response from the store into `output`; returns its status and body bytes.
    pub(super) fn answer_from_store(
        &mut self,
        answer: &FromStore<'_>,
        output: &mut Output,
    ) -> (u16, u64) {
        let stored = answer.stored;
        let range = if answer.not_modified {
            RangeOutcome::Full
        } else {
            answer.range
        };
        let (status, framing) = match range {
            _ if answer.not_modified => (304, ClientFraming::Empty(None)),
            RangeOutcome::Full => (stored.status, ClientFraming::Length(stored.body_len)),
            RangeOutcome::Partial { .. } => {
                (206, ClientFraming::Length(range.partial_len().unwrap_or(0)))
            }
            RangeOutcome::Unsatisfiable => (416, ClientFraming::Length(0)),
        };
        let head = ClientHead {
            version: answer.version,
            status,
            reason: "",
            fields: &stored.fields,
            framing,
            keep_alive: answer.keep_alive,
            age: Some(stored.age(self.wall_clock).as_secs()),
            name: &self.config.name,
            cache_status: Some(answer.status),
            date: self.date.bytes(),
            hidden: self
                .store
                .as_deref()
                .map_or(&coldwire_cache::NO_TARGETS, coldwire_cache::Store::targets),
        };
        let out = output.bytes(&mut self.driver);
        write_client_head(out, &head);
        add_content_range(out, range, stored.body_len);
        let mut body_bytes = 0;
        let pieces = match range {
            _ if answer.not_modified || answer.head_only => Pieces::default(),
            RangeOutcome::Full => stored.body.pieces(),
            RangeOutcome::Partial {
                start,
                end_inclusive,
            } => stored.body.range(start, end_inclusive),
            RangeOutcome::Unsatisfiable => Pieces::default(),
        };
        for piece in pieces {
            body_bytes += piece.len();
            output.chunk(&mut self.driver, chunk(piece));
        }
        self.http.count_response(status);
        self.http.body_bytes += body_bytes;
        (status, body_bytes)
    }

    /// A `304` answered a revalidation and freshened the stored response: answers the
    /// client from the freshened copy (false when the exchange has none).
    pub(super) fn refresh_from_304(&mut self, client: &mut Client, output: &mut Output) -> bool {
        let Some(exchange) = client.state.exchange() else {
            return false;
        };
        // The store was freshened when the 304's head arrived (`freshen.rs`); `stored` is
        // the freshened copy.
        let (Some(refreshed), true) = (exchange.cache.stored.clone(), exchange.cache.freshened)
        else {
            return false;
        };
        let fields = &exchange.cache.request_fields;
        let mut status = CacheStatus::forward(exchange.cache.forward);
        status.forward_status = Some(304);
        status.stored = true;
        status.ttl = Some(refreshed.ttl(self.wall_clock));
        let answer = FromStore {
            stored: &refreshed,
            version: exchange.request.version,
            keep_alive: exchange.request.keep_alive,
            head_only: exchange.request.head_only,
            not_modified: client_not_modified(|name| fields.values(name).collect(), &refreshed),
            status,
            // Ranges are served from fresh hits only; after a 304 the whole body goes.
            range: RangeOutcome::Full,
        };
        let (status, body_bytes) = self.answer_from_store(&answer, output);
        self.http
            .response_time
            .record(client.session.request_elapsed(self.driver.now()));
        let upstream = self
            .wall_clock
            .duration_since(exchange.upstream.request_time)
            .ok();
        self.log_line(client, status, body_bytes, "revalidated", upstream);
        true
    }
}
