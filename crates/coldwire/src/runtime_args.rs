//! The flags every server subcommand shares ([`RuntimeArgs`], flattened into `serve` and
//! `proxy`), their human-friendly values, and how they become a
//! [`coldwire_server::RuntimeConfig`].
//!
//! Values: durations with a unit (`500ms`, `30s`, `2m`, `1h 30m`; a plain number means
//! seconds, `2.5` too); addresses as `HOST:PORT`, or a bare port (`8080`, `:8080`) meaning
//! every interface, as nginx's `listen 8080` does.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::Args;
use coldwire_http::Limits;
use coldwire_io::Backend;
use coldwire_server::RuntimeConfig;

/// What `serve` and `proxy` (and every server to come) are told the same way.
#[derive(Debug, Args)]
pub struct RuntimeArgs {
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
    /// Worker threads, each with its own SO_REUSEPORT listener [default: one per core].
    #[arg(long)]
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
    #[arg(long, default_value_t = 19_000)]
    pub max_connections: usize,
    /// Largest request head in bytes (431 beyond).
    #[arg(long, default_value_t = 16 * 1024)]
    pub max_head_bytes: usize,
    /// Most header fields in a request (431 beyond).
    #[arg(long, default_value_t = 100)]
    pub max_headers: usize,
    /// Write an access log to this file (off by default): Common Log Format; the proxy
    /// adds the cache status and the upstream time in seconds.
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<PathBuf>,
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
    /// Time in-flight responses get to finish after SIGINT/SIGTERM.
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
        config.max_connections = self.max_connections.max(1);
        config.limits = Limits {
            max_head_bytes: self.max_head_bytes,
            max_headers: self.max_headers,
            ..Limits::default()
        };
        config.access_log = self.access_log;
        config.admin = self.admin;
        config.stats_log = self.stats_log;
        config.stats_interval = positive(self.stats_interval, "--stats-interval")?;
        if self.sqpoll && config.backend != Backend::Uring {
            bail!("--sqpoll needs --io uring (it is a setting of the io_uring completion driver)");
        }
        config.sqpoll = self.sqpoll;
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

/// `30s`, `500ms`, `2m`, `1h 30m` (humantime), or a plain number of seconds (`10`, `2.5`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).map_err(|_| {
            format!("{text:?} is not a duration: a number of seconds must be 0 or more")
        });
    }
    humantime::parse_duration(text).map_err(|error| {
        format!("{text:?} is not a duration ({error}); write e.g. 30s, 500ms, 2m or 10")
    })
}

/// `HOST:PORT` (IPv6 as `[::1]:8080`), or `PORT` / `:PORT` for every IPv4 interface.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    let port_only = text.strip_prefix(':').unwrap_or(text);
    if let Ok(port) = port_only.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
    }
    text.parse().map_err(|_| {
        format!(
            "{text:?} is not an address; write HOST:PORT (127.0.0.1:8080, [::1]:8080) or a \
             port (8080 or :8080, every interface)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_plain_seconds() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("soon").unwrap_err().contains("30s"));
    }

    #[test]
    fn listen_takes_addresses_and_bare_ports() {
        assert_eq!(
            parse_listen("127.0.0.1:8080"),
            Ok(SocketAddr::from(([127, 0, 0, 1], 8080)))
        );
        assert_eq!(
            parse_listen("8080"),
            Ok(SocketAddr::from(([0, 0, 0, 0], 8080)))
        );
        assert_eq!(
            parse_listen(":3128"),
            Ok(SocketAddr::from(([0, 0, 0, 0], 3128)))
        );
        assert_eq!(
            parse_listen("[::1]:80"),
            "[::1]:80".parse().map_err(|_| String::new())
        );
        assert!(parse_listen("localhost").unwrap_err().contains("HOST:PORT"));
    }
}
