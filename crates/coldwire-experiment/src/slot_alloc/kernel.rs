//! The kernel's own lowest-free descriptor allocation, timed from user space: with K
//! descriptors open, close a random one and `dup()` (which must return the lowest free
//! descriptor, hence usually the one just closed), repeatedly. Also raises the soft
//! `RLIMIT_NOFILE` so K can reach the hard limit.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};

use anyhow::{Context, bail};

use super::allocators::XorShift;

/// Descriptors kept free for the rest of the process (stdio, test harness, the base file).
pub const HEADROOM: u64 = 64;

/// Raises the soft open-files limit to the hard one and returns the new soft limit; fails,
/// saying what to change, when even the hard limit is below `needed`.
pub fn raise_open_files_limit(needed: u64) -> anyhow::Result<u64> {
    let hard =
        coldwire_io::sys::hard_open_files_limit().context("getrlimit(RLIMIT_NOFILE) failed")?;
    if hard < needed {
        bail!(
            "slot-alloc needs {needed} open descriptors but the hard open-files limit is {hard} — \
             lower the largest value of `open` in experiments/slot-alloc.toml or raise the \
             hard limit (ulimit -Hn, as root)"
        );
    }
    coldwire_io::sys::raise_open_files_limit()
        .context("cannot raise the soft open-files limit to the hard limit")
}

/// Nanoseconds of CPU time (user + system) the calling thread has used: time spent
/// descheduled on a shared machine does not count.
pub fn thread_cpu_nanoseconds() -> u128 {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `time` is a live timespec the kernel fills; the clock id is a constant.
    let result = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
    // The thread CPU clock exists on every Linux this runs on; a failure leaves 0, which
    // makes the measurement 0 ns and fails the record's positivity checks visibly.
    if result != 0 {
        return 0;
    }
    time.tv_sec as u128 * 1_000_000_000 + time.tv_nsec as u128
}

fn dup(fd: RawFd) -> anyhow::Result<RawFd> {
    // SAFETY: dup takes no pointers; the result is checked.
    let new = unsafe { libc::dup(fd) };
    if new < 0 {
        return Err(std::io::Error::last_os_error())
            .context("dup() failed (is the open-files limit high enough?)");
    }
    Ok(new)
}

fn close(fd: RawFd) {
    // SAFETY: `fd` came from dup() here and is closed exactly once (its entry is replaced
    // or the list dropped right after). The result is irrelevant: the descriptor is gone
    // either way.
    unsafe { libc::close(fd) };
}

/// Descriptors duplicated from one base file, closed on drop.
struct Duplicates {
    fds: Vec<RawFd>,
}

impl Drop for Duplicates {
    fn drop(&mut self) {
        for &fd in &self.fds {
            close(fd);
        }
    }
}

/// Mean CPU nanoseconds of one `close()` + `dup()` pair with descriptors 0..`open` in use,
/// over `operations` pairs, closing a random descriptor of ours each time. Also returns
/// how many `dup()`s did not return the descriptor just closed (another thread took it).
pub fn time_close_dup(open: usize, operations: u64, seed: u64) -> anyhow::Result<(f64, u64)> {
    let base = File::open("/dev/null").context("cannot open /dev/null")?;
    let mut owned = Duplicates { fds: Vec::new() };
    // Fill the table: dup returns the lowest free, so once it returns open - 1, every
    // descriptor below `open` is in use (by us or by the rest of the process).
    for _ in 0..open {
        let fd = dup(base.as_raw_fd())?;
        owned.fds.push(fd);
        if fd as usize + 1 >= open {
            break;
        }
    }
    if owned.fds.is_empty() {
        bail!("slot-alloc: no descriptor could be duplicated");
    }
    let mut random = XorShift::new(seed);
    let mut elsewhere = 0u64;
    let started = thread_cpu_nanoseconds();
    for _ in 0..operations {
        let index = random.below(owned.fds.len());
        let victim = owned.fds[index];
        close(victim);
        let new = match dup(base.as_raw_fd()) {
            Ok(new) => new,
            Err(error) => {
                owned.fds.swap_remove(index);
                return Err(error);
            }
        };
        elsewhere += u64::from(new != victim);
        owned.fds[index] = new;
    }
    let nanoseconds =
        thread_cpu_nanoseconds().saturating_sub(started) as f64 / operations.max(1) as f64;
    Ok((nanoseconds, elsewhere))
}
