//! Tests of the store: claims and wake-ups, hit-for-miss markers, LRU eviction and the
//! byte budget, `Vary` variants, purges, fills and their limits, 304 refreshes.

use super::*;
use crate::vary::VaryKey;
use bytes::Bytes;
use coldwire_http::owned_fields::Fields;
use proptest::prelude::*;
use std::time::UNIX_EPOCH;

fn response(body: usize, vary: VaryKey) -> StoredResponse {
    let mut fields = Fields::new();
    fields.push("Cache-Control", b"max-age=60");
    let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    StoredResponse::new(
        200,
        fields,
        vec![Bytes::from(vec![7u8; body])],
        vary,
        now,
        now,
    )
}

fn no_fields(_: &str) -> Vec<&'static [u8]> {
    Vec::new()
}

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
fn a_key_is_claimed_once_until_released() {
    let store = Arc::new(Store::new(StoreConfig::default()));
    let claim = store.claim("http://a/").expect("first claim");
    assert!(store.claim("http://a/").is_none());
    assert!(store.is_claimed("http://a/"));
    assert!(store.claim("http://b/").is_some());
    drop(claim);
    assert!(!store.is_claimed("http://a/"));
    assert!(store.claim("http://a/").is_some());
}

#[test]
fn a_waiter_can_tell_its_leader_from_the_next_one() {
    let store = Arc::new(Store::new(StoreConfig::default()));
    let first = store.claim("http://a/").expect("first claim");
    let waited_for = store.claim_holder("http://a/");
    assert_eq!(waited_for, Some(first.number()));
    drop(first);
    assert_eq!(store.claim_holder("http://a/"), None);
    let second = store.claim("http://a/").expect("claimed again");
    assert_ne!(Some(second.number()), waited_for);
    assert_eq!(store.claim_holder("http://a/"), Some(second.number()));
}

#[test]
fn hit_for_miss_lasts_until_its_deadline_or_a_stored_response() {
    let store = store(100_000);
    let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    assert!(!store.is_hit_for_miss("a", now));
    assert!(store.mark_hit_for_miss("a", now + Duration::from_secs(60)));
    assert!(store.is_hit_for_miss("a", now));
    assert!(matches!(store.lookup("a", no_fields), Lookup::Miss));
    assert_eq!(store.counters().hit_for_miss_keys, 1);
    assert_eq!(store.counters().objects, 0);
    assert!(store.counters().bytes >= MARKER_SIZE);
    // A stored response clears the marker (and its charge).
    assert!(store.insert("a", response(10, VaryKey::default())));
    assert!(!store.is_hit_for_miss("a", now));
    assert_eq!(store.counters().hit_for_miss_keys, 0);
    // An ended marker is gone, and so is the node it alone kept.
    assert!(store.mark_hit_for_miss("b", now + Duration::from_secs(1)));
    assert!(!store.is_hit_for_miss("b", now + Duration::from_secs(1)));
    let counters = store.counters();
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
    let store = store(marker * 10);
    let until = UNIX_EPOCH + Duration::from_secs(1_700_000_600);
    let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    for key in 0..20 {
        assert!(store.mark_hit_for_miss(&format!("k{key:02}"), until));
    }
    let counters = store.counters();
    assert_eq!(counters.hit_for_miss_keys, 10);
    assert!(counters.bytes <= marker * 10);
    assert!(
        !store.is_hit_for_miss("k00", now),
        "the oldest were evicted"
    );
    assert!(store.is_hit_for_miss("k19", now));
    assert!(!store.mark_hit_for_miss(&"k".repeat(2000), until));
}

#[test]
fn hit_for_miss_lifetime_has_a_default_and_a_cap() {
    assert_eq!(hit_for_miss_lifetime(Duration::ZERO), HIT_FOR_MISS_DEFAULT);
    let short = Duration::from_secs(5);
    assert_eq!(hit_for_miss_lifetime(short), short);
    assert_eq!(
        hit_for_miss_lifetime(Duration::from_secs(86_400)),
        HIT_FOR_MISS_MAX
    );
}

#[test]
fn releasing_a_claim_wakes_the_workers_that_follow_it() {
    use std::sync::atomic::AtomicUsize;
    let store = Arc::new(Store::new(StoreConfig::default()));
    let woken: Arc<[AtomicUsize; 2]> = Arc::default();
    for worker in 0..2 {
        let woken = woken.clone();
        store.register_worker(worker, move || {
            woken[worker].fetch_add(1, Ordering::Relaxed);
        });
    }
    let claim = store.claim("http://a/").expect("first claim");
    let number = claim.number();
    assert_eq!(store.follow("http://a/", 1), Some(number));
    assert_eq!(store.follow("http://a/", 1), Some(number));
    assert_eq!(store.follow("http://b/", 0), None, "nothing to wait for");
    drop(claim);
    let counts: Vec<usize> = woken.iter().map(|n| n.load(Ordering::Relaxed)).collect();
    assert_eq!(counts, [0, 1], "the follower's worker, once");
    let mut released = Vec::new();
    store.take_released(1, &mut released);
    assert_eq!(released, [number]);
    assert_eq!(store.follow("http://a/", 1), None, "released");
    // A claim nobody followed wakes nobody.
    drop(store.claim("http://a/"));
    let counts: Vec<usize> = woken.iter().map(|n| n.load(Ordering::Relaxed)).collect();
    assert_eq!(counts, [0, 1]);
}

