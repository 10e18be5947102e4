//! Closed-loop trace replay (`coldwire bench --replay FILE --replay-connections N`) as a
//! [`Population`]: N users, each holding one connection at a time and sending the trace's
//! next request as soon as the previous answer arrived — "as fast as the server can handle
//! them", as seed 001's replayers did — so the number of simultaneous connections is the
//! experiment's variable, not the log's pace.
//!
//! The trace's connections (the [`coldwire_workload::trace::ConnectionRule`]'s: a
//! client's requests within the idle gap, at most the request limit) are taken in order of their first logged request from
//! one shared cursor: a user replays one whole logged connection on one TCP connection
//! (its last request asks `Connection: close`), then takes the next one from the cursor,
//! and the cursor starts the trace again when it reaches the end (a run lasts its
//! `--duration`, not the log's length). Logged times are ignored; paths, methods, the
//! requests per connection and each logged client's source address are kept.
//!
//! Invariants: a user is always on one logged connection (`current`, at `position`); the
//! engine asks [`Population::connection_limits`] before it opens a connection, and that
//! is where a user whose logged connection is used up takes the next one.

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use coldwire_workload::trace::ReplayPlan;

use crate::population::{Population, UserRequest};
use crate::replay::{MAX_SOURCE_USERS, replay_request, source_address};
use crate::schedule::Random;

/// The request kinds a replay reports.
const KINDS: &[&str] = &["get", "head"];

/// One logged connection: its client (by index) and its requests (`HEAD`?, path).
#[derive(Clone, Debug)]
struct LoggedConnection {
    client: usize,
    requests: Vec<(bool, String)>,
}

/// Where one user is.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    current: usize,
    position: usize,
    started: bool,
}

/// A trace replayed in a closed loop on a fixed number of connections.
pub struct ClosedReplayPopulation {
    connections: Vec<LoggedConnection>,
    slots: Vec<Slot>,
    cursor: usize,
    /// Times the cursor went round the trace.
    laps: u64,
    endpoints: Vec<SocketAddr>,
    host: String,
    absolute_prefix: Option<String>,
    own_sources: bool,
}

impl ClosedReplayPopulation {
    /// `users` connections replaying `plan`'s logged connections (in order of their first
    /// request) against `server` (`Host: host`), or through `proxy` with absolute-form
    /// targets; each connection from its logged client's own loopback address when
    /// `own_sources`. `plan` must have at least one request.
    pub fn new(
        plan: &ReplayPlan,
        users: usize,
        server: SocketAddr,
        host: String,
        proxy: Option<SocketAddr>,
        own_sources: bool,
    ) -> ClosedReplayPopulation {
        let mut logged: Vec<(std::time::Duration, LoggedConnection)> = Vec::new();
        for (client, planned) in plan.clients.iter().enumerate() {
            let mut open: Option<(u32, std::time::Duration, LoggedConnection)> = None;
            for request in &planned.requests {
                if open
                    .as_ref()
                    .is_some_and(|(number, _, _)| *number != request.connection)
                    && let Some((_, due, connection)) = open.take()
                {
                    logged.push((due, connection));
                }
                let (_, _, connection) = open.get_or_insert_with(|| {
                    (
                        request.connection,
                        request.due,
                        LoggedConnection {
                            client,
                            requests: Vec::new(),
                        },
                    )
                });
                connection
                    .requests
                    .push((request.head, request.path.clone()));
            }
            if let Some((_, due, connection)) = open {
                logged.push((due, connection));
            }
        }
        // Stable: connections logged in the same second keep their clients' order.
        logged.sort_by_key(|(due, _)| *due);
        ClosedReplayPopulation {
            connections: logged
                .into_iter()
                .map(|(_, connection)| connection)
                .collect(),
            slots: vec![Slot::default(); users],
            cursor: 0,
            laps: 0,
            endpoints: vec![proxy.unwrap_or(server)],
            absolute_prefix: proxy.map(|_| format!("http://{host}")),
            host,
            own_sources: own_sources && plan.clients.len() <= MAX_SOURCE_USERS,
        }
    }

    /// The logged connections replayed (one lap of the trace).
    pub fn logged_connections(&self) -> usize {
        self.connections.len()
    }

    /// Times the shared cursor went back to the trace's first connection.
    pub fn laps(&self) -> u64 {
        self.laps
    }

    /// Moves `user` to the next logged connection from the cursor.
    fn take_next(&mut self, user: usize) {
        if self.connections.is_empty() {
            return;
        }
        if self.cursor >= self.connections.len() {
            self.cursor = 0;
            self.laps += 1;
        }
        self.slots[user] = Slot {
            current: self.cursor,
            position: 0,
            started: true,
        };
        self.cursor += 1;
    }

    fn remaining(&self, user: usize) -> usize {
        let slot = self.slots[user];
        self.connections.get(slot.current).map_or(0, |connection| {
            connection.requests.len().saturating_sub(slot.position)
        })
    }
}

