//! Sending on the io_uring driver: a flush becomes one `SENDMSG` of up to `GATHER`
//! gathered slices, or for a file a piece spliced file → pipe → socket (see
//! [`super::output`], which builds the submissions); the completion drops what was written
//! from the queue and starts the next send, or reports `Sent`/`Failed`. A lingering close's
//! `SHUTDOWN` waits for the output before it. A connection closed while its send is in
//! flight finishes here once the send completes.

use std::io;

use io_uring::{opcode, types};

use super::connection::{
    CLOSING, Kind, READ_IN_FLIGHT, SEND_IN_FLIGHT, SEND_PROMISED, SHUTDOWN_IN_FLIGHT,
    SHUTDOWN_PENDING, SendState, WRITE_WAITING, user_data,
};
use super::driver::UringDriver;
use super::output;
use crate::driver::{Chunk, Completion, ConnectionId};
use crate::pools::output_pools::MAX_POOLED;

impl UringDriver {
    pub(super) fn start_send(&mut self, slot: usize) {
        let Some(connection) = self.connections.get_mut(slot) else {
            return;
        };
        let mut state = match connection.send.take() {
            Some(state) => state,
            None => self.send_pool.pop().unwrap_or_else(SendState::new),
        };
        if state.pipe.is_none() && matches!(connection.output.front(), Some(Chunk::File { .. })) {
            // Without a pipe (descriptors exhausted) the piece is read and sent instead.
            state.pipe = self.splices.pipes().take().ok();
        }
        let (read, send) = output::prepare(connection, &mut state, slot);
        connection.send = Some(state);
        if let Some(read) = read {
            // SAFETY: the read's buffer is the connection's boxed send buffer and its file is
            // the front output chunk; neither is released before the read's completion
            // (`READ_IN_FLIGHT` keeps the connection's slot and output).
            unsafe { self.push(&read) };
        }
        // SAFETY: the msghdr and iovecs live in the connection's boxed `SendState`, the
        // bytes in its front output chunks; all stay until the send's completion
        // (`SEND_IN_FLIGHT` keeps the slot, and the output is dropped only after it).
        unsafe { self.push(&send) };
    }

    pub(super) fn on_read(&mut self, slot: usize, generation: u32, result: i32) {
        let Some(connection) = self.occupant(slot, generation) else {
            return;
        };
        connection.flags &= !READ_IN_FLIGHT;
        if let Some(state) = connection.send.as_mut() {
            let read = u64::try_from(result).unwrap_or(0);
            state.file_read = Some(read);
            state.buffered = (read > 0).then_some((state.read_start, read));
        }
        if result < 0 {
            // The linked send is cancelled; remember why.
            if let Some(state) = connection.send.as_mut() {
                state.file_read = None;
            }
            connection
                .pending_end
                .get_or_insert(Err(io::Error::from_raw_os_error(-result)));
        }
    }

