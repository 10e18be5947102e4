//! A hashed timing wheel (Varghese & Lauck 1987, scheme 6) for connection
//! timeouts.
//!
//! This module owns [`TimerWheel`], which maps deadlines to small `Copy`
//! payloads (typically a connection's slot id), and [`TimerHandle`], the
//! generation-checked name of one pending timer.
//!
//! # Time
//!
//! Time is counted in ticks of a fixed granularity from a `start` instant.
//! A deadline is rounded *up* to the next tick boundary (its *expiry tick*),
//! so a timer never fires before its deadline; it fires on the first
//! [`TimerWheel::expire`] call whose `now` is at or after that boundary, so
//! it may fire up to one tick (plus the caller's polling delay) late.
//!
//! # Layout
//!
//! * `slots` (a power of two) list heads; a timer with expiry tick `e` sits in
//!   slot `e % slots`, together with timers that are whole rotations later.
//!   Each entry stores its absolute expiry tick, so an entry whose round is
//!   not yet due is skipped and stays.
//! * A *due* list for timers inserted with a deadline that has already been
//!   passed by `expire`; they fire on the next `expire` call.
//! * Entries live in a slab (`Vec` of nodes plus a free list) and are linked
//!   into their list through `prev`/`next` `u32` indices, so cancel and re-arm
//!   unlink in `O(1)` without searching. A node is the payload plus 20 bytes
//!   (24 bytes for a `u32` payload).
//! * A bitmap with one bit per slot marks non-empty slots, so
//!   [`TimerWheel::next_deadline_hint`] and [`TimerWheel::expire`] skip empty
//!   slots 64 at a time.
//!
//! # Invariants
//!
//! * `next_tick` is the first tick not yet processed by `expire`: every timer
//!   in a wheel slot has an expiry tick `>= next_tick`, every timer in the due
//!   list has one `< next_tick`. So the list a timer is in follows from its
//!   expiry tick alone.
//! * A live node's generation equals the one in its handle; freeing a node
//!   increments its generation, so stale handles are refused (generations
//!   wrap after 2^32 reuses of one node, which is ignored).
//!
//! # Complexity
//!
//! `insert`, `cancel`, `rearm`: `O(1)`. `expire`: `O(slots / 64 + entries in
//! the visited slots)`; a `now` more than one rotation ahead visits each slot
//! once rather than looping tick by tick. `next_deadline_hint`:
//! `O(slots / 64)` word reads.

use std::time::{Duration, Instant};

/// The slot count used by [`TimerWheel::with_default_slots`]: with a 100 ms
/// tick, one rotation covers about 100 s, longer than typical idle timeouts.
pub const DEFAULT_SLOTS: usize = 1024;

/// Marks the absence of a node in the intrusive lists.
const NIL: u32 = u32::MAX;
const BITS: usize = u64::BITS as usize;

/// Names one timer of a [`TimerWheel`], for [`cancel`](TimerWheel::cancel)
/// and [`rearm`](TimerWheel::rearm).
///
/// Once its timer has fired or been cancelled the handle is stale: every
/// operation on it returns `None`/`false` and never touches another timer,
/// even one reusing the same storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimerHandle {
    index: u32,
    generation: u32,
}

#[derive(Debug, Clone, Copy)]
struct Node<T> {
    /// The payload; kept (stale) after the node is freed, since `T: Copy`.
    payload: T,
    /// Absolute expiry tick.
    expiry_tick: u64,
    prev: u32,
    /// Next in the node's list, or in the free list when free.
    next: u32,
    generation: u32,
}

/// A hashed timing wheel of pending timers carrying payloads of type `T`.
///
/// Create one per event loop with the loop's start instant; insert a timer
/// per connection deadline; call [`expire`](Self::expire) after each poll
/// wakeup and use [`next_deadline_hint`](Self::next_deadline_hint) to bound
/// the poll timeout. `now` passed to `expire` must not go backwards (use
/// [`Instant::now`]).
#[derive(Debug, Clone)]
pub struct TimerWheel<T: Copy> {
    start: Instant,
    tick_nanos: u64,
    /// `slots - 1`, used as a modulus mask.
    slot_mask: u64,
    /// List heads of the wheel's slots.
    heads: Vec<u32>,
    /// Bit `s` set when slot `s` is non-empty.
    occupied_slots: Vec<u64>,
    /// Timers whose expiry tick was already processed when inserted.
    due_head: u32,
    /// A lower bound on the expiry ticks in the due list (`u64::MAX` when the
    /// due list was just drained).
    due_earliest_tick: u64,
    /// First tick not yet processed by `expire`.
    next_tick: u64,
    nodes: Vec<Node<T>>,
    free_head: u32,
    len: usize,
}

