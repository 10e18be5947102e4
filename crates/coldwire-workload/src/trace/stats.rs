//! The statistics that describe a trace's shape, as `coldwire trace stats` prints them and
//! `traces/README.md` documents them: volume (requests, clients, distinct URLs, time
//! span), sizes (per request and per object), popularity (the top 10% of URLs' share of
//! requests, the Zipf slope), the client side (requests per client, per inferred
//! connection, per session) and the rate over time.
//!
//! The Zipf slope is the least-squares slope of ln(requests) on ln(rank) over the URLs
//! requested at least [`ZIPF_FIT_MIN_REQUESTS`] times: below that, a sample's counts are
//! mostly noise and flatten the tail.

use std::collections::HashMap;
use std::fmt;

use super::Record;
use super::connections::{ConnectionRule, split_connections};

/// URLs requested fewer times than this are left out of the Zipf fit.
pub const ZIPF_FIT_MIN_REQUESTS: u64 = 5;

/// How many equal parts of the time span the rate profile has.
pub const RATE_PROFILE_PARTS: usize = 10;

/// A trace's statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceStats {
    /// Records.
    pub requests: u64,
    /// Distinct clients.
    pub clients: u64,
    /// Distinct paths.
    pub urls: u64,
    /// Seconds from the first record to the last.
    pub span_seconds: f64,
    /// Bytes logged, all records.
    pub total_bytes: u64,
    /// Mean logged size per request.
    pub mean_size: f64,
    /// Median, 90th and 99th percentile and largest logged size per request.
    pub size_percentiles: [u64; 4],
    /// Mean size of a distinct URL (its largest logged size).
    pub mean_object_size: f64,
    /// Share of requests for the most requested 10% of URLs.
    pub top_tenth_share: f64,
    /// Share of URLs requested once.
    pub one_timer_share: f64,
    /// Zipf slope of popularity (positive; 1 is classic Zipf).
    pub zipf_slope: f64,
    /// Mean and largest requests per client.
    pub requests_per_client: (f64, u64),
    /// Connections under [`ConnectionRule::KEEP_ALIVE`], and mean requests per connection.
    pub connections: (u64, f64),
    /// Sessions under [`ConnectionRule::SESSION`], and mean requests per session.
    pub sessions: (u64, f64),
    /// Mean rate over the span, requests per second.
    pub mean_rate: f64,
    /// Requests in the busiest minute, per second.
    pub peak_minute_rate: f64,
    /// Requests per second in each tenth of the span.
    pub rate_profile: [f64; RATE_PROFILE_PARTS],
    /// Share of records with a status below 400.
    pub success_share: f64,
}

