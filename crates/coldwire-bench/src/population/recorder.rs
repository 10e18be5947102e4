//! What a population run records per phase, beyond the open-loop engine's
//! [`crate::recorder::Recorder`] (which it also fills: offered, sent, errors by kind,
//! corrected and raw latency, per-second intervals): hit and miss response times apart,
//! offered and measured document and byte hit ratios, integrity failures, request kinds,
//! open connections and active users over time — serialized as a phase's `population`
//! section ([`PopulationPhase`], `docs/bench-json.md`).
//!
//! Responses are attributed to the phase their request was intended in (latencies, hit
//! ratios, integrity), so a slow miss issued at the end of a phase still counts there.

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::recorder::HIGHEST_NANOSECONDS;
use crate::report::Percentiles;

use super::inspect::IntegrityFailure;

/// Per second of a phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PopulationInterval {
    /// Requests offered (arrivals) in that second.
    pub offered: u64,
    /// Responses completed in that second.
    pub completed: u64,
    /// Of them, hits.
    pub hits: u64,
    /// Failed requests (errors and bad statuses) in that second.
    pub errors: u64,
    /// Integrity failures in that second.
    pub integrity_failures: u64,
    /// Open connections at the end of the second.
    pub open_connections: u64,
    /// Active users at the end of the second.
    pub active_users: u64,
}

/// Integrity failures by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IntegrityCounts {
    /// The response named another object than the one requested.
    pub wrong_object: u64,
    /// A body byte differed from the named object's.
    pub wrong_bytes: u64,
    /// The body was longer or shorter than the named size.
    pub wrong_size: u64,
    /// The object field could not be read.
    pub bad_field: u64,
}

impl IntegrityCounts {
    /// Their sum.
    pub fn total(&self) -> u64 {
        self.wrong_object + self.wrong_bytes + self.wrong_size + self.bad_field
    }
}

/// The population-specific recordings of one phase.
#[derive(Clone, Debug)]
pub struct PopulationRecorder {
    /// Corrected latency of hits (ns).
    pub hit: Histogram<u64>,
    /// Corrected latency of misses (ns).
    pub miss: Histogram<u64>,
    /// Basic requests answered `200` (the hit ratios' denominator) and their body bytes.
    pub basic_responses: u64,
    /// Their body bytes.
    pub basic_bytes: u64,
    /// Of them, offered as hits.
    pub offered_hits: u64,
    /// Their body bytes.
    pub offered_hit_bytes: u64,
    /// Of them, measured hits.
    pub hits: u64,
    /// Their body bytes.
    pub hit_bytes: u64,
    /// Responses whose body was verified.
    pub verified: u64,
    /// Responses that could not be checked (no object field).
    pub unverified: u64,
    /// Integrity failures by kind.
    pub integrity: IntegrityCounts,
    /// Requests by the workload's kind.
    pub kinds: Vec<u64>,
    /// Most connections open at once.
    pub max_open_connections: u64,
    /// Most users active at once.
    pub max_active_users: u64,
    /// Per second.
    pub intervals: Vec<PopulationInterval>,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_NANOSECONDS, 3)
        .expect("constant histogram bounds are valid")
}

/// Most seconds kept per phase.
const MAX_INTERVALS: usize = 24 * 3600;

impl PopulationRecorder {
    /// Empty recordings for a workload with `kinds` kinds of request.
    pub fn new(kinds: usize) -> PopulationRecorder {
        PopulationRecorder {
            hit: histogram(),
            miss: histogram(),
            basic_responses: 0,
            basic_bytes: 0,
            offered_hits: 0,
            offered_hit_bytes: 0,
            hits: 0,
            hit_bytes: 0,
            verified: 0,
            unverified: 0,
            integrity: IntegrityCounts::default(),
            kinds: vec![0; kinds],
            max_open_connections: 0,
            max_active_users: 0,
            intervals: Vec::new(),
        }
    }

    /// Second `index` of the phase (`None` past the kept range).
    pub fn interval(&mut self, index: usize) -> Option<&mut PopulationInterval> {
        if index >= MAX_INTERVALS {
            return None;
        }
        if index >= self.intervals.len() {
            self.intervals
                .resize(index + 1, PopulationInterval::default());
        }
        self.intervals.get_mut(index)
    }

