//! The result model, serialized as the versioned JSON document described in
//! `docs/bench-json.md`. Bump [`SCHEMA_VERSION`] on any change that removes or renames a
//! field or changes its meaning; adding fields keeps the version.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::config::{LoadConfig, Rate};
use crate::engine::{ColdTotals, PhaseMeasurement};
use crate::recorder::ErrorCounts;
use crate::saturate::SaturationReport;
use crate::server_stats::ServerCountersDelta;

/// Version of the JSON schema (`schema_version` in the document).
pub const SCHEMA_VERSION: u32 = 1;

/// Percentiles of a latency histogram, in microseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Values recorded.
    pub count: u64,
    /// Smallest.
    pub min_us: f64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p99_9_us: f64,
    /// Largest.
    pub max_us: f64,
}

impl Percentiles {
    /// From a histogram of nanoseconds.
    pub fn of(histogram: &Histogram<u64>) -> Percentiles {
        if histogram.is_empty() {
            return Percentiles::default();
        }
        let micros = |nanoseconds: u64| nanoseconds as f64 / 1000.0;
        Percentiles {
            count: histogram.len(),
            min_us: micros(histogram.min()),
            mean_us: histogram.mean() / 1000.0,
            p50_us: micros(histogram.value_at_quantile(0.50)),
            p90_us: micros(histogram.value_at_quantile(0.90)),
            p99_us: micros(histogram.value_at_quantile(0.99)),
            p99_9_us: micros(histogram.value_at_quantile(0.999)),
            max_us: micros(histogram.max()),
        }
    }
}

/// One point of a latency distribution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct DistributionPoint {
    /// Percentile, 0–100.
    pub percentile: f64,
    /// Latency at that percentile, µs.
    pub value_us: f64,
}

/// The distribution of a histogram at percentiles 0, 50, 75, 87.5, … 100 (halving the
/// distance to 100 each time, as HdrHistogram's percentile output), for plotting.
pub fn distribution(histogram: &Histogram<u64>) -> Vec<DistributionPoint> {
    if histogram.is_empty() {
        return Vec::new();
    }
    histogram
        .iter_quantiles(1)
        .map(|point| DistributionPoint {
            percentile: point.quantile_iterated_to() * 100.0,
            value_us: point.value_iterated_to() as f64 / 1000.0,
        })
        .collect()
}

/// Latency of successful responses of the window's requests.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    /// From the intended start (includes waiting for a connection): what a user waits.
    pub corrected: Percentiles,
    /// From the actual send: what the server took once the request reached it.
    pub raw: Percentiles,
    /// The corrected distribution, for plots.
    pub corrected_distribution: Vec<DistributionPoint>,
    /// The raw distribution, for plots.
    pub raw_distribution: Vec<DistributionPoint>,
}

/// The server's cost over a window, from `/proc`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ServerCost {
    /// Requests the cost is divided by (the server's own count when its stats endpoint is
    /// read, else the generator's completed responses).
    pub requests: u64,
    /// On-CPU seconds of all the server's threads (schedstat, precise).
    pub cpu_seconds: f64,
    /// Server CPU per request, microseconds.
    pub cpu_us_per_request: f64,
    /// Cores the server kept busy on average.
    pub cpu_cores: f64,
    /// User-mode seconds (tick-sampled, 10 ms resolution: only meaningful over long windows).
    pub user_seconds: f64,
    /// Kernel-mode seconds (tick-sampled).
    pub system_seconds: f64,
    /// Seconds its threads were runnable but waiting for a CPU (taken by other work).
    pub runqueue_wait_seconds: f64,
    /// Threads at the window's end.
    pub threads: u64,
    /// Resident memory at the window's start and end, bytes.
    pub rss_bytes: (u64, u64),
    /// Open descriptors at the window's start and end.
    pub open_descriptors: (u64, u64),
    /// TCP segments received in the server's network namespace over the window
    /// (`/proc/PID/net/snmp` `InSegs`): the server's own only when it is alone in its
    /// namespace.
    pub tcp_segments_in: Option<u64>,
    /// TCP segments sent in the server's network namespace (`OutSegs`).
    pub tcp_segments_out: Option<u64>,
    /// Server CPU per TCP segment in or out, microseconds.
    pub cpu_us_per_segment: Option<f64>,
}

/// The machine's CPU over a window, from `/proc/stat`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MachineCost {
    /// Busy CPU seconds, all cores (user + nice + system + irq + softirq + steal).
    pub busy_seconds: f64,
    /// Busy CPU per request, microseconds (server + generator + kernel work + others).
    pub busy_us_per_request: f64,
    /// Soft-interrupt seconds (network processing outside any thread's own account).
    pub softirq_seconds: f64,
    /// Busy minus the server's and the generator's threads, per request, microseconds: work
    /// done on the server's behalf elsewhere (softirq, kernel threads) plus unrelated load.
    pub other_us_per_request: f64,
    /// Cores kept busy on average.
    pub busy_cores: f64,
}

