//! One origin-simulator worker: an event loop over a [`Driver`] that parses requests,
//! answers each with the object its path names after a think time, and keeps pipelined
//! answers in order.
//!
//! Invariants:
//! - A request's answer is built when the request is parsed and held until its due time
//!   (`now + think`, never before the answer ahead of it): think time costs a queue entry
//!   and the connection's one timer, no thread.
//! - A connection's timer is the due time of its first held answer, or its idle deadline
//!   when none is held.
//! - Request bodies (`Content-Length` or chunked) are read and discarded; a malformed
//!   request is answered with its 4xx and the connection closes.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use coldwire_http::{
    BodyFraming, ChunkedDecoder, DateCache, Method, Parsed, Version, connection_header,
    format_http_date, parse_request,
};
use coldwire_io::{Buffer, Chunk, Completion, ConnectionId, Driver};
use coldwire_workload::draws::Sequence;

use super::SimulatorConfig;
use super::answer::{Answer, answer};
use super::trace_answer::trace_answer;
use crate::runtime::{Draining, LiveView, Seated};
use crate::session::append_input;
use crate::stats::{RequestCounters, Stats, WorkerSnapshot};

/// What a simulator worker starts from: its seat and the simulator's configuration.
pub type SimulatorWorkerContext = Seated<SimulatorConfig>;

/// Most answers held (in think time) per connection before its requests are no longer read.
const MAX_HELD: usize = 64;

/// A request body still to be read past.
enum BodyLeft {
    None,
    Length(u64),
    Chunked(Box<ChunkedDecoder>),
}

struct Connection {
    id: ConnectionId,
    input: Option<Buffer>,
    body: BodyLeft,
    held: VecDeque<(Instant, Answer)>,
    close_after: bool,
    idle_due: Instant,
}

struct Simulator<D: Driver> {
    driver: D,
    config: Arc<SimulatorConfig>,
    live: LiveView<SimulatorConfig>,
    connections: Vec<Option<Connection>>,
    think: Sequence,
    date: DateCache,
    counters: RequestCounters,
    stats: Arc<Stats>,
    index: usize,
    draining: Draining,
    open: usize,
}

/// Runs a simulator worker until stopped.
pub fn run_simulator_worker<D: Driver>(
    mut driver: D,
    context: SimulatorWorkerContext,
) -> io::Result<()> {
    let seat = context.seat;
    let listener = driver.listen(seat.listener)?;
    let grace = context.config.runtime.shutdown_grace;
    let mut simulator = Simulator {
        driver,
        think: Sequence::new(context.config.seed ^ (seat.index as u64 + 1) << 32),
        config: context.config,
        live: context.live,
        connections: Vec::new(),
        date: DateCache::new(SystemTime::now()),
        counters: RequestCounters::default(),
        stats: seat.stats,
        index: seat.index,
        draining: Draining::new(seat.stop, grace, listener),
        open: 0,
    };
    simulator.run()
}

impl<D: Driver> Simulator<D> {
    fn run(&mut self) -> io::Result<()> {
        loop {
            let timeout = self.draining.timeout(self.driver.now());
            self.driver.wait(timeout)?;
            if let Some(config) = self.live.changed() {
                // A reload: requests parsed from now get its think time and limits.
                self.draining.set_grace(config.runtime.shutdown_grace);
                self.config = config;
            }
            self.date.update(SystemTime::now());
            while let Some(completion) = self.driver.next_completion() {
                self.handle(completion);
            }
            let done = self.draining.after_turn(&mut self.driver, self.open);
            self.stats.publish(
                self.index,
                WorkerSnapshot {
                    loop_counters: self.driver.counters(),
                    http: self.counters,
                },
            );
            if done {
                for index in 0..self.connections.len() {
                    if let Some(connection) = self.connections.get_mut(index).and_then(Option::take)
                    {
                        self.close(connection);
                    }
                }
                return Ok(());
            }
        }
    }

