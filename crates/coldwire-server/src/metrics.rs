//! The Prometheus text exposition format (version 0.0.4) of a [`StatsReport`], served at
//! `GET /metrics` on the admin listener. Names follow Prometheus's conventions: a
//! `coldwire_` prefix, base units in the name (`_seconds`, `_bytes`), `_total` on
//! counters; per-worker series carry a `worker` label (sum them in queries), and response
//! classes, system-call kinds and cache statuses are labels too. The list is in
//! docs/metrics.md.

use std::fmt::Write;

use coldwire_io::LoopCounters;

use crate::stats::{CacheReport, RESPONSE_CLASSES, StatsReport, WorkerSnapshot};

/// The `Content-Type` of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A metric family being written: its `# HELP` and `# TYPE` lines, then its samples.
struct Family<'a> {
    out: &'a mut String,
    name: &'static str,
}

impl<'a> Family<'a> {
    fn new(out: &'a mut String, name: &'static str, kind: &str, help: &str) -> Family<'a> {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        Family { out, name }
    }

    /// One sample `name{labels} value` (`suffix` for a histogram's `_bucket`, `_sum`...).
    fn sample(&mut self, suffix: &str, labels: &[(&str, &str)], value: impl Into<Value>) {
        self.out.push_str(self.name);
        self.out.push_str(suffix);
        if !labels.is_empty() {
            self.out.push('{');
            for (index, (label, text)) in labels.iter().enumerate() {
                if index > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{label}=\"{}\"", escape(text));
            }
            self.out.push('}');
        }
        let _ = match value.into() {
            Value::Integer(value) => writeln!(self.out, " {value}"),
            Value::Float(value) => writeln!(self.out, " {value}"),
        };
    }
}

enum Value {
    Integer(u64),
    Float(f64),
}

impl From<u64> for Value {
    fn from(value: u64) -> Value {
        Value::Integer(value)
    }
}

impl From<f64> for Value {
    fn from(value: f64) -> Value {
        Value::Float(value)
    }
}

