//! `PollPoller`: `poll(2)` over a dense `pollfd` array maintained incrementally.
//!
//! Registration appends to the array, deregistration swap-removes (O(1) through an
//! fd → index map), and a descriptor with no interest is parked by storing its complement
//! (`!fd`, negative), which poll skips — so a hung-up connection nobody waits on cannot
//! make the loop spin. The kernel still walks the whole array on every wait: that O(open
//! connections) cost is the mechanism's, and the one the experiments measure.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::poller::{Event, Interest, Poller, PollerCounters, timeout_millis, wait_result};

const ABSENT: u32 = u32::MAX;

/// The poll backend (level-triggered).
pub struct PollPoller {
    descriptors: Vec<libc::pollfd>,
    tokens: Vec<usize>,
    /// Index into `descriptors` for each registered fd, `ABSENT` otherwise.
    index_of_fd: Vec<u32>,
    counters: PollerCounters,
}

fn poll_events(interest: Interest) -> i16 {
    let mut events = 0;
    if interest.readable {
        events |= libc::POLLIN | libc::POLLRDHUP;
    }
    if interest.writable {
        events |= libc::POLLOUT;
    }
    events
}

impl PollPoller {
    fn index(&self, fd: RawFd) -> io::Result<usize> {
        let slot = usize::try_from(fd)
            .ok()
            .and_then(|fd| self.index_of_fd.get(fd))
            .copied();
        match slot {
            Some(index) if index != ABSENT => Ok(index as usize),
            _ => Err(io::Error::from_raw_os_error(libc::ENOENT)),
        }
    }

    fn set(&mut self, index: usize, fd: RawFd, interest: Interest) {
        let entry = &mut self.descriptors[index];
        let events = poll_events(interest);
        entry.fd = if events == 0 { !fd } else { fd };
        entry.events = events;
    }
}

impl Poller for PollPoller {
    const NAME: &'static str = "poll";
    const EDGE_TRIGGERED: bool = false;

    fn new() -> io::Result<Self> {
        Ok(PollPoller {
            descriptors: Vec::new(),
            tokens: Vec::new(),
            index_of_fd: Vec::new(),
            counters: PollerCounters::default(),
        })
    }

    fn register(&mut self, fd: RawFd, token: usize, interest: Interest) -> io::Result<()> {
        let slot = usize::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
        if slot >= self.index_of_fd.len() {
            self.index_of_fd.resize(slot + 1, ABSENT);
        }
        if self.index_of_fd[slot] != ABSENT {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        self.index_of_fd[slot] = self.descriptors.len() as u32;
        self.descriptors.push(libc::pollfd {
            fd,
            events: 0,
            revents: 0,
        });
        self.tokens.push(token);
        self.set(self.descriptors.len() - 1, fd, interest);
        Ok(())
    }

    fn modify(&mut self, fd: RawFd, token: usize, interest: Interest) -> io::Result<()> {
        let index = self.index(fd)?;
        self.tokens[index] = token;
        self.set(index, fd, interest);
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        let index = self.index(fd)?;
        self.descriptors.swap_remove(index);
        self.tokens.swap_remove(index);
        self.index_of_fd[fd as usize] = ABSENT;
        if let Some(moved) = self.descriptors.get(index) {
            let moved_fd = if moved.fd < 0 { !moved.fd } else { moved.fd };
            self.index_of_fd[moved_fd as usize] = index as u32;
        }
        Ok(())
    }

    fn wait(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        self.counters.wait_calls += 1;
        self.counters.descriptors_scanned += self.descriptors.len() as u64;
        // SAFETY: the pointer and length describe our own initialised pollfd array, which
        // the kernel only reads and writes (revents) within those bounds.
        let count = unsafe {
            libc::poll(
                self.descriptors.as_mut_ptr(),
                self.descriptors.len() as libc::nfds_t,
                timeout_millis(timeout),
            )
        };
        let count = wait_result(count)?;
        let mut remaining = count;
        let hangup = libc::POLLHUP | libc::POLLERR | libc::POLLRDHUP | libc::POLLNVAL;
        for (entry, &token) in self.descriptors.iter().zip(&self.tokens) {
            if remaining == 0 {
                break;
            }
            let revents = entry.revents;
            if revents == 0 {
                continue;
            }
            remaining -= 1;
            events.push(Event {
                token,
                readable: revents & (libc::POLLIN | hangup) != 0,
                hangup: revents & hangup != 0,
                writable: revents & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) != 0,
            });
        }
        Ok(())
    }

    fn counters(&self) -> PollerCounters {
        self.counters
    }
}
