//! The `robots` experiment's record: medians over rounds per contender (coldwire's backends,
//! then the peers) and robot count, Figs 4 and 5 (proxy CPU and CPU per request against
//! open connections), Fig. 6's 100·(1 − A/B) of mean response time against the reference
//! backend (figure and table), the per-contender table, and the findings (each contender's
//! growth, the reductions and the peers' CPU per request relative to each backend).

use coldwire_report::{ExperimentRecord, Scale, Series, Table};

use super::{Parameters, Point};
use crate::figures::{axis, figure, median, series, short, thousands};

/// What the summary is about: the contenders' names (the backends first), how many of them
/// are coldwire backends, and the measured points.
pub(super) struct Measured<'a> {
    pub parameters: &'a Parameters,
    pub names: &'a [String],
    pub backends: usize,
    pub points: &'a [Point],
}

impl Measured<'_> {
    fn median_of(&self, contender: usize, robots: usize, value: impl Fn(&Point) -> f64) -> f64 {
        median(
            &self
                .points
                .iter()
                .filter(|point| point.contender == contender && point.robots == robots)
                .map(value)
                .filter(|value| value.is_finite())
                .collect::<Vec<_>>(),
        )
    }

    /// Fig. 6's 100·(1 − A/B) of mean response time, median of per-round values.
    fn reduction(&self, a: usize, b: usize, robots: usize) -> f64 {
        let of = |round: u64, contender: usize| {
            self.points
                .iter()
                .find(|point| {
                    point.round == round && point.contender == contender && point.robots == robots
                })
                .map(|point| point.mean_ms)
        };
        let last = self
            .points
            .iter()
            .map(|point| point.round)
            .max()
            .unwrap_or(0);
        median(
            &(1..=last)
                .filter_map(|round| match (of(round, a), of(round, b)) {
                    (Some(a), Some(b)) if b > 0.0 => Some(100.0 * (1.0 - a / b)),
                    _ => None,
                })
                .collect::<Vec<_>>(),
        )
    }

    /// The x of a point: the contender's open connections (median over rounds), or the
    /// robot count when they could not be read.
    fn x(&self, contender: usize, robots: usize) -> f64 {
        let open = self.median_of(contender, robots, |point| point.open_connections);
        if open.is_finite() {
            open
        } else {
            self.parameters.robots[robots] as f64
        }
    }

    fn per_contender(&self, value: fn(&Point) -> f64) -> Vec<Series> {
        let counts = self.parameters.robots.len();
        self.names
            .iter()
            .enumerate()
            .map(|(contender, name)| {
                series(
                    name,
                    (0..counts).map(|robots| {
                        (
                            self.x(contender, robots),
                            self.median_of(contender, robots, value),
                        )
                    }),
                )
            })
            .collect()
    }
}

