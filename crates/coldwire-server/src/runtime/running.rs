//! [`Running`]: a started server of any [`Service`] — listeners bound, workers running on
//! the chosen backend (each a monomorphised loop, started by `crate::spawn`), the stats
//! endpoint up — and its graceful stop ([`StopHandle`]) and join.

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use coldwire_io::{Backend, DriverConfig, UringOptions, Waker};

use super::config::RuntimeConfig;
use super::handover::{self, Kept, KeptSockets, UpgradeHandle};
use super::listeners::{bind_admin, bind_workers, open_access_log, worker_driver_config};
use crate::admin::serve_admin;
use crate::error::ServerError;
use crate::error_log::ErrorLog;
use crate::spawn::{WorkerLoop, spawn_worker};
use crate::stats::Stats;
use crate::stats_log::{StatsLog, StatsLogHandle};
use crate::system;

/// How long an idle `--sqpoll` kernel thread keeps polling before it sleeps: short, since
/// while it polls it holds a core (half of this machine).
const SQPOLL_IDLE: std::time::Duration = std::time::Duration::from_millis(10);

/// What a worker thread gets from the runtime, whatever its service.
pub struct WorkerSeat {
    /// Worker index (stats slot, CPU to pin to).
    pub index: usize,
    /// This worker's listening socket.
    pub listener: TcpListener,
    /// Shared statistics.
    pub stats: Arc<Stats>,
    /// Set when the server should shut down (then the worker is woken).
    pub stop: Arc<AtomicBool>,
    /// The access log file, when logging.
    pub access_log: Option<Arc<File>>,
    /// The error log (a handle on its writer thread).
    pub error_log: ErrorLog,
    /// The admin listener's address as bound, when there is one (the proxy refuses to
    /// forward to it).
    pub admin: Option<SocketAddr>,
}

/// A worker's seat and its service's configuration: what most services' workers start
/// from (`Seated<WanConfig>`, `Seated<SimulatorConfig>`).
pub struct Seated<C> {
    /// What the runtime gives every worker.
    pub seat: WorkerSeat,
    /// The service's configuration.
    pub config: Arc<C>,
    /// Where a reloaded configuration comes from (taken at the next loop turn).
    pub live: super::LiveView<C>,
}

/// A service the runtime can run: the origin server, the proxy, next the WAN relay.
pub trait Service: Send + Sync + 'static {
    /// What runs on each worker thread.
    type Worker: WorkerLoop;

    /// The shared settings.
    fn runtime(&self) -> &RuntimeConfig;

    /// Checks made before anything is bound (a missing document root, say).
    fn check(&self) -> Result<(), ServerError> {
        Ok(())
    }

    /// The driver settings of each worker (timer resolution, say), from the runtime's.
    fn driver_config(&self, config: DriverConfig) -> DriverConfig {
        config
    }

    /// The statistics the stats endpoint shows (a proxy adds its cache's).
    fn stats(&self, stats: Stats) -> Stats {
        stats
    }

    /// The worker for one seat.
    fn worker(&self, seat: WorkerSeat) -> Self::Worker;
}

/// A started server. Dropping it does not stop it; call [`Running::stop`] and
/// [`Running::join`].
pub struct Running<S: Service> {
    service: Arc<S>,
    local_addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    open_files_limit: u64,
    stop: Arc<AtomicBool>,
    wakers: Vec<Waker>,
    workers: Vec<JoinHandle<std::io::Result<()>>>,
    admin: Option<JoinHandle<()>>,
    stats: Arc<Stats>,
    access_log: Option<Arc<File>>,
    /// The error log's control handle (a reload reconfigures it; it writes nothing).
    error_log: ErrorLog,
    /// Copies of the listening sockets, for a binary upgrade (closed by the stop).
    kept: KeptSockets,
    stats_log: Option<StatsLog>,
}

/// A cloneable handle that asks the server to shut down (for the signal thread).
#[derive(Clone)]
pub struct StopHandle {
    stop: Arc<AtomicBool>,
    wakers: Vec<Waker>,
    kept: KeptSockets,
}

impl StopHandle {
    /// Stops accepting, lets in-flight responses finish within the grace period, then the
    /// workers exit.
    pub fn stop(&self) {
        // The copies kept for an upgrade go first: once the workers close theirs, the
        // sockets are closed and new connections refused.
        drop(
            self.kept
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .take(),
        );
        self.stop.store(true, Ordering::SeqCst);
        for waker in &self.wakers {
            let _ = waker.wake();
        }
    }
}

