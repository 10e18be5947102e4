//! One point of `polymix`: a fresh proxy (coldwire on one backend, or Squid; memory or
//! disk store), the robots' fill and top phases through it, the top phase's figures; and
//! when a configuration stops climbing the ladder ([`stop_reason`]).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use super::{Config, Parameters};
use crate::RunContext;
use crate::figures::{short, thousands};
use crate::peers::contenders::{self, Contender, SquidStore, Target};
use crate::process::run_bench;
use crate::serve::Pinning;

/// The proxy of a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Proxy {
    /// `coldwire proxy --io BACKEND`.
    Coldwire(String),
    /// Squid (`squid-forward.conf.in`).
    Squid,
}

/// One measured point (the top phase).
#[derive(Clone, Debug, Default)]
pub(crate) struct Point {
    pub config: usize,
    pub robots: u64,
    pub offered: f64,
    pub achieved: f64,
    pub cpu_cores: f64,
    pub cpu_us: f64,
    pub hit_ms: f64,
    pub miss_ms: f64,
    pub dhr: (f64, f64),
    pub bhr: (f64, f64),
    pub errors: u64,
}

/// The robots' scenario: a fill phase with half the robots and a measured top phase.
pub(crate) fn robots_scenario(parameters: &Parameters) -> String {
    format!(
        "[origin]\nthink = \"{}\"\nthink_sd = \"{}\"\n\n[[phase]]\nname = \"fill\"\nduration = \"{}s\"\nrobots = [0.5, 0.5]\nrecurrence = [0.0909, 0.0909]\nfreeze_working_set = true\n\n[[phase]]\nname = \"top\"\nduration = \"{}s\"\nrobots = [1.0, 1.0]\n",
        parameters.think, parameters.think_sd, parameters.fill, parameters.top
    )
}

/// `256MiB`, `1GiB`, `8M`, `4096`: bytes (binary multiples, as coldwire reads them).
pub(crate) fn bytes(text: &str) -> anyhow::Result<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .with_context(|| format!("`{text}` is not a size such as 256MiB"))?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        other => anyhow::bail!("`{other}` in `{text}` is not a size unit: use KiB, MiB or GiB"),
    };
    Ok(number << shift)
}

/// Why `point` ends its configuration's climb, if it does: the proxy saturated its core,
/// or the response time broke down against the configuration's `first` point (over
/// `breakdown` times it and at least 100 ms more), or the
/// load was not carried (under 90% answered, over 1% failed).
pub(crate) fn stop_reason(point: &Point, first: &Point, parameters: &Parameters) -> Option<String> {
    let at = format!(
        "at {} robots ({} requests/s offered)",
        thousands(point.robots as f64),
        thousands(point.offered)
    );
    if point.cpu_cores >= parameters.saturation_cpu {
        return Some(format!(
            "saturated {at}: proxy CPU {}% of its core",
            short(point.cpu_cores * 100.0)
        ));
    }
    let factor = parameters.breakdown;
    for (what, now, then) in [
        ("hit", point.hit_ms, first.hit_ms),
        ("miss", point.miss_ms, first.miss_ms),
    ] {
        // At least 100 ms worse too: a few milliseconds' hit tripling is not a breakdown.
        if now.is_finite() && then.is_finite() && now > factor * then && now > then + 100.0 {
            return Some(format!(
                "response time broke down {at}: {what} mean {} ms, over {}× its {} ms at the first rung",
                short(now),
                short(factor),
                short(then)
            ));
        }
    }
    // Under 90% answered, and by 10 requests/s at least: a few requests of a small rate
    // still in flight at the phase's end are not a lost load.
    if point.achieved < 0.9 * point.offered && point.offered - point.achieved >= 10.0 {
        return Some(format!(
            "load not carried {at}: {} requests/s answered",
            thousands(point.achieved)
        ));
    }
    let answered = point.achieved * parameters.top;
    if answered > 0.0 && point.errors as f64 > 0.01 * answered {
        return Some(format!(
            "{at}: {} requests failed (over 1%)",
            thousands(point.errors as f64)
        ));
    }
    None
}

