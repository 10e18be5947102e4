//! One runtime for every server subcommand (`serve`, `proxy`, and next the WAN relay):
//! what each of them needs around its own event loop, written once and parameterised by
//! the [`Service`] it runs.
//!
//! - [`RuntimeConfig`]: the settings every server shares (address, backend, workers,
//!   pinning, request-head limits, client timeouts, connection limit, access log, stats
//!   endpoint, shutdown grace, `--sqpoll`), the same flags on every subcommand.
//! - [`Running`]: start-up (open-files limit, backend probe, one `SO_REUSEPORT` listener per
//!   worker on an address nobody else listens on, access log, stats, the stats endpoint,
//!   one monomorphised worker per thread) and shutdown (stop, wake, join).
//! - [`Live`]: the configuration workers read, replaced by a reload (SIGHUP); what cannot
//!   change while running is kept and named ([`RuntimeConfig::keep_fixed`]).
//! - [`Service`]: what a service adds — its configuration, the statistics it exposes, and
//!   the worker it runs on each thread.
//!
//! A new service is one new module implementing [`Service`] (and its worker loop), plus
//! its subcommand in the CLI.

mod config;
mod draining;
pub mod handover;
mod listeners;
mod live;
mod running;

pub use config::RuntimeConfig;
pub use draining::Draining;
pub use handover::UpgradeHandle;
pub use live::{Live, LiveView};
pub use running::{ReloadHandle, Running, Seated, Service, StopHandle, WorkerSeat};

pub use crate::spawn::WorkerLoop;
