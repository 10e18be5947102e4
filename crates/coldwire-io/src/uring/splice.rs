//! `Splice::splice` on io_uring: socket → pooled pipe → socket with `IORING_OP_SPLICE`, and
//! the copy a cache keeps with `IORING_OP_TEE` into a second pipe plus a `READ` of it — the
//! bytes of the transfer itself never enter user space.
//!
//! A transfer (keyed by its destination's slot, as in the readiness driver) runs one
//! operation at a time:
//!
//! 1. *Quieting*: the source's multishot receive is cancelled and the transfer waits for
//!    its last completion (a receive left armed would race the splice for the bytes), and
//!    for a promised send still in flight on the destination (output order);
//! 2. *Prefix*: bytes the receive already took (the connection's stash) are sent first
//!    (`SEND`), as far as they belong to the transfer;
//! 3. *In* (`SPLICE` source → pipe, up to the pipe's size), [*Tee* (`TEE` pipe → copy pipe)
//!    and *CopyRead* (`READ` copy pipe → the copy)], *Out* (`SPLICE` pipe → destination,
//!    repeated until the pipe is empty); again from *In* until the length is moved or the
//!    source ends.
//!
//! io_uring always runs `SPLICE` and `TEE` in io-wq worker threads, which look the
//! descriptor numbers up only when they run. So both connections stay
//! pinned (`SPLICE_FROM` / `SPLICE_TO`) while the transfer exists: closing either one
//! cancels its operation (by `user_data`: a queued io-wq request has no file yet, so a
//! cancellation by descriptor would miss it) and the sockets are closed only after that
//! operation's completion. Memory the kernel writes (the copy) and the pipes are likewise
//! released only after the last completion.
//!
//! The sockets are blocking (see `driver.rs`) and the pipes non-blocking: a splice from a
//! socket waits in its worker for data, a splice to a socket for room, and a splice never
//! waits for the pipe, which holds nothing else. A splice to a socket completes only when
//! all its bytes are in the socket, and it holds the pipe's lock meanwhile (so the pipe's
//! fill level cannot be read without blocking the loop); progress towards a slow reader is
//! therefore measured by the peer's acknowledgements (`unsent_bytes`, `TCP_INFO`).

use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, types};

use super::connection::{
    CLOSING, Kind, RECV_ACTIVE, RECV_ARMED, SEND_PROMISED, SPLICE_FROM, SPLICE_TO, user_data,
};
use super::driver::UringDriver;
use crate::core::splice_table::{self, SpliceTable, TransferState, UNTIL_END, check_call};
pub use crate::core::splice_table::{MAX_FREE_PIPES, PIPE_BYTES};
use crate::driver::{ConnectionId, Driver, Splice};
use crate::pools::pipe_pool::PipePool;

/// Where a transfer is (see the module doc); every step but `Quieting` has one operation
/// in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Quieting,
    Prefix,
    In,
    Tee,
    CopyRead,
    Out,
}

/// What an io_uring transfer keeps besides the shared [`crate::core::splice_table::Transfer`].
pub(crate) struct Steps {
    /// Bytes tee'd into the copy pipe and not yet read back.
    teed: usize,
    /// Stashed bytes being sent ahead of the spliced ones.
    prefix: Vec<u8>,
    step: Step,
    /// A connection closed: drop the transfer at its operation's completion.
    cancelled: bool,
    /// Bytes delivered to the destination so far (prefix and spliced): how the proxy tells
    /// a quiet spliced tunnel from a busy one.
    delivered: u64,
}

/// The running transfers of one io_uring driver and its pipe pool.
pub(crate) type Splices = SpliceTable<Steps>;
type Transfer = splice_table::Transfer<Steps>;

impl TransferState for Steps {
    fn copy_pipe_empty(&self) -> bool {
        self.teed == 0
    }
}

impl Splices {
    /// Whether an operation of some transfer may still write memory of ours (the copy).
    pub(crate) fn busy(&self) -> bool {
        self.transfers
            .values()
            .any(|transfer| transfer.state.step != Step::Quieting)
    }

    /// The pipe pool (also used by the file path, `output.rs`).
    pub(crate) fn pipes(&mut self) -> &mut PipePool {
        &mut self.pipes
    }

    /// An operation of the transfer to `destination_slot` completed during teardown.
    pub(crate) fn settle(&mut self, destination_slot: usize) {
        if let Some(transfer) = self.transfers.get_mut(&(destination_slot as u32)) {
            transfer.state.step = Step::Quieting;
        }
    }

