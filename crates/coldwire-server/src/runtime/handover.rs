//! Listening sockets passed between processes: the zero-downtime binary upgrade (SIGUSR2,
//! as nginx's USR2) and systemd socket activation (`LISTEN_FDS`).
//!
//! - Upgrade, old side ([`UpgradeHandle::upgrade`]): the executable the server started
//!   from (its path as it was at start, so a binary installed over it since is the one
//!   run) is started with the same arguments, the listening sockets inherited and named
//!   by `COLDWIRE_LISTEN_FDS=7,8` (and the stats socket by `COLDWIRE_ADMIN_FD`), and a
//!   pipe named by `COLDWIRE_READY_FD`. When the new process says it serves, the old one
//!   stops accepting and drains (its stop path, as on SIGTERM). If the new one fails or
//!   is not ready in time, the old one serves on and says why. The sockets are the same
//!   kernel sockets all along: a connection waiting in a backlog is taken by one process
//!   or the other, never refused, and no other process ever joins the port.
//! - Upgrade, new side (`take_inherited`, [`announce_ready`]): the named sockets are used
//!   instead of binding; once the workers run, the new process writes `READY` on the pipe.
//! - systemd: with `LISTEN_PID` = this process and `LISTEN_FDS=N`, descriptors 3..3+N
//!   are the listening sockets (the unit's `.socket` `ListenStream=`); the stats endpoint
//!   then binds its own address as usual.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use socket2::Socket;

use super::running::StopHandle;
use crate::error::ServerError;

/// The listening sockets handed to a new process: descriptor numbers, comma-separated.
pub const LISTEN_FDS_VARIABLE: &str = "COLDWIRE_LISTEN_FDS";
/// The stats endpoint's listening socket handed to a new process.
pub const ADMIN_FD_VARIABLE: &str = "COLDWIRE_ADMIN_FD";
/// The pipe on which a new process says it serves.
pub const READY_FD_VARIABLE: &str = "COLDWIRE_READY_FD";
/// systemd's first passed descriptor (`SD_LISTEN_FDS_START`).
const SYSTEMD_FIRST_FD: RawFd = 3;
/// How long the old process waits for the new one to serve.
const READY_WAIT: Duration = Duration::from_secs(30);

/// The path of this process's executable as it was at start.
static EXECUTABLE: OnceLock<Option<PathBuf>> = OnceLock::new();
/// Whether the inherited sockets were taken (they are taken once, by the first server).
static TAKEN: Mutex<bool> = Mutex::new(false);

/// Remembers the executable's path now, before an upgrade may install another file there.
pub(crate) fn remember_executable() {
    EXECUTABLE.get_or_init(|| std::env::current_exe().ok());
}

/// `name`'s value as descriptor numbers.
fn descriptors(name: &str) -> Option<Result<Vec<RawFd>, String>> {
    let text = std::env::var(name).ok()?;
    Some(
        text.split(',')
            .map(|number| {
                number
                    .trim()
                    .parse::<RawFd>()
                    .map_err(|_| format!("{name}={text:?} is not a list of descriptor numbers"))
            })
            .collect(),
    )
}

/// The sockets systemd passed to this process, if it did.
fn systemd_descriptors() -> Option<Result<Vec<RawFd>, String>> {
    let pid: u32 = std::env::var("LISTEN_PID").ok()?.trim().parse().ok()?;
    if pid != std::process::id() {
        return None;
    }
    let text = std::env::var("LISTEN_FDS").ok()?;
    Some(match text.trim().parse::<RawFd>() {
        Ok(count) if count > 0 => Ok((SYSTEMD_FIRST_FD..SYSTEMD_FIRST_FD + count).collect()),
        _ => Err(format!("LISTEN_FDS={text:?} is not a count of descriptors")),
    })
}

/// Takes ownership of inherited descriptor `fd`, which must be a listening TCP socket.
fn adopt(fd: RawFd) -> Result<TcpListener, String> {
    // SAFETY: F_GETFD on any number has no effect beyond its answer.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(format!("descriptor {fd} is not open"));
    }
    // SAFETY: `fd` is open (checked above), was passed to this process to own (the
    // hand-over protocol), and is adopted once: `TAKEN` guards against a second adoption.
    let socket = unsafe { Socket::from_raw_fd(fd) };
    let listening = socket.is_listener().unwrap_or(false);
    let stream = socket
        .r#type()
        .is_ok_and(|kind| kind == socket2::Type::STREAM);
    if !(listening && stream) {
        // Not ours to close: give the number back untouched.
        let _ = std::os::fd::IntoRawFd::into_raw_fd(socket);
        return Err(format!("descriptor {fd} is not a listening TCP socket"));
    }
    socket
        .set_cloexec(true)
        .map_err(|error| format!("descriptor {fd}: {error}"))?;
    Ok(socket.into())
}

/// Inherited sockets: the workers' listeners, and the stats endpoint's if handed over.
pub(crate) type Inherited = (Vec<TcpListener>, Option<TcpListener>);

/// The listening sockets this process inherited — from an upgrading coldwire
/// (`COLDWIRE_LISTEN_FDS`) or from systemd (`LISTEN_FDS`) — and the stats socket if one
/// was handed over too. `None`: nothing inherited (bind as usual). Taken once per process.
pub(crate) fn take_inherited() -> Result<Option<Inherited>, ServerError> {
    let mut taken = TAKEN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if *taken {
        return Ok(None);
    }
    *taken = true;
    let fail = |message: String| ServerError::Handover { message };
    let Some(listen) = descriptors(LISTEN_FDS_VARIABLE).or_else(systemd_descriptors) else {
        return Ok(None);
    };
    let listeners = listen
        .map_err(fail)?
        .into_iter()
        .map(adopt)
        .collect::<Result<Vec<_>, _>>()
        .map_err(fail)?;
    if listeners.is_empty() {
        return Err(fail("no listening socket was passed".to_owned()));
    }
    let admin = match descriptors(ADMIN_FD_VARIABLE) {
        Some(Ok(fds)) if fds.len() == 1 => Some(adopt(fds[0]).map_err(fail)?),
        Some(_) => {
            return Err(fail(format!(
                "{ADMIN_FD_VARIABLE} must name one descriptor"
            )));
        }
        None => None,
    };
    Ok(Some((listeners, admin)))
}

