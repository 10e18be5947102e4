//! [`DiskStorage`]: bodies kept in a directory of log segments that survive restarts, with
//! the memory store as the hot tier in front (issue 15; docs/disk-store.md).
//!
//! - **Layout** ([`format`](mod@format)): segment files of fixed size, each an append-only log of
//!   checksummed records (object: key, head, body; tombstone: the sequence number it
//!   kills). No separate index file: the index is rebuilt at start-up by scanning
//!   (`recovery.rs`).
//! - **Writes** are placed by one I/O thread (`log.rs`), never on a worker's event loop: a
//!   stored miss is collected in memory (as the memory store does) and, once finished,
//!   queued whole; the thread packs queued records into one aggregation buffer and turns it
//!   into one write ([`FileOp`], `op.rs`), performed by the thread itself (`pwrite`) or, on
//!   `--io uring`, submitted on a worker's ring (`rings.rs`); its completion publishes the
//!   records' file ranges. Back-pressure: past
//!   [`DiskConfig::queue_bytes`] of queued bodies, new disk copies are dropped (the response
//!   is still served and kept in memory when it fits there).
//! - **Tiers**: a body up to the memory limit is indexed as `Body::Memory` at once and also
//!   queued for disk; when the index must make room it [spills](Storage::spill) it and gets
//!   the disk copy's `Body::File` (the hit then goes out with `sendfile`). A body larger than
//!   the memory limit goes to disk only: it is indexed once written (through the sink
//!   [`Storage::attach`] installed).
//! - **Space**: the oldest segment file is deleted when a new one would pass
//!   [`DiskConfig::size`] (FIFO, as Traffic Server's cyclic cache; the memory tier in front
//!   is LRU); the index forgets what lived there ([`Storage::take_evictions`]), except the
//!   disk-only objects a hit found since they were written: those get a second chance,
//!   re-appended as new records first (`log/evacuate.rs`). Hits under way keep the deleted
//!   file's descriptor, so its bytes stay readable until they end.
//!
//! - **Freshening**: a `304` (or `HEAD`) that freshens an object on disk appends a head
//!   record naming it ([`heads`]); at recovery the newest one replaces the object's head.
//!
//! Invariants: a record's file range is handed out only after the write that holds it
//! completed; every body the index drops that has a record on disk gets a tombstone, so a
//! purged, replaced or evicted object never comes back after a restart; nothing here
//! blocks on the disk except the I/O thread (when no ring takes its writes) and
//! [`DiskStorage::open`].

pub mod format;
pub mod heads;
mod log;
mod op;
mod recovery;
mod rings;

pub use op::{FileOp, FileOpRequest};

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use bytes::Bytes;

use super::{Body, BodyWriter, FileRange, Finished, ReadySink, Restored, Storage, Writer};
use crate::stored::StoredResponse;
use format::Head;

/// Where and how big a disk store is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskConfig {
    /// The directory (created if missing) holding the segment files.
    pub dir: PathBuf,
    /// Bytes the segment files may take together.
    pub size: u64,
    /// Largest body kept on disk (it may be larger than the memory tier's limit).
    pub max_object: u64,
    /// Bytes of bodies queued for the I/O thread at most; past it, disk copies are dropped.
    pub queue_bytes: u64,
    /// Workers with a ring (`--io uring`) perform the segment writes and syncs as ring
    /// operations ([`Storage::attach_ring`]); false keeps them on the I/O thread.
    pub ring_writes: bool,
}

impl DiskConfig {
    /// A store of `size` bytes in `dir`, objects up to `max_object`, a 64 MiB queue.
    pub fn new(dir: impl Into<PathBuf>, size: u64, max_object: u64) -> DiskConfig {
        DiskConfig {
            dir: dir.into(),
            size,
            max_object,
            queue_bytes: 64 << 20,
            ring_writes: true,
        }
    }

    /// Segment files the store is cut into (deleting one frees 1/16 of the space).
    pub const SEGMENTS: u64 = 16;

