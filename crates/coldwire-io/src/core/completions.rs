//! What both completion drivers (`ReadinessDriver` and `UringDriver`) do the same way with
//! their queue of completions and their wait: a completion for a connection closed since
//! it was queued is never handed out (a received buffer in it goes back to the pool), and a
//! wait blocks no longer than the earliest deadline the driver keeps.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::driver::{Completion, ConnectionId};
use crate::pools::buffer_pool::BufferPool;

/// Pops the next completion whose connection (if it names one) `is_current`; the ones
/// before it are dropped, their received buffers given back to `buffers`.
pub(crate) fn next_current(
    completions: &mut VecDeque<Completion>,
    buffers: &mut BufferPool,
    is_current: impl Fn(ConnectionId) -> bool,
) -> Option<Completion> {
    while let Some(completion) = completions.pop_front() {
        match completion.connection() {
            Some(id) if !is_current(id) => {
                if let Completion::Received { buffer, .. } = completion {
                    buffers.give_back(buffer);
                }
            }
            _ => return Some(completion),
        }
    }
    None
}

/// `requested` (`None`: no limit) cut short so that a wait started at `now` ends by the
/// earliest of `deadlines` (one already past: zero).
pub(crate) fn until_earliest(
    requested: Option<Duration>,
    now: Instant,
    deadlines: impl IntoIterator<Item = Option<Instant>>,
) -> Option<Duration> {
    deadlines
        .into_iter()
        .flatten()
        .map(|deadline| deadline.saturating_duration_since(now))
        .fold(requested, |timeout, until| {
            Some(timeout.map_or(until, |current| current.min(until)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_deadline_wins() {
        let now = Instant::now();
        let second = Duration::from_secs(1);
        let soon = Some(now + second);
        let later = Some(now + 5 * second);
        assert_eq!(until_earliest(None, now, [None, None]), None);
        assert_eq!(until_earliest(None, now, [later, soon]), Some(second));
        assert_eq!(
            until_earliest(Some(2 * second), now, [later]),
            Some(2 * second)
        );
        assert_eq!(
            until_earliest(Some(2 * second), now, [None, soon]),
            Some(second)
        );
        let past = now.checked_sub(second);
        assert_eq!(
            until_earliest(None, now, [past]),
            past.map(|_| Duration::ZERO)
        );
    }
}
