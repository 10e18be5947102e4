//! Moving a connection's bytes on the readiness driver: a receive performed when the
//! socket may be readable (into a pooled buffer taken only then), output written when it
//! may be writable — gathered memory in one `sendmsg` (up to [`GATHER`] slices, `MSG_MORE`
//! while more follows), file ranges with `sendfile` once their pages are resident
//! (`read_ahead.rs`) — and the dispatch of a connection's
//! readiness event to whichever of these (or a splice, or a finished connect) waits for it.
//!
//! The hints: a receive that fills less than it asked for clears `MAY_READ` (the stream was
//! drained; new data raises a new edge) — unless the poller reported the peer's end of
//! stream, which raises no further edge and must still be read — a write the socket took only in part clears
//! `MAY_WRITE`; an event sets them again.

use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;

use super::read_ahead::FileWindow;
use super::{CONNECTING, MAY_READ, MAY_WRITE, RECV_ARMED, ReadinessDriver, WRITE_WAITING};
use crate::driver::{Chunk, Completion, ConnectionId};
use crate::poller::{Event, Poller};
use crate::pools::output_pools::GATHER;
use crate::sys;

/// Largest single `sendfile` request (the kernel caps one call near 2 GiB anyway).
const SENDFILE_MAX: u64 = 1 << 30;

/// How far [`ReadinessDriver::write_queue`] got.
pub(super) enum Written {
    /// The queue is empty.
    All,
    /// The socket took less than offered: wait until it is writable.
    SocketFull,
    /// The front file chunk's next window is being read ahead: its report continues.
    WaitingForDisk,
}

impl<P: Poller> ReadinessDriver<P> {
    pub(super) fn receive_now(&mut self, id: ConnectionId) {
        let Some(connection) = self.connections.get_mut(id.index()) else {
            return;
        };
        let mut buffer = self.buffers.take();
        let spare = buffer.spare_mut();
        let limit = match connection.recv_limit as usize {
            0 => spare.len(),
            limit => limit.min(spare.len()),
        };
        self.counters.recv_calls += 1;
        let result = sys::recv(connection.fd, &mut spare[..limit]);
        if !matches!(&result, Err(error) if error.kind() == io::ErrorKind::WouldBlock) {
            // One-shot: the bound applies to the receive that gets an answer.
            connection.recv_limit = 0;
        }
        match result {
            Ok(0) => {
                self.buffers.give_back(buffer);
                connection.flags &= !RECV_ARMED;
                self.completions
                    .push_back(Completion::PeerClosed { connection: id });
            }
            Ok(received) => {
                // Less than asked for: the stream was drained (a bounded receive that got
                // all it asked for may have left bytes behind).
                if received < limit && !connection.hung_up {
                    connection.flags &= !MAY_READ;
                }
                connection.flags &= !RECV_ARMED;
                buffer.advance_filled(received);
                self.counters.bytes_received += received as u64;
                self.completions.push_back(Completion::Received {
                    connection: id,
                    buffer,
                });
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                self.buffers.give_back(buffer);
                self.counters.would_block += 1;
                connection.flags &= !MAY_READ;
            }
            Err(error) => {
                self.buffers.give_back(buffer);
                connection.flags &= !RECV_ARMED;
                self.completions.push_back(Completion::Failed {
                    connection: id,
                    error,
                });
            }
        }
        self.update_interest(id);
    }

