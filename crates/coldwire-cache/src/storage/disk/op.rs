//! [`FileOp`]: one file operation of the disk store — the write of an aggregation buffer
//! (records), the rewrite of one record header as dead (a kill), or a data sync — and what
//! its completion does: publish the records it wrote, or turn the disk tier off for them.
//!
//! An operation is performed either by the store's I/O thread (`run`: `pwrite`,
//! `fdatasync`) or, on `--io uring`, by a worker's ring: the worker takes it from the store
//! ([`Storage::take_file_ops`](crate::storage::Storage::take_file_ops)), submits what
//! [`FileOp::request`] says, and hands the result to [`FileOp::complete`]. Both paths share
//! everything after the system call, so the crash-safety argument (docs/disk-store.md) is
//! the same for both.
//!
//! Invariants: a record is published (its range handed to the index) only once the whole
//! buffer holding it is written; a short write continues where it stopped; the buffer, the
//! file and the records stay owned by the operation until its last completion; a failed
//! record write drops its records and tells the I/O thread (which seals the segment).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::format::{self, Head, Lengths};
use super::{Copy, Entry, Job, Shared, lock};
use crate::storage::{Body, FileRange, Restored};

/// Aggregation buffers kept for reuse at most, and the largest capacity kept.
const KEEP_BUFFERS: usize = 8;
const KEEP_CAPACITY: usize = 4 << 20;

/// A record placed in a buffer, published once the buffer is written.
#[derive(Debug)]
pub(super) struct Placed {
    pub seq: u64,
    pub key: String,
    /// The head, for an object indexed only once written (disk only).
    pub deferred: Option<Head>,
    /// A head record, not an object: nothing to publish.
    pub head_record: bool,
    pub record_offset: u64,
    pub lengths: Lengths,
    /// Bytes reserved in the queue for it.
    pub reserved: u64,
    /// A disk-only object re-appended from a segment being deleted (the second chance):
    /// the sequence number of the entry it replaces once written (`deferred` is its head).
    pub evacuated_from: Option<u64>,
}

#[derive(Debug)]
enum What {
    /// `buffer` at `offset` of segment `segment`, holding `placed`.
    Records {
        segment: u64,
        buffer: Vec<u8>,
        placed: Vec<Placed>,
    },
    /// A dead header at `offset`.
    Kill { header: Vec<u8> },
    /// `fdatasync` of the file.
    Sync,
}

/// What a worker's ring is asked to do for a [`FileOp`].
#[derive(Clone, Copy, Debug)]
pub enum FileOpRequest<'a> {
    /// Write `bytes` at `offset` of `fd`.
    Write {
        /// The segment file.
        fd: RawFd,
        /// Where.
        offset: u64,
        /// What (owned by the operation until its completion).
        bytes: &'a [u8],
    },
    /// `fdatasync(fd)`.
    DataSync {
        /// The segment file.
        fd: RawFd,
    },
}

/// One file operation of the disk store (see the module docs).
#[derive(Debug)]
pub struct FileOp {
    shared: Arc<Shared>,
    file: Arc<File>,
    what: What,
    /// For writes: where the (remaining) bytes go, and how many are written already.
    offset: u64,
    done: usize,
    /// Queued for the workers' rings (counted in `ring_outstanding` until it ends).
    queued: bool,
    /// Taken by a worker's ring (its submissions and completions are counted).
    on_ring: bool,
}

impl FileOp {
    pub(super) fn records(
        shared: &Arc<Shared>,
        file: Arc<File>,
        segment: u64,
        offset: u64,
        buffer: Vec<u8>,
        placed: Vec<Placed>,
    ) -> FileOp {
        *lock(&shared.state).in_flight.entry(segment).or_default() += 1;
        FileOp::new(
            shared,
            file,
            offset,
            What::Records {
                segment,
                buffer,
                placed,
            },
        )
    }

    pub(super) fn kill(
        shared: &Arc<Shared>,
        file: Arc<File>,
        record_offset: u64,
        seq: u64,
        lengths: Lengths,
    ) -> FileOp {
        let header = format::record_header(format::Kind::Dead, seq, lengths, 0).to_vec();
        FileOp::new(shared, file, record_offset, What::Kill { header })
    }

    pub(super) fn sync(shared: &Arc<Shared>, file: Arc<File>) -> FileOp {
        FileOp::new(shared, file, 0, What::Sync)
    }

    fn new(shared: &Arc<Shared>, file: Arc<File>, offset: u64, what: What) -> FileOp {
        FileOp {
            shared: shared.clone(),
            file,
            what,
            offset,
            done: 0,
            queued: false,
            on_ring: false,
        }
    }

