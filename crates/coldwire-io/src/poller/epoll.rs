//! `EpollPoller`: the scalable mechanism. The interest set lives in the kernel and is
//! registered once per descriptor, edge-triggered (`EPOLLET`) with both directions, so the
//! server never calls `epoll_ctl` per request; a wait costs O(ready descriptors), not
//! O(open descriptors).
//!
//! Closing a descriptor that was never duplicated removes it from the epoll set, so
//! [`Poller::forget`] makes no system call.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::poller::{Event, Interest, Poller, PollerCounters, timeout_millis, wait_result};

/// How many events one `epoll_wait` can return; more ready descriptors wait for the next
/// call (they stay on the kernel's ready list, nothing is lost).
const EVENTS_PER_WAIT: usize = 1024;

/// The epoll backend (edge-triggered).
pub struct EpollPoller {
    epoll: OwnedFd,
    ready: Vec<libc::epoll_event>,
    counters: PollerCounters,
}

fn epoll_flags(interest: Interest) -> u32 {
    let mut flags = libc::EPOLLET as u32 | libc::EPOLLRDHUP as u32;
    if interest.readable {
        flags |= libc::EPOLLIN as u32;
    }
    if interest.writable {
        flags |= libc::EPOLLOUT as u32;
    }
    flags
}

impl EpollPoller {
    fn control(&mut self, op: i32, fd: RawFd, token: usize, interest: Interest) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: epoll_flags(interest),
            u64: token as u64,
        };
        self.counters.control_calls += 1;
        // SAFETY: `self.epoll` is an open epoll descriptor we own and `event` is a valid,
        // initialised epoll_event that outlives the call.
        let result = unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), op, fd, &mut event) };
        if result < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

impl Poller for EpollPoller {
    const NAME: &'static str = "epoll";
    const EDGE_TRIGGERED: bool = true;
    const FORGETS_ON_CLOSE: bool = true;

    fn new() -> io::Result<Self> {
        // SAFETY: epoll_create1 has no memory arguments; we check the result.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(EpollPoller {
            epoll,
            ready: Vec::with_capacity(EVENTS_PER_WAIT),
            counters: PollerCounters::default(),
        })
    }

    fn register(&mut self, fd: RawFd, token: usize, interest: Interest) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_ADD, fd, token, interest)
    }

    fn modify(&mut self, fd: RawFd, token: usize, interest: Interest) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_MOD, fd, token, interest)
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_DEL, fd, 0, Interest::NONE)
    }

    fn forget(&mut self, _fd: RawFd) -> io::Result<()> {
        Ok(())
    }

    fn wait(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        self.counters.wait_calls += 1;
        self.ready.clear();
        // SAFETY: `ready` has capacity for EVENTS_PER_WAIT entries and the kernel writes at
        // most `maxevents` of them; we set the length to what it reports below.
        let count = unsafe {
            libc::epoll_wait(
                self.epoll.as_raw_fd(),
                self.ready.as_mut_ptr(),
                EVENTS_PER_WAIT as i32,
                timeout_millis(timeout),
            )
        };
        let count = wait_result(count)?;
        // SAFETY: the kernel initialised the first `count` (<= capacity) entries.
        unsafe { self.ready.set_len(count) };
        let hangup = (libc::EPOLLHUP | libc::EPOLLERR | libc::EPOLLRDHUP) as u32;
        for ready in &self.ready {
            let flags = ready.events;
            events.push(Event {
                token: ready.u64 as usize,
                readable: flags & (libc::EPOLLIN as u32 | hangup) != 0,
                hangup: flags & hangup != 0,
                writable: flags
                    & (libc::EPOLLOUT as u32 | libc::EPOLLERR as u32 | libc::EPOLLHUP as u32)
                    != 0,
            });
        }
        Ok(())
    }

    fn counters(&self) -> PollerCounters {
        self.counters
    }
}