    /// Writes the output queue until it is empty, the socket is full, or a file's next
    /// window is being read ahead (see [`Written`]).
    pub(super) fn write_queue(&mut self, slot: usize) -> io::Result<Written> {
        loop {
            let Some(connection) = self.connections.get_mut(slot) else {
                return Ok(Written::All);
            };
            let fd = connection.fd;
            let progress = connection.front_progress;
            let Some(front) = connection.output.front() else {
                return Ok(Written::All);
            };
            let (written, requested) = if let Chunk::File {
                file,
                offset,
                length,
            } = front
            {
                let (file_fd, offset, length) = (file.as_raw_fd(), *offset, *length);
                let allowed = match self.file_window(slot, file_fd, offset, length, progress) {
                    FileWindow::Send(allowed) => allowed,
                    FileWindow::Reading => return Ok(Written::WaitingForDisk),
                };
                let requested = allowed.min(SENDFILE_MAX);
                let mut position = offset + progress;
                self.counters.sendfile_calls += 1;
                let result = sys::sendfile(fd, file_fd, &mut position, requested as usize);
                match result {
                    Ok(0) => {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "file shrank while being sent",
                        ));
                    }
                    Ok(sent) => (sent as u64, requested),
                    Err(error) => return self.would_block_or(error),
                }
            } else {
                let mut slices = [IoSlice::new(&[]); GATHER];
                let mut gathered = 0;
                let mut requested = 0u64;
                let mut skip = progress as usize;
                for chunk in connection.output.iter().take(GATHER) {
                    let bytes: &[u8] = match chunk {
                        Chunk::Owned(bytes) => bytes,
                        Chunk::Shared(bytes) => bytes,
                        Chunk::File { .. } => break,
                    };
                    slices[gathered] = IoSlice::new(&bytes[skip..]);
                    requested += (bytes.len() - skip) as u64;
                    skip = 0;
                    gathered += 1;
                }
                let more = connection.output.len() > gathered || self.more_follows;
                self.counters.send_calls += 1;
                match sys::send_vectored(fd, &slices[..gathered], more) {
                    Ok(sent) => (sent as u64, requested),
                    Err(error) => return self.would_block_or(error),
                }
            };
            self.counters.bytes_sent += written;
            self.consume_output(slot, written);
            if written < requested {
                return Ok(Written::SocketFull);
            }
        }
    }

    fn would_block_or(&mut self, error: io::Error) -> io::Result<Written> {
        if error.kind() == io::ErrorKind::WouldBlock {
            self.counters.would_block += 1;
            Ok(Written::SocketFull)
        } else {
            Err(error)
        }
    }

    /// Drops `written` bytes from the front of the output queue.
    fn consume_output(&mut self, slot: usize, written: u64) {
        if let Some(connection) = self.connections.get_mut(slot) {
            let progress = &mut connection.front_progress;
            self.output_pools
                .consume(&mut connection.output, progress, written);
            if connection.front_progress == 0 {
                // The front chunk was finished: what was known resident was about it.
                connection.file_ready = 0;
            }
        }
    }

    /// Drops the output queue (a failed write, a close). A read-ahead in flight keeps its
    /// `FILE_READING` flag until its report arrives, so no second one starts meanwhile.
    pub(super) fn drop_output(&mut self, slot: usize) {
        let Some(connection) = self.connections.get_mut(slot) else {
            return;
        };
        connection.front_progress = 0;
        connection.file_ready = 0;
        connection.flags &= !WRITE_WAITING;
        for chunk in connection.output.drain(..) {
            self.output_pools.recycle(chunk);
        }
    }

    pub(super) fn continue_write(&mut self, id: ConnectionId) {
        match self.write_queue(id.index()) {
            Ok(Written::All) => {
                if let Some(connection) = self.connections.get_mut(id.index()) {
                    connection.flags &= !WRITE_WAITING;
                }
                self.completions
                    .push_back(Completion::Sent { connection: id });
            }
            Ok(Written::SocketFull) => {
                if let Some(connection) = self.connections.get_mut(id.index()) {
                    connection.flags &= !MAY_WRITE;
                }
            }
            // The read-ahead's report continues the write.
            Ok(Written::WaitingForDisk) => {}
            Err(error) => {
                self.drop_output(id.index());
                self.completions.push_back(Completion::Failed {
                    connection: id,
                    error,
                });
            }
        }
        self.update_interest(id);
    }

    pub(super) fn on_connection_event(&mut self, event: Event) {
        let Some(connection) = self.connections.get_mut(event.token) else {
            return;
        };
        let id = ConnectionId {
            slot: event.token as u32,
            generation: connection.generation,
        };
        if connection.flags & CONNECTING != 0 {
            connection.flags &= !CONNECTING;
            match sys::take_socket_error(connection.fd) {
                Ok(None) => self
                    .completions
                    .push_back(Completion::Connected { connection: id }),
                Ok(Some(error)) | Err(error) => {
                    connection.flags &= !(RECV_ARMED | WRITE_WAITING);
                    self.completions.push_back(Completion::Failed {
                        connection: id,
                        error,
                    });
                    self.update_interest(id);
                    return;
                }
            }
        }
        if event.readable {
            connection.flags |= MAY_READ;
        }
        if event.hangup {
            connection.hung_up = true;
        }
        if event.writable {
            connection.flags |= MAY_WRITE;
        }
        let flags = connection.flags;
        if event.readable && flags & RECV_ARMED != 0 {
            self.receive_now(id);
        }
        if event.writable && flags & WRITE_WAITING != 0 {
            self.continue_write(id);
        }
        self.splice_ready(id.slot);
    }
}
