//! `ServerError`: what can stop the server from starting or running, each message saying
//! what to do about it.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Errors of the server crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The document root cannot be opened.
    #[error(
        "cannot open document root {}: {source} — {}",
        shown_path(path),
        root_fix(source)
    )]
    Root {
        /// The root given.
        path: PathBuf,
        /// Why it failed.
        source: io::Error,
    },
    /// A listening socket cannot be set up.
    #[error("cannot listen on {address}: {source} — {}", listen_fix(*address, source, "--listen"))]
    Listen {
        /// The address.
        address: SocketAddr,
        /// Why it failed.
        source: io::Error,
    },
    /// The stats endpoint cannot listen.
    #[error("cannot listen for stats on {address}: {source} — {}", listen_fix(*address, source, "--admin"))]
    Admin {
        /// The address.
        address: SocketAddr,
        /// Why it failed.
        source: io::Error,
    },
    /// The access log cannot be opened.
    #[error("cannot open access log {path}: {source} — check the directory exists and is writable")]
    AccessLog {
        /// The file.
        path: PathBuf,
        /// Why it failed.
        source: io::Error,
    },
    /// The error log cannot be opened.
    #[error("cannot open error log {path}: {source} — check the directory exists and is writable")]
    ErrorLog {
        /// The file.
        path: PathBuf,
        /// Why it failed.
        source: io::Error,
    },
    /// The stats log cannot be opened.
    #[error("cannot open stats log {path}: {source} — check the directory exists and is writable")]
    StatsLog {
        /// The file.
        path: PathBuf,
        /// Why it failed.
        source: io::Error,
    },
    /// The chosen event mechanism does not work here.
    #[error("I/O backend {backend} is unavailable here: {source} — choose another with --io")]
    Backend {
        /// The backend name.
        backend: &'static str,
        /// Why it failed.
        source: io::Error,
    },
    /// The cache's storage cannot be opened (a disk store's directory).
    #[error("cannot open the {storage} cache: {source} — fix the path or pick another --cache-dir")]
    Storage {
        /// The storage's name.
        storage: &'static str,
        /// Why it failed.
        source: io::Error,
    },
    /// An event loop failed while running.
    #[error("worker {worker} stopped: {source}")]
    Worker {
        /// Worker index.
        worker: usize,
        /// What failed.
        source: io::Error,
    },
    /// Passing listening sockets between processes (binary upgrade, systemd socket
    /// activation) failed.
    #[error("socket hand-over: {message} — see docs/operations.md (Binary upgrade, systemd)")]
    Handover {
        /// What went wrong.
        message: String,
    },
    /// Any other system error during start-up.
    #[error("{context}: {source}")]
    System {
        /// What was being done.
        context: &'static str,
        /// The error.
        source: io::Error,
    },
}

/// What to do when listening on `address` failed with `error` (given with `flag`).
fn listen_fix(address: SocketAddr, error: &io::Error, flag: &str) -> String {
    // EMFILE, ENFILE: not the address's fault (each worker opens its own listener).
    if matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
        return "the process ran out of open files (every worker opens its own listener): \
                raise the open-files limit (ulimit -n, LimitNOFILE= in a systemd unit) or run \
                fewer --workers"
            .to_owned();
    }
    match error.kind() {
        io::ErrorKind::PermissionDenied if address.port() < 1024 => format!(
            "ports below 1024 need root or the CAP_NET_BIND_SERVICE capability (setcap \
             cap_net_bind_service=+ep on the binary, or AmbientCapabilities= in the systemd \
             unit); or pick a port of 1024 or more with {flag}"
        ),
        io::ErrorKind::PermissionDenied => {
            format!("this user may not listen there; pick another address with {flag}")
        }
        io::ErrorKind::AddrInUse => format!(
            "another process listens there (find it with `ss -ltnp`); stop it or pick another \
             port with {flag}"
        ),
        io::ErrorKind::AddrNotAvailable => format!(
            "that address is not one of this host's; pick one of its addresses (or 0.0.0.0) \
             with {flag}"
        ),
        _ => format!("pick another address or port with {flag}"),
    }
}

/// A path as given, and for a relative one where it was looked for (a configuration file's
/// paths are relative to the working directory, `/` under systemd, not to the file).
fn shown_path(path: &std::path::Path) -> String {
    match std::env::current_dir() {
        Ok(directory) if path.is_relative() => format!(
            "{} (relative to the working directory {})",
            path.display(),
            directory.display()
        ),
        _ => path.display().to_string(),
    }
}

/// What to do when the document root cannot be opened.
fn root_fix(error: &io::Error) -> &'static str {
    match error.kind() {
        io::ErrorKind::PermissionDenied => {
            "let the server's user read it (chmod/chown, or run as its owner), or pass another \
             directory with --root"
        }
        _ => "pass an existing directory with --root",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listen_message(source: io::Error) -> String {
        ServerError::Listen {
            address: "127.0.0.1:8080".parse().unwrap(),
            source,
        }
        .to_string()
    }

    #[test]
    fn out_of_descriptors_points_at_the_limit_and_the_workers_not_the_address() {
        for errno in [libc::EMFILE, libc::ENFILE] {
            let message = listen_message(io::Error::from_raw_os_error(errno));
            assert!(message.contains("ulimit -n"), "{message}");
            assert!(message.contains("--workers"), "{message}");
            assert!(!message.contains("pick another"), "{message}");
        }
        let in_use = listen_message(io::ErrorKind::AddrInUse.into());
        assert!(in_use.contains("ss -ltnp"), "{in_use}");
    }

    #[test]
    fn a_relative_root_says_where_it_was_looked_for() {
        let root = |path: &str| {
            ServerError::Root {
                path: path.into(),
                source: io::ErrorKind::NotFound.into(),
            }
            .to_string()
        };
        assert!(
            root("www").contains("relative to the working directory /"),
            "{}",
            root("www")
        );
        assert!(
            !root("/srv/www").contains("relative"),
            "{}",
            root("/srv/www")
        );
    }
}
