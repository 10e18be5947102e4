//! `coldwire wan`: builds a [`WanConfig`] from the flags, starts the WAN relay, prints where
//! it listens (stdout, for scripts), reloads its configuration file on SIGHUP (the path
//! model changes live), and stops it on SIGINT, SIGTERM or SIGQUIT.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use coldwire_server::system;
use coldwire_server::wan::{RunningRelay, WanConfig};

use crate::runtime_args::RuntimeArgs;
use crate::values::{parse_duration, parse_loss, parse_rate, parse_size};

/// `coldwire wan`.
#[derive(Debug, Args)]
pub struct WanArgs {
    /// Where every accepted connection is relayed to: HOST:PORT (a host name is resolved
    /// at start).
    #[arg(long, value_name = "ADDR", value_parser = crate::values::parse_connect_to)]
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
    /// Bandwidth of each connection, each direction: 10Mbit, 512kbit, 1Gbit, or bits/s
    /// (unlimited when not given).
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub bandwidth: Option<u64>,
    /// Bandwidth shared by all connections of a worker, each direction (use --workers 1 for
    /// one limit over the whole relay; unlimited when not given).
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub aggregate_bandwidth: Option<u64>,
    /// Probability that a 1460-byte segment is lost: 0.05% or 0.0005. Its effect is
    /// modelled: the segment, and all that follows it, is held one retransmission timeout
    /// (RTT + 200 ms, doubling on repeated loss).
    #[arg(long, default_value = "0", value_name = "RATE", value_parser = parse_loss)]
    pub loss: f64,
    /// Bytes one direction of a connection may hold before its source is no longer read
    /// (back-pressure): 1MiB, 256KiB, or bytes.
    #[arg(long, default_value = "1MiB", value_name = "BYTES", value_parser = parse_size)]
    pub queue: u64,
    /// Seed of the loss and jitter draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// What every server subcommand shares.
    #[command(flatten, next_help_heading = "Every server")]
    pub runtime: RuntimeArgs,
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
    let reloader = relay.reload_handle();
    system::take_signals(system::SignalActions {
        program: "coldwire wan",
        message: "closing relayed connections",
        stop: Box::new(move || stop.stop()),
        reload: Some(Box::new(move || {
            crate::reload::reload("coldwire wan", |command| match command {
                crate::cli::Command::Wan(arguments) => {
                    Ok(reloader.reload(self::config(arguments)?)?)
                }
                _ => anyhow::bail!("the command line is no longer `coldwire wan`"),
            })
        })),
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
