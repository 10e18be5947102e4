//! The `live-day` record's figures, tables and findings, computed from the proxy's stats
//! logs and profiles: the seed's statistics tables (3, 8, 14), its regressions of CPU time
//! against request rate over the full day and above a rate threshold (4, 5, 9, 15), and its
//! profile tables grouped by what the time went to (1, 2, 6, 7).

use coldwire_report::stats_log::{LinearFit, linear_regression};
use coldwire_report::{ExperimentRecord, Scale, Table};

use super::profile::GROUPS;
use super::{Parameters, Run};
use crate::figures::{axis, figure, series, short, thousands};
use crate::serve::Pinning;

pub(super) fn description(parameters: &Parameters, pinning: Pinning, perf: bool) -> String {
    format!(
        "A compressed day: {}`{}` replayed {}× faster than logged (coldwire bench --replay, each logged client \
         from its own address) through coldwire proxy (reverse, one worker{}) in front of coldwire origin --trace \
         (every logged path at its logged size), caching {}, backends {}; {} cold connections held to the proxy \
         through coldwire wan ({} ms RTT). The proxy logs its statistics every second (--stats-log); each second \
         is one sample of the regressions (the seed's were 15-minute samples of a real day). {}",
        parameters
            .requests
            .map_or(String::new(), |requests| format!(
                "the first {requests} requests of "
            )),
        parameters.trace,
        parameters.speedup,
        pinning
            .server_cpu
            .map_or(String::new(), |cpu| format!(", pinned to CPU {cpu}")),
        parameters.caching.join(" and "),
        parameters.backends.join(", "),
        parameters.cold,
        parameters.wan_rtt_ms,
        if perf {
            "perf record -e cpu-clock -g sampled the proxy for the whole replay (software clock: this machine has \
             no hardware counters)."
        } else {
            "No profile was taken (perf missing or profiling off)."
        }
    )
}

/// Seconds with requests (the replay's span).
fn active(run: &Run) -> impl Iterator<Item = (usize, &serde_json::Value)> {
    run.samples
        .iter()
        .enumerate()
        .filter(|(_, sample)| sample["requests"].as_u64().unwrap_or(0) > 0)
}

fn number(value: &serde_json::Value) -> f64 {
    value.as_f64().unwrap_or(0.0)
}

/// (rate, user ms/s, system ms/s) of each active second.
fn points(run: &Run) -> Vec<(f64, f64, f64)> {
    run.typed
        .iter()
        .filter(|sample| sample.requests > 0)
        .map(|sample| {
            let per_second = 1000.0 / sample.interval_seconds.max(1e-9);
            (
                sample.requests_per_second,
                sample.cpu.user_seconds * per_second,
                sample.cpu.system_seconds * per_second,
            )
        })
        .collect()
}

fn fits(points: &[(f64, f64, f64)]) -> [Option<LinearFit>; 3] {
    let of = |value: fn(&(f64, f64, f64)) -> f64| {
        linear_regression(
            &points
                .iter()
                .map(|point| (point.0, value(point)))
                .collect::<Vec<_>>(),
        )
    };
    [
        of(|point| point.2),
        of(|point| point.1),
        of(|point| point.1 + point.2),
    ]
}

fn threshold(parameters: &Parameters, points: &[(f64, f64, f64)]) -> f64 {
    let peak = points.iter().map(|point| point.0).fold(0.0, f64::max);
    peak * parameters.threshold_fraction
}

