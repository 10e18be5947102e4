//! [`Shard`]: one mutex's share of the index — a map from key to node, the nodes in a slab
//! threaded on an intrusive LRU list (O(1) lookup, touch, insert and eviction), each node
//! holding a key's `Vary` variants and its hit-for-miss marker, and the bytes they are
//! charged.
//!
//! Invariants: `bytes` is the sum of the nodes' `size`, and a node's `size` the sum of its
//! variants' [`StoredResponse::size`] plus the key's length for each, plus a marker's
//! charge; after an insert or a mark returns, `bytes` is within the capacity passed in
//! (least recently used keys are evicted first, unless the storage keeps their bodies
//! elsewhere: [`Storage::spill`]); every variant that leaves the shard is handed to
//! [`Storage::remove`], except one whose body the variant replacing it shares (a freshened
//! copy).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use super::{MARKER_SIZE, MAX_VARIANTS};
use crate::storage::Storage;
use crate::stored::StoredResponse;

const NONE: usize = usize::MAX;

struct Node {
    key: String,
    variants: Vec<Arc<StoredResponse>>,
    /// Until when misses of the key are not collapsed (hit-for-miss).
    hit_for_miss_until: Option<SystemTime>,
    size: u64,
    prev: usize,
    next: usize,
}

/// One shard of the index (see the module docs).
#[derive(Default)]
pub(crate) struct Shard {
    index: HashMap<String, usize>,
    nodes: Vec<Node>,
    free: Vec<usize>,
    head: usize,
    tail: usize,
    pub(super) bytes: u64,
    pub(super) objects: u64,
    pub(super) markers: u64,
}

impl Shard {
    pub(super) fn new() -> Shard {
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

    /// The slot of `key`'s node, marked recently used.
    #[inline]
    pub(crate) fn touch_key(&mut self, key: &str) -> Option<usize> {
        let &slot = self.index.get(key)?;
        self.touch(slot);
        Some(slot)
    }

    /// The variants in `slot`, oldest first (empty: only a hit-for-miss marker).
    #[inline]
    pub(crate) fn variants_in(&self, slot: usize) -> &[Arc<StoredResponse>] {
        &self.nodes[slot].variants
    }

    /// The variants stored under `key`, oldest first, without touching it.
    pub(crate) fn variants(&self, key: &str) -> &[Arc<StoredResponse>] {
        self.index
            .get(key)
            .map_or(&[], |&slot| self.nodes[slot].variants.as_slice())
    }

    fn remove_slot(&mut self, slot: usize, storage: &dyn Storage) -> u64 {
        self.unlink(slot);
        let node = &mut self.nodes[slot];
        let key = std::mem::take(&mut node.key);
        let objects = node.variants.len() as u64;
        for variant in node.variants.drain(..) {
            storage.remove(&key, &variant.body);
        }
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

    /// Removes `key` with everything stored under it; returns how many responses there
    /// were.
    pub(crate) fn remove(&mut self, key: &str, storage: &dyn Storage) -> u64 {
        match self.index.get(key) {
            Some(&slot) => self.remove_slot(slot, storage),
            None => 0,
        }
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

    /// Evicts until the shard is within a new, smaller `capacity` (see `evict_to`).
    pub(super) fn shrink_to(&mut self, capacity: u64, storage: &dyn Storage) -> u64 {
        self.evict_to(capacity, storage)
    }

    /// Evicts least recently used keys until the shard is within `capacity`, unless the
    /// storage keeps their bodies elsewhere ([`Storage::spill`]: the key then stays, its
    /// bodies out of memory); returns the objects evicted.
    fn evict_to(&mut self, capacity: u64, storage: &dyn Storage) -> u64 {
        let mut evicted = 0;
        let mut slot = self.tail;
        while self.bytes > capacity && slot != NONE {
            let prev = self.nodes[slot].prev;
            let in_memory = self.nodes[slot]
                .variants
                .iter()
                .any(|variant| variant.segments.is_some() || variant.body.is_in_memory());
            // A key whose bodies are all elsewhere already costs only its metadata: passed
            // over here (the loop below evicts it if spilling alone cannot make room).
            if in_memory && !self.spill(slot, storage) {
                evicted += self.remove_slot(slot, storage);
            }
            slot = prev;
        }
        // Spilling alone did not make room (what is left is metadata): evict as usual.
        while self.bytes > capacity && self.tail != NONE {
            evicted += self.remove_slot(self.tail, storage);
        }
        evicted
    }

    /// Offers `slot`'s bodies in memory to the storage to keep elsewhere; true when it took
    /// any (their charge is then off the budget).
    fn spill(&mut self, slot: usize, storage: &dyn Storage) -> bool {
        let node = &mut self.nodes[slot];
        let mut freed = 0;
        for variant in &mut node.variants {
            if variant.segments.is_some() || !variant.body.is_in_memory() {
                continue;
            }
            if let Some(body) = storage.spill(&node.key, variant) {
                let spilled = Arc::new(variant.with_body(body));
                freed += variant.size() - spilled.size();
                *variant = spilled;
            }
        }
        node.size -= freed;
        self.bytes -= freed;
        freed > 0
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

    /// Stores `response` under `key`, replacing the variant with the same `Vary` key (and
    /// the oldest beyond [`MAX_VARIANTS`]); returns the objects evicted to stay within
    /// `capacity`.
    pub(crate) fn insert(
        &mut self,
        key: String,
        response: Arc<StoredResponse>,
        capacity: u64,
        storage: &dyn Storage,
    ) -> u64 {
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
                if !variant.body.shares(&response.body) {
                    storage.remove(&key, &variant.body);
                }
            }
            !same
        });
        if node.variants.len() >= MAX_VARIANTS {
            let oldest = node.variants.remove(0);
            removed_bytes += oldest.size() + key.len() as u64;
            removed_objects += 1;
            storage.remove(&key, &oldest.body);
        }
        node.variants.push(response);
        node.size = node.size - removed_bytes + size;
        self.bytes = self.bytes - removed_bytes + size;
        self.objects = self.objects - removed_objects + 1;
        self.evict_to(capacity, storage)
    }

    /// Marks `key` hit-for-miss until `until` (replacing an earlier deadline); returns the
    /// objects evicted to make room.
    pub(crate) fn mark(
        &mut self,
        key: &str,
        until: SystemTime,
        capacity: u64,
        storage: &dyn Storage,
    ) -> u64 {
        let slot = self.node_for(key);
        let node = &mut self.nodes[slot];
        if node.hit_for_miss_until.replace(until).is_none() {
            let charge = MARKER_SIZE + key.len() as u64;
            node.size += charge;
            self.bytes += charge;
            self.markers += 1;
        }
        self.evict_to(capacity, storage)
    }

    /// Whether `key` is marked hit-for-miss at `now`; a marker that has ended is removed
    /// (and the node with it when that was all it held).
    pub(crate) fn is_marked(&mut self, key: &str, now: SystemTime, storage: &dyn Storage) -> bool {
        let Some(&slot) = self.index.get(key) else {
            return false;
        };
        match self.nodes[slot].hit_for_miss_until {
            Some(until) if now < until => true,
            Some(_) => {
                if self.unmark(slot) && self.nodes[slot].variants.is_empty() {
                    self.remove_slot(slot, storage);
                }
                false
            }
            None => false,
        }
    }
}
