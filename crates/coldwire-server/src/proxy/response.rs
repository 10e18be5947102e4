//! Responses from the origin to the client: the head (parsed, interim `1xx` passed on by
//! `interim.rs`, its effect on the store applied by `freshen.rs`, rewritten for the client,
//! `Cache-Status`), then the body streamed as it arrives — Content-Length, chunked (decoded
//! strictly and written again in canonical form: no chunk extensions, trailer fields only
//! those allowed there and only to a client that sent `TE: trailers`; decoded,
//! close-delimited, for an HTTP/1.0 client) or close-delimited (re-chunked for a keep-alive
//! HTTP/1.1 client) — with a copy collected
//! for the cache while it streams (no store-then-forward delay), and back-pressure: the
//! origin is read again only once the client has taken what was sent.
//!
//! Invariants: a body that ends early (reset, or close before its length) never reaches
//! the store — its fill is dropped — and the client connection is closed without the
//! message's end, so the client sees an error; an origin connection returns to the pool
//! only after a complete, well-framed response with no surplus bytes.

use bytes::Bytes;
use coldwire_cache::policy::partial::partial_storable;
use coldwire_cache::{CacheStatus, Storability, Store, VaryKey, storability_targeted};
use coldwire_http::owned_fields::Fields;
use coldwire_http::{ResponseFraming, Status, Version};
use coldwire_io::{Buffer, Chunk, Driver, Flush, Splice};

use super::config::DataPath;
use super::forward::write_last_chunk_with_trailers;
use super::freshen::AfterHead;
use super::head::{
    ClientFraming, ClientHead, UpstreamResponse, end_to_end, parse_upstream_response,
    write_client_head,
};
use super::state::{Client, Origin, OriginState, Progress, SplicePlan};
use super::worker::{Step, Worker};
use crate::output::Output;
use crate::session::Phase;

/// Most bytes of an origin's response head (and the body bytes after it) read into user
/// space on the splice path before the body is spliced: a head of a few hundred bytes
/// leaves the rest of one page to the body, like seed 002's two-segment first read.
pub(super) const HEAD_READ_BYTES: usize = 4096;

impl<D: Driver> Worker<D> {
    /// Bytes from an origin connection.
    pub(super) fn on_origin_data(&mut self, origin: Origin, buffer: Buffer) {
        match origin.state {
            OriginState::Idle => {
                // An idle connection must stay silent; anything else makes it unusable.
                self.driver.recycle(buffer);
                self.close_origin(origin);
            }
            OriginState::Tunnel(client_id) => self.tunnel_from_origin(origin, client_id, buffer),
            OriginState::Exchange(client_id) => {
                let Some(mut client) = self.take_client(client_id) else {
                    self.driver.recycle(buffer);
                    self.driver.close(origin.id);
                    return;
                };
                let step = self.response_bytes(&mut client, origin, buffer.filled());
                self.driver.recycle(buffer);
                self.put_client(client, step);
            }
        }
    }

