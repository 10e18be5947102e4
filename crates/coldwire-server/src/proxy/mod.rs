//! `coldwire proxy`: a caching forward and reverse proxy with CONNECT tunnels, on the same
//! I/O layer as the origin server (every backend runs the same logic).
//!
//! Layout, one job per file: `config.rs` (what can be configured), `acl.rs` (who may use
//! it), `resolver.rs` (names without blocking the loop), `pool.rs` (idle upstream
//! connections), `head.rs` (message heads rewritten across the proxy), `state.rs` (the
//! per-connection state), `worker.rs` (the loop and completion dispatch), `client.rs` (the
//! downstream request path), `forward.rs` (upstream connections and request bodies),
//! `response.rs` (responses streamed to the client and into the cache), `cache_fill.rs`
//! (lookups, hits, revalidation), `tunnel.rs` (CONNECT), `server.rs` (start and stop),
//! `policy.rs` (CONNECT ports, plain-text refusals), `access.rs` (the access log), `tunnel_idle.rs` (idle spliced tunnels), `purge.rs` (PURGE), `cache_range.rs`
//! (byte ranges from the cache), `stale.rs` and `revalidator.rs` (RFC 5861:
//! stale-while-revalidate, stale-if-error), `collapse.rs` (collapsed forwarding),
//! `interim.rs` (1xx responses passed on), `freshen.rs` (what a response head does to the
//! store: 304 and HEAD freshening), `invalidate.rs` (invalidation after unsafe methods).

mod access;
pub mod acl;
mod cache_fill;
mod cache_range;
mod client;
mod collapse;
pub mod config;
mod forward;
mod freshen;
pub mod head;
mod interim;
mod invalidate;
pub mod policy;
pub mod pool;
mod purge;
pub mod resolver;
mod response;
mod revalidator;
pub mod server;
mod stale;
mod state;
mod tunnel;
mod tunnel_idle;
mod worker;

#[cfg(test)]
mod tests;

pub use acl::{Acl, Cidr};
pub use config::{DataPath, Mode, ProxyConfig};
pub use policy::ConnectPorts;
pub use server::RunningProxy;
