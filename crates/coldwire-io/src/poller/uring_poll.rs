//! `UringPoller`: io_uring as a readiness notifier only — one multishot `POLL_ADD` per
//! registered descriptor, posting a completion each time the descriptor becomes ready, so
//! the server logic above ([`crate::ReadinessDriver`]) is exactly the one epoll runs. What
//! differs is the mechanism: interest changes are queued submissions, not `epoll_ctl`
//! calls, and each loop turn makes one `io_uring_enter` that both submits them and waits.
//! It separates io_uring's batching from its completion model (the `uring` backend).
//!
//! Semantics match edge-triggered epoll: a multishot poll reports the state when armed and
//! then every wake-up of the descriptor that matches the mask, so interest is registered
//! once per connection, both directions, and never modified.
//!
//! Invariants:
//! - a registration's `user_data` is its descriptor and a serial number; a completion whose
//!   serial is not the descriptor's current one (a removed poll, a closed descriptor whose
//!   number was reused) is dropped, so it can never be reported under another token;
//! - the kernel holds a reference to a polled file until its poll is removed, so closing a
//!   descriptor is not enough: [`Poller::deregister`] submits a `POLL_REMOVE` at once (one
//!   `io_uring_enter` per close, where epoll needs no call at all);
//! - a multishot poll that ends by itself (no `IORING_CQE_F_MORE`) is re-armed; a removal
//!   that meets a poll while it fires (`EALREADY`) is retried.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use io_uring::{cqueue, opcode, types};

use crate::poller::{Event, Interest, Poller, PollerCounters};
use crate::uring::ring::{Ring, RingOptions};

/// Marks the `user_data` of a `POLL_REMOVE` (the rest names the poll it removes).
/// Descriptors are below 2^31, so a poll's own `user_data` never has this bit.
const REMOVE: u64 = 1 << 63;

#[derive(Clone, Copy)]
struct Registration {
    token: usize,
    serial: u32,
    interest: Interest,
}

/// The io_uring readiness backend (multishot poll).
pub struct UringPoller {
    ring: Ring,
    /// Registrations by descriptor number.
    registrations: Vec<Option<Registration>>,
    next_serial: u32,
    completions: Vec<cqueue::Entry>,
}

fn poll_mask(interest: Interest) -> u32 {
    let mut mask = 0;
    if interest.readable {
        mask |= (libc::POLLIN | libc::POLLRDHUP) as u32;
    }
    if interest.writable {
        mask |= libc::POLLOUT as u32;
    }
    mask
}

fn user_data(fd: RawFd, serial: u32) -> u64 {
    (u64::from(fd as u32) << 32) | u64::from(serial)
}

impl UringPoller {
    fn arm(&mut self, fd: RawFd, interest: Interest) -> io::Result<u32> {
        self.next_serial = self.next_serial.wrapping_add(1);
        let serial = self.next_serial;
        if interest != Interest::NONE {
            let entry = opcode::PollAdd::new(types::Fd(fd), poll_mask(interest))
                .multi(true)
                .build()
                .user_data(user_data(fd, serial));
            // SAFETY: a poll request points to no memory of ours.
            unsafe { self.ring.push(&entry)? };
        }
        Ok(serial)
    }

    fn disarm(&mut self, fd: RawFd, registration: Registration) -> io::Result<()> {
        if registration.interest == Interest::NONE {
            return Ok(());
        }
        self.remove(user_data(fd, registration.serial))
    }

    fn remove(&mut self, target: u64) -> io::Result<()> {
        let entry = opcode::PollRemove::new(target)
            .build()
            .user_data(REMOVE | target);
        // SAFETY: a poll removal points to no memory of ours.
        unsafe { self.ring.push(&entry) }
    }

    fn slot(&mut self, fd: RawFd) -> io::Result<&mut Option<Registration>> {
        let index = usize::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
        if index >= self.registrations.len() {
            self.registrations.resize(index + 1, None);
        }
        Ok(&mut self.registrations[index])
    }
}

