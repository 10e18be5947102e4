//! The workers' rings as the disk store sees them (`--io uring`): a worker whose event loop
//! has a ring attaches a *lane* (a way to wake its loop); while any lane is attached, the
//! I/O thread queues its file operations instead of performing them
//! ([`Storage::take_file_ops`](crate::storage::Storage::take_file_ops) hands them out),
//! and wakes the lanes in turn so that an idle loop takes them. A worker that stops
//! detaches; with no lane left, the thread performs what is still queued itself.
//!
//! Invariant: an operation is taken by exactly one worker, whose driver owns it until its
//! completion (the driver waits for file operations before it tears down).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::op::FileOp;
use super::{Shared, lock};

/// Wakes one worker's loop.
pub(super) type Lane = Arc<dyn Fn() + Send + Sync>;

impl Shared {
    /// Whether workers' rings take the file operations.
    pub(super) fn on_rings(&self) -> bool {
        self.ring_lanes.load(Ordering::Acquire) > 0
    }

    /// Attaches a worker's ring; its lane number.
    pub(super) fn attach_lane(&self, wake: Lane) -> usize {
        let mut lanes = lock(&self.lanes);
        let lane = match lanes.iter().position(Option::is_none) {
            Some(free) => {
                lanes[free] = Some(wake);
                free
            }
            None => {
                lanes.push(Some(wake));
                lanes.len() - 1
            }
        };
        self.ring_lanes.fetch_add(1, Ordering::AcqRel);
        lane
    }

    /// Detaches a worker's ring (it stops); with none left, the thread takes over.
    pub(super) fn detach_lane(&self, lane: usize) {
        let detached = lock(&self.lanes)
            .get_mut(lane)
            .and_then(Option::take)
            .is_some();
        if detached {
            self.ring_lanes.fetch_sub(1, Ordering::AcqRel);
            let _queue = lock(&self.queue);
            self.wake.notify_one();
        }
    }

    /// Wakes the first attached lane from `from` on; the lane to start from next time.
    pub(super) fn wake_lane(&self, from: usize) -> usize {
        let lanes = lock(&self.lanes);
        let count = lanes.len();
        for step in 0..count {
            let lane = (from + step) % count;
            if let Some(wake) = &lanes[lane] {
                wake();
                return lane + 1;
            }
        }
        from
    }

    /// Moves the operations waiting for a ring into `into` (each counted as submitted).
    pub(super) fn take_ring_ops(&self, into: &mut Vec<FileOp>) {
        if self.ring_queued.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut queue = lock(&self.ring_queue);
        self.ring_queued.store(0, Ordering::Release);
        for mut op in queue.drain(..) {
            op.take_for_ring();
            into.push(op);
        }
    }
}
