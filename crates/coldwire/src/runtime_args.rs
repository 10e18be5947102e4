//! The flags every server subcommand shares ([`RuntimeArgs`], flattened into `serve` and
//! `proxy`), their human-friendly values, and how they become a
//! [`coldwire_server::RuntimeConfig`].
//!
//! The values' forms (durations, sizes, addresses) are read by [`crate::values`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::Args;
use coldwire_http::Limits;
use coldwire_io::Backend;
use coldwire_server::RuntimeConfig;
use coldwire_server::access_log::AccessLogFormat;
use coldwire_server::error_log::Level;

use crate::values::parse_size_usize;
pub use crate::values::{parse_duration, parse_listen};

/// What `serve` and `proxy` (and every server to come) are told the same way.
#[derive(Debug, Args)]
pub struct RuntimeArgs {
    /// Read flags from this TOML file, from its table for this subcommand (`[serve]`,
    /// `[proxy]`, `[wan]`, `[origin]`): each key is a long flag name (docs/operations.md);
    /// flags on the command line win. SIGHUP reads it again (every server).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on: HOST:PORT, or PORT / :PORT for every interface (port 0 picks a
    /// free one; the real address is printed) [default: 127.0.0.1:8080 for serve,
    /// 127.0.0.1:3128 for proxy].
    #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
    pub listen: Option<SocketAddr>,
    /// Event mechanism [default: epoll, the best this kernel allows].
    #[arg(long = "io", value_name = "BACKEND", value_parser = crate::cli::backend_parser())]
    pub backend: Option<Backend>,
    /// With --io uring: a kernel thread polls the submission queue (no submit system
    /// calls, but it spins on a core while the server is busy).
    #[arg(long)]
    pub sqpoll: bool,
    /// With --io uring: batch completions per loop turn — a turn's wait lasts until 64
    /// completions are ready or this long has passed with one ready (fewer wake-ups, at
    /// up to this much latency per step of a request); 0 turns it off. Linux 6.12+.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub uring_min_wait: Option<Duration>,
    /// Worker threads, each with its own SO_REUSEPORT listener [default: one per core].
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Pin worker i to CPU i.
    #[arg(long)]
    pub pin: bool,
    /// Time allowed for a whole request head once it has started (slowloris guard).
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_duration)]
    pub header_timeout: Duration,
    /// Time a client connection may idle between requests (raise it to hold cold
    /// connections; a silent CONNECT tunnel too).
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// Time a response may make no progress before the connection is dropped.
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = parse_duration)]
    pub write_timeout: Duration,
    /// Most connections open at once, all workers together (a proxy's upstream
    /// connections count too).
    #[arg(long, default_value_t = 19_000, value_name = "N")]
    pub max_connections: usize,
    /// Largest request head (431 beyond): 16K, 32KiB, or bytes.
    #[arg(long, default_value = "16KiB", value_name = "SIZE", value_parser = parse_size_usize)]
    pub max_head_bytes: usize,
    /// Most header fields in a request (431 beyond).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub max_headers: usize,
    /// Write an access log to this file, or `-` for stdout (off by default).
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<PathBuf>,
    /// Access log format: clf (Common Log Format; the proxy adds the cache status, the
    /// upstream time in seconds and the error word), squid (Squid's native access.log),
    /// json (one object per line).
    #[arg(long, value_name = "FORMAT", default_value = "clf", value_parser = access_log_format_parser())]
    pub access_log_format: AccessLogFormat,
    /// Write the error log (why requests failed) to this file instead of stderr (`-` is
    /// stderr).
    #[arg(long, value_name = "FILE")]
    pub error_log: Option<PathBuf>,
    /// Least severe lines written: error (origin and proxy failures), warn (policy
    /// refusals), info (malformed requests), debug.
    #[arg(long, value_name = "LEVEL", default_value = "warn", value_parser = level_parser())]
    pub error_log_level: Level,
    /// Error-log lines written per second at most; the rest are counted in one
    /// "suppressed N similar lines" line per error.
    #[arg(long, value_name = "LINES", default_value_t = 100)]
    pub error_log_rate: u32,
    /// Admin listener on this address (off by default): JSON statistics at /stats,
    /// Prometheus metrics at /metrics, a live page at / (docs/metrics.md).
    #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
    pub admin: Option<SocketAddr>,
    /// Append one JSON line of statistics per --stats-interval to this file (off by
    /// default): request rate, responses, cache, bytes, connections, syscalls, CPU time.
    /// `coldwire report --stats-log FILE` plots it.
    #[arg(long, value_name = "FILE")]
    pub stats_log: Option<PathBuf>,
    /// How often the stats log gets a line.
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = parse_duration)]
    pub stats_interval: Duration,
    /// Time in-flight responses get to finish after SIGINT/SIGTERM/SIGQUIT.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
}

