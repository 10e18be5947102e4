//! Phase 4, choose upstream: the [`Exchange`] is created (the client enters
//! [`ClientState::Exchange`]), the origin's name resolved (at once for IP literals and
//! cached names, else by the resolver's helper thread, whose answers come back through
//! [`Worker::on_resolved`]), and a connection chosen — the most recent idle one to that
//! address from the pool, or a new one — before the send phase (`send.rs`) writes the
//! request on it.
//!
//! Invariants: a retry never takes a pooled connection (a second stale one would fail the
//! same way); a connection taken from the pool is idle ([`OriginState::Idle`]) and leaves
//! it naming its client ([`OriginState::Exchange`]).

use std::net::SocketAddr;

use coldwire_http::fields::{comma_list, strip_parameters};
use coldwire_http::{BodyFraming, Method, RequestHead, Status};

use super::problem::{Problem, ProblemKind, local_connect_error_kind};
use coldwire_io::{Driver, is_out_of_connections};

use super::config::Mode;
use super::error::ExchangeError;
use super::exchange::{CacheWork, ClientRequest, Exchange, ExchangeLog, RequestBody, Upstream};
use super::head::write_upstream_request_for;
use super::own_address::is_own_address;
use super::resolver::Resolution;
use super::route::{Destination, is_idempotent};
use super::state::{Client, ClientState, Origin, OriginState};
use super::worker::{Step, Worker};
use crate::session::Phase;

impl<D: Driver> Worker<D> {
    /// Starts forwarding a request: the exchange is created, then the origin is resolved
    /// and a connection taken or opened.
    pub(super) fn start_exchange(
        &mut self,
        client: &mut Client,
        head: &RequestHead<'_>,
        destination: &Destination<'_>,
        cache: CacheWork,
    ) {
        let mut request_head = self.driver.take_vec();
        // A reverse proxy tells its origin who asked (X-Forwarded-For); a forward proxy
        // does not announce its clients to the sites they visit.
        let forwarded_for =
            matches!(self.config.mode, Mode::Reverse { .. }).then(|| client.session.peer.ip());
        write_upstream_request_for(
            &mut request_head,
            head,
            (&destination.path_and_query, &destination.authority),
            &self.config.name,
            cache.stored.as_deref(),
            forwarded_for,
        );
        let body = match head.body_framing() {
            BodyFraming::None | BodyFraming::Length(0) => RequestBody::Done,
            BodyFraming::Length(length) => RequestBody::Length(length),
            BodyFraming::Chunked => RequestBody::Chunked(Box::default()),
        };
        let has_body = !matches!(body, RequestBody::Done);
        client.state = ClientState::Exchange(Exchange {
            request: ClientRequest {
                version: head.version(),
                keep_alive: head.keep_alive() && self.drain_deadline.is_none(),
                head_only: head.method() == Method::Head,
                accepts_trailers: head
                    .header_values("te")
                    .flat_map(comma_list)
                    .any(|coding| strip_parameters(coding).eq_ignore_ascii_case(b"trailers")),
                // The proxy answers `Expect: 100-continue` itself (request.rs).
                continue_sent: head.expects_continue(),
                body,
                body_blocked: false,
            },
            upstream: Upstream {
                host: destination.host.to_owned(),
                port: destination.port,
                address: None,
                origin: None,
                request_head,
                retry_allowed: is_idempotent(head.method()) && !has_body,
                retried: false,
                reused: false,
                request_time: self.wall_clock,
                interim_skip: 0,
            },
            cache,
            response: None,
            log: ExchangeLog {
                cache: "-",
                upstream_time: None,
            },
        });
        if has_body {
            // The body must keep a minimum pace (`body_pace.rs`).
            self.await_request_body(client);
        } else {
            // The client's timer now only guards against a silent origin (its own timer
            // answers 504 first).
            client.session.enter(&mut self.driver, Phase::Idle);
            let due = self.upstream_deadline() + self.config.upstream_timeout;
            client.session.set_deadline(&mut self.driver, due);
        }
        self.resolve_for(client);
    }

