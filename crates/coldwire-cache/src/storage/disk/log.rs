//! The disk store's I/O thread: takes queued records, packs them into an aggregation buffer
//! (Traffic Server's idea: many small objects, one write), appends it to the active segment
//! with one positioned write, then publishes the new records' file ranges; kills dropped
//! objects in place; starts a new segment when the active one is full and deletes the
//! oldest when the budget is reached; syncs to disk at most once a second and when a
//! segment is sealed.
//!
//! Invariants: the only thread that writes segment files; a record is published (its range
//! handed to the index) only after the write holding it returned; after a failed write the
//! segment is sealed (its tail is not trusted) and new records go to a new segment; every
//! error is counted and logged (the first, then one in a thousand), none ends the thread.

mod health;

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::format::{self, Head, Kind, Lengths};
use super::recovery::{Segment, segment_path};
use super::{Copy, Entry, Job, Shared, lock, unix_seconds};
use crate::storage::{Body, FileRange, Restored};

/// Bytes gathered before the buffer is written even though more jobs wait.
const AGGREGATE: usize = 1 << 20;
/// How often written data is synced while records keep coming.
const SYNC_EVERY: Duration = Duration::from_secs(1);

/// A record placed in the buffer, published once the buffer is written.
struct Placed {
    seq: u64,
    key: String,
    /// The head, for an object indexed only once written (disk only).
    deferred: Option<Head>,
    /// A head record, not an object: nothing to publish.
    head_record: bool,
    record_offset: u64,
    lengths: Lengths,
    /// Bytes reserved in the queue for it.
    reserved: u64,
}

/// What a record placed in the buffer is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Placing {
    /// An object the index holds already (in memory).
    Indexed,
    /// An object indexed only once written (disk only).
    Deferred,
    /// A head record (its bytes were not reserved in the queue).
    Head,
}

/// The segment being appended to.
struct Active {
    segment: Segment,
    /// Where the buffer goes: bytes already written.
    position: u64,
}

/// The I/O thread's state (see the module docs).
pub(super) struct Log {
    shared: Arc<Shared>,
    /// Sealed segments, oldest first (the active one is not among them).
    sealed: VecDeque<Segment>,
    active: Option<Active>,
    next_segment: u64,
    buffer: Vec<u8>,
    placed: Vec<Placed>,
    dirty: bool,
    last_sync: Instant,
}

impl Log {
    pub(super) fn new(shared: Arc<Shared>, segments: Vec<Segment>, next_segment: u64) -> Log {
        Log {
            shared,
            sealed: segments.into(),
            active: None,
            next_segment,
            buffer: Vec::with_capacity(AGGREGATE * 2),
            placed: Vec::new(),
            dirty: false,
            last_sync: Instant::now(),
        }
    }

    /// Runs until the store is dropped, then writes what is queued.
    pub(super) fn run(mut self) {
        let mut jobs = Vec::new();
        loop {
            let stopping = self.wait_for_jobs(&mut jobs);
            let taken = jobs.len() as u64;
            for job in jobs.drain(..) {
                self.take(job);
            }
            self.flush();
            // Counted done only once written (a caller waiting for an idle queue sees it).
            self.shared
                .counters
                .queue_depth
                .fetch_sub(taken, Ordering::Relaxed);
            if self.dirty && (stopping || self.last_sync.elapsed() >= SYNC_EVERY) {
                self.sync();
            }
            if self.shared.check_reads.swap(false, Ordering::AcqRel) {
                self.check_reads();
            }
            if stopping {
                return;
            }
        }
    }

    /// Moves the queued jobs into `jobs`, waiting up to a second for one; true when the
    /// store is stopping and the queue is empty.
    fn wait_for_jobs(&self, jobs: &mut Vec<Job>) -> bool {
        let mut queue = lock(&self.shared.queue);
        if queue.is_empty()
            && !self.shared.stop.load(Ordering::Acquire)
            && !self.shared.check_reads.load(Ordering::Acquire)
        {
            queue = self
                .shared
                .wake
                .wait_timeout(queue, SYNC_EVERY)
                .map_or_else(|poisoned| poisoned.into_inner().0, |(queue, _)| queue);
        }
        jobs.extend(queue.drain(..));
        jobs.is_empty() && self.shared.stop.load(Ordering::Acquire)
    }

    fn take(&mut self, job: Job) {
        match job {
            Job::Object {
                seq,
                key,
                head,
                pieces,
                length,
                deferred,
            } => {
                let how = if deferred {
                    Placing::Deferred
                } else {
                    Placing::Indexed
                };
                self.append(seq, key, head, &pieces, length, how);
            }
            Job::Head {
                seq,
                key,
                head,
                refresh,
            } => {
                let body = Bytes::copy_from_slice(&super::heads::encode_body(refresh));
                let length = body.len() as u64;
                self.append(seq, key, head, &[body], length, Placing::Head);
            }
            Job::Kill {
                file,
                record_offset,
                seq,
                lengths,
            } => self.kill(&file, record_offset, seq, lengths),
        }
    }

