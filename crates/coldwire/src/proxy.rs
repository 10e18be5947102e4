//! `coldwire proxy`: builds a [`ProxyConfig`] from the flags, starts the caching proxy,
//! prints where it listens (stdout, for scripts), and stops it gracefully on SIGINT or
//! SIGTERM.

use anyhow::{Context, bail};
use coldwire_cache::{DiskConfig, StorageChoice, StoreConfig};
use coldwire_server::proxy::{Cidr, ConnectPorts, DataPath, Mode, ProxyConfig, RunningProxy};
use coldwire_server::system;

use crate::cli::{DataPathArg, ProxyArgs};
use crate::runtime_args::positive;

/// `http://HOST[:PORT][/]` (the only form `--reverse` takes), read by the `http` crate's
/// URI parser.
fn reverse_mode(text: &str) -> anyhow::Result<Mode> {
    let expected = "expected http://HOST:PORT, e.g. http://127.0.0.1:8080 or http://[::1]:8080";
    let uri: http::Uri = text
        .parse()
        .with_context(|| format!("--reverse {text}: {expected}"))?;
    if uri.scheme_str() != Some("http") {
        bail!("--reverse {text}: only http origins are supported; {expected}");
    }
    if uri
        .path_and_query()
        .is_some_and(|path| !matches!(path.as_str(), "" | "/"))
    {
        bail!("--reverse {text}: {expected}, with no path");
    }
    let authority = uri
        .authority()
        .map(http::uri::Authority::as_str)
        .unwrap_or("");
    if authority.contains('@') {
        bail!("--reverse {text}: {expected}, with no user name or password");
    }
    let host = uri.host().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        bail!("--reverse {text}: {expected}");
    }
    Ok(Mode::Reverse {
        host: host.to_ascii_lowercase(),
        port: uri.port_u16().unwrap_or(80),
    })
}

/// The disk store `--cache-dir` asks for, its sizes checked.
fn disk_storage(
    dir: &std::path::Path,
    cache_bytes: u64,
    size: u64,
    max_object: Option<u64>,
    thread_writes: bool,
) -> anyhow::Result<StorageChoice> {
    if cache_bytes == 0 {
        bail!("--cache-dir needs the cache on: give --cache-bytes more than 0");
    }
    let mut disk = DiskConfig::new(dir, size, 0);
    disk.ring_writes = !thread_writes;
    if disk.size < 1 << 20 {
        bail!("--cache-dir-size {}: give at least 1MiB", disk.size);
    }
    let largest = disk.segment_size() - 4096;
    disk.max_object = max_object.unwrap_or(largest.min(64 << 20));
    if disk.max_object > largest {
        bail!(
            "--disk-max-object-bytes {} is over what a {}-byte --cache-dir-size can hold \
             ({largest}: a sixteenth of it); lower it or give the disk cache more space",
            disk.max_object,
            disk.size
        );
    }
    Ok(StorageChoice::Disk(disk))
}

