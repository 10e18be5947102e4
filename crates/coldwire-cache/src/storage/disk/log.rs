//! The disk store's I/O thread, the one owner of the log's tail: takes queued records,
//! packs them into an aggregation buffer (Traffic Server's idea: many small objects, one
//! write) at the end of the active segment, and turns the buffer into a [`FileOp`]; kills
//! dropped objects in place; starts a new segment when the active one is full (its header
//! goes out with its first buffer) and deletes the oldest when the budget is reached (first
//! re-appending the hit objects it held, `log/evacuate.rs`); syncs to disk at most once a
//! second and when a segment is sealed.
//!
//! Each operation is *dispatched*: performed here with `pwrite` / `fdatasync` (readiness
//! backends), or, when workers with a ring have attached (`--io uring`), queued for them:
//! a worker submits it on its ring and its completion publishes the records
//! (`op.rs`). The thread then never waits for the disk; several buffers of a segment
//! may be in flight at once, each at its own offset.
//!
//! A head record (`Job::Head`, a `304` freshening) is placed like an object and written in
//! the same buffer; it publishes nothing. After any I/O error (here or on a ring) and after
//! a hit that could not read its body, the thread probes which segments can still be read
//! (`log/health.rs`).
//!
//! Invariants: the only thread that places records in segment files; a record is published
//! (its range handed to the index) only after the write holding it completed; after a
//! failed write the segment is sealed (its tail is not trusted) and new records go to a new
//! segment; every error is counted and logged (the first, then one in a thousand), none
//! ends the thread.

mod evacuate;
mod health;

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::format::{self, Head, Kind};
use super::op::{FileOp, Placed};
use super::recovery::{Segment, segment_path};
use super::{Job, Shared, lock};

/// Bytes gathered before the buffer is written even though more jobs wait.
const AGGREGATE: usize = 1 << 20;
/// How often written data is synced while records keep coming.
const SYNC_EVERY: Duration = Duration::from_secs(1);

/// What a record placed in the buffer is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Placing {
    /// An object the index holds already (in memory).
    Indexed,
    /// An object indexed only once written (disk only).
    Deferred,
    /// A head record (its bytes were not reserved in the queue).
    Head,
    /// A disk-only object re-appended from a segment being deleted (`log/evacuate.rs`),
    /// replacing the entry with this sequence number once written.
    Evacuated(u64),
}

