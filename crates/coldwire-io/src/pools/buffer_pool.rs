//! Pooled fixed-size receive buffers, so that an idle connection owns no
//! buffer.
//!
//! This module owns [`Buffer`], a fixed-capacity byte buffer with a consumed
//! prefix, and [`BufferPool`], a free list of equally sized buffers. A
//! connection takes a buffer when it becomes readable and gives it back once
//! everything received has been consumed, so memory scales with *active*
//! connections, not open ones (the point of Banga & Mogul's realistic load:
//! thousands of idle connections).
//!
//! # Invariants
//!
//! * A [`Buffer`]'s bytes are laid out as `[consumed | filled | spare]`, with
//!   `start <= len <= capacity`. The capacity is fixed at creation: a buffer
//!   never reallocates.
//! * Every buffer in the pool's free list has the pool's `buffer_size` and is
//!   cleared (`start == len == 0`); there are at most `max_free` of them.
//! * Memory is zeroed once, when a buffer is allocated (`calloc`, which for
//!   large sizes the kernel provides lazily), never on reuse: a reused
//!   buffer's spare bytes hold old data, which is fine because only the
//!   filled region is ever read.
//!
//! # Complexity
//!
//! `take`, `give_back`: `O(1)` (plus one allocation or deallocation when the
//! free list is empty or full). Buffer operations are `O(1)` except
//! [`Buffer::compact`], which moves the unconsumed bytes.

/// The receive buffer size used when nothing else is configured: 16 KiB.
pub const DEFAULT_BUFFER_SIZE: usize = 16 * 1024;

/// A fixed-capacity byte buffer: data is written into
/// [`spare_mut`](Self::spare_mut), marked with
/// [`advance_filled`](Self::advance_filled), read through
/// [`filled`](Self::filled) and released with [`consume`](Self::consume).
#[derive(Clone, PartialEq, Eq)]
pub struct Buffer {
    bytes: Box<[u8]>,
    /// Offset of the first unconsumed byte.
    start: usize,
    /// Offset one past the last filled byte.
    len: usize,
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Buffer")
            .field("capacity", &self.capacity())
            .field("start", &self.start)
            .field("len", &self.len)
            .finish()
    }
}

impl Buffer {
    /// Allocates an empty, zeroed buffer of `capacity` bytes. Usually
    /// obtained from [`BufferPool::take`] instead.
    pub fn new(capacity: usize) -> Self {
        Self {
            bytes: vec![0; capacity].into_boxed_slice(),
            start: 0,
            len: 0,
        }
    }

    /// The fixed number of bytes the buffer holds.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.bytes.len()
    }

    /// The unfilled tail, to read into (e.g. `recv` into it, then call
    /// [`advance_filled`](Self::advance_filled) with the count). Empty when
    /// the buffer is full up to its end; [`compact`](Self::compact) may make
    /// room.
    #[inline]
    pub fn spare_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[self.len..]
    }

    /// Marks the first `count` bytes of [`spare_mut`](Self::spare_mut) as
    /// filled.
    ///
    /// # Panics
    ///
    /// When `count` exceeds [`remaining_capacity`](Self::remaining_capacity).
    #[inline]
    pub fn advance_filled(&mut self, count: usize) {
        assert!(
            count <= self.remaining_capacity(),
            "advance_filled({count}) past the end of the buffer ({} spare bytes)",
            self.remaining_capacity()
        );
        self.len += count;
    }

    /// The filled bytes not yet consumed.
    #[inline]
    pub fn filled(&self) -> &[u8] {
        &self.bytes[self.start..self.len]
    }

    /// The filled bytes not yet consumed, for in-place editing.
    #[inline]
    pub fn filled_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.len]
    }

    /// Number of filled, unconsumed bytes (`filled().len()`).
    #[inline]
    pub fn filled_len(&self) -> usize {
        self.len - self.start
    }

    /// Marks the first `count` filled bytes as consumed. When everything
    /// filled has been consumed, the buffer resets to empty so the whole
    /// capacity is spare again (no copy needed).
    ///
    /// # Panics
    ///
    /// When `count` exceeds [`filled_len`](Self::filled_len).
    #[inline]
    pub fn consume(&mut self, count: usize) {
        assert!(
            count <= self.filled_len(),
            "consume({count}) past the filled bytes ({})",
            self.filled_len()
        );
        self.start += count;
        if self.start == self.len {
            self.start = 0;
            self.len = 0;
        }
    }

    /// Returns whether no unconsumed byte is held (the buffer can be given
    /// back without losing data).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.start == self.len
    }

    /// Returns whether there is no spare byte at the end
    /// (`remaining_capacity() == 0`).
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len == self.bytes.len()
    }

    /// Number of spare bytes after the filled region (`spare_mut().len()`).
    /// Consumed bytes at the front are not counted until
    /// [`compact`](Self::compact).
    #[inline]
    pub fn remaining_capacity(&self) -> usize {
        self.bytes.len() - self.len
    }

    /// Moves the unconsumed bytes to the front (a `memmove`), turning the
    /// consumed prefix into spare room. Does nothing when nothing was
    /// consumed. Call it when a partial request sits at the end of the
    /// buffer and more bytes must be read.
    #[inline]
    pub fn compact(&mut self) {
        if self.start == 0 {
            return;
        }
        self.bytes.copy_within(self.start..self.len, 0);
        self.len -= self.start;
        self.start = 0;
    }

    /// Discards all contents (without zeroing the memory).
    #[inline]
    pub fn clear(&mut self) {
        self.start = 0;
        self.len = 0;
    }
}

