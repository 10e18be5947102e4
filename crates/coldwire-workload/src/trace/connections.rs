//! How a client's logged requests become persistent connections, for replay and for the
//! statistics: a log records requests, not connections, so the connections are inferred.
//!
//! The rule ([`ConnectionRule`]): a client's requests go, in logged order, one at a time on
//! one connection; the next request opens a new connection when it is logged more than
//! `idle_gap` after the previous one (the server's keep-alive timeout would have closed
//! the connection: Apache's and Polygraph's default is 15 s) or when the connection has
//! already carried `max_requests` (Apache's `MaxKeepAliveRequests` default is 100; 0 is
//! no limit). The same rule with a 30-minute gap and no limit gives sessions.

use std::collections::HashMap;

use super::Record;

/// When a client's next request needs a new connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionRule {
    /// A request logged more than this many milliseconds after the client's previous one
    /// opens a new connection.
    pub idle_gap_ms: i64,
    /// Requests per connection at most (0: no limit).
    pub max_requests: u64,
}

impl ConnectionRule {
    /// Keep-alive connections as Apache's defaults make them: a 15 s idle gap, 100
    /// requests per connection.
    pub const KEEP_ALIVE: ConnectionRule = ConnectionRule {
        idle_gap_ms: 15_000,
        max_requests: 100,
    };

    /// Sessions: a 30-minute gap, no limit.
    pub const SESSION: ConnectionRule = ConnectionRule {
        idle_gap_ms: 30 * 60 * 1000,
        max_requests: 0,
    };
}

/// One client's requests as the rule splits them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRequests {
    /// The client as logged.
    pub client: String,
    /// Indexes of its records, in logged (time) order.
    pub requests: Vec<usize>,
    /// For each of `requests`, the number of its connection within the client (from 0).
    pub connection: Vec<u32>,
}

impl ClientRequests {
    /// How many connections the client opens.
    pub fn connections(&self) -> u32 {
        self.connection.last().map_or(0, |last| last + 1)
    }
}

/// The clients of `records` (those `include` accepts), in order of first appearance, each
/// with its requests split into connections by `rule`.
pub fn split_connections(
    records: &[Record],
    rule: ConnectionRule,
    include: impl Fn(&Record) -> bool,
) -> Vec<ClientRequests> {
    let mut index_of: HashMap<&str, usize> = HashMap::new();
    let mut clients: Vec<ClientRequests> = Vec::new();
    // Per client: time of its previous request and requests on its current connection.
    let mut state: Vec<(i64, u64)> = Vec::new();
    for (position, record) in records.iter().enumerate() {
        if !include(record) {
            continue;
        }
        let client = *index_of.entry(record.client.as_str()).or_insert_with(|| {
            clients.push(ClientRequests {
                client: record.client.clone(),
                requests: Vec::new(),
                connection: Vec::new(),
            });
            state.push((record.time_ms, 0));
            clients.len() - 1
        });
        let entry = &mut clients[client];
        let (previous, carried) = &mut state[client];
        let current = entry.connection.last().copied();
        let connection = match current {
            None => 0,
            Some(current) => {
                let idle = record.time_ms - *previous > rule.idle_gap_ms;
                let full = rule.max_requests != 0 && *carried >= rule.max_requests;
                if idle || full { current + 1 } else { current }
            }
        };
        if current != Some(connection) {
            *carried = 0;
        }
        *carried += 1;
        *previous = record.time_ms;
        entry.requests.push(position);
        entry.connection.push(connection);
    }
    clients
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(client: &str, seconds: i64) -> Record {
        Record {
            time_ms: seconds * 1000,
            client: client.into(),
            method: "GET".into(),
            url: "/".into(),
            status: 200,
            size: 1,
        }
    }

    #[test]
    fn idle_gaps_and_the_request_limit_open_connections() {
        let records = [
            record("a", 0),
            record("b", 1),
            record("a", 15),
            record("a", 31),
            record("a", 32),
            record("a", 33),
            record("b", 100),
        ];
        let rule = ConnectionRule {
            idle_gap_ms: 15_000,
            max_requests: 2,
        };
        let clients = split_connections(&records, rule, |_| true);
        assert_eq!(clients.len(), 2);
        assert_eq!(clients[0].client, "a");
        assert_eq!(clients[0].requests, [0, 2, 3, 4, 5]);
        // 15 s is not more than the gap; 16 s is; the limit of 2 splits 31, 32 | 33.
        assert_eq!(clients[0].connection, [0, 0, 1, 1, 2]);
        assert_eq!(clients[0].connections(), 3);
        assert_eq!(clients[1].connection, [0, 1]);
        let unlimited = split_connections(&records, ConnectionRule::SESSION, |r| r.client == "a");
        assert_eq!(unlimited.len(), 1);
        assert_eq!(unlimited[0].connections(), 1);
    }
}
