//! Socket-to-socket transfers through pooled pipes with `splice(2)` — bytes never enter
//! user space — and, for a cache, a copy kept with `tee(2)` (the KeepCopy of seed 002).
//! A child module of `readiness`, so it drives the same connections, hints and poller.
//!
//! A transfer moves `length` bytes (or everything until the source's end of stream) from
//! one connection's socket to another's: splice source → pipe, splice pipe → destination;
//! with a copy, splice source → copy pipe, tee copy pipe → pipe, read the copy pipe. It behaves like output queued on the destination:
//! it completes with `Sent { destination }`, or `Failed { destination }` (an early end of
//! the source is `UnexpectedEof`).
//!
//! Invariants:
//! - while a transfer runs, nobody receives from its source or queues output on its
//!   destination (the `Splice::splice` contract), so the readiness hints of both sockets
//!   belong to it; `SPLICE_READ` / `SPLICE_WRITE` tell level-triggered pollers what it
//!   waits for;
//! - with a copy, the source is spliced into the copy pipe, and only when it is empty;
//!   `tee` duplicates from the start of a pipe, so the copy pipe's bytes are appended to the
//!   main pipe with `tee` and exactly the bytes it took are read out for the copy. The main
//!   pipe may still hold bytes waiting for the destination meanwhile (the old order —
//!   source into the main pipe, then `tee` out of it — had to wait for it to drain first);
//! - a pipe goes back to the pool only when empty (it would leak bytes into the next
//!   transfer); closing either connection ends its transfers.

use std::io;

use super::{MAY_READ, MAY_WRITE, ReadinessDriver, SPLICE_READ, SPLICE_WRITE};
use crate::core::generations::current;
use crate::core::splice_table::{SpliceTable, Transfer, TransferState, UNTIL_END, check_call};
use crate::driver::{ConnectionId, Driver, Splice};
use crate::poller::Poller;
use crate::pools::pipe_pool::{Pipe, read_into, splice, tee};

/// What `splice_backlog` starts from for an unbounded transfer (far above any real body,
/// far below overflow when added to queued bytes).
const UNBOUNDED_BACKLOG: u64 = 1 << 62;

/// What a readiness transfer keeps besides the shared [`crate::core::splice_table::Transfer`].
pub(super) struct Pumping {
    /// Bytes in the copy pipe not yet duplicated into `pipe` (see `pump_once`).
    copy_pending: usize,
    source_ended: bool,
    /// Bytes written to the destination so far (also the activity idle timeouts look at).
    sent: u64,
}

/// The running transfers of one readiness driver.
pub(super) type Splices = SpliceTable<Pumping>;

impl TransferState for Pumping {
    fn copy_pipe_empty(&self) -> bool {
        self.copy_pending == 0
    }
}

enum Pumped {
    Waiting,
    Done,
    Failed(io::Error),
}

impl<P: Poller> Splice for ReadinessDriver<P> {
    const HONOURS_RECEIVE_BOUND: bool = true;

    fn recv_at_most(&mut self, id: ConnectionId, max_bytes: usize) {
        // Also when a receive is already armed (an idle pooled origin connection keeps one
        // armed to notice a close): the bound applies to the next receive that gets data,
        // which is then the response head.
        if let Some(connection) = current(&mut self.connections, id) {
            connection.recv_limit = u32::try_from(max_bytes.max(1)).unwrap_or(u32::MAX);
        }
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
        let source_open = current(&mut self.connections, source).is_some();
        let destination_queued =
            current(&mut self.connections, destination).map(|target| !target.output.is_empty());
        check_call(source, destination, source_open, destination_queued)?;
        let pipes = self
            .splices
            .take_pipes(source, destination, length, keep_copy)?;
        let state = Pumping {
            copy_pending: 0,
            source_ended: false,
            sent: 0,
        };
        let transfer = Transfer::new(source, destination, length, pipes, state);
        self.splices.insert(transfer);
        if length == 0 {
            self.finish_transfer(destination.slot, None);
            return Ok(());
        }
        self.pump(destination.slot);
        Ok(())
    }

    fn splice_delivered(&self, destination: ConnectionId) -> u64 {
        self.splices
            .running(destination)
            .map_or(0, |transfer| transfer.state.sent)
            + self.kernel_body_delivered(destination)
    }

    fn take_splice_copy(&mut self, destination: ConnectionId) -> Option<Vec<u8>> {
        self.splices.take_copy(destination)
    }

    fn splice_in_kernel(
        &mut self,
        source: ConnectionId,
        destination: ConnectionId,
        length: u64,
    ) -> io::Result<()> {
        self.start_kernel_body(source, destination, length)
    }

