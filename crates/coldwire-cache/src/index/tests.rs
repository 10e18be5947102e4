//! Tests of the index: LRU eviction within the byte budget, `Vary` variants side by side,
//! hit-for-miss markers charged and evicted like entries, and the bodies handed back to
//! the storage.

use super::*;
use crate::policy::vary::VaryKey;
use crate::storage::{Body, MemoryStorage, Writer};
use crate::test_support::{self, T, at, fields, no_fields, request};
use proptest::prelude::*;
use std::time::Duration;

fn response(body: usize, vary: VaryKey) -> Arc<StoredResponse> {
    Arc::new(test_support::response(body, vary))
}

/// One shard of `capacity` bytes.
fn index(capacity: u64) -> Index {
    Index::new(1, capacity)
}

#[test]
fn stores_finds_and_replaces() {
    let index = index(100_000);
    assert!(matches!(index.lookup("a", no_fields), Lookup::Miss));
    index.insert("a", response(100, VaryKey::default()), &MemoryStorage);
    index.insert("a", response(200, VaryKey::default()), &MemoryStorage);
    match index.lookup("a", no_fields) {
        Lookup::Found(found) => assert_eq!(found.body_len, 200),
        other => panic!("expected a hit, got {other:?}"),
    }
    assert_eq!(index.counters().objects, 1);
}

#[test]
fn evicts_least_recently_used_first() {
    let one = response(1000, VaryKey::default()).size() + 1;
    let index = index(one * 3);
    for key in ["a", "b", "c"] {
        index.insert(key, response(1000, VaryKey::default()), &MemoryStorage);
    }
    // Touch "a" so "b" is the least recently used.
    assert!(matches!(index.lookup("a", no_fields), Lookup::Found(_)));
    index.insert("d", response(1000, VaryKey::default()), &MemoryStorage);
    assert!(matches!(index.lookup("b", no_fields), Lookup::Miss));
    for key in ["a", "c", "d"] {
        assert!(
            matches!(index.lookup(key, no_fields), Lookup::Found(_)),
            "{key}"
        );
    }
    assert_eq!(index.counters().evicted, 1);
}

