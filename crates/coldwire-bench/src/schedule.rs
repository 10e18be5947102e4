//! The open-loop schedule: intended start times of requests, constant or Poisson, computed
//! from the phase start alone — never from when responses come back, so a slow server
//! cannot slow the offered load (Banga & Druschel's S-Client; wrk2's constant throughput).
//!
//! Constant arrivals are computed from the slot index (no accumulated rounding drift);
//! Poisson arrivals add exponential gaps drawn from a seeded generator, so a run is
//! reproducible with the same `--seed`.

use std::time::{Duration, Instant};

/// How requests arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Evenly spaced, `1/rate` apart.
    Constant,
    /// A Poisson process: exponential gaps with mean `1/rate` (real traffic is bursty).
    Poisson,
}

/// A small, fast, seeded pseudo-random generator (SplitMix64): good enough for arrival
/// gaps and target choice, and reproducible.
#[derive(Clone, Debug)]
pub struct Random(u64);

impl Random {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Random {
        Random(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut mixed = self.0;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        mixed ^ (mixed >> 31)
    }

    /// A uniform number in `[0, 1)`.
    pub fn next_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Intended start times for one phase.
#[derive(Clone, Debug)]
pub struct Schedule {
    start: Instant,
    rate: f64,
    arrivals: Arrivals,
    index: u64,
    /// Offset of the next slot from `start`, in seconds (Poisson).
    offset: f64,
    random: Random,
    next: Instant,
}

impl Schedule {
    /// A schedule of `rate` requests per second from `start`.
    pub fn new(start: Instant, rate: f64, arrivals: Arrivals, seed: u64) -> Schedule {
        let mut schedule = Schedule {
            start,
            rate,
            arrivals,
            index: 0,
            offset: 0.0,
            random: Random::new(seed),
            next: start,
        };
        if arrivals == Arrivals::Poisson {
            schedule.offset = schedule.gap();
            schedule.next = start + Duration::from_secs_f64(schedule.offset);
        }
        schedule
    }

    fn gap(&mut self) -> f64 {
        // 1 - u is in (0, 1], so the logarithm is finite.
        -(1.0 - self.random.next_unit()).ln() / self.rate
    }

    /// The next slot's intended start.
    pub fn peek(&self) -> Instant {
        self.next
    }

    /// Moves to the slot after the current one.
    pub fn advance(&mut self) {
        self.index += 1;
        match self.arrivals {
            Arrivals::Constant => {
                self.next = self.start + Duration::from_secs_f64(self.index as f64 / self.rate);
            }
            Arrivals::Poisson => {
                self.offset += self.gap();
                self.next = self.start + Duration::from_secs_f64(self.offset);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(arrivals: Arrivals, rate: f64, seconds: f64) -> usize {
        let start = Instant::now();
        let end = start + Duration::from_secs_f64(seconds);
        let mut schedule = Schedule::new(start, rate, arrivals, 7);
        let mut count = 0;
        while schedule.peek() < end {
            count += 1;
            schedule.advance();
        }
        count
    }

    #[test]
    fn constant_rate_gives_exactly_rate_times_duration() {
        assert_eq!(slots(Arrivals::Constant, 1000.0, 10.0), 10_000);
        assert_eq!(slots(Arrivals::Constant, 0.5, 10.0), 5);
    }

    #[test]
    fn poisson_rate_is_right_on_average_and_gaps_vary() {
        let count = slots(Arrivals::Poisson, 10_000.0, 10.0);
        // Standard deviation sqrt(100,000) ≈ 316: ±5% is over 15 sigma.
        assert!((95_000..105_000).contains(&count), "{count}");
        let start = Instant::now();
        let mut schedule = Schedule::new(start, 100.0, Arrivals::Poisson, 1);
        let first = schedule.peek();
        schedule.advance();
        let second = schedule.peek();
        schedule.advance();
        assert_ne!(second - first, schedule.peek() - second);
    }

    #[test]
    fn same_seed_same_schedule() {
        let start = Instant::now();
        let mut one = Schedule::new(start, 50.0, Arrivals::Poisson, 42);
        let mut two = Schedule::new(start, 50.0, Arrivals::Poisson, 42);
        for _ in 0..100 {
            assert_eq!(one.peek(), two.peek());
            one.advance();
            two.advance();
        }
    }
}