    /// The connection's descriptor; reads happen only when the server arms a receive.
    fn lend_socket(&mut self, id: ConnectionId) -> io::Result<std::os::fd::RawFd> {
        current(&mut self.connections, id)
            .map(|connection| connection.fd)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))
    }
}

impl<P: Poller> ReadinessDriver<P> {
    /// A readiness event arrived for `slot`: advance the transfers it takes part in.
    pub(super) fn splice_ready(&mut self, slot: u32) {
        if self.splices.is_idle() {
            return;
        }
        for destination in self.splices.involving(slot).into_iter().flatten() {
            self.pump(destination);
        }
    }

    /// `slot` is closing: its transfers end without a completion (the server closes both
    /// sides of a failed exchange itself).
    pub(super) fn splice_closed(&mut self, slot: u32) {
        self.kernel_body_closed(slot);
        if self.splices.is_idle() {
            return;
        }
        for destination in self.splices.involving(slot).into_iter().flatten() {
            self.drop_transfer(destination);
        }
        self.splices.forget_copies(slot);
    }

    /// Bytes a running transfer still has to deliver to `destination` (in its pipe and
    /// not yet read from the source), so that `queued_bytes` / `unsent_bytes` show a
    /// spliced response's progress like a queued one's. An unbounded transfer reports a
    /// large figure that falls by every byte written (`UNBOUNDED_BACKLOG − sent`), so a
    /// stalled-write check still sees its progress.
    pub(super) fn splice_backlog(&self, destination: ConnectionId) -> u64 {
        let in_kernel = self.kernel_body_backlog(destination);
        in_kernel
            + self.splices.running(destination).map_or(0, |transfer| {
                if transfer.remaining == UNTIL_END {
                    UNBOUNDED_BACKLOG.saturating_sub(transfer.state.sent)
                } else {
                    transfer
                        .remaining
                        .saturating_add((transfer.in_pipe + transfer.state.copy_pending) as u64)
                }
            })
    }

