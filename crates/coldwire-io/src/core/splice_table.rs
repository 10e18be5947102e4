//! The bookkeeping of socket-to-socket transfers (`Splice::splice`) that both completion
//! drivers share: which transfers run, the pipe pool they draw from, the copies finished
//! transfers kept for a cache, and the checks and completions of the contract. How bytes
//! move is each backend's own (`readiness/splice.rs`, `uring/splice.rs`):
//! a [`Transfer`] carries what both know of it plus the backend's own `state`.
//!
//! Invariants: a transfer is keyed by its destination's slot, and `sources` maps its
//! source's slot back to that key, so a connection takes part in at most one transfer as
//! each end; a pipe goes back to the pool only when empty (it would leak bytes into the
//! next transfer).

use std::collections::HashMap;
use std::io;

use crate::driver::{Completion, ConnectionId};
use crate::pools::pipe_pool::{Pipe, PipePool};

/// Bytes of an unbounded transfer (a tunnel direction): until the source ends.
pub(crate) const UNTIL_END: u64 = u64::MAX;
/// Pipe size: 256 KiB moves four loopback segments per splice while 256 pipes stay within
/// the default per-user pipe budget (64 MiB).
pub const PIPE_BYTES: usize = 256 * 1024;
/// Empty pipes kept per driver.
pub const MAX_FREE_PIPES: usize = 64;
/// Most bytes reserved up front for a copy.
const COPY_RESERVE_MAX: u64 = 64 << 20;

/// A copy pipe and the copy collected through it (a transfer with `keep_copy`).
pub(crate) type KeptCopy = (Pipe, Vec<u8>);

/// A caller error against the `Splice::splice` contract.
fn invalid<T>(why: &'static str) -> io::Result<T> {
    Err(io::Error::new(io::ErrorKind::InvalidInput, why))
}

/// Checks a `Splice::splice` call against the contract: two different connections, the
/// source open (`source_open`), the destination open with no output queued before the
/// transfer (`destination_queued`: `None` when closed, else whether output that the
/// transfer may not wait for is queued).
pub(crate) fn check_call(
    source: ConnectionId,
    destination: ConnectionId,
    source_open: bool,
    destination_queued: Option<bool>,
) -> io::Result<()> {
    if source == destination {
        return invalid("a splice needs two connections");
    }
    if !source_open {
        return invalid("the source connection is closed");
    }
    match destination_queued {
        None => invalid("the destination connection is closed"),
        Some(true) => invalid("the destination still has queued output"),
        Some(false) => Ok(()),
    }
}

/// One transfer: what both backends keep of it, and the backend's own `state`.
pub(crate) struct Transfer<S> {
    pub(crate) source: ConnectionId,
    pub(crate) destination: ConnectionId,
    /// Bytes still to take from the source ([`UNTIL_END`]: unbounded).
    pub(crate) remaining: u64,
    /// Bytes in `pipe`, waiting for the destination.
    pub(crate) in_pipe: usize,
    pub(crate) pipe: Pipe,
    /// With `keep_copy`: the copy pipe and the copy collected so far.
    pub(crate) copy: Option<KeptCopy>,
    pub(crate) state: S,
}

/// What the table needs of a backend's own transfer state.
pub(crate) trait TransferState {
    /// Whether the copy pipe holds none of the transfer's bytes (so it may be reused).
    fn copy_pipe_empty(&self) -> bool;
}

impl<S> Transfer<S> {
    /// A transfer of `length` bytes that has moved nothing yet.
    pub(crate) fn new(
        source: ConnectionId,
        destination: ConnectionId,
        length: u64,
        (pipe, copy): (Pipe, Option<KeptCopy>),
        state: S,
    ) -> Self {
        Transfer {
            source,
            destination,
            remaining: length,
            in_pipe: 0,
            pipe,
            copy,
            state,
        }
    }
}

/// The running transfers of one driver and its pipe pool.
pub(crate) struct SpliceTable<S> {
    /// Transfers by their destination's slot.
    pub(crate) transfers: HashMap<u32, Transfer<S>>,
    /// Slot of a source → slot of the destination whose transfer reads it.
    sources: HashMap<u32, u32>,
    pub(crate) pipes: PipePool,
    /// Copies of finished transfers, until the server takes them.
    copies: HashMap<ConnectionId, Vec<u8>>,
}

impl<S: TransferState> SpliceTable<S> {
    /// No transfers; pipes of [`PIPE_BYTES`], at most [`MAX_FREE_PIPES`] kept.
    pub(crate) fn new() -> Self {
        SpliceTable {
            transfers: HashMap::new(),
            sources: HashMap::new(),
            pipes: PipePool::new(PIPE_BYTES, MAX_FREE_PIPES),
            copies: HashMap::new(),
        }
    }

    /// True when no transfer runs (the common case: the map lookups are skipped).
    pub(crate) fn is_idle(&self) -> bool {
        self.transfers.is_empty()
    }

    /// The pipes for a new transfer of `length` bytes from `source` to `destination` (and,
    /// with `keep_copy`, a copy pipe and the copy's first allocation); an error when either
    /// connection already takes part in a transfer or no pipe can be had.
    pub(crate) fn take_pipes(
        &mut self,
        source: ConnectionId,
        destination: ConnectionId,
        length: u64,
        keep_copy: bool,
    ) -> io::Result<(Pipe, Option<KeptCopy>)> {
        if self.transfers.contains_key(&destination.slot) || self.sources.contains_key(&source.slot)
        {
            return invalid("a splice is already running on this connection");
        }
        let pipe = self.pipes.take()?;
        if !keep_copy {
            return Ok((pipe, None));
        }
        // The whole body is collected: reserve it once (bounded, in case of a huge or
        // unbounded length) instead of growing and copying it step by step.
        let reserve = usize::try_from(length.min(COPY_RESERVE_MAX)).unwrap_or(0);
        match self.pipes.take() {
            Ok(copy_pipe) => Ok((pipe, Some((copy_pipe, Vec::with_capacity(reserve))))),
            Err(error) => {
                self.pipes.give_back(pipe, true);
                Err(error)
            }
        }
    }

