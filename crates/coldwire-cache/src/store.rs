//! The memory [`Store`] shared by every worker: a byte budget, LRU eviction, a per-object
//! size limit, and up to [`MAX_VARIANTS`] `Vary` variants per URI.
//!
//! Invariants:
//! - The store is split into shards, each a `Mutex` over a map and an intrusive LRU list in
//!   a slab (O(1) lookup, touch, insert and eviction); a key always lives in the same shard,
//!   chosen by its hash, so workers rarely contend.
//! - The sum of the sizes of a shard's objects never exceeds its share of the budget after
//!   an insert returns: least recently used URIs are evicted first.
//! - Stored objects are immutable `Arc`s: a hit clones the `Arc` and sends the body's
//!   `Bytes` without copying; replacing or evicting an object never disturbs a response
//!   already being sent from it.
//! - Only complete responses are stored (see [`Fill`]).
//! - A key whose last leader's response was not storable carries a *hit-for-miss* marker
//!   (Varnish's term; see [`Store::mark_hit_for_miss`]): later misses of it go to the origin
//!   in parallel instead of waiting for one leader. A marker lives in its key's node, is
//!   charged against the budget ([`MARKER_SIZE`] plus the key) and evicted with it, ends
//!   at its deadline, and is cleared when a response is stored under the key.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use crate::targeted::Targets;
use crate::wakeups::Wakeups;

pub use crate::stored::StoredResponse;

mod claim;
mod fill;
mod partial;
mod update;
pub use claim::Claim;
use claim::InFlight;
pub use fill::Fill;
pub use partial::{PartialStored, partial_key};
pub use update::Freshened;

/// Most variants kept per URI; inserting another drops the oldest.
pub const MAX_VARIANTS: usize = 8;

/// Fixed overhead charged per stored object besides its head and body.
pub(crate) const OBJECT_OVERHEAD: u64 = 256;

/// Bytes charged for a hit-for-miss marker besides its key.
pub const MARKER_SIZE: u64 = 128;

/// How long a key stays hit-for-miss when the response that was not stored gave no
/// freshness lifetime (Varnish's default for uncacheable responses is the same 2 minutes).
pub const HIT_FOR_MISS_DEFAULT: Duration = Duration::from_secs(120);

/// The longest a key stays hit-for-miss, whatever freshness lifetime the response gave.
pub const HIT_FOR_MISS_MAX: Duration = Duration::from_secs(600);

/// How long a key stays hit-for-miss after a response with this freshness `lifetime` was
/// not stored: the lifetime if it had one, else [`HIT_FOR_MISS_DEFAULT`], at most
/// [`HIT_FOR_MISS_MAX`].
pub fn hit_for_miss_lifetime(lifetime: Duration) -> Duration {
    if lifetime.is_zero() {
        HIT_FOR_MISS_DEFAULT
    } else {
        lifetime.min(HIT_FOR_MISS_MAX)
    }
}

const NONE: usize = usize::MAX;

/// Sizes of the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// Byte budget for all objects together (heads, bodies, keys).
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

/// The outcome of [`Store::lookup`].
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
}

struct Node {
    key: String,
    variants: Vec<Arc<StoredResponse>>,
    /// Until when misses of the key are not collapsed (hit-for-miss).
    hit_for_miss_until: Option<SystemTime>,
    size: u64,
    prev: usize,
    next: usize,
}

#[derive(Default)]
struct Shard {
    index: HashMap<String, usize>,
    nodes: Vec<Node>,
    free: Vec<usize>,
    head: usize,
    tail: usize,
    bytes: u64,
    objects: u64,
    markers: u64,
}

impl Shard {
    fn new() -> Shard {
        Shard {
            head: NONE,
            tail: NONE,
            ..Shard::default()
        }
    }

    fn unlink(&mut self, slot: usize) {
        let (prev, next) = (self.nodes[slot].prev, self.nodes[slot].next);
        if prev == NONE {
            self.head = next;
        } else {
            self.nodes[prev].next = next;
        }
        if next == NONE {
            self.tail = prev;
        } else {
            self.nodes[next].prev = prev;
        }
    }

    fn push_front(&mut self, slot: usize) {
        self.nodes[slot].prev = NONE;
        self.nodes[slot].next = self.head;
        if self.head != NONE {
            self.nodes[self.head].prev = slot;
        }
        self.head = slot;
        if self.tail == NONE {
            self.tail = slot;
        }
    }

