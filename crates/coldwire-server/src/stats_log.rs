//! The stats log (`--stats-log FILE --stats-interval 1s`): one JSON line per interval with
//! what happened in it — request rate, responses by class, cache hits and misses, bytes,
//! connections, system calls by kind, waits, and the process's CPU time from the kernel —
//! the raw material of CPU-against-load regressions (`coldwire report --stats-log`).
//!
//! A thread of its own writes it, never a worker: each interval it takes the same
//! [`StatsReport`] the admin endpoint serves (one uncontended lock per worker slot),
//! subtracts the previous one and appends one line with one `write`. A failed write is
//! counted and skipped: a full disk never stops or slows the server. [`StatsLogHandle::reopen`]
//! reopens the file by name, for logrotate (SIGUSR1).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::stats::{RESPONSE_CLASSES, Stats, StatsReport};

/// The version of a stats-log line's format (docs/metrics.md).
pub const STATS_LOG_SCHEMA: u32 = 1;

/// One line of the stats log: what happened during one interval (counters are
/// differences over the interval; gauges are their value at its end).
#[derive(Debug, Serialize)]
pub struct StatsLine {
    /// Format version ([`STATS_LOG_SCHEMA`]).
    pub schema: u32,
    /// Wall-clock end of the interval, seconds since the Unix epoch.
    pub unix_seconds: f64,
    /// Seconds since the server started, at the interval's end.
    pub uptime_seconds: f64,
    /// Length of the interval in seconds (measured, not the one asked for).
    pub interval_seconds: f64,
    /// Requests answered in the interval.
    pub requests: u64,
    /// `requests / interval_seconds`.
    pub requests_per_second: f64,
    /// Responses in the interval by class (`"1xx"` to `"5xx"`).
    pub responses: BTreeMap<&'static str, u64>,
    /// Response-time quantiles of the interval, seconds (absent with no timed response).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_seconds: Option<Quantiles>,
    /// The proxy's cache lookups in the interval (absent for servers without a cache).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheInterval>,
    /// Bytes sent on connections in the interval.
    pub bytes_sent: u64,
    /// Bytes received on connections in the interval.
    pub bytes_received: u64,
    /// Connections: accepted in the interval; open and active at its end.
    pub connections: Connections,
    /// System calls made in the interval, by kind, and `total`.
    pub syscalls: BTreeMap<&'static str, u64>,
    /// Wait system calls in the interval (also in `syscalls.wait`).
    pub waits: u64,
    /// Readiness events the waits returned.
    pub events: u64,
    /// CPU time the whole process used in the interval, from the kernel.
    pub cpu: CpuInterval,
}

/// Response-time quantiles of one interval.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Quantiles {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// Cache lookups of one interval.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct CacheInterval {
    /// Lookups that found a usable response.
    pub hits: u64,
    /// Lookups that found nothing usable.
    pub misses: u64,
}

/// Connections of one interval.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Connections {
    /// Accepted during the interval.
    pub accepted: u64,
    /// Open at the interval's end.
    pub open: u64,
    /// Doing work at the interval's end (open minus active are idle).
    pub active: u64,
}

/// CPU time of one interval.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct CpuInterval {
    /// Seconds in user mode.
    pub user_seconds: f64,
    /// Seconds in the kernel.
    pub system_seconds: f64,
    /// Their sum over the interval's length: 1.0 is one core busy.
    pub cores: f64,
}

