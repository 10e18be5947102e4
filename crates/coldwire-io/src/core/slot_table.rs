//! Connection state indexed by a dense slot id, allocated lowest-free first.
//!
//! This module owns two things:
//!
//! * [`LowestFreeBitmap`]: the allocator alone. It hands out the *lowest*
//!   unused index, exactly as Unix hands out the lowest unused file
//!   descriptor (the `ufalloc` routine that Banga & Mogul 1998 found to be a
//!   linear scan, and which Linux solves with `open_fds` plus
//!   `full_fds_bits` in its fdtable). It is a two-level bitmap:
//!   - level 1 (`occupied_words`): bit `i` is set when slot `i` is in use;
//!   - level 2 (`full_words`): bit `w` is set when level-1 word `w` is full
//!     (all 64 bits set).
//! * [`SlotTable`]: a `Vec<Option<T>>` whose indices are chosen by a
//!   [`LowestFreeBitmap`], so live connections stay packed at low indices
//!   (which keeps `select`/`poll` sets dense and per-slot arrays small).
//!
//! # Invariants
//!
//! * Bit `w` of level 2 is set if and only if level-1 word `w` exists and
//!   equals `u64::MAX`.
//! * Every level-2 word below `search_start` equals `u64::MAX`, i.e. the
//!   first `64 * 64 * search_start` slots are all occupied (Linux's
//!   `next_fd` hint).
//! * In a [`SlotTable`], `values[i].is_some()` exactly when bit `i` of the
//!   bitmap is set.
//!
//! # Complexity
//!
//! * `allocate`/`insert`: a scan of level 2 from `search_start` for the first
//!   word that is not all ones, then two `trailing_ones`. In the worst case
//!   that is `O(n / 4096)` word reads for `n` slots (245 words for a million
//!   slots), the same bound as Linux's `find_next_fd`; with the
//!   `search_start` hint it is `O(1)` amortised when releases are rare.
//! * `release`/`remove`: `O(1)`: clear one bit in each level and lower the
//!   hint.
//! * `get`/`get_mut`/`contains`: `O(1)`, one bounds-checked index.
//! * `iter`, `highest_occupied`: linear scans, meant for rare uses such as
//!   shutdown or computing `select`'s `nfds`.

const BITS: usize = u64::BITS as usize;

/// The lowest-free index allocator of a [`SlotTable`], without storage.
///
/// Use it directly when the values live elsewhere (or to benchmark the
/// two-level scan against a linear one). A new bitmap is empty and grows one
/// word at a time as indices are allocated; it never shrinks.
#[derive(Debug, Clone, Default)]
pub struct LowestFreeBitmap {
    /// Level 1: bit `i % 64` of word `i / 64` is set when index `i` is in use.
    occupied_words: Vec<u64>,
    /// Level 2: bit `w % 64` of word `w / 64` is set when
    /// `occupied_words[w] == u64::MAX`.
    full_words: Vec<u64>,
    /// All level-2 words below this index are `u64::MAX`.
    search_start: usize,
    /// Number of indices in use.
    len: usize,
}

impl LowestFreeBitmap {
    /// Creates an empty bitmap that allocates nothing until first used.
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates an empty bitmap with room for at least `capacity` indices
    /// before it has to grow.
    pub fn with_capacity(capacity: usize) -> Self {
        let level1 = capacity.div_ceil(BITS);
        Self {
            occupied_words: vec![0; level1],
            full_words: vec![0; level1.div_ceil(BITS)],
            search_start: 0,
            len: 0,
        }
    }

    /// Marks the lowest unused index as used and returns it.
    ///
    /// Grows the bitmap when every existing index is in use. Cost: see the
    /// module documentation (`O(n / 4096)` words in the worst case).
    #[inline]
    pub fn allocate(&mut self) -> usize {
        let mut word2_index = self.search_start;
        let full_mask = loop {
            match self.full_words.get(word2_index) {
                Some(&u64::MAX) => word2_index += 1,
                Some(&mask) => break mask,
                None => {
                    self.full_words.push(0);
                    break 0;
                }
            }
        };
        self.search_start = word2_index;
        // The first level-1 word that is not full. Every word before it in
        // this group is full, hence exists, so it is at most one past the end.
        let word1_index = word2_index * BITS + full_mask.trailing_ones() as usize;
        if word1_index == self.occupied_words.len() {
            self.occupied_words.push(0);
        }
        let word = &mut self.occupied_words[word1_index];
        let bit = word.trailing_ones() as usize;
        *word |= 1 << bit;
        if *word == u64::MAX {
            self.full_words[word2_index] |= 1 << (word1_index % BITS);
        }
        self.len += 1;
        word1_index * BITS + bit
    }