/// Measures one point: a fresh proxy for `config`, the robots' phases through it.
pub(crate) fn measure(
    context: &RunContext,
    parameters: &Parameters,
    relays: &[SocketAddr],
    scenario: &Path,
    pinning: Pinning,
    config: &Config,
    robots: u64,
) -> anyhow::Result<(Point, Vec<String>)> {
    // coldwire's disk store directory, removed after the point (Squid's rock store lives
    // in its own working directory, removed with it).
    let cache_dir = crate::output::scratch_dir("coldwire-polymix-disk")?;
    let disk = config.store == "disk";
    let contender = match &config.proxy {
        Proxy::Coldwire(backend) => {
            let mut flags = vec![
                "--io".to_owned(),
                backend.clone(),
                "--cache-bytes".into(),
                parameters.cache_bytes.clone(),
                "--max-object-bytes".into(),
                parameters.max_object_bytes.clone(),
            ];
            if disk {
                flags.extend([
                    "--cache-dir".into(),
                    cache_dir.display().to_string(),
                    "--cache-dir-size".into(),
                    parameters.cache_dir_bytes.clone(),
                ]);
            }
            Contender::ColdwireProxy {
                label: backend.clone(),
                flags,
            }
        }
        Proxy::Squid => Contender::SquidForward(SquidStore {
            memory_bytes: bytes(&parameters.cache_bytes)?,
            max_object_bytes: bytes(&parameters.max_object_bytes)?,
            rock_bytes: disk
                .then(|| bytes(&parameters.cache_dir_bytes))
                .transpose()?,
        }),
    };
    let target = Target {
        coldwire: &context.coldwire,
        root: Path::new("/"),
        // No origin: coldwire proxy runs as a forward proxy.
        origin: None,
        cpu: pinning.server_cpu,
    };
    let result = run_robots(
        context, parameters, relays, scenario, pinning, &contender, &target, config, robots,
    );
    let _ = std::fs::remove_dir_all(&cache_dir);
    result
}