/// Label values escape backslash, double quote and line feed.
fn escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// System calls by kind: the label value and the counter (the metrics' `kind` label and
/// the stats log's `syscalls` keys).
pub fn syscall_kinds(counters: &LoopCounters) -> [(&'static str, u64); 11] {
    [
        ("accept", counters.accept_calls),
        ("connect", counters.connect_calls),
        ("recv", counters.recv_calls),
        ("send", counters.send_calls),
        ("sendfile", counters.sendfile_calls),
        ("file_probe", counters.file_probe_calls),
        ("close", counters.close_calls),
        ("shutdown", counters.shutdown_calls),
        ("epoll_ctl", counters.control_calls),
        ("wait", counters.wait_calls),
        ("io_uring_enter", counters.uring_enter_calls),
    ]
}

type Pick = fn(&WorkerSnapshot) -> u64;

/// The per-worker counters and gauges with one sample per worker.
const PER_WORKER: &[(&str, &str, &str, Pick)] = &[
    (
        "coldwire_requests_total",
        "counter",
        "Requests whose head was parsed (or rejected) and answered.",
        |worker| worker.http.requests,
    ),
    (
        "coldwire_rejected_requests_total",
        "counter",
        "Requests rejected as malformed or over a limit.",
        |worker| worker.http.rejected,
    ),
    (
        "coldwire_response_body_bytes_total",
        "counter",
        "Body bytes of responses, heads excluded.",
        |worker| worker.http.body_bytes,
    ),
    (
        "coldwire_file_opens_total",
        "counter",
        "Files opened or re-checked by the origin server's file cache.",
        |worker| worker.http.file_opens,
    ),
    (
        "coldwire_connection_limit_reached_total",
        "counter",
        "Proxy requests answered 503 because no upstream connection could be opened (connection limit or descriptors).",
        |worker| worker.http.connection_limit_reached,
    ),
    (
        "coldwire_connection_limit_descriptors_total",
        "counter",
        "Of the connection_limit_reached 503s, those for want of descriptors or socket memory (raise the open-files limit); the rest found the worker at --max-connections.",
        |worker| worker.http.connection_limit_descriptors,
    ),
    (
        "coldwire_upstream_pool_full_total",
        "counter",
        "Proxy upstream connections closed after their response because the pool already held --pool-per-origin idle ones to that origin.",
        |worker| worker.http.upstream_pool_full,
    ),
    (
        "coldwire_tunnels_sockmap_total",
        "counter",
        "Proxy CONNECT tunnels spliced in the kernel by the BPF sockmap (--data-path sockmap).",
        |worker| worker.http.tunnels_sockmap,
    ),
    (
        "coldwire_sockmap_fallbacks_total",
        "counter",
        "Proxy CONNECT tunnels that fell back to splice or copy under --data-path sockmap (sockmap refused, --io uring, or the insertion failed).",
        |worker| worker.http.sockmap_fallbacks,
    ),
    (
        "coldwire_bytes_sent_total",
        "counter",
        "Bytes sent on connections (clients and origins).",
        |worker| worker.loop_counters.bytes_sent,
    ),
    (
        "coldwire_bytes_received_total",
        "counter",
        "Bytes received on connections (clients and origins).",
        |worker| worker.loop_counters.bytes_received,
    ),
    (
        "coldwire_connections_accepted_total",
        "counter",
        "Connections accepted.",
        |worker| worker.loop_counters.accepted,
    ),
    (
        "coldwire_accept_pauses_total",
        "counter",
        "Times accepting paused for lack of descriptors or the connection limit.",
        |worker| worker.loop_counters.accept_pauses,
    ),
    (
        "coldwire_accept_holds_total",
        "counter",
        "Times the proxy stopped accepting short of the connection limit to keep slots for the upstream connections of clients just accepted.",
        |worker| worker.loop_counters.accept_holds,
    ),
    (
        "coldwire_accept_multishot_stops_total",
        "counter",
        "io_uring: times the multishot accept was stopped near the connection limit (single-shot accepts, as many as fit, take over).",
        |worker| worker.loop_counters.accept_multishot_stops,
    ),
    (
        "coldwire_would_block_total",
        "counter",
        "System calls that returned EAGAIN (would block), any kind.",
        |worker| worker.loop_counters.would_block,
    ),
    (
        "coldwire_wait_events_total",
        "counter",
        "Readiness events returned by the loop's waits.",
        |worker| worker.loop_counters.events,
    ),
    (
        "coldwire_empty_wakeups_total",
        "counter",
        "Waits that returned no event before their timeout.",
        |worker| worker.loop_counters.empty_wakeups,
    ),
    (
        "coldwire_uring_submissions_total",
        "counter",
        "io_uring submission queue entries queued (operations, not system calls).",
        |worker| worker.loop_counters.uring_submissions,
    ),
    (
        "coldwire_uring_completions_total",
        "counter",
        "io_uring completion queue entries reaped.",
        |worker| worker.loop_counters.uring_completions,
    ),
    (
        "coldwire_connections_open",
        "gauge",
        "Connections open now (clients and origins).",
        |worker| worker.loop_counters.open_connections,
    ),
    (
        "coldwire_connections_active",
        "gauge",
        "Connections with a request being read or answered now; open minus active are idle.",
        |worker| worker.loop_counters.active_connections,
    ),
    (
        "coldwire_buffers_in_use",
        "gauge",
        "Receive buffers taken from the pool now.",
        |worker| worker.loop_counters.buffers_in_use,
    ),
];

/// Renders `report` in the Prometheus text format.
pub fn render(report: &StatsReport) -> String {
    let mut out = String::with_capacity(8192 + report.per_worker.len() * 6144);
    let workers: Vec<String> = (0..report.per_worker.len())
        .map(|index| index.to_string())
        .collect();
    let each = || report.per_worker.iter().zip(&workers);

    Family::new(
        &mut out,
        "coldwire_info",
        "gauge",
        "Always 1; the labels say which I/O backend runs and the stats schema.",
    )
    .sample(
        "",
        &[
            ("backend", report.backend),
            ("schema", &report.schema.to_string()),
        ],
        1u64,
    );
    Family::new(
        &mut out,
        "coldwire_uptime_seconds",
        "gauge",
        "Seconds since the server started.",
    )
    .sample("", &[], report.uptime_seconds);
    Family::new(
        &mut out,
        "coldwire_workers",
        "gauge",
        "Worker threads (event loops).",
    )
    .sample("", &[], report.workers as u64);
    let mut cpu = Family::new(
        &mut out,
        "coldwire_cpu_seconds_total",
        "counter",
        "CPU time of the whole process by mode, from getrusage.",
    );
    cpu.sample("", &[("mode", "user")], report.process.cpu_user_seconds);
    cpu.sample("", &[("mode", "system")], report.process.cpu_system_seconds);

    for &(name, kind, help, pick) in PER_WORKER {
        let mut family = Family::new(&mut out, name, kind, help);
        for (worker, label) in each() {
            family.sample("", &[("worker", label)], pick(worker));
        }
    }

    let mut responses = Family::new(
        &mut out,
        "coldwire_responses_total",
        "counter",
        "Responses by status class.",
    );
    for (worker, label) in each() {
        for (class, count) in RESPONSE_CLASSES.iter().zip(worker.http.responses_by_class) {
            responses.sample("", &[("worker", label), ("class", class)], count);
        }
    }

    let mut timeouts = Family::new(
        &mut out,
        "coldwire_timeouts_total",
        "counter",
        "Connections closed by a timeout, by phase (header, idle, write).",
    );
    for (worker, label) in each() {
        let http = &worker.http;
        for (phase, count) in [
            ("header", http.header_timeouts),
            ("idle", http.idle_timeouts),
            ("write", http.write_timeouts),
        ] {
            timeouts.sample("", &[("worker", label), ("phase", phase)], count);
        }
    }

    let mut calls = Family::new(
        &mut out,
        "coldwire_syscalls_total",
        "counter",
        "System calls made by each event loop, by kind (wait: epoll_wait/poll/select or a \
         waiting io_uring_enter).",
    );
    for (worker, label) in each() {
        for (kind, count) in syscall_kinds(&worker.loop_counters) {
            calls.sample(
                "",
                &[
                    ("worker", label),
                    ("backend", report.backend),
                    ("kind", kind),
                ],
                count,
            );
        }
    }

    let mut histogram = Family::new(
        &mut out,
        "coldwire_response_seconds",
        "histogram",
        "Response times, from the loop turn in which the request's first bytes arrived to \
         the one in which its response was complete.",
    );
    for (worker, label) in each() {
        let times = &worker.http.response_time;
        for (bound, count) in times.cumulative() {
            histogram.sample(
                "_bucket",
                &[("worker", label), ("le", &bound.to_string())],
                count,
            );
        }
        histogram.sample(
            "_bucket",
            &[("worker", label), ("le", "+Inf")],
            times.count(),
        );
        histogram.sample("_sum", &[("worker", label)], times.sum_seconds());
        histogram.sample("_count", &[("worker", label)], times.count());
    }

    if let Some(cache) = &report.cache {
        let mut lookups = Family::new(
            &mut out,
            "coldwire_cache_requests_total",
            "counter",
            "Cache lookups by result (hit: a usable response was found).",
        );
        lookups.sample("", &[("status", "hit")], cache.hits);
        lookups.sample("", &[("status", "miss")], cache.misses);
        let single: [(&'static str, &str, &str, u64); 6] = [
            (
                "coldwire_cache_stored_total",
                "counter",
                "Responses stored (304 refreshes included).",
                cache.stored,
            ),
            (
                "coldwire_cache_evicted_total",
                "counter",
                "Objects evicted to stay within the budget.",
                cache.evicted,
            ),
            (
                "coldwire_cache_hit_for_miss_total",
                "counter",
                "Misses sent on at once because their key was marked hit-for-miss.",
                cache.hit_for_miss,
            ),
            (
                "coldwire_cache_bytes",
                "gauge",
                "Bytes the cache holds now.",
                cache.bytes,
            ),
            (
                "coldwire_cache_objects",
                "gauge",
                "Objects the cache holds now.",
                cache.objects,
            ),
            (
                "coldwire_cache_hit_for_miss_keys",
                "gauge",
                "Keys marked hit-for-miss now.",
                cache.hit_for_miss_keys,
            ),
        ];
        for (name, kind, help, value) in single {
            Family::new(&mut out, name, kind, help).sample("", &[], value);
        }
        let mut tiers = Family::new(
            &mut out,
            "coldwire_cache_hits_total",
            "counter",
            "Cache hits by the tier their body came from (disk: the --cache-dir store).",
        );
        tiers.sample("", &[("tier", "memory")], cache.hits_in_memory);
        tiers.sample("", &[("tier", "disk")], cache.hits_on_disk);
        if let Some(disk) = &cache.disk {
            disk_metrics(&mut out, cache, disk);
        }
    }
    out
}

/// The disk store's series (`--cache-dir`; docs/disk-store.md).
fn disk_metrics(out: &mut String, cache: &CacheReport, disk: &coldwire_cache::DiskCounters) {
    let mut read = Family::new(
        out,
        "coldwire_cache_disk_read_bytes_total",
        "counter",
        "Bytes read from the disk store: by the start-up scan (recovery), and the bodies of \
         hits on disk (hits, sent with sendfile or splice).",
    );
    read.sample("", &[("by", "recovery")], disk.bytes_read);
    read.sample("", &[("by", "hits")], cache.hit_bytes_on_disk);
    let mut errors = Family::new(
        out,
        "coldwire_cache_disk_io_errors_total",
        "counter",
        "Disk store I/O errors (writes, syncs, segment creation and deletion) by kind: \
         no_space (ENOSPC), io (EIO), other.",
    );
    for (kind, count) in disk.io_errors_by_kind.labelled() {
        errors.sample("", &[("kind", kind)], count);
    }
    let single: [(&'static str, &str, &str, u64); 15] = [
        (
            "coldwire_cache_disk_written_bytes_total",
            "counter",
            "Bytes written to the disk store's segments (records, kills, padding).",
            disk.bytes_written,
        ),
        (
            "coldwire_cache_disk_objects_written_total",
            "counter",
            "Object records written to the disk store.",
            disk.objects_written,
        ),
        (
            "coldwire_cache_disk_heads_written_total",
            "counter",
            "Head records written (a 304 or a HEAD response freshened an object on disk).",
            disk.heads_written,
        ),
        (
            "coldwire_cache_disk_dropped_total",
            "counter",
            "Disk copies dropped: the queue was full or the disk failing.",
            disk.dropped,
        ),
        (
            "coldwire_cache_disk_queue_depth",
            "gauge",
            "Writes waiting for the disk store's I/O thread now.",
            disk.queue_depth,
        ),
        (
            "coldwire_cache_disk_queue_bytes",
            "gauge",
            "Bytes of bodies waiting for the disk store's I/O thread now.",
            disk.queue_bytes,
        ),
        (
            "coldwire_cache_disk_segments",
            "gauge",
            "Segment files in the disk store now.",
            disk.segments,
        ),
        (
            "coldwire_cache_disk_segments_evicted_total",
            "counter",
            "Segment files deleted to make room.",
            disk.segments_evicted,
        ),
        (
            "coldwire_cache_disk_evacuated_objects_total",
            "counter",
            "Disk-only objects hit since written, re-appended rather than lost with their \
             segment (the second chance).",
            disk.evacuated,
        ),
        (
            "coldwire_cache_disk_evacuated_bytes_total",
            "counter",
            "Record bytes of the re-appended objects.",
            disk.evacuated_bytes,
        ),
        (
            "coldwire_cache_disk_recovered_objects",
            "gauge",
            "Objects the disk store found intact at start-up.",
            disk.recovered,
        ),
        (
            "coldwire_cache_disk_ring_writes_submitted_total",
            "counter",
            "Segment writes (records, kills) submitted on the workers' io_uring rings \
             (--io uring without --disk-thread-writes; a short write's rest counts again).",
            disk.ring_writes_submitted,
        ),
        (
            "coldwire_cache_disk_ring_writes_completed_total",
            "counter",
            "Segment writes completed on the workers' io_uring rings.",
            disk.ring_writes_completed,
        ),
        (
            "coldwire_cache_disk_ring_syncs_submitted_total",
            "counter",
            "Data syncs of segment files submitted on the workers' io_uring rings.",
            disk.ring_syncs_submitted,
        ),
        (
            "coldwire_cache_disk_ring_syncs_completed_total",
            "counter",
            "Data syncs completed on the workers' io_uring rings.",
            disk.ring_syncs_completed,
        ),
    ];
    for (name, kind, help, value) in single {
        Family::new(out, name, kind, help).sample("", &[], value);
    }
    Family::new(
        out,
        "coldwire_cache_disk_recovery_seconds",
        "gauge",
        "How long the disk store's start-up scan took.",
    )
    .sample("", &[], disk.recovery_ms as f64 / 1000.0);
}

#[cfg(test)]
mod tests;
