//! What the engine tests (`engine.rs`, `population.rs`) share: an observer that stalls the
//! generator's loop once, to make it wake late on purpose.

use std::thread;
use std::time::Duration;

/// Stalls the generator's loop once, for `pause`, at the first progress report past
/// `after`.
pub struct StallLate {
    pub after: Duration,
    pub pause: Duration,
    pub done: bool,
}

impl coldwire_bench::PhaseObserver for StallLate {
    fn progress(&mut self, progress: &coldwire_bench::Progress) {
        if !self.done && progress.elapsed >= self.after {
            self.done = true;
            thread::sleep(self.pause);
        }
    }
}
