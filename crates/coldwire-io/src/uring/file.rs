//! File work on the ring ([`FileWork`]): a positioned `WRITE` or an `FSYNC` with
//! `IORING_FSYNC_DATASYNC`, submitted for another component (the proxy's disk store) so that
//! its writes are ring operations rather than blocking system calls on a thread.
//!
//! The work is kept in a slot of [`FileWorks`] while in flight (its slot in `user_data`,
//! kind [`Kind::File`]); on the completion it is taken out and told the result, and any
//! follow-up work it returns (the rest of a short write, a sync) is submitted at once.
//! Invariant: a slot is emptied only by its completion, so the memory a write points to
//! (owned by the work) outlives the operation; the driver's teardown waits for them.

use std::io;

use io_uring::{opcode, types};

use super::connection::{Kind, user_data};
use super::driver::UringDriver;
use crate::driver::{FileRequest, FileWork};

/// File work in flight, by slot.
#[derive(Default)]
pub(super) struct FileWorks {
    slots: Vec<Option<Box<dyn FileWork>>>,
    free: Vec<usize>,
    in_flight: usize,
}

impl FileWorks {
    /// Whether any file operation is in flight.
    pub(super) fn busy(&self) -> bool {
        self.in_flight > 0
    }

    fn insert(&mut self, work: Box<dyn FileWork>) -> usize {
        self.in_flight += 1;
        match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(work);
                slot
            }
            None => {
                self.slots.push(Some(work));
                self.slots.len() - 1
            }
        }
    }

    fn take(&mut self, slot: usize) -> Option<Box<dyn FileWork>> {
        let work = self.slots.get_mut(slot)?.take()?;
        self.free.push(slot);
        self.in_flight -= 1;
        Some(work)
    }
}

impl UringDriver {
    /// Submits file work (see the module doc).
    pub(super) fn submit_file_work(&mut self, work: Box<dyn FileWork>) {
        let request = work.request();
        let slot = self.files.insert(work);
        let data = user_data(Kind::File, slot, 0);
        let entry = match request {
            FileRequest::Write {
                fd,
                offset,
                bytes,
                length,
            } => opcode::Write::new(types::Fd(fd), bytes, length)
                .offset(offset)
                .build(),
            FileRequest::DataSync { fd } => opcode::Fsync::new(types::Fd(fd))
                .flags(types::FsyncFlags::DATASYNC)
                .build(),
        };
        // SAFETY: the work sits in `self.files` until this operation's completion
        // (`on_file`), and `FileWork`'s contract keeps its descriptor open and its bytes
        // valid and unchanged until `complete` is called then.
        unsafe { self.push(&entry.user_data(data)) };
    }

    /// A file operation completed: tells its work, submits what follows.
    pub(super) fn on_file(&mut self, slot: usize, result: i32) {
        let Some(work) = self.files.take(slot) else {
            return;
        };
        let result = if result < 0 {
            Err(io::Error::from_raw_os_error(-result))
        } else {
            Ok(result as usize)
        };
        if let Some(next) = work.complete(result) {
            self.submit_file_work(next);
        }
    }
}
