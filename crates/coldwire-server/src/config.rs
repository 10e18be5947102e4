//! `ServeConfig`: everything `coldwire serve` can be told: the settings every server shares
//! ([`RuntimeConfig`]) and the origin server's own, with the defaults a serious server on
//! this machine wants. Every limit is explicit here.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::runtime::RuntimeConfig;

/// Configuration of the static origin server.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Address, backend, workers, limits, timeouts, logs: what every server shares.
    pub runtime: RuntimeConfig,
    /// Directory served; nothing outside it is ever served.
    pub root: PathBuf,
    /// Files up to this size are kept in memory (sent from there, no `sendfile`).
    pub memory_file_limit: u64,
    /// How often a cached file's metadata is checked again.
    pub file_cache_validity: Duration,
    /// Most entries in each worker's open-file cache.
    pub file_cache_entries: usize,
}

impl ServeConfig {
    /// The defaults, serving `root` on 127.0.0.1:8080.
    pub fn new(root: impl Into<PathBuf>) -> ServeConfig {
        ServeConfig {
            runtime: RuntimeConfig::new(SocketAddr::from(([127, 0, 0, 1], 8080))),
            root: root.into(),
            memory_file_limit: 64 * 1024,
            file_cache_validity: Duration::from_secs(1),
            file_cache_entries: 10_000,
        }
    }
}
