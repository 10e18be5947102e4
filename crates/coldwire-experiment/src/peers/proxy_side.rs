//! The proxy half of `peers`: `coldwire proxy --reverse` and its peers in front of the same
//! origin (`coldwire serve` on the generator's CPU), one worker/process/thread each, pinned
//! to the server CPU.
//!
//! - Cache hits: the cache is filled (three GETs: some caches store on the second), then a
//!   closed loop of keep-alive connections asks for the one object as fast as the proxy
//!   answers; the origin's request counter before and after proves they were hits.
//! - 0% hits: nothing is cached (coldwire `--cache-bytes 0`, nginx `proxy_cache off`,
//!   HAProxy without its cache), a fixed open-loop rate, the proxy's CPU per request.

use std::time::Duration;

use coldwire_report::{ExperimentRecord, Scale, Series, Table};
use serde::{Deserialize, Serialize};

use super::contenders::{Contender, Running, Target, measure, start};
use super::origin::{Origin, get};
use crate::RunContext;
use crate::bench_result::BenchPhase;
use crate::figures::{axis, figure, series, short, thousands};
use crate::serve::{DocumentRoot, Pinning};

/// `[hits]` of `experiments/peers.toml`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HitParameters {
    /// Caches next to coldwire: squid, varnish, nginx, haproxy.
    pub peers: Vec<String>,
    /// Object sizes (seed 000: 1,259 bytes and 8 KiB).
    pub object_bytes: Vec<u64>,
    pub connections: u64,
    pub warmup: f64,
    pub duration: f64,
}

/// `[misses]` of `experiments/peers.toml`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MissParameters {
    /// copy, splice (coldwire), haproxy, haproxy-splice, nginx.
    pub contenders: Vec<String>,
    pub object_bytes: Vec<u64>,
    /// The fixed offered rate, requests/s.
    pub rate: f64,
    pub connections: u64,
    pub warmup: f64,
    pub duration: f64,
}

fn slug(name: &str) -> String {
    name.replace(' ', "-")
}

fn objects(sizes: &[u64]) -> String {
    sizes
        .iter()
        .map(|size| format!("{size} B"))
        .collect::<Vec<_>>()
        .join(" and ")
}

/// Fills `running`'s cache with `path` and checks the answer.
fn fill(running: &Running, path: &str, size: u64) -> anyhow::Result<()> {
    for _ in 0..3 {
        let (status, body) = get(running.address, path)?;
        anyhow::ensure!(
            status == 200 && body.len() as u64 == size,
            "{} answered GET {path} with status {status} and {} bytes (expected 200 and {size})",
            running.name,
            body.len()
        );
    }
    Ok(())
}

/// One measured (contender, object) point.
struct ProxyPoint {
    contender: usize,
    size: u64,
    throughput: f64,
    cpu_us: f64,
    origin_requests: Option<u64>,
}

/// One series per contender (named in `names`, by index): `pick` of its points against
/// object size.
fn by_contender(
    names: &[String],
    points: &[ProxyPoint],
    pick: fn(&ProxyPoint) -> f64,
) -> Vec<Series> {
    names
        .iter()
        .enumerate()
        .map(|(index, name)| {
            series(
                name,
                points
                    .iter()
                    .filter(|point| point.contender == index)
                    .map(|point| (point.size as f64, pick(point))),
            )
        })
        .collect()
}

