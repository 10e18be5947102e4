//! When the proxy runs out of connections: an upstream connection that cannot be opened
//! because this worker is at its connection limit (`--max-connections` ÷ workers) or the
//! process is out of descriptors (`EMFILE`/`ENFILE`) is the proxy's own overload, not the
//! origin's failure. The client gets a `503` with `Proxy-Status: <name>;
//! error=connection_limit_reached` (RFC 9209 §2.3.12), `Retry-After` and a one-line body
//! — never a reset or a 502 — and its connection stays open when the request allows; the
//! connections the worker has go on being served. It is counted
//! (`http.connection_limit_reached` in `/stats`) and said on stderr, at most one line per
//! [`NOTICE_INTERVAL`] with the count since the last, as are pauses of accepting (the
//! driver's `accept_pauses`: descriptors ran out, or the limit was reached, and new clients
//! wait in the listen queue). `docs/proxy.md` ("Connection limits") says how to size it.

use std::io;
use std::time::{Duration, Instant};

use coldwire_http::{HTTP_DATE_LEN, Status, Version, connection_header};
use coldwire_io::Driver;

use super::state::{Client, ClientState};
use super::worker::Worker;
use crate::output::Output;

/// The shortest time between two lines about the same kind of shortage.
pub const NOTICE_INTERVAL: Duration = Duration::from_secs(10);

/// The body of the `503`.
const BODY: &str = "503 Service Unavailable: the proxy has no connection to spare for this request \
                    (open-files limit or --max-connections reached); try again shortly\n";

/// Events of one kind, said at most once per [`NOTICE_INTERVAL`].
#[derive(Debug, Default)]
pub struct Notice {
    said_at: Option<Instant>,
    pending: u64,
}

impl Notice {
    /// Adds `count` events at `now`. Returns how many to report when a line is due: the
    /// first event at once, then what piled up, at most once per interval.
    pub fn note(&mut self, count: u64, now: Instant) -> Option<u64> {
        self.pending += count;
        if self.pending == 0
            || self
                .said_at
                .is_some_and(|said| now < said + NOTICE_INTERVAL)
        {
            return None;
        }
        self.said_at = Some(now);
        Some(std::mem::take(&mut self.pending))
    }
}

/// A worker's notices about running out of connections.
#[derive(Debug, Default)]
pub struct LimitNotices {
    /// Requests answered `503` because no upstream connection could be opened.
    refusals: Notice,
    /// The driver's `accept_pauses` already accounted for.
    pauses_seen: u64,
    pauses: Notice,
}