/// A free list of equally sized [`Buffer`]s.
///
/// [`take`](Self::take) reuses a free buffer or allocates a new one;
/// [`give_back`](Self::give_back) returns it, keeping at most `max_free`
/// buffers for reuse and freeing the rest (so memory held by the pool tracks
/// recent peak activity, bounded by `max_free * buffer_size`).
#[derive(Debug)]
pub struct BufferPool {
    buffer_size: usize,
    max_free: usize,
    free: Vec<Buffer>,
    allocated_total: u64,
    in_use: usize,
}

impl BufferPool {
    /// Creates an empty pool of `buffer_size`-byte buffers (usually
    /// [`DEFAULT_BUFFER_SIZE`]) keeping at most `max_free` free buffers.
    /// Nothing is allocated until the first [`take`](Self::take).
    pub fn new(buffer_size: usize, max_free: usize) -> Self {
        Self {
            buffer_size,
            max_free,
            free: Vec::new(),
            allocated_total: 0,
            in_use: 0,
        }
    }

    /// Hands out an empty buffer of [`buffer_size`](Self::buffer_size)
    /// bytes: the most recently given back one (warmest in cache) or, when
    /// none is free, a newly allocated one.
    #[inline]
    pub fn take(&mut self) -> Buffer {
        self.in_use += 1;
        match self.free.pop() {
            Some(buffer) => buffer,
            None => {
                self.allocated_total += 1;
                Buffer::new(self.buffer_size)
            }
        }
    }

    /// Returns a buffer to the pool, discarding its contents. It is kept for
    /// reuse when it has the pool's buffer size and fewer than `max_free`
    /// buffers are free; otherwise it is dropped. Always lowers
    /// [`in_use`](Self::in_use) (saturating at zero).
    #[inline]
    pub fn give_back(&mut self, mut buffer: Buffer) {
        self.in_use = self.in_use.saturating_sub(1);
        if buffer.capacity() == self.buffer_size && self.free.len() < self.max_free {
            buffer.clear();
            self.free.push(buffer);
        }
    }

    /// The size in bytes of the buffers this pool hands out.
    pub fn buffer_size(&self) -> usize {
        self.buffer_size
    }

    /// The most free buffers kept for reuse.
    pub fn max_free(&self) -> usize {
        self.max_free
    }

    /// How many buffers the pool has allocated since it was created (reuses
    /// not counted): a measure of allocator traffic.
    pub fn allocated_total(&self) -> u64 {
        self.allocated_total
    }

    /// Buffers taken and not given back. A buffer the user drops instead of
    /// giving back stays counted here forever, so a steadily rising value
    /// points at a leak of that kind.
    pub fn in_use(&self) -> usize {
        self.in_use
    }

    /// Number of free buffers waiting for reuse.
    pub fn free_len(&self) -> usize {
        self.free.len()
    }

    /// Bytes held by the free list (`free_len() * buffer_size()`).
    pub fn free_bytes(&self) -> usize {
        self.free.len() * self.buffer_size
    }

