//! One worker: an event loop over a [`Driver`], its own `SO_REUSEPORT` listener, its own
//! file cache and sessions. Generic over the driver, so each backend gets a monomorphised
//! loop and the logic is identical for all of them.
//!
//! The request path: `Received` → append to the session's input → parse every complete
//! pipelined request → answer each into one [`Output`] → one flush. If the flush completes
//! at once (the usual case) the next receive is armed immediately; otherwise the connection
//! waits in `Writing` for `Sent`, reading nothing more meanwhile (back-pressure).

use std::fs::File;
use std::io;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use coldwire_http::{BodyFraming, DateCache, Parsed, Status, Version, parse_request};
use coldwire_io::{Buffer, Completion, ConnectionId, Driver, Flush, ListenerId};

use crate::access_log::AccessLog;
use crate::config::ServeConfig;
use crate::error_log::{ErrorLog, Level};
use crate::file_cache::FileCache;
use crate::origin::{Responder, error_response};
use crate::output::Output;
use crate::runtime::LiveView;
use crate::session::{Phase, Session, append_input};
use crate::stats::{RequestCounters, Stats, WorkerSnapshot};

/// Stop answering more pipelined requests of one batch once this much output is queued;
/// the rest is answered after the client has read some (bounded memory per connection).
const OUTPUT_HIGH_WATER: u64 = 256 * 1024;

/// What a worker needs from the server that starts it.
pub struct WorkerContext {
    /// Worker index (stats slot, CPU to pin to).
    pub index: usize,
    /// Shared configuration.
    pub config: Arc<ServeConfig>,
    /// This worker's listening socket.
    pub listener: TcpListener,
    /// Shared statistics.
    pub stats: Arc<Stats>,
    /// Set when the server should shut down (then the worker is woken).
    pub stop: Arc<AtomicBool>,
    /// The access log file, when logging.
    pub access_log: Option<Arc<File>>,
    /// The error log.
    pub error_log: ErrorLog,
    /// Where a reloaded configuration comes from (taken at the next loop turn).
    pub live: Option<LiveView<ServeConfig>>,
}

enum Step {
    Keep,
    Close,
}

struct Worker<D: Driver> {
    driver: D,
    sessions: Vec<Option<Session>>,
    files: FileCache,
    config: Arc<ServeConfig>,
    live: Option<LiveView<ServeConfig>>,
    date: DateCache,
    wall_clock: SystemTime,
    path: Vec<u8>,
    http: RequestCounters,
    log: Option<AccessLog>,
    error_log: ErrorLog,
    stats: Arc<Stats>,
    index: usize,
    stop: Arc<AtomicBool>,
    listener: Option<ListenerId>,
    drain_deadline: Option<Instant>,
    open: usize,
}

/// How long a worker's loop may wait for events when nothing else is due (`serve` and
/// `proxy` alike): until the drain deadline, and at most a second while access-log lines
/// are buffered, so that they go out even when the server is quiet.
pub(crate) fn loop_timeout(
    now: Instant,
    drain_deadline: Option<Instant>,
    log: Option<&AccessLog>,
) -> Option<Duration> {
    let left = drain_deadline.map(|deadline| deadline.saturating_duration_since(now));
    if log.is_some_and(AccessLog::has_pending) {
        let second = Duration::from_secs(1);
        Some(left.map_or(second, |left| left.min(second)))
    } else {
        left
    }
}

/// Runs a worker until shutdown completes.
pub fn run_worker<D: Driver>(mut driver: D, context: WorkerContext) -> io::Result<()> {
    let config = context.config;
    let files = FileCache::new(
        &config.root,
        config.file_cache_validity,
        config.file_cache_entries,
        config.memory_file_limit,
    )?;
    let listener = driver.listen(context.listener)?;
    let wall_clock = SystemTime::now();
    let mut worker = Worker {
        driver,
        sessions: Vec::new(),
        files,
        date: DateCache::new(wall_clock),
        wall_clock,
        path: Vec::with_capacity(256),
        http: RequestCounters::default(),
        log: context
            .access_log
            .map(|file| AccessLog::with_format(file, config.runtime.access_log_format)),
        error_log: context.error_log,
        stats: context.stats,
        index: context.index,
        stop: context.stop,
        listener: Some(listener),
        drain_deadline: None,
        open: 0,
        config,
        live: context.live,
    };
    worker.run()
}

