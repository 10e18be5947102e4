//! The caching proxy (`coldwire proxy`) as a runtime [`Service`]: the cache shared by all
//! workers (and its statistics), and one `ProxyWorkerContext` per worker; the runtime
//! (`crate::runtime`) does the rest.

use std::sync::Arc;

use coldwire_cache::Store;
use coldwire_io::{Driver, DriverConfig};

use super::config::ProxyConfig;
use super::sockmap_tunnel::{refusal_warning, sockmap_refusal};
use super::worker::{ProxyWorkerContext, run_proxy_worker};
use crate::error::ServerError;
use crate::runtime::{Live, ReloadHandle, Running, RuntimeConfig, Service, WorkerSeat};
use crate::spawn::WorkerLoop;
use crate::stats::Stats;

/// The caching proxy, ready to run.
pub struct ProxyService {
    config: Arc<ProxyConfig>,
    live: Arc<Live<ProxyConfig>>,
    store: Option<Arc<Store>>,
}

/// A started proxy. Call [`Running::stop`] and [`Running::join`] to end it.
pub type RunningProxy = Running<ProxyService>;

impl Running<ProxyService> {
    /// Starts the proxy described by `config`.
    pub fn start(mut config: ProxyConfig) -> Result<RunningProxy, ServerError> {
        // `--data-path sockmap`: probed once, one warning when refused.
        if let Some(reason) = sockmap_refusal(&config) {
            crate::console::err(format_args!("{}", refusal_warning(&reason)));
            config.sockmap_refused = true;
        }
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
        let config = Arc::new(config);
        Running::start_service(ProxyService {
            live: Live::new(config.clone()),
            config,
            store,
        })
    }

    /// The shared cache, when caching is on.
    pub fn store(&self) -> Option<Arc<Store>> {
        self.service().store.clone()
    }
}

impl ReloadHandle<ProxyService> {
    /// Reloads the configuration while running (SIGHUP): the ACL, CONNECT ports, client
    /// and upstream timeouts, collapsed forwarding, stale serving, revalidation, the
    /// access log's path take effect for what starts from now (exchanges under way finish
    /// as they started); the cache's budget and per-object limit change at once (a
    /// smaller budget evicts, [`coldwire_cache::Store::set_limits`]). What cannot change
    /// live is kept as it was and named in the result: the runtime's fixed settings
    /// ([`RuntimeConfig::keep_fixed`]), the mode (`--reverse`), turning the cache on or
    /// off, the targeted cache-control field and the disk store (`--cache-dir`, its sizes:
    /// the store is built on them), the upstream pool's size.
    pub fn reload(&self, mut new: ProxyConfig) -> Result<Vec<&'static str>, ServerError> {
        let old = self.service().live.current();
        let mut kept = self.reload_runtime(&old.runtime, &mut new.runtime)?;
        if new.mode != old.mode {
            new.mode = old.mode.clone();
            kept.push("--reverse");
        }
        match (&self.service().store, old.cache, new.cache) {
            (Some(store), Some(_), Some(cache)) => {
                store.set_limits(cache.capacity, cache.max_object);
            }
            (_, before, after) if before.is_some() != after.is_some() => {
                new.cache = old.cache;
                kept.push("--cache-bytes 0 (turning the cache on or off)");
            }
            _ => {}
        }
        if new.targeted_cache_control != old.targeted_cache_control {
            new.targeted_cache_control = old.targeted_cache_control.clone();
            kept.push("--targeted-cache-control");
        }
        new.sockmap_refused = match sockmap_refusal(&new) {
            Some(reason) => {
                if !old.sockmap_refused {
                    crate::console::err(format_args!("{}", refusal_warning(&reason)));
                }
                true
            }
            None => false,
        };
        if new.storage != old.storage {
            new.storage = old.storage.clone();
            kept.push("--cache-dir and its sizes (the store is built on them)");
        }
        if new.pool_per_origin != old.pool_per_origin {
            new.pool_per_origin = old.pool_per_origin;
            kept.push("--pool-per-origin");
        }
        self.service().live.replace(new);
        self.wake();
        Ok(kept)
    }
}

impl Service for ProxyService {
    type Worker = ProxyWorkerContext;

    fn runtime(&self) -> &RuntimeConfig {
        &self.config.runtime
    }

    /// Each forwarded request needs a second connection, upstream: near the connection
    /// limit the driver keeps a slot for it rather than accepting the next client into it
    /// (`DriverConfig::reserve_upstream`; issue 19).
    fn driver_config(&self, config: DriverConfig) -> DriverConfig {
        DriverConfig {
            reserve_upstream: true,
            ..config
        }
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
            own_addresses: seat
                .listener
                .local_addr()
                .into_iter()
                .chain(seat.admin)
                .collect(),
            listener: seat.listener,
            stats: seat.stats,
            stop: seat.stop,
            store: self.store.clone(),
            access_log: seat.access_log,
            error_log: seat.error_log,
            live: Some(self.live.view()),
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
