//! The population engine's connections: opening one for a user (from its source address),
//! sending a request, reading and classifying the response (hit or miss, body verified),
//! recording it in the phase it was intended in, and deciding what the connection does
//! next — carry the user's next waiting request, wait idle in the user's stack, or close
//! (its request limit, `Connection: close`, an error). Every request ends exactly once.

use std::time::Instant;

use coldwire_io::{Chunk, Completion, ConnectionId, Driver, Flush};

use crate::recorder::ErrorKind;
use crate::response::{ReadOutcome, ResponseReader};

use super::Completed;
use super::engine::{Conn, Outstanding, PopulationEngine, Waiting};
use super::inspect::Check;

impl<D: Driver> PopulationEngine<D> {
    pub(super) fn conn(&mut self, id: ConnectionId) -> Option<&mut Conn> {
        match self.slots.get_mut(id.index()) {
            Some(Some(conn)) if conn.id == id => Some(conn),
            _ => None,
        }
    }

    pub(super) fn open_and_send(&mut self, user: usize, limit: u64, waiting: Waiting) {
        let endpoint_of = |engine: &mut Self, waiting: &mut Waiting| -> usize {
            if waiting.request.is_none() {
                let request = engine.population.request(
                    user,
                    waiting.intended,
                    limit == 1,
                    &mut engine.random,
                );
                let phase = waiting.phase;
                if let Some(count) = engine.phases[phase].population.kinds.get_mut(request.kind) {
                    *count += 1;
                }
                waiting.request = Some(request);
            }
            waiting
                .request
                .as_ref()
                .map_or(0, |request| request.endpoint)
        };
        let mut waiting = waiting;
        let endpoint = endpoint_of(self, &mut waiting);
        let address = self.population.endpoints()[endpoint];
        let connected = match self.population.source(user) {
            Some(source) => self.driver.connect_from(address, source),
            None => self.driver.connect(address),
        };
        match connected {
            Ok(id) => {
                self.open += 1;
                self.users[user].open += 1;
                self.phases[waiting.phase].recorder.connections_opened += 1;
                let index = id.index();
                if index >= self.slots.len() {
                    self.slots.resize_with(index + 1, || None);
                }
                self.slots[index] = Some(Box::new(Conn {
                    id,
                    user,
                    connected: false,
                    opened_at: self.now,
                    served: 0,
                    limit,
                    outstanding: None,
                    reader: ResponseReader::new(),
                    check: Check::default(),
                    idle: false,
                }));
                self.send(id, waiting);
            }
            Err(error) => {
                let kind = match error.raw_os_error() {
                    Some(libc::EMFILE | libc::ENFILE) | None => ErrorKind::NoDescriptor,
                    _ => ErrorKind::Connect,
                };
                self.count_error(waiting.phase, kind);
                self.request_ended(user, true);
            }
        }
    }

    pub(super) fn send(&mut self, id: ConnectionId, mut waiting: Waiting) {
        let Some(conn) = self.conn(id) else {
            return;
        };
        let user = conn.user;
        let last = conn.limit != 0 && conn.served + 1 >= conn.limit;
        if waiting.request.is_none() {
            let request = self
                .population
                .request(user, waiting.intended, last, &mut self.random);
            if let Some(count) = self.phases[waiting.phase]
                .population
                .kinds
                .get_mut(request.kind)
            {
                *count += 1;
            }
            waiting.request = Some(request);
        }
        let Some(request) = waiting.request.as_ref() else {
            return;
        };
        let bytes = request.bytes.clone();
        let head_request = request.head_request;
        let expected = request.expected_object;
        if !waiting.retried {
            self.phases[waiting.phase].recorder.sent += 1;
        }
        let sent = Instant::now();
        let timeout = self.config.timeout;
        let Some(conn) = self.conn(id) else {
            return;
        };
        conn.outstanding = Some(Outstanding { waiting, sent });
        conn.idle = false;
        conn.reader.reset_for(head_request);
        conn.check = Check::new(expected);
        self.in_flight += 1;
        self.driver.send(id, Chunk::Shared(bytes));
        if let Flush::Failed(error) = self.driver.flush(id) {
            self.fail(id, ErrorKind::of_io_error(&error));
            return;
        }
        self.driver.recv(id);
        self.driver.set_timer(id, sent + timeout);
    }

