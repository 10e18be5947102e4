//! The process's exit status by class of failure, as `sysexits.h` numbers them (systemd
//! and shells know these names: `systemctl status` shows `status=78/CONFIG`), so a script
//! or a unit can tell a bad configuration from a busy port without reading the message.
//! The table is in docs/operations.md; keep the two the same.

use std::io::ErrorKind;

use coldwire_server::ServerError;

use crate::config_file::ConfigError;

/// Everything went well.
pub const OK: u8 = 0;
/// A failure of no class below.
pub const FAILURE: u8 = 1;
/// A bad flag or flag value (`EX_USAGE`).
pub const USAGE: u8 = 64;
/// The document root (or another input) cannot be read (`EX_NOINPUT`).
pub const NO_INPUT: u8 = 66;
/// The address is in use by another process (`EX_UNAVAILABLE`).
pub const ADDRESS_IN_USE: u8 = 69;
/// A server stopped with an error while running (`EX_SOFTWARE`).
pub const SOFTWARE: u8 = 70;
/// The system cannot do what was asked: I/O backend unavailable, an address not on this
/// host, a thread that cannot start (`EX_OSERR`).
pub const OS_ERROR: u8 = 71;
/// The access log (or another output file) cannot be created (`EX_CANTCREAT`).
pub const CANNOT_CREATE: u8 = 73;
/// Missing privileges: a port below 1024 without `CAP_NET_BIND_SERVICE`, a file the user
/// may not open (`EX_NOPERM`).
pub const NO_PERMISSION: u8 = 77;
/// The configuration file is unreadable or invalid (`EX_CONFIG`).
pub const CONFIG: u8 = 78;

/// A bad flag value found after clap parsed it (`--workers 0`): marks the error as a usage
/// error for [`classify`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(String);

/// Marks `error` (from turning the flags into a configuration) as a usage error.
pub fn usage(error: anyhow::Error) -> anyhow::Error {
    let text = crate::error_chain(&error);
    anyhow::Error::new(UsageError(text))
}

/// The exit status for `error`.
pub fn classify(error: &anyhow::Error) -> u8 {
    for cause in error.chain() {
        if cause.is::<ConfigError>() {
            return CONFIG;
        }
        if cause.is::<UsageError>() {
            return USAGE;
        }
        if let Some(server) = cause.downcast_ref::<ServerError>() {
            return server_status(server);
        }
    }
    FAILURE
}

/// The status of a server's start-up or run-time error.
fn server_status(error: &ServerError) -> u8 {
    let by_kind = |kind: ErrorKind, otherwise: u8| match kind {
        ErrorKind::AddrInUse => ADDRESS_IN_USE,
        ErrorKind::PermissionDenied => NO_PERMISSION,
        _ => otherwise,
    };
    match error {
        ServerError::Root { .. } => NO_INPUT,
        ServerError::Listen { source, .. } | ServerError::Admin { source, .. } => {
            by_kind(source.kind(), OS_ERROR)
        }
        ServerError::AccessLog { source, .. } => by_kind(source.kind(), CANNOT_CREATE),
        ServerError::Backend { .. } | ServerError::System { .. } | ServerError::Handover { .. } => {
            OS_ERROR
        }
        ServerError::Worker { .. } => SOFTWARE,
        _ => FAILURE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listen(kind: ErrorKind) -> anyhow::Error {
        anyhow::Error::new(ServerError::Listen {
            address: "127.0.0.1:80".parse().unwrap(),
            source: kind.into(),
        })
        .context("coldwire serve could not start")
    }

    #[test]
    fn each_class_has_its_status() {
        assert_eq!(classify(&listen(ErrorKind::AddrInUse)), ADDRESS_IN_USE);
        assert_eq!(
            classify(&listen(ErrorKind::PermissionDenied)),
            NO_PERMISSION
        );
        assert_eq!(classify(&listen(ErrorKind::AddrNotAvailable)), OS_ERROR);
        let root = ServerError::Root {
            path: "/nowhere".into(),
            source: ErrorKind::NotFound.into(),
        };
        assert_eq!(classify(&anyhow::Error::new(root)), NO_INPUT);
        let usage_error = usage(anyhow::anyhow!("--workers must be at least 1"));
        assert_eq!(classify(&usage_error), USAGE);
        assert_eq!(classify(&anyhow::anyhow!("something else")), FAILURE);
        let statuses = [
            OK,
            FAILURE,
            USAGE,
            NO_INPUT,
            ADDRESS_IN_USE,
            SOFTWARE,
            OS_ERROR,
            CANNOT_CREATE,
            NO_PERMISSION,
            CONFIG,
        ];
        let mut distinct = statuses.to_vec();
        distinct.dedup();
        assert_eq!(distinct.len(), statuses.len());
    }
}
