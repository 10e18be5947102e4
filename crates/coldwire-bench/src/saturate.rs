//! `--saturate`: the offered rate is stepped up (geometrically) until the server stops
//! keeping up — achieved below a fraction (95 %) of offered, or the corrected p99 past a
//! bound — and the whole throughput-vs-offered curve is reported (seed 000, Fig. 3).

use std::time::Duration;

use serde::Serialize;

use crate::report::PhaseReport;

/// How to step.
#[derive(Clone, Debug, Serialize)]
pub struct SaturateConfig {
    /// First offered rate.
    pub start_rate: f64,
    /// Each step multiplies the rate by this.
    pub factor: f64,
    /// Most steps.
    pub max_steps: usize,
    /// A step whose achieved rate is below `achieved_fraction × offered` is saturated.
    pub achieved_fraction: f64,
    /// A step whose corrected p99 passes this is saturated.
    #[serde(serialize_with = "crate::config::serialize_seconds")]
    pub p99_limit: Duration,
}

impl SaturateConfig {
    /// The offered rate of step `index` (0-based).
    pub fn rate(&self, index: usize) -> f64 {
        self.start_rate * self.factor.powi(index as i32)
    }

    /// Why a step counts as saturated, if it does.
    pub fn saturated(&self, step: &PhaseReport) -> Option<String> {
        let offered = step.offered_rate?;
        if step.achieved_rate < self.achieved_fraction * offered {
            return Some(format!(
                "achieved {:.0}/s < {:.0} % of offered {offered:.0}/s",
                step.achieved_rate,
                self.achieved_fraction * 100.0
            ));
        }
        let p99 = step.latency.corrected.p99_us;
        if p99 > self.p99_limit.as_secs_f64() * 1e6 {
            return Some(format!(
                "corrected p99 {:.1} ms > {:.1} ms",
                p99 / 1000.0,
                self.p99_limit.as_secs_f64() * 1000.0
            ));
        }
        None
    }
}

/// One point of the curve.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CurvePoint {
    /// Offered requests/s.
    pub offered_rate: f64,
    /// Achieved requests/s.
    pub achieved_rate: f64,
    /// Corrected p99, µs.
    pub p99_corrected_us: f64,
    /// Raw p99, µs.
    pub p99_raw_us: f64,
    /// Errors.
    pub errors: u64,
    /// Server CPU per request, µs (when measured).
    pub server_cpu_us_per_request: Option<f64>,
}

/// The outcome of `--saturate`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SaturationReport {
    /// The highest achieved rate of any step: the server's capacity as measured.
    pub saturation_throughput: f64,
    /// The first offered rate judged saturated (`null` if none was within `max_steps`).
    pub saturated_at_offered: Option<f64>,
    /// Why that step was judged saturated.
    pub reason: Option<String>,
    /// Every step.
    pub curve: Vec<CurvePoint>,
}

impl SaturationReport {
    /// Summarises steps that have run.
    pub fn from_steps(config: &SaturateConfig, steps: &[PhaseReport]) -> SaturationReport {
        let curve: Vec<CurvePoint> = steps
            .iter()
            .map(|step| CurvePoint {
                offered_rate: step.offered_rate.unwrap_or(0.0),
                achieved_rate: step.achieved_rate,
                p99_corrected_us: step.latency.corrected.p99_us,
                p99_raw_us: step.latency.raw.p99_us,
                errors: step.errors_total,
                server_cpu_us_per_request: step.server.as_ref().map(|cost| cost.cpu_us_per_request),
            })
            .collect();
        let first = steps
            .iter()
            .find_map(|step| config.saturated(step).map(|reason| (step, reason)));
        SaturationReport {
            saturation_throughput: curve
                .iter()
                .map(|point| point.achieved_rate)
                .fold(0.0, f64::max),
            saturated_at_offered: first.as_ref().and_then(|(step, _)| step.offered_rate),
            reason: first.map(|(_, reason)| reason),
            curve,
        }
    }
}
