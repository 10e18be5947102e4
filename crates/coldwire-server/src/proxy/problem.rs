//! The proxy's own error answers, built in one place: every 4xx/5xx the proxy makes itself
//! (not one it passes on from an origin) is a [`Problem`] written by [`write_problem`]. It
//! carries `Via`, `Cache-Status` (with `detail=` the error) and `Proxy-Status` (RFC 9209:
//! `coldwire; error=connection_refused; next-hop="127.0.0.1:9"; details="…"`), and a short
//! plain-text body saying what happened and what to check.
//!
//! The error's one-word name ([`ProblemKind::token`], RFC 9209's error type) is also the
//! access log's `error` field and the error log's subject, so the three say the same.
//!
//! Invariants: the `details` parameter is a valid structured-field string (printable
//! ASCII, `"` and `\` escaped); the body always ends with a newline and its length is the
//! `Content-Length` sent.

use std::fmt::Write as _;

use coldwire_cache::CacheStatus;
use coldwire_http::{HTTP_DATE_LEN, Status, Version, connection_header};

use crate::error_log::Level;

/// What went wrong, as RFC 9209 names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProblemKind {
    /// The origin's name did not resolve.
    DnsError,
    /// The origin refused the connection (`ECONNREFUSED`).
    ConnectionRefused,
    /// The origin could not be reached (`EHOSTUNREACH`, `ENETUNREACH`...).
    DestinationUnavailable,
    /// The connection to the origin did not complete within `--upstream-timeout`.
    ConnectionTimeout,
    /// The origin closed or reset the connection before any response byte.
    ConnectionTerminated,
    /// The origin sent no complete response head within `--upstream-timeout`.
    HttpResponseTimeout,
    /// The origin closed the connection in the middle of its response head.
    HttpResponseIncomplete,
    /// The origin's response head was larger than the proxy accepts.
    HttpResponseHeaderSectionSize,
    /// The origin's response could not be parsed (or was a `101` to a plain request).
    HttpProtocolError,
    /// The client's request was malformed or over a limit.
    HttpRequestError,
    /// Local policy refused the request (ACL, CONNECT port, method).
    HttpRequestDenied,
    /// The request named a destination this proxy will not contact.
    DestinationIpProhibited,
    /// The request already passed through this proxy (`Via` names it).
    ProxyLoopDetected,
    /// The proxy answered without asking the origin (`only-if-cached` and nothing stored).
    ProxyInternalResponse,
    /// The proxy could not act on the request itself (a socket could not be opened).
    ProxyInternalError,
    /// The proxy is out of connections: its worker is at `--max-connections` or the
    /// process is out of descriptors (`EMFILE`/`ENFILE`) or socket memory. Its own
    /// overload, answered `503` with `Retry-After`, not the origin's failure (`502`).
    ConnectionLimitReached,
}

