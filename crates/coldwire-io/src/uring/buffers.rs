//! `BufferRing`: the provided-buffer ring all of a loop's connections receive into. The
//! kernel picks a buffer only when data arrives for a multishot receive, so an idle
//! connection owns no receive memory at all — the io_uring form of "take a buffer only
//! when data has arrived" (seed 000), without the readiness round trip.
//!
//! The driver copies each received chunk into a pooled [`crate::Buffer`] and gives the ring
//! buffer back at once (see `docs/backends.md`: requests are small, the copy costs far less
//! than the system calls saved, and a server holding ring buffers for partial heads could
//! drain the ring and stall every connection with `ENOBUFS`). So the ring only needs to
//! cover what arrives during one loop turn.
//!
//! Memory: one anonymous mapping for the ring's entries (page-aligned, as the kernel
//! requires) and one for the buffers. Both are registered with the ring and must outlive
//! it: the driver drops its ring before this (field order), and the kernel pins the pages
//! it writes, so a late write after unmapping cannot reach reused memory.
//!
//! Invariant: a buffer id is either in the ring (the kernel may write into it) or held by
//! the driver between a completion naming it and [`BufferRing::give_back`]; never both.
//!
//! Only the first [`INITIAL_BUFFERS`] ids circulate at first, and more join (doubling, up
//! to the ring's size) when a turn gave back half of those circulating or a receive found
//! the ring empty (`ENOBUFS`). The ring is first in, first out: with every buffer
//! provided, a server at a low rate cycled through all of them, 32 MiB of 16 KiB buffers
//! with the default `--max-connections`, and took a page fault per first touch of each
//! page — about three per request at 200 requests/s, where it had not yet touched them all
//! (issue 19: uring's CPU per request 1.10× epoll's there). Now the memory a loop touches
//! follows the most it received in one turn.

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;

use crate::uring::ring::Ring;

/// An anonymous, private, read-write mapping, unmapped on drop.
struct Mapping {
    address: NonNull<u8>,
    length: usize,
}

impl Mapping {
    fn new(length: usize) -> io::Result<Mapping> {
        // SAFETY: an anonymous private mapping with no address hint; the result is checked.
        let address = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                length,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if address == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let address = NonNull::new(address.cast()).ok_or_else(io::Error::last_os_error)?;
        Ok(Mapping { address, length })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: this mapping was created by `Mapping::new` with this length and is not
        // used after drop.
        unsafe { libc::munmap(self.address.as_ptr().cast(), self.length) };
    }
}

/// Buffer ids in circulation at first (the rest join as needed).
pub const INITIAL_BUFFERS: u16 = 64;

/// A registered provided-buffer ring with its buffers.
pub struct BufferRing {
    entries: Mapping,
    buffers: Mapping,
    count: u16,
    buffer_size: usize,
    group: u16,
    /// Our copy of the ring's tail (the kernel reads the shared one).
    tail: u16,
    /// Ids `0..circulating` have been provided; the others are untouched.
    circulating: u16,
    /// Buffers given back since the last [`BufferRing::end_turn`].
    returned_this_turn: u16,
}

// SAFETY: the mappings are owned by this value alone; moving it to another thread (the
// server builds drivers on the main thread and runs them on workers) moves that ownership.
unsafe impl Send for BufferRing {}

