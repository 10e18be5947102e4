//! The origin server (`coldwire serve`) as a runtime [`Service`]: its configuration, its
//! checks before start (the document root exists) and one [`WorkerContext`] per worker;
//! the runtime (`crate::runtime`) does the rest.

use std::sync::Arc;

use coldwire_io::Driver;

use crate::config::ServeConfig;
use crate::error::ServerError;
use crate::runtime::{Live, ReloadHandle, Running, RuntimeConfig, Service, WorkerSeat};
use crate::spawn::WorkerLoop;
use crate::worker::{WorkerContext, run_worker};

/// The static origin server, ready to run.
pub struct OriginService {
    config: Arc<ServeConfig>,
    live: Arc<Live<ServeConfig>>,
}

/// A started origin server.
pub type RunningServer = Running<OriginService>;

impl Running<OriginService> {
    /// Starts the server described by `config`.
    pub fn start(config: ServeConfig) -> Result<RunningServer, ServerError> {
        let config = Arc::new(config);
        Running::start_service(OriginService {
            live: Live::new(config.clone()),
            config,
        })
    }
}

impl ReloadHandle<OriginService> {
    /// Reloads the configuration while running (SIGHUP): timeouts, request limits, the
    /// access log's path take effect for what starts from now (requests under way finish
    /// as they started); what cannot change live — the runtime's fixed settings
    /// ([`RuntimeConfig::keep_fixed`]) and the root and in-memory file limit, which the
    /// workers' file caches are built on — is kept as it was and named in the result.
    pub fn reload(&self, mut new: ServeConfig) -> Result<Vec<&'static str>, ServerError> {
        let old = self.service().live.current();
        let mut kept = self.reload_runtime(&old.runtime, &mut new.runtime)?;
        if new.root != old.root {
            new.root = old.root.clone();
            kept.push("--root");
        }
        if new.memory_file_limit != old.memory_file_limit {
            new.memory_file_limit = old.memory_file_limit;
            kept.push("--memory-file-limit");
        }
        self.service().live.replace(new);
        self.wake();
        Ok(kept)
    }
}

impl Service for OriginService {
    type Worker = WorkerContext;

    fn runtime(&self) -> &RuntimeConfig {
        &self.config.runtime
    }

    fn check(&self) -> Result<(), ServerError> {
        let root = &self.config.root;
        let fail = |source| ServerError::Root {
            path: root.clone(),
            source,
        };
        if !root.is_dir() {
            // Say which: a typo in the path and a file given for a directory are fixed
            // differently.
            let what = if root.exists() {
                "not a directory"
            } else {
                "no such directory"
            };
            let source = std::io::Error::new(std::io::ErrorKind::NotFound, what);
            return Err(fail(source));
        }
        // Readable by this user (a root it may not list would answer every request 404).
        std::fs::read_dir(root).map(drop).map_err(fail)
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
            live: Some(self.live.view()),
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