pub(super) fn summarise(record: &mut ExperimentRecord, parameters: &Parameters, runs: &[Run]) {
    record.figures.push(figure(
        "cpu-vs-rate",
        "Proxy CPU (user + system) against request rate, one point per second",
        Some("seed 000, Figs 10 and 12"),
        axis("request rate", "requests/s", Scale::Linear),
        axis("proxy CPU", "ms per second", Scale::Linear),
        runs.iter()
            .map(|run| series(&run.label(), points(run).into_iter().map(|(x, user, system)| (x, user + system))))
            .collect(),
        "A straight line is the seed's model: slope = CPU per request, intercept = the idle cost (cold connections, timers).",
    ));
    record.figures.push(figure(
        "rate-over-day",
        "The compressed day: request rate through the proxy, second by second",
        Some("seed 000, the daily load curve"),
        axis("time since the proxy started", "s", Scale::Linear),
        axis("request rate", "requests/s", Scale::Linear),
        runs.iter()
            .map(|run| {
                series(
                    &run.label(),
                    run.typed
                        .iter()
                        .map(|sample| (sample.uptime_seconds, sample.requests_per_second)),
                )
            })
            .collect(),
        "",
    ));
    record.tables.push(statistics_table(runs));
    let mut full_fits = Vec::new();
    for above in [false, true] {
        let mut table = Table {
            title: if above {
                format!(
                    "Linear regressions of proxy CPU (ms per second) on request rate, seconds at or above {}% of the run's peak rate (seed 000 Table 5)",
                    parameters.threshold_fraction * 100.0
                )
            } else {
                "Linear regressions of proxy CPU (ms per second) on request rate, the full day (seed 000 Tables 4, 9, 15)".to_owned()
            },
            columns: [
                "run",
                "CPU",
                "slope (µs per request)",
                "intercept (ms/s)",
                "R²",
                "points",
                "x-intercept of one core (requests/s)",
            ]
            .iter()
            .map(|column| (*column).to_owned())
            .collect(),
            rows: Vec::new(),
        };
        for run in runs {
            let all = points(run);
            let chosen: Vec<(f64, f64, f64)> = if above {
                let cut = threshold(parameters, &all);
                all.into_iter().filter(|point| point.0 >= cut).collect()
            } else {
                all
            };
            let fitted = fits(&chosen);
            if !above {
                full_fits.push(fitted);
            }
            for (kind, fit) in ["system", "user", "total"].iter().zip(fitted) {
                table.rows.push(match fit {
                    Some(fit) => vec![
                        run.label(),
                        (*kind).to_owned(),
                        format!("{:.1}", fit.slope * 1000.0),
                        format!("{:.2}", fit.intercept),
                        format!("{:.3}", fit.r_squared),
                        fit.points.to_string(),
                        if *kind == "total" && fit.slope > 0.0 {
                            thousands((1000.0 - fit.intercept) / fit.slope)
                        } else {
                            String::new()
                        },
                    ],
                    None => vec![
                        run.label(),
                        (*kind).to_owned(),
                        "–".into(),
                        "–".into(),
                        "–".into(),
                        chosen.len().to_string(),
                        String::new(),
                    ],
                });
            }
        }
        record.tables.push(table);
    }
    for run in runs {
        if let Some(profile) = &run.profile
            && profile.samples > 0
        {
            record.tables.push(profile_table(run, profile));
            record.tables.push(leaf_table(run, profile));
        }
    }
    findings(record, runs, &full_fits);
}

fn statistics_table(runs: &[Run]) -> Table {
    let mut table = Table {
        title: "Statistics of the day per run (seed 000 Tables 3, 8, 14): means over the seconds with requests".to_owned(),
        columns: [
            "run", "seconds", "requests", "mean rate", "peak rate", "user CPU %", "system CPU %",
            "syscalls / request", "waits / request", "hit ratio", "open connections (mean)", "active (mean)",
        ]
        .iter()
        .map(|column| (*column).to_owned())
        .collect(),
        rows: Vec::new(),
    };
    for run in runs {
        let samples: Vec<&serde_json::Value> = active(run).map(|(_, sample)| sample).collect();
        let count = samples.len().max(1) as f64;
        let sum = |path: &[&str]| -> f64 {
            samples
                .iter()
                .map(|sample| number(path.iter().fold(*sample, |value, key| &value[*key])))
                .sum()
        };
        let requests = sum(&["requests"]).max(1.0);
        let seconds = sum(&["interval_seconds"]).max(1e-9);
        let peak = samples
            .iter()
            .map(|sample| number(&sample["requests_per_second"]))
            .fold(0.0, f64::max);
        let hits = sum(&["cache", "hits"]);
        let misses = sum(&["cache", "misses"]);
        table.rows.push(vec![
            run.label(),
            samples.len().to_string(),
            thousands(sum(&["requests"])),
            thousands(requests / seconds),
            thousands(peak),
            format!("{:.1}", 100.0 * sum(&["cpu", "user_seconds"]) / seconds),
            format!("{:.1}", 100.0 * sum(&["cpu", "system_seconds"]) / seconds),
            short(sum(&["syscalls", "total"]) / requests),
            short(sum(&["waits"]) / requests),
            if hits + misses > 0.0 {
                format!("{:.1}%", 100.0 * hits / (hits + misses))
            } else {
                "no cache".to_owned()
            },
            thousands(sum(&["connections", "open"]) / count),
            thousands(sum(&["connections", "active"]) / count),
        ]);
    }
    table
}

