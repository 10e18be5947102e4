//! `Waker`: lets another thread (the signal thread, a test) interrupt a loop's wait. An
//! eventfd registered with the loop's poller; waking writes to it, the loop drains it and
//! reports [`crate::Completion::Woken`].

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use crate::sys;

/// A cloneable, thread-safe handle that wakes one event loop.
#[derive(Clone, Debug)]
pub struct Waker {
    eventfd: Arc<OwnedFd>,
}

impl Waker {
    /// Creates the eventfd. The driver registers [`Waker::raw_fd`] with its poller.
    pub fn new() -> io::Result<Waker> {
        let fd = sys::eventfd()?;
        // SAFETY: a freshly created descriptor nobody else owns.
        let eventfd = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(Waker { eventfd })
    }

    /// Wakes the loop (from any thread; cheap, idempotent until the loop drains it).
    pub fn wake(&self) -> io::Result<()> {
        sys::eventfd_signal(self.eventfd.as_raw_fd())
    }

    /// The descriptor to register for readability.
    pub fn raw_fd(&self) -> RawFd {
        self.eventfd.as_raw_fd()
    }

    /// Consumes pending wake-ups.
    pub fn drain(&self) {
        sys::eventfd_drain(self.eventfd.as_raw_fd());
    }
}