/// Cache-hit throughput of coldwire and `peers`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_hits(
    context: &RunContext,
    parameters: &HitParameters,
    peers: &[Contender],
    pinning: Pinning,
    record: &mut ExperimentRecord,
    raw_files: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> anyhow::Result<String> {
    let mut contenders = vec![Contender::ColdwireProxy {
        label: "coldwire".into(),
        flags: Vec::new(),
    }];
    contenders.extend(peers.iter().cloned());
    let sweep = Sweep {
        label: "cache hits",
        stem: "hits",
        object_bytes: &parameters.object_bytes,
        load: vec!["--rate=max".to_owned()],
        connections: parameters.connections,
        warmup: parameters.warmup,
        duration: parameters.duration,
        fill: true,
    };
    let points = sweep.run(
        context,
        &contenders,
        pinning,
        raw_files,
        warnings,
        |point, warnings| {
            let phase = point.phase;
            if let Some(misses) = point.origin_requests
                && misses as f64 > 0.01 * phase.sent_requests as f64
            {
                warnings.push(format!(
                    "{}: the origin answered {misses} requests during the run — not every \
                     request was a hit",
                    point.about
                ));
            }
            context.progress(&format!(
                "  {} requests/s, {} µs CPU/request, origin saw {}",
                thousands(phase.achieved_rate),
                short(point.cpu_us),
                point
                    .origin_requests
                    .map_or("?".into(), |count| count.to_string())
            ));
            if let Some(server) = phase.server
                && server.cpu_cores < 0.85
            {
                warnings.push(format!(
                    "{}: the proxy used only {:.2} of its core (its threads waited {:.1} s for a \
                     CPU) — other work on the machine or the generator set the pace, so this \
                     throughput is the share of the CPU it got: compare CPU per request",
                    point.about, server.cpu_cores, server.runqueue_wait_seconds
                ));
            }
        },
    )?;
    anyhow::ensure!(!points.is_empty(), "no cache-hit point could be measured");
    let names: Vec<String> = contenders.iter().map(Contender::name).collect();
    record.figures.push(figure(
        "hits-throughput",
        "Cache-hit throughput vs object size, one proxy core",
        None,
        axis("object size", "bytes", Scale::Log),
        axis("cache hits per second", "requests/s", Scale::Linear),
        by_contender(&names, &points, |point| point.throughput),
        "Closed loop, keep-alive, every request a hit (the origin's counter is checked).",
    ));
    record.figures.push(figure(
        "hits-cpu-per-request",
        "Proxy CPU per cache hit vs object size",
        None,
        axis("object size", "bytes", Scale::Log),
        axis("proxy CPU per request", "µs", Scale::Log),
        by_contender(&names, &points, |point| point.cpu_us),
        "",
    ));
    let mut rows = Vec::new();
    for &size in &parameters.object_bytes {
        let ours = points
            .iter()
            .find(|point| point.contender == 0 && point.size == size);
        for (index, name) in names.iter().enumerate() {
            let Some(point) = points
                .iter()
                .find(|point| point.contender == index && point.size == size)
            else {
                continue;
            };
            let ratio = ours
                .filter(|_| index > 0 && point.throughput > 0.0)
                .map(|ours| ours.throughput / point.throughput);
            rows.push(vec![
                size.to_string(),
                name.clone(),
                thousands(point.throughput),
                short(point.cpu_us),
                point
                    .origin_requests
                    .map_or("n/a".into(), |count| count.to_string()),
                ratio.map_or("—".into(), |ratio| format!("{ratio:.2}×")),
            ]);
        }
        if let Some(ours) = ours {
            let others: Vec<String> = points
                .iter()
                .filter(|point| point.size == size && point.contender > 0 && point.throughput > 0.0)
                .map(|point| {
                    format!(
                        "{:.2}× {}",
                        ours.throughput / point.throughput,
                        names[point.contender]
                    )
                })
                .collect();
            let cpu: Vec<String> = points
                .iter()
                .filter(|point| point.size == size && point.contender > 0 && point.cpu_us > 0.0)
                .map(|point| {
                    format!(
                        "{} µs {} ({:.2}×)",
                        short(point.cpu_us),
                        names[point.contender],
                        ours.cpu_us / point.cpu_us
                    )
                })
                .collect();
            if !cpu.is_empty() && ours.cpu_us.is_finite() {
                record.findings.push(format!(
                    "CPU per cache hit, {size}-byte object (the figure to compare when a proxy did not get its \
                     whole core): coldwire {} µs; {}.",
                    short(ours.cpu_us),
                    cpu.join(", ")
                ));
            }
            record.findings.push(format!(
                "Cache hits, {size}-byte object: coldwire {} requests/s{}.",
                thousands(ours.throughput),
                if others.is_empty() {
                    String::new()
                } else {
                    format!(" — {}", others.join(", "))
                }
            ));
        }
    }
    record.tables.push(Table {
        title: "Cache hits: requests/s and proxy CPU per request, one proxy core".into(),
        columns: vec![
            "object bytes".into(),
            "proxy".into(),
            "requests/s".into(),
            "CPU per request (µs)".into(),
            "origin requests during the run".into(),
            "coldwire / this".into(),
        ],
        rows,
    });
    Ok(format!(
        "Cache hits: coldwire proxy and {} as reverse proxies with a memory cache in front of coldwire serve \
         (objects of {}, Last-Modified in 2020 so every cache keeps them fresh), one worker/process/thread \
         pinned to the server CPU; a closed loop of {} keep-alive connections ({} s warm-up, {} s measured) \
         after three filling requests. HAProxy's cache (2.6) is small and RAM-only: it stores objects up to \
         its max-object-size (1 MiB here) for at most max-age (600 s), does not vary by request headers unless \
         told to, and never revalidates with the origin — enough for these objects.",
        peers
            .iter()
            .map(Contender::name)
            .collect::<Vec<_>>()
            .join(", "),
        objects(&parameters.object_bytes),
        parameters.connections,
        parameters.warmup,
        parameters.duration,
    ))
}