impl Population for ClosedReplayPopulation {
    fn endpoints(&self) -> &[SocketAddr] {
        &self.endpoints
    }

    fn users(&self) -> usize {
        self.slots.len()
    }

    fn active_users(&self, _phase: usize, _elapsed: std::time::Duration) -> usize {
        self.slots.len()
    }

    fn next_arrival(
        &mut self,
        _user: usize,
        after: Instant,
        _first: bool,
        _random: &mut Random,
    ) -> Option<Instant> {
        // The engine asks when the previous request ended (closed loop): at once.
        (!self.connections.is_empty()).then_some(after)
    }

    fn request(
        &mut self,
        user: usize,
        _intended: Instant,
        close: bool,
        _random: &mut Random,
    ) -> UserRequest {
        if !self.slots[user].started || self.remaining(user) == 0 {
            self.take_next(user);
        }
        let slot = self.slots[user];
        self.slots[user].position += 1;
        let (head, path) = self
            .connections
            .get(slot.current)
            .and_then(|connection| connection.requests.get(slot.position))
            .map_or((false, "/"), |(head, path)| (*head, path.as_str()));
        replay_request(
            &self.host,
            self.absolute_prefix.as_deref(),
            head,
            path,
            close,
        )
    }

    fn source(&self, user: usize) -> Option<IpAddr> {
        let client = self.connections.get(self.slots[user].current)?.client;
        self.own_sources.then(|| source_address(client))
    }

    fn connection_limits(&mut self, user: usize, _random: &mut Random) -> (usize, u64) {
        // A new TCP connection: a user whose logged connection is used up takes the next.
        if !self.slots[user].started || self.remaining(user) == 0 {
            self.take_next(user);
        }
        (1, self.remaining(user).max(1) as u64)
    }

    fn request_kinds(&self) -> &[&'static str] {
        KINDS
    }

    fn closed_loop(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldwire_workload::trace::{ConnectionRule, parse_trace};

    // a: /1 /2 on one connection, /4 on a second (40 s later); b: /3.
    const TRACE: &str = "\
a - - [01/Jul/1995:00:00:00 -0400] \"GET /1 HTTP/1.0\" 200 10
a - - [01/Jul/1995:00:00:01 -0400] \"GET /2 HTTP/1.0\" 200 20
b - - [01/Jul/1995:00:00:02 -0400] \"HEAD /3 HTTP/1.0\" 200 30
a - - [01/Jul/1995:00:00:41 -0400] \"GET /4 HTTP/1.0\" 200 40
";

    fn population(users: usize) -> ClosedReplayPopulation {
        let records = parse_trace(TRACE, None).records;
        let plan = ReplayPlan::new(&records, 1.0, ConnectionRule::KEEP_ALIVE);
        let server: SocketAddr = "127.0.0.1:8090".parse().unwrap();
        ClosedReplayPopulation::new(&plan, users, server, "h".into(), None, true)
    }

    fn first_line(request: &UserRequest) -> String {
        let text = String::from_utf8_lossy(&request.bytes);
        text.lines().next().unwrap_or_default().to_owned()
    }

    #[test]
    fn users_take_logged_connections_in_order_and_wrap_around() {
        let mut replay = population(2);
        let mut random = Random::new(1);
        let now = Instant::now();
        assert_eq!(replay.logged_connections(), 3);
        assert!(replay.closed_loop());
        assert_eq!(replay.next_arrival(0, now, true, &mut random), Some(now));
        // User 0 opens a's first connection (2 requests), user 1 b's (1 request).
        assert_eq!(replay.connection_limits(0, &mut random), (1, 2));
        assert_eq!(replay.source(0), Some("127.1.0.1".parse().unwrap()));
        assert_eq!(replay.connection_limits(1, &mut random), (1, 1));
        assert_eq!(replay.source(1), Some("127.1.0.2".parse().unwrap()));
        let request = replay.request(0, now, false, &mut random);
        assert_eq!(first_line(&request), "GET /1 HTTP/1.1");
        let request = replay.request(1, now, true, &mut random);
        assert_eq!(first_line(&request), "HEAD /3 HTTP/1.1");
        assert!(request.head_request);
        let request = replay.request(0, now, true, &mut random);
        assert_eq!(first_line(&request), "GET /2 HTTP/1.1");
        assert!(request.bytes.ends_with(b"Connection: close\r\n\r\n"));
        // User 1 is done with b's: it takes a's second connection; then user 0 wraps.
        assert_eq!(replay.connection_limits(1, &mut random), (1, 1));
        assert_eq!(
            first_line(&replay.request(1, now, true, &mut random)),
            "GET /4 HTTP/1.1"
        );
        assert_eq!(replay.laps(), 0);
        assert_eq!(replay.connection_limits(0, &mut random), (1, 2));
        assert_eq!(
            first_line(&replay.request(0, now, false, &mut random)),
            "GET /1 HTTP/1.1"
        );
        assert_eq!(replay.laps(), 1);
    }
}
