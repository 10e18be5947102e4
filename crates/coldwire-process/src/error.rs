//! The runner's error type, [`ProcessError`]: a child that could not be started, or one
//! that did not do what was waited for ([`Failure`]), with the command line and the tail
//! of its stderr, so a message says which process failed and what it said.

use std::net::SocketAddr;
use std::process::ExitStatus;
use std::time::Duration;

/// Why a child process could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// `spawn` failed (no such program, not executable, pinning refused).
    #[error("cannot start `{command}`: {source}")]
    Start {
        /// The command line.
        command: String,
        /// The error from `fork`/`exec` or from the child's set-up.
        #[source]
        source: std::io::Error,
    },
    /// The child ran but did not do what was waited for.
    #[error("`{command}` {failure}{}", stderr_suffix(stderr))]
    Failed {
        /// The command line.
        command: String,
        /// What went wrong.
        failure: Failure,
        /// The last lines of its stderr (empty when not kept, or when it wrote none).
        stderr: String,
    },
}

impl ProcessError {
    /// The command line of the process concerned.
    pub fn command(&self) -> &str {
        match self {
            ProcessError::Start { command, .. } | ProcessError::Failed { command, .. } => command,
        }
    }

    /// What went wrong, without the command line or the stderr.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            ProcessError::Start { .. } => None,
            ProcessError::Failed { failure, .. } => Some(failure),
        }
    }

    /// The last lines of the process's stderr, when kept.
    pub fn stderr(&self) -> &str {
        match self {
            ProcessError::Start { .. } => "",
            ProcessError::Failed { stderr, .. } => stderr,
        }
    }
}

/// What a running child failed to do.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Failure {
    /// Its stdout closed (it exited) before the line waited for.
    #[error("exited before it was ready")]
    ExitedEarly,
    /// No stdout line with the prefix came in time.
    #[error("printed no `{prefix}` line within {timeout:?}")]
    NoReadyLine {
        /// The prefix waited for.
        prefix: String,
        /// How long it was waited for.
        timeout: Duration,
    },
    /// Its stdout is not captured ([`crate::Stdout::Lines`] was not chosen).
    #[error("has no captured output to wait for")]
    NotCaptured,
    /// It exited while its port was waited for.
    #[error("exited before accepting connections on {address} (is it running in the foreground?)")]
    ExitedBeforeAccepting {
        /// The address waited for.
        address: SocketAddr,
    },
    /// Nothing accepted connections on the address in time.
    #[error("accepted no connection on {address} within {timeout:?}")]
    NotAccepting {
        /// The address waited for.
        address: SocketAddr,
        /// How long it was waited for.
        timeout: Duration,
    },
    /// A run to completion took longer than its bound (the child was stopped).
    #[error("did not finish within {timeout:?} (stopped)")]
    TimedOut {
        /// The bound.
        timeout: Duration,
    },
    /// A run to completion ended with a failure status.
    #[error("failed ({status})")]
    Status {
        /// How it ended.
        status: ExitStatus,
    },
    /// `waitpid` itself failed.
    #[error("could not be waited for: {reason}")]
    Wait {
        /// The error.
        reason: String,
    },
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!("; its stderr:\n{stderr}")
    }
}
