//! Tests of the disk store through the [`Store`] as the proxy uses it: objects survive a
//! reopen byte for byte, the memory tier spills to disk, bodies too large for memory go to
//! disk only, purges and replacements reach the disk, the oldest segments make room, and a
//! segment torn anywhere never yields a wrong object.

use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use coldwire_http::owned_fields::Fields;

use super::{DiskConfig, DiskStorage};
use crate::policy::vary::VaryKey;
use crate::storage::{Body, BodyPiece, StorageChoice};
use crate::store::{Lookup, Store, StoreConfig};

fn fields() -> Fields {
    let mut fields = Fields::new();
    fields.push("Cache-Control", b"max-age=3600");
    fields.push("Content-Type", b"application/octet-stream");
    fields
}

pub(super) fn body_of(key: &str, length: usize) -> Vec<u8> {
    let seed = key
        .bytes()
        .fold(7u8, |hash, byte| hash.wrapping_mul(31) ^ byte);
    (0..length)
        .map(|index| seed.wrapping_add((index % 251) as u8))
        .collect()
}

/// A store over a disk store in `dir`: `memory` bytes of memory, objects up to
/// `memory_max` there, `disk` bytes on disk.
pub(super) fn open(dir: &std::path::Path, memory: u64, memory_max: u64, disk: u64) -> Arc<Store> {
    let config = StoreConfig {
        capacity: memory,
        max_object: memory_max,
        shards: 1,
    };
    let disk = DiskConfig::new(dir, disk, 4 << 20);
    let storage = StorageChoice::Disk(disk).open(&config).expect("opens");
    let store = Arc::new(Store::with_storage(config, storage));
    store.attach_storage();
    store
}

/// Stores `body` under `key` as the proxy does: a fill pushed piece by piece, finished.
pub(super) fn fill(store: &Store, key: &str, body: &[u8]) -> bool {
    let Some(mut fill) = store.begin_fill(key.to_owned(), 200, Some(body.len() as u64)) else {
        return false;
    };
    for piece in body.chunks(16 << 10) {
        if !fill.push(Bytes::copy_from_slice(piece)) {
            return false;
        }
    }
    let now = SystemTime::now();
    fill.finish(store, fields(), VaryKey::default(), now, now)
}

