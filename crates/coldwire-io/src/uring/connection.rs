//! Per-connection state of the io_uring driver, and how operations are named in
//! `user_data` so that each completion finds its connection — or is recognised as stale.
//!
//! `user_data` layout: `kind` (8 bits) | `slot` (24 bits) | `generation` (32 bits). The
//! generation is the connection's, so a completion posted after its connection was closed
//! and the slot reused never reaches the newcomer (the same rule as the driver contract's
//! connection ids).
//!
//! Lifetimes: a send's `msghdr`, iovecs and file-read buffer live in a boxed [`SendState`]
//! whose address does not move when the slot table grows; it and the output chunks the
//! iovecs point into stay with the connection until the send's completion arrives. A
//! connection the server closed while such an operation is in flight stays in its slot as
//! a "zombie" (`CLOSING`) until then; receives pin no connection memory (they use the
//! shared buffer ring), so they never hold a slot.

use std::collections::VecDeque;
use std::os::fd::RawFd;

use crate::core::generations::Occupant;
use crate::core::timer_wheel::TimerHandle;
use crate::driver::Chunk;
use crate::pools::buffer_pool::Buffer;

/// What an operation was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Multishot accept; `slot` is the listener's index.
    Accept = 1,
    /// Multishot receive.
    Recv = 2,
    /// `sendmsg` of gathered memory or of a file piece.
    Send = 3,
    /// Read of a file piece into the send buffer (linked to its send).
    Read = 4,
    /// `IORING_OP_CONNECT` of an outgoing connection.
    Connect = 5,
    /// Multishot poll on the waker's eventfd.
    Waker = 6,
    /// Cancellations and closes: completions carry nothing we need.
    Ignored = 7,
    /// An operation of a socket-to-socket transfer (`slot` is its destination's).
    Splice = 9,
    /// File work (`slot` is its slot in the driver's file table, `file.rs`).
    File = 10,
}

impl Kind {
    fn from_bits(bits: u8) -> Option<Kind> {
        Some(match bits {
            1 => Kind::Accept,
            2 => Kind::Recv,
            3 => Kind::Send,
            4 => Kind::Read,
            5 => Kind::Connect,
            6 => Kind::Waker,
            7 => Kind::Ignored,
            9 => Kind::Splice,
            10 => Kind::File,
            _ => return None,
        })
    }
}

/// Packs an operation's identity into `user_data`.
pub fn user_data(kind: Kind, slot: usize, generation: u32) -> u64 {
    (u64::from(kind as u8) << 56) | (((slot as u64) & 0xff_ffff) << 32) | u64::from(generation)
}

/// Unpacks `user_data`: kind, slot, generation.
pub fn decode(data: u64) -> Option<(Kind, usize, u32)> {
    let kind = Kind::from_bits((data >> 56) as u8)?;
    Some((kind, ((data >> 32) & 0xff_ffff) as usize, data as u32))
}

/// The most slots `user_data` can name.
pub const MAX_SLOTS: usize = 1 << 24;

/// The server armed a receive and awaits its completion.
pub const RECV_ARMED: u16 = 1;
/// A multishot receive is active in the kernel.
pub const RECV_ACTIVE: u16 = 2;
/// A send is in flight (its `SendState` and the chunks it points into are the kernel's).
pub const SEND_IN_FLIGHT: u16 = 4;
/// A file read (linked to a send) is in flight.
pub const READ_IN_FLIGHT: u16 = 8;
/// The server was told `Flush::Pending` and awaits `Sent`.
pub const WRITE_WAITING: u16 = 16;
/// An `IORING_OP_CONNECT` is in flight (its address is in
/// [`Connection::connect_address`]): the connection is pinned until its completion.
pub const CONNECTING: u16 = 32;
/// The server closed the connection; the slot waits for in-flight sends (a zombie).
pub const CLOSING: u16 = 64;
/// `shutdown_write` was asked while output was still in flight: shut down after it.
pub const SHUTDOWN_PENDING: u16 = 128;
/// The send in flight carries output the server was told was done (`Flush::Done`): a
/// close waits for it rather than cancelling it.
pub const SEND_PROMISED: u16 = 256;
/// The receive was cancelled because too much unrequested input piled up.
pub const RECV_THROTTLED: u16 = 512;

/// The socket has been read, or a receive armed, at least once: later receives go through
/// the ring. Until then a light turn's first receive is tried at once
/// (`UringDriver::try_recv_now`): a client's request is usually there when its connection
/// is accepted. Set from the start on outgoing connections, whose peer answers later.
pub const RECV_TRIED: u16 = 1024;

/// The connection is the source of a running splice (see `splice.rs`): its operations look
/// the descriptor up in io-wq, so the socket stays open until the transfer is dropped.
pub const SPLICE_FROM: u16 = 2048;
/// The connection is the destination of a running splice.
pub const SPLICE_TO: u16 = 4096;

