//! Wake-ups for requests waiting on a claim (collapsed forwarding): each worker that parks
//! followers registers a wake function (the proxy's: its event loop's `Waker`) and gets a
//! mailbox; when a claim with followers on that worker is released, the claim's number goes
//! into the mailbox and the worker is woken, from whichever thread released the claim. The
//! worker then takes the released numbers and re-routes the followers parked on them.
//!
//! Invariants: a number is delivered to a worker at most once per registration of that
//! worker as a waiter (see `FillLock::follow`); mailboxes only grow between a wake and the
//! worker's next `take`, so they stay as small as the number of claims released meanwhile.
//! Without coldwire's I/O crate (this crate must not depend on it): a wake is any closure.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// How a worker is woken.
type Wake = Box<dyn Fn() + Send + Sync>;

/// One worker's wake function and the claim numbers released for it since it last looked.
struct Mailbox {
    wake: Wake,
    released: Mutex<Vec<u64>>,
}

/// The registered workers' mailboxes, by worker index.
#[derive(Default)]
pub(crate) struct Wakeups {
    workers: Mutex<Vec<Option<Arc<Mailbox>>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means another worker panicked mid-update of plain data.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Wakeups {
    /// Registers (or replaces) worker `index`'s wake function.
    pub(crate) fn register(&self, index: usize, wake: Wake) {
        let mut workers = lock(&self.workers);
        if workers.len() <= index {
            workers.resize_with(index + 1, || None);
        }
        workers[index] = Some(Arc::new(Mailbox {
            wake,
            released: Mutex::new(Vec::new()),
        }));
    }

    fn mailbox(&self, index: usize) -> Option<Arc<Mailbox>> {
        lock(&self.workers).get(index).cloned().flatten()
    }

    /// Claim `number` was released: tells each of `waiting` (worker indices) and wakes it.
    /// Workers that never registered are skipped (their followers poll).
    pub(crate) fn released(&self, number: u64, waiting: &[usize]) {
        for &index in waiting {
            if let Some(mailbox) = self.mailbox(index) {
                lock(&mailbox.released).push(number);
                (mailbox.wake)();
            }
        }
    }

    /// Moves the claim numbers released for worker `index` since its last call into `into`.
    pub(crate) fn take(&self, index: usize, into: &mut Vec<u64>) {
        if let Some(mailbox) = self.mailbox(index) {
            into.append(&mut lock(&mailbox.released));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_release_reaches_only_the_workers_waiting() {
        let wakeups = Wakeups::default();
        let woken: Arc<[AtomicUsize; 3]> = Arc::default();
        for index in 0..3 {
            let woken = woken.clone();
            wakeups.register(
                index,
                Box::new(move || {
                    woken[index].fetch_add(1, Ordering::Relaxed);
                }),
            );
        }
        wakeups.released(7, &[0, 2]);
        wakeups.released(9, &[2, 5]);
        let counts: Vec<usize> = woken.iter().map(|n| n.load(Ordering::Relaxed)).collect();
        assert_eq!(counts, [1, 0, 2]);
        let mut numbers = Vec::new();
        wakeups.take(2, &mut numbers);
        assert_eq!(numbers, [7, 9]);
        numbers.clear();
        wakeups.take(2, &mut numbers);
        wakeups.take(1, &mut numbers);
        wakeups.take(5, &mut numbers);
        assert!(numbers.is_empty(), "taken once; nothing for others");
    }
}
