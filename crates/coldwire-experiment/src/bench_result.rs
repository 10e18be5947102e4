//! The part of `coldwire bench --json` (schema version 1, `docs/bench-json.md`) that the
//! experiments read, as typed structures. Fields the experiments do not use are ignored,
//! as the schema's rules ask of readers; a document of another version is refused.

use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;

/// The schema version this reader understands.
pub const BENCH_SCHEMA_VERSION: u32 = 1;

/// A `coldwire bench --json` document.
#[derive(Clone, Debug, Deserialize)]
pub struct BenchDocument {
    /// `schema_version`.
    pub schema_version: u32,
    /// The runs (a plain invocation has one).
    pub runs: Vec<BenchRun>,
    /// The benchmark was interrupted.
    #[serde(default)]
    pub interrupted: bool,
}

/// One run of a document.
#[derive(Clone, Debug, Deserialize)]
pub struct BenchRun {
    /// Cold connection totals.
    pub cold: ColdTotals,
    /// Phases (with `--saturate`, one per step).
    pub phases: Vec<BenchPhase>,
    /// The knee, with `--saturate`.
    pub saturation: Option<Saturation>,
    /// Problems the generator met.
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// Cold connections over a run.
#[derive(Clone, Copy, Debug, Default, Deserialize)]
pub struct ColdTotals {
    /// Asked for.
    pub requested: u64,
    /// Established at least once.
    pub established: u64,
    /// Never established.
    pub failed: u64,
    /// Closed by the server after being established.
    pub closed_by_server: u64,
}

/// `--saturate`'s summary.
#[derive(Clone, Debug, Deserialize)]
pub struct Saturation {
    /// Highest achieved rate of any step.
    pub saturation_throughput: f64,
    /// First offered rate judged saturated.
    pub saturated_at_offered: Option<f64>,
    /// Why.
    pub reason: Option<String>,
}

/// One phase.
#[derive(Clone, Debug, Deserialize)]
pub struct BenchPhase {
    /// Label.
    pub label: String,
    /// Offered requests/s (`None`: closed loop).
    pub offered_rate: Option<f64>,
    /// Successful responses completed in the window per second.
    pub achieved_rate: f64,
    /// Slots the generator reached too late.
    pub missed_slots: u64,
    /// Failed window requests.
    pub errors_total: u64,
    /// Window requests written.
    pub sent_requests: u64,
    /// Schedule slots in the window (closed loop: requests sent).
    pub offered_requests: u64,
    /// Latencies.
    pub latency: Latency,
    /// Cold connections held at the window's start and end.
    pub cold_held: (u64, u64),
    /// The measured window's length, seconds.
    #[serde(default)]
    pub window_seconds: f64,
    /// Response bytes (heads and bodies) completed in the window, per second.
    #[serde(default)]
    pub bytes_per_second: f64,
    /// The server's CPU from `/proc`.
    pub server: Option<ServerCost>,
    /// The generator's own CPU.
    pub generator: Option<GeneratorCost>,
    /// coldwire's own counters (stats endpoint).
    pub server_counters: Option<ServerCounters>,
}

/// Latency summaries.
#[derive(Clone, Debug, Deserialize)]
pub struct Latency {
    /// From the intended start.
    pub corrected: Percentiles,
    /// From the send.
    pub raw: Percentiles,
}

/// Percentiles, µs.
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct Percentiles {
    /// Values recorded.
    pub count: u64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Largest.
    pub max_us: f64,
}

/// The server's CPU over the window.
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct ServerCost {
    /// Requests divided by.
    pub requests: u64,
    /// Server CPU per request, µs.
    pub cpu_us_per_request: f64,
    /// Cores the server kept busy.
    pub cpu_cores: f64,
    /// Seconds its threads waited for a CPU.
    pub runqueue_wait_seconds: f64,
    /// On-CPU seconds of its threads.
    #[serde(default)]
    pub cpu_seconds: f64,
    /// TCP segments received in its network namespace (older results: absent).
    #[serde(default)]
    pub tcp_segments_in: Option<u64>,
    /// TCP segments sent in its network namespace.
    #[serde(default)]
    pub tcp_segments_out: Option<u64>,
}

/// The generator's CPU over the window.
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct GeneratorCost {
    /// On-CPU seconds.
    pub cpu_seconds: f64,
    /// Seconds it waited for a CPU.
    pub runqueue_wait_seconds: f64,
}

/// coldwire's counters over the window.
#[derive(Clone, Debug, Deserialize)]
pub struct ServerCounters {
    /// Event mechanism.
    pub backend: String,
    /// Requests answered.
    pub requests: u64,
    /// System calls per request.
    pub syscalls_per_request: f64,
    /// Waits per request.
    pub waits_per_request: f64,
    /// Events per wait.
    pub events_per_wait: f64,
}

impl BenchDocument {
    /// Parses a document, refusing other schema versions.
    pub fn parse(text: &str) -> anyhow::Result<BenchDocument> {
        let version: serde_json::Value =
            serde_json::from_str(text).context("the bench result is not JSON")?;
        match version
            .get("schema_version")
            .and_then(serde_json::Value::as_u64)
        {
            Some(version) if version == u64::from(BENCH_SCHEMA_VERSION) => {}
            other => bail!(
                "the bench result has schema_version {other:?}, this reader knows {BENCH_SCHEMA_VERSION}: \
                 rebuild coldwire so the experiment and the generator match"
            ),
        }
        serde_json::from_value(version).context("the bench result does not match schema version 1")
    }

    /// Reads and parses `path`.
    pub fn read(path: &Path) -> anyhow::Result<BenchDocument> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the bench result {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("in {}", path.display()))
    }

    /// The first run (a plain invocation has exactly one).
    pub fn run(&self) -> anyhow::Result<&BenchRun> {
        self.runs
            .first()
            .context("the bench result has no run (was it interrupted?)")
    }

    /// The first run's last phase (a plain invocation has one).
    pub fn phase(&self) -> anyhow::Result<&BenchPhase> {
        self.run()?
            .phases
            .last()
            .context("the bench result has no measured phase")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_other_versions_and_reads_version_1() {
        let error = BenchDocument::parse(r#"{"schema_version": 2, "runs": []}"#).unwrap_err();
        assert!(
            format!("{error:#}").contains("schema_version Some(2)"),
            "{error:#}"
        );
        let percentiles = r#"{"count": 3, "p50_us": 10.0, "p90_us": 20.0, "p99_us": 30.0, "max_us": 40.0, "mean_us": 1.0}"#;
        let text = format!(
            r#"{{"schema_version": 1, "tool": "coldwire-bench", "runs": [{{"name": "run",
              "cold": {{"requested": 5, "attempted": 5, "established": 5, "failed": 0, "closed_by_server": 0, "held": 5}},
              "phases": [{{"label": "max", "offered_rate": null, "achieved_rate": 1234.5, "missed_slots": 0,
                "errors_total": 0, "sent_requests": 9, "offered_requests": 9, "cold_held": [5, 5],
                "latency": {{"corrected": {percentiles}, "raw": {percentiles}}},
                "server": null, "generator": null, "server_counters": null, "future_field": 1}}],
              "saturation": null}}]}}"#
        );
        let document = BenchDocument::parse(&text).unwrap();
        let phase = document.phase().unwrap();
        assert_eq!(phase.achieved_rate, 1234.5);
        assert_eq!(phase.latency.corrected.p99_us, 30.0);
        assert_eq!(document.run().unwrap().cold.established, 5);
    }
}
