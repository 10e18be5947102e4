//! `coldwire proxy`: a caching forward and reverse proxy with CONNECT tunnels, on the same
//! I/O layer as the origin server (every backend runs the same logic).
//!
//! How to read it:
//! - **connections** — `state.rs` (a client connection is one `ClientState`:
//!   requests, exchange, tunnel, parked, closing, lingering; an origin connection one
//!   `OriginState`), `worker.rs` (the loop; each completion goes to its connection's
//!   side), `client.rs` and `origin.rs` (one handler per event, a `match` on the state);
//! - **a request's life** — `request.rs` lists the phases in order, one file each:
//!   `route.rs`, `lookup.rs`, `upstream.rs`, `send.rs`, `response_head.rs`, `body.rs` /
//!   `splice.rs` / `sockmap_body.rs`, `finish.rs`; the per-request context is `exchange.rs`; failures are an
//!   `ExchangeError` (`error.rs`) handled by `failure.rs`;
//! - **what the phases use** — the cache: `hit.rs` (answers from the store),
//!   `cache_range.rs` (ranges, partial content), `stale.rs` and `revalidator.rs` (RFC
//!   5861), `collapse.rs` (collapsed forwarding), `freshen.rs` and `invalidate.rs` (what a
//!   response head does to the store), `purge.rs`; the messages: `head.rs` (heads rewritten
//!   across the proxy), `interim.rs` (1xx passed on); the rest: `tunnel.rs`,
//!   `tunnel_idle.rs` and `sockmap_tunnel.rs` (CONNECT; spliced in the kernel), `policy.rs` (CONNECT ports, plain-text refusals),
//!   `access.rs` (the access log), `resolver.rs`, `pool.rs`, `acl.rs`, `config.rs`,
//!   `server.rs` (start and stop).

mod access;
pub mod acl;
mod body;
mod body_pace;
mod cache_range;
mod client;
mod collapse;
pub mod config;
mod disk_ring;
mod error;
mod exchange;
mod failure;
mod finish;
mod freshen;
pub mod head;
mod hit;
mod interim;
mod invalidate;
mod limit;
mod lookup;
mod max_forwards;
mod origin;
mod own_address;
pub mod policy;
pub mod pool;
pub mod problem;
mod purge;
mod request;
pub mod resolver;
mod response_head;
mod revalidator;
mod route;
mod send;
pub mod server;
mod sockmap_body;
pub mod sockmap_tunnel;
mod splice;
mod stale;
mod state;
mod tunnel;
mod tunnel_idle;
mod upstream;
mod worker;

#[cfg(test)]
mod tests;

pub use acl::{Acl, Cidr};
pub use config::{DataPath, Mode, ProxyConfig};
pub use policy::ConnectPorts;
pub use route::{path_and_query, split_authority};
pub use server::RunningProxy;
