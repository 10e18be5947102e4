//! Accepting and opening connections on the io_uring driver, and the completions of
//! outgoing connects (`IORING_OP_CONNECT`, submitted by `api.rs`).
//!
//! Accepting is one multishot `ACCEPT` per listener while the connection limit has room
//! for the listener's whole listen queue, and single-shot accepts — as many as fit, at most
//! the turn's accept batch — when it has not. A multishot accept empties the listen queue
//! into descriptors in one go when the loop next enters the kernel: after a stalled turn
//! (a starved core, a stop) that was up to 4,096 sockets at once, which waited in the
//! backlog holding descriptors but no slot, and near the limit the process ran out of open
//! files before the slots ran out (the proxy's upstream `socket()` failed: 503
//! `connection_limit_descriptors`, issue 19, `results/2026-11-27-vm/slow-clients-limit-3/`).
//! A single-shot accept takes at most one connection, so the accepted sockets never pass
//! the room, however long a turn takes. Where the kernel lacks the multishot form, one
//! single-shot accept is armed at a time and re-armed at each completion. One
//! `getpeername` follows each accept (the address is not asked of the kernel: a multishot
//! accept cannot return it).
//!
//! When accepting pauses and resumes is the shared [`AcceptGate`](crate::core::accept_gate)'s
//! decision; pausing here cancels the armed accepts. Connections the kernel accepted
//! meanwhile (an accept completion races its cancellation) wait in the driver's backlog
//! until a slot frees, rather than being closed.

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use io_uring::types::CancelBuilder;
use io_uring::{opcode, types};

use super::connection::{
    CLOSING, CONNECTING, Connection, Kind, MAX_SLOTS, RECV_ARMED, WRITE_WAITING, user_data,
};
use super::driver::{ListenerState, UringDriver};
use crate::core::accept_gate::is_descriptor_exhaustion;
use crate::driver::{Completion, ConnectionId, ListenerId};
use crate::sys;

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

/// `user_data`'s third part for a listener's multishot accept.
const MULTISHOT: u32 = 0;
/// `user_data`'s third part for a listener's single-shot accepts.
const SINGLE_SHOT: u32 = 1;

/// The listen queue's length when the kernel does not say (`net.core.somaxconn`'s default
/// since Linux 5.4).
pub(super) const DEFAULT_QUEUE_LIMIT: usize = 4097;

impl UringDriver {
    /// Arms accepts on listener `index`: a multishot one while the room holds every
    /// listener's whole queue (with two batches to spare, so it does not flip back and
    /// forth at the edge), otherwise single-shot ones up to the room, the turn's batch and
    /// (without multishot support) one in flight.
    pub(super) fn arm_accept(&mut self, index: usize) {
        let allowance = self.accept_allowance();
        let batch = self.config.accept_batch.max(1);
        let queues = self.listen_queues();
        let singles_armed = self.single_shots_armed();
        let turn_accepts = self.turn_accepts;
        let multishot_supported = self.multishot_accept;
        let Some(Some(listener)) = self.listeners.get_mut(index) else {
            return;
        };
        if listener.multishot {
            return;
        }
        let fd = types::Fd(listener.fd);
        if multishot_supported
            && listener.single_shots == 0
            && allowance >= queues.saturating_add(2 * batch)
        {
            listener.multishot = true;
            listener.multishot_stopping = false;
            let entry = opcode::AcceptMulti::new(fd)
                .flags(libc::SOCK_CLOEXEC)
                .build()
                .user_data(user_data(Kind::Accept, index, MULTISHOT));
            self.push_plain(entry);
            return;
        }
        let in_flight = if multishot_supported { batch } else { 1 };
        let wanted = allowance
            .min(batch.saturating_sub(turn_accepts))
            .min(in_flight)
            .saturating_sub(singles_armed);
        listener.single_shots += wanted;
        for _ in 0..wanted {
            let entry = opcode::Accept::new(fd, std::ptr::null_mut(), std::ptr::null_mut())
                .flags(libc::SOCK_CLOEXEC)
                .build()
                .user_data(user_data(Kind::Accept, index, SINGLE_SHOT));
            self.push_plain(entry);
        }
        if allowance == 0 && singles_armed == 0 {
            // Accepting stops here, at the limit or short of it (the slots kept for
            // upstream connections): counted once per stop, as the gate's pauses are.
            if !self.accept_stopped {
                self.accept_stopped = true;
                self.note_limit();
            }
        } else {
            self.accept_stopped = false;
        }
    }

