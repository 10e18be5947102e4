//! Bounded transfers done by the kernel itself (`Splice::splice_in_kernel`): a response
//! body of known length handed to a [`BodySockmap`] — the upstream socket's next `length`
//! bytes go out of the client socket with no system call and no wake-up per chunk, then
//! both sockets are plain sockets again. A child module of `readiness`.
//!
//! Like a pipe splice, a transfer acts as output queued on the destination and completes
//! with `Sent { destination }`, or `Failed { destination }` (`UnexpectedEof` when the
//! upstream ends early, `BrokenPipe` when the client goes away).
//!
//! Nothing in the kernel wakes the loop when the body is complete (the upstream is
//! usually silent after it, waiting for the next request), so the driver looks at each
//! transfer on a timer of its own (a map lookup, a `TCP_INFO` and a `TIOCOUTQ`): first
//! after [`FIRST_LOOK`], then after a quarter of the time the transfer has run so far,
//! at most [`LONGEST_LOOK`] — a long body is looked at a few dozen times, and its end is
//! noticed at most a quarter of its duration late. The sockmap is created on first use; if the kernel
//! refuses it, every call is refused and callers fall back (to a pipe splice).
//!
//! Invariants: while a transfer runs nobody receives from its source or queues output on
//! its destination (the `Splice::splice` contract); a transfer leaves the maps before
//! either socket is closed or reused; after it both sockets' readiness hints are set
//! ("try first"), since edges that came while the kernel owned them may be gone.

use std::collections::HashMap;
use std::io;
use std::time::{Duration, Instant};

use super::{MAY_READ, MAY_WRITE, ReadinessDriver};
use crate::core::generations::current;
use crate::core::splice_table::check_call;
use crate::driver::{Completion, ConnectionId};
use crate::poller::Poller;
use crate::sockmap::{BodySockmap, BodyState, BodyTransfer};

/// When a transfer is first looked at after its start.
const FIRST_LOOK: Duration = Duration::from_millis(1);
/// The longest time between two looks at a transfer.
const LONGEST_LOOK: Duration = Duration::from_millis(16);

/// Concurrent kernel transfers one driver's maps hold.
const CAPACITY: u32 = 4096;

struct Running {
    source: ConnectionId,
    destination: ConnectionId,
    transfer: BodyTransfer,
    started: Instant,
    next_look: Instant,
}

/// The kernel transfers of one driver, keyed by destination slot.
#[derive(Default)]
pub(super) struct KernelBodies {
    /// `None` until first used; `Some(Err)` once the kernel refused (not asked again).
    sockmap: Option<Result<BodySockmap, String>>,
    running: HashMap<u32, Running>,
    /// Source slot → destination slot.
    sources: HashMap<u32, u32>,
}

impl KernelBodies {
    /// Whether any transfer runs.
    pub(super) fn is_busy(&self) -> bool {
        !self.running.is_empty()
    }

    /// When the next transfer is due to be looked at.
    pub(super) fn next_look(&self) -> Option<Instant> {
        self.running.values().map(|running| running.next_look).min()
    }

    fn sockmap(&mut self) -> io::Result<&BodySockmap> {
        let sockmap = self
            .sockmap
            .get_or_insert_with(|| BodySockmap::new(CAPACITY).map_err(|error| error.to_string()));
        sockmap
            .as_ref()
            .map_err(|message| io::Error::new(io::ErrorKind::Unsupported, message.clone()))
    }

    /// The sockmap, once created.
    fn loaded(&self) -> Option<&BodySockmap> {
        match self.sockmap.as_ref() {
            Some(Ok(sockmap)) => Some(sockmap),
            _ => None,
        }
    }
}

