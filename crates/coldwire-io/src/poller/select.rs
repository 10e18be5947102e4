//! `SelectPoller`: `select(2)` with descriptor bitmaps sized to the highest registered
//! descriptor, so it is not limited to libc's fixed 1,024-bit `fd_set`.
//!
//! The kernel accepts any `nfds` up to the process's descriptor table and reads and writes
//! exactly `ceil(nfds / 64)` 64-bit words of each set (`FDS_BYTES` in fs/select.c). We keep
//! the interest bitmaps as `Vec<u64>` grown on registration, copy them into scratch sets of
//! the same length before each call (select overwrites its arguments), and pass
//! `nfds = highest fd + 1`, so the kernel never touches memory past the allocation.
//! The interest bitmaps are updated in O(1) per change; the per-wait copy and the scan of
//! the results are O(highest fd / 64) words — the mechanism's own cost, which the
//! experiments measure (the kernel's per-descriptor scan dominates it).

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::poller::{Event, Interest, Poller, PollerCounters, wait_result};

/// The select backend (level-triggered, unbounded descriptor numbers).
pub struct SelectPoller {
    read_interest: Vec<u64>,
    write_interest: Vec<u64>,
    read_ready: Vec<u64>,
    write_ready: Vec<u64>,
    /// Token per descriptor (meaningful only where `registered` has the bit).
    tokens: Vec<usize>,
    /// Which descriptors are registered. Kept apart from the tokens so that every token
    /// value, `usize::MAX` included, is the caller's to use.
    registered: Vec<u64>,
    /// Highest registered descriptor + 1 (0 when none).
    descriptor_limit: usize,
    counters: PollerCounters,
}

fn set_bit(words: &mut [u64], fd: usize, on: bool) {
    let mask = 1u64 << (fd % 64);
    if on {
        words[fd / 64] |= mask;
    } else {
        words[fd / 64] &= !mask;
    }
}

impl SelectPoller {
    fn slot(fd: RawFd) -> io::Result<usize> {
        usize::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))
    }

    fn registered(&self, fd: usize) -> bool {
        self.registered
            .get(fd / 64)
            .is_some_and(|word| word & (1u64 << (fd % 64)) != 0)
    }

    fn apply(&mut self, fd: usize, interest: Interest) {
        set_bit(&mut self.read_interest, fd, interest.readable);
        set_bit(&mut self.write_interest, fd, interest.writable);
    }
}

impl Poller for SelectPoller {
    const NAME: &'static str = "select";
    const EDGE_TRIGGERED: bool = false;

    fn new() -> io::Result<Self> {
        Ok(SelectPoller {
            read_interest: Vec::new(),
            write_interest: Vec::new(),
            read_ready: Vec::new(),
            write_ready: Vec::new(),
            tokens: Vec::new(),
            registered: Vec::new(),
            descriptor_limit: 0,
            counters: PollerCounters::default(),
        })
    }

    fn register(&mut self, fd: RawFd, token: usize, interest: Interest) -> io::Result<()> {
        let slot = Self::slot(fd)?;
        if self.registered(slot) {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        if slot >= self.tokens.len() {
            self.tokens.resize(slot + 1, 0);
            let words = (slot / 64) + 1;
            if words > self.read_interest.len() {
                self.read_interest.resize(words, 0);
                self.write_interest.resize(words, 0);
                self.registered.resize(words, 0);
            }
        }
        set_bit(&mut self.registered, slot, true);
        self.tokens[slot] = token;
        self.apply(slot, interest);
        self.descriptor_limit = self.descriptor_limit.max(slot + 1);
        Ok(())
    }

    fn modify(&mut self, fd: RawFd, token: usize, interest: Interest) -> io::Result<()> {
        let slot = Self::slot(fd)?;
        if !self.registered(slot) {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        self.tokens[slot] = token;
        self.apply(slot, interest);
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        let slot = Self::slot(fd)?;
        if !self.registered(slot) {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        set_bit(&mut self.registered, slot, false);
        self.apply(slot, Interest::NONE);
        // Lower the limit past trailing unregistered descriptors: amortised O(1), since
        // each descriptor is stepped over at most once per registration.
        while self.descriptor_limit > 0 && !self.registered(self.descriptor_limit - 1) {
            self.descriptor_limit -= 1;
        }
        Ok(())
    }

    fn wait(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        let words = self.descriptor_limit.div_ceil(64);
        self.read_ready.clear();
        self.read_ready
            .extend_from_slice(&self.read_interest[..words]);
        self.write_ready.clear();
        self.write_ready
            .extend_from_slice(&self.write_interest[..words]);
        let mut time = timeout.map(|duration| libc::timeval {
            tv_sec: duration.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_usec: libc::suseconds_t::from(duration.subsec_micros()),
        });
        let time_pointer = time
            .as_mut()
            .map_or(std::ptr::null_mut(), |time| time as *mut _);
        let (read_pointer, write_pointer) = if words == 0 {
            (std::ptr::null_mut(), std::ptr::null_mut())
        } else {
            (
                self.read_ready.as_mut_ptr().cast::<libc::fd_set>(),
                self.write_ready.as_mut_ptr().cast::<libc::fd_set>(),
            )
        };
        self.counters.wait_calls += 1;
        self.counters.descriptors_scanned += self.descriptor_limit as u64;
        // SAFETY: each set pointer is either null or points to `words` initialised u64s
        // (= ceil(nfds/64) longs on this 64-bit target), exactly the bytes the kernel reads
        // and writes for `nfds = descriptor_limit`; `fd_set` is only used as a pointer type
        // and never dereferenced in Rust. `time_pointer` is null or a valid timeval.
        let count = unsafe {
            libc::select(
                self.descriptor_limit as i32,
                read_pointer,
                write_pointer,
                std::ptr::null_mut(),
                time_pointer,
            )
        };
        let count = wait_result(count)?;
        if count == 0 {
            return Ok(());
        }
        for word in 0..words {
            let mut ready = self.read_ready[word] | self.write_ready[word];
            while ready != 0 {
                let bit = ready.trailing_zeros() as usize;
                ready &= ready - 1;
                let fd = word * 64 + bit;
                let mask = 1u64 << bit;
                events.push(Event {
                    token: self.tokens[fd],
                    readable: self.read_ready[word] & mask != 0,
                    writable: self.write_ready[word] & mask != 0,
                    hangup: false,
                });
            }
        }
        Ok(())
    }

    fn counters(&self) -> PollerCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: the waker's token is `usize::MAX`; it once meant "unregistered" here, so
    /// deregistering a higher descriptor dropped the waker from the set and SIGTERM was lost.
    #[test]
    fn every_token_value_is_usable_and_deregistration_keeps_lower_descriptors() {
        let (low_reader, mut low_writer) = std::io::pipe().unwrap();
        let (high_reader, _high_writer) = std::io::pipe().unwrap();
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let mut poller = SelectPoller::new().unwrap();
        poller
            .register(low_reader.as_raw_fd(), usize::MAX, Interest::READABLE)
            .unwrap();
        poller
            .register(high_reader.as_raw_fd(), 7, Interest::READABLE)
            .unwrap();
        poller.deregister(high_reader.as_raw_fd()).unwrap();
        low_writer.write_all(b"x").unwrap();
        let mut events = Vec::new();
        poller
            .wait(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].token, usize::MAX);
    }
}
