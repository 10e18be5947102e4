//! Accepting and opening connections on the io_uring driver: one multishot `ACCEPT` per
//! listener (single-shot, re-armed at each completion, where the kernel lacks the
//! multishot form), one `getpeername` per accepted connection (multishot accept returns no
//! address), and the completions of outgoing connects (`IORING_OP_CONNECT`, submitted by
//! `api.rs`).
//!
//! When accepting pauses and resumes is the shared [`AcceptGate`](crate::core::accept_gate)'s
//! decision; pausing here cancels the armed accepts. Connections the kernel accepted
//! meanwhile (an accept completion races its cancellation) wait in the driver's backlog
//! until a slot frees, rather than being closed.

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use io_uring::{opcode, types};

use super::connection::{
    CLOSING, CONNECTING, Connection, Kind, MAX_SLOTS, RECV_ARMED, WRITE_WAITING, user_data,
};
use super::driver::UringDriver;
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

impl UringDriver {
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

    fn pause_accepting(&mut self) {
        self.counters.accept_pauses += 1;
        self.cancel_accepts();
    }

    /// Cancels the armed accepts (their `ECANCELED` completions are not re-armed while
    /// accepting is paused or throttled).
    fn cancel_accepts(&mut self) {
        let armed: Vec<usize> = self
            .listeners
            .iter()
            .enumerate()
            .filter(|(_, listener)| listener.as_ref().is_some_and(|state| state.accepting))
            .map(|(index, _)| index)
            .collect();
        for index in armed {
            self.push_quiet(opcode::AsyncCancel::new(user_data(Kind::Accept, index, 0)).build());
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

    pub(super) fn on_accept(&mut self, index: usize, result: i32, more: bool) {
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
        if !more && !self.accepting.is_paused() && !self.accept_throttled {
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
            && (self.accepting.is_paused() || !self.backlog.is_empty())
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
        if !self.accept_throttled && self.backlog.is_empty() {
            if self.room() > 0 && self.accepting.below_limit() {
                self.resume_accepting();
            }
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
        if self.room() > 0 && self.accepting.below_limit() {
            self.resume_accepting();
        }
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
