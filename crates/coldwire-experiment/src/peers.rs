//! The `peers` experiment: the measurements of `cold-scaling`, `rate-response` and the
//! proxy scenarios, for coldwire and its peers on identical setups.
//!
//! - Server ([`server_side`]): `coldwire serve` (epoll, one worker) vs nginx (one worker,
//!   logs off, sendfile on): saturation throughput and CPU per request against cold
//!   connections, and response time against offered rate, naive vs realistic (750 cold).
//! - Proxy ([`proxy_side`]): cache-hit throughput against Squid, Varnish, nginx proxy_cache
//!   and HAProxy's cache; CPU per request at 0% hits, coldwire copying and splicing vs
//!   HAProxy (buffered and `option splice-response`) and nginx.
//!
//! Missing peers are installed with apt-get ([`install`]); each is configured from a
//! committed template under `experiments/peers/` ([`config`]), started in the foreground
//! pinned to the server CPU on a port picked free at run time ([`contenders`]), and stopped.
//! A peer that cannot be installed or started leaves a warning in the record; the rest
//! still runs.

pub(crate) mod config;
pub(crate) mod contenders;
pub(crate) mod install;
pub(crate) mod origin;
mod proxy_side;
mod server_side;

use coldwire_report::ExperimentRecord;
use serde::{Deserialize, Serialize};

use crate::RunContext;
use crate::figures::machine_load_warning;
use crate::serve::Pinning;
use contenders::Contender;

/// The scenario's parameters (`experiments/peers.toml`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Parameters {
    /// Install missing peers with apt-get without being asked (as `--install-peers`);
    /// false when absent.
    #[serde(default)]
    install: bool,
    /// coldwire serve vs nginx.
    server: server_side::ServerParameters,
    /// Cache hits.
    hits: proxy_side::HitParameters,
    /// Misses (0% hits).
    misses: proxy_side::MissParameters,
    #[serde(default)]
    pinning: Option<Pinning>,
}

/// A peer name of the scenario as the contender it means, for cache hits.
fn hit_contender(name: &str) -> anyhow::Result<Contender> {
    Contender::cache_peer(name, "cache peer", "experiments/peers.toml [hits]")
}

/// A peer name of the scenario as the contender it means, for misses.
fn miss_contender(name: &str) -> anyhow::Result<Contender> {
    Ok(match name {
        "copy" => Contender::ColdwireProxy {
            label: "coldwire copy".into(),
            flags: ["--data-path", "copy", "--cache-bytes", "0"]
                .map(String::from)
                .to_vec(),
        },
        "splice" => Contender::ColdwireProxy {
            label: "coldwire splice".into(),
            flags: [
                "--data-path",
                "splice",
                "--splice-threshold",
                "1",
                "--cache-bytes",
                "0",
            ]
            .map(String::from)
            .to_vec(),
        },
        "nginx" => Contender::NginxProxy { cache: false },
        "haproxy" => Contender::Haproxy {
            cache: false,
            splice: false,
        },
        "haproxy-splice" => Contender::Haproxy {
            cache: false,
            splice: true,
        },
        other => anyhow::bail!(
            "unknown miss contender {other:?} in experiments/peers.toml [misses]: use copy, splice, nginx, haproxy or haproxy-splice"
        ),
    })
}

/// Runs the experiment.
pub fn run(context: &RunContext) -> anyhow::Result<ExperimentRecord> {
    let parameters: Parameters = context.parameters()?;
    let pinning = parameters.pinning.unwrap_or_default();
    let servers: Vec<Contender> = parameters
        .server
        .peers
        .iter()
        .map(|name| match name.as_str() {
            "nginx" => Ok(Contender::NginxStatic),
            other => Err(anyhow::anyhow!(
                "unknown server peer {other:?} in experiments/peers.toml [server]: use nginx"
            )),
        })
        .collect::<anyhow::Result<_>>()?;
    let hits: Vec<Contender> = parameters
        .hits
        .peers
        .iter()
        .map(|name| hit_contender(name))
        .collect::<anyhow::Result<_>>()?;
    let misses: Vec<Contender> = parameters
        .misses
        .contenders
        .iter()
        .map(|name| miss_contender(name))
        .collect::<anyhow::Result<_>>()?;
    let mut programs = Vec::new();
    for program in servers
        .iter()
        .chain(&hits)
        .chain(&misses)
        .filter_map(Contender::program)
    {
        if !programs.contains(&program) {
            programs.push(program);
        }
    }
    let mut warnings = install::ensure(
        &programs,
        parameters.install || context.install_peers,
        &|line| context.progress(line),
    );
    for warning in &warnings {
        context.progress(&format!("warning: {warning}"));
    }
    warnings.extend(machine_load_warning());
    let mut record = context.record(
        "coldwire and its peers on identical setups: nginx, Squid, Varnish, HAProxy",
        &["seed 000, Fig. 9", "seed 000, Fig. 3", "seed 002, Fig. 7"],
        String::new(),
    );
    let mut raw_files = Vec::new();
    let mut description = Vec::new();
    let mut parts = 0;
    let mut outcome =
        |name: &str, result: anyhow::Result<String>, warnings: &mut Vec<String>| match result {
            Ok(text) => {
                description.push(text);
                parts += 1;
            }
            Err(error) => {
                let message = format!("{name} failed: {error:#}");
                context.progress(&format!("warning: {message}"));
                warnings.push(message);
            }
        };
    let mut all = vec![Contender::ColdwireServe];
    all.extend(servers);
    let result = server_side::run(
        context,
        &parameters.server,
        &all,
        pinning,
        &mut record,
        &mut raw_files,
        &mut warnings,
    );
    outcome("the server comparison", result, &mut warnings);
    let result = proxy_side::run_hits(
        context,
        &parameters.hits,
        &hits,
        pinning,
        &mut record,
        &mut raw_files,
        &mut warnings,
    );
    outcome("the cache-hit comparison", result, &mut warnings);
    let result = proxy_side::run_misses(
        context,
        &parameters.misses,
        &misses,
        pinning,
        &mut record,
        &mut raw_files,
        &mut warnings,
    );
    outcome("the 0%-hit comparison", result, &mut warnings);
    anyhow::ensure!(
        parts > 0,
        "nothing could be measured: {}",
        warnings.join("; ")
    );
    let versions: Vec<String> = programs
        .iter()
        .filter_map(|program| install::version(*program))
        .collect();
    if !versions.is_empty() {
        description.push(format!("Peer versions: {}.", versions.join("; ")));
    }
    record.description = description.join(" ");
    record.seed_comparison.push(
        "The seeds measured their own servers and Squid, not these peers: this experiment puts the seeds' \
         loads — seed 000's cold connections (Fig. 9) and naive vs realistic rate curves (Fig. 3), seed 002's \
         CPU per request at 0% hits (Fig. 7) — on coldwire and today's servers and caches, side by side on \
         the same CPU, so the ratios between them are the result."
            .to_owned(),
    );
    record.parameters = serde_json::to_value(&parameters)?;
    record.raw_files = raw_files;
    record.warnings = warnings;
    Ok(record)
}
