//! When a loop accepts connections, kept the same way by both driver families: accepting
//! pauses for `DriverConfig::accept_pause` when descriptors run out (`EMFILE`/`ENFILE`:
//! retrying at once would spin), and at the connection limit until a connection closes.
//! The gate only decides; what pausing means is each driver's own (the readiness driver
//! drops its listeners' interest, io_uring cancels its accepts), done when a method here
//! answers `true`.
//!
//! Invariant: accepting is paused while either reason holds; it resumes when the last
//! one ends, and each method answers `true` exactly on the transition it names.

use std::time::{Duration, Instant};

/// Whether accepting is paused, and why.
#[derive(Debug, Default)]
pub(crate) struct AcceptGate {
    /// Descriptors ran out: paused until then.
    paused_until: Option<Instant>,
    /// The connection limit was reached: paused until a slot frees.
    at_limit: bool,
}

/// Whether an accept failed because descriptors or kernel memory ran out (as opposed to
/// a connection that was gone before it was accepted).
pub(crate) fn is_descriptor_exhaustion(code: i32) -> bool {
    matches!(
        code,
        libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM
    )
}

impl AcceptGate {
    /// True while accepting is paused, for either reason.
    pub(crate) fn is_paused(&self) -> bool {
        self.at_limit || self.paused_until.is_some()
    }

    /// When a pause for exhausted descriptors ends (a deadline for the loop's wait).
    pub(crate) fn resumes_at(&self) -> Option<Instant> {
        self.paused_until
    }

    /// The connection limit was reached. True when this pauses accepting (it was not
    /// paused already): the caller stops its listeners.
    pub(crate) fn reach_limit(&mut self) -> bool {
        if self.is_paused() {
            return false;
        }
        self.at_limit = true;
        true
    }

    /// An accept found descriptors exhausted at `now`. True when this starts a pause of
    /// `pause` (none was running): the caller stops its listeners.
    pub(crate) fn exhausted(&mut self, now: Instant, pause: Duration) -> bool {
        if self.paused_until.is_some() {
            return false;
        }
        self.paused_until = Some(now + pause);
        true
    }

    /// The loop is below its connection limit again. True when accepting resumes: the
    /// caller starts its listeners.
    pub(crate) fn below_limit(&mut self) -> bool {
        if !self.at_limit {
            return false;
        }
        self.at_limit = false;
        self.paused_until.is_none()
    }

    /// The loop's clock moved to `now`. True when the pause for exhausted descriptors
    /// ended and nothing else holds accepting: the caller starts its listeners.
    pub(crate) fn tick(&mut self, now: Instant) -> bool {
        if self.paused_until.is_none_or(|until| until > now) {
            return false;
        }
        self.paused_until = None;
        !self.at_limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_pauses_once_and_accepting_resumes_when_the_last_ends() {
        let now = Instant::now();
        let pause = Duration::from_millis(100);
        let mut gate = AcceptGate::default();
        assert!(!gate.is_paused());
        assert!(gate.exhausted(now, pause), "the first exhaustion pauses");
        assert!(
            !gate.exhausted(now, pause),
            "a second one does not pause again"
        );
        assert!(!gate.reach_limit(), "already paused");
        assert_eq!(gate.resumes_at(), Some(now + pause));
        assert!(!gate.tick(now), "not yet");
        assert!(gate.tick(now + pause), "the pause ended");
        assert!(!gate.is_paused());

        assert!(gate.reach_limit());
        assert!(gate.exhausted(now, pause), "exhaustion while at the limit");
        assert!(!gate.tick(now + pause), "still at the limit");
        assert!(gate.below_limit(), "the last reason ended");
        assert!(!gate.below_limit(), "once");
        assert!(!gate.is_paused());
    }

    #[test]
    fn below_the_limit_during_an_exhaustion_pause_waits_for_its_end() {
        let now = Instant::now();
        let pause = Duration::from_millis(100);
        let mut gate = AcceptGate::default();
        assert!(gate.reach_limit());
        assert!(gate.exhausted(now, pause));
        assert!(!gate.below_limit(), "the exhaustion pause still runs");
        assert!(gate.is_paused());
        assert!(gate.tick(now + pause));
        assert!(!gate.is_paused());
    }
}
