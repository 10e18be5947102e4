//! What `coldwire top` shows, computed from two `/stats` documents (schema 2,
//! docs/stats-json.md) taken an interval apart: rates and ratios over that interval,
//! gauges as of the later one.

use serde::Deserialize;

/// The fields of a stats document that `top` reads.
#[derive(Clone, Debug, Deserialize)]
pub struct StatsDocument {
    /// Event mechanism.
    pub backend: String,
    /// Seconds since the server started.
    pub uptime_seconds: f64,
    /// Process CPU so far.
    pub process: ProcessCpu,
    /// Sum over workers.
    pub total: Snapshot,
    /// Per worker.
    pub per_worker: Vec<Snapshot>,
    /// The proxy's cache, if any.
    #[serde(default)]
    pub cache: Option<Cache>,
}

/// Process CPU seconds.
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct ProcessCpu {
    /// User mode.
    pub cpu_user_seconds: f64,
    /// Kernel.
    pub cpu_system_seconds: f64,
}

/// One worker's (or the total's) counters.
#[derive(Clone, Debug, Deserialize)]
pub struct Snapshot {
    /// Event-loop counters.
    #[serde(rename = "loop")]
    pub loop_counters: Loop,
    /// Request counters.
    pub http: Http,
}

/// The loop counters `top` needs.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
#[serde(default)]
#[allow(missing_docs)]
pub struct Loop {
    pub accept_calls: u64,
    pub connect_calls: u64,
    pub recv_calls: u64,
    pub send_calls: u64,
    pub sendfile_calls: u64,
    pub file_probe_calls: u64,
    pub close_calls: u64,
    pub shutdown_calls: u64,
    pub control_calls: u64,
    pub wait_calls: u64,
    pub uring_enter_calls: u64,
    pub open_connections: u64,
    pub active_connections: u64,
}

impl Loop {
    /// Every system call (an io_uring enter that waited counted once).
    pub fn syscalls(&self) -> u64 {
        self.accept_calls
            + self.connect_calls
            + self.recv_calls
            + self.send_calls
            + self.sendfile_calls
            + self.file_probe_calls
            + self.close_calls
            + self.shutdown_calls
            + self.control_calls
            + self.wait_calls.max(self.uring_enter_calls)
    }
}

/// Request counters `top` needs.
#[derive(Clone, Debug, Deserialize)]
pub struct Http {
    /// Requests answered.
    pub requests: u64,
    /// The response-time histogram.
    pub response_time: Histogram,
}

/// A cumulative histogram.
#[derive(Clone, Debug, Deserialize)]
pub struct Histogram {
    /// Responses timed.
    pub count: u64,
    /// Cumulative buckets.
    pub buckets: Vec<Bucket>,
}

/// One cumulative bucket.
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct Bucket {
    /// Upper bound, seconds.
    pub le_seconds: f64,
    /// Responses at most that long.
    pub count: u64,
}

/// The cache's lookups.
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct Cache {
    /// Found usable.
    pub hits: u64,
    /// Found nothing usable.
    pub misses: u64,
}

/// One worker's line.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerLine {
    /// Requests per second.
    pub rate: f64,
    /// Open connections now.
    pub open: u64,
    /// Active connections now.
    pub active: u64,
    /// System calls per request over the interval (`None` without requests).
    pub syscalls_per_request: Option<f64>,
    /// Waits per request.
    pub waits_per_request: Option<f64>,
}

/// One screen of `top`.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    /// Which server (`ADDR`).
    pub server: String,
    /// Event mechanism.
    pub backend: String,
    /// Seconds since it started.
    pub uptime_seconds: f64,
    /// Requests per second.
    pub rate: f64,
    /// Median response time, seconds.
    pub p50: Option<f64>,
    /// 99th percentile, seconds.
    pub p99: Option<f64>,
    /// Cache hits over lookups (`None` without a cache or without lookups).
    pub hit_ratio: Option<f64>,
    /// Whether the server has a cache.
    pub has_cache: bool,
    /// Open connections.
    pub open: u64,
    /// Active connections.
    pub active: u64,
    /// CPU cores used (user + system seconds per second).
    pub cpu_cores: f64,
    /// System calls per request.
    pub syscalls_per_request: Option<f64>,
    /// Per worker.
    pub workers: Vec<WorkerLine>,
}

