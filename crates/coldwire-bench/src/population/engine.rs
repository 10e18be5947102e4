//! The population engine: one thread, one [`Driver`], users with their own connections.
//!
//! Each active user has its next arrival in a min-heap (a Poisson stream for a robot, a
//! logged time for a replayed client); when it is due, the request joins the user's own
//! FIFO and goes out on one of the user's idle connections, or a new one while the user
//! holds fewer than its limit (opened from the user's source address), else waits for one
//! of them — its corrected latency counting from its intended start. A connection carries
//! requests up to its drawn limit (the last one asks `Connection: close`), then closes.
//! Arrivals the loop reaches more than `late_limit` late are skipped and counted as missed,
//! never sent in a burst. The population's size follows [`Population::active_users`]: new
//! users get their first arrival, users beyond it stop at their next arrival (their idle
//! connections close).
//!
//! Invariants: every open connection belongs to exactly one user and is connecting or busy
//! (a request outstanding) or idle (listed in its user's idle stack; stale entries are
//! skipped when popped); `open` and `in_flight` count them; every request ends exactly once
//! — a recorded response or a counted error.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use coldwire_io::{Chunk, Completion, ConnectionId, Driver, Flush};

use crate::engine::{PhaseObserver, Progress};
use crate::error::BenchError;
use crate::recorder::{ErrorKind, Recorder};
use crate::response::{ReadOutcome, ResponseReader};
use crate::schedule::Random;

use super::inspect::Check;
use super::recorder::PopulationRecorder;
use super::{Completed, Population, UserRequest};

/// How often progress is reported (and the population's size re-read) at the latest.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// The engine's own limits.
#[derive(Clone, Debug)]
pub struct PopulationConfig {
    /// A request unanswered this long after it was sent, a connect not done this long
    /// after it began, or a request waiting this long for a connection, fails.
    pub timeout: Duration,
    /// An arrival handled later than this is skipped and counted as missed.
    pub late_limit: Duration,
    /// Most connections open at once over all users (the descriptor budget).
    pub max_open: usize,
    /// After the last phase, how long outstanding requests may still finish.
    pub drain: Duration,
    /// Seed of the engine's generator (arrival gaps, the workload's choices).
    pub seed: u64,
}

/// A request on its way (waiting in its user's queue, or on a connection).
#[derive(Clone, Debug)]
struct Waiting {
    intended: Instant,
    phase: usize,
    /// Made when it is first sent; kept for a retry.
    request: Option<UserRequest>,
    retried: bool,
}

#[derive(Debug)]
struct Outstanding {
    waiting: Waiting,
    sent: Instant,
}

#[derive(Debug)]
struct Conn {
    id: ConnectionId,
    user: usize,
    connected: bool,
    opened_at: Instant,
    served: u64,
    limit: u64,
    outstanding: Option<Outstanding>,
    reader: ResponseReader,
    check: Check,
    idle: bool,
}

#[derive(Debug, Default)]
struct User {
    scheduled: bool,
    done: bool,
    open: usize,
    idle: Vec<ConnectionId>,
    waiting: VecDeque<Waiting>,
    starved: bool,
}

/// One phase's recordings.
#[derive(Debug)]
pub struct PhaseRecordings {
    /// Its label.
    pub label: String,
    /// The open-loop engine's recordings (offered, sent, errors, latency, bytes).
    pub recorder: Recorder,
    /// The population's own (hit/miss, ratios, integrity, connections).
    pub population: PopulationRecorder,
    /// Its length as run.
    pub window: Duration,
    /// The run was interrupted during it.
    pub interrupted: bool,
    /// Requests still outstanding when the drain bound passed (counted as timeouts).
    pub abandoned: u64,
}

/// The engine (see the module documentation).
pub struct PopulationEngine<D: Driver> {
    driver: D,
    population: Box<dyn Population>,
    config: PopulationConfig,
    random: Random,
    slots: Vec<Option<Box<Conn>>>,
    users: Vec<User>,
    heap: BinaryHeap<Reverse<(Instant, usize)>>,
    starved: VecDeque<usize>,
    activated: usize,
    open: usize,
    in_flight: usize,
    waiting: usize,
    phases: Vec<PhaseRecordings>,
    phase: usize,
    phase_start: Instant,
    now: Instant,
    stop: Arc<AtomicBool>,
}

