//! CONNECT tunnels ([`ClientState::Tunnel`]): resolve and connect to `host:port`, answer
//! `200 Connection established`, then relay bytes both ways until both sides have
//! finished — copied through the loop, or spliced by the driver (`splice.rs`). Each copied
//! direction is back-pressured: a side is read again only once the other side has taken
//! what was sent. A side that ends its stream (FIN) is passed on as a FIN to the other
//! (half-close), so protocols that finish one direction first work.
//!
//! Invariants: the client's bytes that came with its CONNECT head go first; a tunnel whose
//! upstream cannot be resolved or connected answers 502 and closes (503
//! `connection_limit_reached` when the proxy itself is out of connections or descriptors); the tunnel's origin
//! connection is closed with its client.

use std::net::{IpAddr, SocketAddr};

use coldwire_http::{Status, Version};
use coldwire_io::{Buffer, Chunk, ConnectionId, Driver, Flush, is_out_of_connections};

use super::own_address::is_own_address;
use super::problem::{Problem, ProblemKind, connect_problem};
use super::resolver::Resolution;
use super::splice::TunnelSplice;
use super::state::{Client, ClientState, Origin, OriginState, Tunnel};
use super::worker::{Step, Worker};
use crate::output::Output;
use crate::session::Phase;

const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";

impl<D: Driver> Worker<D> {
    /// A CONNECT request: the connection becomes a tunnel once the origin answers.
    pub(super) fn start_tunnel(&mut self, client: &mut Client, host: String, port: u16) {
        client.state = ClientState::Tunnel(Tunnel {
            origin: None,
            port,
            client_done: false,
            origin_done: false,
            spliced: false,
            spliced_seen: 0,
            kernel: None,
            ending: [false; 2],
            passed: [0; 2],
        });
        client.session.enter(&mut self.driver, Phase::Idle);
        let due = self.upstream_deadline();
        client.session.set_deadline(&mut self.driver, due);
        let now = self.driver.now();
        match self.resolver.resolve(&host, now) {
            Ok(Resolution::Ready(ip)) => {
                // Errors are answered by `open_tunnel` (the caller flushes).
                let _ = self.open_tunnel(client, ip);
            }
            Ok(Resolution::Pending) => {
                self.resolving
                    .entry(host)
                    .or_default()
                    .push(client.session.id);
            }
            Err(error) => {
                let problem = Problem::new(Status::BAD_GATEWAY, ProblemKind::DnsError)
                    .next_hop(format!("{host}:{port}"))
                    .details(error);
                self.tunnel_refused(client, &problem);
            }
        }
    }

    /// Connects the tunnel's upstream end.
    pub(super) fn open_tunnel(&mut self, client: &mut Client, ip: IpAddr) -> Step {
        let Some(tunnel) = client.state.tunnel_mut() else {
            return Step::Close;
        };
        let address = SocketAddr::new(ip, tunnel.port);
        if let Some(line) = client.request_line.as_mut() {
            line.upstream = Some(address);
        }
        if is_own_address(&self.own_addresses, address) {
            let problem = Problem::new(Status::FORBIDDEN, ProblemKind::DestinationIpProhibited)
                .next_hop(address.to_string())
                .details("the proxy's own listening or admin address");
            return self.tunnel_failed(client, &problem);
        }
        match self.driver.connect(address) {
            Ok(id) => {
                tunnel.origin = Some(id);
                let deadline = self.upstream_deadline();
                self.driver.set_timer(id, deadline);
                let state = OriginState::Tunnel(client.session.id);
                self.put_origin(Origin::connecting(id, address, state));
                Step::Keep
            }
            Err(error) => {
                // Out of connections: a 503 (`connection_limit_reached`), counted and said
                // as an exchange's; anything else a 502.
                if is_out_of_connections(&error) {
                    self.note_out_of_connections(&error);
                }
                let problem = connect_problem(&error).next_hop(address.to_string());
                self.tunnel_failed(client, &problem)
            }
        }
    }

    /// The tunnel cannot be opened: the problem's answer queued, then close (lingering).
    fn tunnel_refused(&mut self, client: &mut Client, problem: &Problem) {
        client.state = ClientState::Closing { linger: true };
        let mut output = Output::new(client.session.id);
        self.answer_problem(client, Version::Http11, problem, false, &mut output);
        output.finish(&mut self.driver);
    }

    /// The tunnel could not be opened: the problem's answer (502, 503, 504), then close.
    pub(super) fn tunnel_failed(&mut self, client: &mut Client, problem: &Problem) -> Step {
        if let Some(origin) = client.state.origin().and_then(|id| self.take_origin(id)) {
            self.driver.close(origin.id);
        }
        self.tunnel_refused(client, problem);
        self.flush_client(client)
    }

