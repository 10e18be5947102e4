//! `RunningProxy`: binds one `SO_REUSEPORT` listener per worker, creates the cache shared
//! by all workers, and starts the proxy workers on the chosen backend with one `match`
//! (each a monomorphised loop), exactly as `RunningServer` does for the origin server.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;

use coldwire_cache::Store;
use coldwire_io::{Driver, UringOptions};

use super::config::ProxyConfig;
use super::worker::{ProxyWorkerContext, run_proxy_worker};
use crate::error::ServerError;
use crate::server::{
    StopHandle, bind_admin, bind_workers, join_all, open_access_log, probe_backend,
    raise_open_files_limit, start_admin, worker_driver_config,
};
use crate::spawn::{WorkerLoop, spawn_worker};
use crate::stats::Stats;

/// A started proxy. Call [`RunningProxy::stop`] and [`RunningProxy::join`] to end it.
pub struct RunningProxy {
    local_addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    admin: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    wakers: Vec<coldwire_io::Waker>,
    workers: Vec<JoinHandle<std::io::Result<()>>>,
    stats: Arc<Stats>,
    store: Option<Arc<Store>>,
}

impl RunningProxy {
    /// Starts the proxy described by `config`.
    pub fn start(config: ProxyConfig) -> Result<RunningProxy, ServerError> {
        raise_open_files_limit()?;
        probe_backend(config.backend)?;
        let workers = config.workers.max(1);
        let (listeners, local_addr) = bind_workers(config.listen, config.backlog, workers)?;
        let admin_listener = bind_admin(config.admin)?;
        let admin_addr = admin_listener
            .as_ref()
            .and_then(|listener| listener.local_addr().ok());
        let access_log = open_access_log(config.access_log.as_deref())?;
        let targets = config.targets();
        let store = config
            .cache
            .map(|store| Arc::new(Store::new(store).with_targets(targets)));
        let mut stats = Stats::new(config.backend.name(), workers);
        if let Some(store) = &store {
            stats = stats.with_store(store.clone());
        }
        let stats = Arc::new(stats);
        let stop = Arc::new(AtomicBool::new(false));
        let config = Arc::new(config);
        let driver_config = worker_driver_config(
            config.max_connections,
            workers,
            config.limits.max_head_bytes,
        );
        let mut wakers = Vec::new();
        let mut threads = Vec::new();
        for (index, listener) in listeners.into_iter().enumerate() {
            let context = ProxyWorkerContext {
                index,
                config: config.clone(),
                listener,
                stats: stats.clone(),
                stop: stop.clone(),
                store: store.clone(),
                access_log: access_log.clone(),
            };
            let (waker, thread) = spawn_worker(
                config.backend,
                &driver_config,
                UringOptions::default(),
                context,
            )?;
            wakers.push(waker);
            threads.push(thread);
        }
        let admin = start_admin(admin_listener, &stats, &stop);
        Ok(RunningProxy {
            local_addr,
            admin_addr,
            admin,
            stop,
            wakers,
            workers: threads,
            stats,
            store,
        })
    }

    /// The address the workers listen on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The stats endpoint's address, if enabled.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The live statistics.
    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// The shared cache, when caching is on.
    pub fn store(&self) -> Option<Arc<Store>> {
        self.store.clone()
    }

    /// A handle to stop the proxy from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            stop: self.stop.clone(),
            wakers: self.wakers.clone(),
        }
    }

    /// Asks the proxy to stop: in-flight exchanges get the grace period.
    pub fn stop(&self) {
        self.stop_handle().stop();
    }

    /// Waits for every worker; the first worker error is returned.
    pub fn join(self) -> Result<(), ServerError> {
        join_all(self.workers, &self.stop, self.admin, self.admin_addr)
    }
}

impl WorkerLoop for ProxyWorkerContext {
    fn thread_name(&self) -> String {
        format!("coldwire-proxy-{}", self.index)
    }

    fn pin(&self) -> Option<usize> {
        self.config.pin_workers.then_some(self.index)
    }

    fn run<D: Driver>(self, driver: D) -> std::io::Result<()> {
        run_proxy_worker(driver, self)
    }
}