    /// Marks it queued for the workers' rings.
    pub(super) fn queue_for_ring(&mut self) {
        self.queued = true;
        self.shared
            .counters
            .ring_outstanding
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Marks it taken by a worker's ring and counts the submission.
    pub(super) fn take_for_ring(&mut self) {
        self.on_ring = true;
        self.count_submission();
    }

    fn count_submission(&self) {
        let counters = &self.shared.counters;
        let counter = match self.what {
            What::Sync => &counters.ring_syncs_submitted,
            _ => &counters.ring_writes_submitted,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn bytes(&self) -> &[u8] {
        match &self.what {
            What::Records { buffer, .. } => &buffer[self.done..],
            What::Kill { header } => &header[self.done..],
            What::Sync => &[],
        }
    }

    /// What to submit now.
    pub fn request(&self) -> FileOpRequest<'_> {
        let fd = self.file.as_raw_fd();
        match self.what {
            What::Sync => FileOpRequest::DataSync { fd },
            _ => FileOpRequest::Write {
                fd,
                offset: self.offset + self.done as u64,
                bytes: self.bytes(),
            },
        }
    }

    /// Performs it here, blocking (the I/O thread), with what follows.
    pub(super) fn run(self) {
        let mut next = Some(self);
        while let Some(op) = next.take() {
            let result = match op.request() {
                FileOpRequest::Write { offset, bytes, .. } => op.file.write_at(bytes, offset),
                FileOpRequest::DataSync { .. } => op.file.sync_data().map(|()| 0),
            };
            next = op.complete(result);
        }
    }

    /// The result of the last request: bytes written (0 for a sync). Returns the operation
    /// to submit next, if any: the rest of a short write, or the sync a sealed segment was
    /// waiting for.
    pub fn complete(mut self, result: io::Result<usize>) -> Option<FileOp> {
        let counters = &self.shared.counters;
        if self.on_ring {
            let counter = match self.what {
                What::Sync => &counters.ring_syncs_completed,
                _ => &counters.ring_writes_completed,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        let result = match (&self.what, result) {
            (What::Sync, result) => result.map(|_| ()),
            (_, Ok(0)) if !self.bytes().is_empty() => Err(io::ErrorKind::WriteZero.into()),
            (_, Ok(written)) => {
                self.done += written;
                if !self.bytes().is_empty() {
                    if self.on_ring {
                        self.count_submission();
                    }
                    return Some(self);
                }
                Ok(())
            }
            (_, Err(error)) if error.kind() == io::ErrorKind::Interrupted => {
                if self.on_ring {
                    self.count_submission();
                }
                return Some(self);
            }
            (_, Err(error)) => Err(error),
        };
        if self.queued {
            counters.ring_outstanding.fetch_sub(1, Ordering::Relaxed);
        }
        let shared = self.shared.clone();
        let file = self.file.clone();
        let on_ring = self.on_ring;
        let queued = self.queued;
        let mut next = match self.what {
            What::Records {
                segment,
                buffer,
                placed,
            } => {
                let bytes = buffer.len() as u64;
                shared.give_back_buffer(buffer);
                written(&shared, &file, segment, bytes, placed, result)
            }
            What::Kill { .. } => {
                if let Err(error) = result {
                    shared.failed("kill a record in", &error);
                }
                None
            }
            What::Sync => {
                if let Err(error) = result {
                    shared.failed("sync", &error);
                }
                None
            }
        };
        if let Some(op) = next.as_mut() {
            if queued {
                op.queue_for_ring();
            }
            if on_ring {
                op.take_for_ring();
            }
        }
        next
    }
}

/// A records buffer was written (or failed): publishes or drops its records, and returns
/// the sync its segment waits for once its last write is done.
fn written(
    shared: &Arc<Shared>,
    file: &Arc<File>,
    segment: u64,
    bytes: u64,
    placed: Vec<Placed>,
    result: io::Result<()>,
) -> Option<FileOp> {
    let sync_now = {
        let mut state = lock(&shared.state);
        let state = &mut *state;
        let left = state.in_flight.get_mut(&segment).map_or(0, |count| {
            *count = count.saturating_sub(1);
            *count
        });
        if left == 0 {
            state.in_flight.remove(&segment);
        }
        left == 0 && state.sync_when_written.remove(&segment) && result.is_ok()
    };
    match result {
        Ok(()) => {
            let counters = &shared.counters;
            counters.bytes_written.fetch_add(bytes, Ordering::Relaxed);
            let heads = placed.iter().filter(|record| record.head_record).count() as u64;
            counters
                .objects_written
                .fetch_add(placed.len() as u64 - heads, Ordering::Relaxed);
            counters.heads_written.fetch_add(heads, Ordering::Relaxed);
            publish(shared, placed, segment, file);
        }
        Err(error) => {
            shared.failed("write to", &error);
            for record in placed {
                shared.drop_placed(record);
            }
            let full = error.kind() == io::ErrorKind::StorageFull;
            lock(&shared.state).failure = Some((segment, full));
            // Under the queue's lock: the thread checks for a failure under it before it
            // waits, so the wake-up cannot fall between the check and the wait.
            let _queue = lock(&shared.queue);
            shared.wake.notify_one();
        }
    }
    sync_now.then(|| FileOp::sync(shared, file.clone()))
}

/// Hands the written records' ranges to their entries (or, disk only, to the index); a
/// head record publishes nothing. A record whose segment was deleted (or found unreadable)
/// while it was being written is dropped instead.
fn publish(shared: &Arc<Shared>, placed: Vec<Placed>, segment: u64, file: &Arc<File>) {
    let mut ready = Vec::new();
    let mut kills = Vec::new();
    let mut heads = Vec::new();
    let mut state = lock(&shared.state);
    if segment <= state.deleted_through || state.unreadable.contains(&segment) {
        drop(state);
        for record in placed {
            shared.drop_placed(record);
        }
        return;
    }
    for record in placed {
        state.pending = state.pending.saturating_sub(record.reserved);
        if record.head_record {
            continue;
        }
        let body_offset = record.record_offset
            + format::RECORD_HEADER
            + (record.lengths.key + record.lengths.head) as u64;
        let range = FileRange {
            file: file.clone(),
            offset: body_offset,
            length: record.lengths.body,
            hit: Default::default(),
        };
        let copy = Copy::At {
            segment,
            range: range.clone(),
            record_offset: record.record_offset,
            lengths: record.lengths,
        };
        if let Some(from) = record.evacuated_from {
            let entry = state
                .entries
                .get_mut(&record.key)
                .and_then(|entries| entries.iter_mut().find(|entry| entry.seq == from));
            match (entry, record.deferred) {
                (Some(entry), Some(carried)) if !entry.removed => {
                    // The index switches to the new copy (through the sink, below).
                    entry.seq = record.seq;
                    entry.body = Body::File(range.clone());
                    entry.copy = copy;
                    let counters = &shared.counters;
                    counters.evacuated.fetch_add(1, Ordering::Relaxed);
                    counters
                        .evacuated_bytes
                        .fetch_add(record.lengths.record(), Ordering::Relaxed);
                    let (head, stale) = match &entry.refreshed {
                        // Freshened while it was being re-appended: the new record needs
                        // its own head record too.
                        Some(refreshed) if refreshed.head != carried || refreshed.stale => {
                            heads.push((record.key.clone(), refreshed.clone(), record.seq));
                            (refreshed.head.clone(), refreshed.stale)
                        }
                        _ => (carried, false),
                    };
                    let mut kept = Restored::new(record.key, head, Body::File(range));
                    kept.stale = stale;
                    ready.push(kept);
                }
                _ => {
                    // Dropped by the index meanwhile: must not come back after a restart.
                    kills.push((record.record_offset, record.seq, record.lengths));
                    super::forget(&mut state.entries, &record.key, from);
                }
            }
            continue;
        }
        if let Some(head) = record.deferred {
            state
                .entries
                .entry(record.key.clone())
                .or_default()
                .push(Entry {
                    seq: record.seq,
                    body: Body::File(range.clone()),
                    copy,
                    removed: false,
                    refreshed: None,
                });
            ready.push(Restored::new(record.key, head, Body::File(range)));
            continue;
        }
        let Some(entry) = state
            .entries
            .get_mut(&record.key)
            .and_then(|entries| entries.iter_mut().find(|entry| entry.seq == record.seq))
        else {
            continue;
        };
        if entry.removed {
            kills.push((record.record_offset, record.seq, record.lengths));
            super::forget(&mut state.entries, &record.key, record.seq);
        } else {
            entry.copy = copy;
        }
    }
    drop(state);
    for (record_offset, seq, lengths) in kills {
        shared.push_job(Job::Kill {
            file: file.clone(),
            record_offset,
            seq,
            lengths,
        });
    }
    for (key, refreshed, target) in heads {
        shared.push_job(Job::Head {
            seq: shared.next_seq.fetch_add(1, Ordering::Relaxed),
            key,
            head: refreshed.head,
            refresh: super::heads::Refresh {
                target,
                stale: refreshed.stale,
            },
        });
    }
    if !ready.is_empty() {
        let sink = lock(&shared.sink).clone();
        if let Some(sink) = sink {
            sink(ready);
        }
    }
}

impl Shared {
    /// A cleared aggregation buffer (reused when one is free).
    pub(super) fn take_buffer(&self, capacity: usize) -> Vec<u8> {
        lock(&self.buffers)
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(capacity))
    }

    fn give_back_buffer(&self, mut buffer: Vec<u8>) {
        if buffer.capacity() > KEEP_CAPACITY {
            return;
        }
        buffer.clear();
        let mut buffers = lock(&self.buffers);
        if buffers.len() < KEEP_BUFFERS {
            buffers.push(buffer);
        }
    }
}
