//! [`RuntimeConfig`]: the settings every server subcommand shares, with the defaults a
//! serious server on this machine wants. Every limit is explicit here.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use coldwire_http::Limits;
use coldwire_io::Backend;

use crate::access_log::AccessLogFormat;
use crate::error_log::ErrorLogConfig;

/// What every server (origin, proxy) is told the same way.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Address to listen on (port 0 picks a free port; see [`crate::Running::local_addr`]).
    pub listen: SocketAddr,
    /// Event mechanism.
    pub backend: Backend,
    /// Worker threads, each with its own `SO_REUSEPORT` listener and event loop.
    pub workers: usize,
    /// Pin worker `i` to CPU `i mod cores`.
    pub pin_workers: bool,
    /// Request head limits (16 KiB, 100 fields by default).
    pub limits: Limits,
    /// Time allowed for a whole request head once its first byte has arrived (slowloris).
    pub header_timeout: Duration,
    /// How long a client connection may sit with no request in progress before it is
    /// closed (and a silent CONNECT tunnel). Benchmarks holding cold connections raise it.
    pub idle_timeout: Duration,
    /// How long a response may make no progress towards a client before it is dropped.
    pub write_timeout: Duration,
    /// How long a closing connection keeps draining the client's leftover input.
    pub linger_timeout: Duration,
    /// Most connections open at once, over all workers (a proxy counts its upstream
    /// connections too).
    pub max_connections: usize,
    /// Access log (off when `None`; `-` is stdout).
    pub access_log: Option<PathBuf>,
    /// How access-log lines are written.
    pub access_log_format: AccessLogFormat,
    /// The error log: where (stderr by default), how much, how fast.
    pub error_log: ErrorLogConfig,
    /// Admin listener address: `/stats` JSON, `/metrics`, the live page (off when `None`).
    pub admin: Option<SocketAddr>,
    /// Stats log: one JSON line per [`RuntimeConfig::stats_interval`] (off when `None`).
    pub stats_log: Option<PathBuf>,
    /// How often the stats log gets a line.
    pub stats_interval: Duration,
    /// On shutdown, how long in-flight responses may take before connections are cut.
    pub shutdown_grace: Duration,
    /// Listen backlog per worker socket.
    pub backlog: i32,
    /// With the `uring` backend: kernel-side submission polling (`IORING_SETUP_SQPOLL`),
    /// one polling kernel thread per worker. Off by default: on 2 cores it costs a core.
    pub sqpoll: bool,
    /// With the `uring` backend: a turn's wait lasts until a batch of completions is ready
    /// or this long has passed with one ready (`UringOptions::min_wait`); `None`: off.
    pub uring_min_wait: Option<Duration>,
}

impl RuntimeConfig {
    /// The defaults, listening on `listen`.
    pub fn new(listen: SocketAddr) -> RuntimeConfig {
        RuntimeConfig {
            listen,
            backend: Backend::best_available(),
            workers: std::thread::available_parallelism().map_or(1, |cores| cores.get()),
            pin_workers: false,
            limits: Limits::default(),
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(60),
            linger_timeout: Duration::from_secs(2),
            max_connections: 19_000,
            access_log: None,
            access_log_format: AccessLogFormat::Clf,
            error_log: ErrorLogConfig::default(),
            admin: None,
            stats_log: None,
            stats_interval: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(10),
            backlog: 4096,
            sqpoll: false,
            uring_min_wait: None,
        }
    }
}
