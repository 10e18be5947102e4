//! The command-line types (clap derive), and nothing else: one struct per subcommand.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use coldwire_io::Backend;

/// coldwire: an event-driven web server and caching proxy for realistic Internet load,
/// and the kit that measures it.
#[derive(Debug, Parser)]
#[command(name = "coldwire", version, about, long_about = None)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve static files from a directory (the origin server).
    Serve(ServeArgs),
    /// A caching forward proxy (or reverse proxy with --reverse), with CONNECT tunnels.
    Proxy(ProxyArgs),
    /// Realistic load: open-loop hot clients, cold connections, server cost per request
    /// (no arguments: a built-in scenario against a `coldwire serve` it starts itself).
    Bench(crate::bench::BenchArgs),
    /// Run experiments that reproduce the seeds' figures (scenario files in experiments/).
    Experiment(crate::experiment::ExperimentArgs),
    /// Build a self-contained HTML report from experiment result directories.
    Report(crate::report::ReportArgs),
}

/// `coldwire serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Directory to serve; nothing outside it is ever served.
    #[arg(long)]
    pub root: PathBuf,
    /// Address to listen on (port 0 picks a free one; the real address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Event mechanism (default: epoll, the best this kernel allows).
    #[arg(long = "io", value_name = "BACKEND", value_parser = backend_parser())]
    pub backend: Option<Backend>,
    /// Worker threads, each with its own SO_REUSEPORT listener (default: one per core).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Pin worker i to CPU i.
    #[arg(long)]
    pub pin: bool,
    /// Seconds allowed for a whole request head once it has started (slowloris guard).
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub header_timeout: f64,
    /// Seconds a connection may idle between requests (raise it to hold cold connections).
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub idle_timeout: f64,
    /// Seconds a response may make no progress before the connection is dropped.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub write_timeout: f64,
    /// Most connections open at once (all workers together).
    #[arg(long, default_value_t = 19_000)]
    pub max_connections: usize,
    /// Largest request head in bytes (431 beyond).
    #[arg(long, default_value_t = 16 * 1024)]
    pub max_head_bytes: usize,
    /// Most header fields in a request (431 beyond).
    #[arg(long, default_value_t = 100)]
    pub max_headers: usize,
    /// Files up to this many bytes are kept in memory; larger ones go out with sendfile.
    #[arg(long, default_value_t = 64 * 1024)]
    pub memory_file_limit: u64,
    /// Write a Common Log Format access log to this file (off by default).
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<PathBuf>,
    /// Serve JSON statistics on this address at /stats (off by default).
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
    /// Seconds in-flight responses get to finish after SIGINT/SIGTERM.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub shutdown_grace: f64,
    /// With --io uring: a kernel thread polls the submission queue (no submit system
    /// calls, but it spins on a core while the server is busy).
    #[arg(long)]
    pub sqpoll: bool,
}

/// How `coldwire proxy` moves response bodies.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum DataPathArg {
    /// Through user space (a copy kept for the cache on the way).
    Copy,
    /// splice(2) through pooled pipes for bodies (or chunks) of at least --splice-threshold.
    Splice,
}

/// `coldwire proxy`.
#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// Address to listen on (port 0 picks a free one; the real address is printed).
    #[arg(long, default_value = "127.0.0.1:3128")]
    pub listen: SocketAddr,
    /// Be a reverse proxy for this origin (http://HOST:PORT) instead of a forward proxy.
    #[arg(long, value_name = "URL")]
    pub reverse: Option<String>,
    /// Also allow clients from this network (repeatable; loopback is always allowed).
    #[arg(long, value_name = "CIDR")]
    pub allow: Vec<String>,
    /// Event mechanism (default: epoll, the best this kernel allows).
    #[arg(long = "io", value_name = "BACKEND", value_parser = backend_parser())]
    pub backend: Option<Backend>,
    /// Worker threads, each with its own SO_REUSEPORT listener (default: one per core).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Pin worker i to CPU i.
    #[arg(long)]
    pub pin: bool,
    /// Cache size in bytes, shared by all workers (0 turns caching off).
    #[arg(long, default_value_t = 256 << 20)]
    pub cache_bytes: u64,
    /// Largest response body stored in the cache.
    #[arg(long, default_value_t = 8 << 20)]
    pub max_object_bytes: u64,
    /// Revalidate every cache hit with the origin (If-Modified-Since / If-None-Match).
    #[arg(long)]
    pub revalidate_always: bool,
    /// Data path for response bodies.
    #[arg(long, value_enum, default_value = "copy")]
    pub data_path: DataPathArg,
    /// Bodies (chunks of a chunked body) at least this long take the splice path; the
    /// default is where splice measured cheaper than copy (docs/proxy.md, Data paths).
    #[arg(long, default_value_t = 16 * 1024)]
    pub splice_threshold: u64,
    /// Seconds allowed for a whole request head once it has started.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub header_timeout: f64,
    /// Seconds a client connection (or a silent tunnel) may idle.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub idle_timeout: f64,
    /// Seconds a response may make no progress towards a client.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub write_timeout: f64,
    /// Seconds to connect to an origin and for each wait on it (504 after).
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    pub upstream_timeout: f64,
    /// Idle upstream connections kept per origin.
    #[arg(long, default_value_t = 32)]
    pub pool_per_origin: usize,
    /// Seconds an idle upstream connection is kept.
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    pub pool_idle_timeout: f64,
    /// Most connections open at once, clients and origins together.
    #[arg(long, default_value_t = 19_000)]
    pub max_connections: usize,
    /// Seconds in-flight exchanges get to finish after SIGINT/SIGTERM.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub shutdown_grace: f64,
    /// Serve JSON statistics (loop counters, requests, responses) on this address at
    /// /stats (off by default).
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
    /// Seconds a cache miss waits for another request's fetch of the same URI (collapsed
    /// forwarding: one request to the origin); 0 turns collapsing off.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub collapse_wait: f64,
    /// Also allow CONNECT tunnels to this port (repeatable; only 443 is allowed by default).
    #[arg(long, value_name = "PORT")]
    pub connect_port: Vec<u16>,
    /// Allow CONNECT tunnels to any port.
    #[arg(long)]
    pub connect_any_port: bool,
    /// Write an access log to this file: Common Log Format plus the cache status and the
    /// upstream time in seconds (off by default).
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<PathBuf>,
    /// The coldwire-targeted cache-control field (RFC 9213): a reverse proxy obeys it
    /// first, then CDN-Cache-Control, then Cache-Control, and removes both targeted fields
    /// from its responses; a forward proxy obeys neither and passes them on.
    #[arg(long, value_name = "NAME", default_value = "Coldwire-Cache-Control")]
    pub targeted_cache_control: String,
    /// Serve a stored response up to this many seconds past its freshness when the origin
    /// cannot be reached (connect or resolution failure, timeout); off by default. A
    /// response's or request's stale-if-error works without it.
    #[arg(long, value_name = "SECONDS")]
    pub serve_stale_on_error: Option<f64>,
}

/// The parser of `--io`: the names of [`Backend::ALL`], which clap lists in the help
/// ("possible values") and in the error for any other name.
pub fn backend_parser() -> impl TypedValueParser<Value = Backend> {
    let names = Backend::ALL.map(|backend| PossibleValue::new(backend.name()));
    PossibleValuesParser::new(names).try_map(|name| name.parse::<Backend>())
}
