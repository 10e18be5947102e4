//! `UringDriver`: the completion [`Driver`](crate::Driver) on io_uring itself. Every loop turn makes one
//! `io_uring_enter` that submits what the turn queued (sends, file reads, closes) and waits
//! for completions; a keep-alive request then costs no system call of its own:
//!
//! - accepting is one multishot `ACCEPT` per listener (plus one `getpeername` per
//!   connection, since multishot accept returns no address);
//! - receiving is one multishot `RECV` per connection, armed on its first receive and left
//!   armed, into the shared provided-buffer ring ([`super::buffers`]), so an idle connection
//!   owns no buffer; data arriving while the server has not asked for it (a pipelining
//!   client during a long write) is kept in a pooled buffer (the "stash") and the receive is
//!   cancelled once that passes [`STASH_LIMIT`];
//! - sending is one `SENDMSG` with `MSG_WAITALL` per flush ([`super::output`]). A flush of
//!   up to [`PROMISE_LIMIT`] bytes of memory reports [`Flush::Done`](crate::Flush::Done) at once — the kernel
//!   takes such a response whole — and the connection keeps the bytes until the
//!   completion; anything larger, or a file, reports `Flush::Pending` and `Sent` later;
//! - closing cancels the connection's operations and submits a `CLOSE` at once (the socket
//!   is released only when no operation holds it). A connection closed while a promised
//!   send is in flight stays in its slot (a zombie, [`super::connection::CLOSING`]) until
//!   the send completes or [`ZOMBIE_LINGER`] passes;
//! - files go out as linked `SPLICE` file → pipe → socket pieces ([`super::output`]) and
//!   socket-to-socket transfers as `SPLICE`/`TEE` ([`super::splice`]); operations io-wq
//!   runs look their descriptor up late, so they pin the connection's socket until their
//!   completion ([`super::connection::Connection::pinned`]);
//! - where the probe's trial finds no multishot accept or receive, single-shot ones are
//!   used ([`UringOptions::single_shot`]);
//! - timers stay in the hashed wheel; the wait's timeout is its next deadline.
//!
//! Memory safety rests on one rule: memory an in-flight operation points to (a send's
//! `msghdr`, iovecs, chunks and file buffer) belongs to a connection slot that is not freed
//! before that operation's completion; the buffer ring outlives the ring (field order).

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use io_uring::types::CancelBuilder;
use io_uring::{cqueue, opcode, types};

use super::buffers::BufferRing;
use super::connection::{
    CLOSING, CONNECTING, Connection, Kind, MAX_SLOTS, READ_IN_FLIGHT, RECV_ACTIVE, RECV_ARMED,
    RECV_THROTTLED, SEND_IN_FLIGHT, SEND_PROMISED, SHUTDOWN_IN_FLIGHT, SHUTDOWN_PENDING, SendState,
    WRITE_WAITING, decode, user_data,
};
use super::output;
use super::ring::{Ring, RingOptions};
use super::splice::Splices;
use crate::core::completions::until_earliest;
use crate::core::counters::LoopCounters;
use crate::core::generations::Generations;
use crate::core::slot_table::SlotTable;
use crate::core::timer_wheel::TimerWheel;
use crate::core::waker::Waker;
use crate::driver::{Chunk, Completion, ConnectionId, DriverConfig, ListenerId};
use crate::pools::buffer_pool::{Buffer, BufferPool};
use crate::pools::output_pools::{MAX_POOLED, OutputPools};
use crate::sys;

/// A flush of at most this many bytes of memory is reported done at once.
pub const PROMISE_LIMIT: u64 = output::WAIT_ALL_LIMIT;
/// Unrequested input kept per connection before its receive is cancelled.
pub const STASH_LIMIT: usize = 64 * 1024;
/// How long a closed connection may wait for its promised send before it is cut.
pub const ZOMBIE_LINGER: Duration = Duration::from_secs(10);
/// The buffer group of the receive ring.
const BUFFER_GROUP: u16 = 0;

/// io_uring-specific options.
#[derive(Clone, Copy, Debug)]
pub struct UringOptions {
    /// Kernel-side submission polling (`IORING_SETUP_SQPOLL`) with this idle time: the
    /// submit system call disappears, at the price of a kernel thread spinning on a core
    /// while the loop is busy (half of this 2-core machine).
    pub sqpoll_idle: Option<Duration>,
    /// Buffers in the shared receive ring (a power of two): what may arrive in one loop
    /// turn, over all connections.
    pub receive_buffers: u16,
    /// Use single-shot `ACCEPT` and `RECV` even where the kernel has the multishot forms
    /// (they are used automatically where the probe's trial finds them missing); for
    /// tests of that fallback and for comparisons.
    pub single_shot: bool,
}