    /// Connections the driver may still take from the listen queues: the room for new
    /// clients less what the accepted sockets already waiting for a slot will take (each
    /// holds a descriptor), counting with `reserve_upstream` two slots per client — its
    /// own and its request's upstream connection — as `room` does for clients adopted.
    fn accept_allowance(&self) -> usize {
        let per_client = if self.config.reserve_upstream { 2 } else { 1 };
        // Rounded up, as the readiness drivers accept into the last free slot (that
        // client's request may then find no slot for its upstream connection: a 503 at
        // the limit, on every backend).
        self.room()
            .saturating_sub(per_client * self.backlog.len())
            .div_ceil(per_client)
    }

    /// The listen queues' lengths added up: what the multishot accepts may take at once.
    fn listen_queues(&self) -> usize {
        self.listeners
            .iter()
            .flatten()
            .map(|listener| listener.queue_limit)
            .fold(0, usize::saturating_add)
    }

    fn single_shots_armed(&self) -> usize {
        self.listeners
            .iter()
            .flatten()
            .map(|listener| listener.single_shots)
            .sum()
    }

    /// Stops the multishot accepts once the room no longer holds the whole listen queues
    /// (the next turn's wait might be a stall after which they would take them whole);
    /// when their cancellation completes `arm_accept` arms single-shot ones instead. Run at
    /// the start of each turn, before its wait.
    fn stop_multishot_near_the_limit(&mut self) {
        let needed = self
            .listen_queues()
            .saturating_add(self.config.accept_batch.max(1));
        if self.accept_allowance() >= needed {
            return;
        }
        for index in 0..self.listeners.len() {
            let Some(Some(listener)) = self.listeners.get_mut(index) else {
                continue;
            };
            if listener.multishot && !listener.multishot_stopping {
                listener.multishot_stopping = true;
                self.counters.accept_multishot_stops += 1;
                self.push_quiet(
                    opcode::AsyncCancel::new(user_data(Kind::Accept, index, MULTISHOT)).build(),
                );
            }
        }
    }

    fn pause_accepting(&mut self) {
        self.counters.accept_pauses += 1;
        self.cancel_accepts();
    }

    /// Cancels the armed accepts (their `ECANCELED` completions are not re-armed while
    /// accepting is paused or throttled).
    fn cancel_accepts(&mut self) {
        for index in 0..self.listeners.len() {
            let Some(Some(listener)) = self.listeners.get_mut(index) else {
                continue;
            };
            if !listener.armed() {
                continue;
            }
            let state = ListenerState {
                multishot: listener.multishot && !listener.multishot_stopping,
                ..*listener
            };
            listener.multishot_stopping |= listener.multishot;
            self.cancel_listener_accepts(index, &state);
        }
    }

    /// Submits the cancellation of the accepts armed on listener `index` as `state` says.
    pub(super) fn cancel_listener_accepts(&mut self, index: usize, state: &ListenerState) {
        if state.multishot {
            self.push_quiet(
                opcode::AsyncCancel::new(user_data(Kind::Accept, index, MULTISHOT)).build(),
            );
        }
        if state.single_shots > 0 {
            let target = user_data(Kind::Accept, index, SINGLE_SHOT);
            // Several single-shot accepts are armed only where the kernel has multishot
            // accept, and so cancellation of all matches (both Linux 5.19).
            let entry = if self.multishot_accept {
                opcode::AsyncCancel2::new(CancelBuilder::user_data(target).all()).build()
            } else {
                opcode::AsyncCancel::new(target).build()
            };
            self.push_quiet(entry);
        }
    }

