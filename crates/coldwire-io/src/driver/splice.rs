//! The splice extension of a [`Driver`](super::Driver): socket-to-socket transfers that
//! never bring the bytes into user space (seed 002's splice, with its KeepCopy as `tee`),
//! and the bounded receive that leaves a body in the kernel for them.
//!
//! A backend either implements [`Splice`] on its driver (`type Splicer = Self`) or says
//! it has none (`type Splicer = NoSplice`, and [`Driver::splicer`](super::Driver::splicer)
//! answers `Unsupported`). [`NoSplice`] has no values, so none of its methods can ever run:
//! a driver without splicing cannot pretend to splice.
//!
//! Contract of a transfer: while it runs nobody receives from its source or sends on its
//! destination; it completes like output queued on the destination (`Sent` or `Failed` on
//! the destination); closing either connection ends it without a completion.

use std::io;

use super::ConnectionId;

/// Moving bytes between two connections inside the kernel. See the module doc.
pub trait Splice {
    /// True when [`Splice::recv_at_most`] takes no more than asked. False where the
    /// mechanism fixes the size of a receive (io_uring's receive into ring buffers): the
    /// bytes past the bound then reach the server, or the transfer that follows, through
    /// user space — correct, but copied.
    const HONOURS_RECEIVE_BOUND: bool;

    /// Like [`Driver::recv`](super::Driver::recv), but the receive takes at most
    /// `max_bytes` (one-shot). For a message head whose body may then be spliced: the head
    /// and a few body bytes pass through user space, the rest stays in the kernel for
    /// [`Splice::splice`] (seed 002's proxy reads the first two segments of a reply the same
    /// way). See [`Splice::HONOURS_RECEIVE_BOUND`].
    fn recv_at_most(&mut self, connection: ConnectionId, max_bytes: usize);

    /// Moves `length` bytes (`u64::MAX`: until the source's end of stream) from `source`'s
    /// socket to `destination`'s through a pooled pipe, without copying them into user
    /// space; with `keep_copy`, a copy is also collected (`tee`) for
    /// [`Splice::take_splice_copy`]. It acts as output queued on `destination`: completion
    /// is `Sent { destination }`, or `Failed { destination }` (the source ending early is
    /// `UnexpectedEof`). Meanwhile nobody receives from `source` or sends on
    /// `destination`, whose queue must be empty at the start. A call against this contract,
    /// or one for which no pipe can be had, is refused with an error; callers then fall
    /// back to receive and send.
    fn splice(
        &mut self,
        source: ConnectionId,
        destination: ConnectionId,
        length: u64,
        keep_copy: bool,
    ) -> io::Result<()>;

    /// Bytes the running splice to `destination` has delivered so far (0 when none runs):
    /// how a caller tells a quiet spliced stream (an idle tunnel) from a busy one.
    fn splice_delivered(&self, destination: ConnectionId) -> u64;

    /// The copy kept by the finished `keep_copy` splice to `destination`, once.
    fn take_splice_copy(&mut self, destination: ConnectionId) -> Option<Vec<u8>>;

    /// Like [`Splice::splice`] for exactly `length` bytes with no copy, but the kernel
    /// moves them itself (a BPF sockmap with a stream parser,
    /// [`crate::sockmap::BodySockmap`]): no system call or wake-up per chunk, and both
    /// connections are plain again after it. Same completions and contract as
    /// [`Splice::splice`]. Refused (`Unsupported`) by drivers that do not offer it and
    /// when the kernel refuses the sockmap: callers then fall back to [`Splice::splice`].
    fn splice_in_kernel(
        &mut self,
        source: ConnectionId,
        destination: ConnectionId,
        length: u64,
    ) -> io::Result<()> {
        let _ = (source, destination, length);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this driver does not splice in the kernel",
        ))
    }
}

/// The splicer of a driver that cannot splice. It has no values: a driver with
/// `type Splicer = NoSplice` can only answer `Unsupported` from
/// [`Driver::splicer`](super::Driver::splicer).
#[derive(Debug)]
pub enum NoSplice {}

impl Splice for NoSplice {
    const HONOURS_RECEIVE_BOUND: bool = false;

    fn recv_at_most(&mut self, _connection: ConnectionId, _max_bytes: usize) {
        match *self {}
    }

    fn splice(
        &mut self,
        _source: ConnectionId,
        _destination: ConnectionId,
        _length: u64,
        _keep_copy: bool,
    ) -> io::Result<()> {
        match *self {}
    }

    fn splice_delivered(&self, _destination: ConnectionId) -> u64 {
        match *self {}
    }

    fn take_splice_copy(&mut self, _destination: ConnectionId) -> Option<Vec<u8>> {
        match *self {}
    }
}
