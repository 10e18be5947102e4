//! Whether io_uring can be used here, and if not, why — in words a user can act on — and
//! which multishot operations this kernel really performs.
//!
//! io_uring may be missing (old kernel), switched off (`kernel.io_uring_disabled`, Linux
//! 6.6+: 1 = only `CAP_SYS_ADMIN` or the `io_uring_group`, 2 = nobody), or filtered by a
//! seccomp profile (Docker and containerd refuse `io_uring_setup` by default, `EPERM`). The
//! probe reads the sysctl, creates a small ring, and asks the kernel (`IORING_REGISTER_PROBE`)
//! for every opcode the backend submits. Multishot support is a *flag* on an opcode, which
//! the opcode probe cannot see, so it is found by a trial ([`multishot`]): on a listening
//! socket on 127.0.0.1 port 0, a multishot `ACCEPT`, a multishot `RECV` from a provided-buffer
//! ring and a multishot `POLL_ADD` are submitted, and each counts as supported only if its
//! completion carries `IORING_CQE_F_MORE` (an unsupported flag fails with `EINVAL`). The
//! completion driver falls back to single-shot accept and receive where the trial fails;
//! `uring-poll` is built on multishot poll and is refused without it.
//!
//! The trial runs once per process, on a helper thread: tearing down a ring can post task
//! work to the thread that made it, and that thread's next blocking socket call with a
//! timeout would fail with `EINTR` (see `docs/backends.md`).

use std::io;

use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use io_uring::{IoUring, Probe, cqueue, opcode, types};

use super::buffers::BufferRing;
use super::ring::{Ring, RingOptions};

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

/// Which multishot operations the trial found working.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Multishot {
    /// Provided-buffer rings can be registered (Linux 5.19); the completion driver needs them.
    pub buffer_ring: bool,
    /// `ACCEPT` with `IORING_ACCEPT_MULTISHOT` (5.19).
    pub accept: bool,
    /// `RECV` with `IORING_RECV_MULTISHOT` (6.0).
    pub recv: bool,
    /// `POLL_ADD` with `IORING_POLL_ADD_MULTI` (5.13).
    pub poll: bool,
}

/// What this kernel supports, found once per process by a trial on a helper thread (see the
/// module doc); all `false` where io_uring cannot be used at all.
pub fn multishot() -> Multishot {
    static FOUND: OnceLock<Multishot> = OnceLock::new();
    *FOUND.get_or_init(|| {
        std::thread::spawn(|| trial().unwrap_or_default())
            .join()
            .unwrap_or_default()
    })
}

const ACCEPT: u64 = 1;
const RECV: u64 = 2;
const POLL: u64 = 3;
const SINGLE_ACCEPT: u64 = 4;

/// Submits one operation to the trial ring and waits (at most 2 s) for its first
/// completion.
fn first_completion(ring: &mut Ring, entry: io_uring::squeue::Entry) -> Option<cqueue::Entry> {
    let tag = entry.get_user_data();
    // SAFETY: the trial's operations point to no memory of ours (accepts without an
    // address, receives selecting from the registered buffer ring, polls).
    unsafe { ring.push(&entry) }.ok()?;
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut reaped = Vec::new();
    while Instant::now() < deadline {
        ring.submit_and_wait(Some(Duration::from_millis(50))).ok()?;
        reaped.clear();
        ring.drain_into(&mut reaped);
        if let Some(found) = reaped.iter().find(|entry| entry.user_data() == tag) {
            return Some(found.clone());
        }
    }
    None
}