    /// Places an object or head record in the buffer (flushing first when it would not fit
    /// the active segment, or the buffer is full).
    fn append(
        &mut self,
        seq: u64,
        key: String,
        head: Head,
        pieces: &[Bytes],
        length: u64,
        how: Placing,
    ) {
        let reserved = if how == Placing::Head { 0 } else { length };
        let encoded = format::encode_head(&head);
        let record = format::record_len(key.len(), encoded.len(), length);
        let segment_size = self.shared.config.segment_size();
        if record > segment_size - format::SEGMENT_HEADER {
            self.drop_object(seq, &key, reserved);
            return;
        }
        let full = self.active.as_ref().is_none_or(|active| {
            active.position + self.buffer.len() as u64 + record > segment_size
        });
        if full || self.buffer.len() >= AGGREGATE {
            self.flush();
        }
        // A failed flush seals the active segment: a new one is needed then too.
        if (full || self.active.is_none()) && !self.start_segment() {
            self.drop_object(seq, &key, reserved);
            return;
        }
        let Some(active) = self.active.as_ref() else {
            self.drop_object(seq, &key, reserved);
            return;
        };
        let record_offset = active.position + self.buffer.len() as u64;
        let kind = if how == Placing::Head {
            Kind::Head
        } else {
            Kind::Object
        };
        let lengths = format::append_record_of(
            kind,
            &mut self.buffer,
            seq,
            key.as_bytes(),
            &encoded,
            pieces.iter().map(|piece| &piece[..]),
        );
        self.placed.push(Placed {
            seq,
            key,
            deferred: (how == Placing::Deferred).then_some(head),
            head_record: how == Placing::Head,
            record_offset,
            lengths,
            reserved,
        });
    }

    /// An object that will not be written: its memory copy stays memory only.
    fn drop_object(&self, seq: u64, key: &str, reserved: u64) {
        self.shared.release(reserved);
        self.shared.counters.dropped.fetch_add(1, Ordering::Relaxed);
        let mut state = lock(&self.shared.state);
        let removed = state.entries.get_mut(key).and_then(|entries| {
            let entry = entries.iter_mut().find(|entry| entry.seq == seq)?;
            entry.copy = Copy::Gone;
            Some(entry.removed)
        });
        if removed == Some(true) {
            forget(&mut state.entries, key, seq);
        }
    }

    /// Writes the buffer at the end of the active segment and publishes what it held.
    fn flush(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let Some(active) = self.active.as_mut() else {
            self.buffer.clear();
            for record in std::mem::take(&mut self.placed) {
                self.drop_object(record.seq, &record.key, record.reserved);
            }
            return;
        };
        let written = active
            .segment
            .file
            .write_all_at(&self.buffer, active.position);
        let placed = std::mem::take(&mut self.placed);
        match written {
            Ok(()) => {
                active.position += self.buffer.len() as u64;
                let counters = &self.shared.counters;
                counters
                    .bytes_written
                    .fetch_add(self.buffer.len() as u64, Ordering::Relaxed);
                let heads = placed.iter().filter(|record| record.head_record).count() as u64;
                counters
                    .objects_written
                    .fetch_add(placed.len() as u64 - heads, Ordering::Relaxed);
                counters.heads_written.fetch_add(heads, Ordering::Relaxed);
                self.dirty = true;
                let (id, file) = (active.segment.id, active.segment.file.clone());
                self.buffer.clear();
                self.publish(placed, id, &file);
            }
            Err(error) => {
                self.buffer.clear();
                self.failed("write to", &error);
                for record in placed {
                    self.drop_object(record.seq, &record.key, record.reserved);
                }
                self.seal();
                if error.kind() == std::io::ErrorKind::StorageFull {
                    self.delete_oldest();
                }
            }
        }
    }