    fn take(&mut self, id: ConnectionId) -> Option<Connection> {
        let slot = self.connections.get_mut(id.index())?;
        if slot.as_ref().is_some_and(|connection| connection.id == id) {
            slot.take()
        } else {
            None
        }
    }

    fn put(&mut self, connection: Connection) {
        let index = connection.id.index();
        if index >= self.connections.len() {
            self.connections.resize_with(index + 1, || None);
        }
        self.connections[index] = Some(connection);
    }

    fn close(&mut self, mut connection: Connection) {
        if let Some(input) = connection.input.take() {
            self.driver.recycle(input);
        }
        self.driver.close(connection.id);
        self.open -= 1;
    }

    fn handle(&mut self, completion: Completion) {
        match completion {
            Completion::Accepted { connection, .. } => {
                if !self.draining.accepting() {
                    self.driver.close(connection);
                    return;
                }
                self.open += 1;
                let idle_due = self.driver.now() + self.config.runtime.idle_timeout;
                self.driver.set_timer(connection, idle_due);
                self.driver.recv(connection);
                self.put(Connection {
                    id: connection,
                    input: None,
                    body: BodyLeft::None,
                    held: VecDeque::new(),
                    close_after: false,
                    idle_due,
                });
            }
            Completion::Received { connection, buffer } => {
                let Some(mut connection) = self.take(connection) else {
                    self.driver.recycle(buffer);
                    return;
                };
                append_input(&mut self.driver, &mut connection.input, buffer);
                let keep = self.parse(&mut connection);
                self.settle(connection, keep);
            }
            Completion::TimerExpired { connection } => {
                let Some(mut connection) = self.take(connection) else {
                    return;
                };
                let now = self.driver.now();
                if connection.held.is_empty() && now >= connection.idle_due {
                    self.counters.idle_timeouts += 1;
                    self.close(connection);
                    return;
                }
                let keep = self.release_due(&mut connection);
                self.settle(connection, keep);
            }
            Completion::Sent { connection } => {
                if let Some(connection) = self.take(connection) {
                    let keep = !(connection.close_after && connection.held.is_empty());
                    self.settle(connection, keep);
                }
            }
            Completion::PeerClosed { connection } | Completion::Failed { connection, .. } => {
                if let Some(connection) = self.take(connection) {
                    self.close(connection);
                }
            }
            Completion::Connected { .. } | Completion::Woken => {}
        }
    }

    /// Parses every complete request in the input; false when the connection must close
    /// once its answers are out.
    fn parse(&mut self, connection: &mut Connection) -> bool {
        loop {
            if !self.skip_body(connection) {
                return false;
            }
            if !matches!(connection.body, BodyLeft::None) || connection.close_after {
                break;
            }
            let Some(input) = connection.input.as_mut() else {
                break;
            };
            let now = self.driver.now();
            let (answer, consumed, body) =
                match parse_request(input.filled(), &self.config.runtime.limits) {
                    Ok(Parsed::Complete { head, head_len }) => {
                        self.counters.requests += 1;
                        let body = match head.body_framing() {
                            BodyFraming::None | BodyFraming::Length(0) => BodyLeft::None,
                            BodyFraming::Length(length) => BodyLeft::Length(length),
                            BodyFraming::Chunked => BodyLeft::Chunked(Box::default()),
                        };
                        let answer = match &self.config.trace {
                            Some(catalogue) => trace_answer(catalogue, &head, self.date.bytes()),
                            None => answer(
                                &self.config.mix,
                                &head,
                                SystemTime::now(),
                                self.date.bytes(),
                            ),
                        };
                        (answer, head_len, body)
                    }
                    Ok(Parsed::Partial) => break,
                    Err(error) => {
                        self.counters.rejected += 1;
                        let answer = Answer::error(error.status(), self.date.bytes());
                        (answer, input.filled_len(), BodyLeft::None)
                    }
                };
            input.consume(consumed);
            connection.body = body;
            let think = self.think_time();
            let due = connection
                .held
                .back()
                .map_or(now + think, |(last, _)| (*last).max(now + think));
            connection.close_after |= !answer.keep_alive;
            connection.held.push_back((due, answer));
        }
        if connection.input.as_ref().is_some_and(Buffer::is_empty)
            && let Some(input) = connection.input.take()
        {
            self.driver.recycle(input);
        }
        self.release_due(connection)
    }

