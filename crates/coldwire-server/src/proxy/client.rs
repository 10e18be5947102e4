//! The client connection's state machine: for each event on a downstream connection —
//! accepted, bytes received, output written, closed, timer — one handler that matches on
//! the [`ClientState`] and either acts or hands over to the phase that owns that state
//! (the request path in `request.rs`, an exchange's body in `send.rs` and `body.rs`, a
//! tunnel in `tunnel.rs`, a parked request in `collapse.rs`). What can happen in a state
//! is read in the `match` arms here.
//!
//! Also here, the transitions that end an answer: [`Worker::flush_client`] and
//! [`Worker::after_output`] (next pipelined request, idle, close or linger).
//!
//! Invariants: `Closing` and `Lingering` never parse input again (a client's leftovers,
//! such as the rest of a request body after an early answer, are never read as a request);
//! a connection is closed only by `Step::Close` returned to the worker or by
//! [`Worker::close_client`], which also closes the origin connection working for it.

use std::io;
use std::net::SocketAddr;

use coldwire_http::Status;
use coldwire_io::{Buffer, ConnectionId, Driver, Flush};

use super::collapse::POLL;
use super::problem::{Problem, ProblemKind};
use super::send::BodyStep;
use super::state::{Client, ClientState};
use super::worker::{Step, Worker};
use crate::session::{Phase, Session, append_input};

impl<D: Driver> Worker<D> {
    /// A new client connection: waiting for its first request.
    pub(super) fn on_accepted(&mut self, connection: ConnectionId, peer: SocketAddr) {
        let now = self.driver.now();
        let mut session = Session::new(connection, peer, now);
        session.set_deadline(&mut self.driver, now + self.config.runtime.idle_timeout);
        if self.drain_deadline.is_some() {
            // Accepted as the listener closed (a completion already queued): its request
            // is answered with `Connection: close`, if it comes soon.
            session.drain_idle(&mut self.driver);
        }
        let client = Box::new(Client {
            session,
            denied: !self.config.acl.allows(peer.ip()),
            state: ClientState::Requests,
            request_line: None,
        });
        self.put_client(client, Step::Keep);
        self.clients += 1;
        self.driver.recv(connection);
    }

    /// Bytes from the client.
    pub(super) fn on_client_data(&mut self, client: &mut Client, buffer: Buffer) -> Step {
        match client.state {
            ClientState::Lingering => {
                self.driver.recycle(buffer);
                self.driver.recv(client.session.id);
                Step::Keep
            }
            ClientState::Closing { .. } => {
                // The connection ends after the answer being written: nothing it sends
                // now is a request.
                self.driver.recycle(buffer);
                Step::Keep
            }
            ClientState::Tunnel(_) => self.tunnel_from_client(client, buffer),
            ClientState::Exchange(_) => {
                let arrived = buffer.filled_len();
                self.append_input(client, buffer);
                self.request_body_arrived(client, arrived);
                if let BodyStep::Aborted = self.forward_request_body(client) {
                    return self.flush_client(client);
                }
                Step::Keep
            }
            ClientState::Requests | ClientState::Parked(_) => {
                client.session.note_arrival(self.driver.now());
                let may_complete = self.append_input(client, buffer);
                let session = &client.session;
                if !may_complete && session.phase == Phase::Head {
                    let length = session.input.as_ref().map_or(0, Buffer::filled_len);
                    if length > self.config.runtime.limits.max_head_bytes {
                        let limit = self.config.runtime.limits.max_head_bytes;
                        let problem = Problem::new(
                            Status::REQUEST_HEADER_FIELDS_TOO_LARGE,
                            ProblemKind::HttpRequestError,
                        )
                        .details(format!(
                            "request head over {limit} bytes (--max-head-bytes)"
                        ));
                        return self.reject(client, &problem);
                    }
                    self.driver.recv(client.session.id);
                    return Step::Keep;
                }
                self.process(client)
            }
        }
    }

    /// Appends received bytes to the client's input; true when they hold a line end (only
    /// then can a head have completed).
    fn append_input(&mut self, client: &mut Client, buffer: Buffer) -> bool {
        append_input(&mut self.driver, &mut client.session.input, buffer)
    }

    /// Everything queued for the client before a `Flush::Pending` is written.
    pub(super) fn on_client_sent(&mut self, client: &mut Client) -> Step {
        match client.state {
            ClientState::Tunnel(_) => self.tunnel_client_drained(client),
            ClientState::Exchange(_) => self.client_drained(client),
            _ => self.after_output(client),
        }
    }

    /// The client closed its side (`error: None`) or the connection failed.
    pub(super) fn on_client_closed(&mut self, mut client: Box<Client>, error: Option<io::Error>) {
        if let Some(error) = &error {
            self.note_send_error(error);
        }
        match client.state {
            // Half-close: the FIN is passed on, the other direction goes on.
            ClientState::Tunnel(_) if error.is_none() => self.on_tunnel_client_closed(client),
            // Half-close after a whole request (`nc -N`, `curl` uploads, scripts): it is
            // answered, then the connection closes; nothing after the end is read.
            ClientState::Exchange(ref mut exchange)
                if error.is_none() && !exchange.request.body_pending() =>
            {
                exchange.request.keep_alive = false;
                self.put_client(client, Step::Keep);
            }
            _ => self.close_client(client),
        }
    }

