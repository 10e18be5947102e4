//! The request path, phase by phase. A request's life, in order, with the file of each
//! phase:
//!
//! 1. **parse** — here: complete heads are taken from the client's input, pipelined ones
//!    strictly in order, one exchange at a time ([`Worker::process`]);
//! 2. **route** — `route.rs`: who may ask (ACL, loops, framing named in `Connection`) and
//!    where it goes (forward absolute-form, reverse origin-form, CONNECT → `tunnel.rs`,
//!    `PURGE` → `purge.rs`, `TRACE`/`OPTIONS` with `Max-Forwards: 0` → answered here by
//!    `max_forwards.rs`);
//! 3. **cache lookup** — `lookup.rs`: hits answered from the store (`hit.rs`,
//!    `cache_range.rs`, `stale.rs`), collapsed misses parked (`collapse.rs`);
//! 4. **choose upstream** — `upstream.rs`: the [`Exchange`](super::exchange::Exchange) is
//!    created, the origin resolved, a pooled connection taken or a new one opened;
//! 5. **send** — `send.rs`: the request head, then the body with back-pressure;
//! 6. **response head** — `response_head.rs` (with `interim.rs`, `freshen.rs`,
//!    `invalidate.rs`), when the origin's bytes arrive (`origin.rs`);
//! 7. **body** — `body.rs` (copied, collected for the store) or `splice.rs`;
//! 8. **finish** — `finish.rs`: stored, origin pooled, logged, the next request taken.
//!
//! Phases 1–5 run at once, in [`Worker::handle_request`], whose body is that sequence;
//! 6–8 run as the origin's completions arrive. A failure in any phase is an
//! [`ExchangeError`] (`error.rs`), acted on by `failure.rs` once an exchange exists.

use coldwire_http::{Parsed, RequestHead, Status, parse_request};
use coldwire_io::{Buffer, Driver, Flush};

use super::error::{ExchangeError, request_error_problem};
use super::lookup::CacheDecision;
use super::max_forwards::max_forwards;
use super::problem::{Problem, ProblemKind};
use super::purge::is_purge;
use super::route::{Route, route};
use super::state::{Client, ClientState, Parked, Routed};
use super::worker::{Step, Worker};
use crate::output::Output;
use crate::session::Phase;

impl<D: Driver> Worker<D> {
    /// Phase 1, parse: handles every complete request in the input until one goes forward
    /// (or waits, or the connection is to close), then flushes what was answered.
    pub(super) fn process(&mut self, client: &mut Client) -> Step {
        let mut output = Output::new(client.session.id);
        let mut rejected = None;
        while matches!(client.state, ClientState::Requests | ClientState::Parked(_)) {
            let Some(input) = client.session.input.take() else {
                break;
            };
            if input.is_empty() {
                self.driver.recycle(input);
                break;
            }
            let parsed = parse_request(input.filled(), &self.config.runtime.limits);
            let routed = match parsed {
                Ok(Parsed::Complete { head, head_len }) => {
                    let waited = client.state.take_parked();
                    let routed = self.handle_request(client, &head, waited, &mut output);
                    let mut input = input;
                    if !matches!(routed, Ok(Routed::Parked)) {
                        input.consume(head_len);
                    }
                    client.session.input = Some(input);
                    routed
                }
                Ok(Parsed::Partial) => {
                    client.session.input = Some(input);
                    if client.session.phase != Phase::Head {
                        client.session.enter(&mut self.driver, Phase::Head);
                        let due = self.driver.now() + self.config.runtime.header_timeout;
                        client.session.set_deadline(&mut self.driver, due);
                    }
                    break;
                }
                Err(error) => {
                    client.session.input = Some(input);
                    rejected = Some(request_error_problem(&error, &self.config.runtime.limits));
                    break;
                }
            };
            match routed {
                Ok(Routed::Answered) => {}
                Ok(Routed::AnsweredThenClose) => {
                    client.state = ClientState::Closing { linger: true };
                    break;
                }
                Ok(Routed::Parked) => break,
                Ok(Routed::InFlight) => {
                    // Body bytes that came with the head go now that the input is back.
                    self.forward_request_body(client);
                    break;
                }
                Err(error) => {
                    rejected = Some(error.problem(None));
                    break;
                }
            }
        }
        if client.session.input.as_ref().is_some_and(Buffer::is_empty)
            && let Some(input) = client.session.input.take()
        {
            self.driver.recycle(input);
        }
        output.finish(&mut self.driver);
        if let Some(error) = rejected {
            return self.reject(client, &error);
        }
        if let ClientState::Exchange(_) = client.state {
            // Whatever hits preceded the forwarded request go out now; the exchange's
            // response follows them in order.
            return match self.driver.flush(client.session.id) {
                Flush::Failed(error) => {
                    self.note_send_error(&error);
                    Step::Close
                }
                _ => Step::Keep,
            };
        }
        self.flush_client(client)
    }

