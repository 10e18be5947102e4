//! coldwire's HTTP cache, without sockets: what may be stored and for how long (RFC 9111),
//! how a stored response is selected for a request (`Vary`), its `Age`, the `Cache-Status`
//! field of RFC 9211, and the memory [`Store`] shared by every worker of the proxy.
//!
//! Invariants:
//! - **Pure.** No sockets, no clocks read implicitly: every function that needs the time
//!   takes it as a `SystemTime` argument, so the freshness rules are unit- and
//!   property-tested with invented clocks. This crate never depends on coldwire's I/O
//!   crate (CI checks it).
//! - **A shared cache.** `private` responses and `s-maxage` are treated as RFC 9111 says a
//!   shared cache must.
//! - **Bounded.** The store never holds more than its byte budget; an object larger than the
//!   per-object limit is never stored (a fill stops being collected as soon as it passes the
//!   limit, see [`Fill`]).
//! - **Never a partial object.** A [`Fill`] becomes a stored object only through
//!   [`Fill::finish`], which the proxy calls once the whole body has arrived; a response that
//!   ends early is dropped with its fill.

pub mod cache_control;
pub mod freshness;
pub mod partial;
pub mod status;
pub mod storable;
pub mod store;
pub mod stored;
pub mod targeted;
pub mod validation;
pub mod vary;
mod wakeups;

pub use cache_control::CacheControl;
/// The owned header type now lives in the HTTP crate (`coldwire_http::owned_fields`); this
/// re-export keeps code written against `coldwire_cache::Fields` (branches in flight)
/// compiling during the transition. New code imports it from `coldwire_http`.
pub use coldwire_http::owned_fields::Fields;
pub use freshness::{Freshness, age_value, current_age};
pub use status::{CacheStatus, Forward};
pub use storable::{Storability, storability, storability_targeted};
pub use store::{
    Claim, Fill, Freshened, HIT_FOR_MISS_DEFAULT, HIT_FOR_MISS_MAX, Lookup, PartialStored, Store,
    StoreConfig, StoreCounters, StoredResponse, hit_for_miss_lifetime, partial_key,
};
pub use targeted::{NO_TARGETS, ResponseDirectives, Targets};
pub use vary::VaryKey;