    /// Marks `index` unused in `O(1)`. Returns `false` (and changes nothing)
    /// when `index` was not in use.
    #[inline]
    pub fn release(&mut self, index: usize) -> bool {
        let word1_index = index / BITS;
        let mask = 1u64 << (index % BITS);
        let Some(word) = self.occupied_words.get_mut(word1_index) else {
            return false;
        };
        if *word & mask == 0 {
            return false;
        }
        *word &= !mask;
        let word2_index = word1_index / BITS;
        // The word had a bit set, so `allocate` created its level-2 word
        // (or `with_capacity` did).
        self.full_words[word2_index] &= !(1u64 << (word1_index % BITS));
        self.search_start = self.search_start.min(word2_index);
        self.len -= 1;
        true
    }

    /// Returns whether `index` is in use. Indices beyond the capacity are
    /// simply unused.
    #[inline]
    pub fn is_set(&self, index: usize) -> bool {
        self.occupied_words
            .get(index / BITS)
            .is_some_and(|word| word & (1 << (index % BITS)) != 0)
    }

    /// Number of indices in use.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Returns whether no index is in use.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of indices the bitmap can track before growing (a multiple
    /// of 64).
    pub fn capacity(&self) -> usize {
        self.occupied_words.len() * BITS
    }

    /// The highest index in use, or `None` when empty.
    ///
    /// Scans level 1 backwards: `O(capacity / 64)` in the worst case. Meant
    /// for computing `select`'s `nfds`, not for every event.
    pub fn highest_occupied(&self) -> Option<usize> {
        let (word_index, word) = self
            .occupied_words
            .iter()
            .enumerate()
            .rev()
            .find(|&(_, &word)| word != 0)?;
        Some(word_index * BITS + (BITS - 1 - word.leading_zeros() as usize))
    }

    /// Iterates over the indices in use, in increasing order. Linear in the
    /// capacity.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.occupied_words
            .iter()
            .enumerate()
            .flat_map(|(word_index, &word)| {
                let mut remaining = word;
                std::iter::from_fn(move || {
                    if remaining == 0 {
                        return None;
                    }
                    let bit = remaining.trailing_zeros() as usize;
                    remaining &= remaining - 1;
                    Some(word_index * BITS + bit)
                })
            })
    }

    /// Marks every index unused, keeping the allocated words.
    pub fn clear(&mut self) {
        self.occupied_words.fill(0);
        self.full_words.fill(0);
        self.search_start = 0;
        self.len = 0;
    }
}

/// Connection state (or anything else) stored at a dense slot index, where
/// [`insert`](SlotTable::insert) always picks the lowest free index.
///
/// Storage is a `Vec<Option<T>>`: lookups are one bounds-checked index and no
/// `unsafe` is needed. The table grows as needed and never shrinks; a removed
/// slot keeps its (empty) storage for reuse.
#[derive(Debug, Clone)]
pub struct SlotTable<T> {
    bitmap: LowestFreeBitmap,
    values: Vec<Option<T>>,
}

impl<T> Default for SlotTable<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> SlotTable<T> {
    /// Creates an empty table that allocates nothing until first used.
    pub fn new() -> Self {
        Self {
            bitmap: LowestFreeBitmap::new(),
            values: Vec::new(),
        }
    }

