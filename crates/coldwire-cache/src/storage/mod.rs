//! Where stored bodies live: the [`Storage`] trait, the [`Body`] forms a hit reads, and the
//! one list of storages ([`StorageChoice`]). The [index](crate::index) keeps every
//! response's metadata (fields, `Vary` key, freshness, LRU position) and a [`Body`] handle;
//! a storage keeps the bytes behind the handle. Policy never sees either.
//!
//! # The contract
//!
//! A storage is written once per stored response and read on every hit, so the two sides
//! are shaped differently:
//!
//! - **Write** (per stored miss, through a [`dyn Storage`](Storage)): [`Storage::writer`]
//!   starts a body as the response streams — a [`Writer`]: in memory, or the storage's
//!   own [`BodyWriter`] — the proxy's fill pushes each piece as it arrives
//!   ([`BodyWriter::push`]), and [`BodyWriter::finish`] is called only once the whole
//!   body has arrived and returns the [`Body`] to index. A writer dropped without
//!   `finish` (the response ended early or grew too large) must leave nothing behind.
//!   [`Storage::adopt`] takes a body already complete in memory (a background
//!   revalidation's answer, combined partial content).
//! - **Read** (per hit, no call into the storage at all): the index hands out the
//!   [`Body`] it was given, and the proxy sends [`Body::pieces`] / [`Body::range`]: shared
//!   `Bytes` through `sendmsg`, or a [`FileRange`] (an `Arc<File>`, an offset, a length)
//!   through `sendfile` / `splice`, zero-copy. A storage that keeps bytes on disk hands out
//!   `Body::File`; one that keeps them in memory (or a memory tier in front of a disk)
//!   `Body::Memory`.
//! - **Remove**: the index calls [`Storage::remove`] once for every body it stops holding
//!   (replaced, purged, evicted, refused). Hits already under way keep their clones: a
//!   storage may reuse the space of a `FileRange` only once no clone of its `Arc<File>`
//!   is left but its own (`Arc::strong_count`) — e.g. one file per segment of a
//!   log-structured store, a segment recycled when nothing reads it, or one file per
//!   object, unlinked on removal (an open descriptor keeps an unlinked file's bytes).
//! - **Refresh**: a `304` or a `HEAD` response that freshens a stored response (new
//!   fields and times, or made stale) hands the new copy, sharing the body, to
//!   [`Storage::refresh`] before indexing it: a storage that keeps heads persists it.
//! - **Failed reads**: a hit whose `FileRange` could not be read while it was sent is
//!   reported ([`Storage::read_failed`]); the storage names what it lost in
//!   [`Storage::take_evictions`] and may call its [`ReadySink`] with nothing to have them
//!   forgotten at once.
//! - **Account**: a `Body::Memory` is charged against the store's byte budget
//!   (`--cache-bytes`) by the index, which evicts least recently used keys to stay within
//!   it (first offering their bodies to [`Storage::spill`]); a `Body::File` is charged
//!   only its metadata there, and the storage keeps its own budget. When it must make room (its disk is full, or a body failed its checksum), it
//!   names the keys to forget through [`Storage::take_evictions`]; the index drops them
//!   (and calls `remove` for each body) before every insert. A storage never frees a body
//!   the index still holds.
//!
//! # Adding a storage (the disk store, `storage/disk/`, was added this way)
//!
//! One new file (or folder), with a type implementing [`Storage`] and its
//! [`BodyWriter`] (handed out as [`Writer::Storage`]), and one registration: a variant of
//! [`StorageChoice`] and its arm in [`StorageChoice::open`]. Nothing in the index, the fill lock, the policy or the proxy's
//! hit path changes. (The CLI flag that selects it, `--cache-dir`, is the CLI's.) What a
//! disk store must guarantee besides the contract above:
//!
//! - **Crash safety.** A body becomes visible only once complete, and after a crash a
//!   record either describes a complete body or is not read: the disk store writes each
//!   record (key, head, body) with its own checksums and verifies them when it opens (a
//!   half-written record or body is skipped, never served); another design could `fsync`
//!   a body and publish it with an atomic step (a `rename`).
//! - **Checksums.** Every body carries a checksum, kept in its record and verified when
//!   the store is opened (or lazily, before a body is first handed out after a restart). A
//!   body that fails is never indexed (or, found later, named in
//!   [`Storage::take_evictions`]).
//! - **No blocking on the event loop.** `push`, `finish` and `remove` run on a worker's
//!   loop (and `remove` under an index lock): queue the disk work to a helper thread and
//!   return; `finish` may return a `Body::Memory` that the hot tier serves while the disk
//!   copy is written, or decline (`None`) when it cannot keep up. On `--io uring` the
//!   helper may instead hand its file operations to the workers' rings
//!   ([`Storage::attach_ring`], [`Storage::take_file_ops`]): their completions then run
//!   on a worker's loop ([`disk::FileOp::complete`]) and must not block either.
//! - **Metadata.** To be found again after a restart, a record holds the response's head
//!   too: [`BodyWriter::finish`], [`Storage::adopt`] and [`Storage::spill`] are handed the
//!   [`StoredResponse`]; responses the index does not know of yet (found at start-up, or
//!   written to disk before being indexed, [`Finished::Deferred`]) go to the sink
//!   installed by [`Storage::attach`].
//! - **A memory tier in front.** It lives inside the disk store: its writer returns a
//!   `Body::Memory` (charged to the memory budget, served from memory) while also writing
//!   the body to disk. When the index must make room, it offers each body in memory to
//!   [`Storage::spill`] before evicting it: the disk store returns the body's
//!   `Body::File` and the entry stays, demoted to disk; only bodies it has no disk copy of
//!   (yet) are evicted. The index's budget then bounds the metadata of disk entries too.
//!
//! # Why `dyn Storage`, not a type parameter
//!
//! The [`Store`](crate::Store) holds a `Box<dyn Storage>` chosen at start-up. A hit never
//! calls it (the [`Body`] form is closed and read directly), so dynamic dispatch costs
//! nothing there. A stored miss pays one virtual call to start its writer; collecting in
//! memory is then the built-in [`Writer::Memory`] (no box, no virtual call per piece), and
//! another storage's writer costs one box and a virtual call per 16 KiB piece, noise
//! beside the copy of those bytes. Measured against the store before this seam (release
//! build, callgrind): a hit takes 674 instructions (761 before: the lookup is inlined
//! now), storing a 64 KiB response in memory 4,542 (4,396 before, +3%). A type parameter
//! would instead thread `S` through the store, every fill and claim, and the whole proxy
//! worker — already monomorphised once per I/O driver — multiplying its code by the
//! number of storages, for no gain on the hit path.