    /// The client's timer: the current phase's deadline (see `Session`).
    pub(super) fn on_client_timer(&mut self, client: &mut Client) -> Step {
        if !client.session.deadline_reached(&mut self.driver) {
            return Step::Keep;
        }
        match &client.state {
            // A waiting request's poll: route it again (a hit now, or forward, or wait).
            ClientState::Parked(_) => return self.process(client),
            // Its bytes never pass through here: the driver says whether they moved.
            ClientState::Tunnel(tunnel) if tunnel.spliced || tunnel.kernel.is_some() => {
                return self.spliced_tunnel_deadline(client);
            }
            ClientState::Exchange(_) if client.session.phase == Phase::Head => {
                // The request body's pace (`body_pace.rs`).
                if let Some(step) = self.request_body_deadline(client) {
                    return step;
                }
            }
            ClientState::Exchange(_) if client.session.phase == Phase::Idle => {
                // Waiting for the origin: its own timer decides (504).
                let due = self.upstream_deadline();
                client.session.set_deadline(&mut self.driver, due);
                return Step::Keep;
            }
            _ => {}
        }
        let write_timeout = self.config.runtime.write_timeout;
        if client
            .session
            .survives_deadline(&mut self.driver, write_timeout, &mut self.http)
        {
            Step::Keep
        } else {
            Step::Close
        }
    }

    /// Flushes the client's output and decides what comes next.
    pub(super) fn flush_client(&mut self, client: &mut Client) -> Step {
        match self.driver.flush(client.session.id) {
            Flush::Done => self.after_output(client),
            Flush::Pending => {
                self.wait_for_client(client);
                Step::Keep
            }
            Flush::Failed(error) => {
                self.note_send_error(&error);
                Step::Close
            }
        }
    }

    /// A send to a client failed with `error`. `EIO` is not the network's: a body sent
    /// from the disk store (`sendfile`, `splice`) could not be read, and the store checks
    /// which of its files it can still read (docs/disk-store.md, Errors). On `--io uring`
    /// a file piece is a read linked to a send: when the read fails, the send completes
    /// with `ECANCELED` (the read's own error is not the one reported), so that counts too.
    pub(super) fn note_send_error(&self, error: &io::Error) {
        if let Some(store) = &self.store
            && matches!(error.raw_os_error(), Some(libc::EIO | libc::ECANCELED))
        {
            store.storage_read_failed();
        }
    }

    /// Output waits for the client: the stalled-write deadline applies (progress measured
    /// as bytes the client has not received yet).
    pub(super) fn wait_for_client(&mut self, client: &mut Client) {
        client.session.enter(&mut self.driver, Phase::Writing);
        client.session.progress_mark = self.driver.unsent_bytes(client.session.id);
        let due = self.driver.now() + self.write_timeout();
        client.session.set_deadline(&mut self.driver, due);
    }

    /// Everything queued for the client is written: what the state does next.
    pub(super) fn after_output(&mut self, client: &mut Client) -> Step {
        match client.state {
            ClientState::Closing { linger: false } => Step::Close,
            ClientState::Closing { linger: true } => {
                self.linger(client);
                Step::Keep
            }
            ClientState::Exchange(_) | ClientState::Tunnel(_) | ClientState::Lingering => {
                Step::Keep
            }
            ClientState::Parked(_) => {
                // Earlier answers are out; the waiting request polls again (a write deadline
                // may have replaced its poll while they were being written).
                client.session.enter(&mut self.driver, Phase::Idle);
                let due = self.driver.now() + POLL;
                client.session.set_deadline(&mut self.driver, due);
                Step::Keep
            }
            ClientState::Requests => self.next_request(client),
        }
    }

    /// Answers done: the next pipelined request if one is complete, else wait for one.
    fn next_request(&mut self, client: &mut Client) -> Step {
        if self.request_complete(client) {
            return self.process(client);
        }
        if client.session.input.is_none() {
            if self.drain_deadline.is_some() {
                return Step::Close;
            }
            client.session.enter(&mut self.driver, Phase::Idle);
            let due = self.idle_deadline();
            client.session.set_deadline(&mut self.driver, due);
        }
        self.driver.recv(client.session.id);
        Step::Keep
    }

    /// `Closing` → `Lingering`: shut down writes and drain the client's leftovers until the
    /// linger deadline, so the kernel does not reset the connection under the answer.
    fn linger(&mut self, client: &mut Client) {
        if let Some(input) = client.session.input.take() {
            self.driver.recycle(input);
        }
        self.driver.shutdown_write(client.session.id);
        client.state = ClientState::Lingering;
        client.session.enter(&mut self.driver, Phase::Lingering);
        let due = self.driver.now() + self.config.runtime.linger_timeout;
        client.session.set_deadline(&mut self.driver, due);
        self.driver.recv(client.session.id);
    }
}