impl<T: Copy> TimerWheel<T> {
    /// Creates an empty wheel whose tick 0 starts at `start`.
    ///
    /// `tick` is the granularity (deadlines are rounded up to a multiple of
    /// it); `slots` is the number of wheel slots and must be a power of two
    /// ([`DEFAULT_SLOTS`] is a good choice). Pick `tick * slots` at least as
    /// long as the usual timeout so that most slots hold only timers due in
    /// the current rotation.
    ///
    /// # Panics
    ///
    /// When `tick` is zero or `slots` is not a power of two.
    pub fn new(tick: Duration, slots: usize, start: Instant) -> Self {
        let tick_nanos = u64::try_from(tick.as_nanos()).unwrap_or(u64::MAX);
        assert!(tick_nanos > 0, "timer wheel tick must be non-zero");
        assert!(
            slots.is_power_of_two(),
            "timer wheel slot count must be a power of two, got {slots}"
        );
        Self {
            start,
            tick_nanos,
            slot_mask: slots as u64 - 1,
            heads: vec![NIL; slots],
            occupied_slots: vec![0; slots.div_ceil(BITS)],
            due_head: NIL,
            due_earliest_tick: u64::MAX,
            next_tick: 0,
            nodes: Vec::new(),
            free_head: NIL,
            len: 0,
        }
    }

    /// Same as [`new`](Self::new) with [`DEFAULT_SLOTS`] slots.
    pub fn with_default_slots(tick: Duration, start: Instant) -> Self {
        Self::new(tick, DEFAULT_SLOTS, start)
    }

    /// The tick granularity.
    pub fn tick(&self) -> Duration {
        Duration::from_nanos(self.tick_nanos)
    }

    /// Number of pending timers.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns whether no timer is pending.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Schedules `payload` to be handed out by the first
    /// [`expire`](Self::expire) at or after `deadline` (rounded up to a tick
    /// boundary). A deadline already passed fires on the next `expire`.
    /// `O(1)`.
    ///
    /// # Panics
    ///
    /// When more than `u32::MAX - 1` timers are pending.
    #[inline]
    pub fn insert(&mut self, deadline: Instant, payload: T) -> TimerHandle {
        let expiry_tick = self.expiry_tick(deadline);
        let node = Node {
            payload,
            expiry_tick,
            prev: NIL,
            next: NIL,
            generation: 0,
        };
        let index = if self.free_head != NIL {
            let index = self.free_head;
            let slot = &mut self.nodes[index as usize];
            self.free_head = slot.next;
            *slot = Node {
                generation: slot.generation,
                ..node
            };
            index
        } else {
            let index = u32::try_from(self.nodes.len())
                .ok()
                .filter(|&index| index != NIL)
                .expect("too many pending timers");
            self.nodes.push(node);
            index
        };
        self.link(index);
        self.len += 1;
        TimerHandle {
            index,
            generation: self.nodes[index as usize].generation,
        }
    }

    /// Removes the timer named by `handle` in `O(1)` and returns its
    /// payload, or `None` when the handle is stale (already fired or
    /// cancelled).
    #[inline]
    pub fn cancel(&mut self, handle: TimerHandle) -> Option<T> {
        let index = self.live_index(handle)?;
        self.unlink(index);
        Some(self.free(index))
    }

