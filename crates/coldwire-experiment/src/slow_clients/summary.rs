//! The `slow-clients` record's figures, tables and findings, computed from the measured
//! points: CPU per request against the proxy's open connections per backend, each backend
//! relative to epoll (medians of per-round ratios), the counters behind them, and
//! sentences on growth, the uring / epoll aim and failures.

use coldwire_report::{ExperimentRecord, Scale, Table};

use super::{Parameters, Point};
use crate::figures::{axis, figure, median, series, short, thousands};
use crate::serve::Pinning;

/// The record's description.
pub(super) fn description(parameters: &Parameters, pinning: Pinning, rounds: u64) -> String {
    format!(
        "coldwire proxy (reverse proxy, one worker{}) in front of coldwire origin (objects `{}`, every answer \
         after a think time of normal({} s, {} s)), driven by coldwire bench{} at a constant open-loop rate of {} \
         requests/s with {} request(s) per client connection; every request a miss (`/obj/{{seq}}`). Each point: a \
         fresh proxy, {} s of warm-up (the connections build up over one think time), {} s measured; the proxy's \
         CPU per request is its on-CPU time (all threads, schedstat) over the requests answered; its open \
         connections (clients + upstream) are read from its stats halfway through. Backends {} interleaved within \
         each rate, their order reversed in even rounds; {} round(s), medians shown.",
        pinning
            .server_cpu
            .map_or(String::new(), |cpu| format!(", pinned to CPU {cpu}")),
        parameters.object,
        parameters.think,
        parameters.think_sd,
        pinning.generator_cpu.map_or(String::new(), |cpu| format!(
            " (with the origin, on CPU {cpu})"
        )),
        parameters
            .rates
            .iter()
            .map(|rate| thousands(*rate))
            .collect::<Vec<_>>()
            .join(", "),
        parameters.requests_per_connection,
        parameters.warmup,
        parameters.duration,
        parameters.backends.join(", "),
        rounds,
    )
}

/// Median over rounds of `value` at (`backend`, `rate`).
fn median_of(
    points: &[Point],
    backend: usize,
    rate: usize,
    value: impl Fn(&Point) -> Option<f64>,
) -> f64 {
    median(
        &points
            .iter()
            .filter(|point| point.backend == backend && point.rate == rate)
            .filter_map(value)
            .collect::<Vec<_>>(),
    )
}

fn cpu(points: &[Point], backend: usize, rate: usize) -> f64 {
    median_of(points, backend, rate, |point| Some(point.cpu_us))
}

fn connections(points: &[Point], backend: usize, rate: usize) -> f64 {
    median_of(points, backend, rate, |point| Some(point.open_connections))
}

/// Median over rounds of `backend`'s CPU per request over `reference`'s, same round.
fn ratio(points: &[Point], backend: usize, reference: usize, rate: usize) -> f64 {
    let of = |round: u64, backend: usize| {
        points
            .iter()
            .find(|point| point.round == round && point.backend == backend && point.rate == rate)
            .map(|point| point.cpu_us)
    };
    let last_round = points.iter().map(|point| point.round).max().unwrap_or(0);
    let ratios: Vec<f64> = (1..=last_round)
        .filter_map(|round| match (of(round, backend), of(round, reference)) {
            (Some(top), Some(bottom)) if bottom > 0.0 => Some(top / bottom),
            _ => None,
        })
        .collect();
    median(&ratios)
}