    pub(super) fn resume_accepting(&mut self) {
        if self.accept_throttled {
            // The next turn re-arms (`begin_accept_turn`).
            return;
        }
        for index in 0..self.listeners.len() {
            self.arm_accept(index);
        }
    }

    /// An accept completed: `shot` tells the multishot accept (`MULTISHOT`) from a
    /// single-shot one.
    pub(super) fn on_accept(&mut self, index: usize, shot: u32, result: i32, more: bool) {
        let Some(Some(listener)) = self.listeners.get_mut(index) else {
            if result >= 0 {
                sys::close(result);
            }
            return;
        };
        if shot == SINGLE_SHOT {
            listener.single_shots = listener.single_shots.saturating_sub(1);
        } else if !more {
            listener.multishot = false;
            listener.multishot_stopping = false;
        }
        // A single-shot accept's completion never has IORING_CQE_F_MORE.
        let ended = !more || shot == SINGLE_SHOT;
        if result >= 0 {
            let at_limit = self.room() == 0;
            if self.accepting.is_paused() || self.accept_throttled || at_limit {
                self.backlog.push_back((index, result));
                if at_limit && self.accepting.reach_limit() {
                    self.note_limit();
                    self.cancel_accepts();
                }
            } else {
                self.adopt(index, result);
                self.turn_accepts += 1;
                if self.turn_accepts >= self.config.accept_batch.max(1) {
                    self.throttle_accepting();
                }
            }
        } else if is_descriptor_exhaustion(-result)
            && self.accepting.exhausted(self.now, self.config.accept_pause)
        {
            self.pause_accepting();
        }
        // ECANCELED (our pause), ECONNABORTED and the like end nothing else.
        if ended && !self.accepting.is_paused() && !self.accept_throttled {
            self.arm_accept(index);
        }
    }

    /// This turn adopted its batch (`DriverConfig::accept_batch`, as the readiness
    /// driver accepts at most that many per turn): the armed accepts are cancelled, so
    /// the kernel stops taking connections from the listen queue, and those it took
    /// meanwhile wait in the backlog. Without this a multishot accept takes the whole
    /// listen queue at once: after a stall every waiting client got a slot in one turn,
    /// before any of their requests could open its upstream connection, and near
    /// `--max-connections` those requests found no slot left (503
    /// `connection_limit_reached`; issue 19, `results/2026-11-27-vm/slow-clients/limit/`).
    fn throttle_accepting(&mut self) {
        if self.accept_throttled {
            return;
        }
        self.accept_throttled = true;
        self.counters.accept_throttles += 1;
        self.cancel_accepts();
    }

    /// Slots new clients may take now: the limit, less the open connections and, with
    /// `DriverConfig::reserve_upstream`, one per client adopted in this turn or the last —
    /// a client adopted in turn *n* has its receive armed after that turn and its request
    /// handled after turn *n + 1*, when it may need a slot for its upstream connection.
    pub(super) fn room(&self) -> usize {
        let reserved = if self.config.reserve_upstream {
            self.last_turn_accepts + self.turn_accepts
        } else {
            0
        };
        self.config
            .max_connections
            .saturating_sub(self.connections.len() + reserved)
    }

    /// Accepting waits only for slots kept for recent clients' upstream connections: they
    /// are free again two turns after those clients' accept, so the loop must not sleep
    /// until then (nothing else might wake it). At most two extra turns per hold.
    pub(super) fn holding_for_upstream(&self) -> bool {
        self.config.reserve_upstream
            && self.last_turn_accepts + self.turn_accepts > 0
            && self.connections.len() < self.config.max_connections
            && (self.accepting.is_paused() || !self.backlog.is_empty() || self.accept_stopped)
    }