    /// Closes every transfer's pipes (teardown, after `busy()` turned false).
    pub(crate) fn close_all(&mut self) {
        for (_, transfer) in self.transfers.drain() {
            self.pipes.give_back(transfer.pipe, false);
            if let Some((copy_pipe, _)) = transfer.copy {
                self.pipes.give_back(copy_pipe, false);
            }
        }
    }
}

impl Splice for UringDriver {
    /// The multishot receive fills whole ring buffers: a bound cannot be passed on. Bytes
    /// past it wait in the connection's stash, and a transfer that follows sends them
    /// first (its *prefix*), so they are copied once, never lost.
    const HONOURS_RECEIVE_BOUND: bool = false;

    fn recv_at_most(&mut self, id: ConnectionId, _max_bytes: usize) {
        self.recv(id);
    }

    /// Starts a transfer (see the module doc).
    fn splice(
        &mut self,
        source: ConnectionId,
        destination: ConnectionId,
        length: u64,
        keep_copy: bool,
    ) -> io::Result<()> {
        let source_open = self.is_current(source);
        // A promised send may still be in flight (the server was told `Flush::Done`); the
        // transfer waits for it. Anything else queued is a caller error.
        let destination_queued = self
            .live(destination.index(), destination.generation)
            .map(|target| !target.output.is_empty() && target.flags & SEND_PROMISED == 0);
        check_call(source, destination, source_open, destination_queued)?;
        let pipes = self
            .splices
            .take_pipes(source, destination, length, keep_copy)?;
        if let Some(connection) = self.connections.get_mut(destination.index()) {
            connection.flags |= SPLICE_TO;
        }
        let mut cancel_receive = None;
        if let Some(connection) = self.connections.get_mut(source.index()) {
            connection.flags |= SPLICE_FROM;
            // Nobody receives from the source meanwhile (the contract).
            connection.flags &= !RECV_ARMED;
            if connection.flags & RECV_ACTIVE != 0 {
                cancel_receive = Some(user_data(Kind::Recv, source.index(), source.generation));
            }
        }
        let state = Steps {
            teed: 0,
            prefix: Vec::new(),
            step: Step::Quieting,
            cancelled: false,
            delivered: 0,
        };
        let transfer = Transfer::new(source, destination, length, pipes, state);
        self.splices.insert(transfer);
        if let Some(target) = cancel_receive {
            self.push_quiet(opcode::AsyncCancel::new(target).build());
        }
        self.advance_quieting(destination.slot);
        Ok(())
    }

    fn splice_delivered(&self, destination: ConnectionId) -> u64 {
        self.splices
            .running(destination)
            .map_or(0, |transfer| transfer.state.delivered)
    }

    fn take_splice_copy(&mut self, destination: ConnectionId) -> Option<Vec<u8>> {
        self.splices.take_copy(destination)
    }

    /// Refused by design: a multishot receive, once armed on a connection, keeps taking
    /// bytes out of its socket into ring buffers — before the socket is inserted into a
    /// sockmap or after — and the kernel's splice would never see them.
    fn lend_socket(&mut self, _id: ConnectionId) -> io::Result<std::os::fd::RawFd> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "io_uring's multishot receive could take bytes out of a lent socket: \
             use --io epoll (or poll, select, uring-poll) for the sockmap data path",
        ))
    }
}

impl UringDriver {
    /// A receive or send completion arrived for `slot`: a transfer waiting for the
    /// connection to quiet down may go on.
    pub(super) fn splice_poke(&mut self, slot: usize) {
        if self.splices.is_idle() {
            return;
        }
        for destination in self.splices.involving(slot as u32).into_iter().flatten() {
            self.advance_quieting(destination);
        }
    }

    /// `slot` is being closed: its transfers end without a completion (the server closes
    /// both sides of a failed exchange itself). A transfer with an operation in flight is
    /// cancelled and dropped at that operation's completion.
    pub(super) fn splice_closed(&mut self, slot: usize) {
        if self.splices.is_idle() {
            return;
        }
        let slot = slot as u32;
        for destination in self.splices.involving(slot).into_iter().flatten() {
            let Some(transfer) = self.splices.transfers.get_mut(&destination) else {
                continue;
            };
            if transfer.state.step == Step::Quieting {
                self.drop_transfer(destination);
            } else if !transfer.state.cancelled {
                transfer.state.cancelled = true;
                let id = transfer.destination;
                self.push_quiet(opcode::AsyncCancel::new(operation_tag(id)).build());
            }
        }
        self.splices.forget_copies(slot);
    }