    fn touch(&mut self, slot: usize) {
        if self.head != slot {
            self.unlink(slot);
            self.push_front(slot);
        }
    }

    fn remove_slot(&mut self, slot: usize) -> u64 {
        self.unlink(slot);
        let node = &mut self.nodes[slot];
        let key = std::mem::take(&mut node.key);
        let objects = node.variants.len() as u64;
        node.variants.clear();
        if node.hit_for_miss_until.take().is_some() {
            self.markers -= 1;
        }
        self.bytes -= node.size;
        self.objects -= objects;
        node.size = 0;
        self.index.remove(&key);
        self.free.push(slot);
        objects
    }

    /// The slot of `key`'s node, created empty if there is none, as the most recently
    /// used.
    fn node_for(&mut self, key: &str) -> usize {
        let slot = match self.index.get(key) {
            Some(&slot) => slot,
            None => {
                let node = Node {
                    key: key.to_owned(),
                    variants: Vec::new(),
                    hit_for_miss_until: None,
                    size: 0,
                    prev: NONE,
                    next: NONE,
                };
                let slot = match self.free.pop() {
                    Some(slot) => {
                        self.nodes[slot] = node;
                        slot
                    }
                    None => {
                        self.nodes.push(node);
                        self.nodes.len() - 1
                    }
                };
                self.index.insert(key.to_owned(), slot);
                self.push_front(slot);
                slot
            }
        };
        self.touch(slot);
        slot
    }

    /// Evicts least recently used keys until the shard is within `capacity`; returns the
    /// objects evicted.
    fn evict_to(&mut self, capacity: u64) -> u64 {
        let mut evicted = 0;
        while self.bytes > capacity && self.tail != NONE {
            evicted += self.remove_slot(self.tail);
        }
        evicted
    }

    /// Takes `slot`'s hit-for-miss marker off (and its charge); false when it had none.
    fn unmark(&mut self, slot: usize) -> bool {
        let node = &mut self.nodes[slot];
        if node.hit_for_miss_until.take().is_none() {
            return false;
        }
        let charge = MARKER_SIZE + node.key.len() as u64;
        node.size -= charge;
        self.bytes -= charge;
        self.markers -= 1;
        true
    }

    /// Ends `slot`'s hit-for-miss marker; a node left with nothing is removed.
    fn clear_marker(&mut self, slot: usize) {
        if self.unmark(slot) && self.nodes[slot].variants.is_empty() {
            self.remove_slot(slot);
        }
    }

    fn insert(&mut self, key: String, response: Arc<StoredResponse>, capacity: u64) -> u64 {
        let size = response.size() + key.len() as u64;
        let slot = self.node_for(&key);
        // A storable response ends hit-for-miss: misses collapse again.
        self.unmark(slot);
        let node = &mut self.nodes[slot];
        let mut removed_bytes = 0;
        let mut removed_objects = 0;
        node.variants.retain(|variant| {
            let same = variant.vary == response.vary;
            if same {
                removed_bytes += variant.size() + key.len() as u64;
                removed_objects += 1;
            }
            !same
        });
        if node.variants.len() >= MAX_VARIANTS {
            let oldest = node.variants.remove(0);
            removed_bytes += oldest.size() + key.len() as u64;
            removed_objects += 1;
        }
        node.variants.push(response);
        node.size = node.size - removed_bytes + size;
        self.bytes = self.bytes - removed_bytes + size;
        self.objects = self.objects - removed_objects + 1;
        self.evict_to(capacity)
    }

    /// Marks `key` hit-for-miss until `until` (replacing an earlier deadline); returns the
    /// objects evicted to make room.
    fn mark(&mut self, key: &str, until: SystemTime, capacity: u64) -> u64 {
        let slot = self.node_for(key);
        let node = &mut self.nodes[slot];
        if node.hit_for_miss_until.replace(until).is_none() {
            let charge = MARKER_SIZE + key.len() as u64;
            node.size += charge;
            self.bytes += charge;
            self.markers += 1;
        }
        self.evict_to(capacity)
    }
}

