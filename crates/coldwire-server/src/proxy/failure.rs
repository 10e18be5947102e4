//! What happens when a forwarded request fails, in any phase: an [`ExchangeError`] is
//! taken here. Before the response has started, the exchange may go again (a pooled
//! connection found closed: once, on a fresh connection; a `304` that selected nothing:
//! once, without validators), stored content may answer instead (`stale.rs`:
//! `stale-if-error`, `--serve-stale-on-error`), or the client gets the error's status
//! (502, 504). Once the response has started, nothing can be said any more: the client
//! connection is cut, so the client sees a truncated response, and nothing is stored.
//!
//! Invariants: a retry happens at most once per exchange and only for an idempotent
//! request without a body; an error answer keeps the connection only if the client asked
//! for keep-alive and no request body is left unread.

use coldwire_http::{ResponseFraming, Status};
use coldwire_io::Driver;

use coldwire_cache::CacheStatus;

use super::error::{ExchangeError, Retry, Side};
use super::problem::{ProblemKind, connect_error_kind};
use super::state::{Client, ClientState, Origin};
use super::worker::{Step, Worker};
use crate::output::Output;

impl<D: Driver> Worker<D> {
    /// The exchange failed before its response started (its origin connection is closed
    /// already): retry as the error allows, or answer it.
    pub(super) fn exchange_failed(&mut self, client: &mut Client, error: ExchangeError) -> Step {
        match error.retry {
            Retry::No => self.fail_before_response(client, error),
            Retry::FreshConnection => self.retry_on_fresh_connection(client, error),
            Retry::WithoutValidators => self.refetch_unconditionally(client),
        }
    }

    /// The exchange's origin connection closed (`error: None`) or failed.
    pub(super) fn exchange_origin_closed(
        &mut self,
        client: &mut Client,
        origin: Origin,
        error: Option<std::io::Error>,
    ) -> Step {
        let received_any = origin.received_any;
        let connected = origin.connected;
        self.driver.close(origin.id);
        let Some(exchange) = client.state.exchange_mut() else {
            return Step::Close;
        };
        exchange.upstream.origin = None;
        match exchange.response.as_ref() {
            None => {
                let kind = match &error {
                    Some(error) if !connected => connect_error_kind(error),
                    _ if received_any => ProblemKind::HttpResponseIncomplete,
                    _ => ProblemKind::ConnectionTerminated,
                };
                let mut failure = ExchangeError::origin_failed(kind);
                if let Some(error) = &error {
                    failure = failure.with_errno(error);
                }
                if exchange.upstream.reused && !received_any {
                    // A pooled connection the origin had closed: nothing of this request
                    // was answered.
                    failure = failure.with_retry(Retry::FreshConnection);
                }
                self.exchange_failed(client, failure)
            }
            Some(progress) => {
                let clean_end = error.is_none() && progress.framing == ResponseFraming::UntilClose;
                if clean_end {
                    self.finish_response(client, None)
                } else {
                    // Truncated: the client must see an error, and nothing is stored.
                    let (status, bytes) = (progress.status, progress.body_bytes);
                    self.log_line(client, status, bytes, "aborted", None);
                    self.http.count_timed_response(
                        502,
                        client.session.request_elapsed(self.driver.now()),
                    );
                    Step::Close
                }
            }
        }
    }

    /// The exchange's origin was silent for `--upstream-timeout`: 504 before the response
    /// started, a cut connection after.
    pub(super) fn exchange_origin_timer(
        &mut self,
        client: &mut Client,
        mut origin: Origin,
    ) -> Step {
        let waiting_for_response = client
            .state
            .exchange()
            .is_some_and(|exchange| exchange.response.is_none());
        if waiting_for_response && origin.connected {
            // A request body the kernel still holds for a slow-reading origin: bytes
            // leaving since the last look mean it is still taking the request, not silent
            // (as the client's write timeout measures progress).
            let unsent = self.driver.unsent_bytes(origin.id);
            if unsent > 0 && unsent < origin.unsent_mark {
                origin.unsent_mark = unsent;
                let deadline = self.upstream_deadline();
                self.driver.set_timer(origin.id, deadline);
                self.put_origin(origin);
                return Step::Keep;
            }
        }
        let kind = if origin.connected {
            ProblemKind::HttpResponseTimeout
        } else {
            ProblemKind::ConnectionTimeout
        };
        self.driver.close(origin.id);
        let Some(exchange) = client.state.exchange_mut() else {
            return Step::Close;
        };
        exchange.upstream.origin = None;
        match exchange.response.as_ref() {
            Some(progress) => {
                // Cut mid-body: log what the client got before the close.
                let (status, bytes) = (progress.status, progress.body_bytes);
                self.log_line(client, status, bytes, "aborted", None);
                Step::Close
            }
            None => self.fail_before_response(client, ExchangeError::origin_failed(kind)),
        }
    }