/// A quantile of the responses recorded between two cumulative histograms, interpolated
/// inside its bucket (Prometheus's `histogram_quantile`).
pub fn quantile(now: &Histogram, then: &Histogram, quantile: f64) -> Option<f64> {
    let total = now.count.saturating_sub(then.count);
    if total == 0 || now.buckets.len() != then.buckets.len() {
        return None;
    }
    let rank = quantile * total as f64;
    let (mut below, mut lower) = (0u64, 0.0);
    for (bucket, earlier) in now.buckets.iter().zip(&then.buckets) {
        let cumulative = bucket.count.saturating_sub(earlier.count);
        let inside = cumulative.saturating_sub(below);
        if inside > 0 && cumulative as f64 >= rank {
            return Some(
                lower + (bucket.le_seconds - lower) * (rank - below as f64) / inside as f64,
            );
        }
        below = cumulative;
        lower = bucket.le_seconds;
    }
    Some(lower)
}

fn per_request(count: u64, requests: u64) -> Option<f64> {
    (requests > 0).then(|| count as f64 / requests as f64)
}

impl View {
    /// The view of what happened between `then` and `now`.
    pub fn between(server: &str, then: &StatsDocument, now: &StatsDocument) -> View {
        let seconds = (now.uptime_seconds - then.uptime_seconds).max(1e-6);
        let requests = now
            .total
            .http
            .requests
            .saturating_sub(then.total.http.requests);
        let (loop_now, loop_then) = (&now.total.loop_counters, &then.total.loop_counters);
        let cpu = now.process.cpu_user_seconds + now.process.cpu_system_seconds
            - then.process.cpu_user_seconds
            - then.process.cpu_system_seconds;
        let hit_ratio = match (now.cache, then.cache) {
            (Some(now), Some(then)) => {
                let hits = now.hits.saturating_sub(then.hits);
                let lookups = hits + now.misses.saturating_sub(then.misses);
                (lookups > 0).then(|| hits as f64 / lookups as f64)
            }
            _ => None,
        };
        let workers = now
            .per_worker
            .iter()
            .zip(&then.per_worker)
            .map(|(now, then)| {
                let done = now.http.requests.saturating_sub(then.http.requests);
                let (current, earlier) = (&now.loop_counters, &then.loop_counters);
                WorkerLine {
                    rate: done as f64 / seconds,
                    open: current.open_connections,
                    active: current.active_connections,
                    syscalls_per_request: per_request(
                        current.syscalls().saturating_sub(earlier.syscalls()),
                        done,
                    ),
                    waits_per_request: per_request(
                        current.wait_calls.saturating_sub(earlier.wait_calls),
                        done,
                    ),
                }
            })
            .collect();
        View {
            server: server.to_owned(),
            backend: now.backend.clone(),
            uptime_seconds: now.uptime_seconds,
            rate: requests as f64 / seconds,
            p50: quantile(
                &now.total.http.response_time,
                &then.total.http.response_time,
                0.5,
            ),
            p99: quantile(
                &now.total.http.response_time,
                &then.total.http.response_time,
                0.99,
            ),
            hit_ratio,
            has_cache: now.cache.is_some(),
            open: loop_now.open_connections,
            active: loop_now.active_connections,
            cpu_cores: (cpu / seconds).max(0.0),
            syscalls_per_request: per_request(
                loop_now.syscalls().saturating_sub(loop_then.syscalls()),
                requests,
            ),
            workers,
        }
    }
}