impl<D: Driver> Worker<D> {
    fn run(&mut self) -> io::Result<()> {
        loop {
            let timeout = self.wait_timeout();
            self.driver.wait(timeout)?;
            if let Some(config) = self.live.as_mut().and_then(LiveView::changed) {
                self.config = config;
            }
            self.wall_clock = SystemTime::now();
            self.date.update(self.wall_clock);
            while let Some(completion) = self.driver.next_completion() {
                self.handle(completion);
            }
            if self.drain_deadline.is_none() && self.stop.load(Ordering::Relaxed) {
                self.start_draining();
            }
            let now = self.driver.now();
            if let Some(log) = &mut self.log {
                log.flush_if_due(now);
            }
            self.publish();
            if let Some(deadline) = self.drain_deadline
                && (self.open == 0 || now >= deadline)
            {
                self.close_all();
                if let Some(log) = &mut self.log {
                    let _ = log.flush();
                }
                self.publish();
                return Ok(());
            }
        }
    }

    fn wait_timeout(&self) -> Option<Duration> {
        loop_timeout(self.driver.now(), self.drain_deadline, self.log.as_ref())
    }

    fn publish(&mut self) {
        self.http.file_opens = self.files.opens;
        let snapshot = WorkerSnapshot {
            loop_counters: self.driver.counters(),
            http: self.http,
        };
        self.stats.publish(self.index, snapshot);
    }

    fn take_session(&mut self, id: ConnectionId) -> Option<Session> {
        let slot = self.sessions.get_mut(id.index())?;
        if slot.as_ref().is_some_and(|session| session.id == id) {
            slot.take()
        } else {
            None
        }
    }

    fn put_back(&mut self, session: Session, step: Step) {
        match step {
            Step::Keep => {
                let index = session.id.index();
                self.sessions[index] = Some(session);
            }
            Step::Close => self.close(session),
        }
    }

    fn close(&mut self, mut session: Session) {
        if let Some(input) = session.input.take() {
            self.driver.recycle(input);
        }
        session.enter(&mut self.driver, Phase::Idle);
        self.driver.close(session.id);
        self.open -= 1;
    }

    fn handle(&mut self, completion: Completion) {
        match completion {
            Completion::Accepted {
                connection, peer, ..
            } => {
                let index = connection.index();
                if index >= self.sessions.len() {
                    self.sessions.resize_with(index + 1, || None);
                }
                let now = self.driver.now();
                let mut session = Session::new(connection, peer, now);
                session.set_deadline(&mut self.driver, now + self.config.runtime.idle_timeout);
                if self.drain_deadline.is_some() {
                    // Accepted as the listener closed (a completion already queued): its
                    // request is answered with `Connection: close`, if it comes soon.
                    session.drain_idle(&mut self.driver);
                }
                self.sessions[index] = Some(session);
                self.open += 1;
                self.driver.recv(connection);
            }
            Completion::Received { connection, buffer } => {
                let Some(mut session) = self.take_session(connection) else {
                    self.driver.recycle(buffer);
                    return;
                };
                let step = self.on_received(&mut session, buffer);
                self.put_back(session, step);
            }
            Completion::Sent { connection } => {
                let Some(mut session) = self.take_session(connection) else {
                    return;
                };
                let step = self.process(&mut session);
                self.put_back(session, step);
            }
            Completion::PeerClosed { connection } | Completion::Failed { connection, .. } => {
                if let Some(session) = self.take_session(connection) {
                    self.close(session);
                }
            }
            Completion::TimerExpired { connection } => {
                let Some(mut session) = self.take_session(connection) else {
                    return;
                };
                let step = self.on_timer(&mut session);
                self.put_back(session, step);
            }
            // The origin server opens no outgoing connections.
            Completion::Connected { .. } => {}
            Completion::Woken => {
                if self.stop.load(Ordering::Relaxed) && self.drain_deadline.is_none() {
                    self.start_draining();
                }
            }
        }
    }

