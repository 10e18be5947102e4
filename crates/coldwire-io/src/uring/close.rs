//! Closing on the io_uring driver: a connection's operations are cancelled (by descriptor,
//! and its sends and file reads also by `user_data`, since a request still queued in io-wq
//! has no file yet) and its socket closed with a `CLOSE` submitted at once — the socket is
//! released, FIN sent, only when no operation holds it. The slot is freed only when no
//! operation points into its memory (see `driver.rs`). Also the driver's own teardown.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use io_uring::types::CancelBuilder;
use io_uring::{opcode, types};

use super::connection::{
    CONNECTING, Kind, READ_IN_FLIGHT, RECV_ACTIVE, SEND_IN_FLIGHT, decode, user_data,
};
use super::driver::UringDriver;
use crate::sys;

impl UringDriver {
    /// Cancels everything in flight on `fd` (multishot receive, sends, polls).
    pub(super) fn cancel_all(&mut self, fd: RawFd) {
        let entry = opcode::AsyncCancel2::new(CancelBuilder::fd(types::Fd(fd)).all())
            .build()
            .user_data(user_data(Kind::Ignored, 0, 0));
        self.push_plain(entry);
    }

    /// Cancels the connection's send and file read by `user_data`: a file piece's splices
    /// run in io-wq, and one still queued there has no file yet, so [`Self::cancel_all`]
    /// (by descriptor) would miss it and it could then block on a peer that never reads.
    pub(super) fn cancel_sends(&mut self, slot: usize, generation: u32) {
        for kind in [Kind::Read, Kind::Send] {
            let entry = opcode::AsyncCancel::new(user_data(kind, slot, generation))
                .build()
                .user_data(user_data(Kind::Ignored, 0, 0));
            self.push_plain(entry);
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
        if connection.flags & (RECV_ACTIVE | CONNECTING) != 0 {
            self.cancel_all(connection.fd);
        }
        let entry = opcode::Close::new(types::Fd(connection.fd))
            .build()
            .user_data(user_data(Kind::Ignored, 0, 0));
        self.push_plain(entry);
        // The socket is released (FIN sent) when nothing holds it any more: now, not at
        // the next loop turn.
        if let Err(error) = self.ring.submit_now() {
            self.fatal.get_or_insert(error);
        }
        self.slot_freed();
    }
}

impl Drop for UringDriver {
    /// Cancels every operation and waits (bounded) until no send or file read still points
    /// into connection memory, then closes the descriptors. The ring is dropped before the
    /// receive buffer ring by field order.
    fn drop(&mut self) {
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
