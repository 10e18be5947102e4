//! Phase 8, finish: a response is complete (or ended cleanly by the origin's close). The
//! collected fill becomes a stored object, a leader's claim is released, the origin
//! connection goes back to the pool if it may be used again, the response is counted and
//! logged, and the client goes on with its next pipelined request — or closes.
//!
//! Invariants: an origin connection returns to the pool only after a complete,
//! well-framed, keep-alive response with no surplus bytes, and never while draining; an
//! origin that answered before the request body was all sent leaves both connections
//! unusable (the rest of the body must never be read as a request — RFC 9112 §9.3).

use coldwire_cache::VaryKey;
use coldwire_io::{Chunk, Driver};

use super::state::{Client, ClientState, Origin, OriginState};
use super::worker::{Step, Worker};

impl<D: Driver> Worker<D> {
    /// The response is complete (or ended cleanly by a close): store it, release the
    /// origin connection, and go on with the client.
    pub(super) fn finish_response(&mut self, client: &mut Client, origin: Option<Origin>) -> Step {
        let Some(exchange) = client.state.take_exchange() else {
            return Step::Close;
        };
        let Some(progress) = exchange.response else {
            return Step::Close;
        };
        if progress.rechunk {
            let mut last = self.driver.take_vec();
            coldwire_http::write_last_chunk(&mut last);
            self.driver.send(client.session.id, Chunk::Owned(last));
        }
        let mut stored = false;
        if let (Some((fill, fields)), Some(store)) = (progress.fill, self.store.as_ref()) {
            let request_fields = &exchange.cache.request_fields;
            let vary = VaryKey::new(&fields, |name: &str| {
                request_fields.values(name).collect::<Vec<_>>()
            });
            stored = fill.finish(
                store,
                fields,
                vary,
                exchange.upstream.request_time,
                self.wall_clock,
            );
        }
        if !stored && let Some(claim) = exchange.cache.claim {
            // The body outgrew what may be stored while it streamed, or the store refused it.
            self.leader_not_stored(claim, progress.status, None);
        }
        // The origin answered before the request body was all sent: the origin connection
        // holds a half-sent request and the client's rest of the body must never be read
        // as a next request, so neither connection is used again.
        let body_pending = exchange.request.body_pending();
        if let Some(mut origin) = origin {
            self.driver.cancel_timer(origin.id);
            let keepable = progress.upstream_keep_alive
                && !body_pending
                && origin.head.is_empty()
                && self.drain_deadline.is_none();
            let reusable = keepable && self.pool.put(origin.address, origin.id);
            if keepable && !reusable {
                // The pool already holds `--pool-per-origin` idle connections to it.
                self.http.upstream_pool_full += 1;
            }
            if reusable {
                origin.state = OriginState::Idle;
                origin.waiting_for_client = false;
                let deadline = self.driver.now() + self.config.pool_idle_timeout;
                self.driver.set_timer(origin.id, deadline);
                self.driver.recv_eager(origin.id);
                self.put_origin(origin);
            } else {
                self.driver.close(origin.id);
            }
        }
        self.http.count_timed_response(
            progress.status,
            client.session.request_elapsed(self.driver.now()),
        );
        self.http.body_bytes += progress.body_bytes;
        let logged = (exchange.log.cache, exchange.log.upstream_time);
        self.log_exchange(client, logged, progress.status, progress.body_bytes);
        if !exchange.request.keep_alive || body_pending {
            let unread = client
                .session
                .input
                .as_ref()
                .is_some_and(|input| !input.is_empty());
            client.state = ClientState::Closing {
                linger: body_pending || unread,
            };
        }
        self.flush_client(client)
    }
}