    fn response_bytes(&mut self, client: &mut Client, mut origin: Origin, bytes: &[u8]) -> Step {
        origin.received_any = true;
        let started = client
            .exchange
            .as_ref()
            .is_some_and(|exchange| exchange.response.is_some());
        let complete = if started {
            self.feed_body(client, bytes, &mut origin)
        } else {
            // The head is parsed straight from the received bytes; only a head split over
            // several receives is gathered in `origin.head`.
            let mut joined = std::mem::take(&mut origin.head);
            if !joined.is_empty() {
                joined.extend_from_slice(bytes);
            }
            let input: &[u8] = if joined.is_empty() { bytes } else { &joined };
            match self.take_head(client, input) {
                Err(status) => {
                    self.driver.close(origin.id);
                    let refetch = client.exchange.as_mut().is_some_and(|exchange| {
                        exchange.origin = None;
                        exchange.cache.refetch
                    });
                    if refetch {
                        return self.refetch_unconditionally(client);
                    }
                    return self.fail_before_response(client, status);
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
                    return Step::Keep;
                }
                Ok(Some(body_start)) => {
                    let complete = self.feed_body(client, &input[body_start..], &mut origin);
                    joined.clear();
                    origin.head = joined;
                    complete
                }
            }
        };
        if complete {
            return self.finish_response(client, Some(origin));
        }
        let id = origin.id;
        self.put_origin(origin);
        let splice = self.plan_splice(client);
        self.release_claim_of_dropped_fill(client);
        let flushed = if splice {
            // The head and the bytes that came with it leave with the spliced data.
            self.driver.flush_more(client.session.id)
        } else {
            self.driver.flush(client.session.id)
        };
        match flushed {
            Flush::Done if splice => self.start_body_splice(client),
            Flush::Done => {
                let deadline = self.upstream_deadline();
                self.driver.set_timer(id, deadline);
                self.driver.recv_eager(id);
                Step::Keep
            }
            Flush::Pending => {
                if let Some(mut origin) = self.take_origin(id) {
                    origin.waiting_for_client = true;
                    // The client is slow, not the origin: the client's write timeout rules.
                    self.driver.cancel_timer(id);
                    self.put_origin(origin);
                }
                self.wait_for_client(client);
                Step::Keep
            }
            Flush::Failed(_) => Step::Close,
        }
    }

    /// Parses the response head once complete, answers it, and returns where the body
    /// bytes that followed it start in `input` (`None`: the head is incomplete).
    fn take_head(&mut self, client: &mut Client, input: &[u8]) -> Result<Option<usize>, Status> {
        let head_only = client
            .exchange
            .as_ref()
            .is_some_and(|exchange| exchange.head_only);
        let mut start = client
            .exchange
            .as_ref()
            .map_or(0, |exchange| exchange.interim_skip);
        loop {
            let rest = input.get(start..).unwrap_or_default();
            let parsed =
                parse_upstream_response(rest, head_only, self.config.max_response_head_bytes)
                    .map_err(|_| Status::BAD_GATEWAY)?;
            let Some(response) = parsed else {
                // The caller keeps all of `input`; interim responses before the incomplete
                // head are skipped again next time.
                return Ok(None);
            };
            if (100..200).contains(&response.status) {
                if response.status == 101 {
                    return Err(Status::BAD_GATEWAY);
                }
                self.forward_interim(client, &response);
                start += response.head_len;
                if let Some(exchange) = client.exchange.as_mut() {
                    exchange.interim_skip = start;
                }
                continue;
            }
            if self.final_head_arrived(client, &response) == AfterHead::Refetch {
                // The 304 did not validate the stored response (response_bytes refetches).
                return Err(Status::BAD_GATEWAY);
            }
            if response.status >= 500 && self.stale_on_error_available(client, false) {
                // stale-if-error: the stored response answers instead (fail_before_response).
                return Err(Status::from_u16(response.status).unwrap_or(Status::BAD_GATEWAY));
            }
            let body_start = start + response.head_len;
            self.begin_response(client, response);
            return Ok(Some(body_start));
        }
    }

