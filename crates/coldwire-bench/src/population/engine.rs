//! The population engine: one thread, one [`Driver`], users with their own connections.
//!
//! Each active user has its next arrival in a min-heap (a Poisson stream for a robot, a
//! logged time for a replayed client); when it is due, the request joins the user's own
//! FIFO and goes out on one of the user's idle connections, or a new one while the user
//! holds fewer than its limit (opened from the user's source address), else waits for one
//! of them — its corrected latency counting from its intended start. A connection carries
//! requests up to its drawn limit (the last one asks `Connection: close`), then closes.
//! Arrivals the loop reaches more than `late_limit` late are skipped and counted as missed,
//! never sent in a burst. In a closed loop ([`Population::closed_loop`]) a user's next
//! arrival is asked for only when its previous request ends (at once after a response,
//! [`CLOSED_LOOP_BACKOFF`] after a failure). The population's size follows [`Population::active_users`]: new
//! users get their first arrival, users beyond it stop at their next arrival (their idle
//! connections close). What happens on a connection is in `connections.rs`.
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

use coldwire_io::{ConnectionId, Driver};

use crate::engine::{PhaseObserver, Progress};
use crate::error::BenchError;
use crate::recorder::{ErrorKind, Recorder};
use crate::response::ResponseReader;
use crate::schedule::Random;

use super::inspect::Check;
use super::recorder::PopulationRecorder;
use super::{Population, UserRequest};

/// How often progress is reported (and the population's size re-read) at the latest.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// In a closed loop, how long a user whose request failed waits before its next one (a
/// server that refuses every connection is not hammered in a busy loop).
pub const CLOSED_LOOP_BACKOFF: Duration = Duration::from_millis(10);

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
pub(super) struct Waiting {
    pub(super) intended: Instant,
    pub(super) phase: usize,
    /// Made when it is first sent; kept for a retry.
    pub(super) request: Option<UserRequest>,
    pub(super) retried: bool,
}

#[derive(Debug)]
pub(super) struct Outstanding {
    pub(super) waiting: Waiting,
    pub(super) sent: Instant,
}

#[derive(Debug)]
pub(super) struct Conn {
    pub(super) id: ConnectionId,
    pub(super) user: usize,
    pub(super) connected: bool,
    pub(super) opened_at: Instant,
    pub(super) served: u64,
    pub(super) limit: u64,
    pub(super) outstanding: Option<Outstanding>,
    pub(super) reader: ResponseReader,
    pub(super) check: Check,
    pub(super) idle: bool,
}

#[derive(Debug, Default)]
pub(super) struct User {
    pub(super) scheduled: bool,
    pub(super) done: bool,
    pub(super) open: usize,
    pub(super) idle: Vec<ConnectionId>,
    pub(super) waiting: VecDeque<Waiting>,
    pub(super) starved: bool,
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
    pub(super) driver: D,
    pub(super) population: Box<dyn Population>,
    pub(super) config: PopulationConfig,
    pub(super) random: Random,
    pub(super) slots: Vec<Option<Box<Conn>>>,
    pub(super) users: Vec<User>,
    pub(super) heap: BinaryHeap<Reverse<(Instant, usize)>>,
    pub(super) starved: VecDeque<usize>,
    pub(super) activated: usize,
    pub(super) open: usize,
    pub(super) in_flight: usize,
    pub(super) waiting: usize,
    pub(super) phases: Vec<PhaseRecordings>,
    pub(super) phase: usize,
    pub(super) phase_start: Instant,
    pub(super) now: Instant,
    pub(super) stop: Arc<AtomicBool>,
    /// [`Population::closed_loop`], read once.
    pub(super) closed_loop: bool,
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
        let closed_loop = population.closed_loop();
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
            closed_loop,
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
                // Cut short by the user, not failed by the server: not counted as errors.
                let abandoned = self.abandon_all(false);
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
                // Requests due before the phase's end belong to it (offered, or missed
                // when late), even when the loop wakes after the end.
                self.arrivals_due_before(phase_end.min(now + Duration::from_nanos(1)));
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
                    let abandoned = self.abandon_all(true);
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
                self.arrivals_due_before(now + Duration::from_nanos(1));
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
                    requests_planned: None,
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

    pub(super) fn second(&self) -> usize {
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

    /// Takes every user's arrival due before `end` off the heap, in time order.
    fn arrivals_due_before(&mut self, end: Instant) {
        while let Some(&Reverse((due, user))) = self.heap.peek() {
            if due >= end {
                break;
            }
            self.heap.pop();
            self.arrival(user, due);
        }
    }

    fn arrival(&mut self, user: usize, intended: Instant) {
        if user >= self.activated {
            self.users[user].scheduled = false;
            return;
        }
        if self.closed_loop {
            self.users[user].scheduled = false;
        } else {
            self.schedule(user, intended, false);
        }
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
    pub(super) fn pump(&mut self, user: usize) {
        while let Some(front) = self.users[user].waiting.front() {
            if self.now.saturating_duration_since(front.intended) >= self.config.timeout
                && front.request.is_none()
            {
                let phase = front.phase;
                self.users[user].waiting.pop_front();
                self.waiting -= 1;
                self.count_error(phase, ErrorKind::QueueTimeout);
                self.request_ended(user, true);
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

    /// A request of `user` ended (a response, or a failure when `failed`): in a closed
    /// loop, its next arrival is due now (after [`CLOSED_LOOP_BACKOFF`] when it failed).
    pub(super) fn request_ended(&mut self, user: usize, failed: bool) {
        if !self.closed_loop || user >= self.activated {
            return;
        }
        let state = &self.users[user];
        if state.scheduled || state.done {
            return;
        }
        let after = if failed {
            self.now + CLOSED_LOOP_BACKOFF
        } else {
            self.now
        };
        self.schedule(user, after, false);
    }

    pub(super) fn take_waiting(&mut self, user: usize) -> Waiting {
        self.waiting -= 1;
        self.users[user]
            .waiting
            .pop_front()
            .expect("pump checked the queue is not empty")
    }

    pub(super) fn count_error(&mut self, phase: usize, kind: ErrorKind) {
        let second = self.second();
        let last = self.phases.len() - 1;
        let recordings = &mut self.phases[phase.min(last)];
        recordings.recorder.error(kind);
        let current = self.phase.min(self.phases.len() - 1);
        if let Some(interval) = self.phases[current].population.interval(second) {
            interval.errors += 1;
        }
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
