//! The proxy's access log (`--access-log FILE`): one line per response, written by the
//! server's [`AccessLog`] (in its `--access-log-format`, buffered per worker, one `write`
//! per 32 KiB or second) with the proxy's fields: the cache status (`hit`, `stale`,
//! `revalidated`, `miss`, `refreshed`, `client-refresh`, `bypass`, `purge`, `tunnel`,
//! `aborted`, or `-` when the cache played no part), the upstream time in seconds (request
//! sent to response head received, millisecond resolution; `-` when the origin was not
//! asked), and the error word (RFC 9209's error type, as in the answer's `Proxy-Status`;
//! `-` for none).
//!
//! The request line is remembered on the client when its request is routed (only when the
//! log is on) and taken by the line written for its response.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use coldwire_http::{RequestHead, Version};
use coldwire_io::Driver;

use super::state::Client;
use super::worker::Worker;
use crate::access_log::{Entry, ProxyFields};

/// The request line of the request being answered, kept for its log line.
#[derive(Debug)]
pub struct RequestLine {
    /// Method as sent.
    pub method: String,
    /// Target as sent.
    pub target: String,
    /// Version.
    pub version: Version,
    /// When the request was routed (for the elapsed time).
    pub received: Instant,
    /// The origin's address, once chosen.
    pub upstream: Option<SocketAddr>,
}

impl<D: Driver> Worker<D> {
    /// Remembers the request line of a routed request, when logging.
    pub(super) fn remember_request_line(&self, client: &mut Client, head: &RequestHead<'_>) {
        client.request_line = self.log.is_some().then(|| {
            Box::new(RequestLine {
                method: head.method_str().to_owned(),
                target: head.target().to_owned(),
                version: head.version(),
                received: self.driver.now(),
                upstream: None,
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

    /// Logs the response to the client's current request (cache status `aborted`: the
    /// response was cut, error `http_response_incomplete`).
    pub(super) fn log_line(
        &mut self,
        client: &mut Client,
        status: u16,
        body_bytes: u64,
        cache: &str,
        upstream: Option<Duration>,
    ) {
        let error = if cache == "aborted" {
            "http_response_incomplete"
        } else {
            "-"
        };
        self.log_entry(client, status, body_bytes, (cache, upstream), error);
    }

    /// Logs one response with its `error` word (`-` for none).
    pub(super) fn log_entry(
        &mut self,
        client: &mut Client,
        status: u16,
        body_bytes: u64,
        (cache, upstream): (&str, Option<Duration>),
        error: &str,
    ) {
        let now = self.driver.now();
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
        log.record_entry(&Entry {
            peer: client.session.peer.ip(),
            method,
            target,
            version,
            status,
            body_bytes,
            now: self.wall_clock,
            elapsed: line
                .as_deref()
                .map(|line| now.saturating_duration_since(line.received)),
            proxy: Some(ProxyFields {
                cache,
                upstream_time: upstream,
                upstream: line.as_deref().and_then(|line| line.upstream),
                error,
            }),
        });
    }
}
