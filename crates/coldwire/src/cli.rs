//! The command-line types (clap derive), and nothing else: one struct per subcommand.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};

use coldwire_io::Backend;

use crate::runtime_args::RuntimeArgs;
use crate::values::{parse_duration, parse_size};

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
    /// An origin server simulator (Web Polygraph's server side): generated objects of a
    /// content mix, with think time.
    Origin(crate::origin::OriginArgs),
    /// A WAN emulator: relays connections to --to with added delay, bandwidth limit and
    /// loss, each direction.
    Wan(crate::wan::WanArgs),
    /// Realistic load: open-loop hot clients, cold connections, server cost per request
    /// (no arguments: a built-in scenario against a `coldwire serve` it starts itself).
    Bench(Box<crate::bench::BenchArgs>),
    /// Run experiments that reproduce the seeds' figures (scenario files in experiments/).
    Experiment(crate::experiment::ExperimentArgs),
    /// Build a self-contained HTML report from experiment result directories (or from a
    /// server's --stats-log).
    Report(crate::report::ReportArgs),
    /// Access-log traces: generate a synthetic one (NASA-like, WorldCup98-like) or print
    /// a log's statistics (for `coldwire origin --trace` and `coldwire bench --replay`).
    Trace(crate::trace::TraceArgs),
    /// Check a configuration file (`--config`): every table, key and value, each error at
    /// its line and column; exit status 0 when it is valid, 78 when not.
    CheckConfig(CheckConfigArgs),
    /// A live terminal view of a running server's admin listener (--admin).
    Top(crate::top::TopArgs),
}

/// `coldwire check-config`.
#[derive(Debug, Args)]
pub struct CheckConfigArgs {
    /// The TOML file to check.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

/// `coldwire serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Directory to serve; nothing outside it is ever served.
    #[arg(long)]
    pub root: PathBuf,
    /// Files up to this size are kept in memory; larger ones go out with sendfile.
    #[arg(long, default_value = "64KiB", value_name = "SIZE", value_parser = parse_size)]
    pub memory_file_limit: u64,
    /// What every server subcommand shares.
    #[command(flatten, next_help_heading = "Every server")]
    pub runtime: RuntimeArgs,
}

/// How `coldwire proxy` moves response bodies.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum DataPathArg {
    /// Through user space (a copy kept for the cache on the way).
    Copy,
    /// splice(2) through pooled pipes for bodies (or chunks) of at least --splice-threshold.
    Splice,
    /// CONNECT tunnels spliced inside the kernel by a BPF sockmap, and the rest of a
    /// Content-Length body that is not stored (Content-Length
    /// 64 KiB or more) handed to the kernel whole
    /// (readiness backends; docs/sockmap.md); otherwise as splice. Falls back to splice
    /// with a warning where refused.
    Sockmap,
}

/// `coldwire proxy`.
#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// Be a reverse proxy for this origin (http://HOST:PORT) instead of a forward proxy.
    #[arg(long, value_name = "URL")]
    pub reverse: Option<String>,
    /// Also allow clients from this network (repeatable; loopback is always allowed).
    #[arg(long, value_name = "CIDR")]
    pub allow: Vec<String>,
    /// Also accept PURGE from clients in this network (repeatable; loopback always may;
    /// other clients get 403 for a PURGE, so the public cannot empty the cache).
    #[arg(long, value_name = "CIDR")]
    pub purge_allow: Vec<String>,
    /// Cache size, shared by all workers: 256M, 1G, 64MiB... (0 turns caching off).
    #[arg(long, alias = "cache-size", default_value = "256MiB", value_name = "SIZE", value_parser = parse_size)]
    pub cache_bytes: u64,
    /// Largest response body stored in the cache.
    #[arg(long, alias = "max-object-size", default_value = "8MiB", value_name = "SIZE", value_parser = parse_size)]
    pub max_object_bytes: u64,
    /// Keep the cache on disk in this directory too (created if missing; kept across
    /// restarts): memory stays the hot tier in front, bodies larger than --max-object-bytes
    /// go to disk only (docs/disk-store.md).
    #[arg(long, value_name = "PATH")]
    pub cache_dir: Option<std::path::PathBuf>,
    /// Space the disk cache may take (e.g. 10GiB); needs --cache-dir.
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = parse_size)]
    pub cache_dir_size: u64,
    /// Largest response body stored in the disk cache (e.g. 64MiB); at most a sixteenth
    /// of --cache-dir-size, which is also the default (64MiB at most).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub disk_max_object_bytes: Option<u64>,
    /// On --io uring, keep the disk cache's segment writes on its I/O thread (pwrite,
    /// fdatasync) instead of submitting them on the workers' rings: for comparisons.
    #[arg(long)]
    pub disk_thread_writes: bool,
    /// Revalidate every cache hit with the origin (If-Modified-Since / If-None-Match).
    #[arg(long)]
    pub revalidate_always: bool,
    /// Data path for response bodies.
    #[arg(long, value_enum, default_value = "copy", value_name = "MODE")]
    pub data_path: DataPathArg,
    /// Bodies (chunks of a chunked body) at least this long take the splice path; the
    /// default is where splice measured cheaper than copy (docs/proxy.md, Data paths).
    #[arg(long, default_value = "16KiB", value_name = "SIZE", value_parser = parse_size)]
    pub splice_threshold: u64,
    /// Time to connect to an origin and for each wait on it (504 after).
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = parse_duration)]
    pub upstream_timeout: Duration,
    /// This proxy's name in `Via` and `Cache-Status`, and what a forwarding loop is detected
    /// by (its own name already in `Via`): give each of two chained coldwire proxies its
    /// own (`--name edge`). Letters, digits, `-`, `.` and `_`, starting with a letter.
    #[arg(long, default_value = "coldwire", value_name = "NAME")]
    pub name: String,
    /// Idle upstream connections kept per origin.
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub pool_per_origin: usize,
    /// Time an idle upstream connection is kept.
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = parse_duration)]
    pub pool_idle_timeout: Duration,
    /// Time a cache miss waits for another request's fetch of the same URI (collapsed
    /// forwarding: one request to the origin); 0 turns collapsing off.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_duration)]
    pub collapse_wait: Duration,
    /// Also allow CONNECT tunnels to this port (repeatable; only 443 is allowed by default).
    #[arg(long, value_name = "PORT")]
    pub connect_port: Vec<u16>,
    /// Allow CONNECT tunnels to any port.
    #[arg(long)]
    pub connect_any_port: bool,
    /// The coldwire-targeted cache-control field (RFC 9213): a reverse proxy obeys it
    /// first, then CDN-Cache-Control, then Cache-Control, and removes both targeted fields
    /// from its responses; a forward proxy obeys neither and passes them on.
    #[arg(long, value_name = "NAME", default_value = "Coldwire-Cache-Control")]
    pub targeted_cache_control: String,
    /// What every server subcommand shares.
    #[command(flatten, next_help_heading = "Every server")]
    pub runtime: RuntimeArgs,
    /// Serve a stored response up to this long past its freshness when the origin cannot
    /// be reached (connect or resolution failure, timeout); off by default. A response's
    /// or request's stale-if-error works without it.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub serve_stale_on_error: Option<Duration>,
}

/// The parser of `--io`: the names of [`Backend::ALL`], which clap lists in the help
/// ("possible values") and in the error for any other name.
pub fn backend_parser() -> impl TypedValueParser<Value = Backend> {
    let names = Backend::ALL.map(|backend| PossibleValue::new(backend.name()));
    PossibleValuesParser::new(names).try_map(|name| name.parse::<Backend>())
}
