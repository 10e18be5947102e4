//! `UringDriver`: the completion [`Driver`](crate::Driver) on io_uring itself. Every loop turn makes one
//! `io_uring_enter` that submits what the turn queued (sends, file reads, closes) and waits
//! for completions; a keep-alive request then costs no system call of its own:
//!
//! - accepting is one multishot `ACCEPT` per listener (plus one `getpeername` per
//!   connection, since multishot accept returns no address) while the connection limit
//!   has room for a whole listen queue, and single-shot ones, as many as fit, near it;
//! - receiving is one multishot `RECV` per connection, armed on its first receive and left
//!   armed, into the shared provided-buffer ring ([`super::buffers`]), so an idle connection
//!   owns no buffer; data arriving while the server has not asked for it (a pipelining
//!   client during a long write) is kept in a pooled buffer (the "stash") and the receive is
//!   cancelled once that passes [`STASH_LIMIT`];
//! - sending is one `SENDMSG` with `MSG_WAITALL` per flush ([`super::output`]). A flush of
//!   up to [`PROMISE_LIMIT`] bytes of memory reports [`Flush::Done`](crate::Flush::Done) at once — the kernel
//!   takes such a response whole — and the connection keeps the bytes until the
//!   completion; anything larger, or a file, reports `Flush::Pending` and `Sent` later;
//! - on a light loop turn ([`INLINE_OPERATIONS`]) a small memory flush and an accepted
//!   client's first receive are system calls of their own (`sendmsg`, `recv`), not
//!   submissions: those would complete as the next wait submits them and end it at once,
//!   a turn for nothing where the loop was about to sleep; `shutdown(SHUT_WR)` always is
//!   (io_uring runs `SHUTDOWN` in an io-wq thread);
//! - closing cancels the connection's operations and submits a `CLOSE` at once (the socket
//!   is released only when no operation holds it). A connection closed while a promised
//!   send is in flight stays in its slot (a zombie, [`super::connection::CLOSING`]) until
//!   the send completes or [`ZOMBIE_LINGER`] passes;
//! - files go out as linked `SPLICE` file → pipe → socket pieces ([`super::output`]) and
//!   socket-to-socket transfers as `SPLICE`/`TEE` ([`super::splice`]); operations io-wq
//!   runs look their descriptor up late, so they pin the connection's socket until their
//!   completion ([`super::connection::Connection::pinned`]);
//! - file work of another component (the disk store's segment writes and syncs) runs as
//!   `WRITE` / `FSYNC` operations (`file.rs`);
//! - where the probe's trial finds no multishot accept or receive, single-shot ones are
//!   used ([`UringOptions::single_shot`]);
//! - timers stay in the hashed wheel; the wait's timeout is its next deadline.
//! - with a minimum wait ([`UringOptions::min_wait`], `--uring-min-wait`) a wait asks for a
//!   batch of completions, bounded by that wait, after short turns while completions come
//!   fast enough (`BatchGate`).
//!
//! Files: this one holds the state, the loop turn and the dispatch of completions;
//! `accept.rs` accepting and opening connections (and outgoing connects); `receive.rs` the
//! multishot receive and the stash; `send.rs` sends, file pieces and shutdowns;
//! `close.rs` closing a connection and tearing the driver down; `api.rs` the
//! [`Driver`](crate::Driver) contract on top; `splice.rs` the [`Splice`](crate::Splice)
//! extension.
//!
//! Memory safety rests on one rule: memory an in-flight operation points to (a send's
//! `msghdr`, iovecs, chunks and file buffer) belongs to a connection slot that is not freed
//! before that operation's completion; the buffer ring outlives the ring (field order).

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, types};

use super::buffers::BufferRing;
use super::connection::{CLOSING, Connection, Kind, SendState, decode, user_data};
use super::file::FileWorks;
use super::output;
use super::ring::{Ring, RingOptions};
use super::splice::Splices;
use crate::core::accept_gate::AcceptGate;
use crate::core::completions::until_earliest;
use crate::core::counters::LoopCounters;
use crate::core::generations::{Generations, current};
use crate::core::slot_table::SlotTable;
use crate::core::timers::ConnectionTimers;
use crate::core::waker::Waker;
use crate::driver::{Completion, ConnectionId, DriverConfig};
use crate::pools::buffer_pool::BufferPool;
use crate::pools::output_pools::OutputPools;

