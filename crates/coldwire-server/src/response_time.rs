//! [`ResponseTimes`]: a fixed-bucket histogram of response times, one per worker, kept in
//! plain integers by the worker that owns it (no atomics, no lock per response) and
//! published with the worker's other counters once per loop turn. The buckets are
//! Prometheus's: cumulative counts of responses that took at most each bound.

use std::time::Duration;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

/// Upper bounds of the buckets, in nanoseconds (100 µs to 10 s, roughly ×2.5 apart); a
/// response slower than the last bound counts only in the total.
pub const BUCKET_BOUNDS_NANOS: [u64; 16] = [
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// Response times of one worker (or, added up, of all of them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponseTimes {
    /// Responses in each bucket alone (not cumulative), the last one past every bound.
    pub counts: [u64; BUCKET_BOUNDS_NANOS.len() + 1],
    /// Sum of every recorded time, in nanoseconds.
    pub sum_nanos: u64,
}

impl ResponseTimes {
    /// Records one response that took `elapsed`.
    #[inline]
    pub fn record(&mut self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let bucket = BUCKET_BOUNDS_NANOS.partition_point(|&bound| bound < nanos);
        self.counts[bucket] += 1;
        self.sum_nanos = self.sum_nanos.saturating_add(nanos);
    }

    /// Responses recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Sum of the recorded times in seconds.
    pub fn sum_seconds(&self) -> f64 {
        self.sum_nanos as f64 / 1e9
    }

    /// `(upper bound in seconds, cumulative count)` for each finite bucket.
    pub fn cumulative(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        let mut running = 0;
        BUCKET_BOUNDS_NANOS
            .iter()
            .zip(self.counts)
            .map(move |(&bound, count)| {
                running += count;
                (bound as f64 / 1e9, running)
            })
    }

    /// What was recorded since `earlier` (a previous copy of the same histogram).
    pub fn since(&self, earlier: &ResponseTimes) -> ResponseTimes {
        let mut counts = self.counts;
        for (count, before) in counts.iter_mut().zip(earlier.counts) {
            *count = count.saturating_sub(before);
        }
        ResponseTimes {
            counts,
            sum_nanos: self.sum_nanos.saturating_sub(earlier.sum_nanos),
        }
    }

    /// The `quantile` (0 to 1) in seconds, interpolated linearly inside its bucket as
    /// Prometheus's `histogram_quantile` does; `None` with nothing recorded. A quantile
    /// past the last bound is reported as that bound (10 s).
    pub fn quantile(&self, quantile: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = quantile.clamp(0.0, 1.0) * total as f64;
        let mut below = 0u64;
        let mut lower = 0.0;
        for (&bound, &count) in BUCKET_BOUNDS_NANOS.iter().zip(&self.counts) {
            let upper = bound as f64 / 1e9;
            if count > 0 && (below + count) as f64 >= rank {
                let inside = (rank - below as f64) / count as f64;
                return Some(lower + (upper - lower) * inside);
            }
            below += count;
            lower = upper;
        }
        Some(lower)
    }

    /// Adds another histogram (for totals across workers).
    pub fn add(&mut self, other: &ResponseTimes) {
        for (total, part) in self.counts.iter_mut().zip(other.counts) {
            *total += part;
        }
        self.sum_nanos = self.sum_nanos.saturating_add(other.sum_nanos);
    }
}

/// The JSON form: `{"count", "sum_seconds", "buckets": [{"le_seconds", "count"}, ...]}`
/// with cumulative counts; responses slower than the last bound are in `count` only.
impl Serialize for ResponseTimes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Buckets<'a>(&'a ResponseTimes);
        impl Serialize for Buckets<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut seq = serializer.serialize_seq(Some(BUCKET_BOUNDS_NANOS.len()))?;
                for (le_seconds, count) in self.0.cumulative() {
                    seq.serialize_element(&Bucket { le_seconds, count })?;
                }
                seq.end()
            }
        }
        #[derive(Serialize)]
        struct Bucket {
            le_seconds: f64,
            count: u64,
        }
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("count", &self.count())?;
        map.serialize_entry("sum_seconds", &self.sum_seconds())?;
        map.serialize_entry("buckets", &Buckets(self))?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_land_in_the_first_bucket_whose_bound_holds_them() {
        let mut times = ResponseTimes::default();
        times.record(Duration::from_micros(100)); // exactly the first bound
        times.record(Duration::from_micros(101));
        times.record(Duration::from_millis(3));
        times.record(Duration::from_secs(60)); // past every bound
        assert_eq!(times.counts[0], 1);
        assert_eq!(times.counts[1], 1);
        assert_eq!(times.counts[5], 1);
        assert_eq!(times.counts[16], 1);
        assert_eq!(times.count(), 4);
        let cumulative: Vec<u64> = times.cumulative().map(|(_, count)| count).collect();
        assert_eq!(cumulative[0], 1);
        assert_eq!(cumulative[4], 2);
        assert_eq!(cumulative[15], 3);
        assert!((times.sum_seconds() - 60.003_201).abs() < 1e-9);
    }

    #[test]
    fn quantiles_interpolate_inside_their_bucket() {
        let mut times = ResponseTimes::default();
        assert_eq!(times.quantile(0.5), None);
        for _ in 0..100 {
            times.record(Duration::from_micros(700)); // the (0.5 ms, 1 ms] bucket
        }
        let median = times.quantile(0.5).unwrap();
        assert!((median - 0.00075).abs() < 1e-9, "{median}");
        assert!((times.quantile(1.0).unwrap() - 0.001).abs() < 1e-12);
        let earlier = times;
        times.record(Duration::from_secs(20));
        let later = times.since(&earlier);
        assert_eq!(later.count(), 1);
        assert_eq!(later.quantile(0.99), Some(10.0));
    }

    #[test]
    fn json_names_every_field() {
        let mut times = ResponseTimes::default();
        times.record(Duration::from_micros(200));
        let json = serde_json::to_value(times).unwrap();
        assert_eq!(json["count"], 1);
        assert_eq!(json["buckets"][0]["le_seconds"], 0.0001);
        assert_eq!(json["buckets"][0]["count"], 0);
        assert_eq!(json["buckets"][1]["count"], 1);
        assert_eq!(json["buckets"].as_array().unwrap().len(), 16);
    }
}
