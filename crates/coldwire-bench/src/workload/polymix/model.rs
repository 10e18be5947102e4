//! The robots' choices, as Web Polygraph makes them (`src/runtime/PopModel.cc`,
//! `src/xstd/rndDistrs.cc`, `workloads/include/polymix-4-guts.pg`):
//!
//! * **Recurrence**: with probability `recurrence × phase factor` a request repeats an
//!   object already requested; otherwise it asks for a new one (the next id). A repeat of
//!   a cachable object is an *offered hit*: with 80% of objects cachable, recurrence
//!   55%/80% offers a 55% hit ratio.
//! * **Popularity** ([`WorkingSet::choose`]): a repeat picks uniformly among the last
//!   `wss` ids (the working set — all ids while it grows during the fill phase, then
//!   frozen in size, so it slides forward as new ids are made); with probability
//!   `hot_set_probability` it picks from the hot set instead (`wss × hot_set_fraction`
//!   ids ending at the hot set's position, moved to the newest id at each phase start).
//!   Then, with probability `bhr_discrimination`, if the chosen object is cachable it is
//!   replaced by the smallest cachable object among its ±4 neighbours (small objects are
//!   re-requested more: byte hit ratio below document hit ratio).
//! * **Persistent connections**: a connection carries `zipf(N)` requests, Polygraph's
//!   `floor((N+1)^U)` ([`polygraph_zipf`]: on 1..N, mean 14.85 for N = 64).
//! * **Request kinds** ([`RequestKind::draw`]): IMS answered 200, IMS answered 304,
//!   reload, `POST`, `HEAD`, the rest basic `GET`s.

use std::time::SystemTime;

use coldwire_workload::ContentMix;

use crate::schedule::Random;

use super::scenario::{Popularity, Requests};

/// Polygraph's `zipf(n)`: `floor((n + 1)^U)`, U uniform in `[0, 1)` — on `1..=n`, with
/// `P(X ≥ k) = 1 − ln k / ln(n + 1)`. Not the classic Zipf.
pub fn polygraph_zipf(n: u64, random: &mut Random) -> u64 {
    if n <= 1 {
        return 1;
    }
    let value = ((n + 1) as f64).powf(random.next_unit()).floor() as u64;
    value.clamp(1, n)
}

/// A request's kind (its index is the report's `request_kinds` order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// A plain `GET`.
    Basic,
    /// `GET` with an `If-Modified-Since` older than the object: answered `200`.
    Ims200,
    /// `GET` with the object's `Last-Modified` as `If-Modified-Since`: answered `304`.
    Ims304,
    /// `GET` with `Cache-Control: no-cache`: the cache must go to the origin.
    Reload,
    /// `POST` with a small body (never a hit).
    Post,
    /// `HEAD`.
    Head,
}

/// The kinds' names, in [`RequestKind`] order.
pub const KIND_NAMES: [&str; 6] = ["basic", "ims200", "ims304", "reload", "post", "head"];

impl RequestKind {
    /// Its index in [`KIND_NAMES`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Draws a kind from the mix.
    pub fn draw(requests: &Requests, random: &mut Random) -> RequestKind {
        let mut point = random.next_unit();
        for (share, kind) in [
            (requests.ims200, RequestKind::Ims200),
            (requests.ims304, RequestKind::Ims304),
            (requests.reload, RequestKind::Reload),
            (requests.post, RequestKind::Post),
            (requests.head, RequestKind::Head),
        ] {
            if point < share {
                return kind;
            }
            point -= share;
        }
        RequestKind::Basic
    }
}

/// The ids requested so far, and the popularity model choosing among them.
#[derive(Clone, Debug)]
pub struct WorkingSet {
    /// The newest id given out (ids start at 1; 0: none yet).
    last: u64,
    /// The working set's size once frozen.
    frozen: Option<u64>,
    /// The hot set ends here.
    hot_position: u64,
    popularity: Popularity,
}

impl WorkingSet {
    /// An empty working set.
    pub fn new(popularity: Popularity) -> WorkingSet {
        WorkingSet {
            last: 0,
            frozen: None,
            hot_position: 0,
            popularity,
        }
    }

    /// The newest id.
    pub fn last(&self) -> u64 {
        self.last
    }

    /// Objects in the working set now.
    pub fn size(&self) -> u64 {
        let grown = self.frozen.unwrap_or(self.last).min(self.last);
        match self.popularity.working_set_cap {
            0 => grown,
            cap => grown.min(cap),
        }
    }

    /// A new object's id.
    pub fn new_id(&mut self) -> u64 {
        self.last += 1;
        self.last
    }

    /// Stops the working set growing (the end of the fill phase).
    pub fn freeze(&mut self) {
        if self.frozen.is_none() {
            self.frozen = Some(self.last.max(1));
        }
    }

    /// Moves the hot set to the newest ids (Polygraph moves it over time: flash crowds).
    pub fn move_hot_set(&mut self) {
        self.hot_position = self.last;
    }

