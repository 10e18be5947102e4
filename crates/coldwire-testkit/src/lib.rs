//! coldwire's end-to-end test support, shared by the one e2e test binary
//! (`crates/coldwire/tests/e2e/`): one helper per job.
//!
//! * [`binary`] — where the `coldwire` executable under test is.
//! * [`server`] — `coldwire serve` on 127.0.0.1 port 0 ([`ServerOptions`] → [`Server`]),
//!   its stats endpoint; [`proxy`] — `coldwire proxy` likewise ([`Proxy`]). Both run
//!   through the process runner (`coldwire_process`) and are killed when dropped.
//! * [`backends`] — whether an I/O backend works here ([`backend_available`]: io_uring
//!   ones print `skipped: <reason>`), and [`backend_tests!`], which runs a list of test
//!   functions on every backend.
//! * [`origin`] — test origins: [`Origin`] (routes the proxy tests control), the
//!   [`ScriptedOrigin`] (a test's own function answers with raw bytes), a TCP echo server,
//!   and [`spawn_server`] for a test's own one; [`request`] reads what they receive.
//! * [`client`] — raw sockets: connect, one exchange, reads until close, CONNECT.
//! * [`response`] — parsing responses ([`Response`], [`header`]).
//! * [`mod@curl`] — the real `curl`, directly or through a proxy, with SHA-256 of what it got.
//! * [`body`] — deterministic bodies and their SHA-256; [`docroot`] — a document root
//!   with known files.
//!
//! * [`starvation`] — run-queue wait of a thread or process and the machine's CPU pressure,
//!   for tests that skip a speed-dependent check (saying why) when they were starved.
//!
//! Every helper panics with a message naming what failed: these are tests.

pub mod backends;
pub mod binary;
pub mod body;
pub mod client;
pub mod curl;
pub mod docroot;
pub mod origin;
pub mod proxy;
pub mod request;
pub mod response;
pub mod scripted;
pub mod server;
pub mod starvation;

pub use backends::{backend_available, raise_open_files_limit};
pub use binary::{coldwire, coldwire_binary};
pub use body::{body_of, expected_sha256s, pseudo_random_bytes, sha256_of_file};
pub use client::{
    READ_TIMEOUT, connect, connect_through, exchange, get_request, get_until_closed, read_once,
    read_rest, read_until_closed,
};
pub use curl::{CurlOutput, curl, curl_output, curl_response, curl_sha256, via_proxy};
pub use docroot::{DocumentRoot, SECRET, Served, docs_directory};
pub use origin::{Origin, spawn_server, start_echo_server};
pub use proxy::Proxy;
pub use request::{OriginRequest, read_request};
pub use response::{Response, header, parse_head, read_response, split_response};
pub use scripted::{Reply, ScriptedOrigin};
pub use server::{Server, ServerOptions, counter};
