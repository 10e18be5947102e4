//! [`Claim`]: "I am fetching this key from the origin" — the token collapsed forwarding and
//! background revalidation hold while one fetch per key runs; releasing it (dropping it,
//! however the fetch ends) wakes the workers whose requests wait for it.

use std::sync::Arc;

use super::Store;

/// One claimed key.
pub(super) struct InFlight {
    /// The claim's number (claims are numbered from 1).
    pub(super) number: u64,
    /// Workers (by index) with requests waiting for this claim: woken when it is released.
    pub(super) waiting: Vec<usize>,
}

/// "I am fetching this key from the origin": held by the one exchange (or background
/// revalidation) that goes forward for a key while others wait or serve stale content;
/// released when dropped, however the fetch ends.
pub struct Claim {
    pub(super) store: Arc<Store>,
    /// `Box<str>`, not `String`: the claim travels inside every miss's cache work.
    pub(super) key: Box<str>,
    pub(super) number: u64,
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

    /// This claim's number: different for every claim the store hands out.
    pub fn number(&self) -> u64 {
        self.number
    }
}

impl Drop for Claim {
    /// Releases the key, and wakes the workers with requests waiting for this claim.
    fn drop(&mut self) {
        let mut in_flight = self.store.in_flight();
        let waiting = match in_flight.get(&*self.key) {
            Some(entry) if entry.number == self.number => in_flight
                .remove(&*self.key)
                .map(|entry| entry.waiting)
                .unwrap_or_default(),
            _ => return,
        };
        drop(in_flight);
        if !waiting.is_empty() {
            self.store.wakeups.released(self.number, &waiting);
        }
    }
}
