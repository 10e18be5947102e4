//! `RunningServer`: binds one `SO_REUSEPORT` listener per worker (so the kernel spreads
//! connections and no accept herd forms), starts the workers on the chosen backend — one
//! `match` here instantiates the monomorphised loop — and the optional stats endpoint, and
//! stops them gracefully.

use std::fs::{File, OpenOptions};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use coldwire_io::{Backend, Driver, DriverConfig, UringOptions, Waker};
use socket2::{Domain, Protocol, Socket, Type};

use crate::admin::serve_admin;
use crate::config::ServeConfig;
use crate::error::ServerError;
use crate::spawn::{WorkerLoop, spawn_worker};
use crate::stats::Stats;
use crate::system;
use crate::worker::{WorkerContext, run_worker};

/// A started server. Dropping it does not stop it; call [`RunningServer::stop`] and
/// [`RunningServer::join`].
pub struct RunningServer {
    local_addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    open_files_limit: u64,
    stop: Arc<AtomicBool>,
    wakers: Vec<Waker>,
    workers: Vec<JoinHandle<std::io::Result<()>>>,
    admin: Option<JoinHandle<()>>,
    stats: Arc<Stats>,
}

/// A cloneable handle that asks the server to shut down (for the signal thread).
#[derive(Clone)]
pub struct StopHandle {
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) wakers: Vec<Waker>,
}

impl StopHandle {
    /// Stops accepting, lets in-flight responses finish within the grace period, then the
    /// workers exit.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        for waker in &self.wakers {
            let _ = waker.wake();
        }
    }
}

pub(crate) fn bind(address: SocketAddr, backlog: i32) -> Result<TcpListener, ServerError> {
    let fail = |source| ServerError::Listen { address, source };
    let socket = Socket::new(
        Domain::for_address(address),
        Type::STREAM,
        Some(Protocol::TCP),
    )
    .map_err(fail)?;
    socket.set_reuse_address(true).map_err(fail)?;
    socket.set_reuse_port(true).map_err(fail)?;
    // Accepted sockets inherit TCP_NODELAY on Linux: one setsockopt here, none per connection.
    socket.set_tcp_nodelay(true).map_err(fail)?;
    socket.bind(&address.into()).map_err(fail)?;
    socket.listen(backlog).map_err(fail)?;
    Ok(socket.into())
}

/// Checks that nobody listens on `address` by binding it once without `SO_REUSEPORT` (a
/// bind that fails with `EADDRINUSE` against any listening socket, including another
/// process's `SO_REUSEPORT` group); returns the address with the port the kernel chose
/// for port 0. The probe is closed before the workers bind their group.
fn claim_address(address: SocketAddr) -> Result<SocketAddr, ServerError> {
    let fail = |source| ServerError::Listen { address, source };
    let probe = Socket::new(
        Domain::for_address(address),
        Type::STREAM,
        Some(Protocol::TCP),
    )
    .map_err(fail)?;
    probe.set_reuse_address(true).map_err(fail)?;
    probe.bind(&address.into()).map_err(fail)?;
    let bound = probe
        .local_addr()
        .map_err(fail)?
        .as_socket()
        .unwrap_or(address);
    Ok(bound)
}

impl RunningServer {
    /// Starts the server described by `config`.
    pub fn start(config: ServeConfig) -> Result<RunningServer, ServerError> {
        let open_files_limit = raise_open_files_limit()?;
        if !config.root.is_dir() {
            let source = std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory");
            return Err(ServerError::Root {
                path: config.root.clone(),
                source,
            });
        }
        probe_backend(config.backend)?;
        let workers = config.workers.max(1);
        let (listeners, local_addr) = bind_workers(config.listen, config.backlog, workers)?;
        let access_log = open_access_log(config.access_log.as_deref())?;
        let stats = Arc::new(Stats::new(config.backend.name(), workers));
        let stop = Arc::new(AtomicBool::new(false));
        let admin_listener = bind_admin(config.admin)?;
        let admin_addr = admin_listener
            .as_ref()
            .and_then(|listener| listener.local_addr().ok());
        let config = Arc::new(config);
        let driver_config = worker_driver_config(
            config.max_connections,
            workers,
            config.limits.max_head_bytes,
        );
        let mut wakers = Vec::new();
        let mut threads = Vec::new();
        for (index, listener) in listeners.into_iter().enumerate() {
            let context = WorkerContext {
                index,
                config: config.clone(),
                listener,
                stats: stats.clone(),
                stop: stop.clone(),
                access_log: access_log.clone(),
            };
            let uring = UringOptions {
                sqpoll_idle: config.sqpoll.then_some(SQPOLL_IDLE),
                ..UringOptions::default()
            };
            let (waker, thread) = spawn_worker(config.backend, &driver_config, uring, context)?;
            wakers.push(waker);
            threads.push(thread);
        }
        let admin = start_admin(admin_listener, &stats, &stop);
        Ok(RunningServer {
            local_addr,
            admin_addr,
            open_files_limit,
            stop,
            wakers,
            workers: threads,
            admin,
            stats,
        })
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

    /// A handle to stop the server from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            stop: self.stop.clone(),
            wakers: self.wakers.clone(),
        }
    }

    /// Asks the server to stop (see [`StopHandle::stop`]).
    pub fn stop(&self) {
        self.stop_handle().stop();
    }

    /// Waits for every worker to finish; the first worker error is returned.
    pub fn join(self) -> Result<(), ServerError> {
        join_all(self.workers, &self.stop, self.admin, self.admin_addr)
    }
}

