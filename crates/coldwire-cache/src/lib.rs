//! coldwire's HTTP cache, without sockets, in four parts with one job each:
//!
//! - [`policy`] — the rules (RFC 9111 with RFC 9110, 9211, 9213, 5861) as pure functions:
//!   what may be stored and for how long, which stored response a request selects
//!   (`Vary`), what a `304` or a `HEAD` response freshens, which `206` pieces combine, the
//!   `Cache-Status` field.
//! - [`index`] — the metadata of everything stored, by key: `Vary` variants, hit-for-miss
//!   markers, partial content, LRU accounting within a byte budget; bodies only as
//!   [`Body`] handles.
//! - [`fill_lock`] — collapsed forwarding: one fetch per key ([`Claim`]), the requests
//!   that wait for it, and their wake-ups.
//! - [`storage`] — where bodies live, behind the [`Storage`] trait: [`MemoryStorage`]
//!   today; a disk store is one more implementation (see the module's docs).
//!
//! [`Store`] composes the last three for the proxy, applying the first.
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
//! - **Hits are cheap.** A hit takes one shard lock and clones one `Arc`; it never calls
//!   into the storage, allocates, or takes another lock.

pub mod fill_lock;
pub mod index;
pub mod policy;
pub mod storage;
pub mod store;
pub mod stored;
#[cfg(test)]
mod test_support;

/// The owned header type now lives in the HTTP crate (`coldwire_http::owned_fields`); this
/// re-export keeps code written against `coldwire_cache::Fields` (branches in flight)
/// compiling during the transition. New code imports it from `coldwire_http`.
pub use coldwire_http::owned_fields::Fields;
pub use fill_lock::{Claim, FillLock};
pub use index::{Lookup, Segments, StoreCounters};
pub use policy::cache_control::CacheControl;
pub use policy::cache_status::{CacheStatus, Forward};
pub use policy::freshness::{Freshness, age_value, current_age};
pub use policy::hit_for_miss::{HIT_FOR_MISS_DEFAULT, HIT_FOR_MISS_MAX, hit_for_miss_lifetime};
pub use policy::storable::{Storability, storability, storability_targeted};
pub use policy::targeted::{NO_TARGETS, ResponseDirectives, Targets};
pub use policy::vary::VaryKey;
pub use storage::{
    Body, BodyPiece, BodyWriter, DiskConfig, DiskCounters, DiskStorage, FileOp, FileOpRequest,
    FileRange, Finished, IoErrorKinds, MemoryStorage, Pieces, ReadySink, Restored, RingWake,
    Storage, StorageChoice, Writer,
};
pub use store::{Fill, Freshened, PartialStored, Store, StoreConfig, partial_key};
pub use stored::StoredResponse;
