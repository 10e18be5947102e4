//! The crate's error type, [`BenchError`]: everything that stops a benchmark before or
//! while it runs, each message saying what to do about it. Failures of single requests are
//! not errors here: they are counted by kind (see [`crate::recorder::ErrorCounts`]).

use std::io;

use coldwire_process::{Failure, ProcessError};

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A `--url` could not be understood.
    #[error(
        "bad URL `{url}`: {reason} (expected http://HOST[:PORT]/PATH or https://…, optionally followed by @WEIGHT)"
    )]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A host name did not resolve.
    #[error("cannot resolve `{host}`: {source} — check the name or use an IP address")]
    Resolve {
        /// The host.
        host: String,
        /// The resolver's error.
        source: io::Error,
    },
    /// The parameters contradict each other or are out of range.
    #[error("{0}")]
    Config(String),
    /// TLS could not be set up (a CA file that cannot be read, a host name that cannot be a
    /// TLS server name).
    #[error("TLS: {0}")]
    Tls(String),
    /// The generator's own event loop failed (creating the poller, waiting).
    #[error("the load generator's event loop failed: {0}")]
    Io(#[from] io::Error),
    /// The server to watch could not be read.
    #[error("cannot read /proc/{pid}: {source} — is process {pid} running and yours?")]
    ServerProcess {
        /// The process id.
        pid: u32,
        /// The error.
        source: io::Error,
    },
    /// The server's statistics endpoint did not answer usable JSON.
    #[error(
        "cannot read server statistics from {url}: {reason} — check --server-stats (coldwire serve --admin ADDR serves http://ADDR/stats)"
    )]
    ServerStats {
        /// The URL.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// Starting or stopping the server under test failed.
    #[error("cannot start the server `{command}`: {reason}")]
    Spawn {
        /// The command line.
        command: String,
        /// What went wrong.
        reason: String,
    },
}

/// A server the generator starts (`--spawn`, the built-in scenario) is run by
/// `coldwire_process`; its failures read as the generator's own messages.
impl From<ProcessError> for BenchError {
    fn from(error: ProcessError) -> BenchError {
        let reason = match &error {
            ProcessError::Start { source, .. } => source.to_string(),
            ProcessError::Failed { failure, .. } => match failure {
                Failure::ExitedEarly => {
                    "it exited before it was ready (see its messages above)".to_owned()
                }
                Failure::NoReadyLine { prefix, timeout } => {
                    format!("no `{prefix}` line within {timeout:?}")
                }
                Failure::NotCaptured => "its output is not captured".to_owned(),
                Failure::ExitedBeforeAccepting { .. } => {
                    "it exited before accepting connections: check it runs in the foreground \
                     (e.g. nginx -g 'daemon off;') and see its messages above"
                        .to_owned()
                }
                Failure::NotAccepting { address, timeout } => format!(
                    "nothing accepts connections on {address} after {timeout:?}: check the \
                     command listens where --url (or --proxy) points, or raise --spawn-wait"
                ),
                other => other.to_string(),
            },
        };
        BenchError::Spawn {
            command: error.command().to_owned(),
            reason,
        }
    }
}
