//! The generator's event loop: one thread, one [`Driver`], hot and cold connections side
//! by side in the driver's slot table.
//!
//! Each phase runs an open-loop schedule: the loop computes the next intended start and
//! waits at most until then (the last millisecond by polling, since a wait's timeout is
//! rounded up to whole milliseconds — or, when no response is awaited, by a precise sleep,
//! so a lightly loaded generator does not burn its core). A due slot takes an idle keep-alive connection, or
//! opens a new one while fewer than `--connections` are open, or waits in a FIFO backlog
//! for the next connection to free up — its corrected latency keeps counting from its
//! intended start. A slot the generator itself reaches more than `late_limit` late is
//! skipped and counted as missed: nothing is ever sent in a catch-up burst.
//!
//! With a request budget (`LoadConfig::requests`, ab's `-n`) the window sends exactly
//! that many requests (each measured slot sent, or closed-loop request, takes one; a
//! missed slot takes none, so its request goes at the next slot) and ends at
//! the moment the last of them completed or failed — or at the phase's duration if that
//! comes first. Requests still outstanding `timeout` after the budget was spent are
//! abandoned and counted as timeouts, as at the end of a timed window.
//!
//! Invariants: `in_flight` counts hot connections with a request outstanding; every open
//! hot connection is in exactly one state — connecting or busy (a request outstanding),
//! resting (the emulated round-trip time after a response, `--rtt`), or idle (listed in its
//! endpoint's idle stack; stale entries are skipped when popped);
//! every timer is lazy (re-armed on expiry when its deadline moved).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use coldwire_io::{Completion, ConnectionId, Driver};

use crate::config::{LoadConfig, PhaseEnd, PhasePlan, Rate};
use crate::error::BenchError;
use crate::recorder::{ErrorKind, Recorder};
use crate::response::ResponseReader;
use crate::schedule::{Random, Schedule};
use crate::workload::{self, RequestSpec, Workload};

/// Below this distance to the next slot the loop polls instead of sleeping: a wait's
/// timeout is rounded up to a whole millisecond by the kernel interface.
const SPIN_WINDOW: Duration = Duration::from_millis(1);
/// How much earlier than a slot a precise sleep ends (the kernel's default timer slack is
/// 50 µs); the rest is polled.
const SLEEP_SLACK: Duration = Duration::from_micros(60);
/// How often progress is reported and the stop flag's effects are seen at the latest.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// A request outstanding on a hot connection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Request {
    pub(crate) intended: Instant,
    pub(crate) sent: Instant,
    pub(crate) measured: bool,
    pub(crate) last: bool,
    pub(crate) request: RequestSpec,
    /// Already re-sent once after a kept-alive connection failed under it.
    pub(crate) retried: bool,
}

/// A hot connection.
#[derive(Debug)]
pub(crate) struct Hot {
    pub(crate) id: ConnectionId,
    pub(crate) endpoint: usize,
    pub(crate) connected: bool,
    pub(crate) opened_at: Instant,
    pub(crate) served: u64,
    pub(crate) request: Option<Request>,
    pub(crate) reader: ResponseReader,
    pub(crate) timer_armed: bool,
    pub(crate) idle: bool,
    /// Resting for the emulated round-trip time (`LoadConfig::rtt`) after a response: not
    /// idle yet, its timer set to the end of the rest.
    pub(crate) resting: bool,
    /// The TLS session of an `https://` endpoint (`crate::tls`); `None` for plain HTTP.
    pub(crate) tls: Option<Box<rustls::ClientConnection>>,
}

/// A cold connection.
#[derive(Debug)]
pub(crate) struct Cold {
    pub(crate) id: ConnectionId,
    pub(crate) connected: bool,
    /// Trickle mode: bytes of the request head sent so far.
    pub(crate) position: usize,
}

/// What occupies a driver slot.
#[derive(Debug, Default)]
pub(crate) enum Slot {
    #[default]
    Free,
    Hot(Box<Hot>),
    Cold(Cold),
}

/// A request not on a connection yet (waiting in the backlog, or being sent).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pending {
    pub(crate) intended: Instant,
    pub(crate) request: RequestSpec,
    pub(crate) measured: bool,
    pub(crate) retried: bool,
}

