//! Pass/fail objectives of a run, as k6's thresholds: an error rate not to exceed
//! (`--max-error-rate`, 1 % unless set) and latency percentiles not to exceed (`--p50`,
//! `--p90`, `--p99`, `--p999`, corrected latency). Each is checked on every measured
//! phase and printed as a ✓ or ✗ line; a failed one makes `coldwire bench` exit with
//! status [`FAILED_EXIT_STATUS`].

use std::time::Duration;

use serde::Serialize;

use crate::report::{Percentiles, PhaseReport};

/// The exit status of a run that failed a threshold (k6's).
pub const FAILED_EXIT_STATUS: u8 = 99;

/// A latency percentile a threshold can bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Percentile {
    /// Median.
    P50,
    /// 90th.
    P90,
    /// 99th.
    P99,
    /// 99.9th.
    P999,
}

impl Percentile {
    /// As written on the command line and in the report: `p50`, `p90`, `p99`, `p99.9`.
    pub fn label(self) -> &'static str {
        match self {
            Percentile::P50 => "p50",
            Percentile::P90 => "p90",
            Percentile::P99 => "p99",
            Percentile::P999 => "p99.9",
        }
    }

    fn of(self, percentiles: &Percentiles) -> Option<f64> {
        if percentiles.count == 0 {
            return None;
        }
        Some(match self {
            Percentile::P50 => percentiles.p50_us,
            Percentile::P90 => percentiles.p90_us,
            Percentile::P99 => percentiles.p99_us,
            Percentile::P999 => percentiles.p99_9_us,
        })
    }
}

/// The objectives of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    /// Largest fraction (0–1) of failed requests among the requests that ended.
    pub max_error_rate: f64,
    /// Latency bounds on the corrected latency of successful responses.
    pub latency: Vec<(Percentile, Duration)>,
}

impl Default for Thresholds {
    /// 1 % errors at most, no latency bound.
    fn default() -> Self {
        Thresholds {
            max_error_rate: 0.01,
            latency: Vec::new(),
        }
    }
}

/// One checked objective.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// The phase it was checked on.
    pub phase: String,
    /// The objective, e.g. `errors ≤ 1%` or `p99 ≤ 20ms`.
    pub objective: String,
    /// What the run measured, e.g. `0.4% (4 of 1000)` or `12.3 ms`.
    pub measured: String,
    /// Whether it held.
    pub passed: bool,
}

fn percent(fraction: f64) -> String {
    format!("{}%", trim(fraction * 100.0))
}

fn milliseconds(duration: Duration) -> String {
    humanize(duration.as_secs_f64() * 1e6)
}

/// A latency in microseconds as `850µs`, `12.3ms` or `1.25s`.
fn humanize(micros: f64) -> String {
    if micros < 1_000.0 {
        format!("{micros:.0}µs")
    } else if micros < 1_000_000.0 {
        format!("{}ms", trim(micros / 1_000.0))
    } else {
        format!("{}s", trim(micros / 1_000_000.0))
    }
}