/// The line describing what happened between two reports of the same server.
pub fn line_between(earlier: &StatsReport, later: &StatsReport, unix_seconds: f64) -> StatsLine {
    let interval_seconds = (later.uptime_seconds - earlier.uptime_seconds).max(1e-9);
    let (before, after) = (&earlier.total, &later.total);
    let requests = after.http.requests.saturating_sub(before.http.requests);
    let responses = RESPONSE_CLASSES
        .iter()
        .enumerate()
        .map(|(class, name)| {
            let count = after.http.responses_by_class[class]
                .saturating_sub(before.http.responses_by_class[class]);
            (*name, count)
        })
        .collect();
    let times = after.http.response_time.since(&before.http.response_time);
    let response_seconds = times
        .quantile(0.5)
        .zip(times.quantile(0.99))
        .map(|(p50, p99)| Quantiles { p50, p99 });
    let cache = later.cache.map(|cache| {
        let previous = earlier.cache.unwrap_or_default();
        CacheInterval {
            hits: cache.hits.saturating_sub(previous.hits),
            misses: cache.misses.saturating_sub(previous.misses),
        }
    });
    let (loop_before, loop_after) = (&before.loop_counters, &after.loop_counters);
    let difference = |pick: fn(&coldwire_io::LoopCounters) -> u64| {
        pick(loop_after).saturating_sub(pick(loop_before))
    };
    let mut syscalls: BTreeMap<&'static str, u64> = crate::metrics::syscall_kinds(loop_after)
        .into_iter()
        .zip(crate::metrics::syscall_kinds(loop_before))
        .map(|((kind, now), (_, then))| (kind, now.saturating_sub(then)))
        .collect();
    syscalls.insert("total", difference(|counters| counters.syscalls()));
    let user_seconds = (later.process.cpu_user_seconds - earlier.process.cpu_user_seconds).max(0.0);
    let system_seconds =
        (later.process.cpu_system_seconds - earlier.process.cpu_system_seconds).max(0.0);
    StatsLine {
        schema: STATS_LOG_SCHEMA,
        unix_seconds,
        uptime_seconds: later.uptime_seconds,
        interval_seconds,
        requests,
        requests_per_second: requests as f64 / interval_seconds,
        responses,
        response_seconds,
        cache,
        bytes_sent: difference(|counters| counters.bytes_sent),
        bytes_received: difference(|counters| counters.bytes_received),
        connections: Connections {
            accepted: difference(|counters| counters.accepted),
            open: loop_after.open_connections,
            active: loop_after.active_connections,
        },
        syscalls,
        waits: difference(|counters| counters.wait_calls),
        events: difference(|counters| counters.events),
        cpu: CpuInterval {
            user_seconds,
            system_seconds,
            cores: (user_seconds + system_seconds) / interval_seconds,
        },
    }
}

struct Shared {
    path: PathBuf,
    file: Mutex<Arc<File>>,
    failed_writes: AtomicU64,
    stop: AtomicBool,
}

/// A running stats log: reopen it (log rotation), stop it.
#[derive(Clone)]
pub struct StatsLogHandle {
    shared: Arc<Shared>,
}

/// Opens `path` for appending, registered with [`crate::log_files`] so that SIGUSR1
/// reopens it with the other logs.
fn open(path: &Path) -> io::Result<Arc<File>> {
    crate::log_files::open(path)
}

impl StatsLogHandle {
    /// Reopens the file by its name (after logrotate moved it away); the next line goes
    /// to the new file. On error the old file stays in use.
    pub fn reopen(&self) -> io::Result<()> {
        let file = open(&self.shared.path)?;
        *self
            .shared
            .file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = file;
        Ok(())
    }

    /// Lines that could not be written (disk full, say).
    pub fn failed_writes(&self) -> u64 {
        self.shared.failed_writes.load(Ordering::Relaxed)
    }

    /// The file written to.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }
}

/// A started stats-log thread.
pub struct StatsLog {
    handle: StatsLogHandle,
    thread: JoinHandle<()>,
}

impl StatsLog {
    /// Opens `path` (appending) and starts writing one line every `interval`.
    pub fn start(path: &Path, interval: Duration, stats: Arc<Stats>) -> io::Result<StatsLog> {
        let shared = Arc::new(Shared {
            path: path.to_owned(),
            file: Mutex::new(open(path)?),
            failed_writes: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let handle = StatsLogHandle {
            shared: shared.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("coldwire-stats-log".into())
            .spawn(move || write_lines(&shared, interval, &stats))?;
        Ok(StatsLog { handle, thread })
    }

    /// A handle for reopening the file.
    pub fn handle(&self) -> StatsLogHandle {
        self.handle.clone()
    }

    /// Writes a last line for the partial interval, then ends the thread.
    pub fn stop(self) {
        self.handle.shared.stop.store(true, Ordering::SeqCst);
        self.thread.thread().unpark();
        let _ = self.thread.join();
    }
}

fn write_lines(shared: &Shared, interval: Duration, stats: &Stats) {
    let interval = interval.max(Duration::from_millis(10));
    let mut previous = stats.report();
    let mut next = Instant::now() + interval;
    loop {
        let stopping = shared.stop.load(Ordering::SeqCst);
        let now = Instant::now();
        if !stopping && now < next {
            std::thread::park_timeout(next - now);
            continue;
        }
        let report = stats.report();
        let unix_seconds = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64());
        let line = line_between(&previous, &report, unix_seconds);
        let mut text = serde_json::to_vec(&line).unwrap_or_default();
        text.push(b'\n');
        let file = shared
            .file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        let written = (&*file).write_all(&text);
        if written.is_err() {
            shared.failed_writes.fetch_add(1, Ordering::Relaxed);
        }
        previous = report;
        if stopping {
            return;
        }
        // Keep to the grid; after a stall, start again from now rather than catch up.
        next += interval;
        if next < Instant::now() {
            next = Instant::now() + interval;
        }
    }
}

#[cfg(test)]
mod tests;
