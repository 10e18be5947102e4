//! coldwire's load generator: realistic load for a web server or proxy, measured honestly.
//!
//! * **Open loop** ([`schedule`]): requests start on a schedule (constant or Poisson) that
//!   never waits for the server; latency is recorded from the intended start (corrected)
//!   and from the actual send (raw), in HdrHistogram ([`recorder`]); slots the generator
//!   itself reaches too late are counted as missed, never made up in a burst.
//! * **Hot and cold connections** ([`engine`]): hot connections carry the requests
//!   (keep-alive up to `--requests-per-connection`, or one connection per request); cold
//!   connections are opened before measurement and held, idle or trickling a head.
//! * **Server cost** ([`proc_stats`], [`server_stats`]): CPU of the server's threads from
//!   `/proc/PID/task/*/schedstat`, the machine's from `/proc/stat`, RSS, descriptors; and
//!   coldwire's own loop counters from its stats endpoint — per request.
//! * **Workloads** ([`workload`]): what is asked for, behind the [`Workload`] trait — today
//!   the weighted `--url` list ([`workload::urls`]); a new workload is one file and one
//!   entry in [`workload::WORKLOADS`].
//! * **Populations** ([`population`]): users with their own connections and their own
//!   sequence of requests (PolyMix robots, replayed trace clients), each response
//!   classified hit or miss and its body verified. [`replay`] is one: an access log's
//!   clients, each with its own address, connections and logged order and pace;
//!   [`replay_closed`] replays the same log in a closed loop on N connections.
//! * **Results** ([`report`], [`table`]): a versioned JSON document (`docs/bench-json.md`)
//!   and a table for people; [`saturate`] steps the rate to find the knee.
//!
//! Everything runs on one thread over one `coldwire_io::Driver`, generic over the backend.

pub mod config;
pub mod engine;
pub mod error;
pub mod population;
pub mod proc_stats;
pub mod quickstart;
pub mod recorder;
pub mod replay;
pub mod replay_closed;
pub mod report;
pub mod response;
pub mod run;
pub mod saturate;
pub mod schedule;
pub mod server_stats;
pub mod table;
pub mod target;
pub mod thresholds;
pub mod tls;
pub mod workload;

mod cold;
mod hot;

pub use config::{ColdMode, LoadConfig, PhaseEnd, PhasePlan, Rate};
pub use engine::{ColdTotals, Engine, NoObserver, PhaseMeasurement, PhaseObserver, Progress};
pub use error::BenchError;
pub use report::{BenchReport, SCHEMA_VERSION};
pub use run::{BenchPlan, ServerWatch, run_benchmark};
pub use schedule::Arrivals;
pub use target::{RequestOptions, Target};
pub use workload::{RequestSpec, Workload};
