//! The [`Driver`] contract implemented by [`UringDriver`] on top of its mechanics
//! (`driver.rs`, `accept.rs`, `receive.rs`, `send.rs`, `close.rs`).

use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::fd::IntoRawFd;
use std::time::{Duration, Instant};

use io_uring::{opcode, types};

use super::accept::DEFAULT_QUEUE_LIMIT;
use super::connection::{
    CLOSING, CONNECTING, Kind, RECV_ACTIVE, RECV_ARMED, RECV_THROTTLED, RECV_TRIED, SEND_PROMISED,
    SHUTDOWN_PENDING, WRITE_WAITING, user_data,
};
use super::driver::{ListenerState, PROMISE_LIMIT, UringDriver, ZOMBIE_LINGER, is_current};
use super::output::bytes_acknowledged;
use crate::core::completions::next_current;
use crate::core::counters::LoopCounters;
use crate::core::waker::Waker;
use crate::driver::{
    Chunk, Completion, ConnectionId, ConnectionLimitReached, Driver, Flush, ListenerId,
};
use crate::pools::buffer_pool::Buffer;
use crate::sys;

impl Driver for UringDriver {
    fn backend_name(&self) -> &'static str {
        UringDriver::NAME
    }

    fn listen(&mut self, listener: TcpListener) -> io::Result<ListenerId> {
        // A blocking listener: the multishot accept waits in the kernel.
        listener.set_nonblocking(false)?;
        let fd = listener.into_raw_fd();
        let index = self.listeners.len();
        self.listeners.push(Some(ListenerState {
            fd,
            multishot: false,
            multishot_stopping: false,
            single_shots: 0,
            queue_limit: sys::listen_queue_limit(fd).unwrap_or(DEFAULT_QUEUE_LIMIT),
        }));
        if !self.accepting.is_paused() {
            self.arm_accept(index);
        }
        Ok(ListenerId(index as u32))
    }

    fn connect(&mut self, address: SocketAddr) -> io::Result<ConnectionId> {
        self.connect_socket(address, None)
    }

    fn connect_from(&mut self, address: SocketAddr, source: IpAddr) -> io::Result<ConnectionId> {
        self.connect_socket(address, Some(source))
    }

    fn close_listener(&mut self, listener: ListenerId) {
        let index = listener.0 as usize;
        let Some(state) = self.listeners.get_mut(index).and_then(Option::take) else {
            return;
        };
        if state.armed() {
            self.cancel_listener_accepts(index, &state);
            // The accept holds the listening socket: let go of it before closing.
            if let Err(error) = self.ring.submit_now() {
                self.fatal.get_or_insert(error);
            }
        }
        sys::close(state.fd);
        let (closed, kept): (Vec<_>, Vec<_>) = self
            .backlog
            .drain(..)
            .partition(|&(owner, _)| owner == index);
        self.backlog.extend(kept);
        for (_, fd) in closed {
            self.counters.close_calls += 1;
            sys::close(fd);
        }
    }

    fn recv(&mut self, id: ConnectionId) {
        if !self.is_current(id) {
            return;
        }
        let slot = id.index();
        let Some(connection) = self.connections.get_mut(slot) else {
            return;
        };
        if connection.flags & RECV_ARMED != 0 {
            return;
        }
        if let Some(buffer) = connection.stash.take() {
            self.completions.push_back(Completion::Received {
                connection: id,
                buffer,
            });
        } else if let Some(end) = connection.pending_end.take() {
            self.completions.push_back(match end {
                Ok(()) => Completion::PeerClosed { connection: id },
                Err(error) => Completion::Failed {
                    connection: id,
                    error,
                },
            });
        } else if !self.try_recv_now(slot, id)
            && let Some(connection) = self.connections.get_mut(slot)
        {
            connection.flags |= RECV_ARMED;
            connection.flags &= !RECV_THROTTLED;
            if connection.flags & (RECV_ACTIVE | CONNECTING) == 0 {
                self.arm_recv(slot);
            }
        }
    }

    /// A completion driver has no gap between a drained stream and its end: the armed
    /// receive reports both.
    fn recv_eager(&mut self, id: ConnectionId) {
        self.recv(id);
    }

    /// Not passed on: the `SENDMSG` carries `MSG_MORE` only for output queued behind it,
    /// not for a splice that follows, so this flushes as [`Driver::flush`] does (the head
    /// may leave in a segment of its own).
    fn flush_more(&mut self, id: ConnectionId) -> Flush {
        self.flush(id)
    }

    type Splicer = Self;

    fn splicer(&mut self) -> io::Result<&mut Self> {
        Ok(self)
    }

    fn send(&mut self, id: ConnectionId, chunk: Chunk) {
        if chunk.is_empty() || !self.is_current(id) {
            return;
        }
        if let Some(connection) = self.connections.get_mut(id.index()) {
            connection.handed += chunk.len();
            self.output_pools.enqueue(&mut connection.output, chunk);
        }
    }

    fn flush(&mut self, id: ConnectionId) -> Flush {
        if !self.is_current(id) {
            return Flush::Failed(io::Error::from_raw_os_error(libc::EBADF));
        }
        let slot = id.index();
        let Some(connection) = self.connections.get_mut(slot) else {
            return Flush::Failed(io::Error::from_raw_os_error(libc::EBADF));
        };
        if connection.output.is_empty() {
            return Flush::Done;
        }
        // Everything queued was already promised (an earlier flush said `Done`): nothing
        // new to write. Saying `Pending` here would make the server wait for a `Sent` and
        // replace its deadline (a lingering close then waited for the write timeout
        // instead of the linger deadline).
        let promised = connection.flags & SEND_PROMISED != 0
            && connection.send.as_ref().is_some_and(|state| {
                !state.is_file_piece && state.chunks_in_flight == connection.output.len()
            });
        if promised {
            return Flush::Done;
        }
        if connection.flags & WRITE_WAITING != 0 {
            return Flush::Pending;
        }
        if connection.memory_in_flight() || connection.flags & CONNECTING != 0 {
            connection.flags |= WRITE_WAITING;
            return Flush::Pending;
        }
        if let Some(flush) = self.try_send_now(slot) {
            return flush;
        }
        self.start_send(slot);
        let Some(connection) = self.connections.get_mut(slot) else {
            return Flush::Pending;
        };
        let whole = connection.send.as_ref().is_some_and(|state| {
            !state.is_file_piece && state.chunks_in_flight == connection.output.len()
        });
        if whole && connection.queued_bytes() <= PROMISE_LIMIT {
            connection.flags |= SEND_PROMISED;
            Flush::Done
        } else {
            connection.flags |= WRITE_WAITING;
            Flush::Pending
        }
    }

    fn queued_bytes(&self, id: ConnectionId) -> u64 {
        self.connections
            .get(id.index())
            .filter(|connection| connection.generation == id.generation)
            .map_or(0, |connection| connection.queued_bytes())
            .saturating_add(self.splice_backlog(id))
    }

    /// Everything handed to the connection for output minus what the peer acknowledged
    /// (`TCP_INFO`): a splice or linked file piece completes only when all of it is in the
    /// socket, so the queue alone would not show a slow reader's progress. Falls back to
    /// queue + `SIOCOUTQ` where `TCP_INFO` is unavailable.
    fn unsent_bytes(&self, id: ConnectionId) -> u64 {
        let Some(connection) = self
            .connections
            .get(id.index())
            .filter(|connection| connection.generation == id.generation)
        else {
            return 0;
        };
        let untaken = self.splice_untaken(id);
        match bytes_acknowledged(connection.fd) {
            Some(acknowledged) => connection
                .handed
                .saturating_sub(acknowledged)
                .saturating_add(untaken),
            None => {
                let kernel = sys::unacknowledged_bytes(connection.fd).unwrap_or(0);
                self.queued_bytes(id).saturating_add(kernel)
            }
        }
    }

    fn shutdown_write(&mut self, id: ConnectionId) {
        if !self.is_current(id) {
            return;
        }
        let Some(connection) = self.connections.get_mut(id.index()) else {
            return;
        };
        if connection.output.is_empty() && !connection.memory_in_flight() {
            self.shutdown_now(id.index());
        } else {
            connection.flags |= SHUTDOWN_PENDING;
        }
    }

    fn close(&mut self, id: ConnectionId) {
        if !self.is_current(id) {
            return;
        }
        let slot = id.index();
        self.counters.open_connections -= 1;
        // Before CLOSING is set: a transfer dropped here must not close this connection
        // under the code below.
        self.splice_closed(slot);
        let Some(connection) = self.connections.get_mut(slot) else {
            return;
        };
        connection.flags |= CLOSING;
        connection.flags &= !(RECV_ARMED | WRITE_WAITING);
        connection.pending_end = None;
        if let Some(stash) = connection.stash.take() {
            self.buffers.give_back(stash);
        }
        if !connection.pinned() {
            self.finish_close(slot);
            return;
        }
        // Output beyond the send in flight will never be written.
        let in_flight = if connection.memory_in_flight() {
            connection
                .send
                .as_ref()
                .map_or(0, |state| state.chunks_in_flight)
        } else {
            0
        };
        while connection.output.len() > in_flight {
            if let Some(chunk) = connection.output.pop_back() {
                self.output_pools.recycle(chunk);
            }
        }
        let promised = connection.flags & SEND_PROMISED != 0;
        self.timers.cancel(&mut connection.timer);
        if promised {
            // The server was told this output was written: let it finish, within bounds.
            self.timers
                .set(&mut connection.timer, id, self.now + ZOMBIE_LINGER);
        } else {
            let flags = connection.flags;
            self.cancel_operations(slot, id.generation, flags);
        }
    }

    fn set_timer(&mut self, id: ConnectionId, deadline: Instant) {
        if !self.is_current(id) {
            return;
        }
        if let Some(connection) = self.connections.get_mut(id.index()) {
            self.timers.set(&mut connection.timer, id, deadline);
        }
    }

    fn cancel_timer(&mut self, id: ConnectionId) {
        if !self.is_current(id) {
            return;
        }
        if let Some(connection) = self.connections.get_mut(id.index()) {
            self.timers.cancel(&mut connection.timer);
        }
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.turn(timeout)
    }

    fn next_completion(&mut self) -> Option<Completion> {
        let connections = &self.connections;
        let is_current = |id| is_current(connections, id);
        next_current(&mut self.completions, &mut self.buffers, is_current)
    }

    fn now(&self) -> Instant {
        self.now
    }

    fn recycle(&mut self, buffer: Buffer) {
        self.buffers.give_back(buffer);
    }

    fn take_vec(&mut self) -> Vec<u8> {
        self.output_pools.take_vec()
    }

    fn counters(&self) -> LoopCounters {
        let mut counters = self.counters;
        let ring = self.ring.counters();
        counters.wait_calls = ring.wait_calls;
        counters.uring_submissions = ring.submissions;
        counters.uring_completions = ring.completions;
        counters.uring_enter_calls = ring.enter_calls;
        counters.uring_sq_full_enters = ring.sq_full_enters;
        counters.uring_batched_waits = ring.batched_waits;
        counters.uring_cq_overflows = ring.cq_overflows;
        counters.buffers_in_use = self.buffers.in_use() as u64;
        counters.closing_connections =
            (self.connections.len() as u64).saturating_sub(counters.open_connections);
        counters.accept_backlog = self.backlog.len() as u64;
        counters.uring_ring_buffers = u64::from(self.receive_ring.circulating());
        counters
    }

    fn adjust_active(&mut self, delta: i64) {
        self.counters.active_connections = self
            .counters
            .active_connections
            .saturating_add_signed(delta);
    }

    fn waker(&self) -> Waker {
        self.waker.clone()
    }

    fn has_file_ring(&self) -> bool {
        true
    }

    fn submit_file(
        &mut self,
        work: Box<dyn crate::driver::FileWork>,
    ) -> Result<(), Box<dyn crate::driver::FileWork>> {
        self.submit_file_work(work);
        Ok(())
    }
}

