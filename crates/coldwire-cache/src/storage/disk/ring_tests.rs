//! Tests of the disk store's writes handed to a worker's ring (`--io uring`), with the ring
//! played by the test: operations are taken as a worker takes them, performed in pieces
//! (short writes), failed on purpose, or left waiting. Records are published only once
//! their write completed, a failed write drops its records and seals its segment (and has
//! the thread probe which segments can still be read), and a store whose last ring
//! detaches writes on its own thread again.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::tests::{body_of, fill, open, served};
use super::{FileOp, FileOpRequest};
use crate::store::{Lookup, Store};

/// How the test's ring performs a write.
#[derive(Clone, Copy)]
pub(super) enum Mode {
    /// At most this many bytes per submission (a short write otherwise).
    Pieces(usize),
    /// Every record write fails with EIO.
    Fail,
}

fn pwrite(fd: RawFd, bytes: &[u8], offset: u64) -> io::Result<usize> {
    // SAFETY: `fd` is the segment file the operation holds open until it completes; the
    // `File` is never dropped (ManuallyDrop), so the descriptor is not closed here.
    let file = ManuallyDrop::new(unsafe { File::from_raw_fd(fd) });
    file.write_at(bytes, offset)
}

/// One loop turn of the test's ring: takes the store's operations and performs each (and
/// what follows it) to its end. Returns how many it took.
fn turn(store: &Store, mode: Mode) -> usize {
    let mut taken = Vec::new();
    store.take_disk_ops(&mut taken);
    let count = taken.len();
    let mut queue: VecDeque<FileOp> = taken.into();
    while let Some(op) = queue.pop_front() {
        let result = match op.request() {
            FileOpRequest::Write { fd, offset, bytes } => match mode {
                Mode::Pieces(most) => pwrite(fd, &bytes[..bytes.len().min(most)], offset),
                Mode::Fail if bytes.len() > 64 => Err(io::Error::from_raw_os_error(5)),
                Mode::Fail => pwrite(fd, bytes, offset),
            },
            FileOpRequest::DataSync { .. } => Ok(0),
        };
        queue.extend(op.complete(result));
    }
    count
}

/// Runs the test's ring until the store has nothing queued or in flight.
pub(super) fn settle_on_ring(store: &Store, mode: Mode) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        turn(store, mode);
        let disk = store.counters().disk.expect("a disk store");
        if disk.queue_depth == 0 && disk.queue_bytes == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "never settled: {disk:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Attaches the test's ring; counts the store's wake-ups.
pub(super) fn attach(store: &Store) -> (usize, Arc<AtomicUsize>) {
    let wakes = Arc::new(AtomicUsize::new(0));
    let counted = wakes.clone();
    let lane = store
        .attach_disk_ring(move || {
            counted.fetch_add(1, Ordering::Relaxed);
        })
        .expect("a disk store takes rings");
    (lane, wakes)
}

#[test]
fn ring_writes_in_pieces_are_published_once_complete_and_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("a directory");
    // 64 KiB in memory at most: the larger bodies go to disk only (indexed once written).
    let sizes = |n: usize| {
        if n.is_multiple_of(5) {
            200 << 10
        } else {
            n * 997
        }
    };
    let keys: Vec<String> = (0..30).map(|n| format!("http://o/{n}")).collect();
    {
        let store = open(dir.path(), 64 << 20, 64 << 10, 64 << 20);
        let (_lane, wakes) = attach(&store);
        for (n, key) in keys.iter().enumerate() {
            assert!(fill(&store, key, &body_of(key, sizes(n))));
        }
        // Until the ring has written them, the disk-only bodies are not indexed.
        let deadline = Instant::now() + Duration::from_secs(20);
        while wakes.load(Ordering::Relaxed) == 0 {
            assert!(Instant::now() < deadline, "the ring was never woken");
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(
            served(&store, &keys[0]).is_none(),
            "published before written"
        );
        settle_on_ring(&store, Mode::Pieces(4096));
        let disk = store.counters().disk.expect("disk");
        assert_eq!(disk.objects_written, 30);
        assert!(
            disk.ring_writes_submitted > disk.objects_written,
            "short writes resubmitted: {disk:?}"
        );
        assert_eq!(disk.ring_writes_submitted, disk.ring_writes_completed);
        let (bytes, on_disk) = served(&store, &keys[0]).expect("published once written");
        assert!(on_disk);
        assert_eq!(bytes, body_of(&keys[0], sizes(0)));
    }
    let store = open(dir.path(), 64 << 20, 64 << 10, 64 << 20);
    assert_eq!(store.counters().disk.expect("disk").recovered, 30);
    for (n, key) in keys.iter().enumerate() {
        let (bytes, _) = served(&store, key).expect("kept across the reopen");
        assert_eq!(bytes, body_of(key, sizes(n)), "{key}");
    }
}

