//! File work: a positioned write or a data sync that another component (the proxy's disk
//! store) hands to an event loop, to run as an operation on the loop's ring rather than as
//! a blocking system call on a thread ([`Driver::submit_file`](crate::Driver::submit_file)).
//! Only a completion driver with a ring takes it (`--io uring`: `IORING_OP_WRITE`,
//! `IORING_OP_FSYNC` with `IORING_FSYNC_DATASYNC`); a readiness driver hands it back, and
//! the component keeps doing it on its own threads.
//!
//! The work says what to do ([`FileWork::request`]) and is told the result
//! ([`FileWork::complete`]), which may return follow-up work (the rest of a short write, a
//! sync due after the last write of a file) that the driver submits in turn. The driver
//! calls `complete` on its own thread, inside [`Driver::wait`](crate::Driver::wait),
//! exactly once per submission.

use std::io;
use std::os::fd::RawFd;

/// One file operation to perform.
#[derive(Clone, Copy, Debug)]
pub enum FileRequest {
    /// `pwrite(fd, bytes, length, offset)`.
    Write {
        /// The open file.
        fd: RawFd,
        /// Where in the file.
        offset: u64,
        /// The first byte to write.
        bytes: *const u8,
        /// How many bytes.
        length: u32,
    },
    /// `fdatasync(fd)`.
    DataSync {
        /// The open file.
        fd: RawFd,
    },
}

/// A file operation handed to a driver (see the module doc).
///
/// # Safety
///
/// From [`FileWork::request`] until [`FileWork::complete`] is called, the descriptor must
/// stay open and a write's `bytes..bytes + length` must stay valid and unchanged: the
/// kernel reads them while the operation is in flight. Moving the box does not count
/// (the bytes must live in memory of their own, such as a `Vec`'s heap buffer).
pub unsafe trait FileWork: Send {
    /// What to perform now (asked once per submission).
    fn request(&self) -> FileRequest;

    /// The result of the last request (bytes written; 0 for a sync), and any follow-up
    /// work to submit next.
    fn complete(self: Box<Self>, result: io::Result<usize>) -> Option<Box<dyn FileWork>>;
}
