//! The `coldwire` binary: parses the command line (see [`cli`]) and runs one subcommand,
//! each in its own file. Data goes to stdout, diagnostics to stderr; errors end with a
//! message saying what to do and a non-zero exit status.

mod bench;
mod bench_args;
mod cli;
mod experiment;
mod origin;
mod proxy;
mod report;
mod runtime_args;
mod serve;
mod wan;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let arguments = cli::Cli::parse();
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
        return std::process::ExitCode::FAILURE;
    }
    let result = match arguments.command {
        cli::Command::Serve(serve) => serve::run(serve),
        cli::Command::Proxy(proxy) => proxy::run(proxy),
        cli::Command::Wan(wan) => wan::run(wan),
        cli::Command::Origin(origin) => origin::run(origin),
        cli::Command::Bench(bench) => bench::run(*bench),
        cli::Command::Experiment(experiment) => experiment::run(experiment),
        cli::Command::Report(report) => report::run(report),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            coldwire_server::console::err(format_args!("error: {}", error_chain(&error)));
            std::process::ExitCode::FAILURE
        }
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
