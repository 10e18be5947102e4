//! Tests of head records through the [`Store`]: a `304` that freshens an object on disk
//! survives a restart (its fields and its freshness), written by the store's thread or on
//! a ring (`--io uring`), a `HEAD` response that made it stale too, the newest of several
//! wins, and a head record torn anywhere leaves the object with its older head — never a
//! wrong one.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use coldwire_http::owned_fields::Fields;

use super::tests::{body_of, open, served, settle};
use crate::policy::cache_control::CacheControl;
use crate::policy::vary::VaryKey;
use crate::store::{Lookup, Store};
use crate::stored::StoredResponse;

const KEY: &str = "http://o/refreshed";

/// Stale at once, with a validator: every request revalidates it.
fn revalidated_fields() -> Fields {
    let mut fields = Fields::new();
    fields.push("Cache-Control", b"max-age=0");
    fields.push("ETag", b"\"v1\"");
    fields
}

/// Stores the object with `fields`, as the proxy does.
fn fill_with(store: &Store, fields: Fields, body: &[u8], at: SystemTime) {
    let mut fill = store
        .begin_fill(KEY.to_owned(), 200, Some(body.len() as u64))
        .expect("a fill");
    assert!(fill.push(Bytes::copy_from_slice(body)));
    assert!(fill.finish(store, fields, VaryKey::default(), at, at));
}

fn found(store: &Store) -> std::sync::Arc<StoredResponse> {
    let Lookup::Found(response) = store.lookup(KEY, |_| Vec::new()) else {
        panic!("{KEY} is kept");
    };
    response
}

/// A `304` with `Cache-Control: max-age=3600` and a new field, `seconds` after `t0`.
fn freshen(store: &Store, marker: &str, t0: SystemTime, seconds: u64) {
    let mut not_modified = Fields::new();
    not_modified.push("Cache-Control", b"max-age=3600");
    not_modified.push("ETag", b"\"v1\"");
    not_modified.push("X-Refreshed", marker.as_bytes());
    let at = t0 + Duration::from_secs(seconds);
    let result = store.freshen_with_304(KEY, None, &not_modified, (at, at));
    assert_eq!(result.updated, 1);
}

#[test]
fn a_304_freshening_survives_a_restart_with_its_fields_and_freshness() {
    let dir = tempfile::tempdir().expect("a directory");
    let body = body_of(KEY, 5000);
    let t0 = SystemTime::now() - Duration::from_secs(100);
    {
        let store = open(dir.path(), 64 << 20, 1 << 20, 64 << 20);
        fill_with(&store, revalidated_fields(), &body, t0);
        settle(&store);
        assert!(!found(&store).is_fresh_for(SystemTime::now(), &CacheControl::default()));
        freshen(&store, "first", t0, 10);
        freshen(&store, "second", t0, 20);
        settle(&store);
        assert_eq!(store.counters().disk.expect("disk").heads_written, 2);
    }
    let store = open(dir.path(), 64 << 20, 1 << 20, 64 << 20);
    let response = found(&store);
    assert_eq!(
        response.fields.get("x-refreshed"),
        Some(&b"second"[..]),
        "the newest head record wins"
    );
    assert_eq!(
        response.fields.get("cache-control"),
        Some(&b"max-age=3600"[..])
    );
    assert_eq!(response.response_time, t0 + Duration::from_secs(20));
    assert!(response.is_fresh_for(SystemTime::now(), &CacheControl::default()));
    assert_eq!(
        served(&store, KEY).expect("served").0,
        body,
        "the body unchanged"
    );
    // A third generation: head records written after a restart still win.
    freshen(&store, "third", t0, 30);
    settle(&store);
    drop((response, store));
    let store = open(dir.path(), 64 << 20, 1 << 20, 64 << 20);
    assert_eq!(found(&store).fields.get("x-refreshed"), Some(&b"third"[..]));
}

