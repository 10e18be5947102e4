//! `ReadinessDriver<P>`: the completion [`Driver`] over a readiness [`Poller`].
//!
//! It performs each operation as a non-blocking system call and waits for readiness only
//! after `EAGAIN`: every connection carries two hints, "may be readable" and "may be
//! writable". A fresh connection starts with both set (try first). A receive that fills
//! less than its buffer clears the readable hint, because the stream was drained at that
//! moment and any later data raises a new edge — so the common keep-alive request costs one
//! `recv` and one `sendmsg`, with no `EAGAIN` round trip.
//!
//! With an edge-triggered poller every connection is registered once for both directions
//! and never modified. With a level-triggered poller the registered interest follows what
//! the connection waits for (an armed receive; output blocked on a full socket), changed in
//! user space — select and poll keep their interest sets in user memory.
//!
//! Memory: a connection's whole state here is one `Connection` (~72 bytes) in the slot
//! table plus its timer node; buffers are taken from the pool only when data arrives, and
//! the output queue's allocation returns to a pool once drained.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::net::TcpListener;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::time::{Duration, Instant};

use crate::core::completions::{next_current, until_earliest};
use crate::core::counters::LoopCounters;
use crate::core::generations::Generations;
use crate::core::slot_table::SlotTable;
use crate::core::timer_wheel::{TimerHandle, TimerWheel};
use crate::core::waker::Waker;
use crate::driver::{Chunk, Completion, ConnectionId, Driver, DriverConfig, Flush, ListenerId};
use crate::poller::{Event, Interest, Poller};
use crate::pools::buffer_pool::{Buffer, BufferPool};
use crate::pools::output_pools::OutputPools;
use crate::sys;

mod splice;

const LISTENER_TOKEN_BASE: usize = 1 << 40;
const WAKER_TOKEN: usize = usize::MAX;
/// Slices gathered into one `sendmsg` (100 pipelined responses fit in two calls).
const GATHER: usize = 64;
/// Largest single `sendfile` request (the kernel caps one call near 2 GiB anyway).
const SENDFILE_MAX: u64 = 1 << 30;

const RECV_ARMED: u8 = 1;
const MAY_READ: u8 = 2;
const MAY_WRITE: u8 = 4;
const WRITE_WAITING: u8 = 8;
const CONNECTING: u8 = 16;
/// A splice waits to read this socket / to write to it (see `splice.rs`).
const SPLICE_READ: u8 = 32;
const SPLICE_WRITE: u8 = 64;

struct Connection {
    fd: RawFd,
    generation: u32,
    flags: u8,
    /// Interest currently registered (level-triggered pollers only).
    interest: Interest,
    timer: Option<TimerHandle>,
    output: VecDeque<Chunk>,
    /// Bytes of the front chunk already written.
    front_progress: u64,
    /// Most bytes the next receive takes (0: the whole buffer); see `recv_eager_at_most`.
    recv_limit: u32,
}

struct ListenerState {
    fd: RawFd,
}

/// The readiness-based driver, generic over the poller so the loop is monomorphised.
pub struct ReadinessDriver<P: Poller> {
    poller: P,
    config: DriverConfig,
    connections: SlotTable<Connection>,
    /// Generation of the next connection per slot.
    generations: Generations,
    listeners: Vec<Option<ListenerState>>,
    /// Listeners to accept from without waiting (batch cut short, or accepting resumed).
    listeners_ready: Vec<u32>,
    accept_paused_until: Option<Instant>,
    accept_at_limit: bool,
    timers: TimerWheel<ConnectionId>,
    buffers: BufferPool,
    output_pools: OutputPools,
    completions: VecDeque<Completion>,
    events: Vec<Event>,
    expired: Vec<ConnectionId>,
    counters: LoopCounters,
    waker: Waker,
    now: Instant,
    splices: splice::Splices,
    /// Set during `flush_more`: the last `sendmsg` of the flush carries `MSG_MORE`.
    more_follows: bool,
}

/// The connection `id` names, if it is still the slot's current occupant.
fn current(connections: &mut SlotTable<Connection>, id: ConnectionId) -> Option<&mut Connection> {
    connections
        .get_mut(id.index())
        .filter(|connection| connection.generation == id.generation)
}

