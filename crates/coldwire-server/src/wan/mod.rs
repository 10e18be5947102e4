//! `coldwire wan`: a WAN emulator in user space — a relay between two endpoints that adds
//! the delay, bandwidth limit and (the effect of) loss of a wide-area path, for each
//! direction, to every connection it carries. Built on the same runtime and I/O layer as
//! the servers ([`WanService`] is a runtime [`Service`]), so it holds thousands of mostly
//! idle connections at no cost per idle connection.
//!
//! [`path`] is the model (what delay a byte gets); `relay` the event loop (accept, delayed
//! connect, per-direction queues released by the connections' timers).

pub mod path;
mod relay;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use coldwire_io::{Driver, DriverConfig};

use crate::error::ServerError;
use crate::runtime::{Live, ReloadHandle, Running, RuntimeConfig, Service, WorkerSeat};
use crate::spawn::WorkerLoop;
pub use path::PathModel;
use relay::{RelayWorkerContext, run_relay_worker};

/// Configuration of a WAN relay.
#[derive(Clone, Debug)]
pub struct WanConfig {
    /// Address, backend, workers, connection limit, stats endpoint, shutdown grace (the
    /// request-head limits and client timeouts do not apply: the relay reads no requests and
    /// holds idle connections for as long as the endpoints do).
    pub runtime: RuntimeConfig,
    /// Where every accepted connection is relayed to.
    pub to: SocketAddr,
    /// The client → server direction.
    pub up: PathModel,
    /// The server → client direction.
    pub down: PathModel,
    /// A bandwidth limit shared by all connections of a worker, per direction (`None`:
    /// unlimited). Use one worker for one shared limit.
    pub aggregate_bits_per_second: Option<u64>,
    /// Bytes a direction may hold (queued here and unwritten) before its source is no
    /// longer read (back-pressure).
    pub queue_bytes: usize,
    /// Seed of the loss and jitter draws (worker `i` uses a seed derived from it).
    pub seed: u64,
}

impl WanConfig {
    /// A relay on `listen` to `to` with an `rtt` round trip, half each way, and no other
    /// impairment.
    pub fn new(listen: SocketAddr, to: SocketAddr, rtt: Duration) -> WanConfig {
        WanConfig {
            runtime: RuntimeConfig::new(listen),
            to,
            up: PathModel::new(rtt / 2, rtt),
            down: PathModel::new(rtt / 2, rtt),
            aggregate_bits_per_second: None,
            queue_bytes: 1 << 20,
            seed: 1,
        }
    }
}

/// The WAN relay, ready to run.
pub struct WanService {
    config: Arc<WanConfig>,
    live: Arc<Live<WanConfig>>,
}

/// A started relay.
pub type RunningRelay = Running<WanService>;

impl Running<WanService> {
    /// Starts the relay described by `config`.
    pub fn start(config: WanConfig) -> Result<RunningRelay, ServerError> {
        let config = Arc::new(config);
        Running::start_service(WanService {
            live: Live::new(config.clone()),
            config,
        })
    }
}

impl ReloadHandle<WanService> {
    /// Reloads the configuration while running (SIGHUP): the path model of each direction
    /// (delay, jitter, bandwidth, loss), the aggregate bandwidth, the queue limit and the
    /// shutdown grace take effect at once — for new connections, and for the bytes that
    /// existing connections send from now (bytes already held keep their due time, and
    /// none overtakes them); what cannot change live — the runtime's fixed settings
    /// ([`RuntimeConfig::keep_fixed`]), the destination (`--to`) and the draws' seed — is
    /// kept as it was and named in the result.
    pub fn reload(&self, mut new: WanConfig) -> Result<Vec<&'static str>, ServerError> {
        let old = self.service().live.current();
        let mut kept = self.reload_runtime(&old.runtime, &mut new.runtime)?;
        if new.to != old.to {
            new.to = old.to;
            kept.push("--to");
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

impl Service for WanService {
    type Worker = RelayWorkerContext;

    fn runtime(&self) -> &RuntimeConfig {
        &self.config.runtime
    }

    fn driver_config(&self, config: DriverConfig) -> DriverConfig {
        // Delays are tens of milliseconds: the timer wheel ticks every millisecond (8 s a
        // rotation), and every relayed connection is two descriptors.
        DriverConfig {
            timer_tick: Duration::from_millis(1),
            ..config
        }
    }

    fn worker(&self, seat: WorkerSeat) -> RelayWorkerContext {
        RelayWorkerContext {
            seat,
            config: self.config.clone(),
            live: self.live.view(),
        }
    }
}

impl WorkerLoop for RelayWorkerContext {
    fn thread_name(&self) -> String {
        format!("coldwire-wan-{}", self.seat.index)
    }

    fn pin(&self) -> Option<usize> {
        self.config.runtime.pin_workers.then_some(self.seat.index)
    }

    fn run<D: Driver>(self, driver: D) -> std::io::Result<()> {
        run_relay_worker(driver, self)
    }
}
