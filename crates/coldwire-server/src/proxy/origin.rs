//! The origin connection's state machine: for each event on an upstream connection —
//! connected, bytes received, output written, closed, timer — one handler that matches on
//! its [`OriginState`]: idle in the pool, carrying a client's exchange (handed to the
//! response phases and `failure.rs`), or one end of a tunnel (`tunnel.rs`).
//!
//! Invariants: an idle pooled connection must stay silent — bytes, a close or its timer
//! end it; an event for a connection whose client is gone closes it.

use coldwire_io::{Buffer, ConnectionId, Driver};

use super::state::{Origin, OriginState};
use super::worker::Worker;

impl<D: Driver> Worker<D> {
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

    /// The origin took the queued bytes.
    pub(super) fn on_origin_sent(&mut self, origin: Origin) {
        let state = origin.state;
        self.put_origin(origin);
        match state {
            OriginState::Exchange(client_id) => self.request_body_taken(client_id),
            OriginState::Tunnel(client_id) => self.tunnel_origin_drained(client_id),
            OriginState::Idle => {}
        }
    }

    /// The origin closed (`error: None`) or failed.
    pub(super) fn on_origin_closed(&mut self, origin: Origin, error: Option<std::io::Error>) {
        match origin.state {
            OriginState::Idle => self.close_origin(origin),
            OriginState::Tunnel(client_id) => self.tunnel_origin_closed(origin, client_id, error),
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

    /// The origin's timer: a pooled connection idled out, a connect took too long, or an
    /// origin is too slow.
    pub(super) fn on_origin_timer(&mut self, origin: Origin) {
        match origin.state {
            OriginState::Idle => self.close_origin(origin),
            OriginState::Tunnel(client_id) => self.tunnel_origin_timer(origin, client_id),
            OriginState::Exchange(client_id) => {
                let Some(mut client) = self.take_client(client_id) else {
                    self.driver.close(origin.id);
                    return;
                };
                let step = self.exchange_origin_timer(&mut client, origin);
                self.put_client(client, step);
            }
        }
    }
}