    /// Bytes of one segment file.
    pub fn segment_size(&self) -> u64 {
        (self.size / Self::SEGMENTS).max(format::SEGMENT_HEADER + 4096)
    }
}

/// What the disk store has done, for the stats endpoint (the `disk` object of `cache`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DiskCounters {
    /// Object records written.
    pub objects_written: u64,
    /// Bytes written (records, tombstones, padding).
    pub bytes_written: u64,
    /// Bytes read (recovery scans).
    pub bytes_read: u64,
    /// Writes waiting now: jobs queued for the I/O thread, and operations queued for or in
    /// flight on the workers' rings.
    pub queue_depth: u64,
    /// Bytes of bodies waiting for the I/O thread now.
    pub queue_bytes: u64,
    /// Disk copies dropped because the queue was full or the disk failing.
    pub dropped: u64,
    /// Write, sync, create or delete errors (ENOSPC, EIO...).
    pub io_errors: u64,
    /// The same errors by kind.
    pub io_errors_by_kind: IoErrorKinds,
    /// Head records written (a `304` or a `HEAD` response freshened an object on disk).
    pub heads_written: u64,
    /// Segment files now.
    pub segments: u64,
    /// Segment files deleted to make room.
    pub segments_evicted: u64,
    /// Objects hit since written that were re-appended (new records) rather than lost
    /// with their segment (the second chance).
    pub evacuated: u64,
    /// Record bytes they took.
    pub evacuated_bytes: u64,
    /// Objects found intact at start-up.
    pub recovered: u64,
    /// Milliseconds the start-up scan took.
    pub recovery_ms: u64,
    /// Segment writes (records, kills) submitted on the workers' rings (`--io uring`; a
    /// short write's rest counts again).
    pub ring_writes_submitted: u64,
    /// Of those, completed.
    pub ring_writes_completed: u64,
    /// Data syncs submitted on the workers' rings.
    pub ring_syncs_submitted: u64,
    /// Of those, completed.
    pub ring_syncs_completed: u64,
}

/// The disk store's I/O errors by kind (their sum is [`DiskCounters::io_errors`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct IoErrorKinds {
    /// Out of space (`ENOSPC`, `EDQUOT`).
    pub no_space: u64,
    /// The device failed (`EIO`).
    pub io: u64,
    /// Anything else (permissions, a read-only file system, ...).
    pub other: u64,
}