fn config(arguments: ProxyArgs) -> anyhow::Result<ProxyConfig> {
    let mode = match &arguments.reverse {
        Some(url) => reverse_mode(url)?,
        None => Mode::Forward,
    };
    let mut config = ProxyConfig::new(mode);
    arguments.runtime.apply(&mut config.runtime)?;
    for network in &arguments.allow {
        let cidr: Cidr = network.parse()?;
        config.acl.allow(cidr);
    }
    for network in &arguments.purge_allow {
        let cidr: Cidr = network.parse()?;
        config.purge_acl.allow(cidr);
    }
    config.upstream_timeout = positive(arguments.upstream_timeout, "--upstream-timeout")?;
    config.pool_idle_timeout = positive(arguments.pool_idle_timeout, "--pool-idle-timeout")?;
    config.pool_per_origin = arguments.pool_per_origin;
    config.cache = (arguments.cache_bytes > 0).then_some(StoreConfig {
        capacity: arguments.cache_bytes,
        max_object: arguments.max_object_bytes,
        ..StoreConfig::default()
    });
    if let Some(dir) = &arguments.cache_dir {
        config.storage = disk_storage(
            dir,
            arguments.cache_bytes,
            arguments.cache_dir_size,
            arguments.disk_max_object_bytes,
            arguments.disk_thread_writes,
        )?;
    }
    config.revalidate_always = arguments.revalidate_always;
    config.data_path = match arguments.data_path {
        DataPathArg::Copy => DataPath::Copy,
        DataPathArg::Splice => DataPath::Splice,
        DataPathArg::Sockmap => DataPath::Sockmap,
    };
    config.splice_threshold = arguments.splice_threshold;
    if arguments.connect_any_port {
        config.connect_ports = ConnectPorts::Any;
    }
    for port in arguments.connect_port {
        config.connect_ports.allow(port);
    }
    let targeted = arguments.targeted_cache_control.trim();
    if targeted.is_empty()
        || !targeted
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
    {
        bail!("--targeted-cache-control {targeted:?}: expected a field name (a token)");
    }
    config.targeted_cache_control = targeted.to_owned();
    config.name = proxy_name(&arguments.name)?;
    if let Some(window) = arguments.serve_stale_on_error {
        config.serve_stale_on_error = positive(window, "--serve-stale-on-error")?;
    }
    config.collapse_wait = arguments.collapse_wait;
    Ok(config)
}

/// The `--name`: a token that is both a `Via` pseudonym and a `Cache-Status` sf-token.
fn proxy_name(text: &str) -> anyhow::Result<String> {
    let valid = text.starts_with(|first: char| first.is_ascii_alphabetic())
        && text
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"-._".contains(&byte));
    if !valid {
        bail!(
            "--name {text:?}: expected letters, digits, '-', '.' or '_', starting with a \
             letter (e.g. --name edge)"
        );
    }
    Ok(text.to_owned())
}

/// Runs the proxy until a termination signal.
pub fn run(arguments: ProxyArgs) -> anyhow::Result<()> {
    let config = config(arguments).map_err(crate::exit_status::usage)?;
    let backend = config.runtime.backend;
    let workers = config.runtime.workers;
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
    let reloader = proxy.reload_handle();
    system::take_signals(system::SignalActions {
        program: "coldwire proxy",
        message: "finishing in-flight exchanges",
        stop: Box::new(move || stop.stop()),
        reload: Some(Box::new(move || {
            crate::reload::reload("coldwire proxy", |command| match command {
                crate::cli::Command::Proxy(arguments) => {
                    Ok(reloader.reload(self::config(arguments)?)?)
                }
                _ => anyhow::bail!("the command line is no longer `coldwire proxy`"),
            })
        })),
        upgrade: Some(crate::reload::upgrade_action(
            "coldwire proxy",
            proxy.upgrade_handle(),
        )),
    })
    .context("cannot start the signal thread")?;
    coldwire_server::notify::ready();
    proxy
        .join()
        .context("coldwire proxy stopped with an error")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reverse(text: &str) -> Option<(String, u16)> {
        match reverse_mode(text).ok()? {
            Mode::Reverse { host, port } => Some((host, port)),
            Mode::Forward => None,
        }
    }

    #[test]
    fn a_name_is_a_token_starting_with_a_letter() {
        for good in ["coldwire", "edge", "edge-1", "tier2.cache_a"] {
            assert_eq!(proxy_name(good).unwrap(), good);
        }
        for bad in ["", "1edge", "two words", "a,b", "a;b", "é"] {
            assert!(proxy_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn reverse_takes_http_origins_only() {
        assert_eq!(
            reverse("http://127.0.0.1:8080"),
            Some(("127.0.0.1".into(), 8080))
        );
        assert_eq!(
            reverse("http://origin.test/"),
            Some(("origin.test".into(), 80))
        );
        assert_eq!(reverse("http://[::1]:81"), Some(("::1".into(), 81)));
        assert!(reverse("https://origin.test").is_none());
        assert!(reverse("http://origin.test/path").is_none());
        assert!(reverse("origin.test:80").is_none());
        let error = format!("{:#}", reverse_mode("ftp://x").unwrap_err());
        assert!(error.contains("http://HOST:PORT"), "{error}");
    }
}
