//! The caching proxy (`coldwire proxy`) as a runtime [`Service`]: the cache shared by all
//! workers (and its statistics), and one `ProxyWorkerContext` per worker; the runtime
//! (`crate::runtime`) does the rest.

use std::sync::Arc;

use coldwire_cache::Store;
use coldwire_io::Driver;

use super::config::ProxyConfig;
use super::worker::{ProxyWorkerContext, run_proxy_worker};
use crate::error::ServerError;
use crate::runtime::{Running, RuntimeConfig, Service, WorkerSeat};
use crate::spawn::WorkerLoop;
use crate::stats::Stats;

/// The caching proxy, ready to run.
pub struct ProxyService {
    config: Arc<ProxyConfig>,
    store: Option<Arc<Store>>,
}

/// A started proxy. Call [`Running::stop`] and [`Running::join`] to end it.
pub type RunningProxy = Running<ProxyService>;

impl Running<ProxyService> {
    /// Starts the proxy described by `config`.
    pub fn start(config: ProxyConfig) -> Result<RunningProxy, ServerError> {
        let targets = config.targets();
        let store =
            match config.cache {
                Some(store_config) => {
                    let storage = config.storage.open(&store_config).map_err(|source| {
                        ServerError::Storage {
                            storage: config.storage.name(),
                            source,
                        }
                    })?;
                    let store =
                        Arc::new(Store::with_storage(store_config, storage).with_targets(targets));
                    // Responses a disk store kept across a restart are indexed now.
                    store.attach_storage();
                    Some(store)
                }
                None => None,
            };
        Running::start_service(ProxyService {
            config: Arc::new(config),
            store,
        })
    }

    /// The shared cache, when caching is on.
    pub fn store(&self) -> Option<Arc<Store>> {
        self.service().store.clone()
    }
}

impl Service for ProxyService {
    type Worker = ProxyWorkerContext;

    fn runtime(&self) -> &RuntimeConfig {
        &self.config.runtime
    }

    fn stats(&self, stats: Stats) -> Stats {
        match &self.store {
            Some(store) => stats.with_store(store.clone()),
            None => stats,
        }
    }

    fn worker(&self, seat: WorkerSeat) -> ProxyWorkerContext {
        ProxyWorkerContext {
            index: seat.index,
            config: self.config.clone(),
            listener: seat.listener,
            stats: seat.stats,
            stop: seat.stop,
            store: self.store.clone(),
            access_log: seat.access_log,
        }
    }
}

impl WorkerLoop for ProxyWorkerContext {
    fn thread_name(&self) -> String {
        format!("coldwire-proxy-{}", self.index)
    }

    fn pin(&self) -> Option<usize> {
        self.config.runtime.pin_workers.then_some(self.index)
    }

    fn run<D: Driver>(self, driver: D) -> std::io::Result<()> {
        run_proxy_worker(driver, self)
    }
}