    /// Bytes a running transfer still has to deliver to `destination`.
    pub(super) fn splice_backlog(&self, destination: ConnectionId) -> u64 {
        self.splices.running(destination).map_or(0, |transfer| {
            transfer
                .remaining
                .saturating_add((transfer.in_pipe + transfer.state.prefix.len()) as u64)
        })
    }

    /// Bytes a running transfer to `destination` has not taken from its source yet.
    pub(super) fn splice_untaken(&self, destination: ConnectionId) -> u64 {
        self.splices
            .running(destination)
            .map_or(0, |transfer| transfer.remaining)
    }

    /// Leaves `Quieting` once the source's receive has stopped and the destination's
    /// promised send is done: sends the stashed prefix, or starts splicing.
    fn advance_quieting(&mut self, destination_slot: u32) {
        let Some(transfer) = self.splices.transfers.get(&destination_slot) else {
            return;
        };
        if transfer.state.step != Step::Quieting {
            return;
        }
        let (source, destination) = (transfer.source, transfer.destination);
        let source_quiet = self
            .connections
            .get(source.index())
            .is_some_and(|connection| connection.flags & RECV_ACTIVE == 0);
        let destination_quiet = self
            .connections
            .get(destination.index())
            .is_some_and(|connection| !connection.memory_in_flight());
        if !(source_quiet && destination_quiet) {
            return;
        }
        let mut prefix = Vec::new();
        if let Some(transfer) = self.splices.transfers.get(&destination_slot)
            && let Some(connection) = self.connections.get_mut(source.index())
            && let Some(stash) = connection.stash.as_mut()
        {
            let take = usize::try_from(transfer.remaining)
                .unwrap_or(usize::MAX)
                .min(stash.filled_len());
            prefix.extend_from_slice(&stash.filled()[..take]);
            stash.consume(take);
            if stash.is_empty()
                && let Some(stash) = connection.stash.take()
            {
                self.buffers.give_back(stash);
            }
        }
        let Some(transfer) = self.splices.transfers.get_mut(&destination_slot) else {
            return;
        };
        if prefix.is_empty() {
            self.next_in(destination_slot);
            return;
        }
        if transfer.remaining != UNTIL_END {
            transfer.remaining -= prefix.len() as u64;
        }
        if let Some((_, copy)) = transfer.copy.as_mut() {
            copy.extend_from_slice(&prefix);
        }
        let destination = transfer.destination;
        if let Some(connection) = self.connections.get_mut(destination.index()) {
            connection.handed += prefix.len() as u64;
        }
        let Some(transfer) = self.splices.transfers.get_mut(&destination_slot) else {
            return;
        };
        transfer.state.prefix = prefix;
        self.push_prefix(destination_slot);
    }

    /// The transfer to `destination_slot`, moved on to `step` (an operation writing to the
    /// destination), and the destination's descriptor; `None` when either is gone.
    fn step_to_destination(
        &mut self,
        destination_slot: u32,
        step: Step,
    ) -> Option<(&mut Transfer, RawFd)> {
        let transfer = self.splices.transfers.get_mut(&destination_slot)?;
        let connection = self.connections.get(transfer.destination.index())?;
        transfer.state.step = step;
        Some((transfer, connection.fd))
    }

    fn push_prefix(&mut self, destination_slot: u32) {
        let Some((transfer, fd)) = self.step_to_destination(destination_slot, Step::Prefix) else {
            return;
        };
        let flags = libc::MSG_NOSIGNAL | libc::MSG_WAITALL;
        let entry = opcode::Send::new(
            types::Fd(fd),
            transfer.state.prefix.as_ptr(),
            transfer.state.prefix.len() as u32,
        )
        .flags(flags)
        .build()
        .user_data(operation_tag(transfer.destination));
        // SAFETY: the bytes are the transfer's `prefix`, which is neither changed nor
        // dropped before this operation's completion (a transfer is dropped only outside
        // an operation, see `on_splice`).
        unsafe { self.push(&entry) };
    }