fn percentile(sorted: &[u64], fraction: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((fraction * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Least-squares slope of ln(count) on ln(rank), negated; counts sorted descending.
fn zipf_slope(counts: &[u64]) -> f64 {
    let points: Vec<(f64, f64)> = counts
        .iter()
        .take_while(|count| **count >= ZIPF_FIT_MIN_REQUESTS)
        .enumerate()
        .map(|(index, count)| (((index + 1) as f64).ln(), (*count as f64).ln()))
        .collect();
    if points.len() < 2 {
        return 0.0;
    }
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let covariance: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let variance: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    -covariance / variance
}

impl TraceStats {
    /// The statistics of `records` (in time order, as a parsed trace holds them).
    pub fn of(records: &[Record]) -> TraceStats {
        let requests = records.len() as u64;
        let share = |part: u64, whole: u64| {
            if whole == 0 {
                0.0
            } else {
                part as f64 / whole as f64
            }
        };
        let mut per_url: HashMap<&str, (u64, u64)> = HashMap::new();
        let mut per_client: HashMap<&str, u64> = HashMap::new();
        for record in records {
            let entry = per_url.entry(record.path()).or_default();
            entry.0 += 1;
            entry.1 = entry.1.max(record.size);
            *per_client.entry(record.client.as_str()).or_default() += 1;
        }
        let mut sizes: Vec<u64> = records.iter().map(|record| record.size).collect();
        sizes.sort_unstable();
        let total_bytes: u64 = sizes.iter().sum();
        let mut counts: Vec<u64> = per_url.values().map(|(count, _)| *count).collect();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top = counts.len().div_ceil(10);
        let first = records.first().map_or(0, |record| record.time_ms);
        let last = records.last().map_or(0, |record| record.time_ms);
        let span_ms = (last - first).max(0);
        let span_seconds = span_ms as f64 / 1000.0;
        let mut minutes: HashMap<i64, u64> = HashMap::new();
        let mut profile = [0u64; RATE_PROFILE_PARTS];
        for record in records {
            *minutes
                .entry((record.time_ms - first) / 60_000)
                .or_default() += 1;
            let part = ((record.time_ms - first) as f64 / (span_ms.max(1)) as f64
                * RATE_PROFILE_PARTS as f64) as usize;
            profile[part.min(RATE_PROFILE_PARTS - 1)] += 1;
        }
        let part_seconds = (span_seconds / RATE_PROFILE_PARTS as f64).max(f64::MIN_POSITIVE);
        let connections = split_connections(records, ConnectionRule::KEEP_ALIVE, |_| true);
        let sessions = split_connections(records, ConnectionRule::SESSION, |_| true);
        let connection_count: u64 = connections.iter().map(|c| u64::from(c.connections())).sum();
        let session_count: u64 = sessions.iter().map(|c| u64::from(c.connections())).sum();
        TraceStats {
            requests,
            clients: per_client.len() as u64,
            urls: per_url.len() as u64,
            span_seconds,
            total_bytes,
            mean_size: share(total_bytes, requests),
            size_percentiles: [
                percentile(&sizes, 0.5),
                percentile(&sizes, 0.9),
                percentile(&sizes, 0.99),
                sizes.last().copied().unwrap_or(0),
            ],
            mean_object_size: share(
                per_url.values().map(|(_, size)| size).sum(),
                per_url.len() as u64,
            ),
            top_tenth_share: share(counts.iter().take(top).sum(), requests),
            one_timer_share: share(
                counts.iter().filter(|count| **count == 1).count() as u64,
                counts.len() as u64,
            ),
            zipf_slope: zipf_slope(&counts),
            requests_per_client: (
                share(requests, per_client.len() as u64),
                per_client.values().copied().max().unwrap_or(0),
            ),
            connections: (connection_count, share(requests, connection_count)),
            sessions: (session_count, share(requests, session_count)),
            mean_rate: if span_seconds > 0.0 {
                requests as f64 / span_seconds
            } else {
                0.0
            },
            peak_minute_rate: minutes.values().copied().max().unwrap_or(0) as f64 / 60.0,
            rate_profile: profile.map(|count| count as f64 / part_seconds),
            success_share: share(
                records.iter().filter(|record| record.status < 400).count() as u64,
                requests,
            ),
        }
    }
}

impl fmt::Display for TraceStats {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [median, p90, p99, max] = self.size_percentiles;
        writeln!(out, "requests              {}", self.requests)?;
        writeln!(out, "clients               {}", self.clients)?;
        writeln!(out, "distinct URLs         {}", self.urls)?;
        writeln!(
            out,
            "time span             {:.0} s ({:.2} h)",
            self.span_seconds,
            self.span_seconds / 3600.0
        )?;
        writeln!(
            out,
            "status < 400          {:.1}%",
            self.success_share * 100.0
        )?;
        writeln!(out, "bytes                 {}", self.total_bytes)?;
        writeln!(
            out,
            "size per request      mean {:.0} B, median {median} B, p90 {p90} B, p99 {p99} B, max {max} B",
            self.mean_size
        )?;
        writeln!(
            out,
            "size per URL          mean {:.0} B",
            self.mean_object_size
        )?;
        writeln!(
            out,
            "popularity            top 10% of URLs {:.1}% of requests, one-timers {:.1}% of URLs, Zipf slope {:.2} (URLs with >= {ZIPF_FIT_MIN_REQUESTS} requests)",
            self.top_tenth_share * 100.0,
            self.one_timer_share * 100.0,
            self.zipf_slope
        )?;
        writeln!(
            out,
            "per client            mean {:.1} requests, max {}",
            self.requests_per_client.0, self.requests_per_client.1
        )?;
        writeln!(
            out,
            "connections           {} (15 s idle gap, 100 requests max), {:.2} requests each",
            self.connections.0, self.connections.1
        )?;
        writeln!(
            out,
            "sessions              {} (30 min gap), {:.2} requests each",
            self.sessions.0, self.sessions.1
        )?;
        writeln!(
            out,
            "rate                  mean {:.3}/s, busiest minute {:.3}/s",
            self.mean_rate, self.peak_minute_rate
        )?;
        let profile: Vec<String> = self
            .rate_profile
            .iter()
            .map(|rate| format!("{rate:.2}"))
            .collect();
        writeln!(out, "rate by tenth of span {} /s", profile.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(client: &str, seconds: i64, url: &str, size: u64) -> Record {
        Record {
            time_ms: seconds * 1000,
            client: client.into(),
            method: "GET".into(),
            url: url.into(),
            status: 200,
            size,
        }
    }

    #[test]
    fn small_trace_by_hand() {
        let mut records = Vec::new();
        // /a 8 times, /b 4, /c 2, /d once; two clients; 100 s span.
        for i in 0..8 {
            records.push(record("x", i, "/a", 100));
        }
        for i in 0..4 {
            records.push(record("y", 10 + i, "/b", 200));
        }
        records.push(record("y", 50, "/c", 300));
        records.push(record("y", 51, "/c", 300));
        records.push(record("x", 100, "/d", 1000));
        records.sort_by_key(|r| r.time_ms);
        let stats = TraceStats::of(&records);
        assert_eq!((stats.requests, stats.clients, stats.urls), (15, 2, 4));
        assert_eq!(stats.span_seconds, 100.0);
        assert_eq!(stats.total_bytes, 800 + 800 + 600 + 1000);
        assert_eq!(stats.size_percentiles, [100, 300, 1000, 1000]);
        assert_eq!(stats.mean_object_size, 400.0);
        // Top 10% of 4 URLs is 1 URL: /a, 8 of 15.
        assert!((stats.top_tenth_share - 8.0 / 15.0).abs() < 1e-9);
        assert_eq!(stats.one_timer_share, 0.25);
        // Counts 8, 4 (those with >= 5... only 8): fewer than two points, slope 0.
        assert_eq!(stats.zipf_slope, 0.0);
        // x: 0..7 then 100 (gap 93 s): 2 connections; y: 10..13, 50 (gap 37 s), 51: 2.
        assert_eq!(stats.connections.0, 4);
        assert_eq!(stats.sessions.0, 2);
        assert_eq!(stats.requests_per_client, (7.5, 9));
        assert!((stats.mean_rate - 0.15).abs() < 1e-9);
        // Minute 0 holds /a ×8, /b ×4, /c ×2.
        assert_eq!(stats.peak_minute_rate, 14.0 / 60.0);
        // The first tenth (0–10 s) holds the eight /a.
        assert_eq!(stats.rate_profile[0], 0.8);
        assert!(stats.to_string().contains("distinct URLs         4"));
    }

    #[test]
    fn zipf_slope_recovers_an_exact_power_law() {
        let counts: Vec<u64> = (1..=200u64)
            .map(|rank| (100_000.0 / rank as f64).round() as u64)
            .collect();
        assert!((zipf_slope(&counts) - 1.0).abs() < 0.01);
    }

    #[test]
    fn an_empty_trace_has_zero_statistics() {
        let stats = TraceStats::of(&[]);
        assert_eq!(stats.requests, 0);
        assert_eq!(stats.mean_size, 0.0);
        assert_eq!(stats.mean_rate, 0.0);
    }
}