    /// Moves the timer named by `handle` to `new_deadline` in `O(1)`,
    /// keeping the handle valid. Returns `false` (and does nothing) when the
    /// handle is stale.
    #[inline]
    pub fn rearm(&mut self, handle: TimerHandle, new_deadline: Instant) -> bool {
        let Some(index) = self.live_index(handle) else {
            return false;
        };
        let new_tick = self.expiry_tick(new_deadline);
        let old_tick = self.nodes[index as usize].expiry_tick;
        if self.list_of(old_tick) == self.list_of(new_tick) {
            // Same list: only the expiry changes (common when a busy
            // connection's idle timeout is pushed by a multiple of the
            // rotation, or within the due list).
            self.nodes[index as usize].expiry_tick = new_tick;
            if new_tick < self.next_tick {
                self.due_earliest_tick = self.due_earliest_tick.min(new_tick);
            }
        } else {
            self.unlink(index);
            self.nodes[index as usize].expiry_tick = new_tick;
            self.link(index);
        }
        true
    }

    /// Returns whether `handle` names a pending timer.
    #[inline]
    pub fn contains(&self, handle: TimerHandle) -> bool {
        self.live_index(handle).is_some()
    }

    /// The instant at which the timer named by `handle` becomes expirable
    /// (its deadline rounded up to a tick), or `None` when the handle is
    /// stale.
    pub fn fire_instant(&self, handle: TimerHandle) -> Option<Instant> {
        let index = self.live_index(handle)?;
        Some(self.tick_instant(self.nodes[index as usize].expiry_tick))
    }

    /// An instant by which [`expire`](Self::expire) should next be called,
    /// or `None` when no timer is pending.
    ///
    /// Never later than the instant at which the earliest pending timer
    /// becomes expirable (its deadline rounded up to a tick); it may be
    /// earlier (an empty wakeup) when the first non-empty slot only holds
    /// timers of later rotations, or when a timer was cancelled. When a timer
    /// is already overdue the hint is in the past: poll without blocking.
    /// Cost: `O(slots / 64)` word reads of the occupancy bitmap.
    pub fn next_deadline_hint(&self) -> Option<Instant> {
        if self.len == 0 {
            return None;
        }
        let slot_count = self.heads.len();
        let wheel_tick = self
            .next_occupied_distance((self.next_tick & self.slot_mask) as usize, slot_count)
            .map(|distance| self.next_tick.saturating_add(distance as u64));
        let earliest = match (self.due_head != NIL, wheel_tick) {
            (true, Some(tick)) => tick.min(self.due_earliest_tick),
            (true, None) => self.due_earliest_tick,
            (false, Some(tick)) => tick,
            (false, None) => return None,
        };
        Some(self.tick_instant(earliest))
    }

    /// Fires every pending timer whose rounded-up deadline is at or before
    /// `now`: removes it and calls `fire` with its payload. Returns the
    /// number fired. Order within one call is unspecified.
    ///
    /// Processes ticks from the last call up to `now`, visiting only
    /// non-empty slots; if `now` is more than one rotation ahead, each slot
    /// is visited once (not once per elapsed tick). A `now` before the start
    /// instant fires nothing; a `now` earlier than a previous call's is
    /// treated as that previous `now`.
    pub fn expire(&mut self, now: Instant, mut fire: impl FnMut(T)) -> usize {
        let mut fired = 0;
        // Overdue timers inserted since the last call.
        let mut index = std::mem::replace(&mut self.due_head, NIL);
        self.due_earliest_tick = u64::MAX;
        while index != NIL {
            let next = self.nodes[index as usize].next;
            fire(self.free(index));
            fired += 1;
            index = next;
        }

        let Some(elapsed) = now.checked_duration_since(self.start) else {
            return fired;
        };
        let elapsed_nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let now_tick = elapsed_nanos / self.tick_nanos;
        if now_tick < self.next_tick {
            return fired;
        }
        let slot_count = self.heads.len();
        let span = (now_tick - self.next_tick).saturating_add(1);
        let limit = usize::try_from(span).map_or(slot_count, |span| span.min(slot_count));
        let first_slot = (self.next_tick & self.slot_mask) as usize;
        let mut distance = 0;
        while distance < limit {
            let Some(found) = self.next_occupied_distance(
                (first_slot + distance) & self.slot_mask as usize,
                limit - distance,
            ) else {
                break;
            };
            distance += found;
            let slot = (first_slot + distance) & self.slot_mask as usize;
            fired += self.expire_slot(slot, now_tick, &mut fire);
            distance += 1;
        }
        self.next_tick = now_tick.saturating_add(1);
        fired
    }