/// The segment being appended to.
struct Active {
    segment: Segment,
    /// Where the buffer goes: bytes already placed (written or in flight).
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
    /// The worker whose ring is woken for the next queued operation (round robin).
    next_lane: usize,
    /// Objects of deleted segments waiting to be re-appended (`log/evacuate.rs`).
    evacuees: VecDeque<evacuate::Evacuee>,
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
            next_lane: 0,
            evacuees: VecDeque::new(),
        }
    }

    /// Runs until the store is dropped, then writes what is queued.
    pub(super) fn run(mut self) {
        let mut jobs = Vec::new();
        loop {
            let stopping = self.wait_for_jobs(&mut jobs);
            if stopping || !self.shared.on_rings() {
                // No ring takes operations any more: what was queued for one runs here.
                let queued: Vec<FileOp> = lock(&self.shared.ring_queue).drain(..).collect();
                for op in queued {
                    op.run();
                }
            }
            self.handle_failure();
            let taken = jobs.len() as u64;
            for job in jobs.drain(..) {
                self.take(job);
            }
            self.evacuate();
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
        let failed = lock(&self.shared.state).failure.is_some();
        if queue.is_empty()
            && !failed
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
            } => self.dispatch(FileOp::kill(
                &self.shared,
                file,
                record_offset,
                seq,
                lengths,
            )),
        }
    }

    /// Performs `op` here, or queues it for the workers' rings and wakes one of them.
    fn dispatch(&mut self, mut op: FileOp) {
        if self.shared.stop.load(Ordering::Acquire) || !self.shared.on_rings() {
            op.run();
            self.handle_failure();
            return;
        }
        op.queue_for_ring();
        lock(&self.shared.ring_queue).push_back(op);
        self.shared.ring_queued.fetch_add(1, Ordering::Release);
        self.next_lane = self.shared.wake_lane(self.next_lane);
    }

    /// A write failed (here or on a ring): its segment is sealed if it is the active one
    /// (its tail is not trusted), and out of space the oldest segment goes too.
    fn handle_failure(&mut self) {
        let Some((segment, full)) = lock(&self.shared.state).failure.take() else {
            return;
        };
        if self
            .active
            .as_ref()
            .is_some_and(|active| active.segment.id == segment)
        {
            self.buffer.clear();
            for record in std::mem::take(&mut self.placed) {
                self.shared.drop_placed(record);
            }
            self.seal();
        }
        if full {
            self.delete_oldest(false);
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
        let reserved = match how {
            Placing::Indexed | Placing::Deferred => length,
            Placing::Head | Placing::Evacuated(_) => 0,
        };
        let encoded = format::encode_head(&head);
        let record = format::record_len(key.len(), encoded.len(), length);
        let segment_size = self.shared.config.segment_size();
        if record > segment_size - format::SEGMENT_HEADER {
            self.drop_record(seq, key, reserved, how);
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
            self.drop_record(seq, key, reserved, how);
            return;
        }
        let Some(active) = self.active.as_ref() else {
            self.drop_record(seq, key, reserved, how);
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
        let evacuated_from = match how {
            Placing::Evacuated(from) => Some(from),
            _ => None,
        };
        self.placed.push(Placed {
            seq,
            key,
            deferred: (how == Placing::Deferred || evacuated_from.is_some()).then_some(head),
            head_record: how == Placing::Head,
            record_offset,
            lengths,
            reserved,
            evacuated_from,
        });
    }

    fn drop_record(&self, seq: u64, key: String, reserved: u64, how: Placing) {
        match how {
            Placing::Evacuated(from) => self.shared.drop_evacuee(from, key),
            _ => self.shared.drop_object(seq, &key, reserved),
        }
    }

    /// Turns the buffer into a write at the end of the active segment (its records are
    /// published when it completes).
    fn flush(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let Some(active) = self.active.as_mut() else {
            self.buffer.clear();
            for record in std::mem::take(&mut self.placed) {
                self.shared.drop_placed(record);
            }
            return;
        };
        let offset = active.position;
        active.position += self.buffer.len() as u64;
        active.segment.placed = active.position;
        self.dirty = true;
        let buffer = std::mem::replace(&mut self.buffer, self.shared.take_buffer(AGGREGATE * 2));
        let op = FileOp::records(
            &self.shared,
            active.segment.file.clone(),
            active.segment.id,
            offset,
            buffer,
            std::mem::take(&mut self.placed),
        );
        self.dispatch(op);
    }

    /// Starts a new segment, deleting the oldest while the budget is passed; false when it
    /// could not be created.
    fn start_segment(&mut self) -> bool {
        self.seal();
        let shared = self.shared.clone();
        let config = &shared.config;
        // By bytes, not count: segments written under another --cache-dir-size differ.
        // Writes still in flight on a ring have not grown their file yet: what was placed
        // counts.
        let used = |sealed: &VecDeque<Segment>| -> u64 {
            sealed
                .iter()
                .map(|segment| {
                    let length = segment.file.metadata().map_or(0, |metadata| metadata.len());
                    length.max(segment.placed)
                })
                .sum()
        };
        while !self.sealed.is_empty() && used(&self.sealed) + config.segment_size() > config.size {
            // Deleted for room: hit objects get a second chance (`log/evacuate.rs`).
            self.delete_oldest(true);
        }
        let id = self.next_segment;
        self.next_segment += 1;
        let path = segment_path(&config.dir, id);
        let created = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path);
        match created {
            Ok(file) => {
                // The segment's header goes out with its first buffer.
                self.buffer.clear();
                self.buffer.extend_from_slice(&format::segment_header(id));
                self.active = Some(Active {
                    segment: Segment {
                        id,
                        file: Arc::new(file),
                        path,
                        placed: 0,
                    },
                    position: 0,
                });
                self.count_segments();
                true
            }
            Err(error) => {
                let _ = std::fs::remove_file(&path);
                self.shared.failed("create", &error);
                if error.kind() == std::io::ErrorKind::StorageFull {
                    self.delete_oldest(false);
                }
                false
            }
        }
    }

    /// Seals the active segment (synced once its writes are done, then kept among the
    /// sealed ones).
    fn seal(&mut self) {
        if let Some(active) = self.active.take() {
            if self.dirty {
                let id = active.segment.id;
                let waits = {
                    let mut state = lock(&self.shared.state);
                    let waits = state.in_flight.contains_key(&id);
                    if waits {
                        state.sync_when_written.insert(id);
                    }
                    waits
                };
                if !waits {
                    self.sync_file(&active.segment.file);
                }
            }
            self.sealed.push_back(active.segment);
        }
        self.dirty = false;
    }

    /// Deletes the oldest segment: the index forgets what it still held there, except,
    /// with `second_chance` (not after an I/O error), the hit objects chosen to be
    /// re-appended.
    fn delete_oldest(&mut self, second_chance: bool) {
        let Some(segment) = self.sealed.pop_front() else {
            return;
        };
        if second_chance && !self.shared.paused() {
            self.choose_evacuees(segment.id, &segment.file);
        }
        {
            let mut state = lock(&self.shared.state);
            // Records of it still being written are dropped when their write completes.
            state.deleted_through = state.deleted_through.max(segment.id);
            let deleted_through = state.deleted_through;
            state.unreadable.retain(|id| *id > deleted_through);
            state.sync_when_written.remove(&segment.id);
        }
        self.forget_segment(segment.id);
        if let Err(error) = std::fs::remove_file(&segment.path) {
            self.shared.failed("delete", &error);
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
            let file = active.segment.file.clone();
            self.sync_file(&file);
        }
        self.dirty = false;
        self.last_sync = Instant::now();
    }

    fn sync_file(&mut self, file: &Arc<File>) {
        self.dispatch(FileOp::sync(&self.shared, file.clone()));
    }
}
