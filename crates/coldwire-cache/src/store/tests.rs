//! Tests of the store as the proxy uses it: limits and shards, purges, fills and their
//! limits, 304 refreshes — and a storage other than memory plugged in through the
//! [`Storage`] seam (file ranges handed to hits, bodies removed, evictions it asks for).

use super::*;
use crate::policy::vary::VaryKey;
use crate::storage::{Body, BodyPiece, BodyWriter, FileRange, Finished, MemoryWriter, Writer};
use crate::test_support::{T, at, fields, no_fields, request, response};
use bytes::Bytes;
use std::fs::File;
use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

fn store(capacity: u64) -> Store {
    Store::new(StoreConfig {
        capacity,
        max_object: 10_000,
        shards: 1,
    })
}

/// A store with the default object limit and shards, and `capacity` bytes.
fn store_with(capacity: u64) -> Store {
    Store::new(StoreConfig {
        capacity,
        ..StoreConfig::default()
    })
}

#[test]
fn purge_removes_every_variant() {
    let store = Store::new(StoreConfig::default());
    let vary_on = |pairs| VaryKey::new(&fields(&[("Vary", "Accept-Language")]), request(pairs));
    let french = vary_on(&[("Accept-Language", "fr")]);
    let german = vary_on(&[("Accept-Language", "de")]);
    assert!(store.insert("http://a/", response(10, french)));
    assert!(store.insert("http://a/", response(10, german)));
    assert_eq!(store.purge("http://a/"), 2);
    assert_eq!(store.purge("http://a/"), 0);
    assert_eq!(store.counters().objects, 0);
    assert_eq!(store.counters().bytes, 0);
}

#[test]
fn a_large_object_limit_means_fewer_shards() {
    let store = Store::new(StoreConfig {
        capacity: 256 << 20,
        max_object: 100 << 20,
        shards: 16,
    });
    assert_eq!(store.config().shards, 2);
    assert!(store.insert("big", response(64 << 20, VaryKey::default())));
}

#[test]
fn over_limit_objects_are_refused() {
    let store = store(1 << 20);
    assert!(!store.insert("big", response(10_001, VaryKey::default())));
    assert!(store.begin_fill("big".into(), 200, Some(10_001)).is_none());
    let mut fill = store.begin_fill("big".into(), 200, None).unwrap();
    assert!(fill.push(Bytes::from(vec![0; 6000])));
    assert!(!fill.push(Bytes::from(vec![0; 6000])));
}

#[test]
fn nothing_is_collected_that_no_shard_could_hold() {
    // Objects up to 10,000 bytes, but a budget of 2,000: a shard holds less.
    let store = store(2_000);
    let limit = store.body_limit("k");
    assert!(limit < 2_000);
    assert!(store.begin_fill("k".into(), 200, Some(limit + 1)).is_none());
    assert!(store.insert("k", response(limit as usize / 2, VaryKey::default())));
    let mut fill = store
        .begin_fill("k".into(), 200, None)
        .expect("unknown length");
    assert!(fill.fits(limit));
    assert!(fill.push(Bytes::from(vec![0; limit as usize])));
    assert!(!fill.fits(1));
    assert!(!fill.push(Bytes::from(vec![0; 1])), "past the limit");
    // `--cache-bytes 1`: nothing at all.
    let tiny = store_with(1);
    assert_eq!(tiny.body_limit("k"), 0);
    assert!(tiny.begin_fill("k".into(), 200, Some(1)).is_none());
}

