//! `ServerError`: what can stop the server from starting or running, each message saying
//! what to do about it.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Errors of the server crate.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The document root cannot be opened.
    #[error("cannot open document root {path}: {source} — pass an existing directory with --root")]
    Root {
        /// The root given.
        path: PathBuf,
        /// Why it failed.
        source: io::Error,
    },
    /// A listening socket cannot be set up.
    #[error("cannot listen on {address}: {source} — pick another --listen address or port")]
    Listen {
        /// The address.
        address: SocketAddr,
        /// Why it failed.
        source: io::Error,
    },
    /// The stats endpoint cannot listen.
    #[error("cannot listen for stats on {address}: {source} — pick another --admin address")]
    Admin {
        /// The address.
        address: SocketAddr,
        /// Why it failed.
        source: io::Error,
    },
    /// The access log cannot be opened.
    #[error("cannot open access log {path}: {source} — check the directory exists and is writable")]
    AccessLog {
        /// The file.
        path: PathBuf,
        /// Why it failed.
        source: io::Error,
    },
    /// The chosen event mechanism does not work here.
    #[error("I/O backend {backend} is unavailable here: {source} — choose another with --io")]
    Backend {
        /// The backend name.
        backend: &'static str,
        /// Why it failed.
        source: io::Error,
    },
    /// The cache's storage cannot be opened (a disk store's directory).
    #[error("cannot open the {storage} cache: {source} — fix the path or pick another --cache-dir")]
    Storage {
        /// The storage's name.
        storage: &'static str,
        /// Why it failed.
        source: io::Error,
    },
    /// An event loop failed while running.
    #[error("worker {worker} stopped: {source}")]
    Worker {
        /// Worker index.
        worker: usize,
        /// What failed.
        source: io::Error,
    },
    /// Any other system error during start-up.
    #[error("{context}: {source}")]
    System {
        /// What was being done.
        context: &'static str,
        /// The error.
        source: io::Error,
    },
}