/// A flush of at most this many bytes of memory is reported done at once.
pub const PROMISE_LIMIT: u64 = output::WAIT_ALL_LIMIT;
/// Unrequested input kept per connection before its receive is cancelled.
pub const STASH_LIMIT: usize = 64 * 1024;
/// How long a closed connection may wait for its promised send before it is cut.
pub const ZOMBIE_LINGER: Duration = Duration::from_secs(10);
/// The buffer group of the receive ring.
const BUFFER_GROUP: u16 = 0;
/// A loop turn that reaped at most this many completions is light: up to this many of the
/// operations it starts that would complete at once (a small flush the socket takes whole,
/// a new client's first receive, whose request is usually there) are done with system
/// calls of their own (`UringDriver::try_send_now`, `UringDriver::try_recv_now`).
/// Submitted instead, each would complete while the next wait is submitted and end that
/// wait at once: a second `io_uring_enter` and loop turn where the loop was about to sleep
/// — on the slow-clients workload 5.8 turns per request against epoll's 2.9. A heavy turn
/// submits them all with its next wait: that wait would not have slept anyway, and one
/// enter carries them all.
pub const INLINE_OPERATIONS: usize = 8;

/// How large a driver's queues and receive buffer ring are, from its connection limit.
///
/// Every open connection has a multishot receive armed, and with `DEFER_TASKRUN` all the
/// completions that became due while the loop was busy are posted in one enter. A loop
/// turn that takes long under many connections therefore meets, in its next enter, a burst
/// proportional to the *connections* (not to the rate): each receive takes a ring buffer
/// (past the ring's size the rest end with `ENOBUFS` and must be armed again: a longer
/// next turn, more re-arms — the loop falls further behind), each completion a completion
/// queue entry (past its size they go to the kernel's slower overflow list), and the
/// re-arms, sends and closes fill the submission queue (an extra enter each time it is
/// full). The sizes grow with the connection limit, within bounds on memory: the ring's
/// buffers are [`DriverConfig::buffer_size`](crate::DriverConfig) each (16 KiB: 2,048 of
/// them are 32 MiB, touched as the kernel cycles through them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingSizes {
    /// Submission queue entries.
    pub submissions: u32,
    /// Completion queue entries.
    pub completions: u32,
    /// Receive ring buffers.
    pub receive_buffers: u16,
}

impl RingSizes {
    /// The sizes for a driver of at most `max_connections` connections: submission queue
    /// ¼ of the connections (1,024–4,096), completion queue 2 per connection
    /// (8,192–65,536), receive buffers ⅛ of the connections (512–2,048); powers of two.
    pub fn for_connections(max_connections: usize) -> RingSizes {
        let scaled = |value: usize, low: usize, high: usize| {
            value.max(1).next_power_of_two().clamp(low, high)
        };
        RingSizes {
            submissions: scaled(max_connections / 4, 1024, 4096) as u32,
            completions: scaled(max_connections.saturating_mul(2), 8192, 65_536) as u32,
            receive_buffers: scaled(max_connections / 8, 512, 2048) as u16,
        }
    }
}