/// Raises the open-files soft limit to the hard limit (every connection is a descriptor);
/// the new soft limit.
pub(crate) fn raise_open_files_limit() -> Result<u64, ServerError> {
    system::raise_open_files_limit().map_err(|source| ServerError::System {
        context: "cannot raise the open-files limit",
        source,
    })
}

/// Checks that `backend` works on this machine, so that a start fails with its reason
/// rather than every worker.
pub(crate) fn probe_backend(backend: Backend) -> Result<(), ServerError> {
    backend.probe().map_err(|source| ServerError::Backend {
        backend: backend.name(),
        source,
    })
}

/// One `SO_REUSEPORT` listener per worker, all on `listen` (port 0: the port the first one
/// got), and that address. The address must be free: another process listening there —
/// even one with `SO_REUSEPORT`, which the kernel would let this one share — is an
/// "address in use" error, as nginx reports it ([`claim_address`]).
pub(crate) fn bind_workers(
    listen: SocketAddr,
    backlog: i32,
    workers: usize,
) -> Result<(Vec<TcpListener>, SocketAddr), ServerError> {
    let listen = claim_address(listen)?;
    let first = bind(listen, backlog)?;
    let local_addr = first.local_addr().map_err(|source| ServerError::Listen {
        address: listen,
        source,
    })?;
    let mut listeners = vec![first];
    for _ in 1..workers {
        listeners.push(bind(local_addr, backlog)?);
    }
    Ok((listeners, local_addr))
}

/// Opens the access log the workers share, appending (created if missing).
pub(crate) fn open_access_log(path: Option<&Path>) -> Result<Option<Arc<File>>, ServerError> {
    path.map(|path| {
        let file = OpenOptions::new().create(true).append(true).open(path);
        file.map(Arc::new).map_err(|source| ServerError::AccessLog {
            path: path.to_path_buf(),
            source,
        })
    })
    .transpose()
}

/// The driver settings of one of `workers`: its share of the connection limit, and
/// receive buffers that hold a whole request head (at least 16 KiB).
pub(crate) fn worker_driver_config(
    max_connections: usize,
    workers: usize,
    max_head_bytes: usize,
) -> DriverConfig {
    DriverConfig {
        max_connections: max_connections.div_ceil(workers),
        buffer_size: max_head_bytes.max(16 * 1024),
        ..DriverConfig::default()
    }
}

/// Binds the stats endpoint's listener, if asked for (before any worker starts, so a bad
/// address fails the start).
pub(crate) fn bind_admin(address: Option<SocketAddr>) -> Result<Option<TcpListener>, ServerError> {
    address
        .map(|address| {
            TcpListener::bind(address).map_err(|source| ServerError::Admin { address, source })
        })
        .transpose()
}

/// Starts the stats endpoint's thread on `listener`.
pub(crate) fn start_admin(
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

/// Waits for every worker, then stops the stats endpoint; the first worker error is
/// returned.
pub(crate) fn join_all(
    workers: Vec<JoinHandle<std::io::Result<()>>>,
    stop: &AtomicBool,
    admin: Option<JoinHandle<()>>,
    admin_addr: Option<SocketAddr>,
) -> Result<(), ServerError> {
    let mut result = Ok(());
    for (worker, thread) in workers.into_iter().enumerate() {
        let outcome = thread
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("worker panicked")));
        if let Err(source) = outcome
            && result.is_ok()
        {
            result = Err(ServerError::Worker { worker, source });
        }
    }
    stop.store(true, Ordering::SeqCst);
    if let Some(admin) = admin {
        // Unblock its accept; it sees `stop` and returns.
        if let Some(address) = admin_addr {
            let _ = std::net::TcpStream::connect(address);
        }
        let _ = admin.join();
    }
    result
}

/// How long an idle `--sqpoll` kernel thread keeps polling before it sleeps: short, since
/// while it polls it holds a core (half of this machine).
const SQPOLL_IDLE: std::time::Duration = std::time::Duration::from_millis(10);

impl WorkerLoop for WorkerContext {
    fn thread_name(&self) -> String {
        format!("coldwire-worker-{}", self.index)
    }

    fn pin(&self) -> Option<usize> {
        self.config.pin_workers.then_some(self.index)
    }

    fn run<D: Driver>(self, driver: D) -> std::io::Result<()> {
        run_worker(driver, self)
    }
}