/// Cold connection totals over the whole run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ColdTotals {
    /// Cold connections asked for.
    pub requested: u64,
    /// Connections attempted (including re-tries: none; equals the connects started).
    pub attempted: u64,
    /// Established at least once.
    pub established: u64,
    /// Could not be established (refused, timed out, no descriptor).
    pub failed: u64,
    /// Established ones the server closed or reset later.
    pub closed_by_server: u64,
    /// Currently open and established.
    pub held: u64,
}

/// Progress of a phase, reported about four times a second.
#[derive(Clone, Debug)]
pub struct Progress {
    /// The phase's label.
    pub label: String,
    /// Time since the phase started.
    pub elapsed: Duration,
    /// Warm-up plus measured duration.
    pub planned: Duration,
    /// True once the measured window has begun.
    pub measuring: bool,
    /// Responses completed in the window so far.
    pub completed: u64,
    /// Errors of window requests so far.
    pub errors: u64,
    /// Cold connections held.
    pub cold_held: u64,
    /// The window's request budget (`LoadConfig::requests`), if any: progress is then
    /// `completed + errors` out of it.
    pub requests_planned: Option<u64>,
    /// True while cold connections are being opened (then `completed` counts the
    /// established ones and `errors` the failed ones).
    pub opening_cold: bool,
}

/// Callbacks at the edges of a phase's measured window (to sample the server's cost) and
/// with progress.
pub trait PhaseObserver {
    /// The measured window begins now.
    fn window_started(&mut self) {}
    /// The measured window ends now.
    fn window_ended(&mut self) {}
    /// Periodic progress.
    fn progress(&mut self, _progress: &Progress) {}
}

/// An observer that does nothing.
pub struct NoObserver;

impl PhaseObserver for NoObserver {}

/// The outcome of one phase.
#[derive(Debug)]
pub struct PhaseMeasurement {
    /// The plan it ran.
    pub plan: PhasePlan,
    /// Its recordings.
    pub recorder: Recorder,
    /// The measured window as it really ran (shorter if stopped).
    pub window: Duration,
    /// Cold connections held when the window began and when it ended.
    pub cold_held: (u64, u64),
    /// Hot connections open at the end of the window.
    pub hot_open_at_end: u64,
    /// True if the run was interrupted during this phase.
    pub interrupted: bool,
    /// Requests still outstanding when the drain bound passed (counted as timeouts).
    pub abandoned: u64,
    /// The window's request budget (`LoadConfig::requests`), if any.
    pub requests_planned: Option<u64>,
    /// What ended the window.
    pub ended_by: PhaseEnd,
}

/// The load generator's state across phases (connections persist from phase to phase).
pub struct Engine<D: Driver> {
    pub(crate) driver: D,
    pub(crate) config: LoadConfig,
    pub(crate) workload: Box<dyn Workload>,
    pub(crate) trickle_head: Bytes,
    pub(crate) random: Random,
    pub(crate) slots: Vec<Slot>,
    pub(crate) idle: Vec<Vec<ConnectionId>>,
    pub(crate) backlog: VecDeque<Pending>,
    pub(crate) hot_open: usize,
    pub(crate) in_flight: usize,
    pub(crate) cold: ColdTotals,
    pub(crate) recorder: Recorder,
    pub(crate) window: (Instant, Instant),
    pub(crate) closed_loop: bool,
    pub(crate) issuing: bool,
    /// Requests of the window's budget not issued yet (`None`: no budget).
    pub(crate) remaining: Option<u64>,
    pub(crate) now: Instant,
    /// TLS settings when some endpoint is `https://` (`crate::tls`).
    pub(crate) tls: Option<crate::tls::TlsClient>,
    /// Requests are HEAD: responses carry no body.
    pub(crate) head_requests: bool,
    stop: Arc<AtomicBool>,
}

impl<D: Driver> Engine<D> {
    /// An engine over `driver` (sized for the connections it will hold) for `config`, its
    /// requests made by the workload `config.workload` names (`urls`: `config.targets`).
    /// `stop` ends the run early when set (e.g. by SIGINT); results so far are kept.
    pub fn new(driver: D, config: LoadConfig, stop: Arc<AtomicBool>) -> Result<Self, BenchError> {
        config.validate()?;
        let workload = workload::build(&config)?;
        Self::with_workload(driver, config, workload, stop)
    }

