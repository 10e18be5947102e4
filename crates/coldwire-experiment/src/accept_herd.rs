//! The `accept-herd` experiment (seed 004, "Accept scalability"): does today's kernel wake
//! one worker per incoming connection, or the whole herd? For N worker threads and four
//! ways of waiting (blocking `accept()` on one listener, one epoll instance per thread on a
//! shared listener without and with `EPOLLEXCLUSIVE`, one `SO_REUSEPORT` listener per
//! thread) it counts wake-ups per accepted connection, how evenly the workers shared the
//! connections, and the connection rate. Measured in process; [`workers`] does one point,
//! [`summary`] turns the points into the record.

mod summary;
mod workers;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::{ExperimentRecord, RunContext, scenario};
use workers::{Mode, PointResult};

/// The experiment's name (scenario file stem, results directory).
const NAME: &str = "accept-herd";
/// Most worker threads a point may use.
const MAX_WORKERS: usize = 512;
/// Most connections a point may make.
const MAX_CONNECTIONS: u64 = 1_000_000;
/// Most client threads.
const MAX_CLIENT_THREADS: usize = 64;
/// Most repetitions.
const MAX_REPETITIONS: usize = 50;
/// Connections of the discarded warm-up point.
const WARM_UP_CONNECTIONS: u64 = 500;

/// The scenario's keys (`experiments/accept-herd.toml`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Parameters {
    /// Worker-thread counts N, one point per mode for each.
    workers: Vec<usize>,
    /// Connections per point (per mode and N).
    connections_per_point: u64,
    /// Client threads; each keeps one connection in flight (connects, then waits for the
    /// server's close).
    client_threads: usize,
    /// Repetitions of every point (modes and N interleaved); medians are plotted.
    repetitions: usize,
}

impl Parameters {
    fn from_scenario(scenario: &serde_json::Value) -> anyhow::Result<Self> {
        let mut parameters: Parameters = scenario::parameters(NAME, scenario)?;
        let workers = &mut parameters.workers;
        scenario::check_list(NAME, "workers", workers, MAX_WORKERS, "[1, 2, 4, 8]")?;
        let connections = parameters.connections_per_point;
        scenario::check_count(NAME, "connections_per_point", connections, MAX_CONNECTIONS)?;
        let threads = parameters.client_threads;
        scenario::check_count(NAME, "client_threads", threads, MAX_CLIENT_THREADS)?;
        let repetitions = parameters.repetitions;
        scenario::check_count(NAME, "repetitions", repetitions, MAX_REPETITIONS)?;
        Ok(parameters)
    }
}

/// Runs the experiment.
pub fn run(context: &RunContext) -> anyhow::Result<ExperimentRecord> {
    let parameters = Parameters::from_scenario(&context.scenario)?;
    // A discarded warm-up point, so the first measured one does not pay for first-use
    // costs (thread stacks, page faults, socket caches).
    workers::measure(
        Mode::BlockingAccept,
        1,
        parameters.connections_per_point.min(WARM_UP_CONNECTIONS),
        1,
    )
    .context("accept-herd: the warm-up point failed")?;
    let mut points: Vec<PointResult> = Vec::new();
    for repetition in 0..parameters.repetitions {
        for &workers in &parameters.workers {
            for mode in Mode::ALL {
                let mut point = workers::measure(
                    mode,
                    workers,
                    parameters.connections_per_point,
                    parameters.client_threads,
                )
                .with_context(|| format!("{NAME}: {} with {workers} workers", mode.label()))?;
                point.repetition = repetition;
                points.push(point);
            }
        }
    }
    let raw_dir = context.dir.join("raw");
    std::fs::create_dir_all(&raw_dir)
        .with_context(|| format!("cannot create {}", raw_dir.display()))?;
    let raw_file = "raw/points.json";
    let raw = serde_json::json!({ "parameters": &parameters, "points": &points });
    let raw_path = context.dir.join(raw_file);
    std::fs::write(&raw_path, serde_json::to_vec_pretty(&raw)?)
        .with_context(|| format!("cannot write {}", raw_path.display()))?;
    let parameters = serde_json::to_value(&parameters)?;
    Ok(summary::record(
        context,
        parameters,
        &points,
        vec![raw_file.to_owned()],
    ))
}