impl ProblemKind {
    /// The RFC 9209 error type: `Proxy-Status`'s `error=`, the access log's `error` field.
    pub fn token(self) -> &'static str {
        match self {
            ProblemKind::DnsError => "dns_error",
            ProblemKind::ConnectionRefused => "connection_refused",
            ProblemKind::DestinationUnavailable => "destination_unavailable",
            ProblemKind::ConnectionTimeout => "connection_timeout",
            ProblemKind::ConnectionTerminated => "connection_terminated",
            ProblemKind::HttpResponseTimeout => "http_response_timeout",
            ProblemKind::HttpResponseIncomplete => "http_response_incomplete",
            ProblemKind::HttpResponseHeaderSectionSize => "http_response_header_section_size",
            ProblemKind::HttpProtocolError => "http_protocol_error",
            ProblemKind::HttpRequestError => "http_request_error",
            ProblemKind::HttpRequestDenied => "http_request_denied",
            ProblemKind::DestinationIpProhibited => "destination_ip_prohibited",
            ProblemKind::ProxyLoopDetected => "proxy_loop_detected",
            ProblemKind::ProxyInternalResponse => "proxy_internal_response",
            ProblemKind::ProxyInternalError => "proxy_internal_error",
            ProblemKind::ConnectionLimitReached => "connection_limit_reached",
        }
    }

    /// The error log's level for this kind: origin and proxy failures are errors, policy
    /// refusals warnings, the client's own mistakes information.
    pub fn level(self) -> Level {
        match self {
            ProblemKind::HttpRequestError | ProblemKind::ProxyInternalResponse => Level::Info,
            ProblemKind::HttpRequestDenied
            | ProblemKind::DestinationIpProhibited
            | ProblemKind::ProxyLoopDetected
            | ProblemKind::ConnectionLimitReached => Level::Warn,
            _ => Level::Error,
        }
    }

    /// The phase of the exchange that failed (for the error log).
    pub fn phase(self) -> &'static str {
        match self {
            ProblemKind::DnsError => "resolve",
            ProblemKind::ConnectionRefused
            | ProblemKind::DestinationUnavailable
            | ProblemKind::ConnectionTimeout
            | ProblemKind::ProxyInternalError
            | ProblemKind::ConnectionLimitReached => "connect",
            ProblemKind::ConnectionTerminated
            | ProblemKind::HttpResponseTimeout
            | ProblemKind::HttpResponseIncomplete
            | ProblemKind::HttpResponseHeaderSectionSize
            | ProblemKind::HttpProtocolError => "response head",
            ProblemKind::HttpRequestError => "request",
            ProblemKind::HttpRequestDenied
            | ProblemKind::DestinationIpProhibited
            | ProblemKind::ProxyLoopDetected => "route",
            ProblemKind::ProxyInternalResponse => "cache lookup",
        }
    }

    /// One sentence: what happened.
    fn what(self) -> &'static str {
        match self {
            ProblemKind::DnsError => "The proxy could not resolve the origin's name.",
            ProblemKind::ConnectionRefused => "The origin refused the proxy's connection.",
            ProblemKind::DestinationUnavailable => "The proxy could not reach the origin.",
            ProblemKind::ConnectionTimeout => {
                "The proxy's connection to the origin did not complete in time."
            }
            ProblemKind::ConnectionTerminated => {
                "The origin closed the connection before answering."
            }
            ProblemKind::HttpResponseTimeout => "The origin did not answer in time.",
            ProblemKind::HttpResponseIncomplete => {
                "The origin closed the connection in the middle of its response head."
            }
            ProblemKind::HttpResponseHeaderSectionSize => {
                "The origin's response head is larger than the proxy accepts."
            }
            ProblemKind::HttpProtocolError => "The origin's response is not valid HTTP/1.1.",
            ProblemKind::HttpRequestError => "The request is malformed or over a limit.",
            ProblemKind::HttpRequestDenied => "The proxy's policy refuses this request.",
            ProblemKind::DestinationIpProhibited => {
                "The proxy does not connect to this destination."
            }
            ProblemKind::ProxyLoopDetected => {
                "The request has already passed through this proxy (a forwarding loop)."
            }
            ProblemKind::ProxyInternalResponse => {
                "The request asked for a stored response only (only-if-cached), and none is stored."
            }
            ProblemKind::ProxyInternalError => {
                "The proxy could not open a connection to the origin."
            }
            ProblemKind::ConnectionLimitReached => {
                "The proxy has no connection to spare for this request (open-files limit or --max-connections reached)."
            }
        }
    }

    /// One sentence: what to check.
    fn check(self) -> &'static str {
        match self {
            ProblemKind::DnsError => {
                "Check the host name in the URL and this machine's resolver (/etc/resolv.conf, /etc/hosts)."
            }
            ProblemKind::ConnectionRefused => {
                "Check that the origin is running and listens on that address and port."
            }
            ProblemKind::DestinationUnavailable => {
                "Check the origin's address and this machine's routes and firewall."
            }
            ProblemKind::ConnectionTimeout | ProblemKind::HttpResponseTimeout => {
                "Check that the origin is up and not overloaded, or raise the proxy's --upstream-timeout."
            }
            ProblemKind::ConnectionTerminated | ProblemKind::HttpResponseIncomplete => {
                "Check the origin's error log: it may have crashed or reached a limit."
            }
            ProblemKind::HttpResponseHeaderSectionSize => {
                "Check the origin's response fields (cookies, long headers)."
            }
            ProblemKind::HttpProtocolError => {
                "Check that the origin speaks plain HTTP/1.x on that port (not TLS, not HTTP/2)."
            }
            ProblemKind::HttpRequestError => {
                "Check the request line and fields; limits are --max-head-bytes and --max-headers."
            }
            ProblemKind::HttpRequestDenied => {
                "Check the proxy's --allow, --connect-port and mode (forward or --reverse)."
            }
            ProblemKind::DestinationIpProhibited => "Check the destination in the URL.",
            ProblemKind::ProxyLoopDetected => {
                "Check the proxy's configuration: it must not forward to itself. If the name in Via is another coldwire proxy's (two chained), give one of them its own name with --name."
            }
            ProblemKind::ProxyInternalResponse => {
                "Retry without Cache-Control: only-if-cached to let the proxy ask the origin."
            }
            ProblemKind::ProxyInternalError => {
                "Check the proxy's error log and its open-file limit (--max-connections, ulimit -n)."
            }
            ProblemKind::ConnectionLimitReached => {
                "Try again shortly. If it persists, size the proxy for its load: the open-files limit (ulimit -n), --max-connections, --workers and the upstream pool (docs/proxy.md, \"Connection limits\")."
            }
        }
    }

    /// The status the client gets for this kind, unless the caller says otherwise.
    pub fn status(self) -> Status {
        match self {
            ProblemKind::ConnectionTimeout
            | ProblemKind::HttpResponseTimeout
            | ProblemKind::ProxyInternalResponse => Status::GATEWAY_TIMEOUT,
            ProblemKind::ConnectionLimitReached => Status::SERVICE_UNAVAILABLE,
            ProblemKind::HttpRequestError => Status::BAD_REQUEST,
            ProblemKind::HttpRequestDenied
            | ProblemKind::DestinationIpProhibited
            | ProblemKind::ProxyLoopDetected => Status::FORBIDDEN,
            _ => Status::BAD_GATEWAY,
        }
    }
}