/// Fills the record's figures, tables and findings.
pub(super) fn summarise(
    record: &mut ExperimentRecord,
    parameters: &Parameters,
    backends: &[String],
    points: &[Point],
) {
    let rates = &parameters.rates;
    let epoll = backends.iter().position(|backend| backend == "epoll");
    record.figures.push(figure(
        "cpu-per-request",
        "Proxy CPU per request vs open connections (slow clients)",
        Some("issue 19"),
        axis("open connections at the proxy (clients + upstream)", "connections", Scale::Log),
        axis("proxy CPU per request", "µs", Scale::Linear),
        backends
            .iter()
            .enumerate()
            .map(|(backend_index, name)| {
                series(
                    name,
                    (0..rates.len()).map(|rate| {
                        (
                            connections(points, backend_index, rate),
                            cpu(points, backend_index, rate),
                        )
                    }),
                )
            })
            .collect(),
        "Median over rounds. Flat is scalable: the work per request is the same at every point, only the number \
         of connections waiting (in the origin's think time) grows with the rate.",
    ));
    if let Some(epoll) = epoll {
        record.figures.push(figure(
            "ratio-to-epoll",
            "Proxy CPU per request relative to epoll vs offered rate",
            Some("issue 19"),
            axis("offered rate", "requests/s", Scale::Log),
            axis("CPU per request relative to epoll", "ratio", Scale::Linear),
            backends
                .iter()
                .enumerate()
                .filter(|(backend_index, _)| *backend_index != epoll)
                .map(|(backend_index, name)| {
                    series(
                        &format!("{name} / epoll"),
                        rates.iter().enumerate().map(|(rate_index, rate)| {
                            (*rate, ratio(points, backend_index, epoll, rate_index))
                        }),
                    )
                })
                .collect(),
            "Median of per-round ratios (each pair measured side by side). Below 1: cheaper than epoll.",
        ));
    }
    record
        .tables
        .push(cpu_table(parameters, backends, points, epoll));
    record
        .tables
        .push(counter_table(parameters, backends, points));
    findings(record, parameters, backends, points, epoll);
}

/// A ratio for a table cell (`n/a` where a side was not measured).
fn ratio_cell(value: f64) -> String {
    if value.is_finite() {
        format!("{value:.2}")
    } else {
        "n/a".to_owned()
    }
}

fn cpu_table(
    parameters: &Parameters,
    backends: &[String],
    points: &[Point],
    epoll: Option<usize>,
) -> Table {
    let mut columns = vec!["offered/s".to_owned(), "open connections".to_owned()];
    columns.extend(backends.iter().map(|backend| format!("{backend} µs")));
    if let Some(epoll) = epoll {
        columns.extend(
            backends
                .iter()
                .enumerate()
                .filter(|(index, _)| *index != epoll)
                .map(|(_, backend)| format!("{backend} / epoll")),
        );
    }
    columns.push("failed requests".to_owned());
    let rows = (0..parameters.rates.len())
        .map(|rate| {
            let open: Vec<f64> = (0..backends.len())
                .map(|backend| connections(points, backend, rate))
                .collect();
            let mut row = vec![thousands(parameters.rates[rate]), thousands(median(&open))];
            row.extend((0..backends.len()).map(|backend| short(cpu(points, backend, rate))));
            if let Some(epoll) = epoll {
                row.extend(
                    (0..backends.len())
                        .filter(|backend| *backend != epoll)
                        .map(|backend| ratio_cell(ratio(points, backend, epoll, rate))),
                );
            }
            let failed: Vec<String> = backends
                .iter()
                .enumerate()
                .filter_map(|(backend, name)| {
                    let errors: u64 = points
                        .iter()
                        .filter(|point| point.backend == backend && point.rate == rate)
                        .map(|point| point.errors)
                        .sum();
                    (errors > 0).then(|| format!("{name} {errors}"))
                })
                .collect();
            row.push(if failed.is_empty() {
                "0".to_owned()
            } else {
                failed.join(", ")
            });
            row
        })
        .collect();
    Table {
        title: "Proxy CPU per request (µs, median over rounds), open connections at the proxy (median over \
                backends), ratios to epoll (median of per-round ratios), failed requests (all rounds)"
            .to_owned(),
        columns,
        rows,
    }
}