    /// Accepting stopped at the limit: counted as a pause, and as a hold when only the
    /// slots kept for recent clients' upstream connections stopped it.
    fn note_limit(&mut self) {
        self.counters.accept_pauses += 1;
        if self.connections.len() < self.config.max_connections {
            self.counters.accept_holds += 1;
        }
    }

    /// At the start of a turn: a new batch, and the slots kept for the clients adopted two
    /// turns ago are free again (their requests have had their turn). Adopts from the
    /// backlog (up to the batch and the room) and re-arms the accepts once the backlog is
    /// empty; a backlog left without room waits for `slot_freed` or the next turn.
    pub(super) fn begin_accept_turn(&mut self) {
        self.last_turn_accepts = self.turn_accepts;
        self.turn_accepts = 0;
        self.adopt_or_arm();
        self.stop_multishot_near_the_limit();
    }

    fn adopt_or_arm(&mut self) {
        if !self.accept_throttled && self.backlog.is_empty() {
            self.rearm_within_room();
            return;
        }
        self.accept_throttled = false;
        let batch = self.config.accept_batch.max(1);
        while self.turn_accepts < batch && self.room() > 0 {
            let Some((listener, fd)) = self.backlog.pop_front() else {
                break;
            };
            self.adopt(listener, fd);
            self.turn_accepts += 1;
        }
        if !self.backlog.is_empty() {
            if self.room() == 0 {
                // Now waiting for room (`slot_freed`, or the next turn's), not for a batch.
                if self.accepting.reach_limit() {
                    self.note_limit();
                }
            } else {
                // The batch is used up: more at the next turn.
                self.accept_throttled = true;
            }
            return;
        }
        self.rearm_within_room();
    }

    /// Leaves the limit's pause when there is room, and tops the accepts up to what fits
    /// (`arm_accept`: single-shot accepts near the limit stop short of it without the
    /// gate's pause, so they are topped up at each turn and each freed slot).
    fn rearm_within_room(&mut self) {
        if self.room() > 0 {
            self.accepting.below_limit();
        }
        if !self.accepting.is_paused() {
            self.resume_accepting();
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
        self.counters.open_connections += 1;
        Some(self.generations.stamp(&mut self.connections, slot))
    }

    /// After a slot was freed: accepted connections waiting for a slot are adopted at the
    /// start of the next turn, a batch at most (`begin_accept_turn`), not now — the
    /// requests this turn handles may need the slot for their upstream connection first,
    /// as on the readiness drivers, which accept only at their next turn. With no
    /// connection waiting, accepting resumes.
    pub(super) fn slot_freed(&mut self) {
        if self.accept_throttled {
            return;
        }
        if !self.backlog.is_empty() {
            self.accept_throttled = true;
            return;
        }
        self.rearm_within_room();
    }

    /// The `IORING_OP_CONNECT` completed: `result` is `connect(2)`'s outcome. A connection
    /// the server closed meanwhile (pinned by `CONNECTING`) is finished now.
    pub(super) fn on_connect(&mut self, slot: usize, generation: u32, result: i32) {
        let Some(connection) = self.occupant(slot, generation) else {
            return;
        };
        if connection.flags & CONNECTING == 0 {
            return;
        }
        connection.flags &= !CONNECTING;
        connection.connect_address = None;
        if connection.flags & CLOSING != 0 {
            if !connection.pinned() {
                self.finish_close(slot);
            }
            return;
        }
        let id = ConnectionId {
            slot: slot as u32,
            generation,
        };
        if result >= 0 {
            let receive = connection.flags & RECV_ARMED != 0;
            self.completions
                .push_back(Completion::Connected { connection: id });
            if receive {
                self.arm_recv(slot);
            }
            let Some(connection) = self.connections.get_mut(slot) else {
                return;
            };
            if !connection.output.is_empty() {
                self.start_send(slot);
            }
        } else {
            connection.flags &= !(RECV_ARMED | WRITE_WAITING);
            self.drop_output(slot);
            self.completions.push_back(Completion::Failed {
                connection: id,
                error: io::Error::from_raw_os_error(-result),
            });
        }
    }
}
