//! Cache policy: the rules of RFC 9111 (and RFC 9110, 9211, 9213, 5861) as pure functions
//! of messages and times — what may be stored, for how long, which stored response a
//! request selects, what a `304` or a `HEAD` response freshens, when `206` pieces combine,
//! and how a cache reports what it did. Nothing here holds state or knows where bytes
//! are kept: the [index](crate::index), the [fill lock](crate::fill_lock) and the
//! [storage](crate::storage) apply these rules, and the proxy asks them directly.
//!
//! Invariants: no function here reads a clock (times are arguments), locks, allocates on a
//! hit's path beyond what its result needs, or panics on what arrived from the network.
//! Unit tests are named after the RFC section they check (`rfc9111_4_3_4_…`).
//!
//! | module | rules |
//! |---|---|
//! | [`cache_control`] | `Cache-Control` directives (RFC 9111 §5.2), never failing |
//! | `directive_list` (crate-private) | the list syntax under both: members split outside quoted strings, targeted argument types (RFC 9213 §2.1) |
//! | [`targeted`] | targeted fields such as `CDN-Cache-Control` (RFC 9213) |
//! | [`storable`] | what a shared cache may store, by method, directives and status (§3) |
//! | [`freshness`] | freshness lifetime (§4.2.1–4.2.2), age (§4.2.3), stale serving (§4.2.4, RFC 5861) |
//! | [`vary`] | the request fields a response was selected by, normalised (§4.1) |
//! | [`validation`] | what a `304` / `HEAD` response freshens (§4.3.4–4.3.5), client conditionals (§4.3.2) |
//! | [`partial`] | which `206` is storable and which pieces combine (§3.3–3.4) |
//! | [`hit_for_miss`] | how long a key's misses go forward without collapsing |
//! | [`cache_status`] | the `Cache-Status` field (RFC 9211) |

pub mod cache_control;
pub mod cache_status;
pub(crate) mod directive_list;
pub mod freshness;
pub mod hit_for_miss;
pub mod partial;
pub mod storable;
pub mod targeted;
pub mod validation;
pub mod vary;