/// Memory a send hands to the kernel; boxed so its address is stable.
pub struct SendState {
    /// The gather list (`msghdr.msg_iov` points here).
    pub iovecs: [libc::iovec; crate::pools::output_pools::GATHER],
    /// The message header the `SENDMSG` points to.
    pub message: libc::msghdr,
    /// Buffer a file piece is read into before it is sent.
    pub file_buffer: Vec<u8>,
    /// Bytes the send in flight asked for.
    pub requested: u64,
    /// Bytes the linked file read brought (`None` while it has not completed).
    pub file_read: Option<u64>,
    /// The send in flight is a file piece (its bytes come from `file_buffer`).
    pub is_file_piece: bool,
    /// Output chunks (from the front) the send in flight points into.
    pub chunks_in_flight: usize,
    /// Front-chunk progress at which the file read in flight starts.
    pub read_start: u64,
    /// File bytes in `file_buffer` or `pipe`: (front-chunk progress of its first byte,
    /// length). A piece the socket took only in part is sent on from here, not read again.
    pub buffered: Option<(u64, u64)>,
    /// The pipe file pieces are spliced through, held while the connection sends a file.
    pub pipe: Option<crate::pools::pipe_pool::Pipe>,
}

// SAFETY: the raw pointers in `iovecs` and `message` point into this box and into output
// chunks owned by the same connection; they move between threads together with it (the
// driver is built on one thread and run on another, never shared).
unsafe impl Send for SendState {}

impl SendState {
    /// A cleared send state.
    pub fn new() -> Box<SendState> {
        // SAFETY: iovec and msghdr are plain C structs for which all-zero is valid
        // (null pointers, zero lengths).
        let (iovecs, message) = unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
        Box::new(SendState {
            iovecs,
            message,
            file_buffer: Vec::new(),
            requested: 0,
            file_read: None,
            is_file_piece: false,
            chunks_in_flight: 0,
            read_start: 0,
            buffered: None,
            pipe: None,
        })
    }
}

/// One connection.
pub struct Connection {
    /// The socket.
    pub fd: RawFd,
    /// This occupant's generation (see the module doc).
    pub generation: u32,
    /// `RECV_ARMED | ...` bits above.
    pub flags: u16,
    /// The connection's timer, if armed.
    pub timer: Option<TimerHandle>,
    /// Output queued, in order; the front chunks may be in flight.
    pub output: VecDeque<Chunk>,
    /// Bytes of the front chunk already written.
    pub front_progress: u64,
    /// Send memory, present while sending (pooled otherwise).
    pub send: Option<Box<SendState>>,
    /// Input that arrived while no receive was armed (pipelining clients during a write).
    pub stash: Option<Buffer>,
    /// End of stream (`Ok`) or an error met while no receive was armed.
    pub pending_end: Option<Result<(), std::io::Error>>,
    /// Bytes handed to this connection for output so far (queued or spliced to it): with
    /// the peer's acknowledged count, what has not reached the peer yet.
    pub handed: u64,
    /// The address an `IORING_OP_CONNECT` in flight points to (the kernel copies it when
    /// it takes the submission; kept until the completion all the same, which also covers
    /// a submission-polling kernel thread that takes it late).
    pub connect_address: Option<Box<socket2::SockAddr>>,
}

impl Occupant for Connection {
    fn generation(&self) -> u32 {
        self.generation
    }

    fn set_generation(&mut self, generation: u32) {
        self.generation = generation;
    }

    fn timer(&mut self) -> &mut Option<TimerHandle> {
        &mut self.timer
    }
}

impl Connection {
    /// A fresh connection on `fd`.
    pub fn new(fd: RawFd, flags: u16) -> Connection {
        Connection {
            fd,
            generation: 0,
            flags,
            timer: None,
            output: VecDeque::new(),
            front_progress: 0,
            send: None,
            stash: None,
            pending_end: None,
            handed: 0,
            connect_address: None,
        }
    }

    /// Whether a send or file read in flight still owns this connection's memory.
    pub fn memory_in_flight(&self) -> bool {
        self.flags & (SEND_IN_FLIGHT | READ_IN_FLIGHT) != 0
    }

    /// Whether an operation in flight still needs this connection's slot or descriptor:
    /// memory (a send, a file read, a connect's address) or the descriptor number (a
    /// splice). Closing waits for such operations' completions.
    pub fn pinned(&self) -> bool {
        self.memory_in_flight() || self.flags & (CONNECTING | SPLICE_FROM | SPLICE_TO) != 0
    }

    /// Bytes queued and not yet written.
    pub fn queued_bytes(&self) -> u64 {
        self.output.iter().map(Chunk::len).sum::<u64>() - self.front_progress
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_round_trips() {
        for (kind, slot, generation) in [
            (Kind::Recv, 0, 0),
            (Kind::Send, MAX_SLOTS - 1, u32::MAX),
            (Kind::Waker, 12_345, 7),
        ] {
            assert_eq!(
                decode(user_data(kind, slot, generation)),
                Some((kind, slot, generation))
            );
        }
        assert_eq!(decode(0), None);
    }
}