    fn begin_response(&mut self, client: &mut Client, response: UpstreamResponse) {
        let mut output = Output::new(client.session.id);
        let Some(exchange) = client.exchange.as_mut() else {
            return;
        };
        let stored_fields = end_to_end(&response.fields);
        let revalidated = response.status == 304 && exchange.cache.freshened;
        if revalidated && self.refresh_from_304(client, &mut output) {
            output.finish(&mut self.driver);
            if let Some(exchange) = client.exchange.as_mut() {
                exchange.response = Some(progress(
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
        let Some(exchange) = client.exchange.as_mut() else {
            return;
        };
        let mut cache_status = None;
        let mut fill = None;
        if let Some(store) = self.store.as_ref() {
            let mut status = CacheStatus::forward(exchange.cache.forward);
            status.forward_status = Some(response.status);
            if let Some(key) = exchange.cache.key.as_ref() {
                let method = if exchange.head_only { "HEAD" } else { "GET" };
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
            exchange.log_cache = status.log_token();
            cache_status = Some(status);
        }
        exchange.upstream_time = self.wall_clock.duration_since(exchange.request_time).ok();
        if fill.is_none()
            && let Some(claim) = exchange.cache.claim.take()
        {
            // Not stored: requests waiting for this response go to the origin themselves,
            // and so do later misses of the key for a while (hit-for-miss).
            self.leader_not_stored(claim, response.status, Some(&response.fields));
        }
        if !matches!(exchange.body, super::state::RequestBody::Done) {
            // The origin answers before the request body is all sent: the connection
            // cannot be used again (see `finish_response`), so the client is told.
            exchange.keep_alive = false;
        }
        let rechunk = response.framing == ResponseFraming::UntilClose
            && exchange.version == Version::Http11
            && exchange.keep_alive;
        // HTTP/1.0 has no chunked coding: such a client gets the body decoded, ended by
        // the close.
        let dechunk =
            response.framing == ResponseFraming::Chunked && exchange.version == Version::Http10;
        if dechunk {
            exchange.keep_alive = false;
        }
        // Chunked bodies are planned chunk by chunk (`plan_splice`). A close-delimited body
        // splices only when the client's copy is close-delimited too (re-chunking needs
        // each piece's length) and nothing is stored (its copy would have no bound).
        let splice = splice_allowed
            && match response.framing {
                ResponseFraming::Length(length) => length >= self.config.splice_threshold,
                ResponseFraming::UntilClose => !rechunk && fill.is_none(),
                ResponseFraming::Empty | ResponseFraming::Chunked => false,
            };
        if response.framing == ResponseFraming::UntilClose && !rechunk {
            exchange.keep_alive = false;
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
            version: exchange.version,
            status: response.status,
            reason: &response.reason,
            fields: &response.fields,
            framing,
            keep_alive: exchange.keep_alive,
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
        let mut progress = progress(
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

    /// Forwards body bytes; true once the body is complete.
    fn feed_body(&mut self, client: &mut Client, bytes: &[u8], origin: &mut Origin) -> bool {
        let client_id = client.session.id;
        let Some(exchange) = client.exchange.as_mut() else {
            return true;
        };
        let accepts_trailers = exchange.accepts_trailers;
        let Some(progress) = exchange.response.as_mut() else {
            return true;
        };
        let (body, complete, surplus) = match progress.framing {
            ResponseFraming::Empty => (&bytes[..0], true, !bytes.is_empty()),
            ResponseFraming::Length(_) => {
                let take = bytes
                    .len()
                    .min(usize::try_from(progress.remaining).unwrap_or(usize::MAX));
                progress.remaining -= take as u64;
                (&bytes[..take], progress.remaining == 0, take < bytes.len())
            }
            ResponseFraming::Chunked => {
                let mut fill = progress.fill.take();
                let mut encoded = self.driver.take_vec();
                let mut announced = progress.announced;
                let mut decoded = 0u64;
                let dechunk = progress.dechunk;
                let result = progress.decoder.decode(bytes, |data| {
                    decoded += data.len() as u64;
                    if let Some((collected, _)) = fill.as_mut()
                        && !collected.push(Bytes::copy_from_slice(data))
                    {
                        fill = None;
                    }
                    if dechunk {
                        encoded.extend_from_slice(data);
                        return;
                    }
                    let raw = usize::try_from(announced).map_or(data.len(), |a| a.min(data.len()));
                    if raw > 0 {
                        encoded.extend_from_slice(&data[..raw]);
                        announced -= raw as u64;
                        if announced == 0 {
                            coldwire_http::write_chunk_end(&mut encoded);
                        }
                    }
                    coldwire_http::write_chunk(&mut encoded, &data[raw..]);
                });
                progress.fill = fill;
                progress.announced = announced;
                match result {
                    Ok(step) => {
                        if step.done && !dechunk {
                            write_last_chunk_with_trailers(
                                &mut encoded,
                                &progress.decoder,
                                accepts_trailers,
                            );
                        }
                        progress.body_bytes += decoded;
                        if !encoded.is_empty() {
                            self.driver.send(client_id, Chunk::Owned(encoded));
                        }
                        (&bytes[..0], step.done, step.consumed < bytes.len())
                    }
                    Err(_) => {
                        // Garbage from the origin mid-body: end it as truncated.
                        progress.fill = None;
                        progress.upstream_keep_alive = false;
                        progress.framing = ResponseFraming::Length(u64::MAX);
                        (&bytes[..0], false, true)
                    }
                }
            }
            ResponseFraming::UntilClose => (bytes, false, false),
        };
        if surplus {
            progress.upstream_keep_alive = false;
        }
        let _ = origin;
        if !body.is_empty() {
            progress.body_bytes += body.len() as u64;
            if progress.rechunk {
                let mut line = self.driver.take_vec();
                coldwire_http::write_chunk_header(&mut line, body.len() as u64);
                self.driver.send(client_id, Chunk::Owned(line));
            }
            match progress.fill.as_mut() {
                Some((fill, _)) => {
                    let shared = Bytes::copy_from_slice(body);
                    if !fill.push(shared.clone()) {
                        progress.fill = None;
                    }
                    self.driver.send(client_id, Chunk::Shared(shared));
                }
                _ => {
                    let mut copy = self.driver.take_vec();
                    copy.extend_from_slice(body);
                    self.driver.send(client_id, Chunk::Owned(copy));
                }
            }
            if progress.rechunk {
                let mut end = self.driver.take_vec();
                end.extend_from_slice(b"\r\n");
                self.driver.send(client_id, Chunk::Owned(end));
            }
        }
        complete
    }

    /// The response is complete (or ended cleanly by a close): store it, release the
    /// origin connection, and go on with the client.
    pub(super) fn finish_response(&mut self, client: &mut Client, origin: Option<Origin>) -> Step {
        let Some(exchange) = client.exchange.take() else {
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
            stored = fill.finish(store, fields, vary, exchange.request_time, self.wall_clock);
        }
        if !stored && let Some(claim) = exchange.cache.claim {
            // The body outgrew what may be stored while it streamed, or the store refused it.
            self.leader_not_stored(claim, progress.status, None);
        }
        // The origin answered before the request body was all sent: the origin connection
        // holds a half-sent request and the client's rest of the body must never be read
        // as a next request, so neither connection is used again.
        let body_pending = !matches!(exchange.body, super::state::RequestBody::Done);
        if let Some(mut origin) = origin {
            self.driver.cancel_timer(origin.id);
            let reusable = progress.upstream_keep_alive
                && !body_pending
                && origin.head.is_empty()
                && self.drain_deadline.is_none()
                && self.pool.put(origin.address, origin.id);
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
        self.http.count_response(progress.status);
        self.http.body_bytes += progress.body_bytes;
        let logged = (exchange.log_cache, exchange.upstream_time);
        self.log_exchange(client, logged, progress.status, progress.body_bytes);
        if !exchange.keep_alive || body_pending {
            client.session.close_after_write = true;
            client.session.linger = body_pending
                || client
                    .session
                    .input
                    .as_ref()
                    .is_some_and(|input| !input.is_empty());
        }
        self.flush_client(client)
    }

    /// The client took everything sent: read the origin again (or start or finish the
    /// body's splice).
    pub(super) fn client_drained(&mut self, client: &mut Client) -> Step {
        let Some(origin_id) = client
            .exchange
            .as_ref()
            .and_then(|exchange| exchange.origin)
        else {
            return Step::Keep;
        };
        let plan = client
            .exchange
            .as_ref()
            .and_then(|exchange| exchange.response.as_ref())
            .map_or(SplicePlan::No, |progress| progress.splice);
        match plan {
            SplicePlan::Pending => return self.start_body_splice(client),
            SplicePlan::Running => return self.finish_body_splice(client, origin_id),
            SplicePlan::No => {}
        }
        client.session.enter(&mut self.driver, Phase::Idle);
        if let Some(mut origin) = self.take_origin(origin_id) {
            if origin.waiting_for_client {
                origin.waiting_for_client = false;
                let deadline = self.upstream_deadline();
                self.driver.set_timer(origin.id, deadline);
                self.driver.recv_eager(origin.id);
            }
            self.put_origin(origin);
        }
        Step::Keep
    }

    /// The fill was dropped mid-body (the object outgrew what the store takes, or its
    /// kept copy was lost): the requests collapsed behind this fetch go to the origin now,
    /// and later misses of the key for a while (hit-for-miss), instead of waiting for a
    /// body that will not be stored to end.
    fn release_claim_of_dropped_fill(&self, client: &mut Client) {
        let Some(exchange) = client.exchange.as_mut() else {
            return;
        };
        let Some(progress) = exchange.response.as_ref() else {
            return;
        };
        if progress.fill.is_none()
            && let Some(claim) = exchange.cache.claim.take()
        {
            self.leader_not_stored(claim, progress.status, None);
        }
    }

    /// Whether this exchange's body may take the splice path at all.
    fn splice_allowed(&mut self, client: &Client) -> bool {
        self.config.data_path == DataPath::Splice
            && self.driver.splicer().is_ok()
            && client
                .exchange
                .as_ref()
                .is_some_and(|exchange| !exchange.head_only)
    }

    /// Arms the receive of an origin's response head: on the splice path it takes at most
    /// [`HEAD_READ_BYTES`], so that a long body stays in the kernel for the splice.
    pub(super) fn arm_response_head_read(&mut self, origin: coldwire_io::ConnectionId) {
        if self.config.data_path == DataPath::Splice
            && let Ok(splicer) = self.driver.splicer()
        {
            splicer.recv_at_most(origin, HEAD_READ_BYTES);
        } else {
            self.driver.recv(origin);
        }
    }

    /// True when the body's next part is to be spliced: planned at the head for a long
    /// `Content-Length` or a close-delimited body; for a chunked body, whenever the rest of
    /// the current chunk's data is at least the threshold (a copy for the store is kept
    /// only while the object can still fit).
    fn plan_splice(&mut self, client: &mut Client) -> bool {
        let allowed = self.splice_allowed(client);
        let threshold = self.config.splice_threshold.max(1);
        let Some(progress) = client
            .exchange
            .as_mut()
            .and_then(|exchange| exchange.response.as_mut())
        else {
            return false;
        };
        match progress.splice {
            SplicePlan::Pending => return true,
            SplicePlan::Running => return false,
            SplicePlan::No => {}
        }
        if !allowed || progress.framing != ResponseFraming::Chunked {
            return false;
        }
        let pending = progress.decoder.pending_data();
        if pending < threshold {
            return false;
        }
        if progress
            .fill
            .as_ref()
            .is_some_and(|(fill, _)| !fill.fits(pending))
        {
            progress.fill = None;
        }
        progress.splice = SplicePlan::Pending;
        if !progress.dechunk {
            // The chunk's size line goes ahead of its spliced data (and its CRLF after,
            // in `finish_body_splice`); if the splice is refused, the copy path writes the
            // announced bytes without a size line of their own.
            let mut line = self.driver.take_vec();
            coldwire_http::write_chunk_header(&mut line, pending);
            self.driver.send(client.session.id, Chunk::Owned(line));
            progress.announced = pending;
        }
        true
    }

    /// Hands the next part of the body (see [`SplicePlan`]) to the driver's splice, with a
    /// tee'd copy when it is being stored; falls back to copying if the driver refuses.
    fn start_body_splice(&mut self, client: &mut Client) -> Step {
        let client_id = client.session.id;
        let Some(exchange) = client.exchange.as_mut() else {
            return Step::Keep;
        };
        let (Some(origin), Some(progress)) = (exchange.origin, exchange.response.as_mut()) else {
            return Step::Keep;
        };
        let length = match progress.framing {
            ResponseFraming::Length(_) => progress.remaining,
            ResponseFraming::Chunked => progress.decoder.pending_data(),
            ResponseFraming::UntilClose => u64::MAX,
            ResponseFraming::Empty => 0,
        };
        let keep_copy = progress.fill.is_some();
        let started = self
            .driver
            .splicer()
            .and_then(|splicer| splicer.splice(origin, client_id, length, keep_copy));
        match started {
            Ok(()) => {
                progress.splice = SplicePlan::Running;
                progress.splice_length = length;
                self.driver.cancel_timer(origin);
                // Nothing left to write: the driver finished the splice at once and its
                // `Sent` is queued for this turn, so there is no stalled write to watch
                // for (and no SIOCOUTQ to read for the progress mark). A running transfer,
                // bounded or not, counts in `queued_bytes`.
                if self.driver.queued_bytes(client_id) > 0 {
                    self.wait_for_client(client);
                }
            }
            Err(_) => {
                progress.splice = SplicePlan::No;
                let deadline = self.upstream_deadline();
                self.driver.set_timer(origin, deadline);
                self.driver.recv_eager(origin);
            }
        }
        Step::Keep
    }

    /// The driver spliced its part of the body: keep the tee'd copy, then finish (a
    /// `Content-Length` or close-delimited body) or read the chunked body's framing on.
    fn finish_body_splice(
        &mut self,
        client: &mut Client,
        origin_id: coldwire_io::ConnectionId,
    ) -> Step {
        let copy = self
            .driver
            .splicer()
            .ok()
            .and_then(|splicer| splicer.take_splice_copy(client.session.id));
        let Some(progress) = client
            .exchange
            .as_mut()
            .and_then(|exchange| exchange.response.as_mut())
        else {
            return Step::Close;
        };
        progress.splice = SplicePlan::No;
        let copied = copy.as_ref().map_or(0, |copy| copy.len() as u64);
        let stored = match (progress.fill.as_mut(), copy) {
            (Some((fill, _)), Some(copy)) => fill.push(Bytes::from(copy)),
            // A fill without its copy cannot be completed.
            (Some(_), None) => false,
            (None, _) => true,
        };
        if !stored {
            progress.fill = None;
        }
        match progress.framing {
            ResponseFraming::Chunked => {
                let skipped = progress.decoder.skip_data(progress.splice_length);
                progress.body_bytes += skipped;
                progress.announced = progress.announced.saturating_sub(skipped);
                if !progress.dechunk && progress.announced == 0 {
                    let mut end = self.driver.take_vec();
                    coldwire_http::write_chunk_end(&mut end);
                    self.driver.send(client.session.id, Chunk::Owned(end));
                }
                // The chunk's CRLF and the next size line come through user space; the
                // next long chunk is spliced again.
                client.session.enter(&mut self.driver, Phase::Idle);
                let deadline = self.upstream_deadline();
                self.driver.set_timer(origin_id, deadline);
                self.arm_response_head_read(origin_id);
                self.release_claim_of_dropped_fill(client);
                return Step::Keep;
            }
            ResponseFraming::UntilClose => {
                // The origin closed: the body is complete and the connection is done.
                // (Its length is known only when a copy was kept.)
                progress.body_bytes += copied;
                progress.upstream_keep_alive = false;
            }
            ResponseFraming::Length(_) | ResponseFraming::Empty => {
                progress.body_bytes += progress.remaining;
                progress.remaining = 0;
            }
        }
        let origin = self.take_origin(origin_id);
        self.finish_response(client, origin)
    }
}

fn progress(
    status: u16,
    framing: ResponseFraming,
    upstream_keep_alive: bool,
    rechunk: bool,
    fill: Option<(coldwire_cache::Fill, Fields)>,
) -> Progress {
    Progress {
        status,
        framing,
        remaining: match framing {
            ResponseFraming::Length(length) => length,
            _ => 0,
        },
        decoder: coldwire_http::ChunkedDecoder::new(),
        rechunk,
        dechunk: false,
        announced: 0,
        upstream_keep_alive,
        fill,
        body_bytes: 0,
        splice: SplicePlan::No,
        splice_length: 0,
    }
}
