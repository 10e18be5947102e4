//! Whether io_uring can be used here, and if not, why — in words a user can act on.
//!
//! io_uring may be missing (old kernel), switched off (`kernel.io_uring_disabled`, Linux
//! 6.6+: 1 = only `CAP_SYS_ADMIN` or the `io_uring_group`, 2 = nobody), or filtered by a
//! seccomp profile (Docker and containerd refuse `io_uring_setup` by default, `EPERM`). The
//! probe reads the sysctl, creates a small ring, and asks the kernel (`IORING_REGISTER_PROBE`)
//! for every opcode the backend submits; the multishot flags cannot be probed per opcode, so
//! the kernel version stands in for them (multishot poll 5.13, multishot accept and
//! provided-buffer rings 5.19, multishot receive 6.0).

use std::io;

use io_uring::{IoUring, Probe, opcode};

/// What a backend needs from io_uring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// `uring-poll`: multishot `POLL_ADD` and `POLL_REMOVE`.
    Poll,
    /// `uring`: multishot accept and receive with a buffer ring, send, read, close, cancel.
    Completion,
}

fn unavailable(kind: io::ErrorKind, message: String) -> io::Error {
    io::Error::new(kind, message)
}

/// The running kernel's (major, minor) version, from `uname`.
fn kernel_version() -> Option<(u32, u32)> {
    // SAFETY: `utsname` is plain old data; uname fills it or fails.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is a valid, writable utsname.
    if unsafe { libc::uname(&mut name) } != 0 {
        return None;
    }
    let release: Vec<u8> = name
        .release
        .iter()
        .take_while(|&&byte| byte != 0)
        .map(|&byte| byte as u8)
        .collect();
    let release = String::from_utf8_lossy(&release);
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Checks that io_uring works here with everything `needs` asks for.
pub fn probe(needs: Needs) -> io::Result<()> {
    if let Ok(text) = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        && text.trim() == "2"
    {
        return Err(unavailable(
            io::ErrorKind::PermissionDenied,
            "io_uring is switched off on this machine (sysctl kernel.io_uring_disabled=2); \
             use --io epoll, or set the sysctl to 0"
                .into(),
        ));
    }
    let ring = IoUring::new(8).map_err(|error| match error.raw_os_error() {
        Some(libc::ENOSYS) => unavailable(
            io::ErrorKind::Unsupported,
            "this kernel has no io_uring (io_uring_setup: ENOSYS); use --io epoll".into(),
        ),
        Some(libc::EPERM) => unavailable(
            io::ErrorKind::PermissionDenied,
            "io_uring_setup was refused (EPERM): kernel.io_uring_disabled=1 without \
             CAP_SYS_ADMIN or io_uring_group, or a seccomp filter (container runtimes block \
             io_uring by default); use --io epoll"
                .into(),
        ),
        _ => unavailable(error.kind(), format!("io_uring_setup failed: {error}")),
    })?;
    if !ring.params().is_feature_ext_arg() {
        return Err(unavailable(
            io::ErrorKind::Unsupported,
            "io_uring here lacks waits with a timeout (IORING_FEAT_EXT_ARG, Linux 5.11)".into(),
        ));
    }
    let mut kernel = Probe::new();
    ring.submitter()
        .register_probe(&mut kernel)
        .map_err(|error| {
            unavailable(
                error.kind(),
                format!("io_uring opcode probe failed: {error}"),
            )
        })?;
    let (minimum, opcodes): ((u32, u32), &[(u8, &str)]) = match needs {
        Needs::Poll => (
            (5, 13),
            &[
                (opcode::PollAdd::CODE, "POLL_ADD"),
                (opcode::PollRemove::CODE, "POLL_REMOVE"),
            ],
        ),
        Needs::Completion => (
            (6, 0),
            &[
                (opcode::PollAdd::CODE, "POLL_ADD"),
                (opcode::Accept::CODE, "ACCEPT"),
                (opcode::Recv::CODE, "RECV"),
                (opcode::SendMsg::CODE, "SENDMSG"),
                (opcode::Read::CODE, "READ"),
                (opcode::Close::CODE, "CLOSE"),
                (opcode::Shutdown::CODE, "SHUTDOWN"),
                (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
            ],
        ),
    };
    for &(code, name) in opcodes {
        if !kernel.is_supported(code) {
            return Err(unavailable(
                io::ErrorKind::Unsupported,
                format!("io_uring here lacks IORING_OP_{name}; use --io epoll"),
            ));
        }
    }
    if let Some(version) = kernel_version()
        && version < minimum
    {
        return Err(unavailable(
            io::ErrorKind::Unsupported,
            format!(
                "io_uring multishot operations need Linux {}.{} or later (this is {}.{}); \
                 use --io epoll",
                minimum.0, minimum.1, version.0, version.1
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_version_is_read() {
        let (major, _) = kernel_version().unwrap();
        assert!(major >= 3);
    }
}