mod body;
pub mod disk;
mod memory;

pub use body::{Body, BodyPiece, FileRange, HitMark, Pieces};
pub use disk::{DiskConfig, DiskCounters, DiskStorage, FileOp, FileOpRequest, IoErrorKinds};
pub use memory::{MemoryStorage, MemoryWriter};

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use coldwire_http::owned_fields::Fields;

use crate::policy::vary::VaryKey;
use crate::store::StoreConfig;
use crate::stored::StoredResponse;

/// How a finished body is kept (see [`BodyWriter::finish`]).
#[derive(Debug)]
pub enum Finished {
    /// This handle, to index now.
    Body(Body),
    /// Kept, but indexed later, once the storage has written it (it comes back through the
    /// [`ReadySink`]): a body too large for memory, on its way to disk.
    Deferred,
    /// Not kept.
    Dropped,
}

/// Where a storage hands responses it holds that the index does not know of yet: those
/// found at start-up, and bodies it wrote after [`Finished::Deferred`]. Installed by
/// [`Storage::attach`].
pub type ReadySink = Arc<dyn Fn(Vec<Restored>) + Send + Sync>;

/// A response a storage hands to the index (through the [`ReadySink`]): its metadata as
/// written down, and its body's handle. Its freshness is computed again from these.
#[derive(Debug)]
pub struct Restored {
    /// The cache key.
    pub key: String,
    /// Status code.
    pub status: u16,
    /// End-to-end fields.
    pub fields: Fields,
    /// The `Vary` key it was selected by.
    pub vary: VaryKey,
    /// When it arrived.
    pub response_time: SystemTime,
    /// Its age when it arrived.
    pub initial_age: Duration,
    /// Where its body is.
    pub body: Body,
    /// It was made stale before it was kept (a `HEAD` response did not match it): it must
    /// be revalidated before it is served.
    pub stale: bool,
}

