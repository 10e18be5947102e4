//! The poller layer: the readiness interface every event mechanism implements — register
//! a descriptor once with a token and an interest, change the interest, forget it, and
//! wait for readiness — and one file per mechanism, each with a type named after its
//! system call: [`select`] (`SelectPoller`), [`poll`] (`PollPoller`), [`epoll`]
//! (`EpollPoller`) and [`uring_poll`] (`UringPoller`, io_uring's multishot `POLL_ADD`).
//! A poller knows descriptors and tokens only; connections are the readiness driver's
//! (`crate::readiness`), which runs over any of them.
//!
//! Invariants shared by all backends:
//! - the interest set is kept incrementally: `register`, `modify` and `deregister` cost
//!   O(1) user-space work (plus, for epoll, one `epoll_ctl`); nothing walks every open
//!   descriptor per wait except what the mechanism itself does in the kernel (select and
//!   poll scan their whole set on every call: that is the cost the experiments measure);
//! - a token is an opaque `usize` chosen by the caller and handed back in [`Event`]s;
//! - level-triggered backends report a descriptor on every wait while it stays ready, so the
//!   caller must drop interest it cannot act on; edge-triggered backends
//!   ([`Poller::EDGE_TRIGGERED`]) report a transition once, so the caller must keep
//!   performing the operation until `EAGAIN` (or a short read) before waiting again.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

pub mod epoll;
pub mod poll;
pub mod select;
pub mod uring_poll;

pub use epoll::EpollPoller;
pub use poll::PollPoller;
pub use select::SelectPoller;
pub use uring_poll::UringPoller;

/// What a registered descriptor should be watched for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Interest {
    /// Report when the descriptor has data to read (or EOF, or an error).
    pub readable: bool,
    /// Report when the descriptor can accept more data to write.
    pub writable: bool,
}

impl Interest {
    /// Watch nothing: the descriptor stays registered but is never reported.
    pub const NONE: Interest = Interest {
        readable: false,
        writable: false,
    };
    /// Watch for readability only.
    pub const READABLE: Interest = Interest {
        readable: true,
        writable: false,
    };
    /// Watch for writability only.
    pub const WRITABLE: Interest = Interest {
        readable: false,
        writable: true,
    };
    /// Watch for both.
    pub const BOTH: Interest = Interest {
        readable: true,
        writable: true,
    };
}

/// One readiness report from [`Poller::wait`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// The token given at registration.
    pub token: usize,
    /// A read would not block: data, end of stream, or a pending error.
    pub readable: bool,
    /// A write would not block (or would fail at once with an error).
    pub writable: bool,
    /// The peer ended its stream, or the socket failed (`EPOLLRDHUP`, `POLLHUP`...): set by
    /// pollers that can tell. An edge-triggered poller raises no further edge for the end
    /// of stream, so the driver keeps reading until it has seen it.
    pub hangup: bool,
}

/// Counters a poller keeps about its own system calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollerCounters {
    /// Calls to the wait system call (`select`, `poll`, `epoll_wait`, ...).
    pub wait_calls: u64,
    /// Calls that changed the kernel's interest set (`epoll_ctl`); zero for select and poll,
    /// whose interest lives in user space and is handed to the kernel on every wait.
    pub control_calls: u64,
    /// Descriptors handed to the kernel by the wait calls, summed (select: highest
    /// descriptor + 1 per call; poll: array length; epoll: 0). The per-wait scan cost.
    pub descriptors_scanned: u64,
    /// io_uring backends: submission queue entries queued for the kernel (0 elsewhere).
    pub uring_submissions: u64,
    /// io_uring backends: completion queue entries reaped (0 elsewhere).
    pub uring_completions: u64,
    /// io_uring backends: `io_uring_enter` calls, the waiting ones (`wait_calls`) included.
    pub uring_enter_calls: u64,
}

/// A readiness notification mechanism. One implementation per file, named after its
/// system call: `SelectPoller`, `PollPoller`, `EpollPoller`.
pub trait Poller: Sized {
    /// The name used on the command line and in reports (`select`, `poll`, `epoll`).
    const NAME: &'static str;
    /// True when readiness is reported once per transition (epoll with `EPOLLET`). Generic
    /// code reads this flag, never the backend's name: with edge triggering it registers
    /// full interest once and never modifies it; with level triggering it narrows interest
    /// to what it is waiting for.
    const EDGE_TRIGGERED: bool;

    /// Creates the poller. Fails when the mechanism is unavailable (e.g. a seccomp filter).
    fn new() -> io::Result<Self>;

    /// Starts watching `fd` for `interest`, reporting it with `token`. Registering a
    /// descriptor twice is an error.
    fn register(&mut self, fd: RawFd, token: usize, interest: Interest) -> io::Result<()>;

    /// Changes the interest of a registered descriptor.
    fn modify(&mut self, fd: RawFd, token: usize, interest: Interest) -> io::Result<()>;

    /// Stops watching `fd`. Must be called before the descriptor is closed, except that
    /// backends with [`Poller::FORGETS_ON_CLOSE`] may skip the kernel call.
    fn deregister(&mut self, fd: RawFd) -> io::Result<()>;

    /// True when closing a descriptor removes it from the kernel's interest set by itself
    /// (epoll, when the descriptor was never duplicated), so `deregister` before close
    /// need not make a system call.
    const FORGETS_ON_CLOSE: bool = false;

    /// Forgets `fd` in user space only, for a descriptor about to be closed by a backend
    /// with [`Poller::FORGETS_ON_CLOSE`]. The default calls [`Poller::deregister`].
    fn forget(&mut self, fd: RawFd) -> io::Result<()> {
        self.deregister(fd)
    }

    /// Waits until at least one descriptor is ready or `timeout` passes (`None`: forever,
    /// `Some(ZERO)`: just look). Appends the ready descriptors to `events`; an interrupted
    /// wait (`EINTR`) returns with no events.
    fn wait(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()>;

    /// The poller's own counters.
    fn counters(&self) -> PollerCounters;
}

/// Converts a wait timeout into milliseconds for `poll` and `epoll_wait`, rounding up so a
/// timer is never woken early into a busy retry (`-1` means forever).
pub(crate) fn timeout_millis(timeout: Option<Duration>) -> i32 {
    match timeout {
        None => -1,
        Some(duration) => {
            let millis = duration.as_nanos().div_ceil(1_000_000);
            i32::try_from(millis).unwrap_or(i32::MAX)
        }
    }
}

/// Interprets the return value of a wait system call: the number of ready descriptors, or
/// zero for an interrupted wait (`EINTR` is not an error for an event loop).
pub(crate) fn wait_result(count: i32) -> io::Result<usize> {
    if count >= 0 {
        return Ok(count as usize);
    }
    let error = io::Error::last_os_error();
    if error.kind() == io::ErrorKind::Interrupted {
        Ok(0)
    } else {
        Err(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_round_up_and_saturate() {
        assert_eq!(timeout_millis(None), -1);
        assert_eq!(timeout_millis(Some(Duration::ZERO)), 0);
        assert_eq!(timeout_millis(Some(Duration::from_micros(1))), 1);
        assert_eq!(timeout_millis(Some(Duration::from_millis(1500))), 1500);
        assert_eq!(
            timeout_millis(Some(Duration::from_secs(u64::MAX))),
            i32::MAX
        );
    }
}