/// A cloneable handle that reloads a running server's configuration (for the signal
/// thread); each service adds its `reload` (`ReloadHandle<ProxyService>::reload`).
pub struct ReloadHandle<S> {
    service: Arc<S>,
    access_log: Option<Arc<File>>,
    error_log: ErrorLog,
    wakers: Vec<Waker>,
}

impl<S> Clone for ReloadHandle<S> {
    fn clone(&self) -> Self {
        ReloadHandle {
            service: self.service.clone(),
            access_log: self.access_log.clone(),
            error_log: self.error_log.clone(),
            wakers: self.wakers.clone(),
        }
    }
}

impl<S: Service> ReloadHandle<S> {
    /// The service being run.
    pub fn service(&self) -> &S {
        &self.service
    }

    /// For a reload: what of `new` cannot change while running is put back to `old`
    /// ([`RuntimeConfig::keep_fixed`]) and named; a new access-log path takes effect now
    /// (the workers' log moves there), and so do the error log's level, rate and path
    /// ([`ErrorLog::reconfigure`]). Then publish the service's configuration and call
    /// [`ReloadHandle::wake`].
    pub fn reload_runtime(
        &self,
        old: &RuntimeConfig,
        new: &mut RuntimeConfig,
    ) -> Result<Vec<&'static str>, ServerError> {
        let kept = old.keep_fixed(new);
        if let (Some(file), Some(path)) = (&self.access_log, &new.access_log)
            && old.access_log.as_ref() != Some(path)
        {
            crate::log_files::move_to(file, path).map_err(|source| ServerError::AccessLog {
                path: path.clone(),
                source,
            })?;
        }
        self.error_log
            .reconfigure(&old.error_log, &new.error_log)
            .map_err(|source| ServerError::ErrorLog {
                path: new
                    .error_log
                    .path
                    .clone()
                    .unwrap_or_else(|| "stderr".into()),
                source,
            })?;
        Ok(kept)
    }

    /// Wakes every worker (after a new configuration was published, so they take it now).
    pub fn wake(&self) {
        for waker in &self.wakers {
            let _ = waker.wake();
        }
    }
}

impl<S: Service> Running<S> {
    /// Starts `service`: raises the open-files limit, probes the backend, binds one
    /// listener per worker (the address must be free), opens the access log, starts the
    /// workers and the stats endpoint.
    pub fn start_service(service: S) -> Result<Running<S>, ServerError> {
        let open_files_limit = raise_open_files_limit()?;
        handover::remember_executable();
        service.check()?;
        let runtime = service.runtime().clone();
        probe_backend(runtime.backend)?;
        let workers = runtime.workers.max(1);
        let (inherited, inherited_admin) = match handover::take_inherited()? {
            Some((listeners, admin)) => (Some(listeners), admin),
            None => (None, None),
        };
        let (listeners, local_addr) =
            bind_workers(runtime.listen, runtime.backlog, workers, inherited)?;
        let admin_listener = match inherited_admin.filter(|_| runtime.admin.is_some()) {
            Some(listener) => Some(listener),
            None => bind_admin(runtime.admin)?,
        };
        let keep = |listener: &TcpListener| {
            listener.try_clone().map_err(|source| ServerError::System {
                context: "cannot keep a listening socket for a binary upgrade",
                source,
            })
        };
        let kept = Kept {
            listeners: listeners.iter().map(keep).collect::<Result<Vec<_>, _>>()?,
            admin: admin_listener.as_ref().map(keep).transpose()?,
        };
        let admin_addr = admin_listener
            .as_ref()
            .and_then(|listener| listener.local_addr().ok());
        let access_log = open_access_log(runtime.access_log.as_deref())?;
        let error_log =
            ErrorLog::open(&runtime.error_log).map_err(|source| ServerError::ErrorLog {
                path: runtime
                    .error_log
                    .path
                    .clone()
                    .unwrap_or_else(|| "stderr".into()),
                source,
            })?;
        let stats = Arc::new(service.stats(Stats::new(runtime.backend.name(), workers)));
        let stop = Arc::new(AtomicBool::new(false));
        let driver_config = service.driver_config(worker_driver_config(
            runtime.max_connections,
            workers,
            runtime.limits.max_head_bytes,
        ));
        let uring = UringOptions {
            sqpoll_idle: runtime.sqpoll.then_some(SQPOLL_IDLE),
            min_wait: runtime.uring_min_wait,
            ..UringOptions::default()
        };
        let mut wakers = Vec::new();
        let mut threads = Vec::new();
        for (index, listener) in listeners.into_iter().enumerate() {
            let seat = WorkerSeat {
                index,
                listener,
                stats: stats.clone(),
                stop: stop.clone(),
                access_log: access_log.clone(),
                error_log: error_log.clone(),
                admin: admin_addr,
            };
            let work = service.worker(seat);
            let (waker, thread) = spawn_worker(runtime.backend, &driver_config, uring, work)?;
            wakers.push(waker);
            threads.push(thread);
        }
        let stats_log = match &runtime.stats_log {
            Some(path) => Some(
                StatsLog::start(path, runtime.stats_interval, stats.clone()).map_err(|source| {
                    ServerError::StatsLog {
                        path: path.clone(),
                        source,
                    }
                })?,
            ),
            None => None,
        };
        let admin = start_admin(admin_listener, &stats, &stop);
        Ok(Running {
            service: Arc::new(service),
            local_addr,
            admin_addr,
            open_files_limit,
            stop,
            wakers,
            workers: threads,
            admin,
            stats,
            access_log,
            error_log: error_log.control(),
            kept: Arc::new(Mutex::new(Some(kept))),
            stats_log,
        })
    }