    /// Phases 2 to 5 for one parsed request: route, cache lookup, choose upstream, send.
    /// `waited` is the wait of a request parked before (collapsed forwarding), routed again.
    fn handle_request(
        &mut self,
        client: &mut Client,
        head: &RequestHead<'_>,
        waited: Option<Parked>,
        output: &mut Output,
    ) -> Result<Routed, ExchangeError> {
        if waited.is_none() {
            // A parked request is routed again on every poll: count it once.
            self.http.requests += 1;
        }
        self.remember_request_line(client, head);
        // The configuration outlives the request; a clone of the Arc frees `self`.
        let config = self.config.clone();
        let destination = match route(&config, client.denied, head)? {
            Route::Refused => {
                let mut problem = refusal(client, &config.name);
                if let Some(line) = super::error::line_for_error_log(client, head) {
                    problem = problem.request(line);
                }
                return Ok(self.answer_problem(client, head.version(), &problem, false, output));
            }
            Route::PortRefused(port) => {
                return Ok(self.refuse_connect_port(client, head, port, output));
            }
            Route::NotAProxyRequest => {
                let mut problem = not_a_proxy_request(head);
                if let Some(line) = super::error::line_for_error_log(client, head) {
                    problem = problem.request(line);
                }
                self.http.rejected += 1;
                return Ok(self.answer_problem(client, head.version(), &problem, false, output));
            }
            Route::Tunnel { host, port } => {
                self.queue_pending(client, output);
                self.start_tunnel(client, host.to_owned(), port);
                return Ok(Routed::InFlight);
            }
            Route::Origin(destination) => destination,
        };
        if is_purge(head) {
            if !self.config.purge_acl.allows(client.session.peer.ip()) {
                // Only loopback and `--purge-allow` networks may empty the cache.
                return Err(ExchangeError::policy(Status::FORBIDDEN));
            }
            return Ok(self.purge(client, head, &destination, output));
        }
        if max_forwards(head) == Some(0) {
            return Ok(self.answer_as_final_recipient(client, head, output));
        }
        let cache = match self.lookup(client, head, &destination, waited, output) {
            CacheDecision::Answered(routed) => return Ok(routed),
            CacheDecision::Wait(parked) => {
                client.state = ClientState::Parked(parked);
                return Ok(Routed::Parked);
            }
            CacheDecision::Forward(cache) => cache,
        };
        if head.expects_continue() {
            // Say continue at once: Expect is not forwarded.
            output
                .bytes(&mut self.driver)
                .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        self.queue_pending(client, output);
        self.start_exchange(client, head, &destination, cache);
        Ok(Routed::InFlight)
    }

    /// Whether the input holds a complete request (or one that will be refused).
    pub(super) fn request_complete(&self, client: &Client) -> bool {
        client.session.input.as_ref().is_some_and(|input| {
            matches!(
                parse_request(input.filled(), &self.config.runtime.limits),
                Ok(Parsed::Complete { .. }) | Err(_)
            )
        })
    }

    /// Queues the answers assembled so far, so that what a forwarded request produces
    /// (its response or an error) follows them in order.
    fn queue_pending(&mut self, client: &Client, output: &mut Output) {
        let pending = std::mem::replace(output, Output::new(client.session.id));
        pending.finish(&mut self.driver);
    }
}

/// The answer to an origin-form request sent to a forward proxy (someone opened the
/// proxy's address as a web site): how a forward proxy is used, and `--reverse`.
fn not_a_proxy_request(head: &RequestHead<'_>) -> Problem {
    Problem::new(
        coldwire_http::Status::BAD_REQUEST,
        ProblemKind::HttpRequestError,
    )
    .details(format!(
        "\"{} {}\" asks for a path, as from a web server; this is a forward proxy, which \
         takes absolute URLs (GET http://host/path) and CONNECT",
        head.method_str(),
        head.target()
    ))
    .advice(
        "Use it as a proxy (curl -x http://PROXY_ADDR http://example.com/, or http_proxy=...), \
         or start it with --reverse http://HOST:PORT to put it in front of one origin.",
    )
}

/// The answer to a request `route` refused: a client outside the ACL, or a forwarding
/// loop (this proxy's name in `Via`).
fn refusal(client: &Client, name: &str) -> Problem {
    if client.denied {
        let address = client.session.peer.ip();
        return Problem::new(
            coldwire_http::Status::FORBIDDEN,
            ProblemKind::HttpRequestDenied,
        )
        .details(format!(
            "client {address} is not allowed (loopback only by default)"
        ))
        .advice(format!(
            "Start the proxy with --allow {address}/32 (or the client's network) to allow it."
        ));
    }
    Problem::new(
        coldwire_http::Status::FORBIDDEN,
        ProblemKind::ProxyLoopDetected,
    )
    .details(format!("Via already names {name}"))
}