fn trim(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

impl Thresholds {
    /// Checks every objective on `phase` (labelled `name`).
    pub fn check(&self, name: &str, phase: &PhaseReport) -> Vec<Check> {
        let mut checks = Vec::new();
        let ended = phase.succeeded_requests + phase.errors_total;
        let (passed, measured) = if ended == 0 {
            (false, "no request was answered or failed".to_owned())
        } else {
            let rate = phase.errors_total as f64 / ended as f64;
            (
                rate <= self.max_error_rate,
                format!(
                    "{:.2}% ({} of {ended} requests)",
                    rate * 100.0,
                    phase.errors_total
                ),
            )
        };
        checks.push(Check {
            phase: name.to_owned(),
            objective: format!("errors ≤ {}", percent(self.max_error_rate)),
            measured,
            passed,
        });
        for &(percentile, bound) in &self.latency {
            let value = percentile.of(&phase.latency.corrected);
            checks.push(Check {
                phase: name.to_owned(),
                objective: format!("{} ≤ {}", percentile.label(), milliseconds(bound)),
                measured: value.map_or("– (no successful response)".into(), humanize),
                passed: value.is_some_and(|value| value <= bound.as_secs_f64() * 1e6),
            });
        }
        checks
    }
}

/// The checks as k6 prints thresholds: one `✓`/`✗` line each.
pub fn format_checks(checks: &[Check]) -> String {
    if checks.is_empty() {
        return String::new();
    }
    let several_phases = checks.iter().any(|check| check.phase != checks[0].phase);
    let width = checks
        .iter()
        .map(|check| check.objective.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::from("Thresholds\n");
    for check in checks {
        let mark = if check.passed { '✓' } else { '✗' };
        let phase = if several_phases {
            format!("{}: ", check.phase)
        } else {
            String::new()
        };
        out += &format!(
            "  {mark} {phase}{:<width$}  {}\n",
            check.objective, check.measured
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{PhasePlan, Rate};
    use crate::engine::PhaseMeasurement;
    use crate::recorder::{ErrorKind, Recorder};

    fn phase(recorder: Recorder) -> PhaseReport {
        PhaseReport::from_measurement(&PhaseMeasurement {
            plan: PhasePlan {
                label: "100/s".into(),
                rate: Rate::PerSecond(100.0),
                warmup: Duration::ZERO,
                duration: Duration::from_secs(1),
            },
            recorder,
            window: Duration::from_secs(1),
            cold_held: (0, 0),
            hot_open_at_end: 0,
            interrupted: false,
            abandoned: 0,
            requests_planned: None,
            ended_by: crate::config::PhaseEnd::Duration,
        })
    }

    #[test]
    fn error_rate_and_percentiles_pass_or_fail() {
        let mut recorder = Recorder::new();
        for _ in 0..98 {
            recorder.response(200, 5_000_000, 5_000_000);
        }
        recorder.response(503, 1, 1);
        recorder.error(ErrorKind::Timeout);
        let thresholds = Thresholds {
            max_error_rate: 0.01,
            latency: vec![
                (Percentile::P50, Duration::from_millis(10)),
                (Percentile::P99, Duration::from_millis(2)),
            ],
        };
        let checks = thresholds.check("100/s", &phase(recorder));
        let summary: Vec<(&str, bool)> = checks
            .iter()
            .map(|check| (check.objective.as_str(), check.passed))
            .collect();
        assert_eq!(
            summary,
            [
                ("errors ≤ 1%", false),
                ("p50 ≤ 10ms", true),
                ("p99 ≤ 2ms", false)
            ]
        );
        assert_eq!(checks[0].measured, "2.00% (2 of 100 requests)");
        assert_eq!(checks[2].measured, "5ms");
        let text = format_checks(&checks);
        assert!(text.contains("  ✗ errors ≤ 1%"), "{text}");
        assert!(text.contains("  ✓ p50 ≤ 10ms"), "{text}");
    }

    #[test]
    fn nothing_measured_fails_with_a_dash() {
        let mut recorder = Recorder::new();
        recorder.error_with(ErrorKind::Connect, Some(libc::ECONNREFUSED), None);
        let thresholds = Thresholds {
            max_error_rate: 1.0,
            latency: vec![(Percentile::P99, Duration::from_millis(20))],
        };
        let checks = thresholds.check("x", &phase(recorder));
        assert!(checks[0].passed, "100% allowed");
        assert!(!checks[1].passed);
        assert!(checks[1].measured.starts_with('–'));
        let empty = Thresholds::default().check("x", &phase(Recorder::new()));
        assert!(!empty[0].passed);
    }

    #[test]
    fn objectives_read_as_written() {
        assert_eq!(percent(0.01), "1%");
        assert_eq!(percent(0.005), "0.5%");
        assert_eq!(percent(0.07), "7%");
        assert_eq!(milliseconds(Duration::from_micros(20_000)), "20ms");
        assert_eq!(milliseconds(Duration::from_micros(1_500)), "1.5ms");
        assert_eq!(milliseconds(Duration::from_micros(800)), "800µs");
        assert_eq!(milliseconds(Duration::from_secs(2)), "2s");
    }
}