impl IoErrorKinds {
    /// The kinds with their names, as the metrics' `kind` label.
    pub fn labelled(&self) -> [(&'static str, u64); 3] {
        [
            ("no_space", self.no_space),
            ("io", self.io),
            ("other", self.other),
        ]
    }
}

/// Where the disk copy of an indexed body is.
#[derive(Debug)]
enum Copy {
    /// Queued for the I/O thread.
    Pending,
    /// Written: the body is `range` of segment `segment`, in the record at `record_offset`.
    At {
        segment: u64,
        range: FileRange,
        record_offset: u64,
        lengths: format::Lengths,
    },
    /// None (its write failed, or its segment was deleted).
    Gone,
}

/// A body the index holds (or held, `removed` while its write is queued) that this store
/// knows of.
#[derive(Debug)]
struct Entry {
    seq: u64,
    /// The handle the index holds (a clone: memory pieces, or the file range).
    body: Body,
    copy: Copy,
    /// The index dropped it while its write was queued: killed once written.
    removed: bool,
    /// The head last freshened (`304`, `HEAD`), if any: what a re-appended record carries.
    refreshed: Option<Refreshed>,
}

/// A freshened head of an entry.
#[derive(Debug, Clone)]
struct Refreshed {
    head: Head,
    stale: bool,
}

/// The state shared by workers and the I/O thread, under one mutex (held briefly).
#[derive(Debug, Default)]
struct State {
    entries: HashMap<String, Vec<Entry>>,
    /// Keys the index must forget (their segment was deleted while they were on disk).
    evictions: Vec<String>,
    /// Bytes of bodies queued or being collected for disk.
    pending: u64,
    /// Record writes in flight, by segment.
    in_flight: HashMap<u64, u32>,
    /// Sealed segments to sync once their writes in flight are done.
    sync_when_written: HashSet<u64>,
    /// Segments up to this id are deleted: records written there are dropped.
    deleted_through: u64,
    /// Segments (past `deleted_through`) found unreadable and dropped
    /// (`log/health.rs`): records written there are dropped too.
    unreadable: HashSet<u64>,
    /// A record write failed: its segment, and whether the disk is full (for the thread).
    failure: Option<(u64, bool)>,
}

/// A piece of work for the I/O thread.
#[derive(Debug)]
enum Job {
    /// Append an object record; `deferred` objects (disk only) are indexed once written.
    Object {
        seq: u64,
        key: String,
        head: Head,
        pieces: Vec<Bytes>,
        length: u64,
        deferred: bool,
    },
    /// Append a head record: object `refresh.target` of `key` has a new head.
    Head {
        seq: u64,
        key: String,
        head: Head,
        refresh: heads::Refresh,
    },
    /// Rewrite the header of the record at `record_offset` of `file` as dead.
    Kill {
        file: Arc<std::fs::File>,
        record_offset: u64,
        seq: u64,
        lengths: format::Lengths,
    },
}

/// What workers and the I/O thread share.
struct Shared {
    config: DiskConfig,
    /// The memory tier's per-object limit: larger bodies go to disk only.
    memory_max_object: u64,
    state: Mutex<State>,
    queue: Mutex<VecDeque<Job>>,
    wake: Condvar,
    stop: AtomicBool,
    /// Set after an I/O error, or a hit that could not read its body: the I/O thread
    /// checks which segments can still be read.
    check_reads: AtomicBool,
    /// Set after an I/O error: no new disk copies until this time (a unix-epoch second).
    paused_until: AtomicU64,
    next_seq: AtomicU64,
    sink: Mutex<Option<ReadySink>>,
    /// Objects found at start-up, handed to the sink when it is attached.
    recovered: Mutex<Vec<Restored>>,
    counters: Counters,
    /// Workers whose rings take file operations (`rings.rs`), by lane.
    lanes: Mutex<Vec<Option<rings::Lane>>>,
    /// Attached lanes.
    ring_lanes: AtomicUsize,
    /// Operations waiting for a worker's ring, and how many.
    ring_queue: Mutex<VecDeque<FileOp>>,
    ring_queued: AtomicUsize,
    /// Aggregation buffers for reuse.
    buffers: Mutex<Vec<Vec<u8>>>,
}

#[derive(Default)]
struct Counters {
    objects_written: AtomicU64,
    bytes_written: AtomicU64,
    bytes_read: AtomicU64,
    queue_depth: AtomicU64,
    dropped: AtomicU64,
    io_errors: AtomicU64,
    io_errors_no_space: AtomicU64,
    io_errors_io: AtomicU64,
    heads_written: AtomicU64,
    segments: AtomicU64,
    segments_evicted: AtomicU64,
    evacuated: AtomicU64,
    evacuated_bytes: AtomicU64,
    recovered: AtomicU64,
    recovery_ms: AtomicU64,
    ring_outstanding: AtomicU64,
    ring_writes_submitted: AtomicU64,
    ring_writes_completed: AtomicU64,
    ring_syncs_submitted: AtomicU64,
    ring_syncs_completed: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// The disk store (see the module docs). Dropping it stops its I/O thread after the queue
/// is written.
pub struct DiskStorage {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for DiskStorage {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("DiskStorage")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl DiskStorage {
    /// Opens (or creates) the store in `config.dir`, reading back every intact object, with
    /// a memory tier whose objects are at most `memory_max_object` bytes. Blocks while it
    /// scans; fails with a message saying which path could not be used.
    pub fn open(config: DiskConfig, memory_max_object: u64) -> std::io::Result<DiskStorage> {
        let started = std::time::Instant::now();
        let recovered = recovery::recover(&config)?;
        let counters = Counters::default();
        counters
            .bytes_read
            .store(recovered.bytes_read, Ordering::Relaxed);
        counters
            .recovered
            .store(recovered.objects.len() as u64, Ordering::Relaxed);
        counters
            .segments
            .store(recovered.segments.len() as u64, Ordering::Relaxed);
        let mut state = State::default();
        let mut restored = Vec::with_capacity(recovered.objects.len());
        for object in recovered.objects {
            let body = Body::File(object.range.clone());
            state
                .entries
                .entry(object.key.clone())
                .or_default()
                .push(Entry {
                    seq: object.seq,
                    body: body.clone(),
                    copy: Copy::At {
                        segment: object.segment,
                        range: object.range,
                        record_offset: object.record_offset,
                        lengths: object.lengths,
                    },
                    removed: false,
                    refreshed: None,
                });
            let mut kept = Restored::new(object.key, object.head, body);
            kept.stale = object.stale;
            restored.push(kept);
        }
        counters
            .recovery_ms
            .store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
        let shared = Arc::new(Shared {
            config,
            memory_max_object,
            state: Mutex::new(state),
            queue: Mutex::new(VecDeque::new()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            check_reads: AtomicBool::new(false),
            paused_until: AtomicU64::new(0),
            next_seq: AtomicU64::new(recovered.next_seq),
            sink: Mutex::new(None),
            recovered: Mutex::new(restored),
            counters,
            lanes: Mutex::new(Vec::new()),
            ring_lanes: AtomicUsize::new(0),
            ring_queue: Mutex::new(VecDeque::new()),
            ring_queued: AtomicUsize::new(0),
            buffers: Mutex::new(Vec::new()),
        });
        let log = log::Log::new(shared.clone(), recovered.segments, recovered.next_segment);
        let thread = std::thread::Builder::new()
            .name("coldwire-disk".into())
            .spawn(move || log.run())?;
        Ok(DiskStorage {
            shared,
            thread: Some(thread),
        })
    }

    /// The counters.
    pub fn counters(&self) -> DiskCounters {
        self.shared.counters()
    }
}

impl Drop for DiskStorage {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn counters(&self) -> DiskCounters {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let counters = &self.counters;
        DiskCounters {
            objects_written: load(&counters.objects_written),
            bytes_written: load(&counters.bytes_written),
            bytes_read: load(&counters.bytes_read),
            queue_depth: load(&counters.queue_depth) + load(&counters.ring_outstanding),
            queue_bytes: lock(&self.state).pending,
            dropped: load(&counters.dropped),
            io_errors: load(&counters.io_errors),
            io_errors_by_kind: {
                let (no_space, io) = (
                    load(&counters.io_errors_no_space),
                    load(&counters.io_errors_io),
                );
                IoErrorKinds {
                    no_space,
                    io,
                    other: load(&counters.io_errors).saturating_sub(no_space + io),
                }
            },
            heads_written: load(&counters.heads_written),
            segments: load(&counters.segments),
            segments_evicted: load(&counters.segments_evicted),
            evacuated: load(&counters.evacuated),
            evacuated_bytes: load(&counters.evacuated_bytes),
            recovered: load(&counters.recovered),
            recovery_ms: load(&counters.recovery_ms),
            ring_writes_submitted: load(&counters.ring_writes_submitted),
            ring_writes_completed: load(&counters.ring_writes_completed),
            ring_syncs_submitted: load(&counters.ring_syncs_submitted),
            ring_syncs_completed: load(&counters.ring_syncs_completed),
        }
    }