#[test]
fn a_fill_is_stored_only_when_finished() {
    let store = store(1 << 20);
    let mut fill = store.begin_fill("k".into(), 200, Some(5)).unwrap();
    assert!(fill.push(Bytes::from_static(b"ab")));
    assert!(fill.push(Bytes::from_static(b"cde")));
    drop(fill);
    assert!(matches!(store.lookup("k", no_fields), Lookup::Miss));
    let mut fill = store.begin_fill("k".into(), 200, Some(5)).unwrap();
    assert!(fill.push(Bytes::from_static(b"ab")));
    assert!(fill.push(Bytes::from_static(b"cde")));
    let stored = fields(&[("Cache-Control", "max-age=60")]);
    assert!(fill.finish(&store, stored, VaryKey::default(), at(T), at(T)));
    match store.lookup("k", no_fields) {
        Lookup::Found(found) => assert_eq!(found.body.memory().unwrap().concat(), b"abcde"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn refresh_merges_a_304_and_shares_the_body() {
    let stored = response(10, VaryKey::default());
    let not_modified = fields(&[("Cache-Control", "max-age=600")]);
    let later = stored.response_time + Duration::from_secs(100);
    let refreshed = stored.refreshed(&not_modified, later, later);
    assert_eq!(refreshed.freshness.lifetime, Duration::from_secs(600));
    assert!(refreshed.body.shares(&stored.body));
    assert_eq!(refreshed.ttl(later), 600);
}

/// A storage that appends bodies to one file and hands out file ranges — the shape of a
/// disk store, without its crash safety — recording what the index hands back and asking
/// it to forget keys on demand.
#[derive(Debug)]
struct FileStorage {
    /// Bodies go to memory first and to the file only when the index spills them (a
    /// memory tier in front of the file).
    tiered: bool,
    file: std::sync::Arc<File>,
    end: Mutex<u64>,
    removed: Mutex<Vec<String>>,
    evict: Mutex<Vec<String>>,
}

impl FileStorage {
    fn new(tiered: bool) -> FileStorage {
        FileStorage {
            tiered,
            file: std::sync::Arc::new(tempfile::tempfile().expect("a temporary file")),
            end: Mutex::new(0),
            removed: Mutex::default(),
            evict: Mutex::default(),
        }
    }

    fn append(&self, bytes: &[u8]) -> Body {
        let mut end = self.end.lock().unwrap();
        (&*self.file).write_all(bytes).expect("written");
        let range = FileRange {
            file: self.file.clone(),
            offset: *end,
            length: bytes.len() as u64,
            hit: Default::default(),
        };
        *end += bytes.len() as u64;
        Body::File(range)
    }
}

/// Collects in memory, then appends at `finish` (through the storage it came from).
#[derive(Debug)]
struct Appending<'a> {
    storage: &'a FileStorage,
    written: Vec<u8>,
}

impl Storage for &'static FileStorage {
    fn name(&self) -> &'static str {
        "file"
    }

    fn writer(&self, _key: &str, _announced: Option<u64>) -> Option<Writer> {
        if self.tiered {
            return Some(Writer::Memory(MemoryWriter::default()));
        }
        Some(Writer::Storage(Box::new(Appending {
            storage: self,
            written: Vec::new(),
        })))
    }

    fn adopt(&self, key: &str, body: Body, response: &StoredResponse) -> Option<Body> {
        if self.tiered {
            return Some(body);
        }
        let mut writer = self.writer(key, None)?;
        for piece in body.memory()? {
            writer.push(piece.clone());
        }
        match writer.finish(response) {
            Finished::Body(body) => Some(body),
            _ => None,
        }
    }

    fn remove(&self, key: &str, body: &Body) {
        assert!(
            self.tiered || !body.is_in_memory(),
            "only its own bodies come back"
        );
        self.removed.lock().unwrap().push(key.to_owned());
    }

    fn spill(&self, _key: &str, response: &StoredResponse) -> Option<Body> {
        let pieces = response.body.memory()?;
        self.tiered.then(|| self.append(&pieces.concat()))
    }

    fn take_evictions(&self, into: &mut Vec<String>) {
        into.append(&mut self.evict.lock().unwrap());
    }
}

impl BodyWriter for Appending<'static> {
    fn push(&mut self, piece: Bytes) -> bool {
        self.written.extend_from_slice(&piece);
        true
    }

    fn finish(self: Box<Self>, _response: &StoredResponse) -> Finished {
        Finished::Body(self.storage.append(&self.written))
    }
}

