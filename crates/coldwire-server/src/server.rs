//! The origin server (`coldwire serve`) as a runtime [`Service`]: its configuration, its
//! checks before start (the document root exists) and one [`WorkerContext`] per worker;
//! the runtime (`crate::runtime`) does the rest.

use std::sync::Arc;

use coldwire_io::Driver;

use crate::config::ServeConfig;
use crate::error::ServerError;
use crate::runtime::{Running, RuntimeConfig, Service, WorkerSeat};
use crate::spawn::WorkerLoop;
use crate::worker::{WorkerContext, run_worker};

/// The static origin server, ready to run.
pub struct OriginService {
    config: Arc<ServeConfig>,
}

/// A started origin server.
pub type RunningServer = Running<OriginService>;

impl Running<OriginService> {
    /// Starts the server described by `config`.
    pub fn start(config: ServeConfig) -> Result<RunningServer, ServerError> {
        Running::start_service(OriginService {
            config: Arc::new(config),
        })
    }
}

impl Service for OriginService {
    type Worker = WorkerContext;

    fn runtime(&self) -> &RuntimeConfig {
        &self.config.runtime
    }

    fn check(&self) -> Result<(), ServerError> {
        if self.config.root.is_dir() {
            return Ok(());
        }
        let source = std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory");
        Err(ServerError::Root {
            path: self.config.root.clone(),
            source,
        })
    }

    fn worker(&self, seat: WorkerSeat) -> WorkerContext {
        WorkerContext {
            index: seat.index,
            config: self.config.clone(),
            listener: seat.listener,
            stats: seat.stats,
            stop: seat.stop,
            access_log: seat.access_log,
            error_log: seat.error_log,
        }
    }
}

impl WorkerLoop for WorkerContext {
    fn thread_name(&self) -> String {
        format!("coldwire-worker-{}", self.index)
    }

    fn pin(&self) -> Option<usize> {
        self.config.runtime.pin_workers.then_some(self.index)
    }

    fn run<D: Driver>(self, driver: D) -> std::io::Result<()> {
        run_worker(driver, self)
    }
}