/// Whether `id` still names the slot's current occupant.
fn is_current(connections: &SlotTable<Connection>, id: ConnectionId) -> bool {
    connections
        .get(id.index())
        .is_some_and(|connection| connection.generation == id.generation)
}

fn is_descriptor_exhaustion(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

impl<P: Poller> ReadinessDriver<P> {
    /// Creates a driver with its own poller and waker.
    pub fn new(config: DriverConfig) -> io::Result<Self> {
        let mut poller = P::new()?;
        let waker = Waker::new()?;
        poller.register(waker.raw_fd(), WAKER_TOKEN, Interest::READABLE)?;
        let now = Instant::now();
        Ok(ReadinessDriver {
            poller,
            timers: TimerWheel::new(config.timer_tick, config.timer_slots, now),
            buffers: BufferPool::new(config.buffer_size, config.max_free_buffers),
            config,
            connections: SlotTable::new(),
            generations: Generations::default(),
            listeners: Vec::new(),
            listeners_ready: Vec::new(),
            accept_paused_until: None,
            accept_at_limit: false,
            output_pools: OutputPools::default(),
            completions: VecDeque::new(),
            events: Vec::with_capacity(1024),
            expired: Vec::new(),
            counters: LoopCounters::default(),
            waker,
            now,
            splices: splice::Splices::new(),
            more_follows: false,
        })
    }

    fn connection_mut(&mut self, id: ConnectionId) -> Option<&mut Connection> {
        current(&mut self.connections, id)
    }

    fn is_current(&self, id: ConnectionId) -> bool {
        is_current(&self.connections, id)
    }

    /// Level-triggered pollers: registers exactly what the connection waits for.
    fn update_interest(&mut self, id: ConnectionId) {
        if P::EDGE_TRIGGERED {
            return;
        }
        let Some(connection) = self.connections.get_mut(id.index()) else {
            return;
        };
        let wanted = Interest {
            readable: connection.flags & (RECV_ARMED | SPLICE_READ) != 0,
            writable: connection.flags & (WRITE_WAITING | CONNECTING | SPLICE_WRITE) != 0,
        };
        if wanted != connection.interest {
            connection.interest = wanted;
            // A failure here means the descriptor is already gone; the next operation on it
            // reports the error.
            let _ = self.poller.modify(connection.fd, id.index(), wanted);
        }
    }

    fn receive_now(&mut self, id: ConnectionId) {
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
                if received < limit {
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

    /// Writes the output queue until it is empty (`Ok(true)`) or the socket is full
    /// (`Ok(false)`).
    fn write_queue(&mut self, slot: usize) -> io::Result<bool> {
        loop {
            let Some(connection) = self.connections.get_mut(slot) else {
                return Ok(true);
            };
            let fd = connection.fd;
            let progress = connection.front_progress;
            let Some(front) = connection.output.front() else {
                return Ok(true);
            };
            let (written, requested) = if let Chunk::File {
                file,
                offset,
                length,
            } = front
            {
                let requested = (length - progress).min(SENDFILE_MAX);
                let mut position = offset + progress;
                self.counters.sendfile_calls += 1;
                let result = sys::sendfile(fd, file.as_raw_fd(), &mut position, requested as usize);
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
                return Ok(false);
            }
        }
    }

    fn would_block_or(&mut self, error: io::Error) -> io::Result<bool> {
        if error.kind() == io::ErrorKind::WouldBlock {
            self.counters.would_block += 1;
            Ok(false)
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
        }
    }

    fn drop_output(&mut self, slot: usize) {
        let Some(connection) = self.connections.get_mut(slot) else {
            return;
        };
        connection.front_progress = 0;
        connection.flags &= !WRITE_WAITING;
        for chunk in connection.output.drain(..) {
            self.output_pools.recycle(chunk);
        }
    }

    fn continue_write(&mut self, id: ConnectionId) {
        match self.write_queue(id.index()) {
            Ok(true) => {
                if let Some(connection) = self.connections.get_mut(id.index()) {
                    connection.flags &= !WRITE_WAITING;
                }
                self.completions
                    .push_back(Completion::Sent { connection: id });
            }
            Ok(false) => {
                if let Some(connection) = self.connections.get_mut(id.index()) {
                    connection.flags &= !MAY_WRITE;
                }
            }
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

    fn on_connection_event(&mut self, event: Event) {
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

    fn set_listener_interest(&mut self, interest: Interest) {
        if P::EDGE_TRIGGERED {
            return;
        }
        for (index, listener) in self.listeners.iter().enumerate() {
            if let Some(listener) = listener {
                let _ = self
                    .poller
                    .modify(listener.fd, LISTENER_TOKEN_BASE + index, interest);
            }
        }
    }

    fn pause_accepting(&mut self) {
        self.counters.accept_pauses += 1;
        self.set_listener_interest(Interest::NONE);
    }

    fn resume_accepting(&mut self) {
        self.set_listener_interest(Interest::READABLE);
        self.listeners_ready.clear();
        self.listeners_ready.extend(
            self.listeners
                .iter()
                .enumerate()
                .filter(|(_, listener)| listener.is_some())
                .map(|(index, _)| index as u32),
        );
    }

    fn accepting_paused(&self) -> bool {
        self.accept_at_limit || self.accept_paused_until.is_some()
    }

    fn accept_from(&mut self, index: usize) {
        let Some(Some(listener)) = self.listeners.get(index) else {
            return;
        };
        let listener_fd = listener.fd;
        for _ in 0..self.config.accept_batch {
            if self.accepting_paused() {
                return;
            }
            if self.connections.len() >= self.config.max_connections {
                self.accept_at_limit = true;
                self.pause_accepting();
                return;
            }
            self.counters.accept_calls += 1;
            match sys::accept(listener_fd) {
                Ok((fd, peer)) => self.adopt(index, fd, peer),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    self.counters.would_block += 1;
                    return;
                }
                Err(error) if is_descriptor_exhaustion(&error) => {
                    self.accept_paused_until = Some(self.now + self.config.accept_pause);
                    self.pause_accepting();
                    return;
                }
                // ECONNABORTED, EPROTO, EPERM (firewall): that connection is gone; go on.
                Err(_) => {}
            }
        }
        self.listeners_ready.push(index as u32);
    }

    /// Puts a new connected or connecting socket in the slot table and the poller.
    fn open_connection(
        &mut self,
        fd: RawFd,
        flags: u8,
        interest: Interest,
    ) -> io::Result<ConnectionId> {
        let slot = self.connections.insert(Connection {
            fd,
            generation: 0,
            flags,
            interest,
            timer: None,
            output: VecDeque::new(),
            front_progress: 0,
            recv_limit: 0,
        });
        let generation = self.generations.next(slot);
        if let Err(error) = self.poller.register(fd, slot, interest) {
            self.connections.remove(slot);
            self.counters.close_calls += 1;
            sys::close(fd);
            return Err(error);
        }
        if let Some(connection) = self.connections.get_mut(slot) {
            connection.generation = generation;
        }
        self.counters.open_connections += 1;
        Ok(ConnectionId {
            slot: slot as u32,
            generation,
        })
    }

    fn adopt(&mut self, listener: usize, fd: RawFd, peer: std::net::SocketAddr) {
        let interest = if P::EDGE_TRIGGERED {
            Interest::BOTH
        } else {
            Interest::NONE
        };
        let Ok(connection) = self.open_connection(fd, MAY_READ | MAY_WRITE, interest) else {
            return;
        };
        self.counters.accepted += 1;
        self.completions.push_back(Completion::Accepted {
            listener: ListenerId(listener as u32),
            connection,
            peer,
        });
    }

    fn wait_timeout(&self, requested: Option<Duration>) -> Option<Duration> {
        if !self.completions.is_empty() || !self.listeners_ready.is_empty() {
            return Some(Duration::ZERO);
        }
        let deadlines = [self.timers.next_deadline_hint(), self.accept_paused_until];
        until_earliest(requested, self.now, deadlines)
    }
}

impl<P: Poller> Driver for ReadinessDriver<P> {
    fn backend_name(&self) -> &'static str {
        P::NAME
    }

    fn listen(&mut self, listener: TcpListener) -> io::Result<ListenerId> {
        listener.set_nonblocking(true)?;
        let fd = listener.into_raw_fd();
        let index = self.listeners.len();
        let interest = if self.accepting_paused() {
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

    fn connect(&mut self, address: std::net::SocketAddr) -> io::Result<ConnectionId> {
        if self.connections.len() >= self.config.max_connections {
            return Err(io::Error::other(
                "connection limit reached (DriverConfig::max_connections)",
            ));
        }
        self.counters.connect_calls += 1;
        let (fd, established) = sys::connect(address)?;
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
        let Some(connection) = self.connection_mut(id) else {
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
        if let Some(connection) = self.connection_mut(id) {
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
        let Some(connection) = self.connection_mut(id) else {
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
            Ok(true) => Flush::Done,
            Ok(false) => {
                if let Some(connection) = self.connections.get_mut(id.index()) {
                    connection.flags = (connection.flags & !MAY_WRITE) | WRITE_WAITING;
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
        let Some(connection) = self.connection_mut(id) else {
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
        if let Some(timer) = connection.timer {
            self.timers.cancel(timer);
        }
        self.output_pools.keep_queue(&mut connection.output);
        let _ = if P::FORGETS_ON_CLOSE {
            self.poller.forget(connection.fd)
        } else {
            self.poller.deregister(connection.fd)
        };
        self.counters.close_calls += 1;
        sys::close(connection.fd);
        self.counters.open_connections -= 1;
        if self.accept_at_limit && self.connections.len() < self.config.max_connections {
            self.accept_at_limit = false;
            if self.accept_paused_until.is_none() {
                self.resume_accepting();
            }
        }
    }

    fn set_timer(&mut self, id: ConnectionId, deadline: Instant) {
        let Some(connection) = current(&mut self.connections, id) else {
            return;
        };
        if let Some(timer) = connection.timer
            && self.timers.rearm(timer, deadline)
        {
            return;
        }
        connection.timer = Some(self.timers.insert(deadline, id));
    }

    fn cancel_timer(&mut self, id: ConnectionId) {
        let Some(connection) = current(&mut self.connections, id) else {
            return;
        };
        if let Some(timer) = connection.timer.take() {
            self.timers.cancel(timer);
        }
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let timeout = self.wait_timeout(timeout);
        self.events.clear();
        let mut events = std::mem::take(&mut self.events);
        let result = self.poller.wait(&mut events, timeout);
        self.now = Instant::now();
        self.counters.events += events.len() as u64;
        if events.is_empty() && timeout != Some(Duration::ZERO) {
            self.counters.empty_wakeups += 1;
        }
        for event in &events {
            match event.token {
                WAKER_TOKEN => {
                    self.waker.drain();
                    self.completions.push_back(Completion::Woken);
                }
                token if token >= LISTENER_TOKEN_BASE => {
                    if !self.accepting_paused() {
                        self.accept_from(token - LISTENER_TOKEN_BASE);
                    }
                }
                _ => self.on_connection_event(*event),
            }
        }
        self.events = events;
        result?;
        if self
            .accept_paused_until
            .is_some_and(|until| until <= self.now)
        {
            self.accept_paused_until = None;
            if !self.accept_at_limit {
                self.resume_accepting();
            }
        }
        if !self.accepting_paused() && !self.listeners_ready.is_empty() {
            let ready = std::mem::take(&mut self.listeners_ready);
            for index in ready {
                self.accept_from(index as usize);
            }
        }
        let mut expired = std::mem::take(&mut self.expired);
        self.timers.expire(self.now, |id| expired.push(id));
        for id in expired.drain(..) {
            if let Some(connection) = self.connection_mut(id) {
                connection.timer = None;
                self.completions
                    .push_back(Completion::TimerExpired { connection: id });
            }
        }
        self.expired = expired;
        Ok(())
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
}

impl<P: Poller> Drop for ReadinessDriver<P> {
    fn drop(&mut self) {
        let open: Vec<RawFd> = self
            .connections
            .iter()
            .map(|(_, connection)| connection.fd)
            .collect();
        for fd in open {
            sys::close(fd);
        }
        for listener in self.listeners.iter().flatten() {
            sys::close(listener.fd);
        }
    }
}