impl Default for UringOptions {
    fn default() -> Self {
        UringOptions {
            sqpoll_idle: None,
            receive_buffers: 512,
            single_shot: false,
        }
    }
}

pub(super) struct ListenerState {
    pub(super) fd: RawFd,
    /// A multishot accept is armed (until its final completion arrives).
    pub(super) accepting: bool,
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
    pub(super) accept_paused_until: Option<Instant>,
    pub(super) accept_at_limit: bool,
    pub(super) timers: TimerWheel<ConnectionId>,
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
    pub(super) reaped: Vec<cqueue::Entry>,
    pub(super) expired: Vec<ConnectionId>,
    pub(super) counters: LoopCounters,
    pub(super) waker: Waker,
    pub(super) now: Instant,
    /// A submission that could not be queued: reported by the next wait.
    pub(super) fatal: Option<io::Error>,
    /// Multishot `ACCEPT` / `RECV` are used (the probe's trial found them working).
    pub(super) multishot_accept: bool,
    pub(super) multishot_recv: bool,
}

/// Whether `id` still names the slot's occupant and the server has not closed it.
pub(super) fn is_current(connections: &SlotTable<Connection>, id: ConnectionId) -> bool {
    connections.get(id.index()).is_some_and(|connection| {
        connection.generation == id.generation && connection.flags & CLOSING == 0
    })
}

fn is_descriptor_exhaustion(code: i32) -> bool {
    matches!(
        code,
        libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM
    )
}

/// The peer address of an accepted socket (one `getpeername`).
fn peer_address(fd: RawFd) -> SocketAddr {
    socket2::SockRef::from(&BorrowedSocket(fd))
        .peer_addr()
        .ok()
        .and_then(|address| address.as_socket())
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
}

/// A descriptor borrowed for one socket2 call.
struct BorrowedSocket(RawFd);

impl std::os::fd::AsFd for BorrowedSocket {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        // SAFETY: the descriptor is open for the duration of the borrow (the driver owns it
        // and closes it only later).
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.0) }
    }
}

/// Clears `O_NONBLOCK`: io_uring parks an operation on a blocking socket until it can
/// proceed, while on a non-blocking one it may fail with `EAGAIN`.
pub(super) fn set_blocking(fd: RawFd) {
    // SAFETY: fcntl on a descriptor we own, with integer arguments only.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
}