/// The trial itself: a small ring, a buffer ring, a listener and a client on loopback.
fn trial() -> io::Result<Multishot> {
    let mut found = Multishot::default();
    let mut ring = Ring::new(RingOptions {
        entries: 8,
        completion_entries: 64,
        sqpoll_idle_millis: None,
        min_wait: None,
    })?;
    let Ok(buffers) = BufferRing::new(&ring, 4, 4096, 0) else {
        return Ok(found);
    };
    found.buffer_ring = true;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let mut client = TcpStream::connect(listener.local_addr()?)?;
    let accept = opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd()))
        .build()
        .user_data(ACCEPT);
    let accepted = match first_completion(&mut ring, accept) {
        Some(entry) if entry.result() >= 0 => {
            found.accept = cqueue::more(entry.flags());
            Some(entry.result())
        }
        _ => None,
    };
    let accepted = accepted.or_else(|| {
        // Single-shot accept, to try the receive anyway (the client is in the backlog).
        let accept = opcode::Accept::new(
            types::Fd(listener.as_raw_fd()),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
        .build()
        .user_data(SINGLE_ACCEPT);
        first_completion(&mut ring, accept)
            .map(|entry| entry.result())
            .filter(|&fd| fd >= 0)
    });
    if let Some(fd) = accepted {
        std::io::Write::write_all(&mut client, b"x")?;
        let recv = opcode::RecvMulti::new(types::Fd(fd), buffers.group())
            .build()
            .user_data(RECV);
        if let Some(entry) = first_completion(&mut ring, recv) {
            found.recv = entry.result() == 1 && cqueue::more(entry.flags());
        }
        let poll = opcode::PollAdd::new(types::Fd(fd), libc::POLLOUT as u32)
            .multi(true)
            .build()
            .user_data(POLL);
        if let Some(entry) = first_completion(&mut ring, poll) {
            found.poll = entry.result() > 0 && cqueue::more(entry.flags());
        }
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(0);
        // Best effort: the ring's teardown cancels whatever is left as well.
        let _ = first_completion(&mut ring, cancel);
        crate::sys::close(fd);
    }
    // The ring lets go of the buffer ring's memory before that memory is unmapped.
    drop(ring);
    drop(buffers);
    Ok(found)
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
    let opcodes: &[(u8, &str)] = match needs {
        Needs::Poll => &[
            (opcode::PollAdd::CODE, "POLL_ADD"),
            (opcode::PollRemove::CODE, "POLL_REMOVE"),
        ],
        Needs::Completion => &[
            (opcode::PollAdd::CODE, "POLL_ADD"),
            (opcode::Accept::CODE, "ACCEPT"),
            (opcode::Recv::CODE, "RECV"),
            (opcode::Send::CODE, "SEND"),
            (opcode::SendMsg::CODE, "SENDMSG"),
            (opcode::Read::CODE, "READ"),
            (opcode::Write::CODE, "WRITE"),
            (opcode::Fsync::CODE, "FSYNC"),
            (opcode::Splice::CODE, "SPLICE"),
            (opcode::Tee::CODE, "TEE"),
            (opcode::Close::CODE, "CLOSE"),
            (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
        ],
    };
    for &(code, name) in opcodes {
        if !kernel.is_supported(code) {
            return Err(unavailable(
                io::ErrorKind::Unsupported,
                format!("io_uring here lacks IORING_OP_{name}; use --io epoll"),
            ));
        }
    }
    drop(ring);
    let found = multishot();
    match needs {
        Needs::Poll if !found.poll => Err(unavailable(
            io::ErrorKind::Unsupported,
            "io_uring here has no multishot POLL_ADD (Linux 5.13), which uring-poll is built \
             on; use --io epoll"
                .into(),
        )),
        Needs::Completion if !found.buffer_ring => Err(unavailable(
            io::ErrorKind::Unsupported,
            "io_uring here cannot register provided-buffer rings (Linux 5.19), which the \
             uring backend receives into; use --io epoll"
                .into(),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trial_finds_what_this_kernel_does() {
        if let Err(reason) = probe(Needs::Completion) {
            println!("skipped: io_uring is unavailable here: {reason}");
            return;
        }
        let found = multishot();
        // A trial, not an inference: whatever it found must also work when used again.
        println!("multishot support found by the trial: {found:?}");
        assert!(
            found.buffer_ring,
            "the completion probe passed, so buffer rings work"
        );
        assert_eq!(multishot(), found, "the trial runs once and is remembered");
    }
}
