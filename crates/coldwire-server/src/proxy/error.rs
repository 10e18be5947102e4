//! Why a request could not be answered the normal way: an [`ExchangeError`] says which
//! [`Side`] failed, whether the exchange may go again ([`Retry`]) and the status the
//! client gets otherwise. The request path returns it wherever it decides between a 4xx
//! and a 5xx; `failure.rs` acts on it for forwarded requests (retry, stale content, or
//! the error answer), [`Worker::reject`] for requests that never got that far.
//!
//! Also here: the error answers themselves ([`Worker::answer_error`], [`Worker::reject`]).
//!
//! Invariants: a `Side::Client` error closes the connection after its answer (the rest of
//! the input cannot be trusted to be a request); only a `Side::Origin` error may carry a
//! retry, and a retry is taken only if the request allows it (`failure.rs`).

use coldwire_http::{Status, Version};
use coldwire_io::Driver;

use super::state::{Client, ClientState, Routed};
use super::worker::{Step, Worker};
use crate::origin::error_response;
use crate::output::Output;

/// The side of the proxy a failure came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The client: a malformed, over-limit or unroutable request (4xx).
    Client,
    /// The origin: unreachable, silent, closed early, an answer that cannot be passed on
    /// (502, 504), or a 5xx answer that stored content may replace (`stale-if-error`).
    Origin,
    /// The cache: `only-if-cached` with nothing stored (504).
    Cache,
    /// Local policy: the ACL, a forwarding loop, a CONNECT port, a method this mode does
    /// not serve (403, 405).
    Policy,
}

/// Whether an exchange that failed may go to the origin again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// No: the client gets the error (or stale content in its place).
    No,
    /// On a fresh connection: a pooled connection closed before any response byte. Taken
    /// only for an idempotent request without a body, once.
    FreshConnection,
    /// Once more without the stored validators: a `304` selected no stored response, so the
    /// stored body is not the origin's (RFC 9111 §4.3.4).
    WithoutValidators,
}

/// A failure on the request path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExchangeError {
    /// Which side failed.
    pub side: Side,
    /// Whether the exchange may go again.
    pub retry: Retry,
    /// The status the client gets when nothing else answers.
    pub status: Status,
}

impl ExchangeError {
    /// The client's request is at fault.
    pub fn client(status: Status) -> ExchangeError {
        ExchangeError::new(Side::Client, status)
    }

    /// The origin failed.
    pub fn origin(status: Status) -> ExchangeError {
        ExchangeError::new(Side::Origin, status)
    }

    /// The cache could not answer as asked.
    pub fn cache(status: Status) -> ExchangeError {
        ExchangeError::new(Side::Cache, status)
    }

    /// Local policy refused.
    pub fn policy(status: Status) -> ExchangeError {
        ExchangeError::new(Side::Policy, status)
    }

    fn new(side: Side, status: Status) -> ExchangeError {
        ExchangeError {
            side,
            retry: Retry::No,
            status,
        }
    }

    /// The same failure, allowing `retry`.
    pub fn with_retry(self, retry: Retry) -> ExchangeError {
        ExchangeError { retry, ..self }
    }
}

impl From<coldwire_http::HttpError> for ExchangeError {
    /// A request the codec refused: the client's fault (4xx, or 5xx for what the proxy
    /// does not implement).
    fn from(error: coldwire_http::HttpError) -> ExchangeError {
        ExchangeError::client(error.status())
    }
}

impl<D: Driver> Worker<D> {
    /// Queues an error answer for the current request.
    pub(super) fn answer_error(
        &mut self,
        client: &mut Client,
        version: Version,
        status: Status,
        keep_alive: bool,
        output: &mut Output,
    ) -> Routed {
        let answer = error_response(
            status,
            version,
            keep_alive,
            false,
            self.date.bytes(),
            &mut self.driver,
            output,
        );
        self.http.count_timed_response(
            answer.status,
            client.session.request_elapsed(self.driver.now()),
        );
        self.http.body_bytes += answer.body_bytes;
        self.log_answer(client, answer.status, answer.body_bytes, None);
        Routed::answered(keep_alive)
    }

    /// Answers a request that could not be handled, then closes (lingering).
    pub(super) fn reject(&mut self, client: &mut Client, error: ExchangeError) -> Step {
        let mut output = Output::new(client.session.id);
        self.answer_error(client, Version::Http11, error.status, false, &mut output);
        output.finish(&mut self.driver);
        self.http.rejected += 1;
        client.state = ClientState::Closing { linger: true };
        self.flush_client(client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_say_their_side_and_allow_no_retry_unless_told() {
        let error = ExchangeError::origin(Status::BAD_GATEWAY);
        assert_eq!(error.side, Side::Origin);
        assert_eq!(error.retry, Retry::No);
        let retried = error.with_retry(Retry::FreshConnection);
        assert_eq!(retried.retry, Retry::FreshConnection);
        assert_eq!(retried.status, Status::BAD_GATEWAY);
        let parse = ExchangeError::from(coldwire_http::HttpError::HeadTooLarge);
        assert_eq!(parse.side, Side::Client);
        assert_eq!(parse.status, Status::REQUEST_HEADER_FIELDS_TOO_LARGE);
    }
}