    /// The upstream end connected: answer 200 and start relaying.
    pub(super) fn tunnel_established(&mut self, client_id: ConnectionId) {
        let Some(mut client) = self.take_client(client_id) else {
            return;
        };
        let Some(origin_id) = client.state.origin() else {
            self.put_client(client, Step::Close);
            return;
        };
        self.driver.cancel_timer(origin_id);
        let mut answer = self.driver.take_vec();
        answer.extend_from_slice(ESTABLISHED);
        self.driver.send(client_id, Chunk::Owned(answer));
        self.http.count_response(200);
        self.log_answer(&mut client, 200, 0, Some("tunnel"));
        let due = self.idle_deadline();
        client.session.set_deadline(&mut self.driver, due);
        // Bytes the client sent after its CONNECT head (a TLS ClientHello) go first.
        if let Some(input) = client.session.input.take() {
            if !input.is_empty() {
                let mut early = self.driver.take_vec();
                early.extend_from_slice(input.filled());
                self.driver.send(origin_id, Chunk::Owned(early));
            }
            self.driver.recycle(input);
        }
        let client_flush = self.driver.flush(client_id);
        let origin_flush = self.driver.flush(origin_id);
        if matches!(client_flush, Flush::Done) && matches!(origin_flush, Flush::Done) {
            if let Some(pair) = self.kernel_splice_tunnel(client_id, origin_id) {
                if let Some(tunnel) = client.state.tunnel_mut() {
                    tunnel.kernel = Some(pair);
                }
                self.put_client(client, Step::Keep);
                return;
            }
            match self.splice_tunnel(client_id, origin_id) {
                TunnelSplice::Copied => {}
                TunnelSplice::Spliced => {
                    if let Some(tunnel) = client.state.tunnel_mut() {
                        tunnel.spliced = true;
                    }
                    self.put_client(client, Step::Keep);
                    return;
                }
                TunnelSplice::Broken => {
                    self.put_client(client, Step::Close);
                    return;
                }
            }
        }
        let step = match client_flush {
            Flush::Failed(_) => Step::Close,
            _ => Step::Keep,
        };
        match origin_flush {
            Flush::Done => self.driver.recv_eager(client_id),
            Flush::Pending => {}
            Flush::Failed(_) => {
                self.put_client(client, Step::Close);
                return;
            }
        }
        self.driver.recv_eager(origin_id);
        self.put_client(client, step);
    }

    /// Client bytes for the tunnel.
    pub(super) fn tunnel_from_client(&mut self, client: &mut Client, buffer: Buffer) -> Step {
        if client
            .state
            .tunnel_mut()
            .is_some_and(|tunnel| tunnel.kernel.is_some())
        {
            return self.kernel_tunnel_passed(client, 0, buffer);
        }
        let Some(origin_id) = client.state.origin() else {
            self.driver.recycle(buffer);
            return Step::Close;
        };
        let due = self.idle_deadline();
        client.session.set_deadline(&mut self.driver, due);
        let mut bytes = self.driver.take_vec();
        bytes.extend_from_slice(buffer.filled());
        self.driver.recycle(buffer);
        self.driver.send(origin_id, Chunk::Owned(bytes));
        match self.driver.flush(origin_id) {
            Flush::Done => {
                self.driver.recv_eager(client.session.id);
                Step::Keep
            }
            Flush::Pending => Step::Keep,
            Flush::Failed(_) => Step::Close,
        }
    }

    /// Origin bytes for the tunnel.
    pub(super) fn tunnel_from_origin(
        &mut self,
        origin: Origin,
        client_id: ConnectionId,
        buffer: Buffer,
    ) {
        let origin_id = origin.id;
        self.put_origin(origin);
        let Some(mut client) = self.take_client(client_id) else {
            self.driver.recycle(buffer);
            if let Some(origin) = self.take_origin(origin_id) {
                self.driver.close(origin.id);
            }
            return;
        };
        if client
            .state
            .tunnel_mut()
            .is_some_and(|tunnel| tunnel.kernel.is_some())
        {
            let step = self.kernel_tunnel_passed(&mut client, 1, buffer);
            self.put_client(client, step);
            return;
        }
        let due = self.idle_deadline();
        client.session.set_deadline(&mut self.driver, due);
        let mut bytes = self.driver.take_vec();
        bytes.extend_from_slice(buffer.filled());
        self.driver.recycle(buffer);
        self.driver.send(client_id, Chunk::Owned(bytes));
        let step = match self.driver.flush(client_id) {
            Flush::Done => {
                self.driver.recv_eager(origin_id);
                Step::Keep
            }
            Flush::Pending => Step::Keep,
            Flush::Failed(_) => Step::Close,
        };
        self.put_client(client, step);
    }