    /// Drops every free buffer, returning their memory to the allocator.
    pub fn shrink(&mut self) {
        self.free = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fill(buffer: &mut Buffer, data: &[u8]) {
        buffer.spare_mut()[..data.len()].copy_from_slice(data);
        buffer.advance_filled(data.len());
    }

    #[test]
    fn fill_consume_and_reset() {
        let mut buffer = Buffer::new(8);
        assert!(buffer.is_empty());
        assert_eq!(buffer.remaining_capacity(), 8);
        fill(&mut buffer, b"hello");
        assert_eq!(buffer.filled(), b"hello");
        assert_eq!(buffer.remaining_capacity(), 3);
        buffer.consume(2);
        assert_eq!(buffer.filled(), b"llo");
        assert_eq!(buffer.filled_len(), 3);
        assert_eq!(
            buffer.remaining_capacity(),
            3,
            "consumed prefix not reusable yet"
        );
        buffer.consume(3);
        assert!(buffer.is_empty());
        assert_eq!(buffer.remaining_capacity(), 8, "fully consumed resets");
        fill(&mut buffer, b"12345678");
        assert!(buffer.is_full());
        assert!(buffer.spare_mut().is_empty());
        buffer.filled_mut()[0] = b'X';
        assert_eq!(buffer.filled(), b"X2345678");
        buffer.clear();
        assert!(buffer.is_empty() && !buffer.is_full());
    }

    #[test]
    fn compact_moves_unconsumed_bytes_to_front() {
        let mut buffer = Buffer::new(8);
        buffer.compact(); // nothing consumed: no-op
        fill(&mut buffer, b"abcdefgh");
        buffer.consume(5);
        assert_eq!(buffer.remaining_capacity(), 0);
        buffer.compact();
        assert_eq!(buffer.filled(), b"fgh");
        assert_eq!(buffer.remaining_capacity(), 5);
        fill(&mut buffer, b"ij");
        assert_eq!(buffer.filled(), b"fghij");
    }

    #[test]
    #[should_panic(expected = "past the filled bytes")]
    fn consume_past_filled_panics() {
        let mut buffer = Buffer::new(4);
        fill(&mut buffer, b"ab");
        buffer.consume(3);
    }

    #[test]
    #[should_panic(expected = "past the end")]
    fn advance_past_capacity_panics() {
        Buffer::new(4).advance_filled(5);
    }

    #[test]
    fn pool_reuses_up_to_max_free() {
        let mut pool = BufferPool::new(64, 2);
        let mut buffers: Vec<Buffer> = (0..4).map(|_| pool.take()).collect();
        assert_eq!(pool.allocated_total(), 4);
        assert_eq!(pool.in_use(), 4);
        assert_eq!(pool.free_len(), 0);
        fill(&mut buffers[0], b"leftover");
        for buffer in buffers.drain(..) {
            pool.give_back(buffer);
        }
        assert_eq!(pool.in_use(), 0);
        assert_eq!(pool.free_len(), 2, "the other two are dropped");
        assert_eq!(pool.free_bytes(), 128);
        let reused = pool.take();
        assert!(reused.is_empty(), "given-back buffers are cleared");
        assert_eq!(reused.capacity(), 64);
        let _reused_too = pool.take();
        let _fresh = pool.take();
        assert_eq!(pool.allocated_total(), 5);
        assert_eq!(pool.in_use(), 3);
        pool.give_back(reused);
        pool.shrink();
        assert_eq!(pool.free_len(), 0);
    }

    #[test]
    fn pool_drops_buffers_of_the_wrong_size() {
        let mut pool = BufferPool::new(DEFAULT_BUFFER_SIZE, 8);
        let taken = pool.take();
        pool.give_back(Buffer::new(100));
        assert_eq!(pool.free_len(), 0);
        assert_eq!(pool.in_use(), 0);
        pool.give_back(taken);
        assert_eq!(pool.free_len(), 1);
        assert_eq!(pool.in_use(), 0, "saturates rather than underflowing");
    }

    proptest! {
        /// Random fill/consume/compact sequences agree with a `VecDeque`.
        #[test]
        fn buffer_matches_queue_model(
            ops in prop::collection::vec((0u8..3, 0usize..40), 0..200),
        ) {
            let mut buffer = Buffer::new(32);
            let mut model = std::collections::VecDeque::new();
            let mut next_byte = 0u8;
            for (kind, amount) in ops {
                match kind {
                    0 => {
                        let count = amount.min(buffer.remaining_capacity());
                        for byte in &mut buffer.spare_mut()[..count] {
                            *byte = next_byte;
                            model.push_back(next_byte);
                            next_byte = next_byte.wrapping_add(1);
                        }
                        buffer.advance_filled(count);
                    }
                    1 => {
                        let count = amount.min(buffer.filled_len());
                        buffer.consume(count);
                        model.drain(..count);
                    }
                    _ => {
                        buffer.compact();
                        prop_assert_eq!(buffer.remaining_capacity(), 32 - model.len());
                    }
                }
                prop_assert_eq!(buffer.filled(), model.iter().copied().collect::<Vec<_>>());
                prop_assert_eq!(buffer.is_empty(), model.is_empty());
                if model.is_empty() {
                    prop_assert_eq!(buffer.remaining_capacity(), 32);
                }
            }
        }
    }
}
