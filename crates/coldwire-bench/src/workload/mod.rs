//! The `Workload` seam: what the generator asks for, apart from when and on which
//! connection it asks (the open-loop schedule, connection reuse, cold connections and
//! measurement stay in the engine).
//!
//! For each arrival the engine calls [`Workload::next_request`], which names a request by a
//! small `Copy` value ([`RequestSpec`]: the endpoint to connect to and the workload's own
//! index of the request); the engine keeps that value with the pending request and, when it
//! sends (or re-sends after a kept-alive connection failed), asks
//! [`Workload::request_bytes`] for its bytes. Nothing is allocated per request unless the
//! workload itself chooses to (a `{seq}` URL assembles its bytes per send; prebuilt requests
//! are shared `Bytes`).
//!
//! # Adding a workload
//!
//! One new file here implementing [`Workload`] (PolyMix-like robots with think times and
//! popularity, a trace replay, …) and one entry in [`WORKLOADS`]: its name, a line for
//! help texts, and its constructor from the [`LoadConfig`]. [`LoadConfig::workload`] names
//! the one a run uses (`urls` unless set). The first workload is [`urls`]: today's `--url
//! URL[@WEIGHT]` list, one chosen per request by weight.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;

use crate::config::LoadConfig;
use crate::error::BenchError;
use crate::schedule::Random;

pub mod polymix;
pub mod urls;

/// Which request an arrival makes: where it goes and which of the workload's requests it
/// is. Small and `Copy`: the engine keeps it with a pending or outstanding request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestSpec {
    /// Index into [`Workload::endpoints`]: the address its connection goes to.
    pub endpoint: usize,
    /// The workload's own index of the request (for [`urls`], the target's).
    pub request: usize,
}

/// A source of requests for the generator's engine.
pub trait Workload {
    /// The addresses connections go to (at least one; the first is where cold
    /// connections go unless `--cold-target` says otherwise).
    fn endpoints(&self) -> &[SocketAddr];

    /// The request for the arrival intended at `intended`. `random` is the engine's seeded
    /// generator (shared with the arrival schedule, so a run is reproducible from its
    /// seed): draw from it only as the workload's choices need.
    fn next_request(&mut self, intended: Instant, random: &mut Random) -> RequestSpec;

    /// The bytes to send for `request`; `close` asks for `Connection: close` (the last
    /// request on its connection). Called at every send, a retry included.
    fn request_bytes(&mut self, request: RequestSpec, close: bool) -> Bytes;

    /// The request head cold connections trickle one byte at a time (`--cold-mode
    /// trickle`).
    fn trickle_head(&self) -> Bytes;
}

/// A registered workload: its name (for [`LoadConfig::workload`]), a one-line summary and
/// its constructor.
pub struct WorkloadEntry {
    /// The name runs select it by.
    pub name: &'static str,
    /// One line for help texts.
    pub summary: &'static str,
    /// Builds it from the load configuration (resolving addresses, prebuilding requests).
    pub build: fn(&LoadConfig) -> Result<Box<dyn Workload>, BenchError>,
}

/// Every workload the generator knows, the default first.
pub const WORKLOADS: &[WorkloadEntry] = &[WorkloadEntry {
    name: urls::NAME,
    summary: "the --url list (URL[@WEIGHT], {seq}), one URL chosen per request by weight",
    build: urls::build,
}];

/// Builds the workload `config` names.
pub fn build(config: &LoadConfig) -> Result<Box<dyn Workload>, BenchError> {
    let entry = WORKLOADS
        .iter()
        .find(|entry| entry.name == config.workload)
        .ok_or_else(|| {
            let known: Vec<&str> = WORKLOADS.iter().map(|entry| entry.name).collect();
            BenchError::Config(format!(
                "unknown workload `{}` (known: {})",
                config.workload,
                known.join(", ")
            ))
        })?;
    (entry.build)(config)
}