    /// [`Engine::new`] with a workload built by the caller.
    pub fn with_workload(
        driver: D,
        config: LoadConfig,
        workload: Box<dyn Workload>,
        stop: Arc<AtomicBool>,
    ) -> Result<Self, BenchError> {
        config.validate()?;
        if workload.endpoints().is_empty() {
            return Err(BenchError::Config(
                "the workload has no address to send to".into(),
            ));
        }
        let trickle_head = workload.trickle_head();
        let random = Random::new(config.seed ^ 0x5eed);
        let tls = crate::tls::TlsClient::for_load(&config)?;
        let head_requests = config.request.method.eq_ignore_ascii_case("HEAD");
        Ok(Engine {
            idle: vec![Vec::new(); workload.endpoints().len()],
            driver,
            workload,
            trickle_head,
            random,
            slots: Vec::new(),
            backlog: VecDeque::new(),
            hot_open: 0,
            in_flight: 0,
            cold: ColdTotals {
                requested: config.cold as u64,
                ..ColdTotals::default()
            },
            config,
            recorder: Recorder::new(),
            window: (Instant::now(), Instant::now()),
            closed_loop: false,
            issuing: false,
            remaining: None,
            now: Instant::now(),
            tls,
            head_requests,
            stop,
        })
    }

    /// The load configuration.
    pub fn config(&self) -> &LoadConfig {
        &self.config
    }

    /// Cold connection totals so far.
    pub fn cold_totals(&self) -> ColdTotals {
        self.cold
    }

