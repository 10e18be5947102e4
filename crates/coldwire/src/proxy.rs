//! `coldwire proxy`: builds a [`ProxyConfig`] from the flags, starts the caching proxy,
//! prints where it listens (stdout, for scripts), and stops it gracefully on SIGINT or
//! SIGTERM.

use std::time::Duration;

use anyhow::{Context, bail};
use coldwire_cache::StoreConfig;
use coldwire_io::Backend;
use coldwire_server::proxy::{Cidr, ConnectPorts, DataPath, Mode, ProxyConfig, RunningProxy};
use coldwire_server::system;

use crate::cli::{DataPathArg, ProxyArgs};

fn seconds(value: f64, flag: &str) -> anyhow::Result<Duration> {
    if !(value.is_finite() && value > 0.0) {
        bail!("{flag} must be a positive number of seconds, got {value}");
    }
    Ok(Duration::from_secs_f64(value))
}

/// `http://HOST:PORT` (the only form `--reverse` takes).
fn reverse_mode(url: &str) -> anyhow::Result<Mode> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("--reverse {url}: expected http://HOST:PORT"))?;
    let authority = rest.trim_end_matches('/');
    if authority.contains('/') || authority.is_empty() {
        bail!("--reverse {url}: expected http://HOST:PORT with no path");
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || authority.starts_with('[') => (
            host,
            port.parse::<u16>()
                .with_context(|| format!("--reverse {url}: invalid port"))?,
        ),
        _ => (authority, 80),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok(Mode::Reverse {
        host: host.to_owned(),
        port,
    })
}

fn config(arguments: ProxyArgs) -> anyhow::Result<ProxyConfig> {
    let mode = match &arguments.reverse {
        Some(url) => reverse_mode(url)?,
        None => Mode::Forward,
    };
    let mut config = ProxyConfig::new(mode);
    config.listen = arguments.listen;
    config.backend = arguments.backend.unwrap_or_else(Backend::best_available);
    if let Some(workers) = arguments.workers {
        if workers == 0 {
            bail!("--workers must be at least 1");
        }
        config.workers = workers;
    }
    config.pin_workers = arguments.pin;
    for network in &arguments.allow {
        let cidr: Cidr = network.parse()?;
        config.acl.allow(cidr);
    }
    config.header_timeout = seconds(arguments.header_timeout, "--header-timeout")?;
    config.idle_timeout = seconds(arguments.idle_timeout, "--idle-timeout")?;
    config.write_timeout = seconds(arguments.write_timeout, "--write-timeout")?;
    config.upstream_timeout = seconds(arguments.upstream_timeout, "--upstream-timeout")?;
    config.pool_idle_timeout = seconds(arguments.pool_idle_timeout, "--pool-idle-timeout")?;
    config.shutdown_grace = seconds(arguments.shutdown_grace, "--shutdown-grace")?;
    config.pool_per_origin = arguments.pool_per_origin;
    config.max_connections = arguments.max_connections.max(1);
    config.cache = (arguments.cache_bytes > 0).then_some(StoreConfig {
        capacity: arguments.cache_bytes,
        max_object: arguments.max_object_bytes,
        ..StoreConfig::default()
    });
    config.revalidate_always = arguments.revalidate_always;
    config.data_path = match arguments.data_path {
        DataPathArg::Copy => DataPath::Copy,
        DataPathArg::Splice => DataPath::Splice,
    };
    config.splice_threshold = arguments.splice_threshold;
    config.admin = arguments.admin;
    if arguments.connect_any_port {
        config.connect_ports = ConnectPorts::Any;
    }
    for port in arguments.connect_port {
        config.connect_ports.allow(port);
    }
    config.access_log = arguments.access_log;
    let targeted = arguments.targeted_cache_control.trim();
    if targeted.is_empty()
        || !targeted
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
    {
        bail!("--targeted-cache-control {targeted:?}: expected a field name (a token)");
    }
    config.targeted_cache_control = targeted.to_owned();
    if let Some(window) = arguments.serve_stale_on_error {
        config.serve_stale_on_error = seconds(window, "--serve-stale-on-error")?;
    }
    config.collapse_wait = if arguments.collapse_wait == 0.0 {
        Duration::ZERO
    } else {
        seconds(arguments.collapse_wait, "--collapse-wait")?
    };
    Ok(config)
}

/// Runs the proxy until a termination signal.
pub fn run(arguments: ProxyArgs) -> anyhow::Result<()> {
    let config = config(arguments)?;
    let backend = config.backend;
    let workers = config.workers;
    let reverse = match &config.mode {
        Mode::Forward => "forward".to_owned(),
        Mode::Reverse { host, port } => format!("reverse to {host}:{port}"),
    };
    let proxy = RunningProxy::start(config).context("coldwire proxy could not start")?;
    // The banner first, as in `serve`: the address line means the banner is complete.
    coldwire_server::console::err(format_args!(
        "coldwire proxy: {reverse}, backend {backend}, {workers} worker(s); Ctrl-C stops"
    ));
    coldwire_server::console::out(format_args!(
        "proxy listening on http://{}",
        proxy.local_addr()
    ));
    if let Some(admin) = proxy.admin_addr() {
        coldwire_server::console::out(format_args!("stats on http://{admin}/stats"));
    }
    let stop = proxy.stop_handle();
    system::stop_on_termination_signal(
        "coldwire proxy",
        "finishing in-flight exchanges",
        move || stop.stop(),
    )
    .context("cannot start the signal thread")?;
    proxy
        .join()
        .context("coldwire proxy stopped with an error")?;
    Ok(())
}