#[test]
fn a_storage_plugs_in_and_hits_get_file_ranges() {
    let storage: &'static FileStorage = Box::leak(Box::new(FileStorage::new(false)));
    let config = StoreConfig {
        capacity: 1 << 20,
        max_object: 10_000,
        shards: 1,
    };
    let store = Store::with_storage(config, Box::new(storage));
    // Streamed through a fill, and adopted whole.
    let mut fill = store.begin_fill("a".into(), 200, None).unwrap();
    assert!(fill.push(Bytes::from_static(b"hello ")));
    assert!(fill.push(Bytes::from_static(b"world")));
    let stored = fields(&[("Cache-Control", "max-age=60")]);
    assert!(fill.finish(&store, stored, VaryKey::default(), at(T), at(T)));
    assert!(store.insert("b", response(100, VaryKey::default())));
    let Lookup::Found(hit) = store.lookup("a", no_fields) else {
        panic!("a hit");
    };
    assert_eq!(hit.body_len, 11);
    match hit.body.range(6, 10).collect::<Vec<_>>().as_slice() {
        [BodyPiece::File(range)] => assert_eq!((range.offset, range.length), (6, 5)),
        other => panic!("{other:?}"),
    }
    // Bodies on file are not charged against the memory budget.
    assert!(store.counters().bytes < 1_000);
    // The index hands bodies back when it drops them, and forgets what the storage asks.
    assert_eq!(store.purge("b"), 1);
    storage.evict.lock().unwrap().push("a".into());
    assert!(store.insert("c", response(10, VaryKey::default())));
    assert!(matches!(store.lookup("a", no_fields), Lookup::Miss));
    assert_eq!(*storage.removed.lock().unwrap(), ["b", "a"]);
    // Partial content stays in memory, with the index.
    let mut piece = fields(&[("ETag", "\"x\""), ("Content-Range", "bytes 0-1/4")]);
    piece.push("Cache-Control", b"max-age=60");
    let mut fill = store.begin_fill("p".into(), 206, Some(2)).unwrap();
    assert!(fill.push(Bytes::from_static(b"ab")));
    assert!(fill.finish(&store, piece, VaryKey::default(), at(T), at(T)));
    assert!(store.lookup_partial("p", no_fields).is_some());
}

#[test]
fn bodies_a_storage_keeps_elsewhere_are_spilled_not_evicted() {
    let storage: &'static FileStorage = Box::leak(Box::new(FileStorage::new(true)));
    let one = response(1000, VaryKey::default()).size() + 1;
    let config = StoreConfig {
        capacity: one * 2,
        max_object: 10_000,
        shards: 1,
    };
    let store = Store::with_storage(config, Box::new(storage));
    for key in ["a", "b", "c"] {
        assert!(store.insert(key, response(1000, VaryKey::default())));
    }
    // The least recently used went to the file, until the rest fit; none went away.
    let counters = store.counters();
    assert_eq!((counters.objects, counters.evicted), (3, 0));
    assert!(counters.bytes <= one * 2);
    let in_memory = |key| match store.lookup(key, no_fields) {
        Lookup::Found(hit) => {
            assert_eq!(hit.body_len, 1000);
            hit.body.is_in_memory()
        }
        other => panic!("{key}: {other:?}"),
    };
    assert_eq!(
        [in_memory("a"), in_memory("b"), in_memory("c")],
        [false, false, true]
    );
    match store.lookup("a", no_fields) {
        Lookup::Found(hit) => match hit.body.pieces().collect::<Vec<_>>().as_slice() {
            [BodyPiece::File(range)] => assert_eq!((range.offset, range.length), (0, 1000)),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    assert!(storage.removed.lock().unwrap().is_empty());
}

#[test]
fn limits_change_while_running_and_a_smaller_budget_evicts_at_once() {
    let store = store(100_000);
    for index in 0..8 {
        assert!(store.insert(&format!("k{index}"), response(5_000, VaryKey::default())));
    }
    assert_eq!(store.counters().objects, 8);
    // A smaller budget: the least recently used go now, the rest fits.
    let evicted = store.set_limits(20_000, 10_000);
    assert!(evicted >= 4, "{evicted} evicted");
    assert!(store.counters().bytes <= 20_000);
    // The most recently stored stays, the oldest went.
    assert!(matches!(
        store.lookup("k7", |_| Vec::new()),
        Lookup::Found(_)
    ));
    assert!(!matches!(
        store.lookup("k0", |_| Vec::new()),
        Lookup::Found(_)
    ));
    assert_eq!(store.config().capacity, 20_000);
    // A smaller object limit refuses what it admitted before.
    store.set_limits(20_000, 1_000);
    assert_eq!(store.config().max_object, 1_000);
    assert!(!store.insert("big", response(5_000, VaryKey::default())));
    assert!(store.insert("small", response(900, VaryKey::default())));
    assert_eq!(store.body_limit("k"), 1_000);
}