impl<D: Driver> PopulationEngine<D> {
    /// An engine over `driver` (sized for `config.max_open` connections) for `population`.
    pub fn new(
        driver: D,
        population: Box<dyn Population>,
        config: PopulationConfig,
        stop: Arc<AtomicBool>,
    ) -> Result<Self, BenchError> {
        if population.endpoints().is_empty() {
            return Err(BenchError::Config(
                "the workload has no address to send to".into(),
            ));
        }
        if config.timeout.is_zero() || config.max_open == 0 {
            return Err(BenchError::Config(
                "the timeout and the connection budget must be positive".into(),
            ));
        }
        let users = (0..population.users()).map(|_| User::default()).collect();
        let now = Instant::now();
        Ok(PopulationEngine {
            driver,
            random: Random::new(config.seed ^ 0x0b07),
            population,
            config,
            slots: Vec::new(),
            users,
            heap: BinaryHeap::new(),
            starved: VecDeque::new(),
            activated: 0,
            open: 0,
            in_flight: 0,
            waiting: 0,
            phases: Vec::new(),
            phase: 0,
            phase_start: now,
            now,
            stop,
        })
    }

    /// The driver (for its counters).
    pub fn driver(&self) -> &D {
        &self.driver
    }

    /// Runs the phases in order — `(label, duration)`, the population's size following
    /// [`Population::active_users`] — then lets outstanding requests finish (at most
    /// `drain`). `observer` hears each phase's start and end as a window (to sample the
    /// server's cost) and progress.
    pub fn run(
        &mut self,
        phases: &[(String, Duration)],
        observer: &mut dyn PhaseEdges,
    ) -> Result<Vec<PhaseRecordings>, BenchError> {
        let kinds = self.population.request_kinds().len();
        self.phases = phases
            .iter()
            .map(|(label, _)| PhaseRecordings {
                label: label.clone(),
                recorder: Recorder::new(),
                population: PopulationRecorder::new(kinds),
                window: Duration::ZERO,
                interrupted: false,
                abandoned: 0,
            })
            .collect();
        if phases.is_empty() {
            return Ok(Vec::new());
        }
        let start = Instant::now();
        self.now = start;
        self.phase = 0;
        self.phase_start = start;
        let mut phase_end = start + phases[0].1;
        self.population.phase_started(0, start);
        observer.phase_started(0);
        let mut next_progress = start;
        let mut drain_until = None;
        loop {
            let now = Instant::now();
            self.now = now;
            if self.stop.load(Ordering::Relaxed) {
                if self.phase < phases.len() {
                    self.phases[self.phase].interrupted = true;
                    self.end_phase(now, observer);
                }
                let abandoned = self.abandon_all();
                if let Some(last) = self.phases.last_mut() {
                    last.abandoned += abandoned;
                }
                break;
            }
            let everyone_done = self.heap.is_empty()
                && self.in_flight == 0
                && self.waiting == 0
                && self.activated >= self.users.len();
            while self.phase < phases.len() && (now >= phase_end || everyone_done) {
                self.end_phase(now.min(phase_end), observer);
                if self.phase < phases.len() {
                    self.phase_start = phase_end.min(now);
                    phase_end = self.phase_start + phases[self.phase].1;
                    self.population.phase_started(self.phase, self.phase_start);
                    observer.phase_started(self.phase);
                }
            }
            if self.phase >= phases.len() {
                let until = *drain_until.get_or_insert(now + self.config.drain);
                if self.in_flight == 0 && self.waiting == 0 {
                    break;
                }
                if now >= until {
                    let abandoned = self.abandon_all();
                    if let Some(last) = self.phases.last_mut() {
                        last.abandoned += abandoned;
                    }
                    break;
                }
            } else {
                let elapsed = now.saturating_duration_since(self.phase_start);
                let target = self
                    .population
                    .active_users(self.phase, elapsed)
                    .min(self.users.len());
                self.set_active(target);
                while let Some(&Reverse((due, user))) = self.heap.peek() {
                    if due > now {
                        break;
                    }
                    self.heap.pop();
                    self.arrival(user, due);
                }
                self.sample_interval();
            }
            if now >= next_progress {
                next_progress = now + PROGRESS_EVERY;
                let index = self.phase.min(phases.len() - 1);
                let recorder = &self.phases[index].recorder;
                observer.progress(&Progress {
                    label: phases[index].0.clone(),
                    elapsed: now.saturating_duration_since(self.phase_start),
                    planned: phases[index].1,
                    measuring: self.phase < phases.len(),
                    completed: recorder.completed_in_window,
                    errors: recorder.errors.total(),
                    cold_held: self.open as u64,
                    opening_cold: false,
                });
            }
            let mut wake = next_progress;
            if self.phase < phases.len() {
                wake = wake.min(phase_end);
                if let Some(&Reverse((due, _))) = self.heap.peek() {
                    wake = wake.min(due);
                }
            } else if let Some(until) = drain_until {
                wake = wake.min(until);
            }
            let timeout = wake.saturating_duration_since(now);
            self.driver.wait(Some(timeout))?;
            self.now = self.driver.now();
            while let Some(completion) = self.driver.next_completion() {
                self.handle(completion);
            }
        }
        self.close_all();
        Ok(std::mem::take(&mut self.phases))
    }

