//! The load to generate: targets (and the workload that uses them), connection behaviour, cold connections, and the phases
//! (rate, warm-up, measured duration). Plain data with defaults that match the CLI's.

use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;

use crate::error::BenchError;
use crate::schedule::Arrivals;
use crate::target::{RequestOptions, Target};

/// What cold connections do while held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ColdMode {
    /// Connect and send nothing (Banga & Mogul's load-adding client).
    Idle,
    /// Send a request head one byte every `trickle_interval` (a slow WAN client); when the
    /// head is complete, read the response and start again.
    Trickle,
}

/// How fast requests are offered.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rate {
    /// Open loop: this many requests per second, whatever the server does.
    PerSecond(f64),
    /// Closed loop (as wrk): each hot connection sends its next request as soon as the
    /// previous response is complete. For finding a ceiling, not for latency.
    Max,
}

/// Connection behaviour shared by every phase.
#[derive(Clone, Debug, Serialize)]
pub struct LoadConfig {
    /// Targets, chosen per request by weight.
    #[serde(serialize_with = "serialize_targets")]
    pub targets: Vec<Target>,
    /// Send everything to this proxy, with absolute-form request lines.
    pub proxy: Option<SocketAddr>,
    /// Method, extra header fields and body of every request (`urls` workload).
    pub request: RequestOptions,
    /// `https://` targets: accept any certificate (`--insecure`, as curl's `-k`).
    pub insecure: bool,
    /// `https://` targets: trust the CA certificates of this PEM file as well as the
    /// bundled web roots (`--cacert`).
    pub ca_file: Option<std::path::PathBuf>,
    /// Arrival process of the open loop.
    pub arrivals: Arrivals,
    /// Most hot connections open at once (each carries one request at a time).
    pub connections: usize,
    /// Requests per hot connection before it is closed and replaced; 1 opens a connection
    /// per request (with `Connection: close`); 0 means unlimited.
    pub requests_per_connection: u64,
    /// A request not answered this long after it was sent (or a connect not completed) is
    /// abandoned and counted; a queued request waiting this long for a connection too.
    #[serde(serialize_with = "serialize_seconds")]
    pub timeout: Duration,
    /// Cold connections opened before measurement and held for the whole run.
    pub cold: usize,
    /// What cold connections do.
    pub cold_mode: ColdMode,
    /// Where cold connections go, shared out in turn (empty: the first target's address,
    /// or the proxy).
    pub cold_addresses: Vec<SocketAddr>,
    /// Cold connections opened per second (paced, so opening them is not a SYN flood).
    pub cold_connect_rate: f64,
    /// Trickle mode: time between two bytes of a cold connection's request head.
    #[serde(serialize_with = "serialize_seconds")]
    pub trickle_interval: Duration,
    /// A slot handled later than this after its intended start (the generator itself was
    /// behind) is skipped and counted as missed, never sent in a catch-up burst.
    #[serde(serialize_with = "serialize_seconds")]
    pub late_limit: Duration,
    /// Poll (instead of sleeping in the kernel's millisecond-granular wait) during the
    /// last millisecond before a slot while responses are awaited: slots go out on time and
    /// responses are timed exactly, at the price of a busy core — which a scheduler
    /// shares badly with other CPU-bound work. Off: slots may go out up to a millisecond
    /// late (shown in `schedule_lateness`) when no response arrives meanwhile.
    pub poll: bool,
    /// Seed of the arrival and target choices.
    pub seed: u64,
    /// Emulated round-trip time: after each response a hot connection rests this long
    /// before it carries the next request, as a client one round trip away could not send
    /// it sooner (Kim & Rixner's latency experiment). Latencies exclude the rest; zero is off.
    #[serde(serialize_with = "serialize_seconds")]
    pub rtt: Duration,
    /// Which registered workload makes the requests (`crate::workload::WORKLOADS`):
    /// `urls`, the default, uses `targets`. Recorded in the JSON only when not the default.
    #[serde(skip_serializing_if = "is_default_workload")]
    pub workload: &'static str,
    /// A request budget for each phase's measured window (ab's `-n`): the window offers
    /// exactly this many requests (open loop: a missed slot takes none of the budget, its
    /// request goes at the next slot) and ends when the last of them has completed or failed
    /// — or at the phase's duration, whichever comes first. `None`: the window lasts the
    /// phase's duration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
}