impl Poller for UringPoller {
    const NAME: &'static str = "uring-poll";
    const EDGE_TRIGGERED: bool = true;

    fn new() -> io::Result<Self> {
        Ok(UringPoller {
            ring: Ring::new(RingOptions::default())?,
            registrations: Vec::new(),
            next_serial: 0,
            completions: Vec::with_capacity(1024),
        })
    }

    fn register(&mut self, fd: RawFd, token: usize, interest: Interest) -> io::Result<()> {
        if self.slot(fd)?.is_some() {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        let serial = self.arm(fd, interest)?;
        *self.slot(fd)? = Some(Registration {
            token,
            serial,
            interest,
        });
        Ok(())
    }

    fn modify(&mut self, fd: RawFd, token: usize, interest: Interest) -> io::Result<()> {
        let Some(registration) = *self.slot(fd)? else {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        };
        if registration.interest == interest {
            if let Some(current) = self.slot(fd)? {
                current.token = token;
            }
            return Ok(());
        }
        self.disarm(fd, registration)?;
        let serial = self.arm(fd, interest)?;
        *self.slot(fd)? = Some(Registration {
            token,
            serial,
            interest,
        });
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        let Some(registration) = self.slot(fd)?.take() else {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        };
        self.disarm(fd, registration)?;
        // The caller closes the descriptor next; the socket is released (FIN sent) only
        // once the poll's file reference is gone, so remove it now rather than at the next
        // loop turn. This enter is the price of a close here (epoll needs none).
        self.ring.submit_now()
    }

    fn wait(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        self.ring.submit_and_wait(timeout)?;
        let mut completions = std::mem::take(&mut self.completions);
        completions.clear();
        self.ring.drain_into(&mut completions);
        for completion in &completions {
            let data = completion.user_data();
            if data & REMOVE != 0 {
                // A poll that has just fired (its completion work still pending) cannot be
                // removed at that instant (`EALREADY`) and would stay armed, holding its
                // file open: try again.
                if completion.result() == -libc::EALREADY {
                    self.remove(data & !REMOVE)?;
                }
                continue;
            }
            let fd = (data >> 32) as RawFd;
            let serial = data as u32;
            let Some(Some(registration)) = self.registrations.get(fd as usize).copied() else {
                continue;
            };
            if registration.serial != serial {
                continue;
            }
            let result = completion.result();
            let mask = if result < 0 {
                // The poll itself failed: report both directions so the driver performs the
                // operations and meets the real error.
                (libc::POLLIN | libc::POLLOUT) as u32
            } else {
                result as u32
            };
            let hangup = (libc::POLLHUP | libc::POLLERR | libc::POLLRDHUP) as u32;
            events.push(Event {
                token: registration.token,
                readable: mask & (libc::POLLIN as u32 | hangup) != 0,
                hangup: mask & hangup != 0,
                writable: mask & (libc::POLLOUT as u32 | (libc::POLLERR | libc::POLLHUP) as u32)
                    != 0,
            });
            if !cqueue::more(completion.flags()) && result != -libc::ECANCELED {
                let serial = self.arm(fd, registration.interest)?;
                if let Some(Some(current)) = self.registrations.get_mut(fd as usize) {
                    current.serial = serial;
                }
            }
        }
        self.completions = completions;
        Ok(())
    }

    fn counters(&self) -> PollerCounters {
        let ring = self.ring.counters();
        PollerCounters {
            wait_calls: ring.wait_calls,
            control_calls: 0,
            descriptors_scanned: 0,
            uring_submissions: ring.submissions,
            uring_completions: ring.completions,
            uring_enter_calls: ring.enter_calls,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_keeps_descriptor_and_serial_apart() {
        let data = user_data(70_000, 0xdead_beef);
        assert_eq!((data >> 32) as RawFd, 70_000);
        assert_eq!(data as u32, 0xdead_beef);
        assert_eq!(user_data(i32::MAX, u32::MAX) & REMOVE, 0);
    }
}
