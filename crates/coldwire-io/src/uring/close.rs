//! Closing on the io_uring driver: a connection's armed receive is ended by `shutdown(2)`
//! (FIN sent at once; the receive completes with the end of stream), its other operations
//! are cancelled, each by its `user_data` (never by descriptor: that walks every armed
//! request of the ring, see [`UringDriver::cancel_operations`]), and its socket closed with
//! a `CLOSE` — the socket is released only when no operation holds it; a socket that no
//! operation holds (its receive never armed, or ended) is closed with a `close(2)` at once.
//! The slot is freed only when no operation points into its memory (see `driver.rs`). Also
//! the driver's own teardown, which lets file work (`file.rs`) finish before it cancels the
//! rest.

use std::time::{Duration, Instant};

use io_uring::types::CancelBuilder;
use io_uring::{opcode, types};

use super::connection::{
    CONNECTING, Kind, READ_IN_FLIGHT, RECV_ACTIVE, SEND_IN_FLIGHT, decode, user_data,
};
use super::driver::UringDriver;
use crate::sys;

impl UringDriver {
    /// Cancels the connection's own operations that `flags` says are in flight, each by
    /// its `user_data` (kind, slot, generation): the multishot receive, the connect poll,
    /// the send and its linked file read. Never by descriptor: the kernel matches a
    /// cancellation by descriptor (`IORING_ASYNC_CANCEL_FD`) against every armed request
    /// of the ring — every connection's receive — and with `ALL` walks them more than once,
    /// so a close cost grew with the number of open connections (issue 19). A cancellation
    /// by `user_data` looks in one bucket of the kernel's cancel hash. It also finds a file
    /// piece's splice still queued in io-wq, which has no file yet and so no descriptor to
    /// match.
    pub(super) fn cancel_operations(&mut self, slot: usize, generation: u32, flags: u16) {
        let armed = [
            (RECV_ACTIVE, Kind::Recv),
            (CONNECTING, Kind::Connect),
            (READ_IN_FLIGHT, Kind::Read),
            (SEND_IN_FLIGHT, Kind::Send),
        ];
        for (flag, kind) in armed {
            if flags & flag == 0 {
                continue;
            }
            self.counters.uring_cancellations += 1;
            self.push_quiet(opcode::AsyncCancel::new(user_data(kind, slot, generation)).build());
        }
    }

    /// Frees the slot and closes the socket; no operation points to the slot's memory.
    pub(super) fn finish_close(&mut self, slot: usize) {
        let Some(mut connection) = self.connections.remove(slot) else {
            return;
        };
        debug_assert!(!connection.pinned());
        self.timers.cancel(&mut connection.timer);
        if let Some(stash) = connection.stash.take() {
            self.buffers.give_back(stash);
        }
        if let Some(state) = connection.send.take() {
            let pipe_empty = state.buffered.is_none();
            self.recycle_send_state(state, pipe_empty);
        }
        for chunk in connection.output.drain(..) {
            self.output_pools.recycle(chunk);
        }
        self.output_pools.keep_queue(&mut connection.output);
        // The armed receive holds the socket: the `CLOSE` below releases it only once the
        // receive has ended. `shutdown(2)` ends it without a cancellation — the receive
        // completes with the end of stream — and sends the FIN now; a cancellation would
        // walk a bucket of the kernel's cancel hash (256 buckets at most), so its cost grew
        // with the open connections (`io_poll_find`, 7 % of the proxy at 12,000
        // connections, issue 19). Where shutdown fails (the peer reset it), cancel.
        let armed = connection.flags & (RECV_ACTIVE | CONNECTING);
        let fd = connection.fd;
        if armed == 0 {
            // Nothing holds the socket (no receive was armed, or it ended: a client read
            // once at once, `try_recv_now`, and closed after its answer): a `close(2)` of
            // its own releases it now, where a `CLOSE` would need an enter of its own.
            self.counters.close_calls += 1;
            sys::close(fd);
            self.slot_freed();
            return;
        }
        let mut released = false;
        if armed == RECV_ACTIVE {
            self.counters.shutdown_calls += 1;
            released = sys::shutdown_both(fd).is_ok();
        }
        if !released {
            self.cancel_operations(slot, connection.generation, armed);
        }
        self.push_quiet(opcode::Close::new(types::Fd(fd)).build());
        // Without the shutdown, the socket is released (FIN sent) when nothing holds it any
        // more: now, not at the next loop turn.
        if !released && let Err(error) = self.ring.submit_now() {
            self.fatal.get_or_insert(error);
        }
        self.slot_freed();
    }
}