fn is_default_workload(name: &&'static str) -> bool {
    *name == crate::workload::urls::NAME
}

fn serialize_targets<S: serde::Serializer>(
    targets: &[Target],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut sequence = serializer.serialize_seq(Some(targets.len()))?;
    for target in targets {
        sequence.serialize_element(&serde_json::json!({
            "url": target.url,
            "weight": target.weight,
        }))?;
    }
    sequence.end()
}

/// Serializes a duration as seconds (a float).
pub fn serialize_seconds<S: serde::Serializer>(
    duration: &Duration,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(duration.as_secs_f64())
}

impl LoadConfig {
    /// Defaults for `targets`: 50 connections, keep-alive without limit, constant arrivals,
    /// 5 s timeout, no cold connections (idle when asked for, 2,000/s, trickling every 5 s),
    /// 5 ms lateness limit, no emulated round-trip time.
    pub fn new(targets: Vec<Target>) -> LoadConfig {
        LoadConfig {
            targets,
            proxy: None,
            request: RequestOptions::default(),
            insecure: false,
            ca_file: None,
            arrivals: Arrivals::Constant,
            connections: 50,
            requests_per_connection: 0,
            timeout: Duration::from_secs(5),
            cold: 0,
            cold_mode: ColdMode::Idle,
            cold_addresses: Vec::new(),
            cold_connect_rate: 2_000.0,
            trickle_interval: Duration::from_secs(5),
            late_limit: Duration::from_millis(5),
            poll: true,
            seed: 1,
            rtt: Duration::ZERO,
            workload: crate::workload::urls::NAME,
            requests: None,
        }
    }

    /// Checks ranges.
    pub fn validate(&self) -> Result<(), BenchError> {
        let fail = |message: &str| Err(BenchError::Config(message.to_owned()));
        if self.connections == 0 {
            return fail("--connections must be at least 1");
        }
        if self.timeout.is_zero() {
            return fail("--timeout must be positive");
        }
        if self.requests == Some(0) {
            return fail("-n (--requests) must be at least 1");
        }
        if !(self.cold_connect_rate.is_finite() && self.cold_connect_rate > 0.0) {
            return fail("--cold-rate must be a positive number of connections per second");
        }
        if self.cold_mode == ColdMode::Trickle && self.trickle_interval.is_zero() {
            return fail("--trickle-interval must be positive");
        }
        if self.proxy.is_some() && self.targets.iter().any(|target| target.tls) {
            return fail(
                "https:// targets cannot go through --proxy (CONNECT tunnels are not generated): \
                 benchmark the origin directly, or use an http:// URL",
            );
        }
        if self.cold > 0
            && self.cold_mode == ColdMode::Trickle
            && self.targets.iter().any(|target| target.tls)
        {
            return fail(
                "--cold-mode trickle sends plain HTTP: it cannot go to an https:// target (idle cold connections can)",
            );
        }
        self.request.validate()?;
        Ok(())
    }
}

/// What ended a phase's measured window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseEnd {
    /// Its duration passed.
    Duration,
    /// Every request of its budget (`LoadConfig::requests`) completed or failed.
    Requests,
    /// The run was stopped (SIGINT/SIGTERM).
    Interrupted,
}

/// One measured step: a rate held for a warm-up and a measured window.
#[derive(Clone, Debug, Serialize)]
pub struct PhasePlan {
    /// Name in reports.
    pub label: String,
    /// Offered rate.
    pub rate: Rate,
    /// Load before measuring (not recorded).
    #[serde(serialize_with = "serialize_seconds")]
    pub warmup: Duration,
    /// The measured window.
    #[serde(serialize_with = "serialize_seconds")]
    pub duration: Duration,
}

impl PhasePlan {
    /// Checks ranges.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.duration.is_zero() {
            return Err(BenchError::Config("--duration must be positive".into()));
        }
        if let Rate::PerSecond(rate) = self.rate
            && !(rate.is_finite() && rate > 0.0)
        {
            return Err(BenchError::Config(
                "--rate must be a positive number of requests per second (or `max`)".into(),
            ));
        }
        Ok(())
    }
}