#[allow(clippy::too_many_arguments)]
fn run_robots(
    context: &RunContext,
    parameters: &Parameters,
    relays: &[SocketAddr],
    scenario: &Path,
    pinning: Pinning,
    contender: &Contender,
    target: &Target<'_>,
    config: &Config,
    robots: u64,
) -> anyhow::Result<(Point, Vec<String>)> {
    let mut running = contenders::start(contender, target)?;
    let mut bench = vec![
        "--workload".to_owned(),
        "polymix".into(),
        "--scenario".into(),
        scenario.display().to_string(),
        "--robots".into(),
        robots.to_string(),
        "--proxy".into(),
        running.address.to_string(),
        "--server-pid".into(),
        running.process.pid().to_string(),
    ];
    if let Some(stats) = &running.stats_url {
        bench.extend(["--server-stats".into(), stats.clone()]);
    }
    for relay in relays {
        bench.push(format!("--url=http://{relay}/"));
    }
    let stem = format!(
        "{}-{}-{robots}",
        config.store,
        match &config.proxy {
            Proxy::Coldwire(backend) => backend.as_str(),
            Proxy::Squid => "squid",
        }
    );
    let relative = format!("raw/{stem}.json");
    let timeout = Duration::from_secs_f64(180.0 + 2.0 * (parameters.fill + parameters.top));
    let result = run_bench(
        &context.coldwire,
        &bench,
        pinning.generator_cpu,
        &context.dir.join(&relative),
        timeout,
    );
    let died = !running.process.is_running();
    let stderr = running.process.stderr_tail();
    running.stop();
    if let Err(error) = result {
        if died {
            return Err(error.context(format!(
                "{} died during the run; its stderr:\n{stderr}",
                running.name
            )));
        }
        // The population JSON may not fit the fixed-rate reader; what matters is that it was written.
        if !context.dir.join(&relative).is_file() {
            return Err(error);
        }
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(context.dir.join(&relative))?)
            .context("the bench's JSON")?;
    let phase = json["runs"][0]["phases"]
        .as_array()
        .and_then(|phases| phases.iter().find(|phase| phase["label"] == "top"))
        .context("the bench's JSON has no `top` phase")?;
    let population = &phase["population"];
    let number = |value: &serde_json::Value| value.as_f64().unwrap_or(f64::NAN);
    let point = Point {
        offered: number(&phase["offered_rate"]),
        achieved: number(&phase["achieved_rate"]),
        cpu_cores: number(&phase["server"]["cpu_cores"]),
        cpu_us: number(&phase["server"]["cpu_us_per_request"]),
        hit_ms: number(&population["hit_latency"]["mean_us"]) / 1000.0,
        miss_ms: number(&population["miss_latency"]["mean_us"]) / 1000.0,
        dhr: (
            number(&population["offered_document_hit_ratio"]),
            number(&population["measured_document_hit_ratio"]),
        ),
        bhr: (
            number(&population["offered_byte_hit_ratio"]),
            number(&population["measured_byte_hit_ratio"]),
        ),
        errors: phase["errors_total"].as_u64().unwrap_or(0),
        ..Point::default()
    };
    Ok((point, vec![relative, format!("raw/{stem}.txt")]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parameters() -> Parameters {
        toml::from_str(
            r#"
            backends = ["epoll"]
            robots = [10]
            stores = ["memory"]
            servers = 1
            think = "1s"
            think_sd = "0s"
            rtt = "80ms"
            loss = "0%"
            cache_bytes = "64MiB"
            fill = 1.0
            top = 10.0
            "#,
        )
        .unwrap()
    }

    #[test]
    fn sizes_read_as_coldwire_reads_them() {
        assert_eq!(bytes("256MiB").unwrap(), 256 << 20);
        assert_eq!(bytes("1GiB").unwrap(), 1 << 30);
        assert_eq!(bytes("8M").unwrap(), 8 << 20);
        assert_eq!(bytes("4096").unwrap(), 4096);
        assert!(bytes("8 parsecs").is_err());
    }

    #[test]
    fn a_configuration_stops_at_saturation_or_breakdown_only() {
        let parameters = parameters();
        let first = Point {
            robots: 100,
            offered: 40.0,
            achieved: 40.0,
            cpu_cores: 0.05,
            hit_ms: 250.0,
            miss_ms: 2700.0,
            ..Point::default()
        };
        let calm = Point {
            robots: 1000,
            offered: 400.0,
            achieved: 398.0,
            cpu_cores: 0.5,
            hit_ms: 300.0,
            miss_ms: 2800.0,
            errors: 3,
            ..first.clone()
        };
        assert_eq!(stop_reason(&calm, &first, &parameters), None);
        let busy = Point {
            cpu_cores: 0.97,
            ..calm.clone()
        };
        let reason = stop_reason(&busy, &first, &parameters).unwrap();
        assert!(reason.contains("saturated at 1,000 robots"), "{reason}");
        assert!(reason.contains("97"), "{reason}");
        let slow = Point {
            hit_ms: 900.0,
            ..calm.clone()
        };
        let reason = stop_reason(&slow, &first, &parameters).unwrap();
        assert!(reason.contains("hit mean 900 ms"), "{reason}");
        let quick = Point {
            hit_ms: 4.0,
            ..first.clone()
        };
        let tiny_first = Point {
            hit_ms: 1.0,
            ..first.clone()
        };
        assert_eq!(stop_reason(&quick, &tiny_first, &parameters), None);
        let small = Point {
            offered: 27.0,
            achieved: 23.0,
            errors: 0,
            ..calm.clone()
        };
        assert_eq!(stop_reason(&small, &first, &parameters), None);
        let dropped = Point {
            achieved: 300.0,
            ..calm.clone()
        };
        assert!(
            stop_reason(&dropped, &first, &parameters)
                .unwrap()
                .contains("not carried")
        );
        let failing = Point {
            errors: 100,
            ..calm
        };
        assert!(
            stop_reason(&failing, &first, &parameters)
                .unwrap()
                .contains("failed")
        );
    }
}