    /// Removes a transfer, releasing its pipes; both connections' hints are their own again.
    fn drop_transfer(&mut self, destination_slot: u32) {
        let Some((source, destination)) = self.splices.remove(destination_slot) else {
            return;
        };
        for (id, flag) in [(source, SPLICE_READ), (destination, SPLICE_WRITE)] {
            if let Some(connection) = current(&mut self.connections, id) {
                connection.flags &= !flag;
            }
            self.update_interest(id);
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

    fn pump(&mut self, destination_slot: u32) {
        let outcome = self.pump_once(destination_slot);
        match outcome {
            Pumped::Waiting => {
                let Some(transfer) = self.splices.transfers.get(&destination_slot) else {
                    return;
                };
                let (source, destination) = (transfer.source, transfer.destination);
                let wants_read = !transfer.state.source_ended
                    && transfer.remaining > 0
                    && transfer.in_pipe < transfer.pipe.capacity
                    && transfer.state.copy_pending == 0;
                let wants_write = transfer.in_pipe > 0;
                if let Some(connection) = current(&mut self.connections, source) {
                    connection.flags = (connection.flags & !SPLICE_READ)
                        | if wants_read { SPLICE_READ } else { 0 };
                }
                if let Some(connection) = current(&mut self.connections, destination) {
                    connection.flags = (connection.flags & !SPLICE_WRITE)
                        | if wants_write { SPLICE_WRITE } else { 0 };
                }
                self.update_interest(source);
                self.update_interest(destination);
            }
            Pumped::Done => self.finish_transfer(destination_slot, None),
            Pumped::Failed(error) => self.finish_transfer(destination_slot, Some(error)),
        }
    }

    fn pump_once(&mut self, destination_slot: u32) -> Pumped {
        let Some(transfer) = self.splices.transfers.get_mut(&destination_slot) else {
            return Pumped::Waiting;
        };
        let (Some(source), Some(destination)) = (
            self.connections
                .get(transfer.source.index())
                .filter(|connection| connection.generation == transfer.source.generation)
                .map(|connection| (connection.fd, connection.flags)),
            self.connections
                .get(transfer.destination.index())
                .filter(|connection| connection.generation == transfer.destination.generation)
                .map(|connection| (connection.fd, connection.flags)),
        ) else {
            return Pumped::Failed(io::Error::from(io::ErrorKind::NotConnected));
        };
        let (source_fd, mut source_flags) = source;
        let (destination_fd, mut destination_flags) = destination;
        let result = loop {
            let mut progressed = false;
            // With a copy, source bytes land in the copy pipe first; `tee` appends them to
            // the main pipe and exactly the bytes it took are read out, so the copy pipe's
            // start is always the first byte not yet duplicated.
            if transfer.state.copy_pending > 0
                && let Some((copy_pipe, bytes)) = transfer.copy.as_mut()
            {
                let room = transfer.pipe.capacity.saturating_sub(transfer.in_pipe);
                if room > 0 {
                    match tee(
                        copy_pipe.read,
                        transfer.pipe.write,
                        transfer.state.copy_pending.min(room),
                    ) {
                        Ok(0) => {}
                        Ok(teed) => {
                            if let Err(error) = read_exactly(copy_pipe, bytes, teed) {
                                break Err(error);
                            }
                            progressed = true;
                            transfer.state.copy_pending -= teed;
                            transfer.in_pipe += teed;
                        }
                        // The main pipe is out of slots: it drains to the destination first.
                        Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                        Err(error) => break Err(error),
                    }
                }
            }
            let (target, room) = match transfer.copy.as_ref() {
                Some((copy_pipe, _)) if transfer.state.copy_pending == 0 => (
                    copy_pipe.write,
                    transfer.pipe.capacity.saturating_sub(transfer.in_pipe),
                ),
                Some(_) => (transfer.pipe.write, 0),
                None => (
                    transfer.pipe.write,
                    transfer.pipe.capacity.saturating_sub(transfer.in_pipe),
                ),
            };
            if !transfer.state.source_ended
                && transfer.remaining > 0
                && room > 0
                && source_flags & MAY_READ != 0
            {
                let want = usize::try_from(transfer.remaining).map_or(room, |left| left.min(room));
                self.counters.recv_calls += 1;
                match splice(source_fd, target, want, false) {
                    Ok(0) => {
                        transfer.state.source_ended = true;
                        if transfer.remaining != UNTIL_END {
                            break Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "the source ended before the spliced length",
                            ));
                        }
                    }
                    Ok(moved) => {
                        progressed = true;
                        self.counters.bytes_received += moved as u64;
                        if transfer.remaining != UNTIL_END {
                            transfer.remaining -= moved as u64;
                        }
                        if transfer.copy.is_some() {
                            transfer.state.copy_pending += moved;
                        } else {
                            transfer.in_pipe += moved;
                        }
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        self.counters.would_block += 1;
                        source_flags &= !MAY_READ;
                    }
                    Err(error) => break Err(error),
                }
            }
            if transfer.in_pipe > 0 && destination_flags & MAY_WRITE != 0 {
                // `MSG_MORE` only while a bounded transfer (a body) has bytes to come: on an
                // unbounded one (a tunnel) a short write, such as a TLS ClientHello, would
                // wait for TCP's 200 ms cork timer.
                let more = transfer.remaining != UNTIL_END
                    && transfer.remaining > 0
                    && !transfer.state.source_ended;
                self.counters.send_calls += 1;
                match splice(transfer.pipe.read, destination_fd, transfer.in_pipe, more) {
                    Ok(moved) => {
                        progressed |= moved > 0;
                        self.counters.bytes_sent += moved as u64;
                        transfer.state.sent += moved as u64;
                        transfer.in_pipe -= moved;
                    }
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        self.counters.would_block += 1;
                        destination_flags &= !MAY_WRITE;
                    }
                    Err(error) => break Err(error),
                }
            }
            if (transfer.remaining == 0 || transfer.state.source_ended)
                && transfer.in_pipe == 0
                && transfer.state.copy_pending == 0
            {
                break Ok(true);
            }
            if !progressed {
                break Ok(false);
            }
        };
        let (source_id, destination_id) = (transfer.source, transfer.destination);
        if let Some(connection) = current(&mut self.connections, source_id) {
            connection.flags = (connection.flags & !MAY_READ) | (source_flags & MAY_READ);
        }
        if let Some(connection) = current(&mut self.connections, destination_id) {
            connection.flags = (connection.flags & !MAY_WRITE) | (destination_flags & MAY_WRITE);
        }
        match result {
            Ok(true) => Pumped::Done,
            Ok(false) => Pumped::Waiting,
            Err(error) => Pumped::Failed(error),
        }
    }
}

/// Reads exactly `count` bytes (just duplicated by `tee`) from the copy pipe into `bytes`.
fn read_exactly(copy_pipe: &Pipe, bytes: &mut Vec<u8>, count: usize) -> io::Result<()> {
    bytes.reserve(count);
    let mut left = count;
    while left > 0 {
        let spare = bytes.spare_capacity_mut();
        let read = read_into(copy_pipe.read, &mut spare[..left])?;
        if read == 0 {
            return Err(io::Error::other("the copy pipe held less than was teed"));
        }
        // SAFETY: `read_into` initialised the first `read` bytes of the spare capacity.
        unsafe { bytes.set_len(bytes.len() + read) };
        left -= read;
    }
    Ok(())
}