    /// Reads past request body bytes in the input; false on a malformed chunked body.
    fn skip_body(&mut self, connection: &mut Connection) -> bool {
        let Some(input) = connection.input.as_mut() else {
            return true;
        };
        match &mut connection.body {
            BodyLeft::None => {}
            BodyLeft::Length(left) => {
                let take = (input.filled_len() as u64).min(*left);
                input.consume(take as usize);
                *left -= take;
                if *left == 0 {
                    connection.body = BodyLeft::None;
                }
            }
            BodyLeft::Chunked(decoder) => match decoder.decode(input.filled(), |_| {}) {
                Ok(progress) => {
                    input.consume(progress.consumed);
                    if progress.done {
                        connection.body = BodyLeft::None;
                    }
                }
                Err(_) => return false,
            },
        }
        true
    }

    fn think_time(&mut self) -> Duration {
        let think = &self.config.think;
        if think.mean.is_zero() && think.sd.is_zero() {
            return Duration::ZERO;
        }
        let seconds = self
            .think
            .normal_at_least_zero(think.mean.as_secs_f64(), think.sd.as_secs_f64());
        Duration::from_secs_f64(seconds)
    }

    /// Sends the answers whose time has come; false when the connection closes after them.
    fn release_due(&mut self, connection: &mut Connection) -> bool {
        let now = self.driver.now();
        let mut sent = false;
        while connection.held.front().is_some_and(|(due, _)| *due <= now) {
            let Some((_, answer)) = connection.held.pop_front() else {
                break;
            };
            self.counters.count_response(answer.status);
            self.counters.body_bytes += answer.body_bytes;
            self.driver.send(connection.id, Chunk::Owned(answer.bytes));
            sent = true;
            if !answer.keep_alive {
                connection.held.clear();
                connection.close_after = true;
            }
        }
        if sent {
            let _ = self.driver.flush(connection.id);
            connection.idle_due = now + self.config.runtime.idle_timeout;
        }
        !(connection.close_after && connection.held.is_empty())
    }

    /// Puts the connection back with its timer and receive armed, or closes it.
    fn settle(&mut self, connection: Connection, keep: bool) {
        if !keep {
            if self.driver.queued_bytes(connection.id) == 0 {
                self.close(connection);
            } else {
                // Closed when its last answer is written (`Sent`).
                self.driver.cancel_timer(connection.id);
                self.put(connection);
            }
            return;
        }
        match connection.held.front() {
            Some((due, _)) => self.driver.set_timer(connection.id, *due),
            None => self.driver.set_timer(connection.id, connection.idle_due),
        }
        // At most this many answers are held per connection: a client that pipelines more
        // is read again once some have gone.
        if !connection.close_after && connection.held.len() < MAX_HELD {
            self.driver.recv(connection.id);
        }
        self.put(connection);
    }
}

/// The date, version and `Connection` bits every answer needs.
pub(super) fn common_head(out: &mut Vec<u8>, status_line: &[u8], date: &[u8]) {
    out.extend_from_slice(status_line);
    out.extend_from_slice(b"Server: coldwire-origin\r\nDate: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\n");
}

/// `Connection` for an answer to `version`.
pub(super) fn connection_line(version: Version, keep_alive: bool) -> &'static [u8] {
    connection_header(version, keep_alive)
}

/// An HTTP date.
pub(super) fn http_date(time: SystemTime) -> [u8; coldwire_http::HTTP_DATE_LEN] {
    format_http_date(time)
}

/// Whether a method has a body in its answer.
pub(super) fn answers_with_body(method: Method) -> bool {
    method != Method::Head
}
