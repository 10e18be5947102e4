//! The user-space lowest-free allocators `slot-alloc` compares, behind one trait:
//! * [`LinearScan`]: one flag per slot, searched from slot 0 for the first free one — the
//!   `ufalloc()` that seed 000 §2.3 found in every Unix (a linear search of the descriptor
//!   table for the first empty entry).
//! * [`SingleBitmap`]: one bit per slot, searched a 64-bit word at a time — the "single
//!   bitmap" Linux 2.2 used (seed 004).
//! * [`LowestFreeBitmap`] from coldwire-io: the two-level bitmap of seed 000 §4.2.
//!
//! Plus [`XorShift`], the small deterministic generator that picks which slot to free.

use coldwire_io::LowestFreeBitmap;

/// An allocator of the lowest unused index.
pub trait LowestFree: Sized {
    /// An allocator with indices `0..count` in use.
    fn with_used(count: usize) -> Self;
    /// Marks the lowest unused index used and returns it.
    fn allocate(&mut self) -> usize;
    /// Marks `index` unused (it must be in use).
    fn release(&mut self, index: usize);
}

impl LowestFree for LowestFreeBitmap {
    fn with_used(count: usize) -> Self {
        let mut bitmap = LowestFreeBitmap::with_capacity(count);
        for _ in 0..count {
            LowestFreeBitmap::allocate(&mut bitmap);
        }
        bitmap
    }

    #[inline]
    fn allocate(&mut self) -> usize {
        LowestFreeBitmap::allocate(self)
    }

    #[inline]
    fn release(&mut self, index: usize) {
        LowestFreeBitmap::release(self, index);
    }
}

/// One `bool` per slot, scanned from 0: cost linear in the lowest free index.
#[derive(Debug, Default)]
pub struct LinearScan {
    used: Vec<bool>,
}

impl LowestFree for LinearScan {
    fn with_used(count: usize) -> Self {
        Self {
            used: vec![true; count],
        }
    }

    #[inline]
    fn allocate(&mut self) -> usize {
        match self.used.iter().position(|&used| !used) {
            Some(index) => {
                self.used[index] = true;
                index
            }
            None => {
                self.used.push(true);
                self.used.len() - 1
            }
        }
    }

    #[inline]
    fn release(&mut self, index: usize) {
        if let Some(used) = self.used.get_mut(index) {
            *used = false;
        }
    }
}

/// One bit per slot, scanned a word at a time from 0: linear too, 64 slots per step.
#[derive(Debug, Default)]
pub struct SingleBitmap {
    words: Vec<u64>,
}

impl LowestFree for SingleBitmap {
    fn with_used(count: usize) -> Self {
        let mut words = vec![u64::MAX; count / 64];
        if !count.is_multiple_of(64) {
            words.push((1u64 << (count % 64)) - 1);
        }
        Self { words }
    }

    #[inline]
    fn allocate(&mut self) -> usize {
        let word_index = match self.words.iter().position(|&word| word != u64::MAX) {
            Some(index) => index,
            None => {
                self.words.push(0);
                self.words.len() - 1
            }
        };
        let word = &mut self.words[word_index];
        let bit = word.trailing_ones() as usize;
        *word |= 1 << bit;
        word_index * 64 + bit
    }

    #[inline]
    fn release(&mut self, index: usize) {
        if let Some(word) = self.words.get_mut(index / 64) {
            *word &= !(1u64 << (index % 64));
        }
    }
}

/// xorshift64*: a fast deterministic generator, enough to pick victims uniformly.
#[derive(Clone, Debug)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator from `seed` (0 is replaced: the state must not be zero).
    pub fn new(seed: u64) -> Self {
        Self(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// A number in `0..bound` (`bound` > 0), by multiply-shift (bias below 2^-32 here).
    #[inline]
    pub fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let value = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (((value >> 32) * bound as u64) >> 32) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random interleavings of allocate and release: all three allocators return the same
    /// index every time, and it is the lowest free one.
    #[test]
    fn linear_scan_single_bitmap_and_two_level_bitmap_agree() {
        for seed in 1..=20u64 {
            let mut random = XorShift::new(seed);
            let start = random.below(200);
            let mut linear = LinearScan::with_used(start);
            let mut single = SingleBitmap::with_used(start);
            let mut two_level = <LowestFreeBitmap as LowestFree>::with_used(start);
            let mut model: Vec<bool> = vec![true; start];
            for _ in 0..3_000 {
                let in_use: Vec<usize> = (0..model.len()).filter(|&i| model[i]).collect();
                if !in_use.is_empty() && random.below(5) < 2 {
                    let victim = in_use[random.below(in_use.len())];
                    linear.release(victim);
                    single.release(victim);
                    LowestFree::release(&mut two_level, victim);
                    model[victim] = false;
                } else {
                    let expected = model.iter().position(|&used| !used).unwrap_or(model.len());
                    let got = [
                        linear.allocate(),
                        single.allocate(),
                        LowestFree::allocate(&mut two_level),
                    ];
                    assert_eq!(got, [expected; 3], "seed {seed}");
                    if expected == model.len() {
                        model.push(true);
                    } else {
                        model[expected] = true;
                    }
                }
            }
        }
    }

    #[test]
    fn below_stays_in_range_and_reaches_both_ends() {
        let mut random = XorShift::new(7);
        let draws: Vec<usize> = (0..10_000).map(|_| random.below(10)).collect();
        assert!(draws.iter().all(|&draw| draw < 10));
        assert!(draws.contains(&0) && draws.contains(&9));
    }
}