impl BufferRing {
    /// Maps `count` buffers of `buffer_size` bytes (count a power of two, at most 32,768),
    /// registers them with `ring` as buffer group `group`, and provides all of them.
    pub fn new(ring: &Ring, count: u16, buffer_size: usize, group: u16) -> io::Result<BufferRing> {
        if !count.is_power_of_two() || count > 32_768 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "buffer ring size must be a power of two up to 32,768",
            ));
        }
        let entries = Mapping::new(usize::from(count) * size_of::<BufRingEntry>())?;
        let buffers = Mapping::new(usize::from(count) * buffer_size)?;
        // SAFETY: the entries mapping is page-aligned, zeroed, sized for `count` entries,
        // and lives as long as this value, which the driver drops after its ring.
        unsafe {
            ring.io_uring().submitter().register_buf_ring_with_flags(
                entries.address.as_ptr() as u64,
                count,
                group,
                0,
            )?;
        }
        let mut ring = BufferRing {
            entries,
            buffers,
            count,
            buffer_size,
            group,
            tail: 0,
            circulating: 0,
            returned_this_turn: 0,
        };
        ring.grow_to(INITIAL_BUFFERS.min(count));
        Ok(ring)
    }

    /// Provides ids `circulating..target` (untouched buffers) as well.
    fn grow_to(&mut self, target: u16) {
        let target = target.min(self.count);
        if target <= self.circulating {
            return;
        }
        for id in self.circulating..target {
            self.push(id);
        }
        self.circulating = target;
        self.publish();
    }

    /// Buffers in circulation (a gauge for the counters).
    pub fn circulating(&self) -> u16 {
        self.circulating
    }

    /// A receive found no buffer (`ENOBUFS`): twice as many circulate.
    pub fn exhausted(&mut self) {
        self.grow_to(self.circulating.saturating_mul(2));
    }

    /// The end of a loop turn: when it gave back half of the circulating buffers or more,
    /// twice as many circulate (a turn that needs more than circulate would meet
    /// `ENOBUFS`).
    pub fn end_turn(&mut self) {
        if self.returned_this_turn.saturating_mul(2) >= self.circulating {
            self.grow_to(self.circulating.saturating_mul(2));
        }
        self.returned_this_turn = 0;
    }

    /// The buffer group id receives name.
    pub fn group(&self) -> u16 {
        self.group
    }

    /// Bytes in one buffer.
    pub fn buffer_size(&self) -> usize {
        self.buffer_size
    }

    fn push(&mut self, id: u16) {
        let index = usize::from(self.tail & (self.count - 1));
        // SAFETY: `index` < `count`, inside the entries mapping; the entry at the tail is
        // not visible to the kernel until `publish` moves the shared tail past it.
        let entry = unsafe {
            &mut *self
                .entries
                .address
                .as_ptr()
                .cast::<BufRingEntry>()
                .add(index)
        };
        // SAFETY: `id` < `count`, so the buffer lies inside the buffers mapping.
        let address = unsafe {
            self.buffers
                .address
                .as_ptr()
                .add(usize::from(id) * self.buffer_size)
        };
        entry.set_addr(address as u64);
        entry.set_len(self.buffer_size as u32);
        entry.set_bid(id);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes the pushed buffers visible to the kernel.
    fn publish(&mut self) {
        // SAFETY: the first entry's `resv` field is the ring's shared tail (the io_uring
        // buffer-ring layout); it is a naturally aligned u16 the kernel reads concurrently,
        // so it is written through an atomic with release ordering, after the entries.
        unsafe {
            let tail = BufRingEntry::tail(self.entries.address.as_ptr().cast::<BufRingEntry>());
            (*(tail as *const AtomicU16)).store(self.tail, Ordering::Release);
        }
    }

    /// The first `length` bytes of buffer `id`, which a completion just handed to us.
    pub fn data(&self, id: u16, length: usize) -> &[u8] {
        let id = usize::from(id % self.count);
        let length = length.min(self.buffer_size);
        // SAFETY: the buffer lies inside the buffers mapping; the completion naming it took
        // it out of the ring, so the kernel no longer writes it until `give_back`.
        unsafe {
            std::slice::from_raw_parts(
                self.buffers.address.as_ptr().add(id * self.buffer_size),
                length,
            )
        }
    }

    /// Returns buffer `id` to the kernel.
    pub fn give_back(&mut self, id: u16) {
        self.push(id % self.count);
        self.publish();
        self.returned_this_turn = self.returned_this_turn.saturating_add(1);
    }
}
