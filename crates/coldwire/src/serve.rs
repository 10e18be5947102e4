//! `coldwire serve`: builds a [`ServeConfig`] from the flags, starts the server, prints
//! where it listens (stdout, one line each, for scripts), and stops it gracefully on
//! SIGINT or SIGTERM.

use std::time::Duration;

use anyhow::{Context, bail};
use coldwire_http::Limits;
use coldwire_io::Backend;
use coldwire_server::{RunningServer, ServeConfig, system};

use crate::cli::ServeArgs;

fn seconds(value: f64, flag: &str) -> anyhow::Result<Duration> {
    if !(value.is_finite() && value > 0.0) {
        bail!("{flag} must be a positive number of seconds, got {value}");
    }
    Ok(Duration::from_secs_f64(value))
}

/// Turns the flags into a configuration.
fn config(arguments: ServeArgs) -> anyhow::Result<ServeConfig> {
    let mut config = ServeConfig::new(arguments.root);
    config.listen = arguments.listen;
    config.backend = arguments.backend.unwrap_or_else(Backend::best_available);
    if let Some(workers) = arguments.workers {
        if workers == 0 {
            bail!("--workers must be at least 1");
        }
        config.workers = workers;
    }
    config.pin_workers = arguments.pin;
    config.header_timeout = seconds(arguments.header_timeout, "--header-timeout")?;
    config.idle_timeout = seconds(arguments.idle_timeout, "--idle-timeout")?;
    config.write_timeout = seconds(arguments.write_timeout, "--write-timeout")?;
    config.shutdown_grace = seconds(arguments.shutdown_grace, "--shutdown-grace")?;
    config.max_connections = arguments.max_connections.max(1);
    config.limits = Limits {
        max_head_bytes: arguments.max_head_bytes,
        max_headers: arguments.max_headers,
        ..Limits::default()
    };
    config.memory_file_limit = arguments.memory_file_limit;
    config.access_log = arguments.access_log;
    config.admin = arguments.admin;
    if arguments.sqpoll && config.backend != Backend::Uring {
        bail!("--sqpoll needs --io uring (it is a setting of the io_uring completion driver)");
    }
    config.sqpoll = arguments.sqpoll;
    Ok(config)
}

/// Runs the server until a termination signal.
pub fn run(arguments: ServeArgs) -> anyhow::Result<()> {
    let config = config(arguments)?;
    let backend = config.backend;
    let workers = config.workers;
    let max_connections = config.max_connections as u64;
    let server = RunningServer::start(config).context("coldwire serve could not start")?;
    let limit = server.open_files_limit();
    if limit < max_connections + 64 {
        coldwire_server::console::err(format_args!(
            "warning: the open-files limit is {limit}, so at most about {} connections can be open at once \
             (--max-connections is {max_connections}); raise the hard limit (ulimit -Hn) or lower --max-connections",
            limit.saturating_sub(64)
        ));
    }
    // The banner goes out before the address: whoever waits for "listening on" (a test, a
    // script) and then stops the server has the whole banner on stderr.
    coldwire_server::console::err(format_args!(
        "coldwire serve: backend {backend}, {workers} worker(s), open-files limit {limit}; Ctrl-C stops"
    ));
    coldwire_server::console::out(format_args!("listening on http://{}", server.local_addr()));
    if let Some(admin) = server.admin_addr() {
        coldwire_server::console::out(format_args!("stats on http://{admin}/stats"));
    }
    let stop = server.stop_handle();
    system::stop_on_termination_signal(
        "coldwire serve",
        "finishing in-flight responses",
        move || stop.stop(),
    )
    .context("cannot start the signal thread")?;
    server
        .join()
        .context("coldwire serve stopped with an error")?;
    Ok(())
}
