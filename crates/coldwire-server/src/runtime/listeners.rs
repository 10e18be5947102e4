//! Binding what a server listens on: one `SO_REUSEPORT` socket per worker on an address
//! no other process listens on, the stats endpoint's socket, the access log file, and each
//! worker's driver settings.

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;

use coldwire_io::DriverConfig;
use socket2::{Domain, Protocol, Socket, Type};

use crate::error::ServerError;

fn bind(address: SocketAddr, backlog: i32) -> Result<TcpListener, ServerError> {
    let fail = |source| ServerError::Listen { address, source };
    let socket = Socket::new(
        Domain::for_address(address),
        Type::STREAM,
        Some(Protocol::TCP),
    )
    .map_err(fail)?;
    socket.set_reuse_address(true).map_err(fail)?;
    socket.set_reuse_port(true).map_err(fail)?;
    // Accepted sockets inherit TCP_NODELAY on Linux: one setsockopt here, none per connection.
    socket.set_tcp_nodelay(true).map_err(fail)?;
    socket.bind(&address.into()).map_err(fail)?;
    socket.listen(backlog).map_err(fail)?;
    Ok(socket.into())
}

/// Checks that nobody listens on `address` by binding it once without `SO_REUSEPORT` (a
/// bind that fails with `EADDRINUSE` against any listening socket, including another
/// process's `SO_REUSEPORT` group); returns the address with the port the kernel chose
/// for port 0. The probe is closed before the workers bind their group.
fn claim_address(address: SocketAddr) -> Result<SocketAddr, ServerError> {
    let fail = |source| ServerError::Listen { address, source };
    let probe = Socket::new(
        Domain::for_address(address),
        Type::STREAM,
        Some(Protocol::TCP),
    )
    .map_err(fail)?;
    probe.set_reuse_address(true).map_err(fail)?;
    probe.bind(&address.into()).map_err(fail)?;
    let bound = probe
        .local_addr()
        .map_err(fail)?
        .as_socket()
        .unwrap_or(address);
    Ok(bound)
}

/// One `SO_REUSEPORT` listener per worker, all on `listen` (port 0: the port the first one
/// got), and that address. The address must be free: another process listening there —
/// even one with `SO_REUSEPORT`, which the kernel would let this one share — is an
/// "address in use" error, as nginx reports it ([`claim_address`]).
///
/// With `inherited` sockets (a binary upgrade, systemd's `LISTEN_FDS`), nothing is bound:
/// worker `i` takes socket `i`, sharing them round-robin when there are fewer sockets than
/// workers; the address is theirs.
pub(crate) fn bind_workers(
    listen: SocketAddr,
    backlog: i32,
    workers: usize,
    inherited: Option<Vec<TcpListener>>,
) -> Result<(Vec<TcpListener>, SocketAddr), ServerError> {
    if let Some(sockets) = inherited {
        return share_inherited(sockets, workers);
    }
    let listen = claim_address(listen)?;
    let first = bind(listen, backlog)?;
    let local_addr = first.local_addr().map_err(|source| ServerError::Listen {
        address: listen,
        source,
    })?;
    let mut listeners = vec![first];
    for _ in 1..workers {
        listeners.push(bind(local_addr, backlog)?);
    }
    Ok((listeners, local_addr))
}

/// The inherited `sockets` given out to `workers` workers.
fn share_inherited(
    sockets: Vec<TcpListener>,
    workers: usize,
) -> Result<(Vec<TcpListener>, SocketAddr), ServerError> {
    let fail = |message: String| ServerError::Handover { message };
    let addresses = sockets
        .iter()
        .map(TcpListener::local_addr)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| fail(format!("an inherited socket has no address: {error}")))?;
    let local_addr = addresses[0];
    if addresses.iter().any(|address| *address != local_addr) {
        return Err(fail(format!(
            "the inherited sockets listen on different addresses ({addresses:?}); pass sockets \
             of one address"
        )));
    }
    if sockets.len() > workers {
        return Err(fail(format!(
            "{} listening sockets were passed for {workers} worker(s); start with --workers {}",
            sockets.len(),
            sockets.len()
        )));
    }
    let count = sockets.len();
    let mut listeners = sockets;
    for index in count..workers {
        let shared = listeners[index % count]
            .try_clone()
            .map_err(|error| fail(format!("cannot share an inherited socket: {error}")))?;
        listeners.push(shared);
    }
    Ok((listeners, local_addr))
}

/// Opens the access log the workers share, appending (created if missing), reopened by
/// SIGUSR1 ([`crate::log_files`]); `-` is stdout (never reopened).
pub(crate) fn open_access_log(path: Option<&Path>) -> Result<Option<Arc<File>>, ServerError> {
    path.map(|path| {
        let file = if path.as_os_str() == "-" {
            use std::os::fd::AsFd;
            std::io::stdout()
                .as_fd()
                .try_clone_to_owned()
                .map(|descriptor| Arc::new(File::from(descriptor)))
        } else {
            crate::log_files::open(path)
        };
        file.map_err(|source| ServerError::AccessLog {
            path: path.to_path_buf(),
            source,
        })
    })
    .transpose()
}

/// The driver settings of one of `workers`: its share of the connection limit, and
/// receive buffers that hold a whole request head (at least 16 KiB).
pub(crate) fn worker_driver_config(
    max_connections: usize,
    workers: usize,
    max_head_bytes: usize,
) -> DriverConfig {
    DriverConfig {
        max_connections: max_connections.div_ceil(workers),
        buffer_size: max_head_bytes.max(16 * 1024),
        ..DriverConfig::default()
    }
}

/// Binds the stats endpoint's listener, if asked for (before any worker starts, so a bad
/// address fails the start).
pub(crate) fn bind_admin(address: Option<SocketAddr>) -> Result<Option<TcpListener>, ServerError> {
    address
        .map(|address| {
            TcpListener::bind(address).map_err(|source| ServerError::Admin { address, source })
        })
        .transpose()
}
