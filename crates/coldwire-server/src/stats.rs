//! Server statistics: each worker keeps plain counters and publishes a copy into its own
//! mutex-protected slot once per loop turn (an uncontended lock and a memcpy); the admin
//! endpoint sums the slots into one JSON document. The load generator reads it to compute
//! syscalls, waits and events per request.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use coldwire_cache::{Store, StoreCounters};
use coldwire_io::LoopCounters;
use serde::Serialize;

/// What one worker counts above the I/O layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RequestCounters {
    /// Requests whose head was parsed (or rejected) and answered.
    pub requests: u64,
    /// Responses by class: 1xx, 2xx, 3xx, 4xx, 5xx.
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
    /// Proxy: requests answered `503` (`Proxy-Status: …; error=connection_limit_reached`)
    /// because no upstream connection could be opened — the worker's connection limit or
    /// the process's descriptors ran out.
    pub connection_limit_reached: u64,
}

impl RequestCounters {
    /// Counts one response with `status`.
    pub fn count_response(&mut self, status: u16) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.responses_by_class[class] += 1;
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
        self.connection_limit_reached += other.connection_limit_reached;
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

/// Shared statistics of a running server.
pub struct Stats {
    started: Instant,
    backend: &'static str,
    workers: Vec<Mutex<WorkerSnapshot>>,
    store: Option<Arc<Store>>,
}

/// The JSON document served by the admin endpoint.
#[derive(Debug, Serialize)]
pub struct StatsReport {
    /// Schema version of this document.
    pub schema: u32,
    /// Event mechanism in use.
    pub backend: &'static str,
    /// Seconds since start.
    pub uptime_seconds: f64,
    /// Worker count.
    pub workers: usize,
    /// Sum over workers.
    pub total: WorkerSnapshot,
    /// Per worker, in worker order.
    pub per_worker: Vec<WorkerSnapshot>,
    /// The proxy's cache, when there is one: read when the report is made (not per loop
    /// turn: reading it locks every shard once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<StoreCounters>,
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
            schema: 1,
            backend: self.backend,
            uptime_seconds: self.started.elapsed().as_secs_f64(),
            workers: per_worker.len(),
            total,
            per_worker,
            cache: self.store.as_ref().map(|store| store.counters()),
        }
    }
}