    /// Counts an integrity failure.
    pub fn integrity_failure(&mut self, failure: IntegrityFailure) {
        let counts = &mut self.integrity;
        match failure {
            IntegrityFailure::WrongObject => counts.wrong_object += 1,
            IntegrityFailure::WrongBytes => counts.wrong_bytes += 1,
            IntegrityFailure::WrongSize => counts.wrong_size += 1,
            IntegrityFailure::BadField => counts.bad_field += 1,
        }
    }

    /// The phase's report section; `seconds` is the phase's length as run.
    pub fn report(&self, kind_names: &[&'static str], seconds: f64) -> PopulationPhase {
        let ratio = |part: u64, whole: u64| {
            if whole == 0 {
                None
            } else {
                Some(part as f64 / whole as f64)
            }
        };
        let open: Vec<u64> = self
            .intervals
            .iter()
            .map(|interval| interval.open_connections)
            .collect();
        PopulationPhase {
            hit_latency: Percentiles::of(&self.hit),
            miss_latency: Percentiles::of(&self.miss),
            basic_responses: self.basic_responses,
            offered_document_hit_ratio: ratio(self.offered_hits, self.basic_responses),
            measured_document_hit_ratio: ratio(self.hits, self.basic_responses),
            offered_byte_hit_ratio: ratio(self.offered_hit_bytes, self.basic_bytes),
            measured_byte_hit_ratio: ratio(self.hit_bytes, self.basic_bytes),
            mean_response_bytes: if self.basic_responses == 0 {
                0.0
            } else {
                self.basic_bytes as f64 / self.basic_responses as f64
            },
            verified: self.verified,
            unverified: self.unverified,
            integrity_failures: self.integrity.total(),
            integrity: self.integrity,
            request_kinds: kind_names
                .iter()
                .zip(&self.kinds)
                .map(|(name, count)| ((*name).to_owned(), *count))
                .collect(),
            max_open_connections: self.max_open_connections,
            mean_open_connections: if open.is_empty() {
                0.0
            } else {
                open.iter().sum::<u64>() as f64 / open.len() as f64
            },
            max_active_users: self.max_active_users,
            seconds,
            intervals: self.intervals.clone(),
        }
    }
}

/// A phase's `population` section in the JSON (`docs/bench-json.md`).
#[derive(Clone, Debug, Serialize)]
pub struct PopulationPhase {
    /// Corrected latency of successful hits (from the intended start).
    pub hit_latency: Percentiles,
    /// Corrected latency of successful misses.
    pub miss_latency: Percentiles,
    /// Basic `GET`s answered `200`: the hit ratios count these only (as Polygraph).
    pub basic_responses: u64,
    /// Share of them the workload offered as hits.
    pub offered_document_hit_ratio: Option<f64>,
    /// Share of them that were hits (`Cache-Status`).
    pub measured_document_hit_ratio: Option<f64>,
    /// Share of their body bytes offered as hits.
    pub offered_byte_hit_ratio: Option<f64>,
    /// Share of their body bytes that were hits.
    pub measured_byte_hit_ratio: Option<f64>,
    /// Mean body size of those responses, bytes.
    pub mean_response_bytes: f64,
    /// Responses whose body was verified against the object they named.
    pub verified: u64,
    /// Responses without an object field (not checkable).
    pub unverified: u64,
    /// Integrity failures in all.
    pub integrity_failures: u64,
    /// By kind.
    pub integrity: IntegrityCounts,
    /// Requests by kind (basic, ims200, ims304, reload, post, head for PolyMix).
    pub request_kinds: Vec<(String, u64)>,
    /// Most connections open at once.
    pub max_open_connections: u64,
    /// Mean of the per-second open connections.
    pub mean_open_connections: f64,
    /// Most users active at once.
    pub max_active_users: u64,
    /// The phase's length as run, seconds.
    pub seconds: f64,
    /// Per second: offered, completed, hits, errors, integrity failures, open connections,
    /// active users.
    pub intervals: Vec<PopulationInterval>,
}