    /// Hands the written records' ranges to their entries (or, disk only, to the index).
    fn publish(&self, placed: Vec<Placed>, segment: u64, file: &Arc<File>) {
        let mut ready = Vec::new();
        let mut kills = Vec::new();
        let mut state = lock(&self.shared.state);
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
            };
            let copy = Copy::At {
                segment,
                range: range.clone(),
                record_offset: record.record_offset,
                lengths: record.lengths,
            };
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
                forget(&mut state.entries, &record.key, record.seq);
            } else {
                entry.copy = copy;
            }
        }
        drop(state);
        for (record_offset, seq, lengths) in kills {
            self.kill(file, record_offset, seq, lengths);
        }
        if !ready.is_empty() {
            let sink = lock(&self.shared.sink).clone();
            if let Some(sink) = sink {
                sink(ready);
            }
        }
    }

    /// Rewrites a record's header as dead: it is never read back.
    fn kill(&self, file: &File, record_offset: u64, seq: u64, lengths: Lengths) {
        let header = format::record_header(Kind::Dead, seq, lengths, 0);
        if let Err(error) = file.write_all_at(&header, record_offset) {
            self.failed("kill a record in", &error);
        }
    }

    /// Starts a new segment, deleting the oldest while the budget is passed; false when it
    /// could not be created.
    fn start_segment(&mut self) -> bool {
        self.seal();
        let shared = self.shared.clone();
        let config = &shared.config;
        // By bytes, not count: segments written under another --cache-dir-size differ.
        let used = |sealed: &VecDeque<Segment>| -> u64 {
            sealed
                .iter()
                .map(|segment| segment.file.metadata().map_or(0, |metadata| metadata.len()))
                .sum()
        };
        while !self.sealed.is_empty() && used(&self.sealed) + config.segment_size() > config.size {
            self.delete_oldest();
        }
        let id = self.next_segment;
        self.next_segment += 1;
        let path = segment_path(&config.dir, id);
        let created = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|file| {
                file.write_all_at(&format::segment_header(id), 0)?;
                Ok(file)
            });
        match created {
            Ok(file) => {
                self.active = Some(Active {
                    segment: Segment {
                        id,
                        file: Arc::new(file),
                        path,
                    },
                    position: format::SEGMENT_HEADER,
                });
                self.count_segments();
                true
            }
            Err(error) => {
                let _ = std::fs::remove_file(&path);
                self.failed("create", &error);
                if error.kind() == std::io::ErrorKind::StorageFull {
                    self.delete_oldest();
                }
                false
            }
        }
    }

    /// Seals the active segment (synced, then kept among the sealed ones).
    fn seal(&mut self) {
        if let Some(active) = self.active.take() {
            if self.dirty {
                self.sync_file(&active.segment.file);
            }
            self.sealed.push_back(active.segment);
        }
        self.dirty = false;
    }

    /// Deletes the oldest segment: the index forgets what it still held there.
    fn delete_oldest(&mut self) {
        let Some(segment) = self.sealed.pop_front() else {
            return;
        };
        self.forget_segment(segment.id);
        if let Err(error) = std::fs::remove_file(&segment.path) {
            self.failed("delete", &error);
        }
        self.shared
            .counters
            .segments_evicted
            .fetch_add(1, Ordering::Relaxed);
        self.count_segments();
    }

    fn count_segments(&self) {
        let count = self.sealed.len() + usize::from(self.active.is_some());
        self.shared
            .counters
            .segments
            .store(count as u64, Ordering::Relaxed);
    }

    fn sync(&mut self) {
        if let Some(active) = self.active.as_ref() {
            self.sync_file(&active.segment.file);
        }
        self.dirty = false;
        self.last_sync = Instant::now();
    }

    fn sync_file(&self, file: &File) {
        if let Err(error) = file.sync_data() {
            self.failed("sync", &error);
        }
    }

    /// Counts and logs an I/O error, and pauses new disk copies for about two seconds (the disk
    /// tier is off for the objects stored meanwhile; memory keeps serving). Out of space,
    /// the oldest segment goes too.
    fn failed(&self, what: &str, error: &std::io::Error) {
        let errors = self
            .shared
            .counters
            .io_errors
            .fetch_add(1, Ordering::Relaxed);
        count_kind(&self.shared.counters, error);
        if errors.is_multiple_of(1000) {
            eprintln!(
                "coldwire: warning: disk store: cannot {what} a segment in {}: {error} \
                 (disk copies paused for about 2 s; hits keep being served; {} errors so far)",
                self.shared.config.dir.display(),
                errors + 1,
            );
        }
        self.shared
            .paused_until
            .store(unix_seconds() + 2, Ordering::Relaxed);
        self.shared.check_reads.store(true, Ordering::Release);
    }
}

/// Counts `error` by its kind (Linux's errno values; the rest is counted as `other`).
fn count_kind(counters: &super::Counters, error: &std::io::Error) {
    const EIO: i32 = 5;
    const ENOSPC: i32 = 28;
    const EDQUOT: i32 = 122;
    let counter = match error.raw_os_error() {
        Some(ENOSPC | EDQUOT) => &counters.io_errors_no_space,
        Some(EIO) => &counters.io_errors_io,
        _ => return,
    };
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Takes entry `seq` of `key` out of the map.
fn forget(entries: &mut std::collections::HashMap<String, Vec<Entry>>, key: &str, seq: u64) {
    if let Some(list) = entries.get_mut(key) {
        list.retain(|entry| entry.seq != seq);
        if list.is_empty() {
            entries.remove(key);
        }
    }
}