    pub(super) fn on_send(&mut self, slot: usize, generation: u32, result: i32) {
        let Some(connection) = self.occupant(slot, generation) else {
            return;
        };
        connection.flags &= !SEND_IN_FLIGHT;
        let Some(state) = connection.send.take() else {
            return;
        };
        let short_read = state.is_file_piece
            && result == -libc::ECANCELED
            && state.file_read.is_some_and(|read| read < state.requested);
        let (written, error) = if result >= 0 {
            (result as u64, None)
        } else if short_read && state.file_read.is_some_and(|read| read > 0) {
            // A short read cut the link: send again from where we are.
            (0, None)
        } else if short_read {
            (
                0,
                Some(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file shrank while being sent",
                )),
            )
        } else {
            (0, Some(io::Error::from_raw_os_error(-result)))
        };
        let keep_buffer = state.is_file_piece && written < state.requested;
        if keep_buffer {
            connection.send = Some(state);
        } else {
            // The whole piece left: its pipe is empty.
            self.recycle_send_state(state, true);
        }
        self.counters.bytes_sent += written;
        self.consume_output(slot, written);
        let Some(connection) = self.connections.get_mut(slot) else {
            return;
        };
        if connection.flags & CLOSING != 0 {
            if connection.pinned() {
                return;
            }
            // A promised send that went out in part continues; anything else ends here.
            if error.is_none()
                && connection.flags & SEND_PROMISED != 0
                && !connection.output.is_empty()
            {
                self.start_send(slot);
            } else {
                self.finish_close(slot);
            }
            return;
        }
        let id = ConnectionId {
            slot: slot as u32,
            generation,
        };
        if let Some(error) = error {
            connection.flags &= !(WRITE_WAITING | SEND_PROMISED | SHUTDOWN_PENDING);
            self.drop_output(slot);
            self.completions.push_back(Completion::Failed {
                connection: id,
                error,
            });
            return;
        }
        if !connection.output.is_empty() {
            connection.flags &= !SEND_PROMISED;
            self.start_send(slot);
            return;
        }
        connection.flags &= !SEND_PROMISED;
        if connection.flags & WRITE_WAITING != 0 {
            connection.flags &= !WRITE_WAITING;
            self.completions
                .push_back(Completion::Sent { connection: id });
        }
        if connection.flags & SHUTDOWN_PENDING != 0 {
            connection.flags &= !SHUTDOWN_PENDING;
            self.push_shutdown(slot);
        }
    }

    /// Queues `shutdown(SHUT_WR)` for the connection in `slot`; it pins the descriptor
    /// until its completion ([`SHUTDOWN_IN_FLIGHT`]).
    pub(super) fn push_shutdown(&mut self, slot: usize) {
        let Some(connection) = self.connections.get_mut(slot) else {
            return;
        };
        if connection.flags & SHUTDOWN_IN_FLIGHT != 0 {
            return;
        }
        connection.flags |= SHUTDOWN_IN_FLIGHT;
        let entry = opcode::Shutdown::new(types::Fd(connection.fd), libc::SHUT_WR)
            .build()
            .user_data(user_data(Kind::Shutdown, slot, connection.generation));
        self.push_plain(entry);
    }

    /// A shutdown finished: a connection closed meanwhile can now let go of its socket.
    pub(super) fn on_shutdown(&mut self, slot: usize, generation: u32) {
        let Some(connection) = self.occupant(slot, generation) else {
            return;
        };
        connection.flags &= !SHUTDOWN_IN_FLIGHT;
        if connection.flags & CLOSING != 0 && !connection.pinned() {
            self.finish_close(slot);
        }
    }

    /// Pools a send state no operation uses any more; its pipe goes back to the pipe pool
    /// (closed unless `pipe_empty`), and what it buffered is forgotten — it described the
    /// previous user's file.
    pub(super) fn recycle_send_state(&mut self, mut state: Box<SendState>, pipe_empty: bool) {
        state.buffered = None;
        state.file_read = None;
        if let Some(pipe) = state.pipe.take() {
            self.splices.pipes().give_back(pipe, pipe_empty);
        }
        if self.send_pool.len() < MAX_POOLED {
            self.send_pool.push(state);
        }
    }

    /// Drops `written` bytes from the front of the output queue.
    fn consume_output(&mut self, slot: usize, written: u64) {
        if let Some(connection) = self.connections.get_mut(slot) {
            let progress = &mut connection.front_progress;
            self.output_pools
                .consume(&mut connection.output, progress, written);
        }
    }

    /// Drops queued output; only called when no send points into it.
    pub(super) fn drop_output(&mut self, slot: usize) {
        let Some(connection) = self.connections.get_mut(slot) else {
            return;
        };
        debug_assert!(!connection.memory_in_flight());
        connection.front_progress = 0;
        for chunk in connection.output.drain(..) {
            self.output_pools.recycle(chunk);
        }
    }
}
