//! coldwire's servers. Today: the static origin server (`coldwire serve`) — workers, each
//! an event loop over a `coldwire-io` driver with its own `SO_REUSEPORT` listener; an
//! open-file cache with prebuilt response heads; keep-alive and pipelining; conditional and
//! range requests; explicit limits and timeouts; access log; stats endpoint; graceful
//! shutdown. The caching proxy will live here too.

pub mod access_log;
pub mod admin;
pub mod config;
pub mod console;
pub mod error;
pub mod error_log;
pub mod file_cache;
pub mod log_files;
pub mod metrics;
pub mod notify;
pub mod origin;
pub mod output;
pub mod process_cpu;
pub mod proxy;
pub mod response_time;
pub mod runtime;
pub mod server;
pub mod session;
pub mod simulator;
mod spawn;
pub mod stats;
pub mod stats_log;
pub mod system;
pub mod wan;
pub mod worker;

pub use config::ServeConfig;
pub use error::ServerError;
pub use runtime::{Running, RuntimeConfig, Service, StopHandle};
pub use server::{OriginService, RunningServer};
pub use stats::{Stats, StatsReport};

/// The `Server` header value.
pub const SERVER_NAME: &str = "coldwire";
