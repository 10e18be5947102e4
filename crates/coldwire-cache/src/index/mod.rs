//! The index: every stored response's metadata by key — its `Vary` variants (up to
//! [`MAX_VARIANTS`]), hit-for-miss markers, partial content's [`Segments`] — with LRU
//! accounting against a byte budget. It holds each response's body only as a
//! [`Body`](crate::storage::Body) handle: where the bytes live is the
//! [storage](crate::storage)'s business, which the index tells of every body it drops.
//!
//! Invariants:
//! - Keys are spread over shards by hash, each a `Mutex` over a shard (`index/shard.rs`); a key always
//!   lives in the same shard, so workers rarely contend, and an operation on one key takes
//!   one lock.
//! - A shard's bytes never exceed its share of the budget after an insert or a mark
//!   returns: least recently used keys are evicted first.
//! - Stored responses are immutable `Arc`s: a hit clones the `Arc` (no other allocation,
//!   no other lock); replacing or evicting one never disturbs a response being sent.
//! - A *hit-for-miss* marker (Varnish's term) lives in its key's node, is charged
//!   [`MARKER_SIZE`] plus the key against the budget and evicted with it, ends at its
//!   deadline, and is cleared when a response is stored under the key.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

mod segments;
mod shard;

pub use segments::Segments;
pub(crate) use shard::Shard;

use crate::storage::Storage;
use crate::stored::StoredResponse;

/// Most variants kept per URI; inserting another drops the oldest.
pub const MAX_VARIANTS: usize = 8;

/// Fixed overhead charged per stored object besides its head and body.
pub const OBJECT_OVERHEAD: u64 = 256;

/// Bytes charged for a hit-for-miss marker besides its key.
pub const MARKER_SIZE: u64 = 128;

/// The outcome of a lookup.
#[derive(Debug)]
pub enum Lookup {
    /// A stored response selected by the request (fresh or not: the caller decides).
    Found(Arc<StoredResponse>),
    /// Responses are stored for the URI, but `Vary` selects none of them.
    VaryMiss,
    /// Nothing stored for the URI.
    Miss,
}

/// What the store has done, for the stats endpoint (serialised as its `cache` object).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StoreCounters {
    /// Lookups that found a response.
    pub found: u64,
    /// Of those, responses whose body was in memory (memory hits, the hot tier).
    pub found_in_memory: u64,
    /// Of those, responses whose body was on disk (disk hits, sent with `sendfile`).
    pub found_on_disk: u64,
    /// Body bytes of the responses found on disk: what their hits read from the disk
    /// (with `sendfile`; a range or a `304` to a conditional request sends less).
    pub found_on_disk_bytes: u64,
    /// Lookups that found nothing usable.
    pub missed: u64,
    /// Responses stored (including 304 refreshes).
    pub stored: u64,
    /// Objects evicted to stay within the budget.
    pub evicted: u64,
    /// Bytes held now.
    pub bytes: u64,
    /// Objects held now.
    pub objects: u64,
    /// Keys marked hit-for-miss now (their misses go to the origin without collapsing).
    pub hit_for_miss_keys: u64,
    /// Misses sent to the origin at once, without claiming or waiting, because their key
    /// was marked hit-for-miss.
    pub hit_for_miss: u64,
    /// The disk store's counters, when bodies are kept on disk (`--cache-dir`).
    pub disk: Option<crate::storage::DiskCounters>,
}

/// The sharded index (see the module docs).
pub(crate) struct Index {
    shards: Box<[Mutex<Shard>]>,
    /// Each shard's share of the budget (changed by [`Index::set_capacity`]).
    shard_capacity: AtomicU64,
    found: AtomicU64,
    found_on_disk: AtomicU64,
    found_on_disk_bytes: AtomicU64,
    missed: AtomicU64,
    stored: AtomicU64,
    evicted: AtomicU64,
    hit_for_miss: AtomicU64,
}

fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    // A poisoned shard only means another worker panicked mid-update of plain data.
    shard.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Index {
    /// An empty index of `shards` shards sharing `capacity` bytes.
    pub(crate) fn new(shards: usize, capacity: u64) -> Index {
        let shards = shards.max(1);
        Index {
            shards: (0..shards).map(|_| Mutex::new(Shard::new())).collect(),
            shard_capacity: AtomicU64::new(capacity / shards as u64),
            found: AtomicU64::new(0),
            found_on_disk: AtomicU64::new(0),
            found_on_disk_bytes: AtomicU64::new(0),
            missed: AtomicU64::new(0),
            stored: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            hit_for_miss: AtomicU64::new(0),
        }
    }

    /// Each shard's share of the budget: the most one key can ever be charged.
    pub(crate) fn shard_capacity(&self) -> u64 {
        self.shard_capacity.load(Ordering::Relaxed)
    }

    /// Shares `capacity` bytes among the shards from now on; a smaller budget evicts
    /// (least recently used first) at once, shard by shard. Returns the objects evicted.
    pub(crate) fn set_capacity(&self, capacity: u64, storage: &dyn Storage) -> u64 {
        let shard_capacity = capacity / self.shards.len() as u64;
        self.shard_capacity.store(shard_capacity, Ordering::Relaxed);
        let evicted = self
            .shards
            .iter()
            .map(|shard| lock(shard).shrink_to(shard_capacity, storage))
            .sum();
        self.count_updates(0, evicted);
        evicted
    }

    /// The shard `key` lives in, locked (for updates that must see and change a key's
    /// variants at once).
    #[inline]
    pub(crate) fn shard(&self, key: &str) -> MutexGuard<'_, Shard> {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        let index = (hasher.finish() % self.shards.len() as u64) as usize;
        lock(&self.shards[index])
    }

    /// Finds the response stored under `key` that the request (whose fields `request`
    /// returns) selects, most recently stored first, and marks the key recently used;
    /// counted as found or missed.
    #[inline]
    pub(crate) fn lookup<'r>(&self, key: &str, request: impl Fn(&str) -> Vec<&'r [u8]>) -> Lookup {
        let mut shard = self.shard(key);
        let Some(slot) = shard.touch_key(key) else {
            drop(shard);
            self.missed.fetch_add(1, Ordering::Relaxed);
            return Lookup::Miss;
        };
        let variants = shard.variants_in(slot);
        if variants.is_empty() {
            // Only a hit-for-miss marker.
            drop(shard);
            self.missed.fetch_add(1, Ordering::Relaxed);
            return Lookup::Miss;
        }
        let found = variants
            .iter()
            .rev()
            .find(|variant| variant.vary.matches(&request))
            .cloned();
        drop(shard);
        match found {
            Some(response) => {
                self.found.fetch_add(1, Ordering::Relaxed);
                if let crate::storage::Body::File(range) = &response.body {
                    // The disk store's second chance (docs/disk-store.md).
                    range.hit.mark();
                    self.found_on_disk.fetch_add(1, Ordering::Relaxed);
                    self.found_on_disk_bytes
                        .fetch_add(response.body_len, Ordering::Relaxed);
                }
                Lookup::Found(response)
            }
            None => {
                self.missed.fetch_add(1, Ordering::Relaxed);
                Lookup::VaryMiss
            }
        }
    }

    /// The variant under `key` a request selects, without touching or counting.
    pub(crate) fn select<'r>(
        &self,
        key: &str,
        request: impl Fn(&str) -> Vec<&'r [u8]>,
    ) -> Option<Arc<StoredResponse>> {
        self.shard(key)
            .variants(key)
            .iter()
            .rev()
            .find(|variant| variant.vary.matches(&request))
            .cloned()
    }

    /// Stores `response` under `key` (see [`Shard::insert`]), counted as stored.
    pub(crate) fn insert(&self, key: &str, response: Arc<StoredResponse>, storage: &dyn Storage) {
        let evicted =
            self.shard(key)
                .insert(key.to_owned(), response, self.shard_capacity(), storage);
        self.count_updates(1, evicted);
    }

    /// Counts `stored` responses stored and `evicted` objects evicted.
    pub(crate) fn count_updates(&self, stored: usize, evicted: u64) {
        self.stored.fetch_add(stored as u64, Ordering::Relaxed);
        self.evicted.fetch_add(evicted, Ordering::Relaxed);
    }

    /// Removes `key` with every variant; returns how many responses there were.
    pub(crate) fn remove(&self, key: &str, storage: &dyn Storage) -> u64 {
        self.shard(key).remove(key, storage)
    }

    /// Marks `key` hit-for-miss until `until`; false (nothing marked) when the marker alone
    /// is over a shard's share of the budget.
    pub(crate) fn mark_hit_for_miss(
        &self,
        key: &str,
        until: SystemTime,
        storage: &dyn Storage,
    ) -> bool {
        let capacity = self.shard_capacity();
        if MARKER_SIZE + key.len() as u64 > capacity {
            return false;
        }
        let evicted = self.shard(key).mark(key, until, capacity, storage);
        self.evicted.fetch_add(evicted, Ordering::Relaxed);
        true
    }

    /// Whether `key` is marked hit-for-miss at `now` (an ended marker is removed); each
    /// `true` is counted.
    pub(crate) fn is_hit_for_miss(
        &self,
        key: &str,
        now: SystemTime,
        storage: &dyn Storage,
    ) -> bool {
        let marked = self.shard(key).is_marked(key, now, storage);
        if marked {
            self.hit_for_miss.fetch_add(1, Ordering::Relaxed);
        }
        marked
    }

    /// The counters, with the bytes, objects and markers held now.
    pub(crate) fn counters(&self) -> StoreCounters {
        let found = self.found.load(Ordering::Relaxed);
        let found_on_disk = self.found_on_disk.load(Ordering::Relaxed);
        let mut counters = StoreCounters {
            found,
            found_in_memory: found.saturating_sub(found_on_disk),
            found_on_disk,
            found_on_disk_bytes: self.found_on_disk_bytes.load(Ordering::Relaxed),
            missed: self.missed.load(Ordering::Relaxed),
            stored: self.stored.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
            hit_for_miss: self.hit_for_miss.load(Ordering::Relaxed),
            ..StoreCounters::default()
        };
        for shard in &self.shards {
            let shard = lock(shard);
            counters.bytes += shard.bytes;
            counters.objects += shard.objects;
            counters.hit_for_miss_keys += shard.markers;
        }
        counters
    }
}

#[cfg(test)]
mod tests;