    /// Takes more from the source, or finishes when nothing is left to take.
    fn next_in(&mut self, destination_slot: u32) {
        let Some(transfer) = self.splices.transfers.get_mut(&destination_slot) else {
            return;
        };
        if transfer.remaining == 0 {
            self.finish_transfer(destination_slot, None);
            return;
        }
        let source = transfer.source;
        let Some(connection) = self.connections.get_mut(source.index()) else {
            self.finish_transfer(destination_slot, Some(io::ErrorKind::NotConnected.into()));
            return;
        };
        // An end met by the receive before the transfer began.
        if let Some(end) = connection.pending_end.take() {
            let error = match end {
                Ok(()) if transfer.remaining == UNTIL_END => None,
                Ok(()) => Some(early_end()),
                Err(error) => Some(error),
            };
            if error.is_none() {
                connection.pending_end = Some(Ok(()));
            }
            self.finish_transfer(destination_slot, error);
            return;
        }
        let want = transfer
            .remaining
            .min(transfer.pipe.capacity as u64)
            .min(u64::from(u32::MAX)) as u32;
        transfer.state.step = Step::In;
        let entry = opcode::Splice::new(
            types::Fd(connection.fd),
            -1,
            types::Fd(transfer.pipe.write),
            -1,
            want,
        )
        .build()
        .user_data(operation_tag(transfer.destination));
        self.push_plain(entry);
    }

    fn push_out(&mut self, destination_slot: u32) {
        let Some((transfer, fd)) = self.step_to_destination(destination_slot, Step::Out) else {
            return;
        };
        // Never on an unbounded transfer (a tunnel): a short write would wait for TCP's
        // 200 ms cork timer.
        let more = transfer.remaining != UNTIL_END && transfer.remaining > 0;
        let entry = opcode::Splice::new(
            types::Fd(transfer.pipe.read),
            -1,
            types::Fd(fd),
            -1,
            transfer.in_pipe as u32,
        )
        .flags(if more { libc::SPLICE_F_MORE } else { 0 })
        .build()
        .user_data(operation_tag(transfer.destination));
        self.push_plain(entry);
    }

    fn push_copy_read(&mut self, destination_slot: u32) {
        let Some(transfer) = self.splices.transfers.get_mut(&destination_slot) else {
            return;
        };
        let Some((copy_pipe, copy)) = transfer.copy.as_mut() else {
            return;
        };
        copy.reserve(transfer.state.teed);
        let spare = copy.spare_capacity_mut();
        transfer.state.step = Step::CopyRead;
        let entry = opcode::Read::new(
            types::Fd(copy_pipe.read),
            spare.as_mut_ptr().cast(),
            transfer.state.teed as u32,
        )
        .offset(u64::MAX)
        .build()
        .user_data(operation_tag(transfer.destination));
        // SAFETY: the read fills the copy's spare capacity (reserved above, at least
        // `teed` bytes); the vector is not touched, moved out or dropped before this
        // operation's completion (its heap buffer stays put when the transfer moves).
        unsafe { self.push(&entry) };
    }

    /// A transfer's operation completed.
    pub(super) fn on_splice(&mut self, destination_slot: usize, generation: u32, result: i32) {
        let slot = destination_slot as u32;
        let Some(transfer) = self
            .splices
            .transfers
            .get(&slot)
            .filter(|transfer| transfer.destination.generation == generation)
        else {
            return;
        };
        if transfer.state.cancelled {
            self.drop_transfer(slot);
            return;
        }
        if result < 0 {
            let error = io::Error::from_raw_os_error(-result);
            self.finish_transfer(slot, Some(error));
            return;
        }
        let count = result as usize;
        match transfer.state.step {
            Step::Quieting => {}
            Step::Prefix => self.prefix_sent(slot, count),
            Step::In => self.spliced_in(slot, count),
            Step::Tee => self.teed(slot, count),
            Step::CopyRead => self.copy_read(slot, count),
            Step::Out => self.spliced_out(slot, count),
        }
    }

    fn transfer(&mut self, destination_slot: u32) -> Option<&mut Transfer> {
        self.splices.transfers.get_mut(&destination_slot)
    }

    fn prefix_sent(&mut self, slot: u32, count: usize) {
        self.counters.bytes_sent += count as u64;
        let Some(transfer) = self.transfer(slot) else {
            return;
        };
        transfer.state.delivered += count as u64;
        transfer
            .state
            .prefix
            .drain(..count.min(transfer.state.prefix.len()));
        if transfer.state.prefix.is_empty() {
            self.next_in(slot);
        } else {
            self.push_prefix(slot);
        }
    }