#[test]
fn a_failed_ring_write_drops_its_records_and_nothing_wrong_comes_back() {
    let dir = tempfile::tempdir().expect("a directory");
    let keys: Vec<String> = (0..10).map(|n| format!("http://o/{n}")).collect();
    {
        let store = open(dir.path(), 64 << 20, 64 << 10, 64 << 20);
        let _ring = attach(&store);
        for (n, key) in keys.iter().enumerate() {
            let length = if n == 0 { 200 << 10 } else { 8 << 10 };
            assert!(fill(&store, key, &body_of(key, length)));
        }
        settle_on_ring(&store, Mode::Fail);
        let disk = store.counters().disk.expect("disk");
        assert!(disk.io_errors > 0, "{disk:?}");
        assert!(disk.io_errors_by_kind.io > 0, "counted as EIO: {disk:?}");
        assert_eq!(disk.objects_written, 0, "{disk:?}");
        assert!(disk.dropped >= 10, "{disk:?}");
        // The memory copies are still served; the disk-only body was not kept.
        let (bytes, on_disk) = served(&store, &keys[1]).expect("in memory");
        assert!(!on_disk);
        assert_eq!(bytes, body_of(&keys[1], 8 << 10));
        assert!(served(&store, &keys[0]).is_none());
    }
    let store = open(dir.path(), 64 << 20, 64 << 10, 64 << 20);
    assert_eq!(store.counters().disk.expect("disk").recovered, 0);
}

#[test]
fn with_its_last_ring_detached_the_store_writes_on_its_thread_again() {
    let dir = tempfile::tempdir().expect("a directory");
    let store = open(dir.path(), 64 << 20, 64 << 10, 64 << 20);
    let (lane, _wakes) = attach(&store);
    for n in 0..5 {
        let key = format!("http://o/{n}");
        assert!(fill(&store, &key, &body_of(&key, 8 << 10)));
    }
    // The ring never takes them; it stops.
    store.detach_disk_ring(lane);
    super::tests::settle(&store);
    let disk = store.counters().disk.expect("disk");
    assert_eq!(disk.objects_written, 5);
    assert_eq!(disk.ring_writes_submitted, 0);
}

/// Takes operations as a ring would and keeps them in flight (not completed) until
/// `complete_held` completes them, last first.
fn hold(store: &Store, held: &mut Vec<FileOp>) {
    store.take_disk_ops(held);
}

fn complete_held(held: &mut Vec<FileOp>) {
    let mut queue: VecDeque<FileOp> = held.drain(..).rev().collect();
    while let Some(op) = queue.pop_front() {
        let result = match op.request() {
            FileOpRequest::Write { fd, offset, bytes } => pwrite(fd, bytes, offset),
            FileOpRequest::DataSync { .. } => Ok(0),
        };
        queue.extend(op.complete(result));
    }
}

