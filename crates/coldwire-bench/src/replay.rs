//! Trace replay (`coldwire bench --replay FILE`) as a [`Population`] for the population
//! engine: each client of the log is a user (client *i*, in order of first appearance, is
//! user *i*) with its own source address (`127.1.0.0` + *i* + 1 when the target is on
//! loopback), its requests sent in logged order at the logged times divided by the
//! speedup, one connection at a time, each connection carrying exactly the requests the
//! trace's [`ConnectionRule`] puts on it (the last asks `Connection: close`).
//!
//! The plan ([`ReplayPlan`], `coldwire_workload::trace`) is pure; this file only answers
//! the engine: when a user's next request is due, its bytes, how many requests the
//! connection it opens will carry. Responses are verified when the server names the object
//! (`coldwire origin --trace` does: the expected id is the hash of the path).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use bytes::Bytes;
use coldwire_workload::trace::catalogue::path_id;
use coldwire_workload::trace::{ConnectionRule, ReplayPlan};

use crate::population::{Population, UserRequest};
use crate::schedule::Random;

/// The request kinds a replay reports.
const KINDS: &[&str] = &["get", "head"];

/// The first source address: user *i* connects from this + *i* + 1 (`127.1.0.1`, ...).
const SOURCE_BASE: u32 = u32::from_be_bytes([127, 1, 0, 0]);

/// Most users that get an address of their own (the rest of 127.0.0.0/8 above the base).
pub const MAX_SOURCE_USERS: usize =
    (u32::from_be_bytes([127, 255, 255, 254]) - SOURCE_BASE) as usize;

/// The user's own source address.
pub fn source_address(user: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(SOURCE_BASE + user as u32 + 1))
}

/// A logged request as the replays send it: `GET` (or `HEAD`) of `path` — in absolute
/// form behind `absolute_prefix` when going through a proxy — to `host`, closing the
/// connection after it when `close`; kind 1 for `HEAD`, 0 for `GET`.
pub(crate) fn replay_request(
    host: &str,
    absolute_prefix: Option<&str>,
    head: bool,
    path: &str,
    close: bool,
) -> UserRequest {
    let method = if head { "HEAD" } else { "GET" };
    let target = match absolute_prefix {
        Some(prefix) if path.starts_with('/') => format!("{prefix}{path}"),
        _ => path.to_owned(),
    };
    let text = format!(
        "{method} {target} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: coldwire-bench-replay\r\n{}\r\n",
        if close { "Connection: close\r\n" } else { "" }
    );
    UserRequest {
        endpoint: 0,
        bytes: Bytes::from(text),
        head_request: head,
        expected_object: Some(path_id(path)),
        basic: !head,
        offered_hit: false,
        kind: usize::from(head),
    }
}

/// A trace replayed against one server (or through one proxy).
pub struct ReplayPopulation {
    plan: ReplayPlan,
    endpoints: Vec<SocketAddr>,
    /// `Host` of every request.
    host: String,
    /// Through a proxy: the absolute-form prefix (`http://host:port`).
    absolute_prefix: Option<String>,
    own_sources: bool,
    start: Option<Instant>,
    /// Per user: the next request to schedule, the next to make.
    next_arrival: Vec<usize>,
    next_request: Vec<usize>,
}

impl ReplayPopulation {
    /// A replay of `plan` sent to `server` (with `Host: host`), or through `proxy` with
    /// absolute-form targets; users connect from their own loopback addresses when
    /// `own_sources` (only sensible when the address connected to is on loopback).
    pub fn new(
        plan: ReplayPlan,
        server: SocketAddr,
        host: String,
        proxy: Option<SocketAddr>,
        own_sources: bool,
    ) -> ReplayPopulation {
        let users = plan.clients.len();
        ReplayPopulation {
            endpoints: vec![proxy.unwrap_or(server)],
            absolute_prefix: proxy.map(|_| format!("http://{host}")),
            host,
            own_sources: own_sources && users <= MAX_SOURCE_USERS,
            start: None,
            next_arrival: vec![0; users],
            next_request: vec![0; users],
            plan,
        }
    }

    /// The plan replayed.
    pub fn plan(&self) -> &ReplayPlan {
        &self.plan
    }

    fn due(&self, user: usize, position: usize) -> Option<Instant> {
        let request = self.plan.clients.get(user)?.requests.get(position)?;
        Some(self.start? + request.due)
    }
}

impl Population for ReplayPopulation {
    fn endpoints(&self) -> &[SocketAddr] {
        &self.endpoints
    }

    fn users(&self) -> usize {
        self.plan.clients.len()
    }

    fn active_users(&self, _phase: usize, _elapsed: Duration) -> usize {
        self.plan.clients.len()
    }

    fn next_arrival(
        &mut self,
        user: usize,
        after: Instant,
        _first: bool,
        _random: &mut Random,
    ) -> Option<Instant> {
        // Every user is activated at the start, so the first call sets the replay's zero.
        self.start.get_or_insert(after);
        let position = *self.next_arrival.get(user)?;
        let due = self.due(user, position)?;
        self.next_arrival[user] += 1;
        Some(due)
    }

