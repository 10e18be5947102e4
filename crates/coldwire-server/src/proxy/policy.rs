//! What the proxy refuses to do and how it says so: the CONNECT port policy (port 443 only
//! unless `--connect-port N` or `--connect-any-port`, as Squid's `SSL_ports` default does,
//! so the proxy cannot be used to reach mail or other plain-text services through a
//! tunnel), and plain-text answers whose body says why a request was refused and what to
//! do about it.

use coldwire_http::{HTTP_DATE_LEN, RequestHead, Status, Version, connection_header};
use coldwire_io::Driver;

use super::problem::{Problem, ProblemKind};
use super::state::{Client, Routed};
use super::worker::Worker;
use crate::output::Output;

/// The ports CONNECT may reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnectPorts {
    /// Any port (`--connect-any-port`).
    Any,
    /// Only these (default: 443; `--connect-port N` adds N).
    Only(Vec<u16>),
}

impl Default for ConnectPorts {
    /// Port 443 only.
    fn default() -> Self {
        ConnectPorts::Only(vec![443])
    }
}

impl ConnectPorts {
    /// Whether a tunnel to `port` is allowed.
    pub fn allows(&self, port: u16) -> bool {
        match self {
            ConnectPorts::Any => true,
            ConnectPorts::Only(ports) => ports.contains(&port),
        }
    }

    /// Also allows `port`.
    pub fn allow(&mut self, port: u16) {
        if let ConnectPorts::Only(ports) = self
            && !ports.contains(&port)
        {
            ports.push(port);
        }
    }
}

/// Writes a complete plain-text response: `status`, `text` as the body (a line end added).
pub fn write_text_response(
    out: &mut Vec<u8>,
    status: Status,
    version: Version,
    keep_alive: bool,
    date: &[u8; HTTP_DATE_LEN],
    text: &str,
) -> u64 {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(itoa::Buffer::new().format(status.code()).as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.reason().as_bytes());
    out.extend_from_slice(b"\r\nDate: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ");
    let length = text.len() as u64 + 1;
    out.extend_from_slice(itoa::Buffer::new().format(length).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(connection_header(version, keep_alive));
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(text.as_bytes());
    out.push(b'\n');
    length
}

/// A plain-text answer the proxy makes itself.
#[derive(Clone, Copy)]
pub(super) struct TextAnswer<'a> {
    /// The request's version.
    pub version: Version,
    /// Status.
    pub status: Status,
    /// Whether the connection stays open.
    pub keep_alive: bool,
    /// The body (a line end is added).
    pub text: &'a str,
    /// The access log's cache status word, if the cache played a part.
    pub cache: Option<&'a str>,
}

impl<D: Driver> Worker<D> {
    /// Queues a plain-text answer saying why (for refusals a user must understand).
    pub(super) fn answer_text(
        &mut self,
        client: &mut Client,
        answer: &TextAnswer<'_>,
        output: &mut Output,
    ) -> Routed {
        let TextAnswer {
            version,
            status,
            keep_alive,
            text,
            cache,
        } = *answer;
        let date = *self.date.bytes();
        let length = write_text_response(
            output.bytes(&mut self.driver),
            status,
            version,
            keep_alive,
            &date,
            text,
        );
        self.http.count_timed_response(
            status.code(),
            client.session.request_elapsed(self.driver.now()),
        );
        self.http.body_bytes += length;
        self.log_answer(client, status.code(), length, cache);
        Routed::answered(keep_alive)
    }

    /// Refuses a CONNECT to a port the policy does not allow: 403, saying which flag would
    /// allow it, then close.
    pub(super) fn refuse_connect_port(
        &mut self,
        client: &mut Client,
        head: &RequestHead<'_>,
        port: u16,
        output: &mut Output,
    ) -> Routed {
        let problem = Problem::new(Status::FORBIDDEN, ProblemKind::HttpRequestDenied)
            // The details go to Proxy-Status and the error log too: curl shows neither a
            // refused CONNECT's body nor more than "CONNECT tunnel failed, response 403",
            // so the flag to give is named where `curl -v` and the operator look.
            .details(format!(
                "CONNECT to port {port} refused: 443 only; allow it with --connect-port {port} \
                 or --connect-any-port"
            ))
            .advice(connect_port_refusal(port));
        let problem = match super::error::line_for_error_log(client, head) {
            Some(line) => problem.request(line),
            None => problem,
        };
        self.answer_problem(client, head.version(), &problem, false, output)
    }
}

/// The text of a 403 for a CONNECT to a port the policy does not allow.
fn connect_port_refusal(port: u16) -> String {
    format!(
        "CONNECT to port {port} is not allowed: this proxy tunnels to port 443 only. \
         Start it with --connect-port {port} (repeatable) or --connect-any-port to allow it."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_443_by_default_and_ports_can_be_added() {
        let mut ports = ConnectPorts::default();
        assert!(ports.allows(443));
        assert!(!ports.allows(25));
        ports.allow(8443);
        assert!(ports.allows(8443));
        assert!(ConnectPorts::Any.allows(25));
    }

    #[test]
    fn text_response_is_complete() {
        let mut out = Vec::new();
        let date = *b"Sun, 22 Nov 2026 10:00:00 GMT";
        let length = write_text_response(
            &mut out,
            Status::FORBIDDEN,
            Version::Http11,
            true,
            &date,
            "no",
        );
        let text = String::from_utf8(out).unwrap();
        assert_eq!(length, 3);
        assert!(text.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{text}");
        assert!(text.ends_with("Content-Length: 3\r\n\r\nno\n"), "{text}");
    }
}
