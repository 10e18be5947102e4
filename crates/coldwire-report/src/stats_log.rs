//! A server's stats log (`coldwire serve|proxy --stats-log FILE`, one JSON line per
//! interval; format in docs/metrics.md) turned into an experiment record that `coldwire
//! report` shows like any other: request rate and CPU over time, and CPU against request
//! rate with its least-squares line — slope = CPU time per request, intercept = the idle
//! cost, R² = how well a straight line explains it (seed 000's live-system regressions).

use std::fs;
use std::path::Path;

use anyhow::Context;
use serde::Deserialize;

use crate::model::{
    Axis, ExperimentRecord, Figure, MachineRecord, Point, RECORD_SCHEMA_VERSION, Scale, Series,
    Table,
};

/// What the report reads from one stats-log line (other fields are ignored).
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct StatsSample {
    /// Wall-clock end of the interval, Unix seconds.
    pub unix_seconds: f64,
    /// Seconds since the server started.
    pub uptime_seconds: f64,
    /// Length of the interval in seconds.
    pub interval_seconds: f64,
    /// Requests answered in the interval.
    pub requests: u64,
    /// Requests per second over the interval.
    pub requests_per_second: f64,
    /// CPU of the interval.
    pub cpu: CpuSample,
}

/// CPU time of one interval.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
pub struct CpuSample {
    /// User-mode seconds.
    pub user_seconds: f64,
    /// Kernel seconds.
    pub system_seconds: f64,
}

impl StatsSample {
    /// CPU cores busy on average over the interval (user + system seconds per second).
    pub fn cores(&self) -> f64 {
        (self.cpu.user_seconds + self.cpu.system_seconds) / self.interval_seconds.max(1e-9)
    }
}

/// Reads a stats log: every non-empty line must parse (the error names the line).
pub fn read_stats_log(path: &Path) -> anyhow::Result<Vec<StatsSample>> {
    let text = fs::read_to_string(path)
        .with_context(|| format!("cannot read the stats log {}", path.display()))?;
    let mut samples = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let sample: StatsSample = serde_json::from_str(line).with_context(|| {
            format!(
                "{} line {}: not a stats-log line (written by --stats-log; see docs/metrics.md)",
                path.display(),
                index + 1
            )
        })?;
        samples.push(sample);
    }
    anyhow::ensure!(
        !samples.is_empty(),
        "{} holds no stats-log line yet: let the server run for an interval or more",
        path.display()
    );
    Ok(samples)
}

/// A least-squares straight line `y = slope·x + intercept`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearFit {
    /// Change of y per unit of x.
    pub slope: f64,
    /// y at x = 0.
    pub intercept: f64,
    /// Coefficient of determination: 1 − residual sum of squares / total sum of squares
    /// (1 when every point is on the line; 0 when x explains nothing).
    pub r_squared: f64,
    /// Points fitted.
    pub points: usize,
}

/// Fits `y = slope·x + intercept` by ordinary least squares; `None` with fewer than two
/// points or when every x is the same (no slope can be told).
pub fn linear_regression(points: &[(f64, f64)]) -> Option<LinearFit> {
    let count = points.len();
    if count < 2 {
        return None;
    }
    let n = count as f64;
    let mean_x = points.iter().map(|(x, _)| x).sum::<f64>() / n;
    let mean_y = points.iter().map(|(_, y)| y).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
    let sxy: f64 = points
        .iter()
        .map(|(x, y)| (x - mean_x) * (y - mean_y))
        .sum();
    let syy: f64 = points.iter().map(|(_, y)| (y - mean_y).powi(2)).sum();
    if sxx <= f64::EPSILON * n * mean_x.abs().max(1.0) {
        return None;
    }
    let slope = sxy / sxx;
    let intercept = mean_y - slope * mean_x;
    let residual: f64 = points
        .iter()
        .map(|(x, y)| (y - (slope * x + intercept)).powi(2))
        .sum();
    let r_squared = if syy > 0.0 { 1.0 - residual / syy } else { 1.0 };
    Some(LinearFit {
        slope,
        intercept,
        r_squared,
        points: count,
    })
}

