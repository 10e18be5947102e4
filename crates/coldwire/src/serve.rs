//! `coldwire serve`: builds a [`ServeConfig`] from the flags, starts the server, prints
//! where it listens (stdout, one line each, for scripts), and stops it gracefully on
//! SIGINT, SIGTERM or SIGQUIT.

use anyhow::Context;
use coldwire_server::{RunningServer, ServeConfig, system};

use crate::cli::ServeArgs;

/// Turns the flags into a configuration.
fn config(arguments: ServeArgs) -> anyhow::Result<ServeConfig> {
    let mut config = ServeConfig::new(arguments.root);
    arguments.runtime.apply(&mut config.runtime)?;
    config.memory_file_limit = arguments.memory_file_limit;
    Ok(config)
}

/// Runs the server until a termination signal.
pub fn run(arguments: ServeArgs) -> anyhow::Result<()> {
    let config = config(arguments).map_err(crate::exit_status::usage)?;
    let backend = config.runtime.backend;
    let workers = config.runtime.workers;
    let max_connections = config.runtime.max_connections as u64;
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
    let reloader = server.reload_handle();
    system::take_signals(system::SignalActions {
        program: "coldwire serve",
        message: "finishing in-flight responses",
        stop: Box::new(move || stop.stop()),
        reload: Some(Box::new(move || {
            crate::reload::reload("coldwire serve", |command| match command {
                crate::cli::Command::Serve(arguments) => {
                    Ok(reloader.reload(self::config(arguments)?)?)
                }
                _ => anyhow::bail!("the command line is no longer `coldwire serve`"),
            })
        })),
        upgrade: Some(crate::reload::upgrade_action(
            "coldwire serve",
            server.upgrade_handle(),
        )),
    })
    .context("cannot start the signal thread")?;
    coldwire_server::notify::ready();
    server
        .join()
        .context("coldwire serve stopped with an error")?;
    Ok(())
}
