//! Accepting and opening connections on the readiness driver: accept until `EAGAIN` (at
//! most `accept_batch` per listener per turn, then the others get their turn), and put each
//! new socket — accepted, or connecting out — in the slot table and the poller.
//!
//! When accepting pauses and resumes is the shared [`AcceptGate`](crate::core::accept_gate)'s
//! decision; pausing here means dropping the listeners' interest on level-triggered pollers
//! (they would report the pending connections on every wait: a busy loop) and simply not
//! accepting on edge-triggered ones. Resuming marks every listener ready, since an
//! edge-triggered poller will not report connections that queued meanwhile.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use super::{Connection, LISTENER_TOKEN_BASE, MAY_READ, MAY_WRITE, ReadinessDriver};
use crate::core::accept_gate::is_descriptor_exhaustion;
use crate::driver::{Completion, ConnectionId, ListenerId};
use crate::poller::{Interest, Poller};
use crate::sys;

impl<P: Poller> ReadinessDriver<P> {
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

    /// Accepts a batch from the listener at `index`; a batch cut short leaves the listener
    /// ready for the next turn.
    pub(super) fn accept_from(&mut self, index: usize) {
        let Some(Some(listener)) = self.listeners.get(index) else {
            return;
        };
        let listener_fd = listener.fd;
        for _ in 0..self.config.accept_batch {
            if self.accepting.is_paused() {
                return;
            }
            if self.room() == 0 {
                if self.accepting.reach_limit() {
                    if self.connections.len() < self.config.max_connections {
                        self.counters.accept_holds += 1;
                    }
                    self.pause_accepting();
                }
                return;
            }
            self.counters.accept_calls += 1;
            match sys::accept(listener_fd) {
                Ok((fd, peer)) => {
                    self.adopt(index, fd, peer);
                    self.turn_accepts += 1;
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    self.counters.would_block += 1;
                    return;
                }
                Err(error) if error.raw_os_error().is_some_and(is_descriptor_exhaustion) => {
                    if self.accepting.exhausted(self.now, self.config.accept_pause) {
                        self.pause_accepting();
                    }
                    return;
                }
                // ECONNABORTED, EPROTO, EPERM (firewall): that connection is gone; go on.
                Err(_) => {}
            }
        }
        self.listeners_ready.push(index as u32);
    }

    /// Slots new clients may take now: the limit, less the open connections and, with
    /// `DriverConfig::reserve_upstream`, one per client accepted in this turn (its request
    /// is read when the server handles the turn's completions, and may need a slot for its
    /// upstream connection).
    fn room(&self) -> usize {
        let reserved = if self.config.reserve_upstream {
            self.turn_accepts
        } else {
            0
        };
        self.config
            .max_connections
            .saturating_sub(self.connections.len() + reserved)
    }

    /// Before a wait: the slots kept for the last turn's clients are free again (their
    /// requests have been handled); accepting resumes if only they had stopped it.
    pub(super) fn begin_accept_turn(&mut self) {
        if self.turn_accepts == 0 {
            return;
        }
        self.turn_accepts = 0;
        if self.room() > 0 && self.accepting.below_limit() {
            self.resume_accepting();
        }
    }

    /// After a wait: resumes accepting if its pause ended, then accepts from the listeners
    /// left ready (a batch cut short, a new listener, accepting resumed).
    pub(super) fn accept_pending(&mut self) {
        if self.accepting.tick(self.now) {
            self.resume_accepting();
        }
        if !self.accepting.is_paused() && !self.listeners_ready.is_empty() {
            let ready = std::mem::take(&mut self.listeners_ready);
            for index in ready {
                self.accept_from(index as usize);
            }
        }
    }

    /// A connection closed: accepting resumes if it waited for a free slot.
    pub(super) fn slot_freed(&mut self) {
        if self.room() > 0 && self.accepting.below_limit() {
            self.resume_accepting();
        }
    }

    /// Puts a new connected or connecting socket in the slot table and the poller.
    pub(super) fn open_connection(
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
            file_ready: 0,
            hung_up: false,
        });
        if let Err(error) = self.poller.register(fd, slot, interest) {
            self.connections.remove(slot);
            self.counters.close_calls += 1;
            sys::close(fd);
            return Err(error);
        }
        self.counters.open_connections += 1;
        Ok(self.generations.stamp(&mut self.connections, slot))
    }

    fn adopt(&mut self, listener: usize, fd: RawFd, peer: SocketAddr) {
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
}