    fn end_phase(&mut self, at: Instant, observer: &mut dyn PhaseEdges) {
        let window = at.saturating_duration_since(self.phase_start);
        self.phases[self.phase].window = window;
        observer.phase_ended(self.phase);
        self.phase += 1;
    }

    fn second(&self) -> usize {
        self.now
            .saturating_duration_since(self.phase_start)
            .as_secs() as usize
    }

    fn sample_interval(&mut self) {
        let second = self.second();
        let (open, active) = (self.open as u64, self.activated as u64);
        let population = &mut self.phases[self.phase].population;
        population.max_open_connections = population.max_open_connections.max(open);
        population.max_active_users = population.max_active_users.max(active);
        if let Some(interval) = population.interval(second) {
            interval.open_connections = open;
            interval.active_users = active;
        }
    }

    fn set_active(&mut self, target: usize) {
        if target > self.activated {
            for user in self.activated..target {
                let state = &self.users[user];
                if state.scheduled || state.done {
                    continue;
                }
                self.schedule(user, self.now, true);
            }
        } else {
            for user in target..self.activated {
                self.close_idle(user);
            }
        }
        self.activated = target;
    }

    fn schedule(&mut self, user: usize, after: Instant, first: bool) {
        match self
            .population
            .next_arrival(user, after, first, &mut self.random)
        {
            Some(due) => {
                self.users[user].scheduled = true;
                self.heap.push(Reverse((due, user)));
            }
            None => {
                self.users[user].scheduled = false;
                self.users[user].done = true;
            }
        }
    }

    fn arrival(&mut self, user: usize, intended: Instant) {
        if user >= self.activated {
            self.users[user].scheduled = false;
            return;
        }
        self.schedule(user, intended, false);
        let phase = self.phase;
        let late = self.now.saturating_duration_since(intended);
        let second = self.second();
        let recordings = &mut self.phases[phase];
        recordings.recorder.offered += 1;
        if let Some(interval) = recordings.population.interval(second) {
            interval.offered += 1;
        }
        if late > self.config.late_limit {
            recordings.recorder.missed += 1;
            return;
        }
        recordings
            .recorder
            .lateness
            .saturating_record(late.as_nanos().max(1) as u64);
        self.users[user].waiting.push_back(Waiting {
            intended,
            phase,
            request: None,
            retried: false,
        });
        self.waiting += 1;
        self.pump(user);
    }

