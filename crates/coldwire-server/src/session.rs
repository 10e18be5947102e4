//! `Session`: the origin server's state for one connection, kept in a vector indexed by
//! the driver's slot id. Small on purpose (an idle connection's whole user-space cost is
//! this plus the driver's slot): no buffer unless a request is partly received.
//!
//! Deadlines are lazy: `due` is when the connection's current phase expires, `armed` is
//! what the driver's timer is set to. Pushing `due` later (every keep-alive request) touches
//! no timer; when the armed timer fires early, it is re-armed to `due`. Only moving a
//! deadline earlier (a request head starts: 10 s instead of 60 s) re-arms at once.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use coldwire_io::{Buffer, ConnectionId, Driver};

use crate::stats::RequestCounters;

/// How long a graceful stop waits for the first request of a connection that has sent
/// none (it may be on its way: closing would fail it); then the connection is closed.
pub const DRAIN_FIRST_REQUEST_WAIT: Duration = Duration::from_secs(1);

/// What a connection is doing, which decides which deadline applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for a request to start (keep-alive idle timeout).
    Idle,
    /// Part of a request head has arrived (whole-head deadline); in the proxy also a
    /// request body still to come (its minimum pace, `proxy/body_pace.rs`).
    Head,
    /// Output waits for the client to read (stalled-write timeout: no byte acknowledged by
    /// the client for that long).
    Writing,
    /// Output done, write side shut; draining the client's leftovers before closing.
    Lingering,
}

impl Phase {
    /// Whether the connection counts as active (doing work) rather than idle ("cold").
    pub fn is_active(self) -> bool {
        matches!(self, Phase::Head | Phase::Writing)
    }
}

/// One connection's state.
#[derive(Debug)]
pub struct Session {
    /// The driver's id for this connection.
    pub id: ConnectionId,
    /// The client, for the access log.
    pub peer: SocketAddr,
    /// Received bytes not yet consumed (a partial head, or pipelined requests).
    pub input: Option<Buffer>,
    /// Current phase.
    pub phase: Phase,
    /// Close once the queued output is written.
    pub close_after_write: bool,
    /// When closing, linger (shut down writes, drain input) rather than close at once,
    /// because unread client bytes would make the kernel reset the connection and could
    /// destroy the response before the client reads it.
    pub linger: bool,
    /// When the current phase expires.
    pub due: Instant,
    /// What the driver's timer is set to, if anything.
    pub armed: Option<Instant>,
    /// Bytes not yet received by the client when the write deadline was last armed: the
    /// deadline passes only if none of them left since (progress detection).
    pub progress_mark: u64,
    /// Whether a request has started on this connection: a graceful stop closes idle
    /// connections that carried requests at once, but gives fresh ones
    /// [`DRAIN_FIRST_REQUEST_WAIT`] for their first request, which may be on its way (the
    /// client would see its new connection closed unanswered).
    pub used: bool,
    /// The loop turn in which the current request's first bytes arrived (for the
    /// response-time histogram; see [`Session::note_arrival`]).
    pub request_started: Instant,
}

impl Session {
    /// A fresh idle connection.
    pub fn new(id: ConnectionId, peer: SocketAddr, due: Instant) -> Session {
        Session {
            id,
            peer,
            input: None,
            phase: Phase::Idle,
            close_after_write: false,
            linger: false,
            due,
            armed: None,
            progress_mark: 0,
            used: false,
            request_started: due,
        }
    }

    /// Sets when the current phase expires (see the module doc for the laziness).
    pub fn set_deadline<D: Driver>(&mut self, driver: &mut D, due: Instant) {
        self.due = due;
        if self.armed.is_none_or(|armed| due < armed) {
            driver.set_timer(self.id, due);
            self.armed = Some(due);
        }
    }