impl Restored {
    /// A response read back from a record's head.
    pub(crate) fn new(key: String, head: disk::format::Head, body: Body) -> Restored {
        Restored {
            key,
            status: head.status,
            fields: head.fields,
            vary: head.vary,
            response_time: head.response_time,
            initial_age: head.initial_age,
            body,
            stale: false,
        }
    }
}

/// A place bodies are kept: written once per stored response, read by hits through the
/// [`Body`] handles it returns. See the [module docs](self) for the contract.
pub trait Storage: Send + Sync {
    /// A short name for logs and errors (`memory`, `disk`).
    fn name(&self) -> &'static str;

    /// Starts the body of a response to be stored under `key`, whose length is `announced`
    /// when known. `None` when the storage cannot take it now (full, failing): the response
    /// then passes uncached.
    fn writer(&self, key: &str, announced: Option<u64>) -> Option<Writer>;

    /// Takes a body already complete (in memory) for `key`, the body of `response`
    /// (whose own `body` is not it): returns the handle to index, or `None` when it cannot
    /// be kept. The default writes it through [`Storage::writer`]; a body already in this
    /// storage's own form is kept as it is.
    fn adopt(&self, key: &str, body: Body, response: &StoredResponse) -> Option<Body> {
        let Body::Memory(pieces) = body else {
            return Some(body);
        };
        let length = pieces.iter().map(|piece| piece.len() as u64).sum();
        let mut writer = self.writer(key, Some(length))?;
        for piece in pieces {
            if !writer.push(piece) {
                return None;
            }
        }
        match writer.finish(response) {
            Finished::Body(body) => Some(body),
            Finished::Deferred | Finished::Dropped => None,
        }
    }

    /// The index no longer holds `body`, once stored under `key`: free it (hits already
    /// under way keep their clones; see the module docs). Called under an index lock: it
    /// must not block.
    fn remove(&self, key: &str, body: &Body);

    /// The index now holds `response` under `key` in place of an older copy sharing its
    /// body: a `304` or a `HEAD` response freshened it (new fields and times) or made it
    /// stale (`stale`). A storage that keeps heads (the disk store) records the new one, so a
    /// restart brings it back. The default keeps nothing. Called under an index lock: it
    /// must not block.
    fn refresh(&self, key: &str, response: &StoredResponse, stale: bool) {
        let _ = (key, response, stale);
    }

    /// The index must make room in memory and is about to evict `response`, whose body is
    /// held in memory under `key`: a storage that also keeps it elsewhere (a disk copy
    /// behind a memory tier) returns that handle, and the entry stays indexed with it,
    /// charged only its metadata. The default keeps nothing elsewhere (`None`: the entry is
    /// evicted). Called under an index lock: it must not block.
    fn spill(&self, key: &str, response: &StoredResponse) -> Option<Body> {
        let _ = (key, response);
        None
    }

    /// A [`Body::File`] it handed out could not be read while a hit was sent (`EIO`): a
    /// storage on a failing disk checks what it can still read and names the keys it lost
    /// in [`Storage::take_evictions`] (see [`ReadySink`]). The default does nothing. Called
    /// on a worker: it must not block.
    fn read_failed(&self) {}

    /// Moves into `into` the keys whose bodies this storage needs the index to forget (its
    /// own space is short, or a body is damaged). The default names none.
    fn take_evictions(&self, into: &mut Vec<String>) {
        let _ = into;
    }

    /// The largest body this storage keeps outside memory (0: none; the store's own
    /// per-object limit applies to bodies in memory).
    fn max_object(&self) -> u64 {
        0
    }

    /// Installs where responses the index does not know of yet go (see [`ReadySink`]);
    /// called once, when the store is shared. A storage that found responses at start-up
    /// hands them over here. The default has none.
    fn attach(&self, sink: ReadySink) {
        let _ = sink;
    }

