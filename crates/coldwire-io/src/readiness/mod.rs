//! `ReadinessDriver<P>`: the completion [`Driver`](crate::Driver) over a readiness
//! [`Poller`].
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
//!
//! Files: this one holds the state and the loop turn (`wait`'s dispatch of readiness
//! events); `accept.rs` accepting and opening connections; `stream.rs` receiving and
//! writing output when a socket is ready; `api.rs` the [`Driver`](crate::Driver) contract
//! on top; `splice.rs` the [`Splice`](crate::Splice) extension with `splice(2)`/`tee(2)`;
//! `read_ahead.rs` keeping a file's cold pages off the loop (a thread pool reads them before
//! `sendfile` does); `sockmap_body.rs` its kernel-only transfers (`Splice::splice_in_kernel`).

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use crate::core::accept_gate::AcceptGate;
use crate::core::completions::until_earliest;
use crate::core::counters::LoopCounters;
use crate::core::generations::{Generations, Occupant};
use crate::core::slot_table::SlotTable;
use crate::core::timer_wheel::TimerHandle;
use crate::core::timers::ConnectionTimers;
use crate::core::waker::Waker;
use crate::driver::{Chunk, Completion, ConnectionId, DriverConfig};
use crate::poller::{Event, Interest, Poller};
use crate::pools::buffer_pool::BufferPool;
use crate::pools::output_pools::OutputPools;
use crate::sys;

mod accept;
mod api;
mod read_ahead;
mod sockmap_body;
mod splice;
mod stream;

const LISTENER_TOKEN_BASE: usize = 1 << 40;
const WAKER_TOKEN: usize = usize::MAX;
/// The read-ahead pool's reports (see `read_ahead.rs`).
const READ_AHEAD_TOKEN: usize = usize::MAX - 1;

const RECV_ARMED: u8 = 1;
const MAY_READ: u8 = 2;
const MAY_WRITE: u8 = 4;
const WRITE_WAITING: u8 = 8;
const CONNECTING: u8 = 16;
/// A splice waits to read this socket / to write to it (see `splice.rs`).
const SPLICE_READ: u8 = 32;
const SPLICE_WRITE: u8 = 64;
/// The front file chunk's next window is being read ahead (see `read_ahead.rs`).
const FILE_READING: u8 = 128;

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
    /// Most bytes the next receive takes (0: the whole buffer); see `Splice::recv_at_most`.
    recv_limit: u32,
    /// The front chunk (a file) is known resident up to this progress; 0 when the front
    /// chunk changes (see `read_ahead.rs`).
    file_ready: u64,
    /// The poller reported the peer's end of stream (or an error): a short receive no
    /// longer clears `MAY_READ`, since no new edge will come for the end still to be read
    /// (a request and its FIN arriving together, then the request answered).
    hung_up: bool,
}

impl Occupant for Connection {
    fn generation(&self) -> u32 {
        self.generation
    }

    fn set_generation(&mut self, generation: u32) {
        self.generation = generation;
    }

    fn timer(&mut self) -> &mut Option<TimerHandle> {
        &mut self.timer
    }
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
    accepting: AcceptGate,
    /// Clients accepted in this turn (`DriverConfig::reserve_upstream`, `accept.rs`).
    turn_accepts: usize,
    timers: ConnectionTimers,
    buffers: BufferPool,
    output_pools: OutputPools,
    completions: VecDeque<Completion>,
    events: Vec<Event>,
    counters: LoopCounters,
    waker: Waker,
    now: Instant,
    splices: splice::Splices,
    kernel_bodies: sockmap_body::KernelBodies,
    /// Set during `flush_more`: the last `sendmsg` of the flush carries `MSG_MORE`.
    more_follows: bool,
    read_ahead: read_ahead::ReadAhead,
}

/// Whether `id` still names the slot's current occupant.
fn is_current(connections: &SlotTable<Connection>, id: ConnectionId) -> bool {
    connections
        .get(id.index())
        .is_some_and(|connection| connection.generation == id.generation)
}

impl<P: Poller> ReadinessDriver<P> {
    /// Creates a driver with its own poller and waker.
    pub fn new(config: DriverConfig) -> io::Result<Self> {
        let mut poller = P::new()?;
        let waker = Waker::new()?;
        poller.register(waker.raw_fd(), WAKER_TOKEN, Interest::READABLE)?;
        let now = Instant::now();
        let read_ahead = read_ahead::ReadAhead::new(config.read_ahead);
        Ok(ReadinessDriver {
            poller,
            timers: ConnectionTimers::new(&config, now),
            buffers: BufferPool::new(config.buffer_size, config.max_free_buffers),
            config,
            connections: SlotTable::new(),
            generations: Generations::default(),
            listeners: Vec::new(),
            listeners_ready: Vec::new(),
            accepting: AcceptGate::default(),
            turn_accepts: 0,
            output_pools: OutputPools::default(),
            completions: VecDeque::new(),
            events: Vec::with_capacity(1024),
            counters: LoopCounters::default(),
            waker,
            now,
            splices: splice::Splices::new(),
            kernel_bodies: sockmap_body::KernelBodies::default(),
            more_follows: false,
            read_ahead,
        })
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
            // Output waiting for a read-ahead does not wait for the socket.
            writable: connection.flags & (WRITE_WAITING | FILE_READING) == WRITE_WAITING
                || connection.flags & (CONNECTING | SPLICE_WRITE) != 0,
        };
        if wanted != connection.interest {
            connection.interest = wanted;
            // A failure here means the descriptor is already gone; the next operation on it
            // reports the error.
            let _ = self.poller.modify(connection.fd, id.index(), wanted);
        }
    }

    fn wait_timeout(&self, requested: Option<Duration>) -> Option<Duration> {
        if !self.completions.is_empty() || !self.listeners_ready.is_empty() {
            return Some(Duration::ZERO);
        }
        let deadlines = [
            self.timers.next_deadline(),
            self.accepting.resumes_at(),
            self.kernel_bodies.next_look(),
        ];
        until_earliest(requested, self.now, deadlines)
    }

    /// One loop turn: waits for readiness and performs what became possible, accepts, and
    /// fires the timers that are due.
    fn turn(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.begin_accept_turn();
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
                READ_AHEAD_TOKEN => self.read_ahead_reported(),
                token if token >= LISTENER_TOKEN_BASE => {
                    if !self.accepting.is_paused() {
                        self.accept_from(token - LISTENER_TOKEN_BASE);
                    }
                }
                _ => self.on_connection_event(*event),
            }
        }
        self.events = events;
        result?;
        self.poll_kernel_bodies();
        self.accept_pending();
        let completions = &mut self.completions;
        self.timers
            .expire(self.now, &mut self.connections, |id, _| {
                completions.push_back(Completion::TimerExpired { connection: id });
            });
        Ok(())
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