    fn on_received(&mut self, session: &mut Session, buffer: Buffer) -> Step {
        if session.phase == Phase::Lingering {
            self.driver.recycle(buffer);
            self.driver.recv(session.id);
            return Step::Keep;
        }
        session.note_arrival(self.driver.now());
        let may_complete = append_input(&mut self.driver, &mut session.input, buffer);
        if !may_complete && session.phase == Phase::Head {
            let over_limit = session.input.as_ref().is_some_and(|input| {
                input.filled_len() > self.config.runtime.limits.max_head_bytes
            });
            if over_limit {
                return self.reject(session, Status::REQUEST_HEADER_FIELDS_TOO_LARGE);
            }
            self.driver.recv(session.id);
            return Step::Keep;
        }
        self.process(session)
    }

    /// Answers a request that could not be parsed, then closes (lingering).
    fn reject(&mut self, session: &mut Session, status: Status) -> Step {
        let mut output = Output::new(session.id);
        let answer = error_response(
            status,
            Version::Http11,
            false,
            false,
            self.date.bytes(),
            &mut self.driver,
            &mut output,
        );
        output.finish(&mut self.driver);
        self.count(session, b"-", b"-", b"-", answer.status, answer.body_bytes);
        self.error_log.log(
            Level::Info,
            "http_request_error",
            format_args!(
                "client {}: request refused with {} {}",
                session.peer,
                status.code(),
                status.reason()
            ),
        );
        self.http.rejected += 1;
        session.close_after_write = true;
        session.linger = true;
        self.flush(session)
    }

    fn count(
        &mut self,
        session: &Session,
        method: &[u8],
        target: &[u8],
        version: &[u8],
        status: u16,
        body_bytes: u64,
    ) {
        self.http.requests += 1;
        let elapsed = session.request_elapsed(self.driver.now());
        self.http.count_timed_response(status, elapsed);
        self.http.body_bytes += body_bytes;
        if let Some(log) = &mut self.log {
            log.record(
                session.peer.ip(),
                method,
                target,
                version,
                status,
                body_bytes,
                self.wall_clock,
            );
        }
    }

    /// Answers every complete request in the session's input, flushes, and decides what the
    /// connection does next.
    fn process(&mut self, session: &mut Session) -> Step {
        if session.close_after_write {
            return self.after_output(session);
        }
        let mut output = Output::new(session.id);
        let mut rejected = None;
        let draining = self.drain_deadline.is_some();
        let started = session.request_started;
        while let Some(input) = session.input.as_mut() {
            if input.is_empty() {
                break;
            }
            match parse_request(input.filled(), &self.config.runtime.limits) {
                Ok(Parsed::Complete { head, head_len }) => {
                    let has_body = !matches!(
                        head.body_framing(),
                        BodyFraming::None | BodyFraming::Length(0)
                    );
                    let keep_alive = head.keep_alive() && !has_body && !draining;
                    let mut responder = Responder {
                        files: &mut self.files,
                        date: self.date.bytes(),
                        now: self.driver.now(),
                        path: &mut self.path,
                    };
                    let answer = responder.answer(&head, keep_alive, &mut self.driver, &mut output);
                    self.http.requests += 1;
                    let elapsed = self.driver.now().saturating_duration_since(started);
                    self.http.count_timed_response(answer.status, elapsed);
                    self.http.body_bytes += answer.body_bytes;
                    if let Some(log) = &mut self.log {
                        log.record(
                            session.peer.ip(),
                            head.method_str().as_bytes(),
                            head.target().as_bytes(),
                            head.version().as_bytes(),
                            answer.status,
                            answer.body_bytes,
                            self.wall_clock,
                        );
                    }
                    input.consume(head_len);
                    if !answer.keep_alive {
                        session.close_after_write = true;
                        session.linger = has_body || !input.is_empty();
                        break;
                    }
                    if output.queued >= OUTPUT_HIGH_WATER {
                        break;
                    }
                }
                Ok(Parsed::Partial) => {
                    if session.phase != Phase::Head {
                        session.enter(&mut self.driver, Phase::Head);
                        let due = self.driver.now() + self.config.runtime.header_timeout;
                        session.set_deadline(&mut self.driver, due);
                    }
                    break;
                }
                Err(error) => {
                    rejected = Some(error.status());
                    break;
                }
            }
        }
        if session.input.as_ref().is_some_and(Buffer::is_empty)
            && let Some(input) = session.input.take()
        {
            self.driver.recycle(input);
        }
        output.finish(&mut self.driver);
        if let Some(status) = rejected {
            return self.reject(session, status);
        }
        self.flush(session)
    }

