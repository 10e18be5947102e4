//! The [`Driver`] contract implemented by [`ReadinessDriver`] on top of its mechanics
//! (`mod.rs`: the loop turn; `accept.rs`; `stream.rs`): each call checks the connection id
//! against the slot's generation, so a call for a closed connection does nothing.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::fd::IntoRawFd;
use std::time::{Duration, Instant};

use super::stream::Written;
use super::{
    CONNECTING, LISTENER_TOKEN_BASE, ListenerState, MAY_READ, MAY_WRITE, RECV_ARMED,
    ReadinessDriver, WRITE_WAITING, is_current,
};
use crate::core::completions::next_current;
use crate::core::counters::LoopCounters;
use crate::core::generations::current;
use crate::core::waker::Waker;
use crate::driver::{
    Chunk, Completion, ConnectionId, ConnectionLimitReached, Driver, Flush, ListenerId,
};
use crate::poller::{Interest, Poller};
use crate::pools::buffer_pool::Buffer;
use crate::sys;

impl<P: Poller> Driver for ReadinessDriver<P> {
    fn backend_name(&self) -> &'static str {
        P::NAME
    }

    fn listen(&mut self, listener: TcpListener) -> io::Result<ListenerId> {
        listener.set_nonblocking(true)?;
        let fd = listener.into_raw_fd();
        let index = self.listeners.len();
        let interest = if self.accepting.is_paused() {
            Interest::NONE
        } else {
            Interest::READABLE
        };
        if let Err(error) = self
            .poller
            .register(fd, LISTENER_TOKEN_BASE + index, interest)
        {
            sys::close(fd);
            return Err(error);
        }
        self.listeners.push(Some(ListenerState { fd }));
        // Connections may already be queued: try at once (edge-triggered pollers would not
        // report them).
        self.listeners_ready.push(index as u32);
        Ok(ListenerId(index as u32))
    }

    fn connect(&mut self, address: SocketAddr) -> io::Result<ConnectionId> {
        self.connect_socket(address, None)
    }

    fn connect_from(&mut self, address: SocketAddr, source: IpAddr) -> io::Result<ConnectionId> {
        self.connect_socket(address, Some(source))
    }

    fn close_listener(&mut self, listener: ListenerId) {
        if let Some(state) = self
            .listeners
            .get_mut(listener.0 as usize)
            .and_then(Option::take)
        {
            let _ = self.poller.deregister(state.fd);
            sys::close(state.fd);
        }
        self.listeners_ready.retain(|&index| index != listener.0);
    }

    fn recv(&mut self, id: ConnectionId) {
        let Some(connection) = current(&mut self.connections, id) else {
            return;
        };
        if connection.flags & RECV_ARMED != 0 {
            return;
        }
        connection.flags |= RECV_ARMED;
        if connection.flags & MAY_READ != 0 {
            self.receive_now(id);
        } else {
            self.update_interest(id);
        }
    }

    fn recv_eager(&mut self, id: ConnectionId) {
        if let Some(connection) = current(&mut self.connections, id) {
            connection.flags |= MAY_READ;
        }
        self.recv(id);
    }

    fn flush_more(&mut self, id: ConnectionId) -> Flush {
        self.more_follows = true;
        let flushed = self.flush(id);
        self.more_follows = false;
        flushed
    }

    type Splicer = Self;

    fn splicer(&mut self) -> io::Result<&mut Self> {
        Ok(self)
    }

    fn send(&mut self, id: ConnectionId, chunk: Chunk) {
        if chunk.is_empty() {
            return;
        }
        if let Some(connection) = current(&mut self.connections, id) {
            self.output_pools.enqueue(&mut connection.output, chunk);
        }
    }

    fn flush(&mut self, id: ConnectionId) -> Flush {
        let Some(connection) = current(&mut self.connections, id) else {
            return Flush::Failed(io::Error::from_raw_os_error(libc::EBADF));
        };
        if connection.output.is_empty() {
            return Flush::Done;
        }
        if connection.flags & WRITE_WAITING != 0 {
            return Flush::Pending;
        }
        if connection.flags & MAY_WRITE == 0 {
            connection.flags |= WRITE_WAITING;
            self.update_interest(id);
            return Flush::Pending;
        }
        match self.write_queue(id.index()) {
            Ok(Written::All) => Flush::Done,
            Ok(Written::SocketFull) => {
                if let Some(connection) = self.connections.get_mut(id.index()) {
                    connection.flags = (connection.flags & !MAY_WRITE) | WRITE_WAITING;
                }
                self.update_interest(id);
                Flush::Pending
            }
            Ok(Written::WaitingForDisk) => {
                // The socket may still be writable: only the read-ahead's report continues.
                if let Some(connection) = self.connections.get_mut(id.index()) {
                    connection.flags |= WRITE_WAITING;
                }
                self.update_interest(id);
                Flush::Pending
            }
            Err(error) => {
                self.drop_output(id.index());
                Flush::Failed(error)
            }
        }
    }

    fn queued_bytes(&self, id: ConnectionId) -> u64 {
        self.connections
            .get(id.index())
            .filter(|connection| connection.generation == id.generation)
            .map_or(0, |connection| {
                connection.output.iter().map(Chunk::len).sum::<u64>() - connection.front_progress
            })
            .saturating_add(self.splice_backlog(id))
    }

    fn unsent_bytes(&self, id: ConnectionId) -> u64 {
        let kernel = self
            .connections
            .get(id.index())
            .filter(|connection| connection.generation == id.generation)
            .and_then(|connection| sys::unacknowledged_bytes(connection.fd).ok())
            .unwrap_or(0);
        self.queued_bytes(id).saturating_add(kernel)
    }

    fn shutdown_write(&mut self, id: ConnectionId) {
        let Some(connection) = current(&mut self.connections, id) else {
            return;
        };
        let fd = connection.fd;
        self.counters.shutdown_calls += 1;
        // An error means the peer is already gone; the next receive reports it.
        let _ = sys::shutdown_write(fd);
    }

    fn close(&mut self, id: ConnectionId) {
        if !self.is_current(id) {
            return;
        }
        self.splice_closed(id.slot);
        self.drop_output(id.index());
        let Some(mut connection) = self.connections.remove(id.index()) else {
            return;
        };
        self.timers.cancel(&mut connection.timer);
        self.output_pools.keep_queue(&mut connection.output);
        let _ = if P::FORGETS_ON_CLOSE {
            self.poller.forget(connection.fd)
        } else {
            self.poller.deregister(connection.fd)
        };
        self.counters.close_calls += 1;
        sys::close(connection.fd);
        self.counters.open_connections -= 1;
        self.slot_freed();
    }

    fn set_timer(&mut self, id: ConnectionId, deadline: Instant) {
        if let Some(connection) = current(&mut self.connections, id) {
            self.timers.set(&mut connection.timer, id, deadline);
        }
    }

    fn cancel_timer(&mut self, id: ConnectionId) {
        if let Some(connection) = current(&mut self.connections, id) {
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
        counters.absorb_poller(self.poller.counters());
        counters.buffers_in_use = self.buffers.in_use() as u64;
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
        false
    }

    fn submit_file(
        &mut self,
        work: Box<dyn crate::driver::FileWork>,
    ) -> Result<(), Box<dyn crate::driver::FileWork>> {
        Err(work)
    }
}

/// The connect shared by [`Driver::connect`] and [`Driver::connect_from`].
impl<P: Poller> ReadinessDriver<P> {
    fn connect_socket(
        &mut self,
        address: SocketAddr,
        source: Option<IpAddr>,
    ) -> io::Result<ConnectionId> {
        if self.connections.len() >= self.config.max_connections {
            return Err(ConnectionLimitReached::error(self.config.max_connections));
        }
        self.counters.connect_calls += 1;
        let (fd, established) = sys::connect_from(address, source)?;
        let (flags, interest) = match (established, P::EDGE_TRIGGERED) {
            (_, true) => (
                if established { MAY_WRITE } else { CONNECTING },
                Interest::BOTH,
            ),
            (true, false) => (MAY_WRITE, Interest::NONE),
            (false, false) => (CONNECTING, Interest::WRITABLE),
        };
        let id = self.open_connection(fd, flags, interest)?;
        if established {
            self.completions
                .push_back(Completion::Connected { connection: id });
        }
        Ok(id)
    }
}