    /// Resolves the exchange's host; connects at once when the address is known.
    fn resolve_for(&mut self, client: &mut Client) {
        let Some(exchange) = client.state.exchange() else {
            return;
        };
        let (host, port) = (exchange.upstream.host.clone(), exchange.upstream.port);
        let now = self.driver.now();
        match self.resolver.resolve(&host, now) {
            Ok(Resolution::Ready(ip)) => self.open_upstream(client, SocketAddr::new(ip, port)),
            Ok(Resolution::Pending) => {
                self.resolving
                    .entry(host)
                    .or_default()
                    .push(client.session.id);
            }
            Err(_) => {
                let error = ExchangeError::origin_failed(ProblemKind::DnsError);
                self.end_with_error(client, error);
            }
        }
    }

    /// Resolver answers arrived: continue every client (exchange or tunnel) that waited for
    /// them.
    pub(super) fn on_resolved(&mut self) {
        let now = self.driver.now();
        for (name, answer) in self.resolver.take_answers(now) {
            let waiting = self.resolving.remove(&name).unwrap_or_default();
            for id in waiting {
                let Some(mut client) = self.take_client(id) else {
                    continue;
                };
                let tunnel = matches!(client.state, ClientState::Tunnel(_));
                let step = match (&answer, tunnel) {
                    (Ok(ip), true) => self.open_tunnel(&mut client, *ip),
                    (Ok(ip), false) => {
                        let port = client
                            .state
                            .exchange()
                            .map_or(80, |exchange| exchange.upstream.port);
                        self.open_upstream(&mut client, SocketAddr::new(*ip, port));
                        self.flush_if_ended(&mut client)
                    }
                    (Err(error), true) => {
                        let problem = Problem::new(Status::BAD_GATEWAY, ProblemKind::DnsError)
                            .next_hop(name.as_str())
                            .details(error.as_str());
                        self.tunnel_failed(&mut client, &problem)
                    }
                    (Err(_), false) => {
                        let error = ExchangeError::origin_failed(ProblemKind::DnsError);
                        self.fail_before_response(&mut client, error)
                    }
                };
                self.put_client(client, step);
            }
        }
    }

    /// Sends the request on a pooled connection to `address`, or a new one.
    pub(super) fn open_upstream(&mut self, client: &mut Client, address: SocketAddr) {
        let client_id = client.session.id;
        let Some(exchange) = client.state.exchange_mut() else {
            return;
        };
        exchange.upstream.address = Some(address);
        if let Some(line) = client.request_line.as_mut() {
            line.upstream = Some(address);
        }
        if is_own_address(&self.own_addresses, address) {
            // The admin endpoint or the proxy itself: never through the proxy.
            let refusal = ExchangeError::policy(Status::FORBIDDEN)
                .because(ProblemKind::DestinationIpProhibited);
            self.end_with_error(client, refusal);
            return;
        }
        let pooled = if exchange.upstream.retried {
            None
        } else {
            self.take_pooled(address)
        };
        let origin = match pooled {
            Some(mut origin) => {
                exchange.upstream.reused = true;
                origin.state = OriginState::Exchange(client_id);
                origin
            }
            None => match self.driver.connect(address) {
                Ok(id) => {
                    exchange.upstream.reused = false;
                    Origin::connecting(id, address, OriginState::Exchange(client_id))
                }
                Err(error) if is_out_of_connections(&error) => {
                    self.out_of_connections(client, &error);
                    return;
                }
                Err(error) => {
                    let kind = local_connect_error_kind(&error);
                    let failure = ExchangeError::origin_failed(kind).with_errno(&error);
                    self.end_with_error(client, failure);
                    return;
                }
            },
        };
        self.send_request(client, origin);
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

    /// After an attempt to (re)open the upstream: an exchange that ended on the way (an
    /// error answer, a malformed body) leaves output to flush.
    pub(super) fn flush_if_ended(&mut self, client: &mut Client) -> Step {
        if let ClientState::Exchange(_) = client.state {
            Step::Keep
        } else {
            self.flush_client(client)
        }
    }
}