    fn request(
        &mut self,
        user: usize,
        intended: Instant,
        close: bool,
        _random: &mut Random,
    ) -> UserRequest {
        // The engine makes a user's requests in order; an arrival it dropped (waited past
        // the timeout) is passed over here, found by its earlier due time.
        let mut position = self.next_request.get(user).copied().unwrap_or(0);
        while self.due(user, position).is_some_and(|due| due < intended)
            && self.due(user, position + 1).is_some()
        {
            position += 1;
        }
        if let Some(next) = self.next_request.get_mut(user) {
            *next = position + 1;
        }
        let planned = self
            .plan
            .clients
            .get(user)
            .and_then(|client| client.requests.get(position));
        let (head, path) = planned.map_or((false, "/"), |request| {
            (request.head, request.path.as_str())
        });
        replay_request(
            &self.host,
            self.absolute_prefix.as_deref(),
            head,
            path,
            close,
        )
    }

    fn source(&self, user: usize) -> Option<IpAddr> {
        self.own_sources.then(|| source_address(user))
    }

    fn connection_limits(&mut self, user: usize, _random: &mut Random) -> (usize, u64) {
        let position = self.next_request.get(user).copied().unwrap_or(0);
        let length = self
            .plan
            .clients
            .get(user)
            .map_or(1, |client| client.connection_length_from(position));
        (1, length)
    }

    fn request_kinds(&self) -> &[&'static str] {
        KINDS
    }
}

/// The rule as the replay's options give it: `idle_gap` and `max_requests` (0: no limit).
pub fn connection_rule(idle_gap: Duration, max_requests: u64) -> ConnectionRule {
    ConnectionRule {
        idle_gap_ms: idle_gap.as_millis().min(i64::MAX as u128) as i64,
        max_requests,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldwire_workload::trace::parse_trace;

    const TRACE: &str = "\
a - - [01/Jul/1995:00:00:00 -0400] \"GET /1 HTTP/1.0\" 200 10
b - - [01/Jul/1995:00:00:01 -0400] \"HEAD /2 HTTP/1.0\" 200 20
a - - [01/Jul/1995:00:00:02 -0400] \"GET /3 HTTP/1.0\" 200 30
a - - [01/Jul/1995:00:00:40 -0400] \"GET /4 HTTP/1.0\" 200 40
";

    fn population(proxy: Option<SocketAddr>) -> ReplayPopulation {
        let records = parse_trace(TRACE, None).records;
        let plan = ReplayPlan::new(&records, 2.0, ConnectionRule::KEEP_ALIVE);
        let server: SocketAddr = "127.0.0.1:8090".parse().unwrap();
        ReplayPopulation::new(plan, server, "127.0.0.1:8090".into(), proxy, true)
    }

    #[test]
    fn users_get_their_logged_requests_in_order_at_their_times() {
        let mut replay = population(None);
        let mut random = Random::new(1);
        let start = Instant::now();
        assert_eq!(replay.users(), 2);
        let due = |replay: &mut ReplayPopulation, user, random: &mut Random| {
            replay
                .next_arrival(user, start, false, random)
                .map(|due| due - start)
        };
        assert_eq!(due(&mut replay, 0, &mut random), Some(Duration::ZERO));
        assert_eq!(
            due(&mut replay, 0, &mut random),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            due(&mut replay, 0, &mut random),
            Some(Duration::from_secs(20))
        );
        assert_eq!(due(&mut replay, 0, &mut random), None);
        assert_eq!(
            due(&mut replay, 1, &mut random),
            Some(Duration::from_millis(500))
        );
        // User a: /1 and /3 share a connection (2 s apart), /4 opens another (38 s later).
        assert_eq!(replay.connection_limits(0, &mut random), (1, 2));
        let first = replay.request(0, start, false, &mut random);
        assert!(
            first
                .bytes
                .starts_with(b"GET /1 HTTP/1.1\r\nHost: 127.0.0.1:8090\r\n")
        );
        assert_eq!(first.expected_object, Some(path_id("/1")));
        let second = replay.request(0, start + Duration::from_secs(1), true, &mut random);
        assert!(second.bytes.starts_with(b"GET /3 "));
        assert!(second.bytes.ends_with(b"Connection: close\r\n\r\n"));
        assert_eq!(replay.connection_limits(0, &mut random), (1, 1));
        let head = replay.request(1, start, false, &mut random);
        assert!(head.head_request && head.bytes.starts_with(b"HEAD /2 "));
        assert_eq!(replay.source(0), Some("127.1.0.1".parse().unwrap()));
        assert_eq!(replay.source(1), Some("127.1.0.2".parse().unwrap()));
    }

    #[test]
    fn a_dropped_arrival_is_passed_over_and_proxies_get_absolute_targets() {
        let mut replay = population(Some("127.0.0.1:3128".parse().unwrap()));
        let mut random = Random::new(1);
        let start = Instant::now();
        for _ in 0..3 {
            replay.next_arrival(0, start, false, &mut random);
        }
        // /1 timed out in the queue: the engine asks for the one due at 20 s.
        let request = replay.request(0, start + Duration::from_secs(20), true, &mut random);
        assert!(
            request
                .bytes
                .starts_with(b"GET http://127.0.0.1:8090/4 HTTP/1.1\r\n"),
            "{:?}",
            request.bytes
        );
        assert_eq!(replay.endpoints(), ["127.0.0.1:3128".parse().unwrap()]);
    }
}