/// CPU per request at 0% hits.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_misses(
    context: &RunContext,
    parameters: &MissParameters,
    contenders: &[Contender],
    pinning: Pinning,
    record: &mut ExperimentRecord,
    raw_files: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> anyhow::Result<String> {
    let sweep = Sweep {
        label: "0% hits",
        stem: "misses",
        object_bytes: &parameters.object_bytes,
        load: vec![
            format!("--rate={}", parameters.rate),
            "--arrivals=constant".to_owned(),
        ],
        connections: parameters.connections,
        warmup: parameters.warmup,
        duration: parameters.duration,
        fill: false,
    };
    let points = sweep.run(
        context,
        contenders,
        pinning,
        raw_files,
        warnings,
        |point, warnings| {
            let phase = point.phase;
            if phase.achieved_rate < 0.95 * parameters.rate {
                warnings.push(format!(
                    "{}: only {} of {} requests/s answered (saturated)",
                    point.about,
                    thousands(phase.achieved_rate),
                    thousands(parameters.rate)
                ));
            }
            if let Some(count) = point.origin_requests
                && (count as f64) < 0.9 * phase.sent_requests as f64
            {
                warnings.push(format!(
                    "{}: the origin answered only {count} requests for {} sent — some were hits",
                    point.about, phase.sent_requests
                ));
            }
            context.progress(&format!(
                "  {} µs proxy CPU per request",
                short(point.cpu_us)
            ));
        },
    )?;
    anyhow::ensure!(!points.is_empty(), "no 0%-hit point could be measured");
    let names: Vec<String> = contenders.iter().map(Contender::name).collect();
    record.figures.push(figure(
        "misses-cpu-per-request",
        &format!(
            "Proxy CPU per request at 0% hits vs object size, {} requests/s",
            thousands(parameters.rate)
        ),
        Some("seed 002, Fig. 7"),
        axis("object size", "bytes", Scale::Log),
        axis("proxy CPU per request", "µs", Scale::Log),
        by_contender(&names, &points, |point| point.cpu_us),
        "Every request goes to the origin; HAProxy splice is `option splice-response`.",
    ));
    let mut rows = Vec::new();
    for &size in &parameters.object_bytes {
        let at: Vec<&ProxyPoint> = points.iter().filter(|point| point.size == size).collect();
        for point in &at {
            rows.push(vec![
                size.to_string(),
                names[point.contender].clone(),
                short(point.cpu_us),
                thousands(point.throughput),
                point
                    .origin_requests
                    .map_or("n/a".into(), |count| count.to_string()),
            ]);
        }
        let cells: Vec<String> = at
            .iter()
            .map(|point| format!("{} {} µs", names[point.contender], short(point.cpu_us)))
            .collect();
        record.findings.push(format!(
            "0% hits, {size}-byte object, proxy CPU per request: {}.",
            cells.join(", ")
        ));
    }
    record.tables.push(Table {
        title: format!(
            "0% hits: proxy CPU per request at {} requests/s",
            thousands(parameters.rate)
        ),
        columns: vec![
            "object bytes".into(),
            "proxy".into(),
            "CPU per request (µs)".into(),
            "achieved requests/s".into(),
            "origin requests during the run".into(),
        ],
        rows,
    });
    Ok(format!(
        "0% hits: {} with nothing cached, objects of {}, a fixed open-loop rate of {} requests/s on {} \
         keep-alive connections ({} s warm-up, {} s measured); CPU per request is the proxy's (all its \
         processes and threads). HAProxy with `option splice-response` splices only body bytes that arrive \
         after it has forwarded the headers (strace during development: no splice calls at 8 KiB, where one \
         read takes the whole response; splice calls at 64 KiB).",
        names.join(", "),
        objects(&parameters.object_bytes),
        thousands(parameters.rate),
        parameters.connections,
        parameters.warmup,
        parameters.duration,
    ))
}