#[test]
fn vary_variants_are_kept_side_by_side() {
    let index = index(1 << 20);
    let vary_fields = fields(&[("Vary", "Accept-Encoding")]);
    let gzip = [("Accept-Encoding", "gzip")];
    let brotli = [("Accept-Encoding", "br")];
    let vary = |pairs| VaryKey::new(&vary_fields, request(pairs));
    index.insert("u", response(10, vary(&gzip)), &MemoryStorage);
    assert!(matches!(
        index.lookup("u", request(&brotli)),
        Lookup::VaryMiss
    ));
    index.insert("u", response(20, vary(&brotli)), &MemoryStorage);
    match (
        index.lookup("u", request(&gzip)),
        index.lookup("u", request(&brotli)),
    ) {
        (Lookup::Found(first), Lookup::Found(second)) => {
            assert_eq!((first.body_len, second.body_len), (10, 20));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn hit_for_miss_lasts_until_its_deadline_or_a_stored_response() {
    let index = index(100_000);
    let now = at(T);
    let storage = MemoryStorage;
    assert!(!index.is_hit_for_miss("a", now, &storage));
    assert!(index.mark_hit_for_miss("a", now + Duration::from_secs(60), &storage));
    assert!(index.is_hit_for_miss("a", now, &storage));
    assert!(matches!(index.lookup("a", no_fields), Lookup::Miss));
    assert_eq!(index.counters().hit_for_miss_keys, 1);
    assert_eq!(index.counters().objects, 0);
    assert!(index.counters().bytes >= MARKER_SIZE);
    // A stored response clears the marker (and its charge).
    index.insert("a", response(10, VaryKey::default()), &storage);
    assert!(!index.is_hit_for_miss("a", now, &storage));
    assert_eq!(index.counters().hit_for_miss_keys, 0);
    // An ended marker is gone, and so is the node it alone kept.
    assert!(index.mark_hit_for_miss("b", now + Duration::from_secs(1), &storage));
    assert!(!index.is_hit_for_miss("b", now + Duration::from_secs(1), &storage));
    let counters = index.counters();
    assert_eq!((counters.hit_for_miss_keys, counters.hit_for_miss), (0, 1));
    assert_eq!(
        counters.bytes,
        response(10, VaryKey::default()).size() + 1,
        "only the stored response is charged"
    );
}

#[test]
fn hit_for_miss_markers_are_charged_and_evicted_like_entries() {
    let marker = MARKER_SIZE + 3;
    let index = index(marker * 10);
    let until = at(T + 600);
    let now = at(T);
    for key in 0..20 {
        assert!(index.mark_hit_for_miss(&format!("k{key:02}"), until, &MemoryStorage));
    }
    let counters = index.counters();
    assert_eq!(counters.hit_for_miss_keys, 10);
    assert!(counters.bytes <= marker * 10);
    assert!(
        !index.is_hit_for_miss("k00", now, &MemoryStorage),
        "the oldest were evicted"
    );
    assert!(index.is_hit_for_miss("k19", now, &MemoryStorage));
    assert!(!index.mark_hit_for_miss(&"k".repeat(2000), until, &MemoryStorage));
}

/// A storage that records the bodies handed back to it.
#[derive(Default)]
struct Recording {
    removed: Mutex<Vec<(String, u64)>>,
}

impl Storage for Recording {
    fn name(&self) -> &'static str {
        "recording"
    }

    fn writer(&self, key: &str, announced: Option<u64>) -> Option<Writer> {
        MemoryStorage.writer(key, announced)
    }

    fn remove(&self, key: &str, body: &Body) {
        let mut removed = self.removed.lock().unwrap();
        removed.push((key.to_owned(), body.len()));
    }
}

#[test]
fn every_body_that_leaves_is_handed_back_to_the_storage_once() {
    let one = response(1000, VaryKey::default()).size() + 1;
    let index = index(one * 2);
    let storage = Recording::default();
    let first = response(1000, VaryKey::default());
    index.insert("a", first.clone(), &storage);
    // A freshened copy shares the body: nothing to free.
    let fresh = Arc::new(first.refreshed(&fields(&[]), at(T + 1), at(T + 1)));
    index.insert("a", fresh, &storage);
    assert!(storage.removed.lock().unwrap().is_empty());
    // A new response replaces the body; eviction and removal free theirs.
    index.insert("a", response(999, VaryKey::default()), &storage);
    index.insert("b", response(1000, VaryKey::default()), &storage);
    index.insert("c", response(1000, VaryKey::default()), &storage);
    assert_eq!(index.remove("c", &storage), 1);
    let removed = storage.removed.lock().unwrap().clone();
    assert_eq!(
        removed,
        [
            ("a".to_owned(), 1000),
            ("a".to_owned(), 999),
            ("c".to_owned(), 1000)
        ]
    );
}

proptest! {
    #[test]
    fn never_exceeds_the_budget(operations in proptest::collection::vec((0u8..20, 0usize..3000, 0u8..4), 1..200)) {
        let index = Index::new(2, 20_000);
        let now = at(T);
        for (key, size, operation) in operations {
            let key = format!("k{key}");
            match operation {
                0 => {
                    let _ = index.lookup(&key, no_fields);
                }
                1 => {
                    let response = response(size, VaryKey::default());
                    if response.size() + key.len() as u64 <= index.shard_capacity() {
                        index.insert(&key, response, &MemoryStorage);
                    }
                }
                2 => {
                    let until = now + Duration::from_secs(size as u64 % 3);
                    let _ = index.mark_hit_for_miss(&key, until, &MemoryStorage);
                }
                _ => {
                    let _ = index.is_hit_for_miss(&key, now + Duration::from_secs(1), &MemoryStorage);
                }
            }
            let counters = index.counters();
            prop_assert!(counters.bytes <= 20_000, "{} bytes", counters.bytes);
        }
    }
}
