//! Serving stale responses (RFC 5861). `stale-while-revalidate`: a stale hit within the
//! window is answered at once (`Cache-Status: …; hit; ttl=-N;
//! detail=stale-while-revalidate`) and one background revalidation per key refreshes the
//! entry (`revalidator.rs`). `stale-if-error` (response or request directive): when the
//! origin cannot be reached, times out or answers 5xx, a stored response within the window
//! is answered instead of the error (`detail=stale-if-error`).

use std::sync::Arc;

use coldwire_cache::{CacheStatus, Forward, StoredResponse};
use coldwire_http::{RequestHead, Status};
use coldwire_io::Driver;

use super::head::{cache_request_fields, write_upstream_request};
use super::hit::{FromStore, client_not_modified};
use super::revalidator::{Revalidation, Revalidator, RevalidatorLimits};
use super::route::Destination;
use super::state::{Client, ClientState};
use super::worker::Worker;
use crate::output::Output;

impl<D: Driver> Worker<D> {
    /// Starts a background revalidation of `stored` for this request, unless one already
    /// runs for `key` (anywhere in the proxy).
    pub(super) fn revalidate_in_background(
        &mut self,
        key: &str,
        head: &RequestHead<'_>,
        destination: &Destination<'_>,
        stored: &Arc<StoredResponse>,
    ) {
        let Some(store) = self.store.clone() else {
            return;
        };
        let Some(claim) = store.claim(key) else {
            return;
        };
        if self.revalidator.is_none() {
            let limits = RevalidatorLimits {
                timeout: self.config.upstream_timeout,
                max_head_bytes: self.config.max_response_head_bytes,
            };
            self.revalidator = Revalidator::start(store, limits).ok();
        }
        let Some(revalidator) = self.revalidator.as_ref() else {
            return;
        };
        let mut request = Vec::new();
        write_upstream_request(
            &mut request,
            head,
            &destination.path_and_query,
            &destination.authority,
            &self.config.name,
            Some(stored),
        );
        let request_fields = cache_request_fields(head);
        revalidator.submit(Revalidation {
            claim,
            host: destination.host.to_owned(),
            port: destination.port,
            request,
            stored: stored.clone(),
            request_fields,
            request_directives: coldwire_cache::CacheControl::parse_request(
                head.header_values("cache-control"),
            ),
        });
    }

    /// Whether the exchange's stored response may replace an origin failure: within
    /// `stale-if-error` (response or request, RFC 5861 §4) for any failure, and — only
    /// when the origin could not be reached at all (`disconnected`: resolution or connect
    /// failure, timeout; not an origin's 5xx answer) — within `--serve-stale-on-error`
    /// (off by default; RFC 9111 §4.2.4 allows a disconnected cache to serve stale).
    pub(super) fn stale_on_error_available(&self, client: &Client, disconnected: bool) -> bool {
        let window = self.config.serve_stale_on_error;
        client.state.exchange().is_some_and(|exchange| {
            exchange.cache.stored.as_ref().is_some_and(|stored| {
                stored.may_serve_on_error(self.wall_clock, &exchange.cache.request_directives)
                    || (disconnected && stored.may_serve_disconnected(self.wall_clock, window))
            })
        })
    }

    /// The origin failed with `status` before the response started: answers the stored
    /// response instead when `stale-if-error` allows it (the exchange ends; the caller
    /// has closed or will close the origin connection). False when it does not apply.
    pub(super) fn answer_stale_on_error(&mut self, client: &mut Client, status: Status) -> bool {
        // 502/504 here are the proxy's own: the origin was not reached (or timed out). An
        // origin's 5xx answer reached here only because `stale-if-error` allowed it.
        let disconnected = matches!(status, Status::BAD_GATEWAY | Status::GATEWAY_TIMEOUT);
        if !self.stale_on_error_available(client, disconnected) {
            return false;
        }
        let by_directive = client.state.exchange().is_some_and(|exchange| {
            exchange.cache.stored.as_ref().is_some_and(|stored| {
                stored.may_serve_on_error(self.wall_clock, &exchange.cache.request_directives)
            })
        });
        let Some(exchange) = client.state.take_exchange() else {
            return false;
        };
        let Some(stored) = exchange.cache.stored.clone() else {
            return false;
        };
        if let Some(origin) = exchange.upstream.origin.and_then(|id| self.take_origin(id)) {
            self.driver.close(origin.id);
        }
        let keep_alive = exchange.request.keep_alive && !exchange.request.body_pending();
        let mut cache_status = CacheStatus::forward(Forward::Stale);
        // Only an answer from the origin has a status to report; 502/504 are our own.
        if !matches!(status, Status::BAD_GATEWAY | Status::GATEWAY_TIMEOUT) {
            cache_status.forward_status = Some(status.code());
        }
        cache_status.ttl = Some(stored.ttl(self.wall_clock));
        cache_status.detail = Some(if by_directive {
            "stale-if-error"
        } else {
            "stale-on-error"
        });
        let fields = &exchange.cache.request_fields;
        let answer = FromStore {
            stored: &stored,
            version: exchange.request.version,
            keep_alive,
            head_only: exchange.request.head_only,
            not_modified: client_not_modified(|name| fields.values(name).collect(), &stored),
            status: cache_status,
            range: coldwire_http::RangeOutcome::Full,
        };
        let mut output = Output::new(client.session.id);
        let (code, body_bytes) = self.answer_from_store(&answer, &mut output);
        self.http
            .response_time
            .record(client.session.request_elapsed(self.driver.now()));
        output.finish(&mut self.driver);
        let upstream = self
            .wall_clock
            .duration_since(exchange.upstream.request_time)
            .ok();
        self.log_line(client, code, body_bytes, "stale", upstream);
        if !keep_alive {
            client.state = ClientState::Closing { linger: true };
        }
        true
    }
}
