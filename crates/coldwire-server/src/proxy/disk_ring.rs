//! The disk store's file operations on this worker's ring (`--io uring`): a worker whose
//! driver has a ring attaches it to the store at start ([`DiskRing::attach`]), takes the
//! store's queued segment writes and syncs once per loop turn and submits each on its
//! ring ([`Driver::submit_file`]); the driver hands each completion back to the store
//! ([`FileOp::complete`]), which publishes the records written. On the readiness backends
//! nothing attaches and the store's I/O thread does the writes. The glue between the two
//! crates lives here because `coldwire-cache` does not depend on `coldwire-io`.

use std::io;
use std::sync::Arc;

use coldwire_cache::{FileOp, FileOpRequest, Store};
use coldwire_io::{Driver, FileRequest, FileWork};

/// A store operation as the driver's [`FileWork`].
struct RingOp(FileOp);

// SAFETY: a `FileOp` owns its segment file (`Arc<File>`) and the bytes it writes (a heap
// buffer it does not touch while in flight) until `complete` consumes it, so the
// descriptor stays open and the bytes valid and unchanged between `request` and
// `complete`; moving the box moves neither.
unsafe impl FileWork for RingOp {
    fn request(&self) -> FileRequest {
        match self.0.request() {
            FileOpRequest::Write { fd, offset, bytes } => FileRequest::Write {
                fd,
                offset,
                bytes: bytes.as_ptr(),
                // A buffer holds one aggregation or one record: far below 4 GiB; a longer
                // one is written in pieces (a short write continues).
                length: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
            },
            FileOpRequest::DataSync { fd } => FileRequest::DataSync { fd },
        }
    }

    fn complete(self: Box<Self>, result: io::Result<usize>) -> Option<Box<dyn FileWork>> {
        self.0
            .complete(result)
            .map(|next| Box::new(RingOp(next)) as Box<dyn FileWork>)
    }
}

/// This worker's lane to the store's file operations.
pub(super) struct DiskRing {
    store: Arc<Store>,
    lane: usize,
    ops: Vec<FileOp>,
}

impl DiskRing {
    /// Attaches the driver's ring to the store, when the driver has one and the store
    /// has file operations.
    pub(super) fn attach<D: Driver>(driver: &D, store: &Arc<Store>) -> Option<DiskRing> {
        if !driver.has_file_ring() {
            return None;
        }
        let waker = driver.waker();
        let lane = store.attach_disk_ring(move || {
            let _ = waker.wake();
        })?;
        Some(DiskRing {
            store: store.clone(),
            lane,
            ops: Vec::new(),
        })
    }

    /// Submits the store's waiting operations on the driver's ring.
    pub(super) fn submit<D: Driver>(&mut self, driver: &mut D) {
        self.store.take_disk_ops(&mut self.ops);
        for op in self.ops.drain(..) {
            if let Err(work) = driver.submit_file(Box::new(RingOp(op))) {
                // Not on a ring after all: reported as failed, never lost silently.
                let error = io::Error::new(io::ErrorKind::Unsupported, "no ring for file work");
                let mut next = work.complete(Err(error));
                while let Some(work) = next {
                    next = work.complete(Err(io::ErrorKind::Unsupported.into()));
                }
            }
        }
    }
}

impl Drop for DiskRing {
    fn drop(&mut self) {
        self.store.detach_disk_ring(self.lane);
    }
}