    /// The driver (for its counters).
    pub fn driver(&self) -> &D {
        &self.driver
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub(crate) fn slot_mut(&mut self, id: ConnectionId) -> &mut Slot {
        let index = id.index();
        if index >= self.slots.len() {
            self.slots.resize_with(index + 1, Slot::default);
        }
        &mut self.slots[index]
    }

    /// The second of the measured window `instant` falls in, if it does.
    pub(crate) fn second_of(&self, instant: Instant) -> Option<usize> {
        self.in_window(instant)
            .then(|| instant.duration_since(self.window.0).as_secs() as usize)
    }

    /// Counts a failed window request (in its kind and in the second it failed).
    pub(crate) fn count_error(&mut self, kind: ErrorKind) {
        self.count_error_with(kind, None, None);
    }

    /// [`Engine::count_error`] with the cause's errno or text (see
    /// [`Recorder::error_with`](crate::recorder::Recorder::error_with)).
    pub(crate) fn count_error_with(
        &mut self,
        kind: ErrorKind,
        errno: Option<i32>,
        detail: Option<&str>,
    ) {
        self.recorder.error_with(kind, errno, detail);
        if let Some(second) = self.second_of(self.now)
            && let Some(interval) = self.recorder.interval(second)
        {
            interval.errors += 1;
        }
    }

    /// True when `instant` lies in the current phase's measured window.
    pub(crate) fn in_window(&self, instant: Instant) -> bool {
        instant >= self.window.0 && instant < self.window.1
    }

    /// Waits for events (at most `timeout`) and handles every completion.
    pub(crate) fn turn(&mut self, timeout: Duration) -> Result<(), BenchError> {
        self.driver.wait(Some(timeout))?;
        self.now = self.driver.now();
        while let Some(completion) = self.driver.next_completion() {
            self.handle(completion);
        }
        Ok(())
    }

    fn handle(&mut self, completion: Completion) {
        let Some(id) = completion.connection() else {
            return;
        };
        let is_cold = match self.slots.get(id.index()) {
            Some(Slot::Hot(hot)) if hot.id == id => false,
            Some(Slot::Cold(cold)) if cold.id == id => true,
            _ => {
                if let Completion::Received { buffer, .. } = completion {
                    self.driver.recycle(buffer);
                }
                return;
            }
        };
        if is_cold {
            self.handle_cold(id, completion);
        } else {
            self.handle_hot(id, completion);
        }
    }

    /// Runs one phase to its end (or until stopped) and returns its measurements.
    pub fn run_phase(
        &mut self,
        plan: &PhasePlan,
        observer: &mut dyn PhaseObserver,
    ) -> Result<PhaseMeasurement, BenchError> {
        plan.validate()?;
        self.recorder = Recorder::new();
        let start = Instant::now();
        self.now = start;
        let window_start = start + plan.warmup;
        let window_end = window_start + plan.duration;
        self.window = (window_start, window_end);
        let drain = self.config.timeout + Duration::from_millis(100);
        let mut drain_until = window_end + drain;
        self.closed_loop = plan.rate == Rate::Max;
        self.issuing = true;
        self.remaining = self.config.requests;
        let mut budget_spent = false;
        let mut ended_by = PhaseEnd::Duration;
        let mut schedule = match plan.rate {
            Rate::PerSecond(rate) => Some(Schedule::new(
                start,
                rate,
                self.config.arrivals,
                self.random.next_u64(),
            )),
            Rate::Max => None,
        };
        if self.closed_loop {
            for _ in 0..self.config.connections {
                self.issue_closed(start, plan.warmup.is_zero());
            }
        }
        let mut window_started = false;
        let mut window_closed = false;
        let mut cold_at_start = self.cold.held;
        let mut interrupted = false;
        let mut next_progress = start;
        let mut abandoned = 0;
        loop {
            let now = Instant::now();
            self.now = now;
            if self.stopped() {
                interrupted = true;
                ended_by = PhaseEnd::Interrupted;
                if !window_started {
                    self.window.1 = self.window.0;
                }
                break;
            }
            if !window_started && now >= window_start {
                window_started = true;
                observer.window_started();
                cold_at_start = self.cold.held;
            }
            // Slots due before the window's end go out (or count as missed) before the
            // window closes: a slot due just before the end is offered, never dropped.
            if let Some(schedule) = schedule.as_mut()
                && self.issuing
            {
                self.issue_due(schedule, now);
            }
            if !window_closed && now >= window_end {
                window_closed = true;
                self.issuing = false;
                observer.window_ended();
            }
            self.expire_backlog(now);
            if !budget_spent && self.remaining == Some(0) {
                // Every request of the budget is out: the rest have `timeout` to end.
                budget_spent = true;
                drain_until = drain_until.min(now + drain);
            }
            let idle = self.in_flight == 0 && self.backlog.is_empty();
            if !window_closed && budget_spent && (idle || now >= drain_until) {
                if !idle {
                    abandoned = self.abandon_outstanding(true);
                }
                // The window ends at the last completion (or failure) of the budget.
                window_closed = true;
                ended_by = PhaseEnd::Requests;
                self.window.1 = now;
                observer.window_ended();
                break;
            }
            if window_closed && idle {
                break;
            }
            if now >= drain_until {
                abandoned = self.abandon_outstanding(true);
                break;
            }
            if now >= next_progress {
                next_progress = now + PROGRESS_EVERY;
                observer.progress(&Progress {
                    label: plan.label.clone(),
                    elapsed: now - start,
                    planned: plan.warmup + plan.duration,
                    measuring: window_started && !window_closed,
                    completed: self.recorder.completed_in_window,
                    errors: self.recorder.errors.total(),
                    cold_held: self.cold.held,
                    requests_planned: self.config.requests,
                    opening_cold: false,
                });
            }
            let mut wake = next_progress.min(drain_until);
            if !window_started {
                wake = wake.min(window_start);
            } else if !window_closed {
                wake = wake.min(window_end);
            }
            if let Some(front) = self.backlog.front() {
                wake = wake.min(front.intended + self.config.timeout);
            }
            let mut timeout = wake.saturating_duration_since(now);
            if let Some(schedule) = schedule.as_ref()
                && self.issuing
            {
                let gap = schedule.peek().saturating_duration_since(now);
                let awaiting = self.in_flight > 0 || !self.backlog.is_empty();
                if awaiting && !self.config.poll {
                    // Relaxed timing: wait in the kernel (whole milliseconds); a response
                    // arriving meanwhile wakes the loop, and due slots go out then.
                    timeout = timeout.min(gap.max(Duration::from_nanos(1)));
                } else {
                    timeout = timeout.min(gap.saturating_sub(SPIN_WINDOW));
                    if timeout.is_zero() && !awaiting {
                        // Nothing to time until the slot: sleep precisely (a high-resolution
                        // timer) instead of polling, giving the core back to the scheduler.
                        std::thread::sleep(gap.saturating_sub(SLEEP_SLACK));
                    }
                }
            }
            self.turn(timeout)?;
        }
        let end = Instant::now().min(self.window.1);
        let window = end.saturating_duration_since(window_start);
        if interrupted {
            self.issuing = false;
            // Cut short by the user (Ctrl-C), not failed by the server: as wrk, requests
            // still in flight are left out of the counts instead of becoming timeouts.
            abandoned += self.abandon_outstanding(false);
            if window_started && !window_closed {
                observer.window_ended();
            }
        }
        Ok(PhaseMeasurement {
            plan: plan.clone(),
            recorder: std::mem::take(&mut self.recorder),
            window,
            cold_held: (cold_at_start, self.cold.held),
            hot_open_at_end: self.hot_open as u64,
            interrupted,
            abandoned,
            requests_planned: self.config.requests,
            ended_by,
        })
    }

    /// Sends (or queues) every slot that is due, skipping the ones reached too late.
    fn issue_due(&mut self, schedule: &mut Schedule, now: Instant) {
        let (window_start, window_end) = self.window;
        while schedule.peek() <= now {
            let intended = schedule.peek();
            schedule.advance();
            if intended >= window_end {
                self.issuing = false;
                return;
            }
            let measured = intended >= window_start;
            let late = now - intended;
            if measured {
                self.recorder.offered += 1;
            }
            if late > self.config.late_limit {
                if measured {
                    self.recorder.missed += 1;
                    if let Some(second) = self.second_of(intended)
                        && let Some(interval) = self.recorder.interval(second)
                    {
                        interval.missed += 1;
                    }
                }
                continue;
            }
            // A missed slot takes none of the budget: its request goes at the next slot.
            if measured && !self.take_budget() {
                return;
            }
            if measured {
                self.recorder
                    .lateness
                    .saturating_record(late.as_nanos().max(1) as u64);
            }
            self.issue(intended, measured);
        }
    }

    /// Takes one request of the window's budget; false (and issuing stops) when it is
    /// spent. Issuing stops as the last one is taken, too.
    pub(crate) fn take_budget(&mut self) -> bool {
        match self.remaining {
            None => true,
            Some(0) => {
                self.issuing = false;
                false
            }
            Some(left) => {
                self.remaining = Some(left - 1);
                if left == 1 {
                    self.issuing = false;
                }
                true
            }
        }
    }

    /// Issues a closed-loop request at `intended` (a window one takes its budget).
    pub(crate) fn issue_closed(&mut self, intended: Instant, measured: bool) {
        if measured && !self.take_budget() {
            return;
        }
        self.issue(intended, measured);
    }

    /// Requests waiting for a connection longer than the timeout are dropped and counted.
    fn expire_backlog(&mut self, now: Instant) {
        while let Some(front) = self.backlog.front() {
            if now < front.intended + self.config.timeout {
                break;
            }
            if front.measured {
                self.count_error(ErrorKind::QueueTimeout);
            }
            self.backlog.pop_front();
        }
    }

    /// Gives up on every outstanding request (the drain bound passed or the run stopped)
    /// and closes their connections; counts them as timeouts when `as_errors` (the drain
    /// bound passed, not an interrupt). Returns how many.
    fn abandon_outstanding(&mut self, as_errors: bool) -> u64 {
        let mut abandoned = 0;
        let waiting: Vec<Pending> = self.backlog.drain(..).collect();
        for pending in waiting {
            if pending.measured && as_errors {
                self.count_error(ErrorKind::QueueTimeout);
            }
            abandoned += 1;
        }
        let busy: Vec<ConnectionId> = self
            .slots
            .iter()
            .filter_map(|slot| match slot {
                Slot::Hot(hot) if hot.request.is_some() => Some(hot.id),
                _ => None,
            })
            .collect();
        for id in busy {
            abandoned += 1;
            if as_errors {
                self.fail_hot(id, ErrorKind::Timeout);
            } else {
                self.close_hot(id);
            }
        }
        abandoned
    }

    /// Closes every connection (end of the run).
    pub fn close_all(&mut self) {
        let ids: Vec<ConnectionId> = self
            .slots
            .iter()
            .filter_map(|slot| match slot {
                Slot::Hot(hot) => Some(hot.id),
                Slot::Cold(cold) => Some(cold.id),
                Slot::Free => None,
            })
            .collect();
        for id in ids {
            self.driver.close(id);
        }
        self.slots.clear();
        for stack in &mut self.idle {
            stack.clear();
        }
        self.hot_open = 0;
        self.in_flight = 0;
        self.cold.held = 0;
    }
}