#[test]
fn purge_removes_every_variant() {
    let store = Store::new(StoreConfig::default());
    let mut french = Fields::new();
    french.push("Accept-Language", b"fr");
    let vary_on = |request: &Fields| {
        let mut response = Fields::new();
        response.push("Vary", b"Accept-Language");
        VaryKey::new(&response, |name: &str| {
            request.values(name).collect::<Vec<_>>()
        })
    };
    let mut german = Fields::new();
    german.push("Accept-Language", b"de");
    assert!(store.insert("http://a/", response(10, vary_on(&french))));
    assert!(store.insert("http://a/", response(10, vary_on(&german))));
    assert_eq!(store.purge("http://a/"), 2);
    assert_eq!(store.purge("http://a/"), 0);
    assert_eq!(store.counters().objects, 0);
    assert_eq!(store.counters().bytes, 0);
}

#[test]
fn stores_finds_and_replaces() {
    let store = store(100_000);
    assert!(matches!(store.lookup("a", no_fields), Lookup::Miss));
    assert!(store.insert("a", response(100, VaryKey::default())));
    assert!(store.insert("a", response(200, VaryKey::default())));
    match store.lookup("a", no_fields) {
        Lookup::Found(found) => assert_eq!(found.body_len, 200),
        other => panic!("expected a hit, got {other:?}"),
    }
    assert_eq!(store.counters().objects, 1);
}

#[test]
fn evicts_least_recently_used_first() {
    let one = response(1000, VaryKey::default()).size() + 1;
    let store = store(one * 3);
    for key in ["a", "b", "c"] {
        assert!(store.insert(key, response(1000, VaryKey::default())));
    }
    // Touch "a" so "b" is the least recently used.
    assert!(matches!(store.lookup("a", no_fields), Lookup::Found(_)));
    assert!(store.insert("d", response(1000, VaryKey::default())));
    assert!(matches!(store.lookup("b", no_fields), Lookup::Miss));
    for key in ["a", "c", "d"] {
        assert!(
            matches!(store.lookup(key, no_fields), Lookup::Found(_)),
            "{key}"
        );
    }
    assert_eq!(store.counters().evicted, 1);
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
    assert!(store.begin_fill("big".into(), Some(10_001)).is_none());
    let mut fill = store.begin_fill("big".into(), None).unwrap();
    assert!(fill.push(Bytes::from(vec![0; 6000])));
    assert!(!fill.push(Bytes::from(vec![0; 6000])));
}

#[test]
fn nothing_is_collected_that_no_shard_could_hold() {
    // Objects up to 10,000 bytes, but a budget of 2,000: a shard holds less.
    let store = store(2_000);
    let limit = store.body_limit("k");
    assert!(limit < 2_000);
    assert!(store.begin_fill("k".into(), Some(limit + 1)).is_none());
    assert!(store.insert("k", response(limit as usize / 2, VaryKey::default())));
    let mut fill = store.begin_fill("k".into(), None).expect("unknown length");
    assert!(fill.fits(limit));
    assert!(fill.push(Bytes::from(vec![0; limit as usize])));
    assert!(!fill.fits(1));
    assert!(!fill.push(Bytes::from(vec![0; 1])), "past the limit");
    // `--cache-bytes 1`: nothing at all.
    let tiny = store_with(1);
    assert_eq!(tiny.body_limit("k"), 0);
    assert!(tiny.begin_fill("k".into(), Some(1)).is_none());
}

#[test]
fn vary_variants_are_kept_side_by_side() {
    let store = store(1 << 20);
    let mut vary_fields = Fields::new();
    vary_fields.push("Vary", b"Accept-Encoding");
    let gzip = |name: &str| -> Vec<&'static [u8]> {
        if name == "accept-encoding" {
            vec![b"gzip"]
        } else {
            vec![]
        }
    };
    let brotli = |name: &str| -> Vec<&'static [u8]> {
        if name == "accept-encoding" {
            vec![b"br"]
        } else {
            vec![]
        }
    };
    assert!(store.insert("u", response(10, VaryKey::new(&vary_fields, gzip))));
    assert!(matches!(store.lookup("u", brotli), Lookup::VaryMiss));
    assert!(store.insert("u", response(20, VaryKey::new(&vary_fields, brotli))));
    match (store.lookup("u", gzip), store.lookup("u", brotli)) {
        (Lookup::Found(first), Lookup::Found(second)) => {
            assert_eq!((first.body_len, second.body_len), (10, 20));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn refresh_merges_a_304_and_shares_the_body() {
    let stored = response(10, VaryKey::default());
    let mut not_modified = Fields::new();
    not_modified.push("Cache-Control", b"max-age=600");
    let later = stored.response_time + Duration::from_secs(100);
    let refreshed = stored.refreshed(&not_modified, later, later);
    assert_eq!(refreshed.freshness.lifetime, Duration::from_secs(600));
    assert_eq!(refreshed.body[0].as_ptr(), stored.body[0].as_ptr());
    assert_eq!(refreshed.ttl(later), 600);
}

proptest! {
    #[test]
    fn never_exceeds_the_budget(operations in proptest::collection::vec((0u8..20, 0usize..3000, 0u8..4), 1..200)) {
        let store = Store::new(StoreConfig { capacity: 20_000, max_object: 5_000, shards: 2 });
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        for (key, size, operation) in operations {
            let key = format!("k{key}");
            match operation {
                0 => {
                    let _ = store.lookup(&key, no_fields);
                }
                1 => {
                    let _ = store.insert(&key, response(size, VaryKey::default()));
                }
                2 => {
                    let until = now + Duration::from_secs(size as u64 % 3);
                    let _ = store.mark_hit_for_miss(&key, until);
                }
                _ => {
                    let _ = store.is_hit_for_miss(&key, now + Duration::from_secs(1));
                }
            }
            let counters = store.counters();
            prop_assert!(counters.bytes <= 20_000, "{} bytes", counters.bytes);
        }
    }
}