impl UringDriver {
    /// Creates a driver: a ring, its receive buffer ring, and a waker.
    pub fn new(config: DriverConfig, options: UringOptions) -> io::Result<UringDriver> {
        let ring = Ring::new(RingOptions {
            sqpoll_idle_millis: options
                .sqpoll_idle
                .map(|idle| idle.as_millis().clamp(1, u128::from(u32::MAX)) as u32),
            ..RingOptions::default()
        })?;
        let buffer_size = config.buffer_size;
        let receive_ring =
            BufferRing::new(&ring, options.receive_buffers, buffer_size, BUFFER_GROUP)?;
        let waker = Waker::new()?;
        let found = super::probe::multishot();
        let now = Instant::now();
        let mut driver = UringDriver {
            ring,
            receive_ring,
            timers: TimerWheel::new(config.timer_tick, config.timer_slots, now),
            buffers: BufferPool::new(config.buffer_size, config.max_free_buffers),
            config,
            connections: SlotTable::new(),
            generations: Generations::default(),
            listeners: Vec::new(),
            backlog: VecDeque::new(),
            accept_paused_until: None,
            accept_at_limit: false,
            output_pools: OutputPools::default(),
            send_pool: Vec::new(),
            completions: VecDeque::new(),
            splices: Splices::new(),
            reaped: Vec::with_capacity(1024),
            expired: Vec::new(),
            counters: LoopCounters::default(),
            waker,
            now,
            fatal: None,
            multishot_accept: found.accept && !options.single_shot,
            multishot_recv: found.recv && !options.single_shot,
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

    fn arm_waker(&mut self) {
        let entry = opcode::PollAdd::new(types::Fd(self.waker.raw_fd()), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(user_data(Kind::Waker, 0, 0));
        self.push_plain(entry);
    }

    /// The connection in `slot` if it is the live occupant named by `generation`.
    pub(super) fn live(&mut self, slot: usize, generation: u32) -> Option<&mut Connection> {
        self.connections
            .get_mut(slot)
            .filter(|connection| connection.generation == generation)
            .filter(|connection| connection.flags & CLOSING == 0)
    }

    pub(super) fn is_current(&self, id: ConnectionId) -> bool {
        is_current(&self.connections, id)
    }

    // ----- accepting -----------------------------------------------------------------

    pub(super) fn arm_accept(&mut self, index: usize) {
        let Some(Some(listener)) = self.listeners.get_mut(index) else {
            return;
        };
        if listener.accepting {
            return;
        }
        listener.accepting = true;
        // A single-shot accept completes without IORING_CQE_F_MORE and is re-armed by
        // `on_accept`, as a multishot one that ended.
        let entry = if self.multishot_accept {
            opcode::AcceptMulti::new(types::Fd(listener.fd))
                .flags(libc::SOCK_CLOEXEC)
                .build()
        } else {
            opcode::Accept::new(
                types::Fd(listener.fd),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
            .flags(libc::SOCK_CLOEXEC)
            .build()
        }
        .user_data(user_data(Kind::Accept, index, 0));
        self.push_plain(entry);
    }

    pub(super) fn accepting_paused(&self) -> bool {
        self.accept_at_limit || self.accept_paused_until.is_some()
    }

    fn pause_accepting(&mut self) {
        self.counters.accept_pauses += 1;
        let armed: Vec<usize> = self
            .listeners
            .iter()
            .enumerate()
            .filter(|(_, listener)| listener.as_ref().is_some_and(|state| state.accepting))
            .map(|(index, _)| index)
            .collect();
        for index in armed {
            let entry = opcode::AsyncCancel::new(user_data(Kind::Accept, index, 0))
                .build()
                .user_data(user_data(Kind::Ignored, 0, 0));
            self.push_plain(entry);
        }
    }

    pub(super) fn resume_accepting(&mut self) {
        for index in 0..self.listeners.len() {
            self.arm_accept(index);
        }
    }

    fn on_accept(&mut self, index: usize, result: i32, more: bool) {
        let Some(Some(listener)) = self.listeners.get_mut(index) else {
            if result >= 0 {
                sys::close(result);
            }
            return;
        };
        if !more {
            listener.accepting = false;
        }
        if result >= 0 {
            if self.accepting_paused() || self.connections.len() >= self.config.max_connections {
                self.backlog.push_back((index, result));
                if !self.accepting_paused() {
                    self.accept_at_limit = true;
                    self.pause_accepting();
                }
            } else {
                self.adopt(index, result);
            }
        } else if is_descriptor_exhaustion(-result) && self.accept_paused_until.is_none() {
            self.accept_paused_until = Some(self.now + self.config.accept_pause);
            self.pause_accepting();
        }
        // ECANCELED (our pause), ECONNABORTED and the like end nothing else.
        if !more && !self.accepting_paused() {
            self.arm_accept(index);
        }
    }

    fn adopt(&mut self, listener: usize, fd: RawFd) {
        self.counters.accept_calls += 1;
        let peer = peer_address(fd);
        let Some(connection) = self.open_connection(fd, 0) else {
            return;
        };
        self.counters.accepted += 1;
        self.completions.push_back(Completion::Accepted {
            listener: ListenerId(listener as u32),
            connection,
            peer,
        });
    }

    pub(super) fn open_connection(&mut self, fd: RawFd, flags: u16) -> Option<ConnectionId> {
        let slot = self.connections.insert(Connection::new(fd, flags));
        if slot >= MAX_SLOTS {
            self.connections.remove(slot);
            sys::close(fd);
            return None;
        }
        let generation = self.generations.next(slot);
        if let Some(connection) = self.connections.get_mut(slot) {
            connection.generation = generation;
        }
        self.counters.open_connections += 1;
        Some(ConnectionId {
            slot: slot as u32,
            generation,
        })
    }

    /// After a slot was freed: adopt a waiting connection, or accept again.
    fn slot_freed(&mut self) {
        while self.connections.len() < self.config.max_connections {
            let Some((listener, fd)) = self.backlog.pop_front() else {
                break;
            };
            self.adopt(listener, fd);
        }
        if self.accept_at_limit
            && self.backlog.is_empty()
            && self.connections.len() < self.config.max_connections
        {
            self.accept_at_limit = false;
            if self.accept_paused_until.is_none() {
                self.resume_accepting();
            }
        }
    }

    // ----- receiving -----------------------------------------------------------------

    pub(super) fn arm_recv(&mut self, slot: usize) {
        let group = self.receive_ring.group();
        let Some(connection) = self.connections.get_mut(slot) else {
            return;
        };
        connection.flags |= RECV_ACTIVE;
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

    fn on_recv(&mut self, slot: usize, generation: u32, result: i32, flags: u32) {
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
            } else if result < 0 && !matches!(-result, libc::ENOBUFS | libc::ECANCELED) {
                let end = Err(io::Error::from_raw_os_error(-result));
                Self::deliver_end(&mut self.completions, connection, id, end);
            }
            let rearm = connection.flags & (RECV_ACTIVE | RECV_ARMED) == RECV_ARMED
                && connection.pending_end.is_none()
                && result != 0;
            if throttle {
                let entry = opcode::AsyncCancel::new(user_data(Kind::Recv, slot, generation))
                    .build()
                    .user_data(user_data(Kind::Ignored, 0, 0));
                self.push_plain(entry);
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

    // ----- sending -------------------------------------------------------------------

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

    fn on_read(&mut self, slot: usize, generation: u32, result: i32) {
        let Some(connection) = self
            .connections
            .get_mut(slot)
            .filter(|connection| connection.generation == generation)
        else {
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

    fn on_send(&mut self, slot: usize, generation: u32, result: i32) {
        let Some(connection) = self
            .connections
            .get_mut(slot)
            .filter(|connection| connection.generation == generation)
        else {
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
    fn on_shutdown(&mut self, slot: usize, generation: u32) {
        let Some(connection) = self
            .connections
            .get_mut(slot)
            .filter(|connection| connection.generation == generation)
        else {
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
    fn recycle_send_state(&mut self, mut state: Box<SendState>, pipe_empty: bool) {
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

    // ----- closing -------------------------------------------------------------------

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
        if let Some(timer) = connection.timer.take() {
            self.timers.cancel(timer);
        }
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

    // ----- waking, connecting, timers -----------------------------------------------

    fn on_connect(&mut self, slot: usize, generation: u32, result: i32) {
        let Some(connection) = self.live(slot, generation) else {
            return;
        };
        if connection.flags & CONNECTING == 0 {
            return;
        }
        connection.flags &= !CONNECTING;
        let fd = connection.fd;
        let outcome = if result < 0 {
            Some(io::Error::from_raw_os_error(-result))
        } else {
            sys::take_socket_error(fd).unwrap_or_else(Some)
        };
        let id = ConnectionId {
            slot: slot as u32,
            generation,
        };
        match outcome {
            None => {
                set_blocking(fd);
                self.completions
                    .push_back(Completion::Connected { connection: id });
                let Some(connection) = self.connections.get_mut(slot) else {
                    return;
                };
                if connection.flags & RECV_ARMED != 0 {
                    self.arm_recv(slot);
                }
                let Some(connection) = self.connections.get_mut(slot) else {
                    return;
                };
                if !connection.output.is_empty() {
                    self.start_send(slot);
                }
            }
            Some(error) => {
                connection.flags &= !(RECV_ARMED | WRITE_WAITING);
                self.drop_output(slot);
                self.completions.push_back(Completion::Failed {
                    connection: id,
                    error,
                });
            }
        }
    }

    pub(super) fn handle(&mut self, entry: &cqueue::Entry) {
        let Some((kind, slot, generation)) = decode(entry.user_data()) else {
            return;
        };
        let result = entry.result();
        let flags = entry.flags();
        match kind {
            Kind::Accept => self.on_accept(slot, result, cqueue::more(flags)),
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
            Kind::Shutdown => self.on_shutdown(slot, generation),
            Kind::Ignored => {}
        }
    }

    pub(super) fn wait_timeout(&self, requested: Option<Duration>) -> Option<Duration> {
        if !self.completions.is_empty() {
            return Some(Duration::ZERO);
        }
        let deadlines = [self.timers.next_deadline_hint(), self.accept_paused_until];
        until_earliest(requested, self.now, deadlines)
    }
}