fn axis(label: &str, unit: &str) -> Axis {
    Axis {
        label: label.into(),
        unit: unit.into(),
        scale: Scale::Linear,
    }
}

/// The experiment record of a stats log: three figures, the regression's table and what
/// it says. `source` names the file in the record.
pub fn stats_log_record(samples: &[StatsSample], source: &str) -> ExperimentRecord {
    let start = samples.first().map_or(0.0, |sample| sample.uptime_seconds);
    let over_time = |pick: fn(&StatsSample) -> f64| -> Vec<Point> {
        samples
            .iter()
            .map(|sample| Point {
                x: sample.uptime_seconds - start,
                y: pick(sample),
            })
            .collect()
    };
    let mut load: Vec<(f64, f64)> = samples
        .iter()
        .map(|sample| (sample.requests_per_second, sample.cores()))
        .collect();
    load.sort_by(|a, b| a.0.total_cmp(&b.0));
    let fit = linear_regression(&load);
    let mut cpu_series = vec![Series {
        name: "intervals".into(),
        points: load.iter().map(|&(x, y)| Point { x, y }).collect(),
    }];
    let mut table_rows = Vec::new();
    let mut findings = Vec::new();
    let mut warnings = Vec::new();
    match fit {
        Some(fit) => {
            let (low, high) = (load[0].0, load[load.len() - 1].0);
            cpu_series.push(Series {
                name: "least-squares line".into(),
                points: [low, high]
                    .iter()
                    .map(|&x| Point {
                        x,
                        y: fit.slope * x + fit.intercept,
                    })
                    .collect(),
            });
            table_rows = vec![
                vec![
                    "slope: CPU per request".into(),
                    format!("{:.2} µs", fit.slope * 1e6),
                ],
                vec![
                    "intercept: idle cost".into(),
                    format!("{:.4} cores", fit.intercept),
                ],
                vec!["R²".into(), format!("{:.3}", fit.r_squared)],
                vec!["intervals".into(), fit.points.to_string()],
            ];
            findings.push(format!(
                "Each request costs {:.2} µs of CPU (slope), the server idles at {:.4} cores \
                 (intercept); R² = {:.3} over {} intervals from {:.0} to {:.0} requests/s.",
                fit.slope * 1e6,
                fit.intercept,
                fit.r_squared,
                fit.points,
                low,
                high
            ));
        }
        None => warnings.push(
            "no regression: it needs at least two intervals at different request rates \
             (vary the load while the log is written)"
                .into(),
        ),
    }
    let duration = samples.last().map_or(0.0, |sample| sample.uptime_seconds) - start;
    let requests: u64 = samples.iter().map(|sample| sample.requests).sum();
    ExperimentRecord {
        schema_version: RECORD_SCHEMA_VERSION,
        experiment: "stats-log".into(),
        title: format!("Stats log {source}"),
        reproduces: Vec::new(),
        description: format!(
            "A running server's stats log ({} intervals, {requests} requests over {duration:.0} s): \
             request rate and CPU over time, and CPU against request rate with its \
             least-squares line.",
            samples.len()
        ),
        command: vec![
            "coldwire".into(),
            "report".into(),
            "--stats-log".into(),
            source.into(),
        ],
        quick: false,
        commit: None,
        started_unix_seconds: samples.first().map_or(0.0, |sample| sample.unix_seconds),
        duration_seconds: duration,
        machine: MachineRecord {
            label: "not recorded in the stats log".into(),
            ..MachineRecord::default()
        },
        parameters: serde_json::json!({ "stats_log": source }),
        figures: vec![
            Figure {
                id: "rate-over-time".into(),
                title: "Request rate over time".into(),
                reproduces: None,
                x: axis("time since the first line", "s"),
                y: axis("request rate", "requests/s"),
                series: vec![Series {
                    name: "requests/s".into(),
                    points: over_time(|sample| sample.requests_per_second),
                }],
                caption: None,
            },
            Figure {
                id: "cpu-over-time".into(),
                title: "CPU over time".into(),
                reproduces: None,
                x: axis("time since the first line", "s"),
                y: axis("CPU, user + system", "cores"),
                series: vec![
                    Series {
                        name: "user + system".into(),
                        points: over_time(StatsSample::cores),
                    },
                    Series {
                        name: "system".into(),
                        points: over_time(|sample| {
                            sample.cpu.system_seconds / sample.interval_seconds.max(1e-9)
                        }),
                    },
                ],
                caption: None,
            },
            Figure {
                id: "cpu-against-rate".into(),
                title: "CPU against request rate".into(),
                reproduces: None,
                x: axis("request rate", "requests/s"),
                y: axis("CPU, user + system", "cores"),
                series: cpu_series,
                caption: Some(
                    "One point per interval; the line is the least-squares fit: slope = CPU \
                     per request, intercept = idle cost."
                        .into(),
                ),
            },
        ],
        tables: vec![Table {
            title: "CPU against request rate: linear regression".into(),
            columns: vec!["figure".into(), "value".into()],
            rows: table_rows,
        }],
        findings,
        seed_comparison: Vec::new(),
        raw_files: Vec::new(),
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_regression_recovers_a_known_line() {
        // y = 0.00002·x + 0.05 exactly: 20 µs per request, 0.05 cores idle.
        let points: Vec<(f64, f64)> = [0.0, 1000.0, 2500.0, 4000.0, 10_000.0]
            .iter()
            .map(|&x| (x, 0.000_02 * x + 0.05))
            .collect();
        let fit = linear_regression(&points).unwrap();
        assert!((fit.slope - 0.000_02).abs() < 1e-12, "{fit:?}");
        assert!((fit.intercept - 0.05).abs() < 1e-9, "{fit:?}");
        assert!((fit.r_squared - 1.0).abs() < 1e-12, "{fit:?}");
        assert_eq!(fit.points, 5);
    }

    #[test]
    fn the_regression_matches_a_worked_example() {
        // x = 1..5, y = 2, 4, 5, 4, 5: slope 0.6, intercept 2.2, R² = 0.6 (a textbook case).
        let points = [(1.0, 2.0), (2.0, 4.0), (3.0, 5.0), (4.0, 4.0), (5.0, 5.0)];
        let fit = linear_regression(&points).unwrap();
        assert!((fit.slope - 0.6).abs() < 1e-12);
        assert!((fit.intercept - 2.2).abs() < 1e-12);
        assert!((fit.r_squared - 0.6).abs() < 1e-12);
        assert!(linear_regression(&points[..1]).is_none());
        assert!(linear_regression(&[(3.0, 1.0), (3.0, 2.0)]).is_none());
    }

    #[test]
    fn a_log_becomes_a_record_with_the_fit_in_its_table() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("stats.log");
        let mut text = String::new();
        for (index, rate) in [100.0, 200.0, 400.0, 800.0].iter().enumerate() {
            let cores = 0.01 + rate * 0.000_05;
            text.push_str(&format!(
                "{{\"schema\":1,\"unix_seconds\":{},\"uptime_seconds\":{},\"interval_seconds\":1.0,\
                 \"requests\":{},\"requests_per_second\":{rate},\"responses\":{{\"2xx\":1}},\
                 \"cpu\":{{\"user_seconds\":{},\"system_seconds\":{},\"cores\":{cores}}}}}\n",
                1000 + index,
                index + 1,
                *rate as u64,
                cores * 0.75,
                cores * 0.25
            ));
        }
        std::fs::write(&path, text).unwrap();
        let samples = read_stats_log(&path).unwrap();
        assert_eq!(samples.len(), 4);
        let record = stats_log_record(&samples, "stats.log");
        assert_eq!(record.figures.len(), 3);
        assert_eq!(record.tables[0].rows[0][1], "50.00 µs");
        assert_eq!(record.tables[0].rows[1][1], "0.0100 cores");
        assert_eq!(record.tables[0].rows[2][1], "1.000");
        std::fs::write(&path, "{\"schema\":1}\n").unwrap();
        let error = read_stats_log(&path).unwrap_err();
        assert!(format!("{error:#}").contains("line 1"), "{error:#}");
    }
}
