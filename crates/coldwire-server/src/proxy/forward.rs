//! The upstream side of an exchange: resolving the origin, taking a pooled connection or
//! opening one, sending the request head and streaming the request body (Content-Length
//! or chunked, forwarded as received, with back-pressure both ways), one retry on a fresh
//! connection when a pooled one turns out closed before any response byte (idempotent
//! requests without a body only), and the 502/504 answers when the origin fails before the
//! response has started.

use std::net::SocketAddr;

use coldwire_http::fields::{comma_list, strip_parameters};
use coldwire_http::{ChunkedDecoder, RequestHead, Status, write_chunk};
use coldwire_io::{Chunk, ConnectionId, Driver, Flush};

use super::client::{Destination, is_idempotent};
use super::head::write_upstream_request;
use super::resolver::Resolution;
use super::state::{CacheWork, Client, Exchange, Origin, OriginState, RequestBody};
use super::worker::{Step, Worker};
use crate::output::Output;
use crate::session::Phase;

/// What [`Worker::forward_request_body`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BodyStep {
    /// Body bytes (if any) were queued and the origin flushed.
    Flushed,
    /// Nothing to do yet: no body, or no origin connection yet (nothing was flushed).
    Waiting,
    /// The body was malformed and the exchange aborted; the client must be flushed.
    Aborted,
}