    pub(super) fn handle(&mut self, completion: Completion) {
        let Some(id) = completion.connection() else {
            return;
        };
        if self.conn(id).is_none() {
            if let Completion::Received { buffer, .. } = completion {
                self.driver.recycle(buffer);
            }
            return;
        }
        match completion {
            Completion::Connected { .. } => {
                if let Some(conn) = self.conn(id) {
                    conn.connected = true;
                }
            }
            Completion::Received { buffer, .. } => {
                let outcome = match self.conn(id) {
                    Some(conn) if conn.outstanding.is_some() => {
                        let Conn { reader, check, .. } = conn;
                        reader.feed_with(buffer.filled(), check)
                    }
                    _ => ReadOutcome::Malformed("unsolicited bytes"),
                };
                self.driver.recycle(buffer);
                self.on_read(id, outcome);
            }
            Completion::PeerClosed { .. } => {
                let outcome = match self.conn(id) {
                    Some(conn) if conn.outstanding.is_some() => conn.reader.end_of_stream(),
                    _ => None,
                };
                match outcome {
                    Some(outcome) => self.on_read(id, outcome),
                    None => self.fail(id, ErrorKind::Closed),
                }
            }
            Completion::Failed { error, .. } => {
                let connected = self.conn(id).is_some_and(|conn| conn.connected);
                let kind = if connected {
                    ErrorKind::of_io_error(&error)
                } else {
                    ErrorKind::Connect
                };
                self.fail(id, kind);
            }
            Completion::TimerExpired { .. } => self.timer(id),
            Completion::Sent { .. } | Completion::Accepted { .. } | Completion::Woken => {}
        }
    }

    pub(super) fn timer(&mut self, id: ConnectionId) {
        let now = self.now;
        let timeout = self.config.timeout;
        let Some(conn) = self.conn(id) else {
            return;
        };
        let deadline = match (conn.connected, &conn.outstanding) {
            (false, _) => Some((conn.opened_at + timeout, ErrorKind::Connect)),
            (true, Some(outstanding)) => Some((outstanding.sent + timeout, ErrorKind::Timeout)),
            (true, None) => None,
        };
        if let Some((deadline, kind)) = deadline {
            if deadline <= now {
                self.fail(id, kind);
            } else {
                self.driver.set_timer(id, deadline);
            }
        }
    }

    pub(super) fn on_read(&mut self, id: ConnectionId, outcome: ReadOutcome) {
        let (status, keep_alive) = match outcome {
            ReadOutcome::NeedMore => {
                self.driver.recv(id);
                return;
            }
            ReadOutcome::Malformed(_) => {
                self.fail(id, ErrorKind::BadResponse);
                return;
            }
            ReadOutcome::Complete { status, keep_alive } => (status, keep_alive),
        };
        let now = self.now;
        let Some(conn) = self.conn(id) else {
            return;
        };
        let Some(outstanding) = conn.outstanding.take() else {
            return;
        };
        conn.served += 1;
        let user = conn.user;
        let received = conn.reader.received();
        let reusable = keep_alive && !(conn.limit != 0 && conn.served >= conn.limit);
        let check = std::mem::take(&mut conn.check);
        self.in_flight -= 1;
        let Outstanding { waiting, sent } = outstanding;
        let request = waiting.request.as_ref();
        let head_request = request.is_some_and(|request| request.head_request);
        let has_body = !head_request && status >= 200 && status != 204 && status != 304;
        let second = self.second();
        let current = self.phase.min(self.phases.len() - 1);
        let in_phase = self.phase < self.phases.len();
        {
            let recordings = &mut self.phases[current];
            if in_phase {
                recordings.recorder.completed_in_window += 1;
                recordings.recorder.bytes_in_window += received;
                if status < 400 {
                    recordings.recorder.succeeded_in_window += 1;
                }
            }
            if let Some(interval) = recordings.population.interval(second) {
                interval.completed += 1;
                interval.hits += u64::from(check.hit);
                if status >= 400 {
                    interval.errors += 1;
                }
            }
        }
        let corrected = now.saturating_duration_since(waiting.intended).as_nanos() as u64;
        let raw = now.saturating_duration_since(sent).as_nanos() as u64;
        let verdict = check.verdict(has_body);
        let recordings = &mut self.phases[waiting.phase];
        recordings.recorder.response(status, corrected, raw);
        let population = &mut recordings.population;
        if status < 400 {
            let histogram = if check.hit {
                &mut population.hit
            } else {
                &mut population.miss
            };
            histogram.saturating_record(corrected.max(1));
        }
        match verdict {
            Some(Ok(())) => population.verified += 1,
            Some(Err(failure)) => {
                population.integrity_failure(failure);
                if let Some(interval) = self.phases[current].population.interval(second) {
                    interval.integrity_failures += 1;
                }
            }
            None => population.unverified += 1,
        }
        if let Some(request) = request
            && request.basic
            && status == 200
        {
            let population = &mut self.phases[waiting.phase].population;
            let bytes = check.body_bytes;
            population.basic_responses += 1;
            population.basic_bytes += bytes;
            if request.offered_hit {
                population.offered_hits += 1;
                population.offered_hit_bytes += bytes;
            }
            if check.hit {
                population.hits += 1;
                population.hit_bytes += bytes;
            }
        }
        self.population.completed(&Completed {
            user,
            status: Some(status),
            hit: check.hit,
            body_bytes: check.body_bytes,
        });
        self.request_ended(user, false);
        if reusable && user < self.activated {
            if let Some(conn) = self.conn(id) {
                conn.idle = true;
            }
            self.driver.cancel_timer(id);
            self.users[user].idle.push(id);
            // Armed while idle, so a server closing it is seen at once.
            self.driver.recv(id);
            self.pump(user);
        } else {
            self.close(id);
        }
    }