    /// The service being run.
    pub fn service(&self) -> &S {
        &self.service
    }

    /// The address the workers listen on (with the real port when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The stats endpoint's address, if enabled.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The open-files soft limit after raising it.
    pub fn open_files_limit(&self) -> u64 {
        self.open_files_limit
    }

    /// The live statistics.
    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// A handle to reload the configuration from another thread (SIGHUP).
    pub fn reload_handle(&self) -> ReloadHandle<S> {
        ReloadHandle {
            service: self.service.clone(),
            access_log: self.access_log.clone(),
            error_log: self.error_log.clone(),
            wakers: self.wakers.clone(),
        }
    }

    /// A handle for a binary upgrade from another thread (SIGUSR2).
    pub fn upgrade_handle(&self) -> UpgradeHandle {
        UpgradeHandle {
            kept: self.kept.clone(),
            stop: self.stop_handle(),
        }
    }

    /// The stats log's handle (for reopening it on SIGUSR1), when there is one.
    pub fn stats_log(&self) -> Option<StatsLogHandle> {
        self.stats_log.as_ref().map(StatsLog::handle)
    }

    /// Reopens the stats log by name (after log rotation); nothing without one.
    pub fn reopen(&self) -> std::io::Result<()> {
        match &self.stats_log {
            Some(log) => log.handle().reopen(),
            None => Ok(()),
        }
    }

    /// A handle to stop the server from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            stop: self.stop.clone(),
            wakers: self.wakers.clone(),
            kept: self.kept.clone(),
        }
    }

    /// Asks the server to stop (see [`StopHandle::stop`]).
    pub fn stop(&self) {
        self.stop_handle().stop();
    }

    /// Waits for every worker, then stops the stats endpoint; the first worker error is
    /// returned.
    pub fn join(self) -> Result<(), ServerError> {
        let mut result = Ok(());
        for (worker, thread) in self.workers.into_iter().enumerate() {
            let outcome = thread
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("worker panicked")));
            if let Err(source) = outcome
                && result.is_ok()
            {
                result = Err(ServerError::Worker { worker, source });
            }
        }
        self.stop.store(true, Ordering::SeqCst);
        if let Some(log) = self.stats_log {
            log.stop();
        }
        if let Some(admin) = self.admin {
            // Unblock its accept; it sees `stop` and returns. After a binary upgrade the
            // socket is shared with the new process, which may take the connection: try
            // a few times, then leave the thread to end with the process.
            for _ in 0..50 {
                if admin.is_finished() {
                    break;
                }
                if let Some(address) = self.admin_addr {
                    let _ = std::net::TcpStream::connect(address);
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            if admin.is_finished() {
                let _ = admin.join();
            }
        }
        result
    }
}

/// Raises the open-files soft limit to the hard limit (every connection is a descriptor);
/// the new soft limit.
fn raise_open_files_limit() -> Result<u64, ServerError> {
    system::raise_open_files_limit().map_err(|source| ServerError::System {
        context: "cannot raise the open-files limit",
        source,
    })
}

/// Fails early, with the reason, when this kernel or sandbox cannot run `backend`
/// (io_uring switched off, seccomp), rather than every worker.
fn probe_backend(backend: Backend) -> Result<(), ServerError> {
    backend.probe().map_err(|source| ServerError::Backend {
        backend: backend.name(),
        source,
    })
}

/// Starts the stats endpoint's thread on `listener`.
fn start_admin(
    listener: Option<TcpListener>,
    stats: &Arc<Stats>,
    stop: &Arc<AtomicBool>,
) -> Option<JoinHandle<()>> {
    listener.map(|listener| {
        let stats = stats.clone();
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("coldwire-admin".into())
            .spawn(move || serve_admin(listener, stats, stop))
            .expect("spawning the admin thread")
    })
}