/// Adds the figures, tables and findings to `record`.
pub(super) fn summarise(record: &mut ExperimentRecord, measured: &Measured<'_>) {
    let parameters = measured.parameters;
    let names = measured.names;
    let counts = parameters.robots.len();
    record.figures.push(figure(
        "cpu",
        "Proxy CPU vs concurrent connections at a fixed request rate (100% hits)",
        Some("seed 002 Fig. 4"),
        axis("open connections at the proxy", "connections", Scale::Log),
        axis("proxy CPU", "% of a core", Scale::Linear),
        measured.per_contender(|point| point.cpu_cores * 100.0),
        "Median over rounds. The work (requests/s, all hits) is the same at every point: only the idle \
         connections grow. Flat is scalable. Peers: all their processes and threads.",
    ));
    record.figures.push(figure(
        "cpu-per-request",
        "Proxy CPU per request vs concurrent connections",
        Some("seed 002 Fig. 5"),
        axis("open connections at the proxy", "connections", Scale::Log),
        axis("proxy CPU per request", "µs", Scale::Linear),
        measured.per_contender(|point| point.cpu_us),
        "Median over rounds; CPU per request is the robust figure on this shared machine.",
    ));
    let reference = names.iter().position(|name| *name == parameters.reference);
    if let Some(reference) = reference {
        let others: Vec<usize> = (0..names.len())
            .filter(|contender| *contender != reference)
            .collect();
        record.figures.push(figure(
            "response-time-reduction",
            &format!(
                "Reduction of mean response time relative to {}: 100·(1 − A/B)",
                parameters.reference
            ),
            Some("seed 002 Fig. 6"),
            axis("idle robot connections", "robots", Scale::Log),
            axis("mean response time reduction", "%", Scale::Linear),
            others
                .iter()
                .map(|&contender| {
                    series(
                        &format!("{} vs {}", names[contender], parameters.reference),
                        (0..counts).map(|robots| {
                            (
                                parameters.robots[robots] as f64,
                                measured.reduction(contender, reference, robots),
                            )
                        }),
                    )
                })
                .collect(),
            "Median of per-round values (A and B measured side by side). Above 0: A answers faster than B. \
             Response times include the relay's 80 ms round trip.",
        ));
        let mut columns = vec!["robots".to_owned()];
        columns.extend(
            others
                .iter()
                .map(|&contender| format!("{} vs {} (%)", names[contender], parameters.reference)),
        );
        record.tables.push(Table {
            title: format!(
                "Fig. 6: reduction of mean response time relative to {}, 100·(1 − A/B) (medians of per-round values)",
                parameters.reference
            ),
            columns,
            rows: (0..counts)
                .map(|robots| {
                    let mut row = vec![thousands(parameters.robots[robots] as f64)];
                    row.extend(others.iter().map(|&contender| {
                        let value = measured.reduction(contender, reference, robots);
                        if value.is_finite() {
                            format!("{value:.1}")
                        } else {
                            "–".to_owned()
                        }
                    }));
                    row
                })
                .collect(),
        });
    }
    let mut columns = vec!["robots".to_owned(), "open connections".to_owned()];
    for name in names {
        columns.push(format!("{name} µs/request"));
        columns.push(format!("{name} mean ms"));
    }
    columns.push("failed requests".to_owned());
    let rows = (0..counts)
        .map(|robots| {
            let open: Vec<f64> = (0..names.len())
                .map(|contender| measured.x(contender, robots))
                .collect();
            let mut row = vec![
                thousands(parameters.robots[robots] as f64),
                thousands(median(&open)),
            ];
            for contender in 0..names.len() {
                row.push(short(
                    measured.median_of(contender, robots, |point| point.cpu_us),
                ));
                row.push(short(
                    measured.median_of(contender, robots, |point| point.mean_ms),
                ));
            }
            let failed: u64 = measured
                .points
                .iter()
                .filter(|point| point.robots == robots)
                .map(|point| point.errors)
                .sum();
            row.push(failed.to_string());
            row
        })
        .collect();
    record.tables.push(Table {
        title: "Proxy CPU per request and mean response time per backend and peer (medians over rounds)"
            .to_owned(),
        columns,
        rows,
    });
    findings(record, measured, reference);
}

fn findings(record: &mut ExperimentRecord, measured: &Measured<'_>, reference: Option<usize>) {
    let parameters = measured.parameters;
    let names = measured.names;
    let last = parameters.robots.len() - 1;
    let most_robots = thousands(parameters.robots[last] as f64);
    for (contender, name) in names.iter().enumerate() {
        let first = measured.median_of(contender, 0, |point| point.cpu_us);
        let most = measured.median_of(contender, last, |point| point.cpu_us);
        if first.is_finite() && most.is_finite() && first > 0.0 {
            record.findings.push(format!(
                "{name}: proxy CPU per request {} µs with {} robots, {} µs with {most_robots} ({:+.0}%).",
                short(first),
                thousands(parameters.robots[0] as f64),
                short(most),
                (most / first - 1.0) * 100.0
            ));
        }
    }
    // The peers against each backend, at the most robots: CPU per request as a ratio.
    for peer in measured.backends..names.len() {
        let of_peer = measured.median_of(peer, last, |point| point.cpu_us);
        let ratios: Vec<String> = (0..measured.backends)
            .filter_map(|backend| {
                let of_backend = measured.median_of(backend, last, |point| point.cpu_us);
                (of_peer.is_finite() && of_backend.is_finite() && of_backend > 0.0)
                    .then(|| format!("{:.1}× {}'s", of_peer / of_backend, names[backend]))
            })
            .collect();
        if !ratios.is_empty() {
            record.findings.push(format!(
                "With {most_robots} robots, {}'s CPU per request is {}.",
                names[peer],
                ratios.join(", ")
            ));
        }
    }
    if let Some(reference) = reference {
        for (contender, name) in names
            .iter()
            .enumerate()
            .filter(|(contender, _)| *contender != reference)
        {
            let value = measured.reduction(contender, reference, last);
            if value.is_finite() {
                record.findings.push(format!(
                    "With {most_robots} robots, {name}'s mean response time is {:.1}% {} than {}'s (Fig. 6's 100·(1 − A/B) = {:.1}).",
                    value.abs(),
                    if value >= 0.0 { "lower" } else { "higher" },
                    parameters.reference,
                    value
                ));
            }
        }
    }
    let failed: u64 = measured.points.iter().map(|point| point.errors).sum();
    record.findings.push(if failed == 0 {
        "No request failed.".to_owned()
    } else {
        format!("{failed} requests failed over the run (see the warnings).")
    });
}
