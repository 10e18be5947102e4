//! systemd's readiness protocol (`sd_notify`, for `Type=notify` units): a datagram such as
//! `READY=1` sent to the Unix socket named by `$NOTIFY_SOCKET` (a path, or an abstract
//! name written `@name`). Without that variable (not under systemd) nothing is sent.
//! See examples/coldwire-proxy.service and docs/operations.md.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Sends `state` (`READY=1`, `STOPPING=1`, `RELOADING=1`, lines joined by `\n`) to the
/// service manager, if there is one; errors are returned (callers usually ignore them).
pub fn try_notify(state: &str) -> io::Result<bool> {
    let Some(name) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(false);
    };
    send(&name, state)?;
    Ok(true)
}

/// Sends `state` to the socket `name` (a path, or `@` and an abstract name).
fn send(name: &std::ffi::OsStr, state: &str) -> io::Result<()> {
    let bytes = name.as_encoded_bytes();
    let address = match bytes.strip_prefix(b"@") {
        Some(abstract_name) => SocketAddr::from_abstract_name(abstract_name)?,
        None => SocketAddr::from_pathname(std::path::Path::new(&name))?,
    };
    let socket = UnixDatagram::unbound()?;
    socket.send_to_addr(state.as_bytes(), &address)?;
    Ok(())
}

/// [`try_notify`], ignoring failures (the service manager will time the start out and
/// say so; the server itself runs on).
pub fn notify(state: &str) {
    let _ = try_notify(state);
}

/// Says the server serves: to the old process of a binary upgrade, if this is its new
/// one ([`crate::runtime::handover::announce_ready`]), and to systemd — `READY=1`, with
/// `MAINPID` after an upgrade, so that systemd follows the new process (the unit needs
/// `NotifyAccess=all` for that).
pub fn ready() {
    if crate::runtime::handover::announce_ready() {
        notify(&format!("MAINPID={}\nREADY=1", std::process::id()));
    } else {
        notify("READY=1");
    }
}

/// `RELOADING=1` with the `MONOTONIC_USEC` systemd wants for `Type=notify-reload`.
pub fn reloading() {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid out-pointer for clock_gettime.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let microseconds = now.tv_sec as u64 * 1_000_000 + now.tv_nsec as u64 / 1_000;
    notify(&format!("RELOADING=1\nMONOTONIC_USEC={microseconds}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_reach_the_named_socket_by_path_or_abstract_name() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        send(path.as_os_str(), "READY=1").unwrap();
        let mut buffer = [0u8; 64];
        let length = listener.recv(&mut buffer).unwrap();
        assert_eq!(&buffer[..length], b"READY=1");
        let name = format!("coldwire-notify-test-{}", std::process::id());
        let address = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&address).unwrap();
        send(format!("@{name}").as_ref(), "STOPPING=1").unwrap();
        let length = listener.recv(&mut buffer).unwrap();
        assert_eq!(&buffer[..length], b"STOPPING=1");
    }
}
