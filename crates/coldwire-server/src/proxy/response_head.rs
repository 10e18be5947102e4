//! Phase 6, response head: the origin's bytes for an exchange are gathered until a head is
//! complete; interim `1xx` responses are passed on (`interim.rs`); the final head first
//! updates the store (`freshen.rs`, `invalidate.rs`), then is answered — from the store
//! after a `304` that freshened it (`hit.rs`), or rewritten for the client with its own
//! framing and `Cache-Status`, a fill begun when the response is storable — and the bytes
//! after it go to the body phase (`body.rs`).
//!
//! Invariants: nothing of the response reaches the client before its final head has gone
//! through the store; a head that cannot be passed on (malformed, over the limit, `101`)
//! is an origin error (502) while nothing has been sent; a leader that will not store its
//! response releases its claim here, at the head, so its followers go at once.

use coldwire_cache::policy::partial::partial_storable;
use coldwire_cache::{CacheStatus, Storability, Store, storability_targeted};
use coldwire_http::{ResponseFraming, Status, Version};
use coldwire_io::Driver;

use super::error::{ExchangeError, Retry};
use super::exchange::{Progress, SplicePlan};
use super::freshen::AfterHead;
use super::head::{
    ClientFraming, ClientHead, UpstreamResponse, end_to_end, parse_upstream_response,
    write_client_head,
};
use super::state::{Client, Origin};
use super::worker::{Step, Worker};
use crate::output::Output;

impl<D: Driver> Worker<D> {
    /// Bytes from the origin for the client's exchange: the head phase until the final head
    /// is complete, the body phase from then on.
    pub(super) fn response_bytes(
        &mut self,
        client: &mut Client,
        mut origin: Origin,
        bytes: &[u8],
    ) -> Step {
        origin.received_any = true;
        let started = client
            .state
            .exchange()
            .is_some_and(|exchange| exchange.response.is_some());
        if started {
            let complete = self.feed_body(client, bytes);
            return self.after_body_bytes(client, origin, complete);
        }
        // The head is parsed straight from the received bytes; only a head split over
        // several receives is gathered in `origin.head`.
        let mut joined = std::mem::take(&mut origin.head);
        if !joined.is_empty() {
            joined.extend_from_slice(bytes);
        }
        let input: &[u8] = if joined.is_empty() { bytes } else { &joined };
        match self.take_head(client, input) {
            Err(error) => {
                self.driver.close(origin.id);
                if let Some(exchange) = client.state.exchange_mut() {
                    exchange.upstream.origin = None;
                }
                self.exchange_failed(client, error)
            }
            Ok(None) => {
                origin.head = if joined.is_empty() {
                    bytes.to_vec()
                } else {
                    joined
                };
                let deadline = self.upstream_deadline();
                self.driver.set_timer(origin.id, deadline);
                self.driver.recv_eager(origin.id);
                self.put_origin(origin);
                Step::Keep
            }
            Ok(Some(body_start)) => {
                let complete = self.feed_body(client, &input[body_start..]);
                joined.clear();
                origin.head = joined;
                self.after_body_bytes(client, origin, complete)
            }
        }
    }

    /// Parses the response head once complete, answers it, and returns where the body
    /// bytes that followed it start in `input` (`None`: the head is incomplete).
    fn take_head(
        &mut self,
        client: &mut Client,
        input: &[u8],
    ) -> Result<Option<usize>, ExchangeError> {
        let (head_only, mut start) = client.state.exchange().map_or((false, 0), |exchange| {
            (exchange.request.head_only, exchange.upstream.interim_skip)
        });
        let bad_gateway = ExchangeError::origin(Status::BAD_GATEWAY);
        loop {
            let rest = input.get(start..).unwrap_or_default();
            let parsed =
                parse_upstream_response(rest, head_only, self.config.max_response_head_bytes)
                    .map_err(|_| bad_gateway)?;
            let Some(response) = parsed else {
                // The caller keeps all of `input`; interim responses before the incomplete
                // head are skipped again next time.
                return Ok(None);
            };
            if (100..200).contains(&response.status) {
                if response.status == 101 {
                    return Err(bad_gateway);
                }
                self.forward_interim(client, &response);
                start += response.head_len;
                if let Some(exchange) = client.state.exchange_mut() {
                    exchange.upstream.interim_skip = start;
                }
                continue;
            }
            if self.final_head_arrived(client, &response) == AfterHead::Refetch {
                // The 304 did not validate the stored response: the request goes again.
                return Err(bad_gateway.with_retry(Retry::WithoutValidators));
            }
            if response.status >= 500 && self.stale_on_error_available(client, false) {
                // stale-if-error: the stored response answers instead (`failure.rs`).
                let status = Status::from_u16(response.status).unwrap_or(Status::BAD_GATEWAY);
                return Err(ExchangeError::origin(status));
            }
            let body_start = start + response.head_len;
            self.begin_response(client, response);
            return Ok(Some(body_start));
        }
    }