/// One error answer: its status, kind and what is known about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The status sent.
    pub status: Status,
    /// What went wrong.
    pub kind: ProblemKind,
    /// The origin it was about (`host:port` or the address), when one was chosen.
    pub next_hop: Option<String>,
    /// What the system said (`Connection refused (os error 111)`), or a specific reason.
    pub details: Option<String>,
    /// A sentence replacing the kind's generic advice.
    pub advice: Option<String>,
    /// The request line for the error log when the connection keeps none (no access log):
    /// the line sent to the origin, or the client's for a refusal.
    pub request: Option<String>,
}

impl Problem {
    /// A problem of `kind` answered with `status`.
    pub fn new(status: Status, kind: ProblemKind) -> Problem {
        Problem {
            status,
            kind,
            next_hop: None,
            details: None,
            advice: None,
            request: None,
        }
    }

    /// The same, about the origin `next_hop`.
    pub fn next_hop(mut self, next_hop: impl Into<String>) -> Problem {
        self.next_hop = Some(next_hop.into());
        self
    }

    /// The same, with `details`.
    pub fn details(mut self, details: impl Into<String>) -> Problem {
        self.details = Some(details.into());
        self
    }

    /// The same, with the request line the error log names (see [`Problem::request`]).
    pub fn request(mut self, line: impl Into<String>) -> Problem {
        self.request = Some(line.into());
        self
    }

    /// The same, with `advice` instead of the kind's.
    pub fn advice(mut self, advice: impl Into<String>) -> Problem {
        self.advice = Some(advice.into());
        self
    }

    /// The `Proxy-Status` field value for the proxy called `name`.
    pub fn proxy_status(&self, name: &str) -> String {
        let mut value = format!("{name}; error={}", self.kind.token());
        if let Some(next_hop) = &self.next_hop {
            let _ = write!(value, "; next-hop={}", sf_string(next_hop));
        }
        if let Some(details) = &self.details {
            let _ = write!(value, "; details={}", sf_string(details));
        }
        value
    }

    /// The plain-text body: status, what happened (with the origin and details), what to
    /// check.
    pub fn body(&self) -> String {
        let mut body = format!(
            "{} {}: {}\n",
            self.status.code(),
            self.status.reason(),
            self.kind.what()
        );
        if let Some(next_hop) = &self.next_hop {
            let _ = writeln!(body, "Origin: {next_hop}");
        }
        if let Some(details) = &self.details {
            let _ = writeln!(body, "Details: {details}");
        }
        let advice = self.advice.as_deref().unwrap_or(self.kind.check());
        let _ = writeln!(body, "{advice}");
        let _ = writeln!(body, "(Proxy-Status error: {})", self.kind.token());
        body
    }
}

