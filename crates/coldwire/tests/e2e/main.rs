//! coldwire's end-to-end tests, in one test binary: the real `coldwire` executable on
//! 127.0.0.1 port 0, checked from outside with raw sockets, the real `curl`, test origins
//! and the other subcommands (`bench`, `experiment`, `report`). One module per area; the
//! shared helpers (starting servers and proxies through the process runner, origins,
//! clients, parsing, bodies, the per-backend test macro) are in `coldwire-testkit`.
//!
//! Tests run in parallel threads as in any test binary (`--test-threads`); those that must
//! not overlap (thousands of idle connections) serialise on a lock of their own.

mod access_log_formats;
mod attack;
mod bench;
mod bench_habits;
mod bench_request_count;
mod browser;
mod experiment;
mod experiment_splice_peers;
mod help_and_readme;
mod operations;
mod ops_metrics;
mod origin;
mod polymix;
mod process_lifecycle;
mod proxy;
mod proxy_collapse;
mod proxy_conformance;
mod proxy_disk;
mod proxy_disk_faults;
mod proxy_disk_refresh;
mod proxy_framing;
mod proxy_smuggling;
mod proxy_sockmap;
mod proxy_sockmap_body;
mod proxy_splice;
mod reload_wan_origin;
mod replay;
mod replay_closed;
mod report;
mod serve;
mod upgrade;
mod uring_refused;
mod wan;
