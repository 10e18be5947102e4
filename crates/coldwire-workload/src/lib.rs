//! The models of realistic load that both sides of a benchmark must agree on, with no I/O:
//! what object an id names ([`objects`]: Web Polygraph's PolyMix-4 content mix, sizes,
//! cachability and life cycles), the bytes of its body ([`body`]: generated from the id,
//! so a client can verify every byte it receives), and the random draws behind them
//! ([`draws`]: seeded, so the origin and the robots compute the same object from an id), and access-log traces
//! ([`trace`]: parsing, statistics, a generator of synthetic traces).
//!
//! `coldwire origin` serves these objects; `coldwire bench`'s robots request and verify
//! them. Sources of every parameter: Web Polygraph 4.x's PolyMix-4 workload files
//! (`polymix-4-guts.pg`, `contents.pg`).

pub mod body;
pub mod draws;
pub mod objects;
pub mod trace;

pub use body::{BODY_HEADER, body_hash, fill_body, matching_prefix};
pub use objects::{ContentKind, ContentMix, Object};
