//! The command-line types (clap derive), and nothing else: one struct per subcommand.

use std::net::SocketAddr;
use std::path::PathBuf;

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
    /// Realistic load: open-loop hot clients, cold connections, server cost per request
    /// (no arguments: a built-in scenario against a `coldwire serve` it starts itself).
    Bench(crate::bench::BenchArgs),
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
    /// Event mechanism: select, poll or epoll (default: the best this kernel allows).
    #[arg(long = "io", value_name = "BACKEND")]
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
}