    /// Whether new disk copies are refused for a while after an I/O error.
    fn paused(&self) -> bool {
        self.paused_until.load(Ordering::Relaxed) > unix_seconds()
    }

    /// Reserves `bytes` of the queue for a body on its way to disk; false when the queue is
    /// full (or the disk failing): the disk copy is then dropped.
    fn reserve(&self, bytes: u64) -> bool {
        if self.paused() {
            return false;
        }
        let mut state = lock(&self.state);
        if state.pending.saturating_add(bytes) > self.config.queue_bytes {
            return false;
        }
        state.pending += bytes;
        true
    }

    fn release(&self, bytes: u64) {
        let mut state = lock(&self.state);
        state.pending = state.pending.saturating_sub(bytes);
    }

    fn push_job(&self, job: Job) {
        lock(&self.queue).push_back(job);
        self.counters.queue_depth.fetch_add(1, Ordering::Relaxed);
        self.wake.notify_one();
    }

    /// An object that will not be written: its memory copy stays memory only.
    fn drop_object(&self, seq: u64, key: &str, reserved: u64) {
        self.release(reserved);
        self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        let mut state = lock(&self.state);
        let removed = state.entries.get_mut(key).and_then(|entries| {
            let entry = entries.iter_mut().find(|entry| entry.seq == seq)?;
            entry.copy = Copy::Gone;
            Some(entry.removed)
        });
        if removed == Some(true) {
            forget(&mut state.entries, key, seq);
        }
    }

