//! `PipePool`: the pipes `splice(2)` moves data through, created on demand, sized with
//! `F_SETPIPE_SZ`, kept for reuse only when empty, and bounded per driver (each pipe costs
//! two descriptors and, past the per-user `pipe-user-pages-soft` budget, new pipes shrink
//! to one page — so a few pooled pipes per loop, never one per connection).
//!
//! Also the thin wrappers over `pipe2`, `splice`, `tee` and `read` that the splice engine
//! uses, each returning `io::Result` with `EAGAIN` as `WouldBlock`.

use std::io;
use std::os::fd::RawFd;

/// One pipe: read end, write end, capacity in bytes.
#[derive(Debug)]
pub struct Pipe {
    /// Read end (non-blocking).
    pub read: RawFd,
    /// Write end (non-blocking).
    pub write: RawFd,
    /// Bytes it holds at most (what `F_SETPIPE_SZ` granted).
    pub capacity: usize,
}

impl Pipe {
    /// A new non-blocking pipe of about `size` bytes (the kernel rounds up to a power of
    /// two pages; a size it refuses leaves the default 64 KiB).
    pub fn new(size: usize) -> io::Result<Pipe> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` is a valid two-element array for pipe2 to fill.
        let result = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if result < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fcntl on the pipe we just created; F_SETPIPE_SZ takes an int.
        let granted = unsafe { libc::fcntl(fds[1], libc::F_SETPIPE_SZ, size as libc::c_int) };
        let capacity = if granted > 0 {
            granted as usize
        } else {
            // SAFETY: as above; F_GETPIPE_SZ takes no argument.
            let current = unsafe { libc::fcntl(fds[1], libc::F_GETPIPE_SZ) };
            current.max(4096) as usize
        };
        Ok(Pipe {
            read: fds[0],
            write: fds[1],
            capacity,
        })
    }

    fn close(self) {
        crate::sys::close(self.read);
        crate::sys::close(self.write);
    }
}

/// Pooled pipes of one size.
#[derive(Debug)]
pub struct PipePool {
    free: Vec<Pipe>,
    size: usize,
    max_free: usize,
    /// Pipes created since the start.
    pub created: u64,
}

impl PipePool {
    /// A pool of pipes of `size` bytes, keeping at most `max_free` for reuse.
    pub fn new(size: usize, max_free: usize) -> PipePool {
        PipePool {
            free: Vec::new(),
            size,
            max_free,
            created: 0,
        }
    }

    /// A pipe, reused or new.
    pub fn take(&mut self) -> io::Result<Pipe> {
        if let Some(pipe) = self.free.pop() {
            return Ok(pipe);
        }
        self.created += 1;
        Pipe::new(self.size)
    }

    /// Returns a pipe: kept if it is empty and the pool has room, closed otherwise (a pipe
    /// still holding bytes would hand them to the next transfer).
    pub fn give_back(&mut self, pipe: Pipe, empty: bool) {
        if empty && self.free.len() < self.max_free {
            self.free.push(pipe);
        } else {
            pipe.close();
        }
    }
}

impl Drop for PipePool {
    fn drop(&mut self) {
        for pipe in self.free.drain(..) {
            pipe.close();
        }
    }
}

fn result(value: isize) -> io::Result<usize> {
    if value < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(value as usize)
    }
}

/// `splice(from → to)` of up to `length` bytes, non-blocking on the pipe side (sockets are
/// non-blocking themselves); `more` sets `SPLICE_F_MORE` (more data follows).
pub fn splice(from: RawFd, to: RawFd, length: usize, more: bool) -> io::Result<usize> {
    let mut flags = libc::SPLICE_F_NONBLOCK | libc::SPLICE_F_MOVE;
    if more {
        flags |= libc::SPLICE_F_MORE;
    }
    loop {
        // SAFETY: plain descriptors and null offsets (both ends are pipes or sockets).
        let moved = unsafe {
            libc::splice(
                from,
                std::ptr::null_mut(),
                to,
                std::ptr::null_mut(),
                length,
                flags,
            )
        };
        match result(moved) {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// `tee(from → to)`: duplicates up to `length` bytes of pipe `from` into pipe `to` without
/// consuming them.
pub fn tee(from: RawFd, to: RawFd, length: usize) -> io::Result<usize> {
    loop {
        // SAFETY: plain pipe descriptors.
        let copied = unsafe { libc::tee(from, to, length, libc::SPLICE_F_NONBLOCK) };
        match result(copied) {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// `read(2)` from a pipe into uninitialised memory; the first `n` bytes returned are
/// initialised.
pub fn read_into(fd: RawFd, buffer: &mut [std::mem::MaybeUninit<u8>]) -> io::Result<usize> {
    loop {
        // SAFETY: `buffer` is valid for writes of its length; the kernel writes at most that
        // many bytes and reports how many.
        let count = unsafe { libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len()) };
        match result(count) {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// `read(2)` from a pipe into `buffer`.
pub fn read(fd: RawFd, buffer: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buffer` is valid for writes of its length.
        let count = unsafe { libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len()) };
        match result(count) {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipes_are_sized_and_pooled_only_when_empty() {
        let mut pool = PipePool::new(256 * 1024, 2);
        let pipe = pool.take().unwrap();
        assert!(pipe.capacity >= 64 * 1024);
        pool.give_back(pipe, true);
        assert_eq!(pool.free.len(), 1);
        let pipe = pool.take().unwrap();
        pool.give_back(pipe, false);
        assert_eq!(pool.free.len(), 0);
        assert_eq!(pool.created, 1);
    }

    #[test]
    fn tee_duplicates_without_consuming() {
        let first = Pipe::new(65536).unwrap();
        let second = Pipe::new(65536).unwrap();
        // SAFETY: writing a valid buffer to our pipe.
        let written = unsafe { libc::write(first.write, b"hello".as_ptr().cast(), 5) };
        assert_eq!(written, 5);
        assert_eq!(tee(first.read, second.write, 5).unwrap(), 5);
        let mut copy = [0u8; 5];
        assert_eq!(read(second.read, &mut copy).unwrap(), 5);
        let mut original = [0u8; 5];
        assert_eq!(read(first.read, &mut original).unwrap(), 5);
        assert_eq!((&copy, &original), (b"hello", b"hello"));
        first.close();
        second.close();
    }
}
