//! The output-queue bookkeeping both completion drivers share (`ReadinessDriver` and
//! `UringDriver`): owned output vectors and drained output queues go back to bounded pools
//! instead of the allocator, and written bytes leave the front of a queue the same way in
//! both, so a keep-alive connection's steady state allocates nothing.
//!
//! Invariants: a pooled vector is empty and at most [`MAX_POOLED_VEC`] bytes of capacity; a
//! pooled queue is empty and has an allocation; each pool holds at most [`MAX_POOLED`].
//! What the pools would not keep is freed.

use std::collections::VecDeque;

use crate::driver::Chunk;

/// Slices gathered into one `sendmsg` / `SENDMSG` by both drivers (100 pipelined
/// responses fit in two calls).
pub(crate) const GATHER: usize = 64;
/// Pooled objects of each kind kept for reuse.
pub(crate) const MAX_POOLED: usize = 1024;
/// Pooled output vectors larger than this are freed instead of kept.
const MAX_POOLED_VEC: usize = 64 * 1024;
/// Capacity of a fresh output vector when the pool has none.
const FRESH_VEC_BYTES: usize = 512;

/// One driver's pools of output vectors (`Driver::take_vec`) and output queues.
#[derive(Default)]
pub(crate) struct OutputPools {
    vecs: Vec<Vec<u8>>,
    queues: Vec<VecDeque<Chunk>>,
}

impl OutputPools {
    /// An empty vector for the caller to fill and send: a pooled one when there is one.
    pub(crate) fn take_vec(&mut self) -> Vec<u8> {
        self.vecs
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(FRESH_VEC_BYTES))
    }

    /// Keeps an owned chunk's vector for reuse, within the pool's bounds; shared and file
    /// chunks are just dropped.
    pub(crate) fn recycle(&mut self, chunk: Chunk) {
        if let Chunk::Owned(mut bytes) = chunk
            && bytes.capacity() <= MAX_POOLED_VEC
            && self.vecs.len() < MAX_POOLED
        {
            bytes.clear();
            self.vecs.push(bytes);
        }
    }

    /// Appends `chunk` to `queue`, giving a queue without an allocation a pooled one first.
    pub(crate) fn enqueue(&mut self, queue: &mut VecDeque<Chunk>, chunk: Chunk) {
        if queue.capacity() == 0
            && let Some(pooled) = self.queues.pop()
        {
            *queue = pooled;
        }
        queue.push_back(chunk);
    }

    /// Takes an empty queue's allocation into the pool (leaving `queue` unallocated) when
    /// it has one and the pool has room; otherwise leaves `queue` as it is.
    pub(crate) fn keep_queue(&mut self, queue: &mut VecDeque<Chunk>) {
        debug_assert!(queue.is_empty());
        if queue.capacity() > 0 && self.queues.len() < MAX_POOLED {
            self.queues.push(std::mem::take(queue));
        }
    }

    /// Drops `written` bytes from the front of `queue`, whose front chunk has
    /// `front_progress` bytes written already: finished owned chunks are recycled, empty
    /// chunks skipped (so an empty queue really is empty), and a drained queue's allocation
    /// is pooled.
    pub(crate) fn consume(
        &mut self,
        queue: &mut VecDeque<Chunk>,
        front_progress: &mut u64,
        mut written: u64,
    ) {
        while written > 0 {
            let Some(front) = queue.front() else {
                break;
            };
            let left = front.len() - *front_progress;
            if written < left {
                *front_progress += written;
                return;
            }
            written -= left;
            *front_progress = 0;
            if let Some(chunk) = queue.pop_front() {
                self.recycle(chunk);
            }
        }
        while queue.front().is_some_and(Chunk::is_empty) {
            queue.pop_front();
        }
        if queue.is_empty() {
            self.keep_queue(queue);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(text: &str) -> Chunk {
        Chunk::Owned(text.as_bytes().to_vec())
    }

    #[test]
    fn consume_advances_within_the_front_chunk() {
        let mut pools = OutputPools::default();
        let mut queue = VecDeque::from([owned("hello"), owned("world")]);
        let mut progress = 0;
        pools.consume(&mut queue, &mut progress, 3);
        assert_eq!((queue.len(), progress), (2, 3));
        pools.consume(&mut queue, &mut progress, 4);
        assert_eq!((queue.len(), progress), (1, 2));
        assert_eq!(pools.vecs.len(), 1, "the finished chunk's vector is pooled");
    }

    #[test]
    fn a_drained_queue_goes_to_the_pool_and_comes_back() {
        let mut pools = OutputPools::default();
        let mut queue = VecDeque::from([owned("abc"), Chunk::Owned(Vec::new())]);
        let mut progress = 0;
        pools.consume(&mut queue, &mut progress, 3);
        assert!(queue.is_empty());
        assert_eq!(queue.capacity(), 0, "the allocation moved to the pool");
        pools.enqueue(&mut queue, owned("next"));
        assert!(queue.capacity() > 1, "the pooled allocation is reused");
        assert!(pools.queues.is_empty());
    }

    #[test]
    fn large_vectors_are_not_kept() {
        let mut pools = OutputPools::default();
        pools.recycle(Chunk::Owned(Vec::with_capacity(MAX_POOLED_VEC + 1)));
        pools.recycle(Chunk::Owned(Vec::with_capacity(16)));
        assert_eq!(pools.vecs.len(), 1);
        assert!(pools.take_vec().is_empty());
    }
}