    /// A placed record that will not be published: an object's memory copy stays memory
    /// only; a re-appended one is forgotten (its old segment is gone).
    fn drop_placed(&self, record: op::Placed) {
        match record.evacuated_from {
            Some(from) => self.drop_evacuee(from, record.key),
            None => self.drop_object(record.seq, &record.key, record.reserved),
        }
    }

    /// An object that could not be re-appended (the second chance) is forgotten like the
    /// rest of its deleted segment.
    fn drop_evacuee(&self, from: u64, key: String) {
        self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        {
            let mut state = lock(&self.state);
            let held = state.entries.get(&key).is_some_and(|entries| {
                entries
                    .iter()
                    .any(|entry| entry.seq == from && !entry.removed)
            });
            forget(&mut state.entries, &key, from);
            if !held {
                return;
            }
            // Its body is a deleted segment's: the index must not keep serving it.
            state.evictions.push(key);
        }
        // The index forgets it now rather than at its next insert.
        let sink = lock(&self.sink).clone();
        if let Some(sink) = sink {
            sink(Vec::new());
        }
    }

    /// Counts and logs an I/O error, and pauses new disk copies for about two seconds (the
    /// disk tier is off for the objects stored meanwhile; memory keeps serving); the I/O
    /// thread then checks which segments can still be read (`log/health.rs`). Called on the
    /// I/O thread or on a worker completing a ring operation, never under the queue's lock.
    fn failed(&self, what: &str, error: &std::io::Error) {
        let errors = self.counters.io_errors.fetch_add(1, Ordering::Relaxed);
        count_kind(&self.counters, error);
        if errors.is_multiple_of(1000) {
            eprintln!(
                "coldwire: warning: disk store: cannot {what} a segment in {}: {error} \
                 (disk copies paused for about 2 s; hits keep being served; {} errors so far)",
                self.config.dir.display(),
                errors + 1,
            );
        }
        self.paused_until
            .store(unix_seconds() + 2, Ordering::Relaxed);
        self.check_reads.store(true, Ordering::Release);
        // Under the queue's lock, so the I/O thread cannot miss the wake-up.
        let _queue = lock(&self.queue);
        self.wake.notify_one();
    }
}

/// Counts `error` by its kind (Linux's errno values; the rest is counted as `other`).
fn count_kind(counters: &Counters, error: &std::io::Error) {
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
fn forget(entries: &mut HashMap<String, Vec<Entry>>, key: &str, seq: u64) {
    if let Some(list) = entries.get_mut(key) {
        list.retain(|entry| entry.seq != seq);
        if list.is_empty() {
            entries.remove(key);
        }
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Shared")
            .field("dir", &self.config.dir)
            .finish_non_exhaustive()
    }
}

/// A body being collected for a disk store: in memory as it arrives, its bytes reserved in
/// the queue once it is larger than the memory tier takes.
#[derive(Debug)]
pub struct DiskWriter {
    shared: Arc<Shared>,
    key: String,
    pieces: Vec<Bytes>,
    length: u64,
    /// Bytes reserved in the queue (a disk-only body reserves as it grows).
    reserved: u64,
}

impl Drop for DiskWriter {
    fn drop(&mut self) {
        if self.reserved > 0 {
            self.shared.release(self.reserved);
        }
    }
}

impl BodyWriter for DiskWriter {
    fn push(&mut self, piece: Bytes) -> bool {
        self.length += piece.len() as u64;
        if self.length > self.shared.memory_max_object {
            // Disk only: its bytes must fit in the queue as they come.
            if self.length > self.shared.config.max_object {
                return false;
            }
            let more = self.length - self.reserved;
            if !self.shared.reserve(more) {
                self.shared.counters.dropped.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            self.reserved = self.length;
        }
        self.pieces.push(piece);
        true
    }

    fn finish(mut self: Box<Self>, response: &StoredResponse) -> Finished {
        let shared = self.shared.clone();
        let pieces = std::mem::take(&mut self.pieces);
        let length = self.length;
        let deferred = length > shared.memory_max_object;
        if !deferred && !shared.reserve(length) {
            // The queue is full: kept in memory only.
            shared.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return Finished::Body(Body::Memory(pieces));
        }
        // The reservation now belongs to the queued job.
        self.reserved = 0;
        let key = std::mem::take(&mut self.key);
        queue_object(&shared, key, response, pieces, length, deferred)
    }
}

/// Queues `pieces` as the body of `response` under `key` (its `length` bytes already
/// reserved): indexed at once in memory, or, `deferred`, once written.
fn queue_object(
    shared: &Shared,
    key: String,
    response: &StoredResponse,
    pieces: Vec<Bytes>,
    length: u64,
    deferred: bool,
) -> Finished {
    let seq = shared.next_seq.fetch_add(1, Ordering::Relaxed);
    let head = head_of(response);
    let finished = if deferred {
        Finished::Deferred
    } else {
        let body = Body::Memory(pieces.clone());
        lock(&shared.state)
            .entries
            .entry(key.clone())
            .or_default()
            .push(Entry {
                seq,
                body: body.clone(),
                copy: Copy::Pending,
                removed: false,
                refreshed: None,
            });
        Finished::Body(body)
    };
    shared.push_job(Job::Object {
        seq,
        key,
        head,
        pieces,
        length,
        deferred,
    });
    finished
}

/// The head a record keeps of `response`.
fn head_of(response: &StoredResponse) -> Head {
    Head {
        status: response.status,
        fields: response.fields.clone(),
        vary: response.vary.clone(),
        response_time: response.response_time,
        initial_age: response.initial_age,
    }
}

/// Head records waiting at most: past it (the disk far behind), a freshening is kept in
/// memory only.
const MAX_QUEUED_HEADS: u64 = 4096;

impl Storage for DiskStorage {
    fn name(&self) -> &'static str {
        "disk"
    }

    fn writer(&self, key: &str, announced: Option<u64>) -> Option<Writer> {
        let shared = &self.shared;
        if key.len() > format::MAX_KEY {
            return Some(Writer::Memory(super::MemoryWriter::default()));
        }
        let disk_only = announced.is_some_and(|length| length > shared.memory_max_object);
        if disk_only && (announced > Some(shared.config.max_object) || shared.paused()) {
            return None;
        }
        Some(Writer::Storage(Box::new(DiskWriter {
            shared: shared.clone(),
            key: key.to_owned(),
            pieces: Vec::new(),
            length: 0,
            reserved: 0,
        })))
    }

    fn adopt(&self, key: &str, body: Body, response: &StoredResponse) -> Option<Body> {
        let Body::Memory(pieces) = body else {
            return Some(body);
        };
        let length: u64 = pieces.iter().map(|piece| piece.len() as u64).sum();
        if length > self.shared.memory_max_object
            || key.len() > format::MAX_KEY
            || !self.shared.reserve(length)
        {
            return Some(Body::Memory(pieces));
        }
        match queue_object(
            &self.shared,
            key.to_owned(),
            response,
            pieces,
            length,
            false,
        ) {
            Finished::Body(body) => Some(body),
            Finished::Deferred | Finished::Dropped => None,
        }
    }

    fn remove(&self, key: &str, body: &Body) {
        let mut state = lock(&self.shared.state);
        let Some(entries) = state.entries.get_mut(key) else {
            return;
        };
        let Some(position) = entries
            .iter()
            .position(|entry| !entry.removed && entry.body.shares(body))
        else {
            return;
        };
        if matches!(entries[position].copy, Copy::Pending) {
            // Killed by the I/O thread as soon as it is written; the memory goes now.
            entries[position].removed = true;
            entries[position].body = Body::default();
            return;
        }
        let entry = entries.swap_remove(position);
        if entries.is_empty() {
            state.entries.remove(key);
        }
        drop(state);
        if let Copy::At {
            range,
            record_offset,
            lengths,
            ..
        } = entry.copy
        {
            // The record must never come back after a restart.
            self.shared.push_job(Job::Kill {
                file: range.file,
                record_offset,
                seq: entry.seq,
                lengths,
            });
        }
    }

    fn refresh(&self, key: &str, response: &StoredResponse, stale: bool) {
        let shared = &self.shared;
        if key.len() > format::MAX_KEY {
            return;
        }
        let target = {
            let mut state = lock(&shared.state);
            let Some(entry) = state.entries.get_mut(key).and_then(|entries| {
                entries
                    .iter_mut()
                    .find(|entry| !entry.removed && entry.body.shares(&response.body))
            }) else {
                return;
            };
            if matches!(entry.copy, Copy::Gone) {
                return;
            }
            // Kept for a re-appended record even when no head record is written now.
            entry.refreshed = Some(Refreshed {
                head: head_of(response),
                stale,
            });
            entry.seq
        };
        if shared.paused()
            || shared.counters.queue_depth.load(Ordering::Relaxed) >= MAX_QUEUED_HEADS
        {
            return;
        }
        // Queued after the object's own record (if that is still queued): written after it.
        shared.push_job(Job::Head {
            seq: shared.next_seq.fetch_add(1, Ordering::Relaxed),
            key: key.to_owned(),
            head: head_of(response),
            refresh: heads::Refresh { target, stale },
        });
    }

    fn spill(&self, key: &str, response: &StoredResponse) -> Option<Body> {
        let mut state = lock(&self.shared.state);
        let entry = state
            .entries
            .get_mut(key)?
            .iter_mut()
            .find(|entry| !entry.removed && entry.body.shares(&response.body))?;
        let Copy::At { range, .. } = &entry.copy else {
            return None;
        };
        entry.body = Body::File(range.clone());
        Some(entry.body.clone())
    }

    fn read_failed(&self) {
        self.shared.check_reads.store(true, Ordering::Release);
        // Under the queue's lock, so the I/O thread cannot miss the wake-up.
        let queue = lock(&self.shared.queue);
        self.shared.wake.notify_one();
        drop(queue);
    }

    fn take_evictions(&self, into: &mut Vec<String>) {
        into.append(&mut lock(&self.shared.state).evictions);
    }

    fn max_object(&self) -> u64 {
        self.shared.config.max_object
    }

    fn attach(&self, sink: ReadySink) {
        let recovered = std::mem::take(&mut *lock(&self.shared.recovered));
        if !recovered.is_empty() {
            sink(recovered);
        }
        *lock(&self.shared.sink) = Some(sink);
    }

    fn disk_counters(&self) -> Option<DiskCounters> {
        Some(self.shared.counters())
    }

    fn attach_ring(&self, wake: super::RingWake) -> Option<usize> {
        if !self.shared.config.ring_writes {
            return None;
        }
        Some(self.shared.attach_lane(wake))
    }

    fn detach_ring(&self, lane: usize) {
        self.shared.detach_lane(lane);
    }

    fn take_file_ops(&self, into: &mut Vec<FileOp>) {
        self.shared.take_ring_ops(into);
    }
}

#[cfg(test)]
mod ring_tests;
#[cfg(test)]
mod tests;

#[cfg(test)]
mod heads_tests;

#[cfg(test)]
mod evacuate_tests;
