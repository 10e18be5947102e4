//! The `polymix` record: its description (how the run was scaled to this machine), the
//! figures against the request rate (seed 002 Figs 11–13), the per-point table, and where
//! each configuration stopped climbing.

use coldwire_report::{ExperimentRecord, Scale, Series, Table};

use super::point::Point;
use super::{Config, Parameters};
use crate::figures::{axis, figure, series, short, thousands};
use crate::serve::Pinning;

/// What was run, and how it was scaled to this machine.
pub(crate) fn description(
    parameters: &Parameters,
    pinning: Pinning,
    squid_version: Option<&str>,
    squid: bool,
) -> String {
    let rates = |robots: &[u64]| {
        robots
            .iter()
            .map(|robots| thousands(*robots as f64 * 0.4))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "PolyMix-4 robots (coldwire bench --workload polymix{}, 0.4 requests/s each) through a forward proxy \
         (one worker{}) to {} coldwire origin server(s) (think time {} ± {}), each behind coldwire wan ({} round \
         trip, {} loss). Proxies: coldwire proxy per backend{}; stores {} (memory: a {} cache, objects up to {}; \
         disk: coldwire's --cache-dir of {} beside the same memory tier{}). Per point a fresh proxy; phases fill \
         ({} s, half the robots, recurrence 5%) and top ({} s, all robots, measured). The ladder: {} robots, \
         request rates {} per second, every configuration measured at one rung (order reversed on every other \
         rung) before the next; a configuration stops climbing when its proxy uses {}% of its core or more \
         (saturated), when its hit or miss mean response time passes {}× its value at the first rung, when under \
         90% of the offered rate (and 10 requests/s less) is answered or over 1% fails. Scaled to this machine: two cores, one for the \
         proxy and one shared by the generator, the origins and the relays; 20,000 descriptors per process, and \
         a robot holds about one connection to the proxy (up to four), the proxy one more per miss in flight \
         (rate × 50% × ~2.7 s), so the ladder stops well below the descriptor limit; the generator's core, not \
         the fast proxies', is the one that runs out first.",
        pinning.generator_cpu.map_or(String::new(), |cpu| format!(
            ", with origins and relays on CPU {cpu}"
        )),
        pinning
            .server_cpu
            .map_or(String::new(), |cpu| format!(", pinned to CPU {cpu}")),
        parameters.servers,
        parameters.think,
        parameters.think_sd,
        parameters.rtt,
        parameters.loss,
        if squid {
            format!(
                " and Squid ({}, experiments/peers/squid-forward.conf.in: one worker, the same cache and object \
                 sizes, collapsed forwarding, hits read from `X-Cache: HIT`)",
                squid_version.unwrap_or("version unknown")
            )
        } else {
            " (Squid skipped: not installed)".to_owned()
        },
        parameters.stores.join(" and "),
        parameters.cache_bytes,
        parameters.max_object_bytes,
        parameters.cache_dir_bytes,
        if squid {
            "; Squid: a rock store of that size"
        } else {
            ""
        },
        parameters.fill,
        parameters.top,
        parameters
            .robots
            .iter()
            .map(|robots| thousands(*robots as f64))
            .collect::<Vec<_>>()
            .join(", "),
        rates(&parameters.robots),
        short(parameters.saturation_cpu * 100.0),
        short(parameters.breakdown),
    )
}

fn percent(value: f64) -> String {
    if value.is_finite() {
        format!("{:.1}%", value * 100.0)
    } else {
        "–".to_owned()
    }
}