impl UringDriver {
    /// Waits (bounded) for the file work in flight before the teardown cancels everything:
    /// a segment write cut short would lose the records its store waits for. Work still in
    /// flight after the deadline is leaked rather than freed under the kernel.
    fn finish_file_work(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut reaped = Vec::new();
        while self.files.busy() && Instant::now() < deadline {
            if self
                .ring
                .submit_and_wait(Some(Duration::from_millis(10)))
                .is_err()
            {
                break;
            }
            reaped.clear();
            self.ring.drain_into(&mut reaped);
            for entry in &reaped {
                self.handle(entry);
            }
        }
        if self.files.busy() {
            std::mem::forget(std::mem::take(&mut self.files));
        }
    }
}

impl Drop for UringDriver {
    /// Cancels every operation and waits (bounded) until no send or file read still points
    /// into connection memory, then closes the descriptors. The ring is dropped before the
    /// receive buffer ring by field order.
    fn drop(&mut self) {
        self.finish_file_work();
        let entry = opcode::AsyncCancel2::new(CancelBuilder::any())
            .build()
            .user_data(user_data(Kind::Ignored, 0, 0));
        self.push_plain(entry);
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut reaped = Vec::new();
        loop {
            let busy = self.splices.busy()
                || self
                    .connections
                    .iter()
                    .any(|(_, connection)| connection.memory_in_flight());
            if !busy || Instant::now() >= deadline {
                break;
            }
            if self
                .ring
                .submit_and_wait(Some(Duration::from_millis(10)))
                .is_err()
            {
                break;
            }
            reaped.clear();
            self.ring.drain_into(&mut reaped);
            for entry in &reaped {
                if let Some((Kind::Splice, slot, _)) = decode(entry.user_data()) {
                    self.splices.settle(slot);
                }
                if let Some((kind @ (Kind::Send | Kind::Read), slot, generation)) =
                    decode(entry.user_data())
                    && let Some(connection) = self.connections.get_mut(slot)
                    && connection.generation == generation
                {
                    connection.flags &= !match kind {
                        Kind::Send => SEND_IN_FLIGHT,
                        _ => READ_IN_FLIGHT,
                    };
                }
            }
        }
        if !self.splices.busy() {
            self.splices.close_all();
        }
        let open: Vec<_> = self
            .connections
            .iter_mut()
            .filter(|(_, connection)| !connection.memory_in_flight())
            .map(|(_, connection)| {
                if let Some(pipe) = connection.send.as_mut().and_then(|state| state.pipe.take()) {
                    sys::close(pipe.read);
                    sys::close(pipe.write);
                }
                connection.fd
            })
            .collect();
        for fd in open {
            sys::close(fd);
        }
        // Connections whose memory the kernel may still use are leaked on purpose rather
        // than freed under it (only if cancellation did not finish within the deadline).
        let connections = std::mem::take(&mut self.connections);
        let stuck = connections
            .iter()
            .any(|(_, connection)| connection.memory_in_flight());
        if stuck {
            std::mem::forget(connections);
        }
        for listener in self.listeners.iter().flatten() {
            sys::close(listener.fd);
        }
        for &(_, fd) in &self.backlog {
            sys::close(fd);
        }
    }
}