    /// Creates an empty table with room for `capacity` values before it has
    /// to reallocate.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            bitmap: LowestFreeBitmap::with_capacity(capacity),
            values: Vec::with_capacity(capacity),
        }
    }

    /// Stores `value` at the lowest free index and returns that index.
    #[inline]
    pub fn insert(&mut self, value: T) -> usize {
        self.insert_with(|_| value)
    }

    /// Stores the value built by `make` (which is told the index it will
    /// live at, e.g. to register it as a poller token) at the lowest free
    /// index and returns that index.
    #[inline]
    pub fn insert_with(&mut self, make: impl FnOnce(usize) -> T) -> usize {
        let index = self.bitmap.allocate();
        let value = Some(make(index));
        // Every index below `index` is occupied, so it is at most one past
        // the end of `values`.
        if index == self.values.len() {
            self.values.push(value);
        } else {
            self.values[index] = value;
        }
        index
    }

    /// Removes and returns the value at `index` in `O(1)`, freeing the index
    /// for reuse. Returns `None` when the slot was empty.
    #[inline]
    pub fn remove(&mut self, index: usize) -> Option<T> {
        if self.bitmap.release(index) {
            self.values[index].take()
        } else {
            None
        }
    }

    /// The value at `index`, if the slot is occupied.
    #[inline]
    pub fn get(&self, index: usize) -> Option<&T> {
        self.values.get(index)?.as_ref()
    }

    /// The value at `index` for mutation, if the slot is occupied.
    #[inline]
    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.values.get_mut(index)?.as_mut()
    }

    /// Returns whether slot `index` is occupied.
    #[inline]
    pub fn contains(&self, index: usize) -> bool {
        self.bitmap.is_set(index)
    }

    /// Number of occupied slots.
    #[inline]
    pub fn len(&self) -> usize {
        self.bitmap.len()
    }

    /// Returns whether no slot is occupied.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.bitmap.is_empty()
    }

    /// Number of slots that have storage (one past the highest index ever
    /// used), which is at most the number of values held at peak.
    pub fn capacity(&self) -> usize {
        self.values.len()
    }

    /// The highest occupied index, or `None` when empty. Linear scan of the
    /// bitmap; see [`LowestFreeBitmap::highest_occupied`].
    pub fn highest_occupied(&self) -> Option<usize> {
        self.bitmap.highest_occupied()
    }

    /// The underlying allocator, e.g. to read occupancy without the values.
    pub fn bitmap(&self) -> &LowestFreeBitmap {
        &self.bitmap
    }

    /// Iterates over occupied slots as `(index, &value)` in increasing index
    /// order. Linear in [`capacity`](Self::capacity); meant for rare uses
    /// such as shutdown.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &T)> + '_ {
        self.values
            .iter()
            .enumerate()
            .filter_map(|(index, value)| Some((index, value.as_ref()?)))
    }

    /// Like [`iter`](Self::iter), with mutable access to the values.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (usize, &mut T)> + '_ {
        self.values
            .iter_mut()
            .enumerate()
            .filter_map(|(index, value)| Some((index, value.as_mut()?)))
    }

    /// Removes every value (dropping them), keeping the storage.
    pub fn clear(&mut self) {
        self.bitmap.clear();
        self.values.iter_mut().for_each(|value| *value = None);
    }
}

impl<T> std::ops::Index<usize> for SlotTable<T> {
    type Output = T;

    /// Panics when slot `index` is empty; use [`SlotTable::get`] otherwise.
    #[inline]
    fn index(&self, index: usize) -> &T {
        match self.get(index) {
            Some(value) => value,
            None => panic!("slot {index} is empty"),
        }
    }
}

