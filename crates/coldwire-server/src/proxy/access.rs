//! The proxy's access log (`--access-log FILE`): one line per response, written by the
//! server's [`AccessLog`] (Common Log Format, buffered per worker, one `write` per 32 KiB
//! or second) with two fields appended: the cache status (`hit`, `stale`, `revalidated`,
//! `miss`, `refreshed`, `client-refresh`, `bypass`, `purge`, `tunnel`, or `-` when the
//! cache played no part) and the upstream time in seconds (request sent to response head
//! received, millisecond resolution; `-` when the origin was not asked).
//!
//! The request line is remembered on the client when its request is routed (only when the
//! log is on) and taken by the line written for its response.

use std::time::Duration;

use coldwire_http::{RequestHead, Version};
use coldwire_io::Driver;

use super::state::Client;
use super::worker::Worker;

/// The request line of the request being answered, kept for its log line.
#[derive(Debug)]
pub struct RequestLine {
    /// Method as sent.
    pub method: String,
    /// Target as sent.
    pub target: String,
    /// Version.
    pub version: Version,
}

/// The appended fields: cache status and upstream seconds.
fn extra_fields(cache: &str, upstream: Option<Duration>) -> String {
    match upstream {
        Some(elapsed) => format!("{cache} {:.3}", elapsed.as_secs_f64()),
        None => format!("{cache} -"),
    }
}

impl<D: Driver> Worker<D> {
    /// Remembers the request line of a routed request, when logging.
    pub(super) fn remember_request_line(&self, client: &mut Client, head: &RequestHead<'_>) {
        client.request_line = self.log.is_some().then(|| {
            Box::new(RequestLine {
                method: head.method_str().to_owned(),
                target: head.target().to_owned(),
                version: head.version(),
            })
        });
    }

    /// Logs the end of a forwarded exchange, unless its response was already logged (a
    /// 304 refresh answered from the store).
    pub(super) fn log_exchange(
        &mut self,
        client: &mut Client,
        (cache, upstream): (&str, Option<Duration>),
        status: u16,
        body_bytes: u64,
    ) {
        if client.request_line.is_some() {
            self.log_line(client, status, body_bytes, cache, upstream);
        }
    }

    /// Logs an answer the proxy made itself (no upstream time).
    pub(super) fn log_answer(
        &mut self,
        client: &mut Client,
        status: u16,
        body_bytes: u64,
        cache: Option<&str>,
    ) {
        self.log_line(client, status, body_bytes, cache.unwrap_or("-"), None);
    }

    /// Logs the response to the client's current request.
    pub(super) fn log_line(
        &mut self,
        client: &mut Client,
        status: u16,
        body_bytes: u64,
        cache: &str,
        upstream: Option<Duration>,
    ) {
        let Some(log) = self.log.as_mut() else {
            return;
        };
        let line = client.request_line.take();
        let (method, target, version) = match line.as_deref() {
            Some(line) => (
                line.method.as_bytes(),
                line.target.as_bytes(),
                line.version.as_bytes(),
            ),
            None => (&b"-"[..], &b"-"[..], &b"-"[..]),
        };
        log.record_extended(
            client.session.peer.ip(),
            method,
            target,
            version,
            status,
            body_bytes,
            self.wall_clock,
            extra_fields(cache, upstream).as_bytes(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_fields_show_milliseconds_or_a_dash() {
        assert_eq!(
            extra_fields("miss", Some(Duration::from_millis(1234))),
            "miss 1.234"
        );
        assert_eq!(extra_fields("hit", None), "hit -");
    }
}