/// io_uring-specific options (default: no submission polling, the receive ring sized from
/// the connection limit, multishot where the kernel has it).
#[derive(Clone, Copy, Debug, Default)]
pub struct UringOptions {
    /// Kernel-side submission polling (`IORING_SETUP_SQPOLL`) with this idle time: the
    /// submit system call disappears, at the price of a kernel thread spinning on a core
    /// while the loop is busy (half of this 2-core machine).
    pub sqpoll_idle: Option<Duration>,
    /// Buffers in the shared receive ring (a power of two): what may arrive in one loop
    /// turn, over all connections. `None`: sized from the connection limit
    /// ([`RingSizes::for_connections`]).
    pub receive_buffers: Option<u16>,
    /// Use single-shot `ACCEPT` and `RECV` even where the kernel has the multishot forms
    /// (they are used automatically where the probe's trial finds them missing); for
    /// tests of that fallback and for comparisons.
    pub single_shot: bool,
    /// Batch completions per loop turn (`--uring-min-wait`): a turn's wait lasts until
    /// [`MIN_WAIT_BATCH`](super::ring::MIN_WAIT_BATCH) completions are ready or this long
    /// has passed with one ready, so a lightly loaded loop handles several completions per
    /// wake-up (fewer wake-ups, context switches and turns) at the price of up to this much
    /// latency per step of a request. `None`: every wait ends at the first completion.
    /// Linux 6.12 (`IORING_FEAT_MIN_TIMEOUT`); ignored on older kernels.
    pub min_wait: Option<Duration>,
    /// Send every flush and receive through the ring, even on a light turn (by default a
    /// light turn tries a small flush and a connection's first receive at once with a
    /// system call of its own: [`INLINE_OPERATIONS`]); for tests of the ring's path and
    /// for comparisons.
    pub ring_only: bool,
}

#[derive(Clone, Copy)]
pub(super) struct ListenerState {
    pub(super) fd: RawFd,
    /// A multishot accept is armed (until its final completion arrives).
    pub(super) multishot: bool,
    /// The multishot accept's cancellation was submitted (`accept.rs`: the connection
    /// budget no longer holds a full listen queue).
    pub(super) multishot_stopping: bool,
    /// Single-shot accepts armed (each takes at most one connection).
    pub(super) single_shots: usize,
    /// The most connections the listen queue holds: what a multishot accept may take at
    /// once when the loop comes back from a stall.
    pub(super) queue_limit: usize,
}

impl ListenerState {
    /// An accept of this listener is armed.
    pub(super) fn armed(&self) -> bool {
        self.multishot || self.single_shots > 0
    }
}

/// The io_uring completion driver.
pub struct UringDriver {
    // Declared first: dropped first, so the kernel lets go of every buffer below.
    pub(super) ring: Ring,
    pub(super) receive_ring: BufferRing,
    pub(super) config: DriverConfig,
    pub(super) connections: SlotTable<Connection>,
    pub(super) generations: Generations,
    pub(super) listeners: Vec<Option<ListenerState>>,
    /// Accepted beyond the connection limit: adopted when slots free up.
    pub(super) backlog: VecDeque<(usize, RawFd)>,
    pub(super) accepting: AcceptGate,
    /// Connections adopted from accepts in this turn (see `accept.rs`: at most
    /// `DriverConfig::accept_batch` per turn).
    pub(super) turn_accepts: usize,
    /// Connections adopted in the last turn: their requests are handled after this one,
    /// and may need slots for upstream connections (`DriverConfig::reserve_upstream`).
    pub(super) last_turn_accepts: usize,
    /// The turn's accept batch is used up: the armed accepts were cancelled and what the
    /// kernel accepted meanwhile waits in the backlog until the next turn.
    pub(super) accept_throttled: bool,
    /// Single-shot accepting found no room (`accept.rs`): counted as a pause (and a hold
    /// short of the limit) once until accepts are armed again.
    pub(super) accept_stopped: bool,
    pub(super) timers: ConnectionTimers,
    pub(super) buffers: BufferPool,
    pub(super) output_pools: OutputPools,
    #[expect(
        clippy::vec_box,
        reason = "the kernel holds pointers into a SendState: its address must not move"
    )]
    pub(super) send_pool: Vec<Box<SendState>>,
    pub(super) completions: VecDeque<Completion>,
    /// Socket-to-socket transfers and their pipes.
    pub(super) splices: Splices,
    /// File work in flight (`file.rs`).
    pub(super) files: FileWorks,
    pub(super) reaped: Vec<cqueue::Entry>,
    /// Closed connections whose linger for a promised send ran out in this turn (kept for
    /// its allocation).
    pub(super) zombies_due: Vec<ConnectionId>,
    pub(super) counters: LoopCounters,
    pub(super) waker: Waker,
    pub(super) now: Instant,
    /// A submission that could not be queued: reported by the next wait.
    pub(super) fatal: Option<io::Error>,
    /// Multishot `ACCEPT` / `RECV` are used (the probe's trial found them working).
    pub(super) multishot_accept: bool,
    pub(super) multishot_recv: bool,
    /// The recent completion rate, for `--uring-min-wait`.
    pub(super) batching: BatchGate,
    /// Operations this turn may still do at once rather than submit
    /// ([`INLINE_OPERATIONS`]; 0 on a heavy turn, with [`UringOptions::ring_only`], and with
    /// `--sqpoll`, where submitting costs no system call).
    pub(super) inline_budget: usize,
    /// [`UringOptions::ring_only`] or `--sqpoll`: nothing is done at once.
    pub(super) ring_only: bool,
}