    /// A pooled connection turned out closed before any response byte: the request goes
    /// once more on a fresh connection if it may be repeated, else the error is answered.
    fn retry_on_fresh_connection(&mut self, client: &mut Client, error: ExchangeError) -> Step {
        let Some(exchange) = client.state.exchange_mut() else {
            return Step::Close;
        };
        let upstream = &mut exchange.upstream;
        if !upstream.retry_allowed || upstream.retried {
            return self.fail_before_response(client, error);
        }
        upstream.retried = true;
        let Some(address) = upstream.address else {
            return Step::Close;
        };
        self.open_upstream(client, address);
        self.flush_if_ended(client)
    }

    /// The revalidation's `304` did not select the stored response: send the request again
    /// without the stored validators, on a fresh connection (the origin connection has been
    /// closed by the caller), and serve what the origin answers.
    fn refetch_unconditionally(&mut self, client: &mut Client) -> Step {
        let Some(exchange) = client.state.exchange_mut() else {
            return Step::Close;
        };
        exchange.upstream.origin = None;
        exchange.cache.stored = None;
        exchange.upstream.request_head = without_validators(&exchange.upstream.request_head);
        exchange.upstream.retried = true;
        exchange.upstream.interim_skip = 0;
        let Some(address) = exchange.upstream.address else {
            let error = ExchangeError::origin(Status::BAD_GATEWAY);
            return self.fail_before_response(client, error);
        };
        self.open_upstream(client, address);
        self.flush_if_ended(client)
    }

    /// Ends the exchange with an error answer (nothing of the response was sent yet) and
    /// flushes it.
    pub(super) fn fail_before_response(
        &mut self,
        client: &mut Client,
        error: ExchangeError,
    ) -> Step {
        if !matches!(client.state, ClientState::Exchange(_)) {
            return Step::Close;
        }
        self.end_with_error(client, error);
        self.flush_client(client)
    }

    /// Ends the exchange with stored content (for an origin failure, when `stale-if-error`
    /// or `--serve-stale-on-error` allows) or the error's answer, queued for the client (not
    /// flushed).
    pub(super) fn end_with_error(&mut self, client: &mut Client, error: ExchangeError) {
        if error.side == Side::Origin && self.answer_stale_on_error(client, error.status) {
            return;
        }
        let Some(exchange) = client.state.take_exchange() else {
            return;
        };
        if let Some(origin) = exchange.upstream.origin.and_then(|id| self.take_origin(id)) {
            self.driver.close(origin.id);
        }
        let keep_alive = exchange.request.keep_alive && !exchange.request.body_pending();
        let mut output = Output::new(client.session.id);
        let version = exchange.request.version;
        let upstream = &exchange.upstream;
        let next_hop = match upstream.address {
            Some(address) if address.ip().to_string() != upstream.host => {
                format!("{}:{} ({address})", upstream.host, upstream.port)
            }
            Some(address) => address.to_string(),
            None => format!("{}:{}", upstream.host, upstream.port),
        };
        let mut problem = error.problem(Some(next_hop));
        if client.request_line.is_none() {
            // No access log keeps the client's line: name the one sent to the origin.
            let head = &upstream.request_head;
            let end = head
                .windows(2)
                .position(|pair| pair == b"\r\n")
                .unwrap_or(head.len());
            if end > 0 {
                problem = problem.request(String::from_utf8_lossy(&head[..end]));
            }
        }
        let cache_status = (error.side == Side::Origin && self.config.cache.is_some())
            .then(|| CacheStatus::forward(exchange.cache.forward));
        self.answer_problem_with(
            client,
            &problem,
            keep_alive,
            cache_status,
            version,
            &mut output,
        );
        output.finish(&mut self.driver);
        if !keep_alive {
            client.state = ClientState::Closing { linger: true };
        }
    }
}

/// The upstream request head without `If-None-Match` / `If-Modified-Since` lines (a
/// revalidation's head carries only the proxy's own; the client's were never forwarded).
fn without_validators(request: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(request.len());
    for line in request.split_inclusive(|&byte| byte == b'\n') {
        let name = line.split(|&byte| byte == b':').next().unwrap_or_default();
        if name.eq_ignore_ascii_case(b"if-none-match")
            || name.eq_ignore_ascii_case(b"if-modified-since")
        {
            continue;
        }
        out.extend_from_slice(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refetch_drops_only_the_validators() {
        let request = b"GET /a HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"a\"\r\n\
                        if-modified-since: Mon, 02 Nov 2026 00:00:00 GMT\r\n\
                        Accept: */*\r\nVia: 1.1 coldwire\r\n\r\n";
        assert_eq!(
            without_validators(request),
            b"GET /a HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nVia: 1.1 coldwire\r\n\r\n"
        );
    }
}