impl<T> std::ops::IndexMut<usize> for SlotTable<T> {
    /// Panics when slot `index` is empty; use [`SlotTable::get_mut`]
    /// otherwise.
    #[inline]
    fn index_mut(&mut self, index: usize) -> &mut T {
        match self.get_mut(index) {
            Some(value) => value,
            None => panic!("slot {index} is empty"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The naive model: a linear scan for the first `false`.
    fn linear_lowest_free(occupied: &[bool]) -> usize {
        occupied
            .iter()
            .position(|&used| !used)
            .unwrap_or(occupied.len())
    }

    #[test]
    fn allocates_lowest_first_and_reuses_released() {
        let mut bitmap = LowestFreeBitmap::new();
        for expected in 0..200 {
            assert_eq!(bitmap.allocate(), expected);
        }
        assert!(bitmap.release(130));
        assert!(bitmap.release(5));
        assert!(!bitmap.release(5), "double release is refused");
        assert!(!bitmap.release(1_000_000), "out of range is refused");
        assert_eq!(bitmap.allocate(), 5);
        assert_eq!(bitmap.allocate(), 130);
        assert_eq!(bitmap.allocate(), 200);
        assert_eq!(bitmap.len(), 201);
        assert_eq!(bitmap.highest_occupied(), Some(200));
    }

    #[test]
    fn crosses_level_two_boundaries() {
        // 3 level-2 words' worth of slots (4096 each) plus some.
        let total = 3 * 4096 + 100;
        let mut bitmap = LowestFreeBitmap::with_capacity(10);
        for expected in 0..total {
            assert_eq!(bitmap.allocate(), expected);
        }
        for index in (0..total).rev().step_by(7) {
            assert!(bitmap.release(index));
        }
        let mut expected: Vec<usize> = (0..total).rev().step_by(7).collect();
        expected.sort_unstable();
        for index in expected {
            assert_eq!(bitmap.allocate(), index);
        }
        assert_eq!(bitmap.allocate(), total);
        assert_eq!(bitmap.iter().count(), total + 1);
        assert!(bitmap.iter().eq(0..=total));
    }

    #[test]
    fn with_capacity_preallocates_and_still_grows() {
        let mut bitmap = LowestFreeBitmap::with_capacity(65);
        assert_eq!(bitmap.capacity(), 128);
        for expected in 0..300 {
            assert_eq!(bitmap.allocate(), expected);
        }
        assert_eq!(bitmap.capacity(), 320);
        bitmap.clear();
        assert!(bitmap.is_empty());
        assert_eq!(bitmap.highest_occupied(), None);
        assert_eq!(bitmap.allocate(), 0);
    }

    #[test]
    fn slot_table_basics() {
        let mut table = SlotTable::with_capacity(4);
        assert_eq!(table.insert("a"), 0);
        assert_eq!(table.insert("b"), 1);
        assert_eq!(
            table.insert_with(|index| if index == 2 { "c" } else { "?" }),
            2
        );
        assert_eq!(table.remove(1), Some("b"));
        assert_eq!(table.remove(1), None);
        assert!(!table.contains(1));
        assert_eq!(table.get(1), None);
        assert_eq!(table.get(99), None);
        assert_eq!(table[2], "c");
        *table.get_mut(0).unwrap() = "z";
        table[2] = "y";
        assert_eq!(table.insert("d"), 1);
        assert_eq!(
            table.iter().collect::<Vec<_>>(),
            vec![(0, &"z"), (1, &"d"), (2, &"y")]
        );
        assert_eq!(table.len(), 3);
        assert_eq!(table.capacity(), 3);
        assert_eq!(table.highest_occupied(), Some(2));
        for (_, value) in table.iter_mut() {
            *value = "w";
        }
        assert!(table.iter().all(|(_, value)| *value == "w"));
        table.clear();
        assert!(table.is_empty());
        assert_eq!(table.insert("e"), 0);
    }

    #[test]
    #[should_panic(expected = "slot 3 is empty")]
    fn index_of_empty_slot_panics() {
        let table: SlotTable<u8> = SlotTable::new();
        let _ = table[3];
    }

    #[derive(Debug, Clone)]
    enum Operation {
        Insert(u32),
        Remove(usize),
    }

    fn operations(max_index: usize) -> impl Strategy<Value = Vec<Operation>> {
        prop::collection::vec(
            prop_oneof![
                3 => any::<u32>().prop_map(Operation::Insert),
                2 => (0..max_index).prop_map(Operation::Remove),
            ],
            0..400,
        )
    }

    proptest! {
        #[test]
        fn slot_table_matches_naive_model(ops in operations(80)) {
            let mut table = SlotTable::new();
            let mut model: Vec<Option<u32>> = Vec::new();
            for op in ops {
                match op {
                    Operation::Insert(value) => {
                        let occupied: Vec<bool> = model.iter().map(Option::is_some).collect();
                        let expected = linear_lowest_free(&occupied);
                        if expected == model.len() {
                            model.push(None);
                        }
                        model[expected] = Some(value);
                        prop_assert_eq!(table.insert(value), expected);
                    }
                    Operation::Remove(index) => {
                        let expected = model.get_mut(index).and_then(Option::take);
                        prop_assert_eq!(table.remove(index), expected);
                    }
                }
                prop_assert_eq!(table.len(), model.iter().flatten().count());
                for (index, expected) in model.iter().enumerate() {
                    prop_assert_eq!(table.get(index), expected.as_ref());
                    prop_assert_eq!(table.contains(index), expected.is_some());
                }
                let expected_pairs: Vec<(usize, &u32)> = model
                    .iter()
                    .enumerate()
                    .filter_map(|(index, value)| Some((index, value.as_ref()?)))
                    .collect();
                prop_assert_eq!(table.iter().collect::<Vec<_>>(), expected_pairs);
                prop_assert_eq!(
                    table.highest_occupied(),
                    model.iter().rposition(Option::is_some)
                );
            }
        }

        /// Starts from a large prefilled bitmap so that random operations
        /// cross level-1 and level-2 word boundaries.
        #[test]
        fn bitmap_matches_naive_model_when_large(
            prefill in 4000usize..8300,
            ops in prop::collection::vec((any::<bool>(), 0usize..8400), 0..200),
        ) {
            let mut bitmap = LowestFreeBitmap::new();
            let mut model = vec![true; prefill];
            for _ in 0..prefill {
                bitmap.allocate();
            }
            for (allocate, index) in ops {
                if allocate {
                    let expected = linear_lowest_free(&model);
                    if expected == model.len() {
                        model.push(false);
                    }
                    model[expected] = true;
                    prop_assert_eq!(bitmap.allocate(), expected);
                } else {
                    let expected = model.get(index).copied().unwrap_or(false);
                    if expected {
                        model[index] = false;
                    }
                    prop_assert_eq!(bitmap.release(index), expected);
                }
                prop_assert_eq!(bitmap.len(), model.iter().filter(|&&used| used).count());
                prop_assert_eq!(bitmap.is_set(index), model.get(index).copied().unwrap_or(false));
            }
            let expected: Vec<usize> = (0..model.len()).filter(|&index| model[index]).collect();
            prop_assert_eq!(bitmap.iter().collect::<Vec<_>>(), expected);
        }
    }
}