/// The completion rate over the last [`BatchGate::WINDOW`], which decides whether a
/// minimum wait is worth it: only while it would gather [`BatchGate::LEAST`] completions
/// or more on average.
#[derive(Debug)]
pub(super) struct BatchGate {
    window_start: Instant,
    in_window: u64,
    /// Completions per second over the last full window.
    rate: f64,
}

impl BatchGate {
    /// How long completions are counted before the rate is updated.
    const WINDOW: Duration = Duration::from_millis(100);
    /// The completions a minimum wait should gather on average to be used.
    const LEAST: f64 = 4.0;

    fn new(now: Instant) -> BatchGate {
        BatchGate {
            window_start: now,
            in_window: 0,
            rate: 0.0,
        }
    }

    fn count(&mut self, completions: u64, now: Instant) {
        self.in_window += completions;
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed >= Self::WINDOW {
            self.rate = self.in_window as f64 / elapsed.as_secs_f64();
            self.in_window = 0;
            self.window_start = now;
        }
    }

    fn worth_it(&self, wait: Duration) -> bool {
        self.rate * wait.as_secs_f64() >= Self::LEAST
    }
}

/// Whether `id` still names the slot's occupant and the server has not closed it.
pub(super) fn is_current(connections: &SlotTable<Connection>, id: ConnectionId) -> bool {
    connections.get(id.index()).is_some_and(|connection| {
        connection.generation == id.generation && connection.flags & CLOSING == 0
    })
}

impl UringDriver {
    /// The name used on the command line and in reports.
    pub const NAME: &'static str = "uring";

    /// Creates a driver: a ring, its receive buffer ring, and a waker.
    pub fn new(config: DriverConfig, options: UringOptions) -> io::Result<UringDriver> {
        let sizes = RingSizes::for_connections(config.max_connections);
        let ring = Ring::new(RingOptions {
            sqpoll_idle_millis: options
                .sqpoll_idle
                .map(|idle| idle.as_millis().clamp(1, u128::from(u32::MAX)) as u32),
            entries: sizes.submissions,
            completion_entries: sizes.completions,
            min_wait: options.min_wait,
        })?;
        let buffer_size = config.buffer_size;
        let receive_buffers = options.receive_buffers.unwrap_or(sizes.receive_buffers);
        let receive_ring = BufferRing::new(&ring, receive_buffers, buffer_size, BUFFER_GROUP)?;
        let waker = Waker::new()?;
        let found = super::probe::multishot();
        let now = Instant::now();
        let mut driver = UringDriver {
            ring,
            receive_ring,
            timers: ConnectionTimers::new(&config, now),
            buffers: BufferPool::new(config.buffer_size, config.max_free_buffers),
            config,
            connections: SlotTable::new(),
            generations: Generations::default(),
            listeners: Vec::new(),
            backlog: VecDeque::new(),
            accepting: AcceptGate::default(),
            turn_accepts: 0,
            last_turn_accepts: 0,
            accept_throttled: false,
            accept_stopped: false,
            output_pools: OutputPools::default(),
            send_pool: Vec::new(),
            completions: VecDeque::new(),
            splices: Splices::new(),
            files: FileWorks::default(),
            reaped: Vec::with_capacity(1024),
            zombies_due: Vec::new(),
            counters: LoopCounters::default(),
            waker,
            now,
            fatal: None,
            multishot_accept: found.accept && !options.single_shot,
            multishot_recv: found.recv && !options.single_shot,
            batching: BatchGate::new(now),
            inline_budget: 0,
            ring_only: options.ring_only || options.sqpoll_idle.is_some(),
        };
        driver.arm_waker();
        Ok(driver)
    }