/// The connect shared by [`Driver::connect`] and [`Driver::connect_from`].
impl UringDriver {
    /// Opens a blocking socket (io_uring parks an operation on a blocking socket until it
    /// can proceed, where a non-blocking one may fail with `EAGAIN`) and submits an
    /// `IORING_OP_CONNECT` for it: no `connect(2)`, no poll for writability and no
    /// `SO_ERROR` read afterwards — the completion carries the outcome. The address lives
    /// in the connection ([`super::connection::Connection::connect_address`]) until that
    /// completion; a connection closed meanwhile waits for it (`CONNECTING` pins it).
    /// Running out of descriptors fails here, at once (`EMFILE`), as the connection limit
    /// does.
    fn connect_socket(
        &mut self,
        address: SocketAddr,
        source: Option<IpAddr>,
    ) -> io::Result<ConnectionId> {
        if self.connections.len() >= self.config.max_connections {
            return Err(ConnectionLimitReached::error(self.config.max_connections));
        }
        let fd = sys::stream_socket(address, source, false)?.into_raw_fd();
        let id = self
            .open_connection(fd, CONNECTING | RECV_TRIED)
            .ok_or_else(|| io::Error::other("no free connection slot"))?;
        self.counters.uring_connects += 1;
        let Some(connection) = self.connections.get_mut(id.index()) else {
            return Err(io::Error::other("no free connection slot"));
        };
        let target = connection
            .connect_address
            .insert(Box::new(socket2::SockAddr::from(address)));
        let entry = opcode::Connect::new(types::Fd(fd), target.as_ptr().cast(), target.len())
            .build()
            .user_data(user_data(Kind::Connect, id.index(), id.generation));
        // SAFETY: the address is boxed in the connection, which keeps it until the
        // connect's completion: `CONNECTING` pins the slot (`Connection::pinned`), so a
        // close before then leaves the connection in place until `on_connect`.
        unsafe { self.push(&entry) };
        Ok(id)
    }
}