impl<P: Poller> ReadinessDriver<P> {
    /// Starts a kernel transfer (see the module doc).
    pub(super) fn start_kernel_body(
        &mut self,
        source: ConnectionId,
        destination: ConnectionId,
        length: u64,
    ) -> io::Result<()> {
        let source_fd = current(&mut self.connections, source).map(|connection| connection.fd);
        let destination_state = current(&mut self.connections, destination)
            .map(|connection| (connection.fd, !connection.output.is_empty()));
        check_call(
            source,
            destination,
            source_fd.is_some(),
            destination_state.map(|(_, queued)| queued),
        )?;
        let (Some(source_fd), Some((destination_fd, _))) = (source_fd, destination_state) else {
            return Err(io::Error::from(io::ErrorKind::NotConnected));
        };
        let busy = self.kernel_bodies.running.contains_key(&destination.slot)
            || self.kernel_bodies.sources.contains_key(&source.slot)
            || self
                .splices
                .involving(source.slot)
                .iter()
                .any(Option::is_some)
            || self
                .splices
                .involving(destination.slot)
                .iter()
                .any(Option::is_some);
        if busy {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a splice is already running on this connection",
            ));
        }
        let transfer = self
            .kernel_bodies
            .sockmap()?
            .start(source_fd, destination_fd, length)?;
        self.kernel_bodies
            .sources
            .insert(source.slot, destination.slot);
        let now = Instant::now();
        self.kernel_bodies.running.insert(
            destination.slot,
            Running {
                source,
                destination,
                transfer,
                started: now,
                next_look: now + FIRST_LOOK,
            },
        );
        self.counters.kernel_bodies += 1;
        self.poll_kernel_body(destination.slot);
        Ok(())
    }

    /// Looks at the running kernel transfers that are due (once per loop turn).
    pub(super) fn poll_kernel_bodies(&mut self) {
        if !self.kernel_bodies.is_busy() {
            return;
        }
        let now = self.now;
        let due: Vec<u32> = self
            .kernel_bodies
            .running
            .iter()
            .filter(|(_, running)| running.next_look <= now)
            .map(|(slot, _)| *slot)
            .collect();
        for slot in due {
            self.poll_kernel_body(slot);
            if let Some(running) = self.kernel_bodies.running.get_mut(&slot) {
                let wait = (now.saturating_duration_since(running.started) / 4)
                    .clamp(FIRST_LOOK, LONGEST_LOOK);
                running.next_look = now + wait;
            }
        }
    }

    fn poll_kernel_body(&mut self, destination_slot: u32) {
        let Some(running) = self.kernel_bodies.running.get(&destination_slot) else {
            return;
        };
        let Some(sockmap) = self.kernel_bodies.loaded() else {
            return;
        };
        let error = match sockmap.poll(&running.transfer) {
            Ok(BodyState::Running { .. }) => return,
            Ok(BodyState::Delivered) => None,
            Ok(BodyState::Truncated) => Some(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the upstream ended before the body's length",
            )),
            Ok(BodyState::DestinationClosed) => Some(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the client went away during the body",
            )),
            Err(error) => Some(error),
        };
        let destination = running.destination;
        self.end_kernel_body(destination_slot);
        self.completions.push_back(match error {
            None => Completion::Sent {
                connection: destination,
            },
            Some(error) => Completion::Failed {
                connection: destination,
                error,
            },
        });
    }

    /// Takes a transfer's sockets out of the maps and gives both their hints back.
    fn end_kernel_body(&mut self, destination_slot: u32) {
        let Some(running) = self.kernel_bodies.running.remove(&destination_slot) else {
            return;
        };
        self.kernel_bodies.sources.remove(&running.source.slot);
        if let Some(sockmap) = self.kernel_bodies.loaded() {
            // A reset of the upstream shows again on its next receive.
            let _ = sockmap.finish(&running.transfer);
        }
        for id in [running.source, running.destination] {
            if let Some(connection) = current(&mut self.connections, id) {
                connection.flags |= MAY_READ | MAY_WRITE;
            }
            self.update_interest(id);
        }
    }

    /// `slot` is closing: its kernel transfer ends without a completion, before the socket
    /// goes.
    pub(super) fn kernel_body_closed(&mut self, slot: u32) {
        if !self.kernel_bodies.is_busy() {
            return;
        }
        if let Some(destination) = self.kernel_bodies.sources.get(&slot).copied() {
            self.end_kernel_body(destination);
        }
        self.end_kernel_body(slot);
    }

    /// Body bytes a kernel transfer to `destination` has still to write into its socket.
    pub(super) fn kernel_body_backlog(&self, destination: ConnectionId) -> u64 {
        let Some(running) = self.kernel_bodies.running.get(&destination.slot) else {
            return 0;
        };
        if running.destination != destination {
            return 0;
        }
        let Some(sockmap) = self.kernel_bodies.loaded() else {
            return 0;
        };
        let delivered = sockmap.delivered(&running.transfer).unwrap_or(0);
        running.transfer.length().saturating_sub(delivered)
    }

    /// Bytes a kernel transfer to `destination` has written so far (0 when none runs).
    pub(super) fn kernel_body_delivered(&self, destination: ConnectionId) -> u64 {
        let Some(running) = self.kernel_bodies.running.get(&destination.slot) else {
            return 0;
        };
        match self.kernel_bodies.loaded() {
            Some(sockmap) if running.destination == destination => {
                sockmap.delivered(&running.transfer).unwrap_or(0)
            }
            _ => 0,
        }
    }
}
