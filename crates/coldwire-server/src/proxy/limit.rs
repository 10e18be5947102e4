//! When the proxy runs out of connections: an upstream connection that cannot be opened
//! because this worker is at its connection limit (`--max-connections` ÷ workers) or the
//! process is out of descriptors (`EMFILE`/`ENFILE`) is the proxy's own overload, not the
//! origin's failure. The client gets a `503` with `Proxy-Status: <name>;
//! error=connection_limit_reached` (RFC 9209 §2.3.12), `Retry-After` and a short body —
//! never a reset or a 502 — written as every other problem answer
//! ([`super::problem::ProblemKind::ConnectionLimitReached`]), and its connection stays open
//! when the request allows (a CONNECT tunnel that cannot be opened closes, as for any
//! failed tunnel); the connections the worker has go on being served. It is counted
//! (`http.connection_limit_reached` in `/stats`) and said on stderr, at most one line per
//! [`NOTICE_INTERVAL`] with the count since the last, as are pauses of accepting (the
//! driver's `accept_pauses`: descriptors ran out, or the limit was reached, and new clients
//! wait in the listen queue). `docs/proxy.md` ("Connection limits") says how to size it.

use std::io;
use std::time::{Duration, Instant};

use coldwire_http::Status;
use coldwire_io::Driver;

use super::problem::{ProblemAnswer, connect_problem, write_problem};
use super::state::{Client, ClientState};
use super::worker::Worker;
use crate::output::Output;

/// The shortest time between two lines about the same kind of shortage.
pub const NOTICE_INTERVAL: Duration = Duration::from_secs(10);

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

impl<D: Driver> Worker<D> {
    /// Counts and says (at most once per [`NOTICE_INTERVAL`]) a request that found no
    /// connection to spare (`error` is [`coldwire_io::is_out_of_connections`]): an
    /// exchange's or a CONNECT tunnel's.
    pub(super) fn note_out_of_connections(&mut self, error: &io::Error) {
        self.http.connection_limit_reached += 1;
        if error.raw_os_error().is_some() {
            // EMFILE/ENFILE/ENOBUFS/ENOMEM; the loop's own limit carries no errno.
            self.http.connection_limit_descriptors += 1;
        }
        if let Some(count) = self.limits.refusals.note(1, self.driver.now()) {
            crate::console::err(format_args!(
                "coldwire proxy: worker {}: {count} request(s) answered 503 (connection_limit_reached): \
                 no upstream connection could be opened: {error}; the open connections are still served \
                 (docs/proxy.md, \"Connection limits\", says how to size the limits)",
                self.index
            ));
        }
    }

    /// No upstream connection could be opened for the client's exchange (`error` is
    /// [`coldwire_io::is_out_of_connections`]): stored content where `stale-if-error`
    /// allows, else the `503`; counted and said.
    pub(super) fn out_of_connections(&mut self, client: &mut Client, error: &io::Error) {
        self.note_out_of_connections(error);
        if self.answer_stale_on_error(client, Status::SERVICE_UNAVAILABLE) {
            return;
        }
        let Some(exchange) = client.state.take_exchange() else {
            return;
        };
        if let Some(origin) = exchange.upstream.origin.and_then(|id| self.take_origin(id)) {
            self.driver.close(origin.id);
        }
        let mut problem = connect_problem(error);
        if let Some(address) = exchange.upstream.address {
            problem = problem.next_hop(address.to_string());
        }
        let keep_alive = exchange.request.keep_alive && !exchange.request.body_pending();
        let date = *self.date.bytes();
        let answer = ProblemAnswer {
            version: exchange.request.version,
            keep_alive,
            head_only: exchange.request.head_only,
            name: &self.config.name,
            cache_status: None,
            date: &date,
        };
        let mut output = Output::new(client.session.id);
        let body_bytes = write_problem(output.bytes(&mut self.driver), &problem, &answer);
        output.finish(&mut self.driver);
        let code = problem.status.code();
        self.http.count_response(code);
        self.http.body_bytes += body_bytes;
        self.log_problem(client, &problem);
        self.log_entry(client, code, body_bytes, ("-", None), problem.kind.token());
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
}