/// Writes the `503` for a request that found no connection to spare: `name` is the
/// proxy's (`Via`, `Cache-Status`). Returns the body bytes written (none for `HEAD`).
pub fn write_connection_limit_response(
    out: &mut Vec<u8>,
    name: &str,
    version: Version,
    keep_alive: bool,
    head_only: bool,
    date: &[u8; HTTP_DATE_LEN],
) -> u64 {
    let status = Status::SERVICE_UNAVAILABLE;
    out.extend_from_slice(b"HTTP/1.1 503 ");
    out.extend_from_slice(status.reason().as_bytes());
    out.extend_from_slice(b"\r\nDate: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\nProxy-Status: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"; error=connection_limit_reached\r\nRetry-After: 1\r\n");
    out.extend_from_slice(b"Content-Type: text/plain; charset=utf-8\r\nContent-Length: ");
    out.extend_from_slice(itoa::Buffer::new().format(BODY.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(connection_header(version, keep_alive));
    out.extend_from_slice(b"\r\n");
    if head_only {
        return 0;
    }
    out.extend_from_slice(BODY.as_bytes());
    BODY.len() as u64
}

impl<D: Driver> Worker<D> {
    /// No upstream connection could be opened for the client's exchange (`error` is
    /// [`coldwire_io::is_out_of_connections`]): stored content where `stale-if-error`
    /// allows, else the `503`; counted and said.
    pub(super) fn out_of_connections(&mut self, client: &mut Client, error: &io::Error) {
        self.http.connection_limit_reached += 1;
        if let Some(count) = self.limits.refusals.note(1, self.driver.now()) {
            crate::console::err(format_args!(
                "coldwire proxy: worker {}: {count} request(s) answered 503 (connection_limit_reached): \
                 no upstream connection could be opened: {error}; the open connections are still served \
                 (docs/proxy.md, \"Connection limits\", says how to size the limits)",
                self.index
            ));
        }
        if self.answer_stale_on_error(client, Status::SERVICE_UNAVAILABLE) {
            return;
        }
        let Some(exchange) = client.state.take_exchange() else {
            return;
        };
        if let Some(origin) = exchange.upstream.origin.and_then(|id| self.take_origin(id)) {
            self.driver.close(origin.id);
        }
        let keep_alive = exchange.request.keep_alive && !exchange.request.body_pending();
        let date = *self.date.bytes();
        let mut output = Output::new(client.session.id);
        let body_bytes = write_connection_limit_response(
            output.bytes(&mut self.driver),
            &self.config.name,
            exchange.request.version,
            keep_alive,
            exchange.request.head_only,
            &date,
        );
        output.finish(&mut self.driver);
        self.http.count_response(Status::SERVICE_UNAVAILABLE.code());
        self.http.body_bytes += body_bytes;
        self.log_answer(client, Status::SERVICE_UNAVAILABLE.code(), body_bytes, None);
        if !keep_alive {
            client.state = ClientState::Closing { linger: true };
        }
    }

    /// Once per loop turn: says what piled up — refusals not said yet, and new pauses of
    /// accepting (`accept_pauses` is the driver's running count).
    pub(super) fn say_limits(&mut self, accept_pauses: u64) {
        let now = self.driver.now();
        let new_pauses = accept_pauses.saturating_sub(self.limits.pauses_seen);
        self.limits.pauses_seen = accept_pauses;
        if let Some(count) = self.limits.pauses.note(new_pauses, now) {
            crate::console::err(format_args!(
                "coldwire proxy: worker {}: accepting paused {count} time(s): out of descriptors or at \
                 --max-connections; new clients wait in the listen queue until connections close \
                 (docs/proxy.md, \"Connection limits\")",
                self.index
            ));
        }
        if let Some(count) = self.limits.refusals.note(0, now) {
            crate::console::err(format_args!(
                "coldwire proxy: worker {}: {count} more request(s) answered 503 (connection_limit_reached)",
                self.index
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_is_said_at_once_then_at_most_once_per_interval_with_the_count() {
        let start = Instant::now();
        let mut notice = Notice::default();
        assert_eq!(notice.note(0, start), None, "nothing to say");
        assert_eq!(notice.note(1, start), Some(1), "the first at once");
        assert_eq!(notice.note(1, start + Duration::from_secs(1)), None);
        assert_eq!(notice.note(2, start + Duration::from_secs(2)), None);
        assert_eq!(
            notice.note(0, start + NOTICE_INTERVAL),
            Some(3),
            "what piled up, one interval later"
        );
        assert_eq!(notice.note(0, start + 3 * NOTICE_INTERVAL), None);
    }

    #[test]
    fn the_503_names_the_limit_in_proxy_status_and_keeps_the_connection_if_asked() {
        let date = [b'x'; HTTP_DATE_LEN];
        let mut out = Vec::new();
        let body = write_connection_limit_response(
            &mut out,
            "coldwire",
            Version::Http11,
            true,
            false,
            &date,
        );
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{text}"
        );
        assert!(
            text.contains("\r\nProxy-Status: coldwire; error=connection_limit_reached\r\n"),
            "{text}"
        );
        assert!(!text.contains("Connection: close"), "{text}");
        let (head, rest) = text.split_once("\r\n\r\n").unwrap();
        assert_eq!(rest.len() as u64, body);
        assert!(head.contains(&format!("Content-Length: {body}")), "{head}");
        assert!(rest.contains("--max-connections"), "{rest}");

        let mut out = Vec::new();
        let body =
            write_connection_limit_response(&mut out, "edge", Version::Http10, false, true, &date);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(body, 0, "HEAD: no body");
        assert!(text.ends_with("Connection: close\r\n\r\n"), "{text}");
        assert!(text.contains("Proxy-Status: edge; error="), "{text}");
    }
}