/// One sweep: every contender at every object size, behind one origin.
struct Sweep<'a> {
    /// How progress lines and warnings name the sweep ("cache hits").
    label: &'a str,
    /// How raw files' names start ("hits").
    stem: &'a str,
    object_bytes: &'a [u64],
    /// The generator's load flags (rate, arrivals); the URL, connections and durations are
    /// added around them.
    load: Vec<String>,
    connections: u64,
    warmup: f64,
    duration: f64,
    /// Fill the cache (and check the answer) before measuring.
    fill: bool,
}

/// A measured point, as a sweep's own checks see it.
struct Measured<'a> {
    /// How warnings name the point: "cache hits, nginx, 8192 B".
    about: String,
    phase: &'a BenchPhase,
    /// The proxy's CPU per request (NaN when it could not be read).
    cpu_us: f64,
    /// Requests the origin saw during the run (`None`: its counter could not be read).
    origin_requests: Option<u64>,
}

impl Sweep<'_> {
    /// Starts the origin (on the generator's CPU) and measures each point in turn, with the
    /// origin's request count; `check` adds the sweep's own warnings and progress line. A
    /// point that cannot be measured is skipped with a warning.
    fn run(
        &self,
        context: &RunContext,
        contenders: &[Contender],
        pinning: Pinning,
        raw_files: &mut Vec<String>,
        warnings: &mut Vec<String>,
        check: impl Fn(&Measured, &mut Vec<String>),
    ) -> anyhow::Result<Vec<ProxyPoint>> {
        let origin = Origin::start(&context.coldwire, self.object_bytes, pinning.generator_cpu)?;
        let target = Target {
            coldwire: &context.coldwire,
            root: origin.root(),
            origin: Some(origin.address()),
            cpu: pinning.server_cpu,
        };
        let label = self.label;
        let mut points = Vec::new();
        for &size in self.object_bytes {
            let path = format!("/{}", DocumentRoot::file_name(size));
            for (index, contender) in contenders.iter().enumerate() {
                let name = contender.name();
                context.progress(&format!("{label}: {name}, {size}-byte object"));
                let stem = format!("{}-{}-{size}", self.stem, slug(&name));
                let result = start(contender, &target).and_then(|mut running| {
                    if self.fill {
                        fill(&running, &path, size)?;
                    }
                    let mut args = vec![format!("--url=http://{}{path}", running.address)];
                    args.extend(self.load.iter().cloned());
                    args.extend([
                        format!("--connections={}", self.connections),
                        format!("--warmup={}", self.warmup),
                        format!("--duration={}", self.duration),
                    ]);
                    let before = origin.requests()?;
                    let seconds = self.warmup + self.duration;
                    let timeout = Duration::from_secs_f64(60.0 + 2.0 * seconds);
                    let cpu = pinning.generator_cpu;
                    let measured = measure(context, &mut running, args, cpu, &stem, timeout)?;
                    let after = origin.requests().ok();
                    Ok((measured, after.map(|after| after.saturating_sub(before))))
                });
                let about = format!("{label}, {name}, {size} B");
                match result {
                    Ok(((document, raw), origin_requests)) => {
                        raw_files.push(raw);
                        raw_files.push(format!("raw/{stem}.txt"));
                        let phase = document.phase()?;
                        if phase.errors_total > 0 {
                            warnings
                                .push(format!("{about}: {} requests failed", phase.errors_total));
                        }
                        let cpu_us = phase
                            .server
                            .map_or(f64::NAN, |server| server.cpu_us_per_request);
                        let measured = Measured {
                            about,
                            phase,
                            cpu_us,
                            origin_requests,
                        };
                        check(&measured, warnings);
                        points.push(ProxyPoint {
                            contender: index,
                            size,
                            throughput: phase.achieved_rate,
                            cpu_us,
                            origin_requests,
                        });
                    }
                    Err(error) => {
                        let message = format!("{about}: skipped: {error:#}");
                        context.progress(&format!("warning: {message}"));
                        warnings.push(message);
                    }
                }
            }
        }
        Ok(points)
    }
}