/// Figures, the per-point table, where each configuration stopped, findings.
pub(crate) fn summarise(
    record: &mut ExperimentRecord,
    parameters: &Parameters,
    configs: &[Config],
    points: &[Point],
    stopped: &[Option<String>],
) {
    let per_config = |value: fn(&Point) -> f64| -> Vec<Series> {
        configs
            .iter()
            .enumerate()
            .map(|(index, config)| {
                series(
                    &config.name(),
                    points
                        .iter()
                        .filter(|point| point.config == index)
                        .map(|point| (point.offered, value(point))),
                )
            })
            .collect()
    };
    let rate = || axis("offered request rate", "requests/s", Scale::Linear);
    record.figures.push(figure(
        "cpu",
        "Proxy CPU vs request rate (PolyMix-4)",
        Some("seed 002 Fig. 11"),
        rate(),
        axis("proxy CPU", "% of a core", Scale::Linear),
        per_config(|point| point.cpu_cores * 100.0),
        "The top phase; one point per rung a configuration reached (its last is where it stopped).",
    ));
    record.figures.push(figure(
        "cpu-per-request",
        "Proxy CPU per request vs request rate (PolyMix-4)",
        Some("seed 002 Fig. 11"),
        rate(),
        axis("proxy CPU per request", "µs", Scale::Log),
        per_config(|point| point.cpu_us),
        "CPU per request is the robust figure on this shared machine.",
    ));
    record.figures.push(figure(
        "hit-response",
        "Hit mean response time vs request rate",
        Some("seed 002 Fig. 12"),
        rate(),
        axis("hit mean response time", "ms", Scale::Log),
        per_config(|point| point.hit_ms),
        "Hits include collapsed requests that waited for another's fetch.",
    ));
    record.figures.push(figure(
        "miss-response",
        "Miss mean response time vs request rate",
        Some("seed 002 Fig. 13"),
        rate(),
        axis("miss mean response time", "ms", Scale::Linear),
        per_config(|point| point.miss_ms),
        "A miss waits for the origin's think time and the relay's round trips.",
    ));
    record.tables.push(Table {
        title: "Top phase per configuration and rate: hit ratios offered / measured, errors"
            .to_owned(),
        columns: [
            "configuration",
            "robots",
            "offered/s",
            "achieved/s",
            "CPU %",
            "µs/request",
            "hit ms",
            "miss ms",
            "DHR off/meas",
            "BHR off/meas",
            "errors",
        ]
        .iter()
        .map(|column| (*column).to_owned())
        .collect(),
        rows: points
            .iter()
            .map(|point| {
                vec![
                    configs[point.config].name(),
                    thousands(point.robots as f64),
                    thousands(point.offered),
                    thousands(point.achieved),
                    short(point.cpu_cores * 100.0),
                    short(point.cpu_us),
                    short(point.hit_ms),
                    short(point.miss_ms),
                    format!("{} / {}", percent(point.dhr.0), percent(point.dhr.1)),
                    format!("{} / {}", percent(point.bhr.0), percent(point.bhr.1)),
                    point.errors.to_string(),
                ]
            })
            .collect(),
    });
    let top = parameters.robots.last().copied().unwrap_or(0);
    let mut rows = Vec::new();
    for (index, config) in configs.iter().enumerate() {
        let mine: Vec<&Point> = points
            .iter()
            .filter(|point| point.config == index)
            .collect();
        let Some(last) = mine.last() else {
            rows.push(vec![
                config.name(),
                "–".into(),
                "–".into(),
                "–".into(),
                stopped[index]
                    .clone()
                    .unwrap_or_else(|| "not measured".into()),
            ]);
            continue;
        };
        let reason = stopped[index].clone().unwrap_or_else(|| {
            format!(
                "reached the ladder's top ({} robots) without saturating: the generator's shared core and \
                 descriptors end the ladder there",
                thousands(top as f64)
            )
        });
        rows.push(vec![
            config.name(),
            thousands(last.achieved),
            short(last.cpu_cores * 100.0),
            short(last.cpu_us),
            reason.clone(),
        ]);
        let first = mine[0];
        record.findings.push(format!(
            "{}: {} → {} requests/s offered, proxy CPU {}% → {}% of a core ({} → {} µs per request), hits {} → {} \
             ms, misses {} → {} ms mean; measured document hit ratio {} at its last rung (offered {}). Where it \
             stopped: {reason}.",
            config.name(),
            thousands(first.offered),
            thousands(last.offered),
            short(first.cpu_cores * 100.0),
            short(last.cpu_cores * 100.0),
            short(first.cpu_us),
            short(last.cpu_us),
            short(first.hit_ms),
            short(last.hit_ms),
            short(first.miss_ms),
            short(last.miss_ms),
            percent(last.dhr.1),
            percent(last.dhr.0),
        ));
    }
    record.tables.push(Table {
        title: "Where each configuration stopped climbing".to_owned(),
        columns: [
            "configuration",
            "last achieved/s",
            "CPU % there",
            "µs/request there",
            "why it stopped",
        ]
        .iter()
        .map(|column| (*column).to_owned())
        .collect(),
        rows,
    });
    let failed: u64 = points.iter().map(|point| point.errors).sum();
    record.findings.push(if failed == 0 {
        "No request failed.".to_owned()
    } else {
        format!("{failed} requests failed over the run (see the table).")
    });
}
