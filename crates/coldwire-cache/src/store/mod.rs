//! The [`Store`] the proxy shares between its workers: the [index](crate::index) (metadata,
//! `Vary` variants, hit-for-miss markers, LRU within a byte budget), the
//! [fill lock](crate::fill_lock) (collapsed forwarding's claims) and a
//! [`Storage`] for bodies (memory today), composed. The policy
//! each operation applies is in [`crate::policy`].
//!
//! Invariants:
//! - A hit is one index lookup: one shard lock, one `Arc` clone, no call into the storage.
//! - Only complete responses are stored (see [`Fill`]); a response over the per-object
//!   limit or over a shard's share of the budget is refused before the storage sees it.
//! - Every body the index stops holding is handed back to the storage; the keys a storage
//!   asks to forget are dropped before the next insert.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::SystemTime;

use crate::fill_lock::{Claim, FillLock};
use crate::index::{Index, OBJECT_OVERHEAD};
use crate::policy::targeted::Targets;
use crate::storage::{MemoryStorage, Restored, Storage};

pub use crate::index::{Lookup, MARKER_SIZE, MAX_VARIANTS, StoreCounters};
pub use crate::policy::hit_for_miss::{
    HIT_FOR_MISS_DEFAULT, HIT_FOR_MISS_MAX, hit_for_miss_lifetime,
};
pub use crate::stored::StoredResponse;

mod fill;
mod partial;
mod update;
pub use fill::Fill;
pub use partial::{PartialStored, partial_key};
pub use update::Freshened;

/// Sizes of the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// Byte budget for all objects together (heads, bodies in memory, keys).
    pub capacity: u64,
    /// Largest body stored; bigger responses pass through uncached.
    pub max_object: u64,
    /// Shards (each a mutex); at least 1, and at most as many as keep every shard's share
    /// of the budget at least `max_object`.
    pub shards: usize,
}

impl Default for StoreConfig {
    /// 256 MiB, objects up to 8 MiB, 16 shards.
    fn default() -> Self {
        StoreConfig {
            capacity: 256 << 20,
            max_object: 8 << 20,
            shards: 16,
        }
    }
}

/// The shared store: index + fill lock + storage.
pub struct Store {
    config: StoreConfig,
    /// The per-object limit in force (`config.max_object` until [`Store::set_limits`]).
    max_object: AtomicU64,
    index: Index,
    fill_lock: Arc<FillLock>,
    storage: Box<dyn Storage>,
    /// The targeted cache-control fields this store's responses obey (RFC 9213).
    targets: Targets,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Store")
            .field("config", &self.config)
            .field("storage", &self.storage.name())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// An empty store keeping bodies in memory.
    pub fn new(config: StoreConfig) -> Store {
        Store::with_storage(config, Box::new(MemoryStorage))
    }

    /// An empty store keeping bodies in `storage` (see
    /// [`StorageChoice::open`](crate::storage::StorageChoice::open)).
    pub fn with_storage(config: StoreConfig, storage: Box<dyn Storage>) -> Store {
        // Every shard must be able to hold the largest object: fewer shards when objects
        // may be a large part of the budget.
        let fitting = (config.capacity / config.max_object.max(1)).max(1);
        let shards = config
            .shards
            .clamp(1, usize::try_from(fitting).unwrap_or(usize::MAX));
        Store {
            config: StoreConfig { shards, ..config },
            max_object: AtomicU64::new(config.max_object),
            index: Index::new(shards, config.capacity),
            fill_lock: Arc::default(),
            storage,
            targets: Targets::default(),
        }
    }

    /// The same store, its responses' freshness taken from the targeted cache-control
    /// fields `targets` before `Cache-Control` (RFC 9213).
    pub fn with_targets(mut self, targets: Targets) -> Store {
        self.targets = targets;
        self
    }

    /// The targeted cache-control fields this store obeys (empty: `Cache-Control` only).
    pub fn targets(&self) -> &Targets {
        &self.targets
    }

    /// The configuration (with the limits in force, after [`Store::set_limits`]).
    pub fn config(&self) -> StoreConfig {
        StoreConfig {
            capacity: self.index.shard_capacity() * self.config.shards as u64,
            max_object: self.max_object.load(Ordering::Relaxed),
            ..self.config
        }
    }