fn counter_table(parameters: &Parameters, backends: &[String], points: &[Point]) -> Table {
    let mut rows = Vec::new();
    for (backend, name) in backends.iter().enumerate() {
        for (rate, offered) in parameters.rates.iter().enumerate() {
            let cancellations = median_of(points, backend, rate, |point| {
                point.cancellations_per_request
            });
            let refusals = points
                .iter()
                .filter(|point| point.backend == backend && point.rate == rate)
                .filter_map(|point| point.limit_503s)
                .max();
            let pressure: Vec<_> = points
                .iter()
                .filter(|point| point.backend == backend && point.rate == rate)
                .filter_map(|point| point.ring_pressure)
                .collect();
            let no_buffers = median_of(points, backend, rate, |point| {
                point.ring_pressure.map(|ring| ring.no_buffers_per_request)
            });
            rows.push(vec![
                name.clone(),
                thousands(*offered),
                short(median_of(points, backend, rate, |point| {
                    Some(point.syscalls_per_request)
                })),
                if cancellations.is_finite() {
                    short(cancellations)
                } else {
                    "not counted".to_owned()
                },
                refusals.map_or("not counted".to_owned(), |count| count.to_string()),
                if pressure.is_empty() {
                    "not counted".to_owned()
                } else {
                    format!(
                        "{} / {} / {}",
                        short(no_buffers),
                        pressure
                            .iter()
                            .map(|ring| ring.cq_overflows)
                            .max()
                            .unwrap_or(0),
                        pressure
                            .iter()
                            .map(|ring| ring.sq_full_enters)
                            .max()
                            .unwrap_or(0)
                    )
                },
            ]);
        }
    }
    Table {
        title: "The proxy's counters per request (median over rounds): system calls, uring cancellations \
                (each closing connection's own armed operations, by user_data), 503s for want of connections, \
                the uring driver's ring pressure (receives ended by an empty buffer ring per request; \
                most completions that overflowed the completion queue and enters forced by a full \
                submission queue in one round)"
            .to_owned(),
        columns: [
            "backend",
            "offered/s",
            "syscalls/request",
            "cancellations/request",
            "503 connection_limit_reached",
            "uring ENOBUFS/request / CQ overflows / SQ-full enters",
        ]
        .map(str::to_owned)
        .to_vec(),
        rows,
    }
}

fn findings(
    record: &mut ExperimentRecord,
    parameters: &Parameters,
    backends: &[String],
    points: &[Point],
    epoll: Option<usize>,
) {
    let rates = &parameters.rates;
    for (backend, name) in backends.iter().enumerate() {
        // The lowest and the highest rate this backend was measured at.
        let measured: Vec<usize> = (0..rates.len())
            .filter(|rate| cpu(points, backend, *rate).is_finite())
            .collect();
        let (Some(&first), Some(&last)) = (measured.first(), measured.last()) else {
            continue;
        };
        let (low, high) = (cpu(points, backend, first), cpu(points, backend, last));
        if first == last {
            continue;
        }
        record.findings.push(format!(
            "{name}: {} µs per request at {} requests/s ({} open connections), {} µs at {} requests/s ({} open \
             connections): ×{:.2} over ×{:.0} the connections.",
            short(low),
            thousands(rates[first]),
            thousands(connections(points, backend, first)),
            short(high),
            thousands(rates[last]),
            thousands(connections(points, backend, last)),
            high / low,
            connections(points, backend, last) / connections(points, backend, first),
        ));
    }
    let uring = backends.iter().position(|backend| backend == "uring");
    let reference = rates
        .iter()
        .position(|rate| (*rate - parameters.reference_rate).abs() < 0.5);
    if let (Some(uring), Some(epoll), Some(reference)) = (uring, epoll, reference) {
        let at = ratio(points, uring, epoll, reference);
        if at.is_finite() {
            record.findings.push(format!(
                "At {} requests/s ({} open connections) uring costs {at:.2}× epoll's CPU per request: the aim \
                 (≤ {:.2}×) is {}.",
                thousands(rates[reference]),
                thousands(connections(points, uring, reference)),
                parameters.aim_ratio,
                if at <= parameters.aim_ratio {
                    "met"
                } else {
                    "not met"
                }
            ));
        }
        let worst = (0..rates.len())
            .map(|rate| (rate, ratio(points, uring, epoll, rate)))
            .filter(|(_, value)| value.is_finite())
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((rate, value)) = worst {
            record.findings.push(format!(
                "uring / epoll is at most {value:.2} over the rates (at {} requests/s).",
                thousands(rates[rate])
            ));
        }
    }
    let failed: Vec<String> = backends
        .iter()
        .enumerate()
        .filter_map(|(backend, name)| {
            let errors: u64 = points
                .iter()
                .filter(|point| point.backend == backend)
                .map(|point| point.errors)
                .sum();
            (errors > 0).then(|| format!("{name}: {errors}"))
        })
        .collect();
    record.findings.push(if failed.is_empty() {
        "No request failed on any backend.".to_owned()
    } else {
        format!(
            "Failed requests (all rates and rounds): {}.",
            failed.join("; ")
        )
    });
}