    /// Sends the user's waiting requests on its idle connections or new ones, as its
    /// limits allow; drops the ones that waited longer than the timeout.
    fn pump(&mut self, user: usize) {
        while let Some(front) = self.users[user].waiting.front() {
            if self.now.saturating_duration_since(front.intended) >= self.config.timeout
                && front.request.is_none()
            {
                let phase = front.phase;
                self.users[user].waiting.pop_front();
                self.waiting -= 1;
                self.count_error(phase, ErrorKind::QueueTimeout);
                continue;
            }
            let mut idle = None;
            while let Some(id) = self.users[user].idle.pop() {
                if self.conn(id).is_some_and(|conn| conn.idle) {
                    idle = Some(id);
                    break;
                }
            }
            if let Some(id) = idle {
                let waiting = self.take_waiting(user);
                self.send(id, waiting);
                continue;
            }
            let (most, limit) = self.population.connection_limits(user, &mut self.random);
            if self.users[user].open >= most {
                return;
            }
            if self.open >= self.config.max_open {
                if !self.users[user].starved {
                    self.users[user].starved = true;
                    self.starved.push_back(user);
                }
                return;
            }
            let waiting = self.take_waiting(user);
            self.open_and_send(user, limit, waiting);
        }
    }

    fn take_waiting(&mut self, user: usize) -> Waiting {
        self.waiting -= 1;
        self.users[user]
            .waiting
            .pop_front()
            .expect("pump checked the queue is not empty")
    }

    fn conn(&mut self, id: ConnectionId) -> Option<&mut Conn> {
        match self.slots.get_mut(id.index()) {
            Some(Some(conn)) if conn.id == id => Some(conn),
            _ => None,
        }
    }

    fn count_error(&mut self, phase: usize, kind: ErrorKind) {
        let second = self.second();
        let last = self.phases.len() - 1;
        let recordings = &mut self.phases[phase.min(last)];
        recordings.recorder.error(kind);
        let current = self.phase.min(self.phases.len() - 1);
        if let Some(interval) = self.phases[current].population.interval(second) {
            interval.errors += 1;
        }
    }

    fn open_and_send(&mut self, user: usize, limit: u64, waiting: Waiting) {
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
            }
        }
    }

    fn send(&mut self, id: ConnectionId, mut waiting: Waiting) {
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

    fn handle(&mut self, completion: Completion) {
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

    fn timer(&mut self, id: ConnectionId) {
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

    fn on_read(&mut self, id: ConnectionId, outcome: ReadOutcome) {
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
    fn fail(&mut self, id: ConnectionId, kind: ErrorKind) {
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
            }
        }
        self.close(id);
    }

    fn close(&mut self, id: ConnectionId) {
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

    fn close_idle(&mut self, user: usize) {
        let idle = std::mem::take(&mut self.users[user].idle);
        for id in idle {
            if self.conn(id).is_some_and(|conn| conn.idle) {
                self.close(id);
            }
        }
    }

    /// Gives up on every waiting and outstanding request (counted as timeouts).
    fn abandon_all(&mut self) -> u64 {
        let mut abandoned = 0;
        for user in 0..self.users.len() {
            let waiting: Vec<Waiting> = self.users[user].waiting.drain(..).collect();
            for request in waiting {
                self.waiting -= 1;
                abandoned += 1;
                self.count_error(request.phase, ErrorKind::QueueTimeout);
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
                self.count_error(outstanding.waiting.phase, ErrorKind::Timeout);
            }
            self.close(id);
        }
        abandoned
    }

    fn close_all(&mut self) {
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

/// Callbacks at a population run's phase edges (to sample the server's cost), and with
/// progress.
pub trait PhaseEdges {
    /// Phase `index` begins now.
    fn phase_started(&mut self, _index: usize) {}
    /// Phase `index` ends now.
    fn phase_ended(&mut self, _index: usize) {}
    /// Periodic progress (`cold_held` carries the open connections).
    fn progress(&mut self, _progress: &Progress) {}
}

/// Any [`PhaseObserver`] sees the phases as windows.
pub struct AsEdges<'a>(pub &'a mut dyn PhaseObserver);

impl PhaseEdges for AsEdges<'_> {
    fn phase_started(&mut self, _index: usize) {
        self.0.window_started();
    }
    fn phase_ended(&mut self, _index: usize) {
        self.0.window_ended();
    }
    fn progress(&mut self, progress: &Progress) {
        self.0.progress(progress);
    }
}
