//! Why a request could not be answered the normal way: an [`ExchangeError`] says which
//! [`Side`] failed, whether the exchange may go again ([`Retry`]) and the status the
//! client gets otherwise. The request path returns it wherever it decides between a 4xx
//! and a 5xx; `failure.rs` acts on it for forwarded requests (retry, stale content, or
//! the error answer), [`Worker::reject`] for requests that never got that far.
//!
//! Also here: the error answers themselves ([`Worker::answer_problem`], [`Worker::reject`]),
//! written by `problem.rs` with `Proxy-Status`, and their error-log line.
//!
//! Invariants: a `Side::Client` error closes the connection after its answer (the rest of
//! the input cannot be trusted to be a request); only a `Side::Origin` error may carry a
//! retry, and a retry is taken only if the request allows it (`failure.rs`).

use coldwire_http::{Status, Version};
use coldwire_io::Driver;

use super::problem::{Problem, ProblemAnswer, ProblemKind, write_problem};
use super::state::{Client, ClientState, Routed};
use super::worker::{Step, Worker};
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
    /// What went wrong (`Proxy-Status`'s error type).
    pub kind: ProblemKind,
    /// The system's error number, when a system call failed.
    pub errno: Option<i32>,
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
        let kind = match (side, status) {
            (Side::Client, _) => ProblemKind::HttpRequestError,
            (Side::Policy, _) => ProblemKind::HttpRequestDenied,
            (Side::Cache, _) => ProblemKind::ProxyInternalResponse,
            (Side::Origin, Status::GATEWAY_TIMEOUT) => ProblemKind::HttpResponseTimeout,
            (Side::Origin, _) => ProblemKind::HttpProtocolError,
        };
        ExchangeError {
            side,
            retry: Retry::No,
            status,
            kind,
            errno: None,
        }
    }

    /// The origin failed as `kind` says (with that kind's status).
    pub fn origin_failed(kind: ProblemKind) -> ExchangeError {
        ExchangeError::origin(kind.status()).because(kind)
    }

    /// The same failure, named `kind`.
    pub fn because(self, kind: ProblemKind) -> ExchangeError {
        ExchangeError { kind, ..self }
    }

    /// The same failure, with the system's error number of `error`.
    pub fn with_errno(self, error: &std::io::Error) -> ExchangeError {
        ExchangeError {
            errno: error.raw_os_error(),
            ..self
        }
    }

    /// The answer to this failure, about `next_hop` when known.
    pub fn problem(&self, next_hop: Option<String>) -> Problem {
        let mut problem = Problem::new(self.status, self.kind);
        problem.next_hop = next_hop;
        if let Some(errno) = self.errno {
            problem.details = Some(std::io::Error::from_raw_os_error(errno).to_string());
        }
        problem
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

/// The answer to a request the codec refused, naming the limit it passed.
pub fn request_error_problem(
    error: &coldwire_http::HttpError,
    limits: &coldwire_http::Limits,
) -> Problem {
    use coldwire_http::HttpError;
    let details = match error {
        HttpError::HeadTooLarge => format!(
            "{error}: over {} bytes (--max-head-bytes)",
            limits.max_head_bytes
        ),
        HttpError::TooManyHeaders => {
            format!(
                "{error}: over {} fields (--max-headers)",
                limits.max_headers
            )
        }
        _ => error.to_string(),
    };
    Problem::new(error.status(), ProblemKind::HttpRequestError).details(details)
}

impl<D: Driver> Worker<D> {
    /// Queues the answer to `problem` for the current request, counts and logs it.
    pub(super) fn answer_problem(
        &mut self,
        client: &mut Client,
        version: Version,
        problem: &Problem,
        keep_alive: bool,
        output: &mut Output,
    ) -> Routed {
        self.answer_problem_with(client, problem, keep_alive, None, version, output)
    }

    /// [`Worker::answer_problem`] with the cache's part in it.
    pub(super) fn answer_problem_with(
        &mut self,
        client: &mut Client,
        problem: &Problem,
        keep_alive: bool,
        cache_status: Option<coldwire_cache::CacheStatus>,
        version: Version,
        output: &mut Output,
    ) -> Routed {
        let date = *self.date.bytes();
        let answer = ProblemAnswer {
            version,
            keep_alive,
            head_only: false,
            name: &self.config.name,
            cache_status,
            date: &date,
        };
        let body_bytes = write_problem(output.bytes(&mut self.driver), problem, &answer);
        let code = problem.status.code();
        self.http
            .count_timed_response(code, client.session.request_elapsed(self.driver.now()));
        self.http.body_bytes += body_bytes;
        self.log_problem(client, problem);
        self.log_entry(client, code, body_bytes, ("-", None), problem.kind.token());
        Routed::answered(keep_alive)
    }

    /// Writes the error-log line of `problem` (before the access-log line takes the
    /// request line).
    pub(super) fn log_problem(&self, client: &Client, problem: &Problem) {
        let level = problem.kind.level();
        if !self.error_log.enabled(level) {
            return;
        }
        // The access log's copy of the request line when it keeps one; else the one the
        // problem carries (the line sent to the origin, or a refused request's).
        let request = match (client.request_line.as_deref(), problem.request.as_deref()) {
            (Some(line), _) => {
                let version = String::from_utf8_lossy(line.version.as_bytes());
                format!("{:?}", format!("{} {} {version}", line.method, line.target))
            }
            (None, Some(line)) => format!("{line:?}"),
            (None, None) => "-".to_owned(),
        };
        let status = problem.status;
        self.error_log.log(
            level,
            problem.kind.token(),
            format_args!(
                "{} {}, client {}, request {request}, origin {}, phase {}: {}",
                status.code(),
                status.reason(),
                client.session.peer,
                problem.next_hop.as_deref().unwrap_or("-"),
                problem.kind.phase(),
                problem.details.as_deref().unwrap_or("-"),
            ),
        );
    }

    /// Answers a request that could not be handled, then closes (lingering).
    pub(super) fn reject(&mut self, client: &mut Client, problem: &Problem) -> Step {
        let mut output = Output::new(client.session.id);
        self.answer_problem(client, Version::Http11, problem, false, &mut output);
        output.finish(&mut self.driver);
        self.http.rejected += 1;
        client.state = ClientState::Closing { linger: true };
        self.flush_client(client)
    }
}

/// The request line of `head` for the error log, when the connection keeps none (the
/// access log is off); `None` otherwise (the log takes the kept one).
pub(super) fn line_for_error_log(
    client: &Client,
    head: &coldwire_http::RequestHead<'_>,
) -> Option<String> {
    client.request_line.is_none().then(|| {
        let version = String::from_utf8_lossy(head.version().as_bytes());
        format!("{} {} {version}", head.method_str(), head.target())
    })
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
