//! Phase 5, send: the request head goes to the chosen origin connection, then the request
//! body streams from the client's input — a `Content-Length` body as received, a chunked
//! body decoded strictly and written again in canonical form (no chunk extensions;
//! trailers only the fields allowed there) — with back-pressure both ways: the client is
//! read again only once the origin has taken what was sent.
//!
//! Invariants: the head is sent from the copy kept in the exchange (a retry sends it
//! again); a malformed chunked body ends the exchange at once — the half-sent request is
//! aborted (its origin connection closed, never pooled, so no byte after the error reaches
//! the origin) and the client gets a 400 and a close, or only the close when the response
//! had started.

use coldwire_http::{Status, write_chunk};
use coldwire_io::{Chunk, ConnectionId, Driver, Flush};

use super::exchange::RequestBody;
use super::head::write_last_chunk_with_trailers;
use super::problem::{Problem, ProblemKind};
use super::state::{Client, ClientState, Origin};
use super::worker::{Step, Worker};
use crate::output::Output;

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

impl<D: Driver> Worker<D> {
    /// Sends the exchange's request head on `origin` (pooled or connecting), arms the
    /// response head's receive and the upstream timer, and forwards the body bytes already
    /// received. (A malformed body ends the exchange here; the callers flush the client
    /// when it has none left.)
    pub(super) fn send_request(&mut self, client: &mut Client, mut origin: Origin) {
        let Some(exchange) = client.state.exchange_mut() else {
            return;
        };
        origin.received_any = false;
        origin.waiting_for_client = false;
        origin.unsent_mark = u64::MAX;
        origin.head.clear();
        exchange.upstream.origin = Some(origin.id);
        exchange.upstream.request_time = self.wall_clock;
        let mut request = self.driver.take_vec();
        request.extend_from_slice(&exchange.upstream.request_head);
        self.driver.send(origin.id, Chunk::Owned(request));
        let deadline = self.upstream_deadline();
        self.driver.set_timer(origin.id, deadline);
        self.arm_response_head_read(origin.id);
        let id = origin.id;
        self.put_origin(origin);
        // Request body bytes already received go right after the head.
        if let BodyStep::Waiting = self.forward_request_body(client) {
            let _ = self.driver.flush(id);
        }
    }

    /// Forwards request body bytes from the client's input to the origin: a
    /// `Content-Length` body as received, a chunked body decoded strictly and written again
    /// in canonical form (no chunk extensions; trailers only the fields allowed there). A
    /// malformed chunked body aborts the exchange at once ([`Worker::abort_malformed_body`]):
    /// the caller must then flush the client.
    pub(super) fn forward_request_body(&mut self, client: &mut Client) -> BodyStep {
        let Some(exchange) = client.state.exchange_mut() else {
            return BodyStep::Waiting;
        };
        let Some(origin) = exchange.upstream.origin else {
            return BodyStep::Waiting;
        };
        let request = &mut exchange.request;
        if !request.body_pending() {
            return BodyStep::Waiting;
        }
        if let Some(input) = client.session.input.as_mut() {
            let available = input.filled();
            let mut bytes = self.driver.take_vec();
            let taken = match &mut request.body {
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
                // The origin is receiving: its wait for the response starts again, and
                // its progress is measured from here (`exchange_origin_timer`).
                let deadline = self.upstream_deadline();
                self.driver.set_timer(origin, deadline);
                if let Some(mut connection) = self.take_origin(origin) {
                    connection.unsent_mark = u64::MAX;
                    self.put_origin(connection);
                }
            }
            if matches!(&request.body, RequestBody::Length(0))
                || matches!(&request.body, RequestBody::Chunked(decoder) if decoder.is_done())
            {
                request.body = RequestBody::Done;
            }
        }
        let done = !request.body_pending();
        match self.driver.flush(origin) {
            Flush::Done if !done => {
                request.body_blocked = false;
                self.driver.recv(client.session.id);
            }
            Flush::Pending if !done => request.body_blocked = true,
            _ => {}
        }
        if done {
            self.request_body_done(client);
        }
        BodyStep::Flushed
    }

    /// A chunked request body turned out malformed: the half-sent request is aborted (its
    /// origin connection closed, never pooled, so no byte after the error reaches the
    /// origin), and the client gets a 400 and a closed connection — or, when the origin had
    /// already begun its answer, just the close (the client sees a truncated response).
    pub(super) fn abort_malformed_body(&mut self, client: &mut Client) {
        let Some(exchange) = client.state.take_exchange() else {
            return;
        };
        self.http.rejected += 1;
        if let Some(origin) = exchange.upstream.origin.and_then(|id| self.take_origin(id)) {
            self.driver.close(origin.id);
        }
        if let Some(input) = client.session.input.take() {
            self.driver.recycle(input);
        }
        match exchange.response {
            None => {
                let mut output = Output::new(client.session.id);
                let version = exchange.request.version;
                let problem = Problem::new(Status::BAD_REQUEST, ProblemKind::HttpRequestError)
                    .details("malformed request body (chunked framing)");
                self.answer_problem(client, version, &problem, false, &mut output);
                output.finish(&mut self.driver);
                client.state = ClientState::Closing { linger: true };
            }
            Some(progress) => {
                let (status, bytes) = (progress.status, progress.body_bytes);
                self.log_line(client, status, bytes, "aborted", None);
                self.http
                    .count_timed_response(502, client.session.request_elapsed(self.driver.now()));
                client.state = ClientState::Closing { linger: false };
            }
        }
        // Dropping the exchange releases its fill claim (if it led one): followers go on.
    }

    /// The origin took the queued request bytes: read more body from the client.
    pub(super) fn request_body_taken(&mut self, client_id: ConnectionId) {
        let Some(mut client) = self.take_client(client_id) else {
            return;
        };
        let blocked = client
            .state
            .exchange_mut()
            .is_some_and(|exchange| std::mem::take(&mut exchange.request.body_blocked));
        if blocked {
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
