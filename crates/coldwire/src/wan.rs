//! `coldwire wan`: builds a [`WanConfig`] from the flags, starts the WAN relay, prints where
//! it listens (stdout, for scripts), and stops it on SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use coldwire_server::system;
use coldwire_server::wan::{RunningRelay, WanConfig};

use crate::runtime_args::{RuntimeArgs, parse_duration};

/// `coldwire wan`.
#[derive(Debug, Args)]
pub struct WanArgs {
    /// Where every accepted connection is relayed to (HOST:PORT).
    #[arg(long, value_name = "ADDR")]
    pub to: SocketAddr,
    /// Round-trip time added to every connection, half each way.
    #[arg(long, default_value = "80ms", value_name = "DURATION", value_parser = parse_duration)]
    pub rtt: Duration,
    /// One-way delay client → server (overrides half of --rtt).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub delay_up: Option<Duration>,
    /// One-way delay server → client (overrides half of --rtt).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub delay_down: Option<Duration>,
    /// Extra delay drawn uniformly in [0, JITTER] for every piece of data (order is kept).
    #[arg(long, default_value = "0", value_name = "DURATION", value_parser = parse_duration)]
    pub jitter: Duration,
    /// Bandwidth of each connection, each direction: 10Mbit, 512kbit, 1Gbit, or bits/s.
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub bandwidth: Option<u64>,
    /// Bandwidth shared by all connections of a worker, each direction (use --workers 1 for
    /// one limit over the whole relay).
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub aggregate_bandwidth: Option<u64>,
    /// Probability that a 1460-byte segment is lost: 0.05% or 0.0005. Its effect is
    /// modelled: the segment, and all that follows it, is held one retransmission timeout
    /// (RTT + 200 ms, doubling on repeated loss).
    #[arg(long, default_value = "0", value_name = "RATE", value_parser = parse_loss)]
    pub loss: f64,
    /// Bytes one direction of a connection may hold before its source is no longer read
    /// (back-pressure): 1MiB, 256KiB, or bytes.
    #[arg(long, default_value = "1MiB", value_name = "BYTES", value_parser = parse_bytes)]
    pub queue: u64,
    /// Seed of the loss and jitter draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// What every server subcommand shares.
    #[command(flatten, next_help_heading = "Every server")]
    pub runtime: RuntimeArgs,
}

/// `10Mbit`, `512kbit`, `1Gbit`, `100mbps`, or a number of bits per second.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (number, unit) = lower
        .find(|c: char| c.is_ascii_alphabetic())
        .map_or((lower.as_str(), ""), |at| lower.split_at(at));
    let factor: f64 = match unit.trim_end_matches("/s").trim_end_matches("ps") {
        "" | "bit" | "b" => 1.0,
        "kbit" | "k" | "kb" => 1e3,
        "mbit" | "m" | "mb" => 1e6,
        "gbit" | "g" | "gb" => 1e9,
        _ => {
            return Err(format!(
                "{text:?}: write a rate such as 10Mbit, 512kbit or 1Gbit"
            ));
        }
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?}: write a rate such as 10Mbit, 512kbit or 1Gbit"))?;
    let bits = value * factor;
    if !(bits.is_finite() && bits >= 1.0) {
        return Err(format!("{text:?}: a rate must be at least 1 bit/s"));
    }
    Ok(bits as u64)
}

/// `0.05%` or `0.0005`: a probability.
pub fn parse_loss(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let value = match text.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().map(|p| p / 100.0),
        None => text.parse::<f64>(),
    }
    .map_err(|_| format!("{text:?}: write a loss rate such as 0.05% or 0.0005"))?;
    if !(0.0..1.0).contains(&value) {
        return Err(format!(
            "{text:?}: a loss rate is at least 0 and below 100%"
        ));
    }
    Ok(value)
}

/// `1MiB`, `256KiB`, `16 KB`, or a number of bytes.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    text.trim()
        .parse::<bytesize::ByteSize>()
        .map(|size| size.as_u64())
        .map_err(|_| format!("{text:?}: write a size such as 1MiB, 256KiB or 65536"))
}

fn config(arguments: WanArgs) -> anyhow::Result<WanConfig> {
    let listen = arguments
        .runtime
        .listen
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8081)));
    let mut config = WanConfig::new(listen, arguments.to, arguments.rtt);
    // The relay holds connections as long as the endpoints do.
    config.runtime.idle_timeout = Duration::from_secs(24 * 3600);
    arguments.runtime.apply(&mut config.runtime)?;
    if let Some(delay) = arguments.delay_up {
        config.up.delay = delay;
    }
    if let Some(delay) = arguments.delay_down {
        config.down.delay = delay;
    }
    for path in [&mut config.up, &mut config.down] {
        path.jitter = arguments.jitter;
        path.bits_per_second = arguments.bandwidth;
        path.loss = arguments.loss;
    }
    config.aggregate_bits_per_second = arguments.aggregate_bandwidth;
    if arguments.queue < 16 * 1024 {
        bail!("--queue must be at least 16KiB (one receive buffer)");
    }
    config.queue_bytes = usize::try_from(arguments.queue).unwrap_or(usize::MAX);
    config.seed = arguments.seed;
    Ok(config)
}

/// Runs the relay until a termination signal.
pub fn run(arguments: WanArgs) -> anyhow::Result<()> {
    let config = config(arguments).map_err(crate::exit_status::usage)?;
    let summary = format!(
        "coldwire wan: to {}, delay {:?} up / {:?} down, jitter {:?}, bandwidth {}, loss {}%, \
         backend {}, {} worker(s); Ctrl-C stops",
        config.to,
        config.up.delay,
        config.down.delay,
        config.up.jitter,
        config
            .up
            .bits_per_second
            .map_or("unlimited".to_owned(), |bits| format!("{bits} bit/s")),
        config.up.loss * 100.0,
        config.runtime.backend,
        config.runtime.workers,
    );
    let relay = RunningRelay::start(config).context("coldwire wan could not start")?;
    coldwire_server::errln!("{summary}");
    coldwire_server::outln!("wan listening on http://{}", relay.local_addr());
    if let Some(admin) = relay.admin_addr() {
        coldwire_server::outln!("stats on http://{admin}/stats");
    }
    let stop = relay.stop_handle();
    system::take_signals(system::SignalActions {
        program: "coldwire wan",
        message: "closing relayed connections",
        stop: Box::new(move || stop.stop()),
        reload: None,
        upgrade: Some(crate::reload::upgrade_action(
            "coldwire wan",
            relay.upgrade_handle(),
        )),
    })
    .context("cannot start the signal thread")?;
    coldwire_server::notify::ready();
    relay.join().context("coldwire wan stopped with an error")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_losses_and_sizes_read_as_people_write_them() {
        assert_eq!(parse_rate("10Mbit"), Ok(10_000_000));
        assert_eq!(parse_rate("512kbit"), Ok(512_000));
        assert_eq!(parse_rate("1Gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("2.5mbps"), Ok(2_500_000));
        assert_eq!(parse_rate("9600"), Ok(9600));
        assert!(parse_rate("fast").is_err());
        assert_eq!(parse_loss("0.05%"), Ok(0.0005));
        assert_eq!(parse_loss("0.01"), Ok(0.01));
        assert!(parse_loss("100%").is_err());
        assert_eq!(parse_bytes("1MiB"), Ok(1 << 20));
        assert_eq!(parse_bytes("65536"), Ok(65536));
    }
}