#[test]
fn a_head_record_written_on_a_ring_is_counted_once_complete_and_survives_a_restart() {
    use super::ring_tests::{Mode, attach, settle_on_ring};
    let dir = tempfile::tempdir().expect("a directory");
    let body = body_of(KEY, 5000);
    let t0 = SystemTime::now() - Duration::from_secs(100);
    {
        let store = open(dir.path(), 64 << 20, 1 << 20, 64 << 20);
        let _ring = attach(&store);
        fill_with(&store, revalidated_fields(), &body, t0);
        settle_on_ring(&store, Mode::Pieces(usize::MAX));
        freshen(&store, "on the ring", t0, 10);
        // In pieces: the head record's write is short at first, counted only once whole.
        settle_on_ring(&store, Mode::Pieces(16));
        let disk = store.counters().disk.expect("disk");
        assert_eq!(disk.objects_written, 1, "{disk:?}");
        assert_eq!(disk.heads_written, 1, "{disk:?}");
        assert!(disk.ring_writes_submitted > 2, "{disk:?}");
        assert_eq!(disk.ring_writes_submitted, disk.ring_writes_completed);
        assert_eq!(
            found(&store).fields.get("x-refreshed"),
            Some(&b"on the ring"[..])
        );
    }
    let store = open(dir.path(), 64 << 20, 1 << 20, 64 << 20);
    let response = found(&store);
    assert_eq!(
        response.fields.get("x-refreshed"),
        Some(&b"on the ring"[..])
    );
    assert_eq!(response.response_time, t0 + Duration::from_secs(10));
    assert_eq!(served(&store, KEY).expect("served").0, body);
}

#[test]
fn a_head_response_that_made_it_stale_survives_a_restart() {
    let dir = tempfile::tempdir().expect("a directory");
    let body = body_of(KEY, 3000);
    let now = SystemTime::now();
    {
        let store = open(dir.path(), 64 << 20, 1 << 20, 64 << 20);
        let mut fields = Fields::new();
        fields.push("Cache-Control", b"max-age=3600");
        fields.push("ETag", b"\"v1\"");
        fill_with(&store, fields, &body, now);
        settle(&store);
        // A HEAD answer with another validator: the stored GET no longer matches.
        let mut head = Fields::new();
        head.push("ETag", b"\"v2\"");
        head.push("Content-Length", b"3000");
        let result = store.freshen_with_head(KEY, |_| Vec::new(), &head, &head, (now, now));
        assert_eq!(result.made_stale, 1);
        settle(&store);
    }
    let store = open(dir.path(), 64 << 20, 1 << 20, 64 << 20);
    let response = found(&store);
    assert!(
        !response.is_fresh_for(SystemTime::now(), &CacheControl::default()),
        "made stale before the restart: revalidated first"
    );
    assert_eq!(response.fields.get("etag"), Some(&b"\"v1\""[..]));
}

#[test]
fn a_torn_head_record_leaves_the_older_head() {
    let dir = tempfile::tempdir().expect("a directory");
    let body = body_of(KEY, 2000);
    let t0 = SystemTime::now() - Duration::from_secs(100);
    {
        let store = open(dir.path(), 64 << 20, 1 << 20, 64 << 20);
        fill_with(&store, revalidated_fields(), &body, t0);
        settle(&store);
        freshen(&store, "torn", t0, 10);
        settle(&store);
    }
    let segment = std::fs::read_dir(dir.path())
        .expect("listed")
        .map(|entry| entry.expect("entry").path())
        .next()
        .expect("one segment");
    let whole = std::fs::read(&segment).expect("read");
    // The head record is the last one: cut inside it, or flip a byte of it.
    let object_end = whole.len() - 200;
    let mut damaged: Vec<Vec<u8>> = (object_end..whole.len())
        .step_by(7)
        .map(|cut| whole[..cut].to_vec())
        .collect();
    for at in (whole.len() - 120..whole.len()).step_by(5) {
        let mut flipped = whole.clone();
        flipped[at] ^= 0x40;
        damaged.push(flipped);
    }
    for (case, bytes) in damaged.iter().enumerate() {
        std::fs::write(&segment, bytes).expect("written");
        let store = open(dir.path(), 64 << 20, 1 << 20, 64 << 20);
        if let Some((served_body, _)) = served(&store, KEY) {
            assert_eq!(served_body, body, "case {case}");
            let response = found(&store);
            let marker = response.fields.get("x-refreshed");
            assert!(
                marker.is_none() || marker == Some(&b"torn"[..]),
                "case {case}: {marker:?}"
            );
            if marker.is_none() {
                assert_eq!(
                    response.fields.get("cache-control"),
                    Some(&b"max-age=0"[..])
                );
            }
        }
        drop(store);
        for entry in std::fs::read_dir(dir.path()).expect("listed") {
            let path = entry.expect("entry").path();
            if path != segment {
                std::fs::remove_file(path).expect("removed");
            }
        }
    }
}