    /// The disk store's counters, for a storage that is one.
    fn disk_counters(&self) -> Option<DiskCounters> {
        None
    }

    /// A worker whose event loop has a ring (`--io uring`) offers it for this storage's
    /// file operations; `wake` wakes that loop. Returns the worker's lane (to detach it
    /// when it stops), or `None` for a storage without file operations (the default).
    /// From then on the worker takes the operations ([`Storage::take_file_ops`]) once per
    /// loop turn, submits each on its ring and hands its result to
    /// [`FileOp::complete`](disk::FileOp::complete).
    fn attach_ring(&self, wake: RingWake) -> Option<usize> {
        let _ = wake;
        None
    }

    /// The worker of `lane` stops taking file operations.
    fn detach_ring(&self, lane: usize) {
        let _ = lane;
    }

    /// Moves the file operations waiting for a ring into `into`. Must not block.
    fn take_file_ops(&self, into: &mut Vec<disk::FileOp>) {
        let _ = into;
    }
}

/// Wakes a worker's event loop (see [`Storage::attach_ring`]).
pub type RingWake = Arc<dyn Fn() + Send + Sync>;

/// A body being written as its response streams in, as [`Storage::writer`] returns it:
/// collected in memory (built in, like [`Body::Memory`]: no box, no virtual call per
/// piece), or by a storage's own [`BodyWriter`]. Dropping it without [`Writer::finish`]
/// abandons the body and frees what it took.
#[derive(Debug)]
pub enum Writer {
    /// The pieces collected in memory, as they arrived.
    Memory(MemoryWriter),
    /// A storage's own writer (e.g. a disk store's, writing as the pieces come).
    Storage(Box<dyn BodyWriter>),
}

impl Writer {
    /// Appends the next piece of the body. False when the storage cannot take it (the fill
    /// is then dropped and the response passes uncached).
    #[inline]
    pub fn push(&mut self, piece: Bytes) -> bool {
        match self {
            Writer::Memory(writer) => writer.push(piece),
            Writer::Storage(writer) => writer.push(piece),
        }
    }

    /// The whole body of `response` (whose own `body` is not it yet) has arrived: how it is
    /// kept.
    #[inline]
    pub fn finish(self, response: &StoredResponse) -> Finished {
        match self {
            Writer::Memory(writer) => Finished::Body(writer.finish()),
            Writer::Storage(writer) => writer.finish(response),
        }
    }
}

/// A storage's own body writer (see [`Writer::Storage`]). Dropping it without
/// [`BodyWriter::finish`] abandons the body and frees what it took.
pub trait BodyWriter: Send + std::fmt::Debug {
    /// Appends the next piece of the body. False when the storage cannot take it (the fill
    /// is then dropped and the response passes uncached).
    fn push(&mut self, piece: Bytes) -> bool;

    /// The whole body of `response` (its metadata: its own `body` is not this one yet) has
    /// arrived: how it is kept.
    fn finish(self: Box<Self>, response: &StoredResponse) -> Finished;
}

/// Every storage coldwire can keep bodies in: the one place a new storage is registered
/// (a variant here and its arm in [`StorageChoice::open`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum StorageChoice {
    /// Bodies in memory, within the store's byte budget ([`MemoryStorage`]).
    #[default]
    Memory,
    /// Bodies on disk, with memory as the hot tier in front ([`DiskStorage`]).
    Disk(DiskConfig),
}

impl StorageChoice {
    /// Its name, as in logs and errors.
    pub fn name(&self) -> &'static str {
        match self {
            StorageChoice::Memory => "memory",
            StorageChoice::Disk(_) => "disk",
        }
    }

    /// Opens the storage for a store of `config` (a disk store would open or recover its
    /// directory here, and fail with a message saying what to fix).
    pub fn open(&self, config: &StoreConfig) -> std::io::Result<Box<dyn Storage>> {
        match self {
            StorageChoice::Memory => Ok(Box::new(MemoryStorage)),
            StorageChoice::Disk(disk) => Ok(Box::new(DiskStorage::open(
                disk.clone(),
                config.max_object,
            )?)),
        }
    }
}