/// `text` as a structured-field string: quoted, `"` and `\` escaped, anything outside
/// printable ASCII replaced by `?`.
fn sf_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for character in text.chars() {
        match character {
            '"' | '\\' => {
                out.push('\\');
                out.push(character);
            }
            ' '..='~' => out.push(character),
            _ => out.push('?'),
        }
    }
    out.push('"');
    out
}

/// Where a problem answer goes and how.
pub struct ProblemAnswer<'a> {
    /// The request's version.
    pub version: Version,
    /// Whether the client connection stays open.
    pub keep_alive: bool,
    /// A HEAD request: the head only.
    pub head_only: bool,
    /// The proxy's name (`Via`, `Cache-Status`, `Proxy-Status`).
    pub name: &'a str,
    /// The cache's part, when it had one (`detail=` is set to the error here).
    pub cache_status: Option<CacheStatus>,
    /// The current date.
    pub date: &'a [u8; HTTP_DATE_LEN],
}

/// Writes the whole answer to `problem`; returns the body bytes sent.
pub fn write_problem(out: &mut Vec<u8>, problem: &Problem, answer: &ProblemAnswer<'_>) -> u64 {
    let body = problem.body();
    let status = problem.status;
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(itoa::Buffer::new().format(status.code()).as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.reason().as_bytes());
    out.extend_from_slice(b"\r\nDate: ");
    out.extend_from_slice(answer.date);
    out.extend_from_slice(b"\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ");
    out.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
    out.extend_from_slice(b"\r\nCache-Control: no-store\r\nVia: 1.1 ");
    out.extend_from_slice(answer.name.as_bytes());
    out.extend_from_slice(b"\r\nCache-Status: ");
    let mut cache_status = answer.cache_status.unwrap_or(CacheStatus {
        forward: None,
        forward_status: None,
        stored: false,
        ttl: None,
        detail: None,
    });
    cache_status.detail = Some(problem.kind.token());
    if answer.cache_status.is_some() {
        cache_status.write_value(answer.name, out);
    } else {
        // The cache had no part: the name and the detail only.
        out.extend_from_slice(answer.name.as_bytes());
        out.extend_from_slice(b"; detail=");
        out.extend_from_slice(problem.kind.token().as_bytes());
    }
    out.extend_from_slice(b"\r\nProxy-Status: ");
    out.extend_from_slice(problem.proxy_status(answer.name).as_bytes());
    out.extend_from_slice(b"\r\n");
    if problem.kind == ProblemKind::ConnectionLimitReached {
        // Connections free up as requests finish: worth a retry soon.
        out.extend_from_slice(b"Retry-After: 1\r\n");
    }
    out.extend_from_slice(connection_header(answer.version, answer.keep_alive));
    out.extend_from_slice(b"\r\n");
    if answer.head_only {
        return 0;
    }
    out.extend_from_slice(body.as_bytes());
    body.len() as u64
}

/// The problem of a failed connect (`connect_error_kind`), with the system's words.
pub fn connect_problem(error: &std::io::Error) -> Problem {
    let kind = connect_error_kind(error);
    Problem::new(kind.status(), kind).details(error.to_string())
}

/// The kind of a connect that failed at once, in the proxy (out of connections:
/// `connection_limit_reached`) or on the way (as [`connect_error_kind`]).
pub fn local_connect_error_kind(error: &std::io::Error) -> ProblemKind {
    connect_error_kind(error)
}