    /// Queues a submission.
    ///
    /// # Safety
    ///
    /// As [`Ring::push`]: whatever the entry points to lives until its last completion.
    pub(super) unsafe fn push(&mut self, entry: &io_uring::squeue::Entry) {
        // SAFETY: forwarded from the caller.
        if let Err(error) = unsafe { self.ring.push(entry) } {
            self.fatal.get_or_insert(error);
        }
    }

    pub(super) fn push_plain(&mut self, entry: io_uring::squeue::Entry) {
        // SAFETY: used only for operations that point to no memory of ours (polls,
        // cancellations, closes, shutdowns, accepts, buffer-selecting receives).
        unsafe { self.push(&entry) };
    }

    /// Queues a fire-and-forget operation (a cancellation, a `CLOSE`) whose success needs
    /// no handling: with `IOSQE_CQE_SKIP_SUCCESS` (Linux 5.17) it posts a completion only
    /// if it fails (a cancellation that found nothing, a close that failed), and those are
    /// ignored. Without the flag every close and cancellation cost a completion entry, and
    /// one more for the loop to reap.
    pub(super) fn push_quiet(&mut self, entry: io_uring::squeue::Entry) {
        let entry = entry
            .user_data(user_data(Kind::Ignored, 0, 0))
            .flags(io_uring::squeue::Flags::SKIP_SUCCESS);
        self.push_plain(entry);
    }