    /// Fires the entries of one slot whose expiry tick is `<= now_tick`.
    fn expire_slot(&mut self, slot: usize, now_tick: u64, fire: &mut impl FnMut(T)) -> usize {
        let mut fired = 0;
        let mut index = self.heads[slot];
        while index != NIL {
            let node = &self.nodes[index as usize];
            let next = node.next;
            if node.expiry_tick <= now_tick {
                self.unlink(index);
                fire(self.free(index));
                fired += 1;
            }
            index = next;
        }
        fired
    }

    /// Distance (in slots, `< limit`) from `from_slot` to the first
    /// non-empty slot, going round the wheel.
    #[inline]
    fn next_occupied_distance(&self, from_slot: usize, limit: usize) -> Option<usize> {
        let slot_count = self.heads.len();
        let mut distance = 0;
        while distance < limit {
            let slot = (from_slot + distance) & (slot_count - 1);
            let bit = slot % BITS;
            let word = self.occupied_slots[slot / BITS] >> bit;
            if word != 0 {
                let found = distance + word.trailing_zeros() as usize;
                return (found < limit).then_some(found);
            }
            // To the end of this word, or of the wheel when it is shorter.
            distance += (BITS - bit).min(slot_count - slot);
        }
        None
    }

    /// Deadline → expiry tick, rounding up (deadlines before `start` map to
    /// tick 0).
    #[inline]
    fn expiry_tick(&self, deadline: Instant) -> u64 {
        let nanos = deadline.saturating_duration_since(self.start).as_nanos();
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX);
        nanos.div_ceil(self.tick_nanos)
    }

    fn tick_instant(&self, tick: u64) -> Instant {
        self.start + Duration::from_nanos(tick.saturating_mul(self.tick_nanos))
    }

    /// The list holding timers with this expiry tick: a slot index, or
    /// `heads.len()` for the due list.
    #[inline]
    fn list_of(&self, expiry_tick: u64) -> usize {
        if expiry_tick < self.next_tick {
            self.heads.len()
        } else {
            (expiry_tick & self.slot_mask) as usize
        }
    }

    #[inline]
    fn live_index(&self, handle: TimerHandle) -> Option<u32> {
        let node = self.nodes.get(handle.index as usize)?;
        (node.generation == handle.generation).then_some(handle.index)
    }

    /// Pushes node `index` at the head of the list its expiry tick selects.
    #[inline]
    fn link(&mut self, index: u32) {
        let expiry_tick = self.nodes[index as usize].expiry_tick;
        let list = self.list_of(expiry_tick);
        let head = if list == self.heads.len() {
            self.due_earliest_tick = self.due_earliest_tick.min(expiry_tick);
            std::mem::replace(&mut self.due_head, index)
        } else {
            let head = std::mem::replace(&mut self.heads[list], index);
            if head == NIL {
                self.occupied_slots[list / BITS] |= 1 << (list % BITS);
            }
            head
        };
        let node = &mut self.nodes[index as usize];
        node.prev = NIL;
        node.next = head;
        if head != NIL {
            self.nodes[head as usize].prev = index;
        }
    }

    /// Removes node `index` from its list (found from its expiry tick).
    #[inline]
    fn unlink(&mut self, index: u32) {
        let Node {
            prev,
            next,
            expiry_tick,
            ..
        } = self.nodes[index as usize];
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        }
        if prev != NIL {
            self.nodes[prev as usize].next = next;
            return;
        }
        let list = self.list_of(expiry_tick);
        if list == self.heads.len() {
            self.due_head = next;
        } else {
            self.heads[list] = next;
            if next == NIL {
                self.occupied_slots[list / BITS] &= !(1 << (list % BITS));
            }
        }
    }

    /// Returns an unlinked node to the free list, invalidating its handles,
    /// and returns its payload.
    #[inline]
    fn free(&mut self, index: u32) -> T {
        let node = &mut self.nodes[index as usize];
        node.generation = node.generation.wrapping_add(1);
        node.next = self.free_head;
        self.free_head = index;
        self.len -= 1;
        node.payload
    }
}

#[cfg(test)]
mod tests;