    fn flush(&mut self, session: &mut Session) -> Step {
        match self.driver.flush(session.id) {
            Flush::Done => self.after_output(session),
            Flush::Pending => {
                session.enter(&mut self.driver, Phase::Writing);
                session.progress_mark = self.driver.unsent_bytes(session.id);
                let due = self.driver.now() + self.config.runtime.write_timeout;
                session.set_deadline(&mut self.driver, due);
                Step::Keep
            }
            Flush::Failed(_) => Step::Close,
        }
    }

    /// Everything queued has been written: close, linger, answer more pipelined requests,
    /// or wait for the next request.
    fn after_output(&mut self, session: &mut Session) -> Step {
        if session.close_after_write {
            if !session.linger {
                return Step::Close;
            }
            if let Some(input) = session.input.take() {
                self.driver.recycle(input);
            }
            self.driver.shutdown_write(session.id);
            session.enter(&mut self.driver, Phase::Lingering);
            let due = self.driver.now() + self.config.runtime.linger_timeout;
            session.set_deadline(&mut self.driver, due);
            self.driver.recv(session.id);
            return Step::Keep;
        }
        let has_complete_request = session.input.as_ref().is_some_and(|input| {
            matches!(
                parse_request(input.filled(), &self.config.runtime.limits),
                Ok(Parsed::Complete { .. }) | Err(_)
            )
        });
        if has_complete_request {
            return self.process(session);
        }
        if session.input.is_none() {
            if self.drain_deadline.is_some() {
                return Step::Close;
            }
            session.enter(&mut self.driver, Phase::Idle);
            let due = self.driver.now() + self.config.runtime.idle_timeout;
            session.set_deadline(&mut self.driver, due);
        }
        self.driver.recv(session.id);
        Step::Keep
    }

    fn on_timer(&mut self, session: &mut Session) -> Step {
        if !session.deadline_reached(&mut self.driver)
            || session.survives_deadline(
                &mut self.driver,
                self.config.runtime.write_timeout,
                &mut self.http,
            )
        {
            Step::Keep
        } else {
            Step::Close
        }
    }

    fn start_draining(&mut self) {
        self.drain_deadline = Some(self.driver.now() + self.config.runtime.shutdown_grace);
        if let Some(listener) = self.listener.take() {
            self.driver.close_listener(listener);
        }
        // Idle connections that carried requests have nothing in flight: close them now
        // (a client whose next request crosses the close retries it on a new connection).
        // Fresh ones may have their first request on its way: they get a moment for it
        // (answered with `Connection: close`), then close (`Session::drain_idle`).
        let idle: Vec<ConnectionId> = self
            .sessions
            .iter()
            .flatten()
            .filter(|session| session.phase == Phase::Idle)
            .map(|session| session.id)
            .collect();
        for id in idle {
            if let Some(mut session) = self.take_session(id) {
                let step = if session.drain_idle(&mut self.driver) {
                    Step::Close
                } else {
                    Step::Keep
                };
                self.put_back(session, step);
            }
        }
    }

    fn close_all(&mut self) {
        let open: Vec<ConnectionId> = self
            .sessions
            .iter()
            .flatten()
            .map(|session| session.id)
            .collect();
        for id in open {
            if let Some(session) = self.take_session(id) {
                self.close(session);
            }
        }
    }
}