    /// Answers a final response head: from the store after a `304` that freshened it, or
    /// rewritten for the client (framing chosen, fill begun when storable, splice planned).
    fn begin_response(&mut self, client: &mut Client, response: UpstreamResponse) {
        let mut output = Output::new(client.session.id);
        let revalidated = response.status == 304
            && client
                .state
                .exchange()
                .is_some_and(|exchange| exchange.cache.freshened);
        if revalidated && self.refresh_from_304(client, &mut output) {
            output.finish(&mut self.driver);
            if let Some(exchange) = client.state.exchange_mut() {
                exchange.response = Some(Progress::new(
                    response.status,
                    ResponseFraming::Empty,
                    response.keep_alive,
                    false,
                    None,
                ));
            }
            return;
        }
        let splice_allowed = self.splice_allowed(client);
        let Some(exchange) = client.state.exchange_mut() else {
            return;
        };
        let stored_fields = end_to_end(&response.fields);
        let mut cache_status = None;
        let mut fill = None;
        if let Some(store) = self.store.as_ref() {
            let mut status = CacheStatus::forward(exchange.cache.forward);
            status.forward_status = Some(response.status);
            if let Some(key) = exchange.cache.key.as_ref() {
                let method = if exchange.request.head_only {
                    "HEAD"
                } else {
                    "GET"
                };
                let authorization = exchange.cache.request_fields.get("authorization").is_some();
                let announced = match response.framing {
                    ResponseFraming::Length(length) => Some(length),
                    _ => None,
                };
                match storability_targeted(
                    method,
                    &exchange.cache.request_directives,
                    authorization,
                    response.status,
                    &response.fields,
                    store.targets(),
                ) {
                    // Partial content is stored (and combined) only as RFC 9111 §3.3 allows.
                    Storability::Store
                        if response.status == 206
                            && !partial_storable(&response.fields, announced) =>
                    {
                        status.detail = Some("partial");
                    }
                    Storability::Store => {
                        fill = store
                            .begin_fill(key.clone(), response.status, announced)
                            .map(|fill| (fill, stored_fields));
                        status.stored = fill.is_some();
                        if fill.is_none() {
                            status.detail = Some("too-large");
                        }
                    }
                    Storability::No(reason) => status.detail = Some(reason),
                }
            }
            if exchange.cache.hit_for_miss {
                status.detail = Some("hit-for-miss");
            }
            exchange.log.cache = status.log_token();
            cache_status = Some(status);
        }
        exchange.log.upstream_time = self
            .wall_clock
            .duration_since(exchange.upstream.request_time)
            .ok();
        if fill.is_none()
            && let Some(claim) = exchange.cache.claim.take()
        {
            // Not stored: requests waiting for this response go to the origin themselves,
            // and so do later misses of the key for a while (hit-for-miss).
            self.leader_not_stored(claim, response.status, Some(&response.fields));
        }
        let request = &mut exchange.request;
        if request.body_pending() {
            // The origin answers before the request body is all sent: the connection
            // cannot be used again (see `finish.rs`), so the client is told.
            request.keep_alive = false;
        }
        let rechunk = response.framing == ResponseFraming::UntilClose
            && request.version == Version::Http11
            && request.keep_alive;
        // HTTP/1.0 has no chunked coding: such a client gets the body decoded, ended by
        // the close.
        let dechunk =
            response.framing == ResponseFraming::Chunked && request.version == Version::Http10;
        if dechunk {
            request.keep_alive = false;
        }
        // Chunked bodies are planned chunk by chunk (`splice.rs`). A close-delimited body
        // splices only when the client's copy is close-delimited too (re-chunking needs
        // each piece's length) and nothing is stored (its copy would have no bound).
        let splice = splice_allowed
            && match response.framing {
                ResponseFraming::Length(length) => length >= self.config.splice_threshold,
                ResponseFraming::UntilClose => !rechunk && fill.is_none(),
                ResponseFraming::Empty | ResponseFraming::Chunked => false,
            };
        if response.framing == ResponseFraming::UntilClose && !rechunk {
            request.keep_alive = false;
        }
        let framing = match response.framing {
            ResponseFraming::Empty => ClientFraming::Empty(None),
            ResponseFraming::Length(length) => ClientFraming::Length(length),
            ResponseFraming::Chunked if dechunk => ClientFraming::UntilClose,
            ResponseFraming::Chunked => ClientFraming::Chunked,
            ResponseFraming::UntilClose if rechunk => ClientFraming::Chunked,
            ResponseFraming::UntilClose => ClientFraming::UntilClose,
        };
        let head = ClientHead {
            version: request.version,
            status: response.status,
            reason: &response.reason,
            fields: &response.fields,
            framing,
            keep_alive: request.keep_alive,
            age: None,
            name: &self.config.name,
            cache_status,
            date: self.date.bytes(),
            hidden: self
                .store
                .as_deref()
                .map_or(&coldwire_cache::NO_TARGETS, Store::targets),
        };
        write_client_head(output.bytes(&mut self.driver), &head);
        output.finish(&mut self.driver);
        let mut progress = Progress::new(
            response.status,
            response.framing,
            response.keep_alive,
            rechunk,
            fill,
        );
        progress.dechunk = dechunk;
        if splice {
            progress.splice = SplicePlan::Pending;
        }
        exchange.response = Some(progress);
    }
}