    fn arm_waker(&mut self) {
        let entry = opcode::PollAdd::new(types::Fd(self.waker.raw_fd()), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(user_data(Kind::Waker, 0, 0));
        self.push_plain(entry);
    }

    /// The connection in `slot` if it is the occupant named by `generation`, closed or not
    /// (the operations of a connection closed while they were in flight still complete).
    pub(super) fn occupant(&mut self, slot: usize, generation: u32) -> Option<&mut Connection> {
        let id = ConnectionId {
            slot: slot as u32,
            generation,
        };
        current(&mut self.connections, id)
    }

    /// The connection in `slot` if it is the live occupant named by `generation` (the
    /// server has not closed it).
    pub(super) fn live(&mut self, slot: usize, generation: u32) -> Option<&mut Connection> {
        self.occupant(slot, generation)
            .filter(|connection| connection.flags & CLOSING == 0)
    }

    pub(super) fn is_current(&self, id: ConnectionId) -> bool {
        is_current(&self.connections, id)
    }

    pub(super) fn handle(&mut self, entry: &cqueue::Entry) {
        let Some((kind, slot, generation)) = decode(entry.user_data()) else {
            return;
        };
        let result = entry.result();
        let flags = entry.flags();
        match kind {
            Kind::Accept => self.on_accept(slot, generation, result, cqueue::more(flags)),
            Kind::Recv => {
                self.on_recv(slot, generation, result, flags);
                self.splice_poke(slot);
            }
            Kind::Send => {
                self.on_send(slot, generation, result);
                self.splice_poke(slot);
            }
            Kind::Splice => self.on_splice(slot, generation, result),
            Kind::Read => self.on_read(slot, generation, result),
            Kind::Connect => self.on_connect(slot, generation, result),
            Kind::Waker => {
                self.waker.drain();
                self.completions.push_back(Completion::Woken);
                if !cqueue::more(flags) {
                    self.arm_waker();
                }
            }
            Kind::File => self.on_file(slot, result),
            Kind::Ignored => {}
        }
    }

    /// Whether this turn's wait batches completions (`--uring-min-wait`): only with a
    /// minimum wait set, after a short turn (a turn that took the minimum wait or longer
    /// collected its next completions while it worked: a batch wait would leave them
    /// waiting), and while completions come fast enough to fill a batch
    /// ([`BatchGate`]): at a few per minimum wait the wait would mostly expire empty and
    /// sleep again — two wake-ups where one would do.
    fn batch_this_wait(&self) -> bool {
        self.ring
            .min_wait()
            .is_some_and(|wait| self.now.elapsed() < wait && self.batching.worth_it(wait))
    }

    pub(super) fn wait_timeout(&self, requested: Option<Duration>) -> Option<Duration> {
        if !self.completions.is_empty() || self.holding_for_upstream() {
            return Some(Duration::ZERO);
        }
        let deadlines = [self.timers.next_deadline(), self.accepting.resumes_at()];
        until_earliest(requested, self.now, deadlines)
    }

    /// One loop turn: submits what the last turn queued and waits (one enter), handles the
    /// completions, resumes accepting if its pause ended, and fires the timers that are
    /// due — a closed connection's timer is the end of its linger (`ZOMBIE_LINGER`).
    pub(super) fn turn(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        if let Some(error) = self.fatal.take() {
            return Err(error);
        }
        self.begin_accept_turn();
        let timeout = self.wait_timeout(timeout);
        let batch = self.batch_this_wait();
        self.ring.submit_and_wait_batch(timeout, batch)?;
        self.now = Instant::now();
        let mut reaped = std::mem::take(&mut self.reaped);
        reaped.clear();
        self.ring.drain_into(&mut reaped);
        self.batching.count(reaped.len() as u64, self.now);
        self.counters.events += reaped.len() as u64;
        if reaped.is_empty() && timeout != Some(Duration::ZERO) {
            self.counters.empty_wakeups += 1;
        }
        // Set before the handling: re-arms and the server's work on this turn's completions
        // may use it (see `INLINE_OPERATIONS`).
        self.inline_budget = if self.ring_only || reaped.len() > INLINE_OPERATIONS {
            0
        } else {
            INLINE_OPERATIONS
        };
        for entry in &reaped {
            self.handle(entry);
        }
        self.receive_ring.end_turn();
        self.reaped = reaped;
        if self.accepting.tick(self.now) {
            self.resume_accepting();
        }
        let completions = &mut self.completions;
        let zombies_due = &mut self.zombies_due;
        self.timers
            .expire(self.now, &mut self.connections, |id, connection| {
                if connection.flags & CLOSING != 0 {
                    zombies_due.push(id);
                } else {
                    completions.push_back(Completion::TimerExpired { connection: id });
                }
            });
        let mut zombies_due = std::mem::take(&mut self.zombies_due);
        for id in zombies_due.drain(..) {
            // A promised send that never finished: cut it (and the receive, if still armed).
            let flags = self
                .connections
                .get(id.index())
                .map_or(0, |connection| connection.flags);
            self.cancel_operations(id.index(), id.generation, flags);
        }
        self.zombies_due = zombies_due;
        match self.fatal.take() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{BatchGate, RingSizes};

    #[test]
    fn a_minimum_wait_is_used_only_while_completions_would_fill_it() {
        let start = Instant::now();
        let mut gate = BatchGate::new(start);
        let wait = Duration::from_micros(500);
        assert!(!gate.worth_it(wait), "no rate measured yet");
        // 1,000 completions in 100 ms: 10,000/s, 5 per 500 µs.
        gate.count(1_000, start + Duration::from_millis(100));
        assert!(gate.worth_it(wait));
        // 100 in the next 100 ms: 1,000/s, half a completion per 500 µs.
        gate.count(100, start + Duration::from_millis(200));
        assert!(!gate.worth_it(wait));
        assert!(gate.worth_it(Duration::from_millis(5)));
    }

    #[test]
    fn ring_sizes_grow_with_the_connection_limit_within_bounds() {
        let small = RingSizes::for_connections(64);
        assert_eq!(
            small,
            RingSizes {
                submissions: 1024,
                completions: 8192,
                receive_buffers: 512,
            }
        );
        let default = RingSizes::for_connections(19_000);
        assert_eq!(
            default,
            RingSizes {
                submissions: 4096,
                completions: 65_536,
                receive_buffers: 2048,
            }
        );
        let middle = RingSizes::for_connections(6_000);
        assert_eq!(middle.submissions, 2048);
        assert_eq!(middle.completions, 16_384);
        assert_eq!(middle.receive_buffers, 1024);
    }
}