/// The generator's own CPU over a window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GeneratorCost {
    /// On-CPU seconds of the generator process.
    pub cpu_seconds: f64,
    /// Per response completed in the window, microseconds.
    pub cpu_us_per_response: f64,
    /// Seconds it was runnable but waiting for a CPU: other work on its core (missed
    /// slots usually come from here).
    pub runqueue_wait_seconds: f64,
}

/// One phase's results.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseReport {
    /// Name.
    pub label: String,
    /// Offered rate (requests/s); `null` for closed loop (`--rate max`).
    pub offered_rate: Option<f64>,
    /// Warm-up seconds.
    pub warmup_seconds: f64,
    /// Planned measured seconds.
    pub duration_seconds: f64,
    /// Measured seconds as run.
    pub window_seconds: f64,
    /// Slots in the window (open loop) or requests sent (closed loop).
    pub offered_requests: u64,
    /// Slots skipped because the generator was late.
    pub missed_slots: u64,
    /// Window requests written to a connection.
    pub sent_requests: u64,
    /// Window requests with a response below 400.
    pub succeeded_requests: u64,
    /// Responses completed inside the window (any status, any slot).
    pub completed_in_window: u64,
    /// Successful responses completed inside the window per second.
    pub achieved_rate: f64,
    /// Errors of window requests by kind.
    pub errors: ErrorCounts,
    /// Errors of window requests by cause: `connect: ECONNREFUSED (111)`, `status 503`,
    /// `timeout`, `tls: …` — the kind with its errno, status code or message.
    pub error_causes: BTreeMap<String, u64>,
    /// Their sum.
    pub errors_total: u64,
    /// Responses by status class, `[1xx, 2xx, 3xx, 4xx, 5xx]`.
    pub status_classes: [u64; 5],
    /// Bytes of the responses completed in the window.
    pub bytes: u64,
    /// Those bytes per second.
    pub bytes_per_second: f64,
    /// Latencies.
    pub latency: Latency,
    /// The generator's own lateness handling the slots it sent (its timing error).
    pub schedule_lateness: Percentiles,
    /// Hot connections the generator opened in the window.
    pub connections_opened: u64,
    /// Cold connections held at the window's start and end.
    pub cold_held: (u64, u64),
    /// Cold connections the server closed during the phase.
    pub cold_closed_by_server: u64,
    /// Per second of the window: completed, succeeded, errors, missed.
    pub intervals: Vec<crate::recorder::Interval>,
    /// Requests abandoned when the phase's drain bound passed (counted as timeouts) or
    /// cut by an interrupt (SIGINT/SIGTERM; not counted as errors).
    pub abandoned: u64,
    /// The run was interrupted during this phase.
    pub interrupted: bool,
    /// The window's request budget (`-n`), when the run had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests_planned: Option<u64>,
    /// What ended the window: its duration, its request budget, or an interrupt.
    pub ended_by: crate::config::PhaseEnd,
    /// Server cost from `/proc` (with `--server-pid` or `--spawn`).
    pub server: Option<ServerCost>,
    /// Machine CPU from `/proc/stat`.
    pub machine: Option<MachineCost>,
    /// The generator's CPU.
    pub generator: Option<GeneratorCost>,
    /// The server's own counters (with `--server-stats`).
    pub server_counters: Option<ServerCountersDelta>,
    /// A population run's own figures (robots, replayed clients): hit and miss latency,
    /// offered and measured hit ratios, integrity, connections over time. Absent for the
    /// other modes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub population: Option<crate::population::PopulationPhase>,
}

impl PhaseReport {
    /// Builds the report of a measured phase (cost sections filled in by the caller).
    pub fn from_measurement(measurement: &PhaseMeasurement) -> PhaseReport {
        let recorder = &measurement.recorder;
        let seconds = measurement.window.as_secs_f64();
        let per_second = |count: f64| if seconds > 0.0 { count / seconds } else { 0.0 };
        PhaseReport {
            label: measurement.plan.label.clone(),
            offered_rate: match measurement.plan.rate {
                Rate::PerSecond(rate) => Some(rate),
                Rate::Max => None,
            },
            warmup_seconds: measurement.plan.warmup.as_secs_f64(),
            duration_seconds: measurement.plan.duration.as_secs_f64(),
            window_seconds: seconds,
            offered_requests: match measurement.plan.rate {
                Rate::PerSecond(_) => recorder.offered,
                Rate::Max => recorder.sent,
            },
            missed_slots: recorder.missed,
            sent_requests: recorder.sent,
            succeeded_requests: recorder.succeeded,
            completed_in_window: recorder.completed_in_window,
            achieved_rate: per_second(recorder.succeeded_in_window as f64),
            errors: recorder.errors,
            errors_total: recorder.errors.total(),
            error_causes: recorder.causes.clone(),
            status_classes: recorder.status_classes,
            bytes: recorder.bytes_in_window,
            bytes_per_second: per_second(recorder.bytes_in_window as f64),
            latency: Latency {
                corrected: Percentiles::of(&recorder.corrected),
                raw: Percentiles::of(&recorder.raw),
                corrected_distribution: distribution(&recorder.corrected),
                raw_distribution: distribution(&recorder.raw),
            },
            schedule_lateness: Percentiles::of(&recorder.lateness),
            connections_opened: recorder.connections_opened,
            cold_held: measurement.cold_held,
            cold_closed_by_server: recorder.cold_closed_by_server,
            intervals: recorder.intervals.clone(),
            abandoned: measurement.abandoned,
            interrupted: measurement.interrupted,
            requests_planned: measurement.requests_planned,
            ended_by: measurement.ended_by,
            server: None,
            machine: None,
            generator: None,
            server_counters: None,
            population: None,
        }
    }
}