    /// Changes the budget and the per-object limit of a running store (a reload): what is
    /// stored from now on fits the new limits, and a smaller budget evicts at once, least
    /// recently used first. The number of shards stays (so a per-object limit above a
    /// shard's share of the new budget stores nothing larger than that share). Returns
    /// the objects evicted.
    pub fn set_limits(&self, capacity: u64, max_object: u64) -> u64 {
        self.max_object.store(max_object, Ordering::Relaxed);
        self.index.set_capacity(capacity, &*self.storage)
    }

    /// Finds the response stored under `key` that the request (whose fields `request`
    /// returns) selects, most recently stored first, and marks the URI recently used.
    #[inline]
    pub fn lookup<'r>(&self, key: &str, request: impl Fn(&str) -> Vec<&'r [u8]>) -> Lookup {
        self.index.lookup(key, request)
    }

    /// Whether `response` could be stored under `key`: within the per-object limit (the
    /// storage's own for a body it keeps outside memory) and a shard's share of the budget.
    fn fits(&self, key: &str, response: &StoredResponse) -> bool {
        let max_object = if response.body.is_in_memory() {
            self.max_object.load(Ordering::Relaxed)
        } else {
            self.storage
                .max_object()
                .max(self.max_object.load(Ordering::Relaxed))
        };
        response.body_len <= max_object
            && response.size() + key.len() as u64 <= self.index.shard_capacity()
    }

    /// Shares this store with its storage: the responses the storage holds that the index
    /// does not know of yet — found on disk at start-up, or written to disk before being
    /// indexed — are indexed through it from now on (the ones found at start-up at once,
    /// oldest first). Call once, after the store is put in its `Arc`.
    pub fn attach_storage(self: &Arc<Store>) {
        let store: Weak<Store> = Arc::downgrade(self);
        self.storage
            .attach(Arc::new(move |restored: Vec<Restored>| {
                if let Some(store) = store.upgrade() {
                    store.index_restored(restored);
                }
            }));
    }

    /// Indexes responses a storage kept; one that does not fit is handed back to it. The
    /// keys the storage asked to forget go first (a storage that lost bodies — a failing
    /// disk — calls it with none to have them forgotten at once).
    fn index_restored(&self, restored: Vec<Restored>) {
        self.forget_storage_evictions();
        for restored in restored {
            let key = restored.key.clone();
            let response = StoredResponse::restored(restored, &self.targets);
            self.insert_kept(&key, Arc::new(response));
        }
    }

    /// Stores a complete response under `key`, replacing the variant with the same `Vary`
    /// values; its body is handed to the storage ([`Storage::adopt`]; partial content stays
    /// with the index, in memory). Returns false (and stores nothing) when it is over the
    /// per-object limit or the whole budget, or the storage cannot keep it.
    pub fn insert(&self, key: &str, mut response: StoredResponse) -> bool {
        if !self.fits(key, &response) {
            return false;
        }
        if response.segments.is_none() {
            let body = std::mem::take(&mut response.body);
            let Some(body) = self.storage.adopt(key, body, &response) else {
                return false;
            };
            response.body = body;
        }
        self.index_fitting(key, Arc::new(response));
        true
    }

    /// Indexes a response whose body the storage already keeps (a finished [`Fill`]); one
    /// that does not fit is refused and its body handed back to the storage.
    #[inline]
    fn insert_kept(&self, key: &str, response: Arc<StoredResponse>) -> bool {
        if !self.fits(key, &response) {
            self.storage.remove(key, &response.body);
            return false;
        }
        self.index_fitting(key, response);
        true
    }

    /// Indexes a response already checked to fit.
    #[inline]
    fn index_fitting(&self, key: &str, response: Arc<StoredResponse>) {
        self.forget_storage_evictions();
        self.index.insert(key, response, &*self.storage);
    }

    /// A body the storage handed out (a file range) could not be read while it was sent:
    /// the storage checks what it can still read ([`Storage::read_failed`]).
    pub fn storage_read_failed(&self) {
        self.storage.read_failed();
    }

    /// Drops the keys the storage asked the index to forget.
    fn forget_storage_evictions(&self) {
        let mut keys = Vec::new();
        self.storage.take_evictions(&mut keys);
        for key in keys {
            let evicted = self.index.remove(&key, &*self.storage);
            self.index.count_updates(0, evicted);
        }
    }

    /// Removes everything stored under `key`, partial content included (e.g. after an
    /// unsafe method on it, RFC 9111 §4.4).
    pub fn invalidate(&self, key: &str) {
        self.purge(key);
    }

    /// Removes every variant stored under `key` and the partial content held for it (a
    /// `PURGE`); returns how many responses there were.
    pub fn purge(&self, key: &str) -> u64 {
        self.index.remove(key, &*self.storage)
            + self.index.remove(&partial_key(key), &*self.storage)
    }

    /// Remembers that a response to a miss of `key` was not storable: until `until`,
    /// [`Store::is_hit_for_miss`] says its misses should go to the origin at once, in
    /// parallel, rather than wait for one leader. The marker is charged against the budget
    /// (it may evict least recently used keys, and be evicted like them); storing a response
    /// under the key clears it. Returns false (and marks nothing) when the marker alone is
    /// over a shard's share of the budget.
    pub fn mark_hit_for_miss(&self, key: &str, until: SystemTime) -> bool {
        self.index.mark_hit_for_miss(key, until, &*self.storage)
    }

    /// Whether misses of `key` go to the origin without collapsing at `now` (a marker set
    /// by [`Store::mark_hit_for_miss`] that has not ended; an ended one is removed). Each
    /// `true` is counted in [`StoreCounters::hit_for_miss`].
    pub fn is_hit_for_miss(&self, key: &str, now: SystemTime) -> bool {
        self.index.is_hit_for_miss(key, now, &*self.storage)
    }

    /// Claims `key` for one fetch from the origin; `None` when someone already holds it
    /// (see [`FillLock::claim`]).
    pub fn claim(&self, key: &str) -> Option<Claim> {
        self.fill_lock.claim(key)
    }

    /// Whether some fetch of `key` holds its claim.
    pub fn is_claimed(&self, key: &str) -> bool {
        self.fill_lock.holder(key).is_some()
    }

    /// The number of the claim holding `key`, if any (see [`FillLock::holder`]).
    pub fn claim_holder(&self, key: &str) -> Option<u64> {
        self.fill_lock.holder(key)
    }

    /// A request on worker `worker` waits for the claim holding `key` (see
    /// [`FillLock::follow`]).
    pub fn follow(&self, key: &str, worker: usize) -> Option<u64> {
        self.fill_lock.follow(key, worker)
    }

    /// Registers how worker `worker` is woken when a claim its requests follow is released
    /// (the proxy passes its event loop's waker; see [`FillLock::register_worker`]).
    pub fn register_worker(&self, worker: usize, wake: impl Fn() + Send + Sync + 'static) {
        self.fill_lock.register_worker(worker, wake);
    }

    /// Moves into `into` the numbers of the claims released since the last call that
    /// requests on worker `worker` followed.
    pub fn take_released(&self, worker: usize, into: &mut Vec<u64>) {
        self.fill_lock.take_released(worker, into);
    }

    /// The largest body that could ever be stored under `key`: the per-object limit, or
    /// less when a shard's share of the budget (minus the key and the fixed overhead) is
    /// smaller — a tiny `--cache-bytes` stores nothing, so nothing need be collected.
    /// A storage that keeps bodies outside memory (a disk store) raises it to its own
    /// limit.
    pub fn body_limit(&self, key: &str) -> u64 {
        let shard_room = self
            .index
            .shard_capacity()
            .saturating_sub(OBJECT_OVERHEAD + key.len() as u64);
        let in_memory = self.max_object.load(Ordering::Relaxed).min(shard_room);
        if shard_room == 0 {
            return 0;
        }
        in_memory.max(self.storage.max_object())
    }

    /// Offers a worker's ring for the storage's file operations (see
    /// [`Storage::attach_ring`]): its lane, or `None` when the storage has none.
    pub fn attach_disk_ring(&self, wake: impl Fn() + Send + Sync + 'static) -> Option<usize> {
        self.storage.attach_ring(Arc::new(wake))
    }

    /// The worker of `lane` stops taking file operations.
    pub fn detach_disk_ring(&self, lane: usize) {
        self.storage.detach_ring(lane);
    }

    /// Moves the storage's file operations waiting for a ring into `into`.
    pub fn take_disk_ops(&self, into: &mut Vec<crate::storage::FileOp>) {
        self.storage.take_file_ops(into);
    }

    /// The counters (with the disk store's, when bodies are kept on disk).
    pub fn counters(&self) -> StoreCounters {
        let mut counters = self.index.counters();
        counters.disk = self.storage.disk_counters();
        counters
    }
}

#[cfg(test)]
mod tests;