/// In a process started by an upgrade: tells the old process this one serves (it then
/// drains and exits). True when this process is such a successor.
pub fn announce_ready() -> bool {
    static ANNOUNCED: AtomicBool = AtomicBool::new(false);
    let Some(Ok(fds)) = descriptors(READY_FD_VARIABLE) else {
        return false;
    };
    if ANNOUNCED.swap(true, Ordering::SeqCst) || fds.len() != 1 {
        return false;
    }
    let fd = fds[0];
    // SAFETY: F_GETFD only asks whether `fd` is open.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return false;
    }
    // SAFETY: `fd` is open and is the write end of the pipe the old process passed for
    // this one message; `ANNOUNCED` makes this the only owner, once.
    let mut pipe = unsafe { File::from_raw_fd(fd) };
    let _ = pipe.write_all(b"READY\n");
    true
}

/// Copies of a running server's listening sockets, kept for an upgrade; `None` once the
/// server stops (its stop closes them, so that the sockets close with the workers').
pub(crate) type KeptSockets = Arc<Mutex<Option<Kept>>>;

/// The sockets a server hands over.
pub(crate) struct Kept {
    /// The workers' listening sockets.
    pub(crate) listeners: Vec<TcpListener>,
    /// The stats endpoint's.
    pub(crate) admin: Option<TcpListener>,
}

/// What SIGUSR2 needs of a running server: the sockets to hand over and its stop.
#[derive(Clone)]
pub struct UpgradeHandle {
    pub(super) kept: KeptSockets,
    pub(super) stop: StopHandle,
}

impl UpgradeHandle {
    /// Starts the new process with the sockets, waits until it serves, then stops this
    /// one (drain, exit). Returns the new process's id; on an error this one serves on.
    pub fn upgrade(&self) -> Result<u32, ServerError> {
        let fail = |message: String| ServerError::Handover { message };
        let executable = EXECUTABLE
            .get()
            .cloned()
            .flatten()
            .ok_or_else(|| fail("the executable's path is unknown".to_owned()))?;
        // Held until the new process is started: a stop meanwhile cannot close them.
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(sockets) = kept.as_ref() else {
            return Err(fail("the server is stopping".to_owned()));
        };
        let (mut ready_read, ready_write) =
            std::io::pipe().map_err(|error| fail(format!("cannot make a pipe: {error}")))?;
        let mut inherited: Vec<RawFd> = sockets.listeners.iter().map(AsRawFd::as_raw_fd).collect();
        let listen_list = join(&inherited);
        let mut command = std::process::Command::new(&executable);
        command
            .args(std::env::args_os().skip(1))
            .env(LISTEN_FDS_VARIABLE, listen_list)
            .env(READY_FD_VARIABLE, ready_write.as_raw_fd().to_string())
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_PID")
            .env_remove("LISTEN_FDNAMES")
            .env_remove(ADMIN_FD_VARIABLE);
        if let Some(admin) = &sockets.admin {
            command.env(ADMIN_FD_VARIABLE, admin.as_raw_fd().to_string());
            inherited.push(admin.as_raw_fd());
        }
        inherited.push(ready_write.as_raw_fd());
        // SAFETY: the closure runs in the child between fork and exec and calls only
        // fcntl, which is async-signal-safe, on descriptors open in the parent (so in the
        // child): it clears close-on-exec so that exactly these are inherited.
        unsafe {
            command.pre_exec(move || {
                for &fd in &inherited {
                    if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(|error| {
            fail(format!(
                "cannot start {}: {error}",
                display_path(&executable)
            ))
        })?;
        drop(ready_write);
        drop(kept);
        match wait_ready(&mut ready_read, READY_WAIT) {
            Ok(()) => {
                self.stop.stop();
                Ok(child.id())
            }
            Err(reason) => {
                // SAFETY: signalling our own child, which has not been waited for.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
                let status = child.wait();
                Err(fail(format!(
                    "the new process {reason} (exit: {}); this one serves on",
                    status.map_or_else(|error| error.to_string(), |status| status.to_string())
                )))
            }
        }
    }
}

fn join(fds: &[RawFd]) -> OsString {
    fds.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
        .into()
}

fn display_path(path: &std::path::Path) -> String {
    path.display().to_string()
}

/// Waits up to `limit` for `READY` on the pipe.
fn wait_ready(pipe: &mut std::io::PipeReader, limit: Duration) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    let mut received = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("was not ready within {}s", limit.as_secs()));
        }
        let mut poll = libc::pollfd {
            fd: pipe.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let ready =
            unsafe { libc::poll(&mut poll, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if ready < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("could not be waited for: {error}"));
        }
        if ready == 0 {
            continue;
        }
        let mut buffer = [0u8; 64];
        match pipe.read(&mut buffer) {
            Ok(0) => return Err("exited or closed its pipe before it was ready".to_owned()),
            Ok(count) => {
                received.extend_from_slice(&buffer[..count]);
                if received.starts_with(b"READY") {
                    return Ok(());
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(format!("could not be read from: {error}")),
        }
    }
}
