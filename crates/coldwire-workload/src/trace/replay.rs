//! A trace as a replay plan: its clients (in order of first appearance, client *i*
//! replayed as user *i*), each with its requests in logged order, the moment each is due
//! (its offset from the trace's first record divided by the speedup), and the connection
//! each goes on ([`ConnectionRule`]). Pure: the load generator's replay workload
//! (`coldwire bench --replay`) asks it what is due, what to send and how many requests a
//! connection it opens will carry.
//!
//! Records a replay does not send (methods other than `GET` and `HEAD`) are left out and
//! counted in [`ReplayPlan::skipped`].

use std::time::Duration;

use super::connections::{ClientRequests, ConnectionRule, split_connections};
use super::{Record, request_path};

/// One request of the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedRequest {
    /// When it is due, from the replay's start (logged offset / speedup).
    pub due: Duration,
    /// `GET` or `HEAD`.
    pub head: bool,
    /// The path (and query) to ask for.
    pub path: String,
    /// The size the trace logged.
    pub size: u64,
    /// Its connection's number within the client (from 0).
    pub connection: u32,
}

/// One client of the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedClient {
    /// The client as logged.
    pub name: String,
    /// Its requests in logged order.
    pub requests: Vec<PlannedRequest>,
}

impl PlannedClient {
    /// How many requests the connection that request `position` opens will carry: those
    /// left on `position`'s connection from `position` on.
    pub fn connection_length_from(&self, position: usize) -> u64 {
        let Some(first) = self.requests.get(position) else {
            return 1;
        };
        self.requests[position..]
            .iter()
            .take_while(|request| request.connection == first.connection)
            .count() as u64
    }

    /// How many connections it opens.
    pub fn connections(&self) -> u32 {
        self.requests
            .last()
            .map_or(0, |request| request.connection + 1)
    }
}

/// A whole replay.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayPlan {
    /// The clients, in order of first appearance.
    pub clients: Vec<PlannedClient>,
    /// Requests to send, over all clients.
    pub requests: u64,
    /// Records left out (methods other than GET and HEAD).
    pub skipped: u64,
    /// The logged span from the first record to the last.
    pub logged_span: Duration,
    /// The speedup the due times are divided by.
    pub speedup: f64,
    /// The connection rule used.
    pub rule: ConnectionRule,
}

impl ReplayPlan {
    /// The plan of `records` (in time order) at `speedup` (1: the original pace) with
    /// connections by `rule`. A speedup that is not a positive finite number counts as 1.
    pub fn new(records: &[Record], speedup: f64, rule: ConnectionRule) -> ReplayPlan {
        let speedup = if speedup.is_finite() && speedup > 0.0 {
            speedup
        } else {
            1.0
        };
        let first = records.first().map_or(0, |record| record.time_ms);
        let last = records.last().map_or(0, |record| record.time_ms);
        let clients: Vec<ClientRequests> = split_connections(records, rule, Record::replayable);
        let mut requests = 0;
        let clients: Vec<PlannedClient> = clients
            .into_iter()
            .map(|client| {
                requests += client.requests.len() as u64;
                PlannedClient {
                    requests: client
                        .requests
                        .iter()
                        .zip(&client.connection)
                        .map(|(&index, &connection)| {
                            let record = &records[index];
                            let offset_ms = (record.time_ms - first).max(0) as f64;
                            PlannedRequest {
                                due: Duration::from_secs_f64(offset_ms / 1000.0 / speedup),
                                head: record.method == "HEAD",
                                path: request_path(&record.url).to_owned(),
                                size: record.size,
                                connection,
                            }
                        })
                        .collect(),
                    name: client.client,
                }
            })
            .collect();
        ReplayPlan {
            skipped: records.len() as u64 - requests,
            requests,
            clients,
            logged_span: Duration::from_millis((last - first).max(0) as u64),
            speedup,
            rule,
        }
    }

    /// How long the replay's schedule lasts (the logged span / speedup).
    pub fn replay_span(&self) -> Duration {
        self.logged_span.div_f64(self.speedup)
    }

    /// Connections over all clients.
    pub fn connections(&self) -> u64 {
        self.clients
            .iter()
            .map(|client| u64::from(client.connections()))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(client: &str, seconds: i64, method: &str, url: &str) -> Record {
        Record {
            time_ms: seconds * 1000,
            client: client.into(),
            method: method.into(),
            url: url.into(),
            status: 200,
            size: seconds as u64,
        }
    }

    #[test]
    fn clients_keep_their_order_connections_and_due_times() {
        let records = [
            record("a", 100, "GET", "/1"),
            record("b", 101, "GET", "http://h/2"),
            record("a", 102, "HEAD", "/3"),
            record("a", 103, "POST", "/form"),
            record("a", 130, "GET", "/4"),
            record("a", 131, "GET", "/5"),
        ];
        let plan = ReplayPlan::new(&records, 4.0, ConnectionRule::KEEP_ALIVE);
        assert_eq!((plan.requests, plan.skipped), (5, 1));
        assert_eq!(plan.logged_span, Duration::from_secs(31));
        assert_eq!(plan.replay_span(), Duration::from_secs_f64(7.75));
        assert_eq!(plan.clients.len(), 2);
        let a = &plan.clients[0];
        assert_eq!(a.name, "a");
        let paths: Vec<&str> = a.requests.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths, ["/1", "/3", "/4", "/5"]);
        assert!(a.requests[1].head);
        let dues: Vec<f64> = a.requests.iter().map(|r| r.due.as_secs_f64()).collect();
        assert_eq!(dues, [0.0, 0.5, 7.5, 7.75]);
        // 102 → 130 is 28 s, more than the 15 s gap: a second connection.
        let connections: Vec<u32> = a.requests.iter().map(|r| r.connection).collect();
        assert_eq!(connections, [0, 0, 1, 1]);
        assert_eq!(a.connection_length_from(0), 2);
        assert_eq!(a.connection_length_from(1), 1);
        assert_eq!(a.connection_length_from(2), 2);
        assert_eq!(a.connection_length_from(9), 1);
        assert_eq!(plan.clients[1].requests[0].path, "/2");
        assert_eq!(plan.connections(), 3);
        assert_eq!(
            ReplayPlan::new(&records, f64::NAN, ConnectionRule::KEEP_ALIVE).speedup,
            1.0
        );
    }
}