#[test]
fn writes_in_flight_out_of_order_across_sealed_and_deleted_segments_never_serve_wrong() {
    let dir = tempfile::tempdir().expect("a directory");
    // 1 MiB on disk: 64 KiB segments, so 100 bodies of 20 KiB fill many segments and the
    // oldest are deleted while their writes are still in flight.
    let disk = |store: &Store| store.counters().disk.expect("disk");
    let keys: Vec<String> = (0..100).map(|n| format!("http://o/{n}")).collect();
    {
        let store = open(dir.path(), 64 << 20, 16 << 10, 1 << 20);
        let _ring = attach(&store);
        let mut held = Vec::new();
        for key in &keys {
            assert!(fill(&store, key, &body_of(key, 20 << 10)));
            hold(&store, &mut held);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while disk(&store).queue_depth > held.len() as u64 {
            assert!(
                Instant::now() < deadline,
                "never placed: {:?}",
                disk(&store)
            );
            hold(&store, &mut held);
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(disk(&store).segments_evicted > 0, "{:?}", disk(&store));
        // Nothing is published before its write completes.
        assert_eq!(disk(&store).objects_written, 0);
        assert!(keys.iter().all(|key| served(&store, key).is_none()));
        complete_held(&mut held);
        settle_on_ring(&store, Mode::Pieces(usize::MAX));
        let counters = disk(&store);
        assert!(
            counters.ring_syncs_submitted > 0,
            "sealed segments synced: {counters:?}"
        );
        assert_eq!(counters.ring_syncs_submitted, counters.ring_syncs_completed);
        assert!(
            counters.dropped > 0,
            "records of deleted segments dropped: {counters:?}"
        );
        let mut found = 0;
        for key in &keys {
            if let Some((bytes, _)) = served(&store, key) {
                assert_eq!(bytes, body_of(key, 20 << 10), "{key}");
                found += 1;
            }
        }
        assert!(found > 0);
    }
    let store = open(dir.path(), 64 << 20, 16 << 10, 1 << 20);
    for key in &keys {
        if let Some((bytes, _)) = served(&store, key) {
            assert_eq!(bytes, body_of(key, 20 << 10), "{key} after the reopen");
        }
    }
    assert!(disk(&store).recovered > 0);
}

// SAFETY: `dup2(2)` as libc declares it; it only takes two descriptor numbers.
unsafe extern "C" {
    fn dup2(old: RawFd, new: RawFd) -> RawFd;
}

#[test]
fn a_failed_ring_write_makes_the_thread_probe_and_drop_an_unreadable_segment() {
    let dir = tempfile::tempdir().expect("a directory");
    // 64 KiB in memory at most: 200 KiB bodies are on disk only.
    let store = open(dir.path(), 64 << 20, 64 << 10, 64 << 20);
    let _ring = attach(&store);
    let written = "http://o/written";
    assert!(fill(&store, written, &body_of(written, 200 << 10)));
    settle_on_ring(&store, Mode::Pieces(usize::MAX));
    assert!(served(&store, written).expect("published").1);
    // The next write goes to the same segment: its descriptor is made write-only (reads
    // fail with EBADF, as a device failing for reads would with EIO), then the write fails.
    let failing = "http://o/failing";
    assert!(fill(&store, failing, &body_of(failing, 200 << 10)));
    let mut taken = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while taken.is_empty() {
        assert!(Instant::now() < deadline, "never queued");
        store.take_disk_ops(&mut taken);
        std::thread::sleep(Duration::from_millis(2));
    }
    let op = taken.pop().expect("the write");
    let FileOpRequest::Write { fd, .. } = op.request() else {
        panic!("a write first");
    };
    let segment = std::fs::read_dir(dir.path())
        .expect("listed")
        .map(|entry| entry.expect("entry").path())
        .next()
        .expect("one segment");
    let write_only = std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .expect("opened for writing");
    let write_only_fd = std::os::fd::AsRawFd::as_raw_fd(&write_only);
    // SAFETY: both descriptors are open; `fd` (the segment's, held by the store) now
    // names the write-only open file, and is closed by its owner as before.
    let duplicated = unsafe { dup2(write_only_fd, fd) };
    assert_eq!(duplicated, fd);
    assert!(op.complete(Err(io::Error::from_raw_os_error(5))).is_none());
    // The thread probes: the segment cannot be read, the object only it held is forgotten.
    let disk = |store: &Store| store.counters().disk.expect("disk");
    while disk(&store).io_errors_by_kind.other == 0 {
        assert!(
            Instant::now() < deadline,
            "never probed: {:?}",
            disk(&store)
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let counters = disk(&store);
    assert_eq!(counters.io_errors_by_kind.io, 1, "the write: {counters:?}");
    assert_eq!(
        counters.io_errors_by_kind.other, 1,
        "the probe: {counters:?}"
    );
    assert_eq!(counters.segments, 0, "{counters:?}");
    for key in [written, failing] {
        assert!(
            !matches!(store.lookup(key, |_| Vec::new()), Lookup::Found(_)),
            "{key} forgotten"
        );
    }
}