/// The shared memory store.
pub struct Store {
    config: StoreConfig,
    shards: Box<[Mutex<Shard>]>,
    found: AtomicU64,
    missed: AtomicU64,
    stored: AtomicU64,
    evicted: AtomicU64,
    hit_for_miss: AtomicU64,
    /// Keys some worker is fetching from the origin right now (see [`Claim`]), each with
    /// the claim holding it and the workers with requests waiting for it.
    in_flight: Mutex<HashMap<String, InFlight>>,
    /// The last claim number handed out.
    claims: AtomicU64,
    /// How workers with waiting requests are told their claims were released.
    wakeups: Wakeups,
    /// The targeted cache-control fields this store's responses obey (RFC 9213).
    targets: Targets,
}

impl Store {
    /// An empty store.
    pub fn new(config: StoreConfig) -> Store {
        // Every shard must be able to hold the largest object: fewer shards when objects
        // may be a large part of the budget.
        let fitting = (config.capacity / config.max_object.max(1)).max(1);
        let shards = config
            .shards
            .clamp(1, usize::try_from(fitting).unwrap_or(usize::MAX));
        Store {
            config: StoreConfig { shards, ..config },
            shards: (0..shards).map(|_| Mutex::new(Shard::new())).collect(),
            found: AtomicU64::new(0),
            missed: AtomicU64::new(0),
            stored: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            hit_for_miss: AtomicU64::new(0),
            in_flight: Mutex::new(HashMap::new()),
            claims: AtomicU64::new(0),
            wakeups: Wakeups::default(),
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

    /// The configuration.
    pub fn config(&self) -> StoreConfig {
        self.config
    }

    fn shard(&self, key: &str) -> MutexGuard<'_, Shard> {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        let index = (hasher.finish() % self.shards.len() as u64) as usize;
        // A poisoned shard only means another worker panicked mid-update of plain data.
        self.shards[index]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn shard_capacity(&self) -> u64 {
        self.config.capacity / self.shards.len() as u64
    }

    /// Finds the response stored under `key` that the request (whose fields `request`
    /// returns) selects, most recently stored first, and marks the URI recently used.
    pub fn lookup<'r>(&self, key: &str, request: impl Fn(&str) -> Vec<&'r [u8]>) -> Lookup {
        let mut shard = self.shard(key);
        let Some(&slot) = shard.index.get(key) else {
            self.missed.fetch_add(1, Ordering::Relaxed);
            return Lookup::Miss;
        };
        shard.touch(slot);
        if shard.nodes[slot].variants.is_empty() {
            // Only a hit-for-miss marker.
            self.missed.fetch_add(1, Ordering::Relaxed);
            return Lookup::Miss;
        }
        let found = shard.nodes[slot]
            .variants
            .iter()
            .rev()
            .find(|variant| variant.vary.matches(&request))
            .cloned();
        drop(shard);
        match found {
            Some(response) => {
                self.found.fetch_add(1, Ordering::Relaxed);
                Lookup::Found(response)
            }
            None => {
                self.missed.fetch_add(1, Ordering::Relaxed);
                Lookup::VaryMiss
            }
        }
    }

    /// Stores a complete response under `key`, replacing the variant with the same `Vary`
    /// values. Returns false (and stores nothing) when it is over the per-object limit or
    /// the whole budget.
    pub fn insert(&self, key: &str, response: StoredResponse) -> bool {
        let size = response.size() + key.len() as u64;
        if response.body_len > self.config.max_object || size > self.shard_capacity() {
            return false;
        }
        let capacity = self.shard_capacity();
        let evicted = self
            .shard(key)
            .insert(key.to_owned(), Arc::new(response), capacity);
        self.stored.fetch_add(1, Ordering::Relaxed);
        self.evicted.fetch_add(evicted, Ordering::Relaxed);
        true
    }

    /// Removes everything stored under `key`, partial content included (e.g. after an
    /// unsafe method on it, RFC 9111 §4.4).
    pub fn invalidate(&self, key: &str) {
        self.purge(key);
    }

    /// Remembers that a response to a miss of `key` was not storable: until `until`,
    /// [`Store::is_hit_for_miss`] says its misses should go to the origin at once, in
    /// parallel, rather than wait for one leader. The marker is charged against the budget
    /// (it may evict least recently used keys, and be evicted like them); storing a response
    /// under the key clears it. Returns false (and marks nothing) when the marker alone is
    /// over a shard's share of the budget.
    pub fn mark_hit_for_miss(&self, key: &str, until: SystemTime) -> bool {
        let capacity = self.shard_capacity();
        if MARKER_SIZE + key.len() as u64 > capacity {
            return false;
        }
        let evicted = self.shard(key).mark(key, until, capacity);
        self.evicted.fetch_add(evicted, Ordering::Relaxed);
        true
    }

    /// Whether misses of `key` go to the origin without collapsing at `now` (a marker set
    /// by [`Store::mark_hit_for_miss`] that has not ended; an ended one is removed). Each
    /// `true` is counted in [`StoreCounters::hit_for_miss`].
    pub fn is_hit_for_miss(&self, key: &str, now: SystemTime) -> bool {
        let mut shard = self.shard(key);
        let Some(&slot) = shard.index.get(key) else {
            return false;
        };
        match shard.nodes[slot].hit_for_miss_until {
            Some(until) if now < until => {
                drop(shard);
                self.hit_for_miss.fetch_add(1, Ordering::Relaxed);
                true
            }
            Some(_) => {
                shard.clear_marker(slot);
                false
            }
            None => false,
        }
    }

    fn in_flight(&self) -> MutexGuard<'_, HashMap<String, InFlight>> {
        self.in_flight
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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
            store: self.clone(),
            key: key.into(),
            number,
        })
    }

    /// Whether some fetch of `key` holds its claim.
    pub fn is_claimed(&self, key: &str) -> bool {
        self.claim_holder(key).is_some()
    }

    /// The number of the claim holding `key`, if any: a waiter that remembers it can tell
    /// "the fetch I wait for still runs" from "another fetch claimed the key since".
    pub fn claim_holder(&self, key: &str) -> Option<u64> {
        self.in_flight().get(key).map(|entry| entry.number)
    }

    /// A request on worker `worker` waits for the claim holding `key`: returns the claim's
    /// number, and that worker will be woken (see [`Store::register_worker`]) with the
    /// number in its [`Store::take_released`] once the claim is released. `None` when no
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
    /// (any thread may call `wake`; the proxy passes its event loop's waker). A worker that
    /// never registers is not woken: its waiting requests must poll.
    pub fn register_worker(&self, worker: usize, wake: impl Fn() + Send + Sync + 'static) {
        self.wakeups.register(worker, Box::new(wake));
    }

    /// Moves into `into` the numbers of the claims released since the last call that
    /// requests on worker `worker` followed.
    pub fn take_released(&self, worker: usize, into: &mut Vec<u64>) {
        self.wakeups.take(worker, into);
    }

    /// Removes every variant stored under `key` and the partial content held for it (a
    /// `PURGE`); returns how many responses there were.
    pub fn purge(&self, key: &str) -> u64 {
        let mut removed = 0;
        for key in [key.to_owned(), partial_key(key)] {
            let mut shard = self.shard(&key);
            if let Some(&slot) = shard.index.get(&key) {
                removed += shard.remove_slot(slot);
            }
        }
        removed
    }

    /// The largest body that could ever be stored under `key`: the per-object limit, or
    /// less when a shard's share of the budget (minus the key and the fixed overhead) is
    /// smaller — a tiny `--cache-bytes` stores nothing, so nothing need be collected.
    pub fn body_limit(&self, key: &str) -> u64 {
        let shard_room = self
            .shard_capacity()
            .saturating_sub(OBJECT_OVERHEAD + key.len() as u64);
        self.config.max_object.min(shard_room)
    }

    /// Starts collecting a response for the store, unless its announced length is already
    /// over what could ever be stored under the key ([`Store::body_limit`]).
    pub fn begin_fill(&self, key: String, announced_length: Option<u64>) -> Option<Fill> {
        let limit = self.body_limit(&key);
        if announced_length.is_some_and(|length| length > limit) {
            return None;
        }
        Some(Fill {
            key,
            body: Vec::new(),
            length: 0,
            limit,
        })
    }

    /// The counters.
    pub fn counters(&self) -> StoreCounters {
        let mut counters = StoreCounters {
            found: self.found.load(Ordering::Relaxed),
            missed: self.missed.load(Ordering::Relaxed),
            stored: self.stored.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
            hit_for_miss: self.hit_for_miss.load(Ordering::Relaxed),
            ..StoreCounters::default()
        };
        for shard in &self.shards {
            let shard = shard
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            counters.bytes += shard.bytes;
            counters.objects += shard.objects;
            counters.hit_for_miss_keys += shard.markers;
        }
        counters
    }
}

#[cfg(test)]
mod tests;