impl RuntimeArgs {
    /// Applies the flags to `config` (whose defaults stand where a flag was not given).
    pub fn apply(self, config: &mut RuntimeConfig) -> anyhow::Result<()> {
        if let Some(listen) = self.listen {
            config.listen = listen;
        }
        config.backend = self.backend.unwrap_or_else(Backend::best_available);
        if let Some(workers) = self.workers {
            if workers == 0 {
                bail!("--workers must be at least 1");
            }
            config.workers = workers;
        }
        config.pin_workers = self.pin;
        config.header_timeout = positive(self.header_timeout, "--header-timeout")?;
        config.idle_timeout = positive(self.idle_timeout, "--idle-timeout")?;
        config.write_timeout = positive(self.write_timeout, "--write-timeout")?;
        config.shutdown_grace = positive(self.shutdown_grace, "--shutdown-grace")?;
        config.max_connections = at_least_one(self.max_connections, "--max-connections")?;
        at_least_one(self.max_head_bytes, "--max-head-bytes")?;
        at_least_one(self.max_headers, "--max-headers")?;
        config.limits = Limits {
            max_head_bytes: self.max_head_bytes,
            max_headers: self.max_headers,
            ..Limits::default()
        };
        config.access_log = self.access_log;
        config.access_log_format = self.access_log_format;
        config.error_log.path = self.error_log.filter(|path| path.as_os_str() != "-");
        config.error_log.level = self.error_log_level;
        if self.error_log_rate == 0 {
            bail!("--error-log-rate must be at least 1 line a second");
        }
        config.error_log.max_per_second = self.error_log_rate;
        config.admin = self.admin;
        config.stats_log = self.stats_log;
        config.stats_interval = positive(self.stats_interval, "--stats-interval")?;
        if self.sqpoll && config.backend != Backend::Uring {
            bail!("--sqpoll needs --io uring (it is a setting of the io_uring completion driver)");
        }
        config.sqpoll = self.sqpoll;
        if let Some(wait) = self.uring_min_wait {
            if config.backend != Backend::Uring {
                bail!(
                    "--uring-min-wait needs --io uring (it is a setting of the io_uring \
                     completion driver)"
                );
            }
            config.uring_min_wait = (!wait.is_zero()).then_some(wait);
        }
        Ok(())
    }
}

/// A duration that must not be zero.
pub fn positive(value: Duration, flag: &str) -> anyhow::Result<Duration> {
    if value.is_zero() {
        bail!("{flag} must be more than zero");
    }
    Ok(value)
}

/// A count or size that must not be zero (zero would refuse every connection or request).
fn at_least_one(value: usize, flag: &str) -> anyhow::Result<usize> {
    if value == 0 {
        bail!("{flag} must be at least 1 (0 would refuse every request)");
    }
    Ok(value)
}

/// The parser of `--access-log-format` (clap lists the names in the help and errors).
fn access_log_format_parser() -> impl clap::builder::TypedValueParser<Value = AccessLogFormat> {
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(AccessLogFormat::ALL.map(AccessLogFormat::name))
        .try_map(|name| name.parse::<AccessLogFormat>())
}

/// The parser of `--error-log-level`.
fn level_parser() -> impl clap::builder::TypedValueParser<Value = Level> {
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(["error", "warn", "info", "debug"])
        .try_map(|name| name.parse::<Level>())
}
