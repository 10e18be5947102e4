//! The `coldwire` binary: parses the command line (see [`cli`]) and runs one subcommand,
//! each in its own file. Data goes to stdout, diagnostics to stderr; errors end with a
//! message saying what to do and a non-zero exit status.

mod bench;
mod cli;
mod experiment;
mod proxy;
mod report;
mod serve;

use clap::Parser;

fn main() -> std::process::ExitCode {
    // Before any thread exists, so every thread inherits the mask and only the dedicated
    // signal thread ever takes SIGINT/SIGTERM.
    if let Err(error) = coldwire_server::system::block_termination_signals() {
        eprintln!("error: cannot set up signal handling: {error}");
        return std::process::ExitCode::FAILURE;
    }
    let arguments = cli::Cli::parse();
    let result = match arguments.command {
        cli::Command::Serve(serve) => serve::run(serve),
        cli::Command::Proxy(proxy) => proxy::run(proxy),
        cli::Command::Bench(bench) => bench::run(bench),
        cli::Command::Experiment(experiment) => experiment::run(experiment),
        cli::Command::Report(report) => report::run(report),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