fn profile_table(run: &Run, profile: &super::profile::Profile) -> Table {
    let total = profile.samples.max(1) as f64;
    Table {
        title: format!(
            "Where the proxy's time goes, {} ({} cpu-clock samples; seed 000 Tables 1, 2, 6, 7)",
            run.label(),
            profile.samples
        ),
        columns: ["group", "kernel %", "user %", "total %"]
            .iter()
            .map(|c| (*c).to_owned())
            .collect(),
        rows: GROUPS
            .iter()
            .zip(&profile.groups)
            .map(|(name, (kernel, user))| {
                vec![
                    (*name).to_owned(),
                    format!("{:.1}", 100.0 * *kernel as f64 / total),
                    format!("{:.1}", 100.0 * *user as f64 / total),
                    format!("{:.1}", 100.0 * (kernel + user) as f64 / total),
                ]
            })
            .collect(),
    }
}

fn leaf_table(run: &Run, profile: &super::profile::Profile) -> Table {
    let total = profile.samples.max(1) as f64;
    Table {
        title: format!("The busiest functions (sample leaves), {}", run.label()),
        columns: ["function", "mode", "%"]
            .iter()
            .map(|c| (*c).to_owned())
            .collect(),
        rows: profile
            .leaves
            .iter()
            .take(12)
            .map(|(name, kernel, count)| {
                vec![
                    name.clone(),
                    if *kernel { "kernel" } else { "user" }.to_owned(),
                    format!("{:.1}", 100.0 * *count as f64 / total),
                ]
            })
            .collect(),
    }
}

fn findings(record: &mut ExperimentRecord, runs: &[Run], full_fits: &[[Option<LinearFit>; 3]]) {
    for (run, fitted) in runs.iter().zip(full_fits) {
        if let Some(total) = fitted[2] {
            record.findings.push(format!(
                "{}: the proxy's CPU grows by {} µs per request over an idle cost of {} ms per second (R² {:.2}, {} seconds).",
                run.label(),
                short(total.slope * 1000.0),
                short(total.intercept),
                total.r_squared,
                total.points
            ));
        }
    }
    let slope = |backend: &str, caching: bool| {
        runs.iter()
            .zip(full_fits)
            .find(|(run, _)| run.backend == backend && run.caching == caching)
            .and_then(|(_, fitted)| fitted[2])
            .map(|fit| fit.slope)
    };
    for caching in [false, true] {
        if let (Some(select), Some(epoll)) = (slope("select", caching), slope("epoll", caching))
            && epoll > 0.0
        {
            record.findings.push(format!(
                "Caching {}: select's CPU per request is {:.2}× epoll's (regression slopes, same day, same cold connections).",
                if caching { "on" } else { "off" },
                select / epoll
            ));
            record.seed_comparison.push(format!(
                "Seed 000 found the old select()/ufalloc() kernel's slopes significantly steeper than the new \
                 implementation's (its idle-time x-intercept 58 vs 69 requests/s, about 19% more headroom); here \
                 select against epoll with caching {}: {:.2}× the CPU per request.",
                if caching { "on" } else { "off" },
                select / epoll
            ));
        }
    }
    for backend in runs
        .iter()
        .map(|run| run.backend.as_str())
        .collect::<std::collections::BTreeSet<_>>()
    {
        if let (Some(off), Some(on)) = (slope(backend, false), slope(backend, true))
            && off > 0.0
        {
            record.seed_comparison.push(format!(
                "Seed 000: caching enabled made NetCache's slopes considerably steeper (Table 9 vs Table 4); here \
                 {backend} with caching on costs {:.2}× the CPU per request of caching off (hits are served without \
                 the origin, so the proxy may also do less work).",
                on / off
            ));
        }
    }
    for run in runs {
        if let Some(profile) = &run.profile
            && profile.samples > 0
        {
            let total = profile.samples as f64;
            let share = |index: usize| {
                100.0 * (profile.groups[index].0 + profile.groups[index].1) as f64 / total
            };
            record.findings.push(format!(
                "{}: event wait {:.0}%, descriptor allocation {:.0}%, socket I/O {:.0}%, copying {:.0}%, the proxy's own code {:.0}% of its samples.",
                run.label(),
                share(0),
                share(1),
                share(2),
                share(3),
                share(4)
            ));
        }
    }
    record.seed_comparison.push(
        "Seed 000 Table 1 (unmodified kernel, 750 cold connections): select() and its subroutines about 22% and \
         ufalloc() 18% of the CPU; compare the event-wait and descriptor-allocation rows of the profile tables."
            .to_owned(),
    );
}
