//! Server statistics: each worker keeps plain counters (and its own response-time
//! histogram) and publishes a copy into its own mutex-protected slot once per loop turn (an
//! uncontended lock and a memcpy, never per request); readers on other threads — the admin
//! endpoint, the stats log — sum the slots into one [`StatsReport`]. Its JSON (schema 2,
//! documented in docs/stats-json.md) names every field; the Prometheus text form is made
//! from the same report by [`crate::metrics`].

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use coldwire_cache::{Store, StoreCounters};
use coldwire_io::LoopCounters;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::process_cpu::ProcessCpu;
use crate::response_time::ResponseTimes;

/// The version of the stats JSON ([`StatsReport`]); bumped when a field changes meaning
/// or goes away (fields may be added without a bump).
pub const STATS_SCHEMA: u32 = 2;

/// The names of the response classes, in [`RequestCounters::responses_by_class`] order.
pub const RESPONSE_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// What one worker counts above the I/O layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RequestCounters {
    /// Requests whose head was parsed (or rejected) and answered.
    pub requests: u64,
    /// Responses by class: 1xx, 2xx, 3xx, 4xx, 5xx (JSON: an object keyed `"1xx"`...).
    #[serde(rename = "responses", serialize_with = "by_class")]
    pub responses_by_class: [u64; 5],
    /// Body bytes of responses (heads excluded).
    pub body_bytes: u64,
    /// Requests rejected as malformed or over a limit (4xx before any file lookup).
    pub rejected: u64,
    /// Connections closed because a request head did not arrive in time.
    pub header_timeouts: u64,
    /// Connections closed for idling past the keep-alive timeout.
    pub idle_timeouts: u64,
    /// Connections closed because a response made no progress in time.
    pub write_timeouts: u64,
    /// Files opened or re-checked by the file cache.
    pub file_opens: u64,
    /// Response times: from the loop turn in which the request's first bytes arrived to
    /// the one in which its response was complete (queued for the client, or, by the
    /// proxy, relayed).
    pub response_time: ResponseTimes,
    /// Proxy: requests answered `503` (`Proxy-Status: …; error=connection_limit_reached`)
    /// because no upstream connection could be opened — the worker's connection limit or
    /// the process's descriptors ran out.
    pub connection_limit_reached: u64,
    /// Proxy: of `connection_limit_reached`, the requests refused because the process ran
    /// out of descriptors or socket memory (`EMFILE`/`ENFILE`/`ENOBUFS`/`ENOMEM`: raise the
    /// open-files limit); the rest found the worker at `--max-connections`.
    pub connection_limit_descriptors: u64,
    /// Proxy: upstream connections closed after their response, reusable but not kept
    /// because the pool already held `--pool-per-origin` idle ones to that origin. Near
    /// the connection limit each such close gives a slot to a new client that then needs a
    /// new upstream connection (docs/proxy.md, "Connection limits").
    pub upstream_pool_full: u64,
    /// Proxy, `--data-path sockmap`: CONNECT tunnels spliced in the kernel (BPF sockmap).
    pub tunnels_sockmap: u64,
    /// Proxy, `--data-path sockmap`: CONNECT tunnels that took the splice (or copy) path
    /// instead — the kernel or privileges refused the sockmap, `--io uring`, or the
    /// insertion of the pair failed.
    pub sockmap_fallbacks: u64,
}

fn by_class<S: Serializer>(counts: &[u64; 5], serializer: S) -> Result<S::Ok, S::Error> {
    let mut map = serializer.serialize_map(Some(counts.len()))?;
    for (name, count) in RESPONSE_CLASSES.iter().zip(counts) {
        map.serialize_entry(name, count)?;
    }
    map.end()
}

impl RequestCounters {
    /// Counts one response with `status` (its time not measured).
    #[inline]
    pub fn count_response(&mut self, status: u16) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.responses_by_class[class] += 1;
    }

    /// Counts one response with `status` that took `elapsed` since its request started.
    #[inline]
    pub fn count_timed_response(&mut self, status: u16, elapsed: Duration) {
        self.count_response(status);
        self.response_time.record(elapsed);
    }

    fn add(&mut self, other: &RequestCounters) {
        self.requests += other.requests;
        for (total, part) in self
            .responses_by_class
            .iter_mut()
            .zip(other.responses_by_class)
        {
            *total += part;
        }
        self.body_bytes += other.body_bytes;
        self.rejected += other.rejected;
        self.header_timeouts += other.header_timeouts;
        self.idle_timeouts += other.idle_timeouts;
        self.write_timeouts += other.write_timeouts;
        self.file_opens += other.file_opens;
        self.response_time.add(&other.response_time);
        self.connection_limit_reached += other.connection_limit_reached;
        self.connection_limit_descriptors += other.connection_limit_descriptors;
        self.upstream_pool_full += other.upstream_pool_full;
        self.tunnels_sockmap += other.tunnels_sockmap;
        self.sockmap_fallbacks += other.sockmap_fallbacks;
    }
}

/// One worker's published counters.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct WorkerSnapshot {
    /// The event loop's counters (system calls by kind, waits, events, gauges).
    #[serde(rename = "loop")]
    pub loop_counters: LoopCounters,
    /// Request-level counters.
    pub http: RequestCounters,
}

