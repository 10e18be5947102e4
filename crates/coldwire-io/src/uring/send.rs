//! Sending on the io_uring driver: a flush becomes one `SENDMSG` of up to `GATHER`
//! gathered slices, or for a file a piece spliced file → pipe → socket (see
//! [`super::output`], which builds the submissions); the completion drops what was written
//! from the queue and starts the next send, or reports `Sent`/`Failed`. On a light loop
//! turn a small memory flush is written at once with a `sendmsg` of its own instead
//! ([`UringDriver::try_send_now`]; the submission's completion would end the next wait at
//! once). A lingering close's `shutdown(SHUT_WR)` is a system call of its own, after the
//! output. A connection closed while its send is in flight finishes here once the send
//! completes.

use std::io::{self, IoSlice};

use super::connection::{
    CLOSING, READ_IN_FLIGHT, SEND_IN_FLIGHT, SEND_PROMISED, SHUTDOWN_PENDING, SPLICE_FROM,
    SPLICE_TO, SendState, WRITE_WAITING,
};
use super::driver::{PROMISE_LIMIT, UringDriver};
use super::output;
use crate::driver::{Chunk, Completion, ConnectionId, Flush};
use crate::pools::output_pools::{GATHER, MAX_POOLED};
use crate::sys;

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
            self.shutdown_now(slot);
        }
    }

    /// Shuts the connection's sending side down (FIN after what was written): a
    /// `shutdown(2)` of its own. Not an io_uring `SHUTDOWN`: io_uring always runs that in an
    /// io-wq worker (a thread hand-off, and a completion that ends the loop's next wait at
    /// once), which also looks the descriptor *number* up only when it runs, so the socket
    /// had to stay open until its completion. An error (the peer reset the connection)
    /// shows on the receive.
    pub(super) fn shutdown_now(&mut self, slot: usize) {
        let Some(connection) = self.connections.get(slot) else {
            return;
        };
        self.counters.shutdown_calls += 1;
        let _ = sys::shutdown_write(connection.fd);
    }

    /// Writes the whole queued output of the connection in `slot` at once with a `sendmsg`
    /// of its own, on a light turn (`UringDriver::inline_budget`): a small response the
    /// socket takes whole would otherwise complete while the next wait is submitted and end
    /// that wait at once — a loop turn for nothing. Only memory output of at most
    /// [`PROMISE_LIMIT`] bytes in [`GATHER`] slices, with nothing in flight (the caller
    /// checks sends and connects; splices are checked here). Returns the flush's outcome
    /// when this settled it (`Done`, or `Failed` with the queue dropped); `None` when what
    /// is left (all of it, if the socket was full) goes through the ring.
    pub(super) fn try_send_now(&mut self, slot: usize) -> Option<Flush> {
        if self.inline_budget == 0 {
            return None;
        }
        let connection = self.connections.get_mut(slot)?;
        if connection.flags & (SPLICE_FROM | SPLICE_TO) != 0
            || connection.output.len() > GATHER
            || connection.queued_bytes() > PROMISE_LIMIT
        {
            return None;
        }
        let mut slices = [IoSlice::new(&[]); GATHER];
        let mut gathered = 0;
        let mut requested = 0;
        let mut skip = connection.front_progress as usize;
        for chunk in &connection.output {
            let bytes: &[u8] = match chunk {
                Chunk::Owned(bytes) => bytes,
                Chunk::Shared(bytes) => bytes,
                Chunk::File { .. } => return None,
            };
            let rest = &bytes[skip.min(bytes.len())..];
            slices[gathered] = IoSlice::new(rest);
            requested += rest.len();
            skip = 0;
            gathered += 1;
        }
        self.inline_budget -= 1;
        self.counters.send_calls += 1;
        match sys::send_vectored_now(connection.fd, &slices[..gathered]) {
            Ok(sent) => {
                self.counters.bytes_sent += sent as u64;
                self.consume_output(slot, sent as u64);
                (sent == requested).then_some(Flush::Done)
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                self.counters.would_block += 1;
                None
            }
            Err(error) => {
                self.drop_output(slot);
                Some(Flush::Failed(error))
            }
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