/// The kind of a failed connect or receive from its error (`ECONNREFUSED` → refused...;
/// the proxy's own shortage, [`coldwire_io::is_out_of_connections`], →
/// `connection_limit_reached`).
pub fn connect_error_kind(error: &std::io::Error) -> ProblemKind {
    if coldwire_io::is_out_of_connections(error) {
        return ProblemKind::ConnectionLimitReached;
    }
    match error.raw_os_error() {
        Some(libc::ECONNREFUSED) => ProblemKind::ConnectionRefused,
        Some(libc::ETIMEDOUT) => ProblemKind::ConnectionTimeout,
        Some(libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EADDRNOTAVAIL) => {
            ProblemKind::DestinationUnavailable
        }
        _ => ProblemKind::ConnectionTerminated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldwire_cache::Forward;

    fn written(problem: &Problem, cache_status: Option<CacheStatus>) -> String {
        let mut out = Vec::new();
        let date = *b"Sun, 22 Nov 2026 10:00:00 GMT";
        let answer = ProblemAnswer {
            version: Version::Http11,
            keep_alive: true,
            head_only: false,
            name: "coldwire",
            cache_status,
            date: &date,
        };
        let length = write_problem(&mut out, problem, &answer);
        let text = String::from_utf8(out).unwrap();
        let body = text.split_once("\r\n\r\n").unwrap().1;
        assert_eq!(body.len() as u64, length);
        assert!(
            text.contains(&format!("Content-Length: {length}\r\n")),
            "{text}"
        );
        text
    }

    #[test]
    fn a_refused_connection_names_the_origin_and_the_errno() {
        let problem = Problem::new(Status::BAD_GATEWAY, ProblemKind::ConnectionRefused)
            .next_hop("127.0.0.1:9")
            .details("connect: Connection refused (os error 111)");
        let text = written(&problem, Some(CacheStatus::forward(Forward::UriMiss)));
        assert!(text.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{text}");
        assert!(text.contains("\r\nVia: 1.1 coldwire\r\n"), "{text}");
        assert!(
            text.contains(
                "\r\nCache-Status: coldwire; fwd=uri-miss; detail=connection_refused\r\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "\r\nProxy-Status: coldwire; error=connection_refused; next-hop=\"127.0.0.1:9\"; \
                 details=\"connect: Connection refused (os error 111)\"\r\n"
            ),
            "{text}"
        );
        assert!(text.contains("Origin: 127.0.0.1:9\n"), "{text}");
        assert!(text.contains("listens on that address"), "{text}");
    }

    #[test]
    fn details_are_escaped_as_a_structured_field_string() {
        let problem = Problem::new(Status::BAD_REQUEST, ProblemKind::HttpRequestError)
            .details("a \"quoted\" \\ and é");
        assert_eq!(
            problem.proxy_status("p"),
            "p; error=http_request_error; details=\"a \\\"quoted\\\" \\\\ and ?\""
        );
        let text = written(&problem, None);
        assert!(text.contains("\r\nCache-Status: coldwire; detail=http_request_error\r\n"));
    }

    #[test]
    fn errnos_name_their_kind() {
        let refused = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(connect_error_kind(&refused), ProblemKind::ConnectionRefused);
        let unreachable = std::io::Error::from_raw_os_error(libc::EHOSTUNREACH);
        assert_eq!(
            connect_error_kind(&unreachable),
            ProblemKind::DestinationUnavailable
        );
        let reset = std::io::Error::from_raw_os_error(libc::ECONNRESET);
        assert_eq!(
            connect_error_kind(&reset),
            ProblemKind::ConnectionTerminated
        );
        for out_of_connections in [
            std::io::Error::from_raw_os_error(libc::EMFILE),
            std::io::Error::from_raw_os_error(libc::ENFILE),
            coldwire_io::ConnectionLimitReached::error(3),
        ] {
            assert_eq!(
                connect_error_kind(&out_of_connections),
                ProblemKind::ConnectionLimitReached,
                "{out_of_connections}"
            );
            let problem = connect_problem(&out_of_connections);
            assert_eq!(problem.status, Status::SERVICE_UNAVAILABLE);
        }
    }

    #[test]
    fn out_of_connections_is_a_503_with_retry_after_and_says_how_to_size_the_proxy() {
        let problem = connect_problem(&std::io::Error::from_raw_os_error(libc::EMFILE))
            .next_hop("127.0.0.1:443");
        let text = written(&problem, None);
        assert!(
            text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{text}"
        );
        assert!(
            text.contains("\r\nProxy-Status: coldwire; error=connection_limit_reached; "),
            "{text}"
        );
        assert!(text.contains("\r\nRetry-After: 1\r\n"), "{text}");
        assert!(text.contains("--max-connections"), "{text}");
        assert!(!text.contains("Connection: close"), "{text}");
        assert_eq!(
            ProblemKind::ConnectionLimitReached.level(),
            Level::Warn,
            "the proxy's overload, not a fault"
        );
    }
}
