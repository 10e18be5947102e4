//! Receiving on the io_uring driver: one multishot `RECV` per connection, armed at its
//! first receive and left armed, selecting buffers from the shared provided-buffer ring —
//! so an idle connection owns no receive buffer (on a light turn an accepted client's first
//! receive is a `recv` of its own instead, [`UringDriver::try_recv_now`], and the `RECV` is
//! armed at the next). Each completion's bytes are copied into a pooled [`Buffer`] and the
//! ring buffer is given back at once (`docs/backends.md` says why the copy is worth it).
//! Data the server has not asked for yet goes into the connection's stash; past
//! [`STASH_LIMIT`] the receive is cancelled until the server reads again. An end of stream
//! or an error met while no receive is asked for is kept for the next one.

use std::collections::VecDeque;
use std::io;

use io_uring::{cqueue, opcode, types};

use super::connection::{
    CLOSING, CONNECTING, Connection, Kind, RECV_ACTIVE, RECV_ARMED, RECV_THROTTLED, RECV_TRIED,
    SPLICE_FROM, user_data,
};
use super::driver::{STASH_LIMIT, UringDriver};
use crate::driver::{Completion, ConnectionId};
use crate::pools::buffer_pool::Buffer;
use crate::sys;

impl UringDriver {
    pub(super) fn arm_recv(&mut self, slot: usize) {
        let group = self.receive_ring.group();
        let Some(connection) = self.connections.get_mut(slot) else {
            return;
        };
        connection.flags |= RECV_ACTIVE | RECV_TRIED;
        // A single-shot receive selects a ring buffer as well and ends after one
        // completion; `on_recv` re-arms it only while the server asks for data.
        let entry = if self.multishot_recv {
            opcode::RecvMulti::new(types::Fd(connection.fd), group).build()
        } else {
            opcode::Recv::new(
                types::Fd(connection.fd),
                std::ptr::null_mut(),
                self.receive_ring.buffer_size() as u32,
            )
            .buf_group(group)
            .build()
            .flags(io_uring::squeue::Flags::BUFFER_SELECT)
        }
        .user_data(user_data(Kind::Recv, slot, connection.generation));
        self.push_plain(entry);
    }

    /// The first receive of a connection that has never been read (an accepted client, see
    /// [`RECV_TRIED`]), tried at once on a light turn with a `recv` of its own
    /// ([`super::driver::INLINE_OPERATIONS`]): a new client's request is usually there when
    /// its connection is accepted, and the armed receive would complete as the next wait
    /// submits it and end that wait at once. Returns whether the receive was settled (data,
    /// end of stream or an error queued as the completion); `false` (the socket is empty, or
    /// no attempt was made) leaves the caller to arm the receive.
    pub(super) fn try_recv_now(&mut self, slot: usize, id: ConnectionId) -> bool {
        if self.inline_budget == 0 {
            return false;
        }
        let Some(connection) = self.connections.get_mut(slot) else {
            return false;
        };
        if connection.flags & (RECV_TRIED | RECV_ACTIVE | CONNECTING | SPLICE_FROM) != 0 {
            return false;
        }
        connection.flags |= RECV_TRIED;
        self.inline_budget -= 1;
        self.counters.recv_calls += 1;
        let mut buffer = self.buffers.take();
        let completion = match sys::recv_now(connection.fd, buffer.spare_mut()) {
            Ok(0) => Completion::PeerClosed { connection: id },
            Ok(received) => {
                buffer.advance_filled(received);
                self.counters.bytes_received += received as u64;
                self.completions.push_back(Completion::Received {
                    connection: id,
                    buffer,
                });
                return true;
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                self.counters.would_block += 1;
                self.buffers.give_back(buffer);
                return false;
            }
            Err(error) => Completion::Failed {
                connection: id,
                error,
            },
        };
        self.buffers.give_back(buffer);
        self.completions.push_back(completion);
        true
    }

    pub(super) fn on_recv(&mut self, slot: usize, generation: u32, result: i32, flags: u32) {
        let buffer_id = cqueue::buffer_select(flags);
        let more = cqueue::more(flags);
        let received = usize::try_from(result).unwrap_or(0);
        let mut throttle = false;
        if let Some(connection) = self
            .connections
            .get_mut(slot)
            .filter(|connection| connection.generation == generation)
            .filter(|connection| connection.flags & CLOSING == 0)
        {
            if !more {
                connection.flags &= !RECV_ACTIVE;
            }
            let id = ConnectionId {
                slot: slot as u32,
                generation,
            };
            if received > 0
                && let Some(buffer_id) = buffer_id
            {
                let data = self.receive_ring.data(buffer_id, received);
                self.counters.bytes_received += data.len() as u64;
                if connection.flags & RECV_ARMED != 0 {
                    connection.flags &= !RECV_ARMED;
                    let mut buffer = self.buffers.take();
                    let length = data.len().min(buffer.remaining_capacity());
                    buffer.spare_mut()[..length].copy_from_slice(&data[..length]);
                    buffer.advance_filled(length);
                    self.completions.push_back(Completion::Received {
                        connection: id,
                        buffer,
                    });
                } else {
                    let stash = connection.stash.get_or_insert_with(|| self.buffers.take());
                    if stash.remaining_capacity() < data.len() {
                        stash.compact();
                    }
                    if stash.remaining_capacity() < data.len() {
                        let mut larger = Buffer::new(stash.filled_len() + data.len());
                        larger.spare_mut()[..stash.filled_len()].copy_from_slice(stash.filled());
                        larger.advance_filled(stash.filled_len());
                        let previous = std::mem::replace(stash, larger);
                        self.buffers.give_back(previous);
                    }
                    stash.spare_mut()[..data.len()].copy_from_slice(data);
                    stash.advance_filled(data.len());
                    throttle = stash.filled_len() >= STASH_LIMIT
                        && connection.flags & (RECV_ACTIVE | RECV_THROTTLED) == RECV_ACTIVE;
                    if throttle {
                        connection.flags |= RECV_THROTTLED;
                    }
                }
            } else if result == 0 {
                let end = Ok(());
                Self::deliver_end(&mut self.completions, connection, id, end);
            } else if result == -libc::ENOBUFS {
                self.counters.uring_recv_no_buffers += 1;
                self.receive_ring.exhausted();
            } else if result < 0 && result != -libc::ECANCELED {
                let end = Err(io::Error::from_raw_os_error(-result));
                Self::deliver_end(&mut self.completions, connection, id, end);
            }
            let rearm = connection.flags & (RECV_ACTIVE | RECV_ARMED) == RECV_ARMED
                && connection.pending_end.is_none()
                && result != 0;
            if throttle {
                self.push_quiet(
                    opcode::AsyncCancel::new(user_data(Kind::Recv, slot, generation)).build(),
                );
            } else if rearm {
                self.arm_recv(slot);
            }
        }
        if let Some(buffer_id) = buffer_id {
            self.receive_ring.give_back(buffer_id);
        }
    }

    /// End of stream or an error: to the server if it awaits a receive, else kept.
    fn deliver_end(
        completions: &mut VecDeque<Completion>,
        connection: &mut Connection,
        id: ConnectionId,
        end: io::Result<()>,
    ) {
        if connection.flags & RECV_ARMED == 0 {
            connection.pending_end.get_or_insert(end);
            return;
        }
        connection.flags &= !RECV_ARMED;
        completions.push_back(match end {
            Ok(()) => Completion::PeerClosed { connection: id },
            Err(error) => Completion::Failed {
                connection: id,
                error,
            },
        });
    }
}
