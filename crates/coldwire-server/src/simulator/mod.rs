//! `coldwire origin`: an origin server simulator, Web Polygraph's server side. It serves
//! every URL whose last segment is an object id, with the object that id names in the
//! content mix (`coldwire_workload`: PolyMix-4 by default — kinds, sizes, cachability, life
//! cycles with truthful expiry), a body generated from the id (verifiable byte for byte),
//! `304`s for current validators, and a server think time (PolyMix-4: normal, mean 2.5 s,
//! sd 1 s) held in a per-connection queue, not a thread. No files, no state. Or, with a
//! trace ([`SimulatorConfig::trace`]), every path the trace logged with the size it logged.
//!
//! A runtime [`Service`] like the others: any backend, workers, `--admin`, graceful stop.

mod answer;
mod trace_answer;
mod worker;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use coldwire_io::Driver;
use coldwire_workload::ContentMix;
use coldwire_workload::trace::Catalogue;

use crate::error::ServerError;
use crate::runtime::{Live, ReloadHandle, Running, RuntimeConfig, Service, WorkerSeat};
use crate::spawn::WorkerLoop;
pub use answer::object_id;
pub use trace_answer::TRACE_MAX_AGE;
use worker::{SimulatorWorkerContext, run_simulator_worker};

/// The server's think time: a normal draw, never below zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThinkTime {
    /// Mean.
    pub mean: Duration,
    /// Standard deviation.
    pub sd: Duration,
}

impl ThinkTime {
    /// PolyMix-4's `xact_think = norm(2.5sec, 1sec)`.
    pub const POLYMIX4: ThinkTime = ThinkTime {
        mean: Duration::from_millis(2500),
        sd: Duration::from_secs(1),
    };

    /// No think time (microbenchmarks).
    pub const NONE: ThinkTime = ThinkTime {
        mean: Duration::ZERO,
        sd: Duration::ZERO,
    };
}

/// Configuration of the origin simulator.
#[derive(Clone, Debug)]
pub struct SimulatorConfig {
    /// Address, backend, workers, limits, timeouts, stats endpoint, shutdown grace.
    pub runtime: RuntimeConfig,
    /// The objects served.
    pub mix: ContentMix,
    /// Serve a trace's objects instead of the mix's (`--trace`): each logged path with its
    /// logged size, 404 for any other path.
    pub trace: Option<Arc<Catalogue>>,
    /// The think time before each answer.
    pub think: ThinkTime,
    /// Seed of the think-time draws (worker `i` derives its own).
    pub seed: u64,
}

impl SimulatorConfig {
    /// PolyMix-4 objects and think time on `listen`.
    pub fn new(listen: SocketAddr) -> SimulatorConfig {
        SimulatorConfig {
            runtime: RuntimeConfig::new(listen),
            mix: ContentMix::polymix4(1),
            trace: None,
            think: ThinkTime::POLYMIX4,
            seed: 1,
        }
    }
}

/// The origin simulator, ready to run.
pub struct SimulatorService {
    config: Arc<SimulatorConfig>,
    live: Arc<Live<SimulatorConfig>>,
}

/// A started origin simulator.
pub type RunningSimulator = Running<SimulatorService>;

impl Running<SimulatorService> {
    /// Starts the simulator described by `config`.
    pub fn start(config: SimulatorConfig) -> Result<RunningSimulator, ServerError> {
        let config = Arc::new(config);
        Running::start_service(SimulatorService {
            live: Live::new(config.clone()),
            config,
        })
    }
}

impl ReloadHandle<SimulatorService> {
    /// Reloads the configuration while running (SIGHUP): the think time, the timeouts and
    /// request limits, the shutdown grace take effect for the requests parsed from now (an
    /// answer already held in its think time keeps its due time); what cannot change live
    /// — the runtime's fixed settings ([`RuntimeConfig::keep_fixed`]) and the objects
    /// served (mix, trace, seed: the robots must see the same objects throughout) — is
    /// kept as it was and named in the result.
    pub fn reload(&self, mut new: SimulatorConfig) -> Result<Vec<&'static str>, ServerError> {
        let old = self.service().live.current();
        let mut kept = self.reload_runtime(&old.runtime, &mut new.runtime)?;
        if new.mix != old.mix {
            new.mix = old.mix.clone();
            kept.push("--mix");
        }
        let same_trace = match (&new.trace, &old.trace) {
            (Some(new), Some(old)) => Arc::ptr_eq(new, old),
            (None, None) => true,
            _ => false,
        };
        if !same_trace {
            new.trace = old.trace.clone();
            kept.push("--trace");
        }
        if new.seed != old.seed {
            new.seed = old.seed;
            kept.push("--seed");
        }
        self.service().live.replace(new);
        self.wake();
        Ok(kept)
    }
}

impl Service for SimulatorService {
    type Worker = SimulatorWorkerContext;

    fn runtime(&self) -> &RuntimeConfig {
        &self.config.runtime
    }

    fn driver_config(&self, config: coldwire_io::DriverConfig) -> coldwire_io::DriverConfig {
        // Think times are drawn to the millisecond; the wheel's 8 s rotation covers them.
        coldwire_io::DriverConfig {
            timer_tick: Duration::from_millis(1),
            ..config
        }
    }

    fn worker(&self, seat: WorkerSeat) -> SimulatorWorkerContext {
        SimulatorWorkerContext {
            seat,
            config: self.config.clone(),
            live: self.live.view(),
        }
    }
}

impl WorkerLoop for SimulatorWorkerContext {
    fn thread_name(&self) -> String {
        format!("coldwire-origin-{}", self.seat.index)
    }

    fn pin(&self) -> Option<usize> {
        self.config.runtime.pin_workers.then_some(self.seat.index)
    }

    fn run<D: Driver>(self, driver: D) -> std::io::Result<()> {
        run_simulator_worker(driver, self)
    }
}