    /// Ends the outstanding request with an error of `kind` (or queues it once more, on a
    /// new connection, when a reused connection was closed under it before any byte of
    /// its response — as browsers do), and closes the connection. An idle connection the
    /// server closed just closes.
    pub(super) fn fail(&mut self, id: ConnectionId, kind: ErrorKind) {
        let Some(conn) = self.conn(id) else {
            return;
        };
        let user = conn.user;
        let retry_allowed = matches!(kind, ErrorKind::Closed | ErrorKind::Reset)
            && conn.served > 0
            && conn.reader.nothing_received();
        if let Some(outstanding) = conn.outstanding.take() {
            self.in_flight -= 1;
            let mut waiting = outstanding.waiting;
            if retry_allowed && !waiting.retried {
                waiting.retried = true;
                self.users[user].waiting.push_front(waiting);
                self.waiting += 1;
            } else {
                self.count_error(waiting.phase, kind);
                self.population.completed(&Completed {
                    user,
                    status: None,
                    hit: false,
                    body_bytes: 0,
                });
                self.request_ended(user, true);
            }
        }
        self.close(id);
    }

    pub(super) fn close(&mut self, id: ConnectionId) {
        let Some(conn) = self.conn(id) else {
            return;
        };
        let user = conn.user;
        if conn.outstanding.is_some() {
            self.in_flight -= 1;
        }
        self.driver.close(id);
        self.slots[id.index()] = None;
        self.open -= 1;
        self.users[user].open -= 1;
        self.pump(user);
        while self.open < self.config.max_open {
            let Some(starved) = self.starved.pop_front() else {
                break;
            };
            self.users[starved].starved = false;
            self.pump(starved);
        }
    }

    pub(super) fn close_idle(&mut self, user: usize) {
        let idle = std::mem::take(&mut self.users[user].idle);
        for id in idle {
            if self.conn(id).is_some_and(|conn| conn.idle) {
                self.close(id);
            }
        }
    }

    /// Gives up on every waiting and outstanding request and closes their connections;
    /// counts them as timeouts when `as_errors` (the drain bound passed, not an interrupt).
    pub(super) fn abandon_all(&mut self, as_errors: bool) -> u64 {
        let mut abandoned = 0;
        for user in 0..self.users.len() {
            let waiting: Vec<Waiting> = self.users[user].waiting.drain(..).collect();
            for request in waiting {
                self.waiting -= 1;
                abandoned += 1;
                if as_errors {
                    self.count_error(request.phase, ErrorKind::QueueTimeout);
                }
            }
        }
        let busy: Vec<ConnectionId> = self
            .slots
            .iter()
            .flatten()
            .filter(|conn| conn.outstanding.is_some())
            .map(|conn| conn.id)
            .collect();
        for id in busy {
            abandoned += 1;
            if let Some(outstanding) = self.conn(id).and_then(|conn| conn.outstanding.take()) {
                self.in_flight -= 1;
                if as_errors {
                    self.count_error(outstanding.waiting.phase, ErrorKind::Timeout);
                }
            }
            self.close(id);
        }
        abandoned
    }

    pub(super) fn close_all(&mut self) {
        for conn in self.slots.iter().flatten() {
            self.driver.close(conn.id);
        }
        self.slots.clear();
        for user in &mut self.users {
            user.idle.clear();
            user.waiting.clear();
            user.open = 0;
        }
        self.open = 0;
        self.in_flight = 0;
        self.waiting = 0;
    }
}