/// The last chunk, the trailer fields that may be forwarded, and the final CRLF.
pub(super) fn write_last_chunk_with_trailers(
    out: &mut Vec<u8>,
    decoder: &ChunkedDecoder,
    with_trailers: bool,
) {
    out.extend_from_slice(b"0\r\n");
    for (name, value) in decoder.trailers() {
        if with_trailers && coldwire_http::allowed_in_trailers(name) {
            out.extend_from_slice(name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
}

impl<D: Driver> Worker<D> {
    /// Starts forwarding a request: the exchange is created, then the origin is resolved
    /// and a connection taken or opened.
    pub(super) fn start_exchange(
        &mut self,
        client: &mut Client,
        head: &RequestHead<'_>,
        destination: &Destination<'_>,
        body: RequestBody,
        cache: CacheWork,
    ) {
        let mut request = self.driver.take_vec();
        write_upstream_request(
            &mut request,
            head,
            &destination.path_and_query,
            &destination.authority,
            &self.config.name,
            cache.stored.as_deref(),
        );
        let has_body = !matches!(body, RequestBody::Done);
        let exchange = Exchange {
            host: destination.host.to_owned(),
            port: destination.port,
            address: None,
            origin: None,
            request,
            head_only: head.method() == coldwire_http::Method::Head,
            version: head.version(),
            keep_alive: head.keep_alive() && self.drain_deadline.is_none(),
            body,
            accepts_trailers: head
                .header_values("te")
                .flat_map(comma_list)
                .any(|coding| strip_parameters(coding).eq_ignore_ascii_case(b"trailers")),
            retry_allowed: is_idempotent(head.method()) && !has_body,
            retried: false,
            reused: false,
            cache,
            response: None,
            request_time: self.wall_clock,
            log_cache: "-",
            upstream_time: None,
            interim_skip: 0,
            // The proxy answers `Expect: 100-continue` itself (client.rs).
            continue_sent: head.expects_continue(),
        };
        client.exchange = Some(exchange);
        // The client's timer now only guards against a silent origin (its own timer
        // answers 504 first).
        client.session.enter(&mut self.driver, Phase::Idle);
        let due = self.upstream_deadline() + self.config.upstream_timeout;
        client.session.set_deadline(&mut self.driver, due);
        self.resolve_for(client);
    }

    /// Resolves the exchange's host; connects at once when the address is known.
    fn resolve_for(&mut self, client: &mut Client) {
        let Some(exchange) = client.exchange.as_ref() else {
            return;
        };
        let (host, port) = (exchange.host.clone(), exchange.port);
        let now = self.driver.now();
        match self.resolver.resolve(&host, now) {
            Ok(Resolution::Ready(ip)) => self.open_upstream(client, SocketAddr::new(ip, port)),
            Ok(Resolution::Pending) => {
                self.resolving
                    .entry(host)
                    .or_default()
                    .push(client.session.id);
            }
            Err(_) => self.end_with_error(client, Status::BAD_GATEWAY),
        }
    }

    /// Resolver answers arrived: continue every client that waited for them.
    pub(super) fn on_resolved(&mut self) {
        let now = self.driver.now();
        for (name, answer) in self.resolver.take_answers(now) {
            let waiting = self.resolving.remove(&name).unwrap_or_default();
            for id in waiting {
                let Some(mut client) = self.take_client(id) else {
                    continue;
                };
                let step = match (&answer, client.tunnel.is_some()) {
                    (Ok(ip), true) => self.open_tunnel(&mut client, *ip),
                    (Ok(ip), false) => {
                        let port = client
                            .exchange
                            .as_ref()
                            .map_or(80, |exchange| exchange.port);
                        self.open_upstream(&mut client, SocketAddr::new(*ip, port));
                        if client.exchange.is_none() {
                            self.flush_client(&mut client)
                        } else {
                            Step::Keep
                        }
                    }
                    (Err(_), true) => self.tunnel_failed(&mut client),
                    (Err(_), false) => self.fail_before_response(&mut client, Status::BAD_GATEWAY),
                };
                self.put_client(client, step);
            }
        }
    }

    /// Sends the request on a pooled connection to `address`, or a new one.
    pub(super) fn open_upstream(&mut self, client: &mut Client, address: SocketAddr) {
        let client_id = client.session.id;
        let Some(exchange) = client.exchange.as_mut() else {
            return;
        };
        exchange.address = Some(address);
        let pooled = if exchange.retried {
            None
        } else {
            self.take_pooled(address)
        };
        let mut origin = match pooled {
            Some(mut origin) => {
                exchange.reused = true;
                origin.state = OriginState::Exchange(client_id);
                origin
            }
            None => match self.driver.connect(address) {
                Ok(id) => {
                    exchange.reused = false;
                    Origin {
                        id,
                        address,
                        state: OriginState::Exchange(client_id),
                        connected: false,
                        head: Vec::new(),
                        received_any: false,
                        waiting_for_client: false,
                    }
                }
                Err(_) => {
                    self.end_with_error(client, Status::BAD_GATEWAY);
                    return;
                }
            },
        };
        origin.received_any = false;
        origin.waiting_for_client = false;
        origin.head.clear();
        exchange.origin = Some(origin.id);
        exchange.request_time = self.wall_clock;
        let mut request = self.driver.take_vec();
        request.extend_from_slice(&exchange.request);
        self.driver.send(origin.id, Chunk::Owned(request));
        let deadline = self.upstream_deadline();
        self.driver.set_timer(origin.id, deadline);
        self.arm_response_head_read(origin.id);
        let id = origin.id;
        self.put_origin(origin);
        // Request body bytes already received go right after the head. (A malformed body
        // ends the exchange here; the callers flush the client when it has none left.)
        if let BodyStep::Waiting = self.forward_request_body(client) {
            let _ = self.driver.flush(id);
        }
    }

    fn take_pooled(&mut self, address: SocketAddr) -> Option<Origin> {
        while let Some(id) = self.pool.take(address) {
            if let Some(origin) = self.take_origin(id) {
                if origin.state == OriginState::Idle {
                    return Some(origin);
                }
                self.put_origin(origin);
            }
        }
        None
    }

    /// Forwards request body bytes from the client's input to the origin: a
    /// `Content-Length` body as received, a chunked body decoded strictly and written again
    /// in canonical form (no chunk extensions; trailers only the fields allowed there). A
    /// malformed chunked body aborts the exchange at once ([`Worker::abort_malformed_body`]):
    /// the caller must then flush the client.
    pub(super) fn forward_request_body(&mut self, client: &mut Client) -> BodyStep {
        let Some(exchange) = client.exchange.as_mut() else {
            return BodyStep::Waiting;
        };
        let Some(origin) = exchange.origin else {
            return BodyStep::Waiting;
        };
        if matches!(exchange.body, RequestBody::Done) {
            return BodyStep::Waiting;
        }
        if let Some(input) = client.session.input.as_mut() {
            let available = input.filled();
            let mut bytes = self.driver.take_vec();
            let taken = match &mut exchange.body {
                RequestBody::Done => 0,
                RequestBody::Length(remaining) => {
                    let take = available
                        .len()
                        .min(usize::try_from(*remaining).unwrap_or(usize::MAX));
                    *remaining -= take as u64;
                    bytes.extend_from_slice(&available[..take]);
                    take
                }
                RequestBody::Chunked(decoder) => {
                    match decoder.decode(available, |data| write_chunk(&mut bytes, data)) {
                        Ok(progress) => {
                            if progress.done {
                                write_last_chunk_with_trailers(&mut bytes, decoder, true);
                            }
                            progress.consumed
                        }
                        Err(_) => {
                            self.abort_malformed_body(client);
                            return BodyStep::Aborted;
                        }
                    }
                }
            };
            input.consume(taken);
            if !bytes.is_empty() {
                self.driver.send(origin, Chunk::Owned(bytes));
            }
            if matches!(&exchange.body, RequestBody::Length(0))
                || matches!(&exchange.body, RequestBody::Chunked(decoder) if decoder.is_done())
            {
                exchange.body = RequestBody::Done;
            }
        }
        let done = matches!(exchange.body, RequestBody::Done);
        match self.driver.flush(origin) {
            Flush::Done if !done => {
                client.body_blocked = false;
                self.driver.recv(client.session.id);
            }
            Flush::Pending if !done => client.body_blocked = true,
            _ => {}
        }
        BodyStep::Flushed
    }

    /// A chunked request body turned out malformed: the half-sent request is aborted (its
    /// origin connection closed, never pooled, so no byte after the error reaches the
    /// origin), and the client gets a 400 and a closed connection — or, when the origin had
    /// already begun its answer, just the close (the client sees a truncated response).
    pub(super) fn abort_malformed_body(&mut self, client: &mut Client) {
        let Some(exchange) = client.exchange.take() else {
            return;
        };
        self.http.rejected += 1;
        if let Some(origin) = exchange.origin.and_then(|id| self.take_origin(id)) {
            self.driver.close(origin.id);
        }
        if let Some(input) = client.session.input.take() {
            self.driver.recycle(input);
        }
        client.session.close_after_write = true;
        match exchange.response {
            None => {
                let mut output = Output::new(client.session.id);
                self.answer_error(
                    client,
                    exchange.version,
                    Status::BAD_REQUEST,
                    false,
                    &mut output,
                );
                output.finish(&mut self.driver);
                client.session.linger = true;
            }
            Some(progress) => {
                self.log_line(
                    client,
                    progress.status,
                    progress.body_bytes,
                    "aborted",
                    None,
                );
                self.http.count_response(502);
                client.session.linger = false;
            }
        }
        // Dropping the exchange releases its fill claim (if it led one): followers go on.
    }

    /// The origin took queued request bytes: read more body from the client.
    pub(super) fn on_origin_sent(&mut self, origin: Origin) {
        let state = origin.state;
        self.put_origin(origin);
        match state {
            OriginState::Exchange(client_id) => {
                if let Some(mut client) = self.take_client(client_id) {
                    if client.body_blocked {
                        client.body_blocked = false;
                        let has_input = client
                            .session
                            .input
                            .as_ref()
                            .is_some_and(|input| !input.is_empty());
                        if !has_input {
                            self.driver.recv(client_id);
                        } else if let BodyStep::Aborted = self.forward_request_body(&mut client) {
                            let step = self.flush_client(&mut client);
                            self.put_client(client, step);
                            return;
                        }
                    }
                    self.put_client(client, Step::Keep);
                }
            }
            OriginState::Tunnel(client_id) => self.tunnel_origin_drained(client_id),
            OriginState::Idle => {}
        }
    }

    /// An origin connection finished connecting.
    pub(super) fn on_origin_connected(&mut self, id: ConnectionId) {
        let Some(mut origin) = self.take_origin(id) else {
            return;
        };
        origin.connected = true;
        let state = origin.state;
        self.put_origin(origin);
        if let OriginState::Tunnel(client_id) = state {
            self.tunnel_established(client_id);
        }
    }

    /// The origin closed or failed.
    pub(super) fn on_origin_closed(&mut self, origin: Origin, error: Option<std::io::Error>) {
        match origin.state {
            OriginState::Idle => self.close_origin(origin),
            OriginState::Tunnel(client_id) => {
                if !origin.connected {
                    // The connect failed (refused, unreachable): 502, as for a request.
                    self.driver.close(origin.id);
                    if let Some(mut client) = self.take_client(client_id) {
                        if let Some(tunnel) = client.tunnel.as_mut() {
                            tunnel.origin = None;
                        }
                        let step = self.tunnel_failed(&mut client);
                        self.put_client(client, step);
                    }
                } else if error.is_none() {
                    self.on_tunnel_origin_closed(origin, client_id);
                } else {
                    self.driver.close(origin.id);
                    if let Some(client) = self.take_client(client_id) {
                        self.put_client(client, Step::Close);
                    }
                }
            }
            OriginState::Exchange(client_id) => {
                let Some(mut client) = self.take_client(client_id) else {
                    self.driver.close(origin.id);
                    return;
                };
                let step = self.exchange_origin_closed(&mut client, origin, error);
                self.put_client(client, step);
            }
        }
    }

    fn exchange_origin_closed(
        &mut self,
        client: &mut Client,
        origin: Origin,
        error: Option<std::io::Error>,
    ) -> Step {
        let received_any = origin.received_any;
        self.driver.close(origin.id);
        let Some(exchange) = client.exchange.as_mut() else {
            return Step::Close;
        };
        exchange.origin = None;
        match exchange.response.as_ref() {
            None => {
                let stale_connection = exchange.reused && !received_any;
                if stale_connection && exchange.retry_allowed && !exchange.retried {
                    exchange.retried = true;
                    let Some(address) = exchange.address else {
                        return Step::Close;
                    };
                    self.open_upstream(client, address);
                    if client.exchange.is_none() {
                        return self.flush_client(client);
                    }
                    return Step::Keep;
                }
                self.fail_before_response(client, Status::BAD_GATEWAY)
            }
            Some(progress) => {
                let clean_end = error.is_none()
                    && progress.framing == coldwire_http::ResponseFraming::UntilClose;
                if clean_end {
                    self.finish_response(client, None)
                } else {
                    // Truncated: the client must see an error, and nothing is stored.
                    let (status, bytes) = (progress.status, progress.body_bytes);
                    self.log_line(client, status, bytes, "aborted", None);
                    self.http.count_response(502);
                    Step::Close
                }
            }
        }
    }

    /// The origin's timer: a pooled connection idled out, or an origin is too slow.
    pub(super) fn on_origin_timer(&mut self, origin: Origin) {
        match origin.state {
            OriginState::Idle => self.close_origin(origin),
            OriginState::Tunnel(client_id) => {
                if origin.connected {
                    self.put_origin(origin);
                } else {
                    self.driver.close(origin.id);
                    if let Some(mut client) = self.take_client(client_id) {
                        if let Some(tunnel) = client.tunnel.as_mut() {
                            tunnel.origin = None;
                        }
                        let step = self.tunnel_failed(&mut client);
                        self.put_client(client, step);
                    }
                }
            }
            OriginState::Exchange(client_id) => {
                self.driver.close(origin.id);
                let Some(mut client) = self.take_client(client_id) else {
                    return;
                };
                let started = client
                    .exchange
                    .as_ref()
                    .is_some_and(|exchange| exchange.response.is_some());
                if let Some(exchange) = client.exchange.as_mut() {
                    exchange.origin = None;
                }
                let step = if started {
                    // Cut mid-body: log what the client got before the close.
                    let sent = client
                        .exchange
                        .as_ref()
                        .and_then(|exchange| exchange.response.as_ref())
                        .map(|progress| (progress.status, progress.body_bytes));
                    if let Some((status, bytes)) = sent {
                        self.log_line(&mut client, status, bytes, "aborted", None);
                    }
                    Step::Close
                } else {
                    self.fail_before_response(&mut client, Status::GATEWAY_TIMEOUT)
                };
                self.put_client(client, step);
            }
        }
    }

    /// Ends the exchange with an error answer (nothing of the response was sent yet) and
    /// flushes it.
    pub(super) fn fail_before_response(&mut self, client: &mut Client, status: Status) -> Step {
        if client.exchange.is_none() {
            return Step::Close;
        }
        self.end_with_error(client, status);
        self.flush_client(client)
    }

    /// Ends the exchange with an error answer queued for the client (not flushed).
    pub(super) fn end_with_error(&mut self, client: &mut Client, status: Status) {
        if self.answer_stale_on_error(client, status) {
            return;
        }
        let Some(exchange) = client.exchange.take() else {
            return;
        };
        if let Some(origin) = exchange.origin.and_then(|id| self.take_origin(id)) {
            self.driver.close(origin.id);
        }
        let body_pending = !matches!(exchange.body, RequestBody::Done);
        let keep_alive = exchange.keep_alive && !body_pending;
        let mut output = Output::new(client.session.id);
        self.answer_error(client, exchange.version, status, keep_alive, &mut output);
        output.finish(&mut self.driver);
        if !keep_alive {
            client.session.close_after_write = true;
            client.session.linger = true;
        }
    }
}
