//! [`Draining`]: the part of a worker's event loop every service shares — the stop flag
//! set by the signal thread, the listener closed when it is, and the grace period after
//! which the connections still open are cut.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use coldwire_io::{Driver, ListenerId};

/// A worker's stop and drain state.
pub struct Draining {
    stop: Arc<AtomicBool>,
    grace: Duration,
    listener: Option<ListenerId>,
    deadline: Option<Instant>,
}

impl Draining {
    /// For a worker listening on `listener`, stopped through `stop`, draining for `grace`.
    pub fn new(stop: Arc<AtomicBool>, grace: Duration, listener: ListenerId) -> Draining {
        Draining {
            stop,
            grace,
            listener: Some(listener),
            deadline: None,
        }
    }

    /// A new grace period (a reload), for a drain that has not started yet.
    pub fn set_grace(&mut self, grace: Duration) {
        self.grace = grace;
    }

    /// Whether new connections are still taken (not draining).
    pub fn accepting(&self) -> bool {
        self.listener.is_some()
    }

    /// How long the loop may wait: until the drain deadline, or without bound.
    pub fn timeout(&self, now: Instant) -> Option<Duration> {
        self.deadline
            .map(|deadline| deadline.saturating_duration_since(now))
    }

    /// After a loop turn: starts draining once the stop flag is set (the listener closes);
    /// true when the loop should end — draining and no connection left (`open`), or the
    /// grace period over (the caller then closes what is left).
    pub fn after_turn<D: Driver>(&mut self, driver: &mut D, open: usize) -> bool {
        if self.deadline.is_none() && self.stop.load(Ordering::Relaxed) {
            if let Some(listener) = self.listener.take() {
                driver.close_listener(listener);
            }
            self.deadline = Some(driver.now() + self.grace);
        }
        self.deadline
            .is_some_and(|deadline| open == 0 || driver.now() >= deadline)
    }
}