    /// Called when the driver's timer fires: true when the phase's deadline has really
    /// passed; false when the deadline was pushed later since (the timer is re-armed).
    pub fn deadline_reached<D: Driver>(&mut self, driver: &mut D) -> bool {
        self.armed = None;
        if driver.now() < self.due {
            let due = self.due;
            self.set_deadline(driver, due);
            return false;
        }
        true
    }

    /// The current phase's deadline has passed: counts the timeout and says whether the
    /// connection stays open — only a response still making progress towards a slow
    /// reader does (it gets another `write_timeout`).
    pub fn survives_deadline<D: Driver>(
        &mut self,
        driver: &mut D,
        write_timeout: Duration,
        http: &mut RequestCounters,
    ) -> bool {
        match self.phase {
            Phase::Idle => http.idle_timeouts += 1,
            Phase::Head => http.header_timeouts += 1,
            Phase::Writing => {
                let unsent = driver.unsent_bytes(self.id);
                if unsent < self.progress_mark {
                    self.progress_mark = unsent;
                    self.set_deadline(driver, driver.now() + write_timeout);
                    return true;
                }
                http.write_timeouts += 1;
            }
            Phase::Lingering => {}
        }
        false
    }

    /// At the start of a graceful stop (or accepted during one): true when this idle
    /// connection is to be closed now (it carried requests); a fresh one gets
    /// [`DRAIN_FIRST_REQUEST_WAIT`] (its idle deadline is brought forward) and false.
    pub fn drain_idle<D: Driver>(&mut self, driver: &mut D) -> bool {
        if self.used {
            return true;
        }
        let due = driver.now() + DRAIN_FIRST_REQUEST_WAIT;
        if due < self.due {
            self.set_deadline(driver, due);
        }
        false
    }

    /// Called with bytes arriving from the client at `now`: when nothing of a request was
    /// waiting before them, a new request starts now. Pipelined requests behind it share
    /// its start.
    #[inline]
    pub fn note_arrival(&mut self, now: Instant) {
        if self.input.as_ref().is_none_or(|input| input.is_empty()) {
            self.request_started = now;
        }
    }

    /// Time since the current request started.
    #[inline]
    pub fn request_elapsed(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.request_started)
    }

    /// Changes phase, keeping the driver's active-connections gauge right.
    pub fn enter<D: Driver>(&mut self, driver: &mut D, phase: Phase) {
        if self.phase.is_active() != phase.is_active() {
            driver.adjust_active(if phase.is_active() { 1 } else { -1 });
        }
        self.phase = phase;
        self.used |= phase.is_active();
    }
}

/// Appends a received buffer to a connection's unconsumed input (or makes it the input)
/// and returns whether the new bytes hold a line end — only then can a request head have
/// completed, so a trickling client does not make the caller re-parse everything for
/// every byte.
///
/// When the bytes do not fit even after compaction (pipelined requests straddling receive
/// buffers), the input moves to a larger buffer. That stays bounded: what is left over is
/// one partial head under the head limit, or body bytes whose forwarding stops reading.
pub fn append_input<D: Driver>(driver: &mut D, input: &mut Option<Buffer>, buffer: Buffer) -> bool {
    let Some(input) = input.as_mut() else {
        let may_complete = buffer.filled().contains(&b'\n');
        *input = Some(buffer);
        return may_complete;
    };
    let arrived = buffer.filled();
    if input.remaining_capacity() < arrived.len() {
        input.compact();
    }
    if input.remaining_capacity() < arrived.len() {
        let mut larger = Buffer::new(input.filled_len() + arrived.len());
        larger.spare_mut()[..input.filled_len()].copy_from_slice(input.filled());
        larger.advance_filled(input.filled_len());
        let previous = std::mem::replace(input, larger);
        driver.recycle(previous);
    }
    input.spare_mut()[..arrived.len()].copy_from_slice(arrived);
    input.advance_filled(arrived.len());
    let may_complete = arrived.contains(&b'\n');
    driver.recycle(buffer);
    may_complete
}