    /// Records a new transfer (its pipes from [`Self::take_pipes`]).
    pub(crate) fn insert(&mut self, transfer: Transfer<S>) {
        let (source, destination) = (transfer.source, transfer.destination);
        self.transfers.insert(destination.slot, transfer);
        self.sources.insert(source.slot, destination.slot);
    }

    /// The transfer running to `destination` (not to an earlier occupant of its slot).
    pub(crate) fn running(&self, destination: ConnectionId) -> Option<&Transfer<S>> {
        self.transfers
            .get(&destination.slot)
            .filter(|transfer| transfer.destination == destination)
    }

    /// The keys of the transfers `slot` takes part in: as destination, then as source.
    pub(crate) fn involving(&self, slot: u32) -> [Option<u32>; 2] {
        let as_destination = self.transfers.contains_key(&slot).then_some(slot);
        [as_destination, self.sources.get(&slot).copied()]
    }

    /// Removes a transfer and gives its pipes back (each closed unless empty); returns its
    /// source and destination.
    pub(crate) fn remove(&mut self, destination_slot: u32) -> Option<(ConnectionId, ConnectionId)> {
        let transfer = self.transfers.remove(&destination_slot)?;
        self.sources.remove(&transfer.source.slot);
        self.pipes.give_back(transfer.pipe, transfer.in_pipe == 0);
        if let Some((copy_pipe, _)) = transfer.copy {
            let empty = transfer.state.copy_pipe_empty();
            self.pipes.give_back(copy_pipe, empty);
        }
        Some((transfer.source, transfer.destination))
    }

    /// The destination of a transfer about to end, and the copy it collected (taken out).
    pub(crate) fn take_result(
        &mut self,
        destination_slot: u32,
    ) -> Option<(ConnectionId, Option<Vec<u8>>)> {
        let transfer = self.transfers.get_mut(&destination_slot)?;
        let copy = transfer
            .copy
            .as_mut()
            .map(|(_, bytes)| std::mem::take(bytes));
        Some((transfer.destination, copy))
    }

    /// The completion of an ended transfer to `destination`: `Sent` (its copy kept for
    /// [`Self::take_copy`]) without an `error`, `Failed` with one.
    pub(crate) fn completion(
        &mut self,
        destination: ConnectionId,
        copy: Option<Vec<u8>>,
        error: Option<io::Error>,
    ) -> Completion {
        match error {
            None => {
                if let Some(copy) = copy {
                    self.copies.insert(destination, copy);
                }
                Completion::Sent {
                    connection: destination,
                }
            }
            Some(error) => Completion::Failed {
                connection: destination,
                error,
            },
        }
    }

    /// The copy kept by a finished transfer to `destination`.
    pub(crate) fn take_copy(&mut self, destination: ConnectionId) -> Option<Vec<u8>> {
        self.copies.remove(&destination)
    }

    /// Forgets the copies kept for connections in `slot` (it is closing).
    pub(crate) fn forget_copies(&mut self, slot: u32) {
        self.copies.retain(|id, _| id.slot != slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy pipe that is always drained.
    struct Drained;

    impl TransferState for Drained {
        fn copy_pipe_empty(&self) -> bool {
            true
        }
    }

    fn id(slot: u32) -> ConnectionId {
        ConnectionId {
            slot,
            generation: 1,
        }
    }

    #[test]
    fn calls_against_the_contract_are_refused_with_their_reason() {
        let refused = |source, destination, source_open, queued| {
            check_call(source, destination, source_open, queued)
                .unwrap_err()
                .to_string()
        };
        assert!(refused(id(1), id(1), true, Some(false)).contains("two connections"));
        assert!(refused(id(1), id(2), false, Some(false)).contains("source"));
        assert!(refused(id(1), id(2), true, None).contains("destination connection is closed"));
        assert!(refused(id(1), id(2), true, Some(true)).contains("queued output"));
        assert!(check_call(id(1), id(2), true, Some(false)).is_ok());
    }

    #[test]
    fn a_transfer_is_found_from_both_ends_and_keeps_its_copy() {
        let mut table = SpliceTable::<Drained>::new();
        let (source, destination) = (id(3), id(7));
        let pipes = table.take_pipes(source, destination, 10, true).unwrap();
        table.insert(Transfer::new(source, destination, 10, pipes, Drained));
        let again = table.take_pipes(id(9), destination, 10, false);
        assert_eq!(again.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(table.involving(7), [Some(7), None]);
        assert_eq!(table.involving(3), [None, Some(7)]);
        assert!(table.running(destination).is_some());
        let stale = ConnectionId {
            slot: 7,
            generation: 2,
        };
        assert!(
            table.running(stale).is_none(),
            "a later occupant of the slot"
        );

        if let Some((_, bytes)) = table.transfers.get_mut(&7).and_then(|t| t.copy.as_mut()) {
            bytes.extend_from_slice(b"kept");
        }
        let (ended, copy) = table.take_result(7).unwrap();
        assert_eq!(table.remove(7), Some((source, destination)));
        assert!(table.is_idle());
        assert_eq!(table.involving(3), [None, None]);
        let completion = table.completion(ended, copy, None);
        assert!(matches!(completion, Completion::Sent { connection } if connection == destination));
        assert_eq!(table.take_copy(destination).as_deref(), Some(&b"kept"[..]));
    }
}
