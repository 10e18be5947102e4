//! The `coldwire` binary: parses the command line (see [`cli`]) and runs one subcommand,
//! each in its own file. Data goes to stdout, diagnostics to stderr; errors end with a
//! message saying what to do and a non-zero exit status.

mod bench;
mod bench_args;
mod check_config;
mod cli;
mod config_file;
mod exit_status;
mod experiment;
mod origin;
mod polymix;
mod proxy;
mod reload;
mod replay;
mod report;
mod runtime_args;
mod serve;
mod top;
mod trace;
mod values;
mod wan;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let arguments = match parse_arguments() {
        Ok(arguments) => arguments,
        Err(status) => return std::process::ExitCode::from(status),
    };
    // The servers and the load generator take their signals on a dedicated thread; the
    // mask is set before any thread exists, so every thread inherits it. The other
    // subcommands keep the default actions (Ctrl-C ends them).
    let takes_signals = matches!(
        arguments.command,
        cli::Command::Serve(_)
            | cli::Command::Proxy(_)
            | cli::Command::Wan(_)
            | cli::Command::Origin(_)
            | cli::Command::Bench(_)
    );
    if takes_signals && let Err(error) = coldwire_server::system::block_termination_signals() {
        coldwire_server::console::err(format_args!(
            "error: cannot set up signal handling: {error}"
        ));
        return std::process::ExitCode::from(exit_status::OS_ERROR);
    }
    let result = match arguments.command {
        cli::Command::Serve(serve) => serve::run(serve),
        cli::Command::Proxy(proxy) => proxy::run(proxy),
        cli::Command::Wan(wan) => wan::run(wan),
        cli::Command::Origin(origin) => origin::run(origin),
        cli::Command::Bench(bench) => bench::run(*bench),
        cli::Command::Experiment(experiment) => experiment::run(experiment),
        cli::Command::Report(report) => report::run(report),
        cli::Command::Trace(trace) => trace::run(trace),
        cli::Command::CheckConfig(check) => check_config::run(check),
        cli::Command::Top(top) => top::run(top),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            coldwire_server::console::err(format_args!("error: {}", error_chain(&error)));
            std::process::ExitCode::from(exit_status::classify(&error))
        }
    }
}

/// The command line, with the configuration file's values put in (`--config`); on a bad
/// command line or file, the message is printed and the exit status returned
/// (docs/operations.md, Exit statuses).
fn parse_arguments() -> Result<cli::Cli, u8> {
    let arguments = config_file::expand(std::env::args_os().collect()).map_err(|error| {
        coldwire_server::console::err(format_args!("error: {error}"));
        exit_status::CONFIG
    })?;
    cli::Cli::try_parse_from(arguments).map_err(|error| {
        let _ = error.print();
        if let Some(hint) = unknown_flag_hint(&error) {
            coldwire_server::console::err(format_args!("tip: {hint}"));
        }
        if error.use_stderr() {
            exit_status::USAGE
        } else {
            exit_status::OK
        }
    })
}

/// For a flag other servers have and coldwire spells another way (`--port`, `--bind`,
/// `--threads`), where its setting is.
fn unknown_flag_hint(error: &clap::Error) -> Option<&'static str> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(flag)) = error.get(ContextKind::InvalidArg) else {
        return None;
    };
    flag_hint(flag.split('=').next().unwrap_or(flag))
}

/// See [`unknown_flag_hint`].
fn flag_hint(flag: &str) -> Option<&'static str> {
    match flag {
        "--port" | "-p" | "--bind" | "-b" | "--host" | "--address" | "--addr" | "-l" => Some(
            "address and port are one flag: --listen PORT (every interface), --listen \
             127.0.0.1:PORT or --listen [::1]:PORT",
        ),
        "--threads" | "-t" | "--worker-processes" => {
            Some("the servers' threads are --workers N (default: one per core)")
        }
        _ => None,
    }
}

/// The error and its causes, `: `-separated, leaving out a cause whose text the message
/// already contains (many errors here name their cause in their own message).
fn error_chain(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if text.contains(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}