    /// The client took everything: read the origin again. Spliced: the origin's direction
    /// has ended (its end of stream was passed on).
    pub(super) fn tunnel_client_drained(&mut self, client: &mut Client) -> Step {
        let Some(tunnel) = client.state.tunnel_mut() else {
            return Step::Keep;
        };
        if tunnel.kernel.is_some() {
            return Step::Keep;
        }
        if tunnel.spliced {
            tunnel.origin_done = true;
            if tunnel.client_done {
                return Step::Close;
            }
            self.driver.shutdown_write(client.session.id);
            return Step::Keep;
        }
        if let Some(origin) = tunnel.origin
            && !tunnel.origin_done
        {
            self.driver.recv_eager(origin);
        }
        Step::Keep
    }

    /// The origin took everything: read the client again.
    pub(super) fn tunnel_origin_drained(&mut self, client_id: ConnectionId) {
        let Some(mut client) = self.take_client(client_id) else {
            return;
        };
        let Some(tunnel) = client.state.tunnel_mut() else {
            self.put_client(client, Step::Keep);
            return;
        };
        if tunnel.kernel.is_some() {
            self.put_client(client, Step::Keep);
            return;
        }
        if tunnel.spliced {
            // Spliced: the client's direction has ended; pass its end of stream on.
            tunnel.client_done = true;
            if tunnel.origin_done {
                self.put_client(client, Step::Close);
                return;
            }
            if let Some(origin) = tunnel.origin {
                self.driver.shutdown_write(origin);
            }
        } else if !tunnel.client_done {
            self.driver.recv_eager(client_id);
        }
        self.put_client(client, Step::Keep);
    }

    /// The client finished sending: pass the FIN on; close when both sides are done.
    pub(super) fn on_tunnel_client_closed(&mut self, mut client: Box<Client>) {
        let Some(tunnel) = client.state.tunnel_mut() else {
            self.close_client(client);
            return;
        };
        if tunnel.kernel.is_some() {
            let step = self.kernel_tunnel_side_ended(&mut client, 0);
            self.put_client(client, step);
            return;
        }
        tunnel.client_done = true;
        let finished = tunnel.origin_done;
        match tunnel.origin {
            Some(origin) if !finished => {
                self.driver.shutdown_write(origin);
                self.put_client(client, Step::Keep);
            }
            _ => self.close_client(client),
        }
    }

    /// The tunnel's origin connection closed (`error: None`) or failed.
    pub(super) fn tunnel_origin_closed(
        &mut self,
        origin: Origin,
        client_id: ConnectionId,
        error: Option<std::io::Error>,
    ) {
        if !origin.connected {
            // The connect failed (refused, unreachable): 502, as for a request.
            let problem = match &error {
                Some(error) => connect_problem(error),
                None => Problem::new(Status::BAD_GATEWAY, ProblemKind::ConnectionTerminated),
            };
            self.tunnel_connect_failed(origin, client_id, problem);
        } else if error.is_none() {
            self.tunnel_origin_finished(origin, client_id);
        } else {
            // A kernel-spliced pair leaves the map before either side closes.
            self.release_kernel_tunnel_of(client_id);
            self.driver.close(origin.id);
            if let Some(client) = self.take_client(client_id) {
                self.put_client(client, Step::Close);
            }
        }
    }

    /// The tunnel's origin timer: only a connect that takes too long has one (502).
    pub(super) fn tunnel_origin_timer(&mut self, origin: Origin, client_id: ConnectionId) {
        if origin.connected {
            self.put_origin(origin);
        } else {
            let problem = Problem::new(Status::GATEWAY_TIMEOUT, ProblemKind::ConnectionTimeout);
            self.tunnel_connect_failed(origin, client_id, problem);
        }
    }

    fn tunnel_connect_failed(&mut self, origin: Origin, client_id: ConnectionId, problem: Problem) {
        let problem = problem.next_hop(origin.address.to_string());
        self.driver.close(origin.id);
        if let Some(mut client) = self.take_client(client_id) {
            if let Some(tunnel) = client.state.tunnel_mut() {
                tunnel.origin = None;
            }
            let step = self.tunnel_failed(&mut client, &problem);
            self.put_client(client, step);
        }
    }

    /// The origin finished sending.
    fn tunnel_origin_finished(&mut self, origin: Origin, client_id: ConnectionId) {
        let origin_id = origin.id;
        self.put_origin(origin);
        let Some(mut client) = self.take_client(client_id) else {
            if let Some(origin) = self.take_origin(origin_id) {
                self.driver.close(origin.id);
            }
            return;
        };
        let Some(tunnel) = client.state.tunnel_mut() else {
            self.put_client(client, Step::Close);
            return;
        };
        if tunnel.kernel.is_some() {
            let step = self.kernel_tunnel_side_ended(&mut client, 1);
            self.put_client(client, step);
            return;
        }
        tunnel.origin_done = true;
        if tunnel.client_done {
            self.close_client(client);
        } else {
            self.driver.shutdown_write(client_id);
            self.put_client(client, Step::Keep);
        }
    }
}