    fn spliced_in(&mut self, slot: u32, count: usize) {
        let Some(transfer) = self.transfer(slot) else {
            return;
        };
        if count == 0 {
            let error = (transfer.remaining != UNTIL_END).then(early_end);
            self.finish_transfer(slot, error);
            return;
        }
        if transfer.remaining != UNTIL_END {
            transfer.remaining -= count as u64;
        }
        transfer.in_pipe += count;
        let tee = transfer.copy.as_ref().map(|(copy_pipe, _)| {
            opcode::Tee::new(
                types::Fd(transfer.pipe.read),
                types::Fd(copy_pipe.write),
                count as u32,
            )
            .build()
            .user_data(operation_tag(transfer.destination))
        });
        let destination = transfer.destination;
        self.counters.bytes_received += count as u64;
        if let Some(connection) = self.connections.get_mut(destination.index()) {
            connection.handed += count as u64;
        }
        match tee {
            Some(entry) => {
                if let Some(transfer) = self.transfer(slot) {
                    transfer.state.step = Step::Tee;
                    transfer.state.teed = count;
                }
                self.push_plain(entry);
            }
            None => self.push_out(slot),
        }
    }

    fn teed(&mut self, slot: u32, count: usize) {
        if self
            .transfer(slot)
            .is_some_and(|transfer| count != transfer.state.teed)
        {
            let error = io::Error::other("tee copied less than was spliced");
            self.finish_transfer(slot, Some(error));
        } else {
            self.push_copy_read(slot);
        }
    }

    fn copy_read(&mut self, slot: u32, count: usize) {
        let Some(transfer) = self.transfer(slot) else {
            return;
        };
        if count == 0 {
            let error = io::Error::other("the copy pipe held less than was teed");
            self.finish_transfer(slot, Some(error));
            return;
        }
        if let Some((_, copy)) = transfer.copy.as_mut() {
            let count = count
                .min(transfer.state.teed)
                .min(copy.spare_capacity_mut().len());
            // SAFETY: the completed read initialised `count` bytes of the spare capacity
            // (bounded by what it was given).
            unsafe { copy.set_len(copy.len() + count) };
            transfer.state.teed -= count;
        }
        if transfer.state.teed > 0 {
            self.push_copy_read(slot);
        } else {
            self.push_out(slot);
        }
    }

    fn spliced_out(&mut self, slot: u32, count: usize) {
        self.counters.bytes_sent += count as u64;
        let Some(transfer) = self.transfer(slot) else {
            return;
        };
        transfer.state.delivered += count as u64;
        transfer.in_pipe = transfer.in_pipe.saturating_sub(count);
        if count == 0 {
            let error = io::Error::from(io::ErrorKind::WriteZero);
            self.finish_transfer(slot, Some(error));
        } else if transfer.in_pipe > 0 {
            self.push_out(slot);
        } else {
            self.next_in(slot);
        }
    }

    /// Removes a transfer whose operation (if any) has completed, releasing its pipes and
    /// both connections; one closed meanwhile is closed now.
    fn drop_transfer(&mut self, destination_slot: u32) {
        let Some((source, destination)) = self.splices.remove(destination_slot) else {
            return;
        };
        for (id, flag) in [(source, SPLICE_FROM), (destination, SPLICE_TO)] {
            let Some(connection) = self
                .connections
                .get_mut(id.index())
                .filter(|connection| connection.generation == id.generation)
            else {
                continue;
            };
            connection.flags &= !flag;
            if connection.flags & CLOSING != 0 && !connection.pinned() {
                self.finish_close(id.index());
            }
        }
    }

    fn finish_transfer(&mut self, destination_slot: u32, error: Option<io::Error>) {
        let Some((destination, copy)) = self.splices.take_result(destination_slot) else {
            return;
        };
        self.drop_transfer(destination_slot);
        let completion = self.splices.completion(destination, copy, error);
        self.completions.push_back(completion);
    }
}

/// The `user_data` of the operations of the transfer to `destination` (one at a time).
fn operation_tag(destination: ConnectionId) -> u64 {
    user_data(Kind::Splice, destination.index(), destination.generation)
}

fn early_end() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the source ended before the spliced length",
    )
}