    /// A repeated request's id (`None` before any id exists).
    pub fn choose(&self, mix: &ContentMix, now: SystemTime, random: &mut Random) -> Option<u64> {
        if self.last == 0 {
            return None;
        }
        let mut last = self.last;
        let mut size = self.size().max(1);
        if random.next_unit() < self.popularity.hot_set_probability {
            size = ((size as f64 * self.popularity.hot_set_fraction).round() as u64).max(1);
            last = self.hot_position.clamp(size.min(self.last), self.last);
        }
        let offset = last.saturating_sub(size);
        let span = last - offset;
        let chosen = offset + 1 + ((random.next_unit() * span as f64) as u64).min(span - 1);
        if random.next_unit() >= self.popularity.bhr_discrimination
            || !mix.object(chosen, now).cachable
        {
            return Some(chosen);
        }
        let first = chosen.saturating_sub(4).max(1);
        let end = (chosen + 4).min(self.last);
        let best = (first..=end)
            .map(|id| mix.object(id, now))
            .filter(|object| object.cachable)
            .min_by_key(|object| object.size)
            .map_or(chosen, |object| object.id);
        Some(best)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polygraph_zipf_has_its_published_mean_and_range() {
        let mut random = Random::new(11);
        let n = 200_000;
        let draws: Vec<u64> = (0..n).map(|_| polygraph_zipf(64, &mut random)).collect();
        assert!(draws.iter().all(|&draw| (1..=64).contains(&draw)));
        let mean = draws.iter().sum::<u64>() as f64 / n as f64;
        // Mean of floor(65^U) on 1..64: 14.85 (reference §1.3).
        assert!((mean - 14.85).abs() < 0.3, "{mean}");
        let ones = draws.iter().filter(|&&draw| draw == 1).count() as f64 / n as f64;
        assert!((ones - 0.166).abs() < 0.01, "{ones}");
    }

    #[test]
    fn request_kinds_follow_the_mix() {
        let requests = Requests::default();
        let mut random = Random::new(5);
        let n = 400_000;
        let mut counts = [0u64; 6];
        for _ in 0..n {
            counts[RequestKind::draw(&requests, &mut random).index()] += 1;
        }
        let share = |kind: RequestKind| counts[kind.index()] as f64 / n as f64;
        assert!((share(RequestKind::Ims304) - 0.10).abs() < 0.003);
        assert!((share(RequestKind::Reload) - 0.05).abs() < 0.003);
        assert!((share(RequestKind::Post) - 0.015).abs() < 0.002);
        assert!((share(RequestKind::Basic) - 0.784).abs() < 0.005);
    }

    #[test]
    fn repeats_stay_in_the_working_set_and_the_hot_set_draws_its_share() {
        let mix = ContentMix::polymix4(1);
        let now = SystemTime::now();
        let popularity = Popularity {
            bhr_discrimination: 0.0,
            ..Popularity::default()
        };
        let mut set = WorkingSet::new(popularity);
        let mut random = Random::new(9);
        for _ in 0..10_000 {
            set.new_id();
        }
        set.freeze();
        set.move_hot_set();
        for _ in 0..5_000 {
            set.new_id();
        }
        assert_eq!(set.size(), 10_000);
        let n = 100_000;
        let mut hot = 0;
        for _ in 0..n {
            let id = set.choose(&mix, now, &mut random).unwrap();
            // The window slid: the last 10,000 ids of 15,000.
            assert!((5_001..=15_000).contains(&id), "{id}");
            if (9_901..=10_000).contains(&id) {
                hot += 1;
            }
        }
        // 10% to the 100 hot ids, plus their uniform share (1% of 90%).
        let share = hot as f64 / n as f64;
        assert!((share - 0.109).abs() < 0.005, "{share}");
    }

    #[test]
    fn discrimination_keeps_the_cachable_share_and_prefers_small_objects() {
        let mix = ContentMix::polymix4(1);
        let now = SystemTime::now();
        let plain = WorkingSet::new(Popularity {
            bhr_discrimination: 0.0,
            hot_set_probability: 0.0,
            ..Popularity::default()
        });
        let discriminating = WorkingSet::new(Popularity {
            hot_set_probability: 0.0,
            ..Popularity::default()
        });
        let mut sets = [plain, discriminating];
        for set in &mut sets {
            for _ in 0..50_000 {
                set.new_id();
            }
        }
        let mut random = Random::new(4);
        let stats = |set: &WorkingSet, random: &mut Random| {
            let n = 50_000;
            let (mut cachable, mut bytes) = (0u64, 0u64);
            for _ in 0..n {
                let object = mix.object(set.choose(&mix, now, random).unwrap(), now);
                cachable += u64::from(object.cachable);
                bytes += object.size;
            }
            (cachable as f64 / n as f64, bytes as f64 / n as f64)
        };
        let (plain_cachable, plain_size) = stats(&sets[0], &mut random);
        let (cachable, size) = stats(&sets[1], &mut random);
        assert!((plain_cachable - 0.80).abs() < 0.01, "{plain_cachable}");
        assert!((cachable - 0.80).abs() < 0.01, "{cachable}");
        assert!(size < plain_size * 0.6, "{size} vs {plain_size}");
    }
}
