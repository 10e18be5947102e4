//! The fill lock: collapsed forwarding's "one fetch per key" (Squid's collapsed forwarding,
//! Varnish's waiting list, pingora's cache lock). A [`Claim`] says "I am fetching this key
//! from the origin"; requests that miss the same key meanwhile *follow* the claim instead
//! of going to the origin too, and are woken when it is released (`fill_lock/wakeups.rs`).
//!
//! Invariants: at most one claim holds a key at a time; claims are numbered from 1, every
//! number different, so a follower can tell the fetch it waited for from a later one;
//! releasing a claim (dropping it, however its fetch ended) removes it only if it still
//! holds its key, and wakes each worker with followers once. It knows nothing of stored
//! responses or where bytes are: the [`Store`](crate::Store) holds one and forwards to it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

mod wakeups;

use wakeups::Wakeups;

/// One claimed key.
struct InFlight {
    /// The claim's number.
    number: u64,
    /// Workers (by index) with requests waiting for this claim: woken when it is released.
    waiting: Vec<usize>,
}

/// The keys being fetched now, their followers, and how to wake them.
#[derive(Default)]
pub struct FillLock {
    /// Keys some worker is fetching from the origin right now, each with the claim holding
    /// it and the workers with requests waiting for it.
    in_flight: Mutex<HashMap<String, InFlight>>,
    /// The last claim number handed out.
    claims: AtomicU64,
    /// How workers with waiting requests are told their claims were released.
    wakeups: Wakeups,
}

impl std::fmt::Debug for FillLock {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("FillLock")
            .field("claims", &self.claims)
            .finish_non_exhaustive()
    }
}

/// "I am fetching this key from the origin": held by the one exchange (or background
/// revalidation) that goes forward for a key while others wait or serve stale content;
/// released when dropped, however the fetch ends.
pub struct Claim {
    lock: Arc<FillLock>,
    /// `Box<str>`, not `String`: the claim travels inside every miss's cache work.
    key: Box<str>,
    number: u64,
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_tuple("Claim").field(&self.key).finish()
    }
}

impl Claim {
    /// The claimed key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// This claim's number: different for every claim the lock hands out.
    pub fn number(&self) -> u64 {
        self.number
    }
}

impl Drop for Claim {
    /// Releases the key, and wakes the workers with requests waiting for this claim.
    fn drop(&mut self) {
        let mut in_flight = self.lock.in_flight();
        let waiting = match in_flight.get(&*self.key) {
            Some(entry) if entry.number == self.number => in_flight
                .remove(&*self.key)
                .map(|entry| entry.waiting)
                .unwrap_or_default(),
            _ => return,
        };
        drop(in_flight);
        if !waiting.is_empty() {
            self.lock.wakeups.released(self.number, &waiting);
        }
    }
}

impl FillLock {
    fn in_flight(&self) -> MutexGuard<'_, HashMap<String, InFlight>> {
        // A poisoned lock only means another worker panicked mid-update of plain data.
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims `key` for one fetch from the origin; `None` when someone already holds it.
    pub fn claim(self: &Arc<Self>, key: &str) -> Option<Claim> {
        let mut in_flight = self.in_flight();
        if in_flight.contains_key(key) {
            return None;
        }
        let number = self.claims.fetch_add(1, Ordering::Relaxed) + 1;
        let entry = InFlight {
            number,
            waiting: Vec::new(),
        };
        in_flight.insert(key.to_owned(), entry);
        Some(Claim {
            lock: self.clone(),
            key: key.into(),
            number,
        })
    }

    /// The number of the claim holding `key`, if any: a waiter that remembers it can tell
    /// "the fetch I wait for still runs" from "another fetch claimed the key since".
    pub fn holder(&self, key: &str) -> Option<u64> {
        self.in_flight().get(key).map(|entry| entry.number)
    }

    /// A request on worker `worker` waits for the claim holding `key`: returns the claim's
    /// number, and that worker will be woken (see [`FillLock::register_worker`]) with the
    /// number in its [`FillLock::take_released`] once the claim is released. `None` when no
    /// claim holds the key (it was released meanwhile: route the request again).
    pub fn follow(&self, key: &str, worker: usize) -> Option<u64> {
        let mut in_flight = self.in_flight();
        let entry = in_flight.get_mut(key)?;
        if !entry.waiting.contains(&worker) {
            entry.waiting.push(worker);
        }
        Some(entry.number)
    }

    /// Registers how worker `worker` is woken when a claim its requests follow is released
    /// (any thread may call `wake`). A worker that never registers is not woken: its
    /// waiting requests must poll.
    pub fn register_worker(&self, worker: usize, wake: impl Fn() + Send + Sync + 'static) {
        self.wakeups.register(worker, Box::new(wake));
    }

    /// Moves into `into` the numbers of the claims released since the last call that
    /// requests on worker `worker` followed.
    pub fn take_released(&self, worker: usize, into: &mut Vec<u64>) {
        self.wakeups.take(worker, into);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_key_is_claimed_once_until_released() {
        let lock = Arc::new(FillLock::default());
        let claim = lock.claim("http://a/").expect("first claim");
        assert!(lock.claim("http://a/").is_none());
        assert!(lock.holder("http://a/").is_some());
        assert!(lock.claim("http://b/").is_some());
        drop(claim);
        assert!(lock.holder("http://a/").is_none());
        assert!(lock.claim("http://a/").is_some());
    }

    #[test]
    fn a_waiter_can_tell_its_leader_from_the_next_one() {
        let lock = Arc::new(FillLock::default());
        let first = lock.claim("http://a/").expect("first claim");
        let waited_for = lock.holder("http://a/");
        assert_eq!(waited_for, Some(first.number()));
        drop(first);
        assert_eq!(lock.holder("http://a/"), None);
        let second = lock.claim("http://a/").expect("claimed again");
        assert_ne!(Some(second.number()), waited_for);
        assert_eq!(lock.holder("http://a/"), Some(second.number()));
    }

    #[test]
    fn releasing_a_claim_wakes_the_workers_that_follow_it() {
        let lock = Arc::new(FillLock::default());
        let woken: Arc<[AtomicUsize; 2]> = Arc::default();
        for worker in 0..2 {
            let woken = woken.clone();
            lock.register_worker(worker, move || {
                woken[worker].fetch_add(1, Ordering::Relaxed);
            });
        }
        let claim = lock.claim("http://a/").expect("first claim");
        let number = claim.number();
        assert_eq!(lock.follow("http://a/", 1), Some(number));
        assert_eq!(lock.follow("http://a/", 1), Some(number));
        assert_eq!(lock.follow("http://b/", 0), None, "nothing to wait for");
        drop(claim);
        let counts: Vec<usize> = woken.iter().map(|n| n.load(Ordering::Relaxed)).collect();
        assert_eq!(counts, [0, 1], "the follower's worker, once");
        let mut released = Vec::new();
        lock.take_released(1, &mut released);
        assert_eq!(released, [number]);
        assert_eq!(lock.follow("http://a/", 1), None, "released");
        // A claim nobody followed wakes nobody.
        drop(lock.claim("http://a/"));
        let counts: Vec<usize> = woken.iter().map(|n| n.load(Ordering::Relaxed)).collect();
        assert_eq!(counts, [0, 1]);
    }
}