/// Waits until the I/O thread has written everything queued.
pub(super) fn settle(store: &Store) {
    for _ in 0..2000 {
        let disk = store.counters().disk.expect("a disk store");
        if disk.queue_depth == 0 && disk.queue_bytes == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    panic!("the disk store never caught up");
}

/// The bytes a lookup of `key` serves, and whether they came from disk.
pub(super) fn served(store: &Store, key: &str) -> Option<(Vec<u8>, bool)> {
    let Lookup::Found(response) = store.lookup(key, |_| Vec::new()) else {
        return None;
    };
    let mut bytes = Vec::new();
    for piece in response.body.pieces() {
        match piece {
            BodyPiece::Shared(shared) => bytes.extend_from_slice(&shared),
            BodyPiece::File(range) => {
                let mut read = vec![0; range.length as usize];
                range
                    .file
                    .read_exact_at(&mut read, range.offset)
                    .expect("readable");
                bytes.extend_from_slice(&read);
            }
        }
    }
    Some((bytes, matches!(response.body, Body::File(_))))
}

#[test]
fn objects_survive_a_reopen_byte_for_byte() {
    let dir = tempfile::tempdir().expect("a directory");
    let keys: Vec<String> = (0..50).map(|n| format!("http://o/{n}")).collect();
    {
        let store = open(dir.path(), 64 << 20, 1 << 20, 64 << 20);
        for (n, key) in keys.iter().enumerate() {
            assert!(fill(&store, key, &body_of(key, n * 997)));
        }
        settle(&store);
        assert_eq!(store.counters().disk.expect("disk").objects_written, 50);
    }
    let store = open(dir.path(), 64 << 20, 1 << 20, 64 << 20);
    let disk = store.counters().disk.expect("disk");
    assert_eq!(disk.recovered, 50);
    for (n, key) in keys.iter().enumerate() {
        let (bytes, on_disk) = served(&store, key).expect("kept across the reopen");
        assert!(on_disk, "served from its file range");
        assert_eq!(bytes, body_of(key, n * 997), "{key}");
    }
    let Lookup::Found(response) = store.lookup(&keys[3], |_| Vec::new()) else {
        panic!("found");
    };
    assert_eq!(
        response.fields.get("content-type"),
        Some(&b"application/octet-stream"[..])
    );
    assert!(response.is_fresh_for(SystemTime::now(), &Default::default()));
}

#[test]
fn the_memory_tier_spills_to_disk_instead_of_evicting() {
    let dir = tempfile::tempdir().expect("a directory");
    // Room in memory for about four 100 KiB bodies.
    let store = open(dir.path(), 450 << 10, 100 << 10, 64 << 20);
    let keys: Vec<String> = (0..20).map(|n| format!("http://o/{n}")).collect();
    for key in &keys {
        assert!(fill(&store, key, &body_of(key, 100 << 10)));
        settle(&store);
    }
    let counters = store.counters();
    assert_eq!(counters.objects, 20, "none evicted");
    let (bytes, on_disk) = served(&store, &keys[0]).expect("kept");
    assert!(on_disk, "the oldest went to disk");
    assert_eq!(bytes, body_of(&keys[0], 100 << 10));
    let (bytes, on_disk) = served(&store, &keys[19]).expect("kept");
    assert!(!on_disk, "the newest is still in memory");
    assert_eq!(bytes, body_of(&keys[19], 100 << 10));
    let counters = store.counters();
    assert_eq!((counters.found_on_disk, counters.found_in_memory), (1, 1));
}

#[test]
fn a_body_larger_than_memory_takes_goes_to_disk_only() {
    let dir = tempfile::tempdir().expect("a directory");
    let store = open(dir.path(), 1 << 20, 64 << 10, 64 << 20);
    let key = "http://o/large";
    let body = body_of(key, 3 << 20);
    assert!(store.body_limit(key) >= 3 << 20, "the disk's limit applies");
    assert!(fill(&store, key, &body));
    settle(&store);
    let (bytes, on_disk) = served(&store, key).expect("indexed once written");
    assert!(on_disk);
    assert_eq!(bytes, body);
    assert!(
        store.counters().bytes < 64 << 10,
        "charged its metadata only"
    );
    let too_large = body_of(key, 5 << 20);
    assert!(
        !fill(&store, "http://o/too-large", &too_large),
        "over the disk's limit"
    );
}

#[test]
fn purges_and_replacements_reach_the_disk() {
    let dir = tempfile::tempdir().expect("a directory");
    {
        let store = open(dir.path(), 64 << 20, 1 << 20, 64 << 20);
        assert!(fill(&store, "http://o/purged", b"old"));
        assert!(fill(&store, "http://o/replaced", b"first"));
        assert!(fill(&store, "http://o/kept", b"kept"));
        settle(&store);
        assert_eq!(store.purge("http://o/purged"), 1);
        assert!(fill(&store, "http://o/replaced", b"second"));
        // Removed while its write may still be queued: killed once written.
        assert!(fill(&store, "http://o/quick", b"quick"));
        assert_eq!(store.purge("http://o/quick"), 1);
        settle(&store);
    }
    let store = open(dir.path(), 64 << 20, 1 << 20, 64 << 20);
    assert!(
        served(&store, "http://o/purged").is_none(),
        "a purge is not undone"
    );
    assert!(served(&store, "http://o/quick").is_none());
    assert_eq!(
        served(&store, "http://o/replaced").map(|(bytes, _)| bytes),
        Some(b"second".to_vec())
    );
    assert!(served(&store, "http://o/kept").is_some());
}

#[test]
fn the_oldest_segments_make_room_and_the_index_forgets_them() {
    let dir = tempfile::tempdir().expect("a directory");
    // 2 MiB on disk: 16 segments of 128 KiB; memory holds metadata only.
    let keys: Vec<String> = (0..200).map(|n| format!("http://o/{n}")).collect();
    {
        let store = open(dir.path(), 16 << 10, 0, 2 << 20);
        for key in &keys {
            assert!(fill(&store, key, &body_of(key, 30 << 10)));
            settle(&store);
        }
        let disk = store.counters().disk.expect("disk");
        assert!(disk.segments_evicted > 0);
        assert!(disk.segments <= 16);
        let on_disk: u64 = std::fs::read_dir(dir.path())
            .expect("listed")
            .map(|entry| entry.expect("entry").metadata().expect("stat").len())
            .sum();
        assert!(on_disk <= 2 << 20, "{on_disk} bytes on disk");
        // The index dropped what was deleted (at the next insert), kept the newest.
        assert!(fill(&store, "http://o/last", b"x"));
        assert!(served(&store, &keys[0]).is_none());
        let (bytes, _) = served(&store, &keys[199]).expect("the newest stays");
        assert_eq!(bytes, body_of(&keys[199], 30 << 10));
    }
    let store = open(dir.path(), 16 << 10, 0, 2 << 20);
    let mut found = 0;
    for key in &keys {
        if let Some((bytes, _)) = served(&store, key) {
            assert_eq!(bytes, body_of(key, 30 << 10), "{key}");
            found += 1;
        }
    }
    assert!(found > 30, "{found} recovered");
}

#[test]
fn a_segment_torn_anywhere_never_yields_a_wrong_object() {
    let dir = tempfile::tempdir().expect("a directory");
    let keys: Vec<String> = (0..40).map(|n| format!("http://o/{n}")).collect();
    {
        let store = open(dir.path(), 64 << 20, 1 << 20, 64 << 20);
        for (n, key) in keys.iter().enumerate() {
            assert!(fill(&store, key, &body_of(key, 100 + n * 300)));
        }
        settle(&store);
    }
    let segment = std::fs::read_dir(dir.path())
        .expect("listed")
        .map(|entry| entry.expect("entry").path())
        .next()
        .expect("one segment");
    let whole = std::fs::read(&segment).expect("read");
    for cut in (0..whole.len()).step_by(997).chain([whole.len() - 1]) {
        let mut torn = whole[..cut].to_vec();
        // What a crash may leave past the cut: nothing, zeros, or old garbage.
        torn.extend(std::iter::repeat_n((cut % 3) as u8 * 0x5a, cut % 200));
        std::fs::write(&segment, &torn).expect("written");
        let store = open(dir.path(), 64 << 20, 1 << 20, 64 << 20);
        for (n, key) in keys.iter().enumerate() {
            if let Some((bytes, _)) = served(&store, key) {
                assert_eq!(bytes, body_of(key, 100 + n * 300), "cut at {cut}: {key}");
            }
        }
        drop(store);
        // New segments written by that open are not part of the next round.
        for entry in std::fs::read_dir(dir.path()).expect("listed") {
            let path = entry.expect("entry").path();
            if path != segment {
                std::fs::remove_file(path).expect("removed");
            }
        }
    }
}

#[test]
fn a_directory_that_cannot_be_created_is_an_error_naming_it() {
    let file = tempfile::NamedTempFile::new().expect("a file");
    let config = DiskConfig::new(file.path().join("cache"), 1 << 20, 1 << 20);
    let error = DiskStorage::open(config, 1 << 20).expect_err("a file is in the way");
    assert!(error.to_string().contains("cannot create"), "{error}");
}

#[test]
fn a_smaller_size_at_reopen_keeps_only_the_newest_segments_that_fit() {
    let dir = tempfile::tempdir().expect("a directory");
    let keys: Vec<String> = (0..100).map(|n| format!("http://o/{n}")).collect();
    {
        let store = open(dir.path(), 64 << 20, 0, 16 << 20);
        for key in &keys {
            assert!(fill(&store, key, &body_of(key, 100 << 10)));
        }
        settle(&store);
    }
    let size = |dir: &std::path::Path| -> u64 {
        std::fs::read_dir(dir)
            .expect("listed")
            .map(|entry| entry.expect("entry").metadata().expect("stat").len())
            .sum()
    };
    assert!(size(dir.path()) > 8 << 20);
    let store = open(dir.path(), 64 << 20, 0, 4 << 20);
    assert!(
        size(dir.path()) <= 4 << 20,
        "{} bytes left",
        size(dir.path())
    );
    assert!(served(&store, &keys[0]).is_none(), "the oldest went");
    let (bytes, _) = served(&store, &keys[99]).expect("the newest stayed");
    assert_eq!(bytes, body_of(&keys[99], 100 << 10));
}