/// The proxy's cache counters under the names an operator looks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CacheReport {
    /// Lookups that found a usable response.
    pub hits: u64,
    /// Lookups that found nothing usable.
    pub misses: u64,
    /// Responses stored (including 304 refreshes).
    pub stored: u64,
    /// Objects evicted to stay within the budget.
    pub evicted: u64,
    /// Bytes held now (a gauge).
    pub bytes: u64,
    /// Objects held now (a gauge).
    pub objects: u64,
    /// Keys marked hit-for-miss now (a gauge).
    pub hit_for_miss_keys: u64,
    /// Misses sent to the origin at once because their key was marked hit-for-miss.
    pub hit_for_miss: u64,
    /// Hits whose body was in memory.
    pub hits_in_memory: u64,
    /// Hits whose body was read from the disk store (`--cache-dir`).
    pub hits_on_disk: u64,
    /// Body bytes of the hits on disk: what they read from the disk (a range or a `304`
    /// sends less).
    pub hit_bytes_on_disk: u64,
    /// The disk store's own counters (`null` without `--cache-dir`; docs/disk-store.md).
    pub disk: Option<coldwire_cache::DiskCounters>,
}

impl From<StoreCounters> for CacheReport {
    fn from(counters: StoreCounters) -> CacheReport {
        CacheReport {
            hits: counters.found,
            misses: counters.missed,
            stored: counters.stored,
            evicted: counters.evicted,
            bytes: counters.bytes,
            objects: counters.objects,
            hit_for_miss_keys: counters.hit_for_miss_keys,
            hit_for_miss: counters.hit_for_miss,
            hits_in_memory: counters.found_in_memory,
            hits_on_disk: counters.found_on_disk,
            hit_bytes_on_disk: counters.found_on_disk_bytes,
            disk: counters.disk,
        }
    }
}

/// Shared statistics of a running server.
pub struct Stats {
    started: Instant,
    backend: &'static str,
    workers: Vec<Mutex<WorkerSnapshot>>,
    store: Option<Arc<Store>>,
}

/// The JSON document served by the admin endpoint (`GET /stats`, docs/stats-json.md).
#[derive(Debug, Serialize)]
pub struct StatsReport {
    /// Schema version of this document ([`STATS_SCHEMA`]).
    pub schema: u32,
    /// Event mechanism in use.
    pub backend: &'static str,
    /// Seconds since start.
    pub uptime_seconds: f64,
    /// Worker count.
    pub workers: usize,
    /// The whole process's CPU time so far, from the kernel (`getrusage`).
    pub process: ProcessCpu,
    /// Sum over workers.
    pub total: WorkerSnapshot,
    /// Per worker, in worker order.
    pub per_worker: Vec<WorkerSnapshot>,
    /// The proxy's cache, when there is one: read when the report is made (not per loop
    /// turn: reading it locks every shard once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheReport>,
}

impl Stats {
    /// Empty statistics for `workers` loops.
    pub fn new(backend: &'static str, workers: usize) -> Stats {
        Stats {
            started: Instant::now(),
            backend,
            workers: (0..workers)
                .map(|_| Mutex::new(WorkerSnapshot::default()))
                .collect(),
            store: None,
        }
    }

    /// Also reports this cache's counters.
    pub fn with_store(mut self, store: Arc<Store>) -> Stats {
        self.store = Some(store);
        self
    }

    /// Publishes worker `index`'s counters.
    pub fn publish(&self, index: usize, snapshot: WorkerSnapshot) {
        if let Some(slot) = self.workers.get(index) {
            *slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = snapshot;
        }
    }

    /// The current report.
    pub fn report(&self) -> StatsReport {
        let per_worker: Vec<WorkerSnapshot> = self
            .workers
            .iter()
            .map(|slot| *slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
            .collect();
        let mut total = WorkerSnapshot::default();
        for worker in &per_worker {
            total.loop_counters.add(&worker.loop_counters);
            total.http.add(&worker.http);
        }
        StatsReport {
            schema: STATS_SCHEMA,
            backend: self.backend,
            uptime_seconds: self.started.elapsed().as_secs_f64(),
            workers: per_worker.len(),
            process: ProcessCpu::now(),
            total,
            per_worker,
            cache: self
                .store
                .as_ref()
                .map(|store| CacheReport::from(store.counters())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_names_classes_and_cache_fields() {
        let stats = Stats::new("epoll", 2);
        let mut snapshot = WorkerSnapshot::default();
        snapshot.http.requests = 3;
        snapshot
            .http
            .count_timed_response(200, Duration::from_millis(1));
        snapshot.http.count_response(404);
        snapshot.http.count_response(204);
        stats.publish(0, snapshot);
        stats.publish(1, snapshot);
        let json = serde_json::to_value(stats.report()).unwrap();
        assert_eq!(json["schema"], 2);
        assert_eq!(json["total"]["http"]["requests"], 6);
        assert_eq!(json["total"]["http"]["responses"]["2xx"], 4);
        assert_eq!(json["total"]["http"]["responses"]["4xx"], 2);
        assert_eq!(json["total"]["http"]["responses"]["5xx"], 0);
        assert_eq!(json["total"]["http"]["response_time"]["count"], 2);
        assert_eq!(json["per_worker"][1]["http"]["responses"]["2xx"], 2);
        assert!(json["process"]["cpu_user_seconds"].as_f64().is_some());
        assert!(json.get("cache").is_none());
        let cache = serde_json::to_value(CacheReport::from(StoreCounters {
            found: 7,
            missed: 3,
            ..StoreCounters::default()
        }))
        .unwrap();
        assert_eq!(cache["hits"], 7);
        assert_eq!(cache["misses"], 3);
    }
}