/// One run: a load configuration and its phases (connections persist across phases).
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// Name ("naive", "realistic", or "run").
    pub name: String,
    /// The load's parameters.
    pub parameters: LoadConfig,
    /// The generator's event mechanism.
    pub generator_backend: String,
    /// Cold connection totals.
    pub cold: ColdTotals,
    /// Phases in order.
    pub phases: Vec<PhaseReport>,
    /// With `--saturate`: the knee and the curve (the phases are its steps).
    pub saturation: Option<SaturationReport>,
    /// Problems met while measuring (e.g. the server's stats could not be read once).
    pub warnings: Vec<String>,
    /// A population run's workload parameters (the PolyMix scenario as run). Absent for the
    /// other modes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scenario: Option<serde_json::Value>,
}

/// The whole document.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Always `"coldwire-bench"`.
    pub tool: &'static str,
    /// coldwire's version.
    pub tool_version: &'static str,
    /// Start of the benchmark, seconds since the Unix epoch.
    pub started_unix_seconds: f64,
    /// The command line, for reproducing.
    pub command_line: Vec<String>,
    /// The machine.
    pub machine: MachineInfo,
    /// The server under test, as known.
    pub server: ServerInfo,
    /// Runs in order.
    pub runs: Vec<RunReport>,
    /// True if the benchmark was interrupted (SIGINT/SIGTERM).
    pub interrupted: bool,
}

impl BenchReport {
    /// The report of a run made by this process: [`SCHEMA_VERSION`], this tool and its
    /// version (the workspace's, which the `coldwire` binary shares), and this process's
    /// command line.
    pub fn of_this_process(
        started_unix_seconds: f64,
        machine: MachineInfo,
        server: ServerInfo,
        runs: Vec<RunReport>,
        interrupted: bool,
    ) -> BenchReport {
        BenchReport {
            schema_version: SCHEMA_VERSION,
            tool: "coldwire-bench",
            tool_version: env!("CARGO_PKG_VERSION"),
            started_unix_seconds,
            command_line: std::env::args().collect(),
            machine,
            server,
            runs,
            interrupted,
        }
    }
}

/// The JSON document as written: the report and the thresholds checked on it (a
/// wrapper, so that every mode that builds a [`BenchReport`] writes the same shape).
#[derive(Clone, Debug, Serialize)]
pub struct Document<'a> {
    /// The report's fields, at the top level.
    #[serde(flatten)]
    pub report: &'a BenchReport,
    /// The user's objectives (`--max-error-rate`, `--p99`, …) and whether each held; a
    /// failed one makes the exit status 99. Empty when none was checked.
    pub thresholds: &'a [crate::thresholds::Check],
}

/// Where the benchmark ran.
#[derive(Clone, Debug, Default, Serialize)]
pub struct MachineInfo {
    /// Host name.
    pub hostname: String,
    /// CPUs available to the generator.
    pub cpus: usize,
    /// Kernel release.
    pub kernel: String,
    /// CPU the generator was pinned to, if any.
    pub generator_cpu: Option<usize>,
}

impl MachineInfo {
    /// Reads what `/proc` says about this machine.
    pub fn current(generator_cpu: Option<usize>) -> MachineInfo {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .map(|text| text.trim().to_owned())
                .unwrap_or_default()
        };
        MachineInfo {
            hostname: read("/proc/sys/kernel/hostname"),
            cpus: std::thread::available_parallelism().map_or(1, |cpus| cpus.get()),
            kernel: read("/proc/sys/kernel/osrelease"),
            generator_cpu,
        }
    }
}

/// The server under test.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerInfo {
    /// Command the generator started (`--spawn`, or the built-in scenario's).
    pub command: Option<String>,
    /// Its process id.
    pub pid: Option<u32>,
    /// Stats endpoint read.
    pub stats_url: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_distribution_in_microseconds() {
        let mut histogram = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for value in 1..=1000u64 {
            histogram.record(value * 1000).unwrap();
        }
        let percentiles = Percentiles::of(&histogram);
        assert_eq!(percentiles.count, 1000);
        assert!((percentiles.p50_us - 500.0).abs() < 1.0, "{percentiles:?}");
        assert!((percentiles.max_us - 1000.0).abs() < 1.0);
        let points = distribution(&histogram);
        assert!(points.len() > 5);
        assert!(
            points
                .windows(2)
                .all(|pair| pair[0].percentile <= pair[1].percentile)
        );
        assert_eq!(points.last().map(|point| point.percentile), Some(100.0));
        assert!(distribution(&Histogram::<u64>::new(3).unwrap()).is_empty());
        assert_eq!(Percentiles::of(&Histogram::<u64>::new(3).unwrap()).count, 0);
    }
}
