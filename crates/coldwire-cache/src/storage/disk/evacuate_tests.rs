//! Tests of the second chance (`log/evacuate.rs`) with small segments: a disk-only object
//! hit since it was written survives the deletion of its segment byte for byte (also
//! after a restart), one never hit is evicted, at most a quarter of a segment is
//! re-appended per deletion (the most recently hit first), and a re-appended record torn
//! by a crash falls back to the old copy (or nothing), never to wrong bytes; of two intact
//! copies the newer wins. A freshened head is carried into the new record; on a ring
//! (`--io uring`) it works alike.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use coldwire_http::owned_fields::Fields;

use super::DiskConfig;
use super::format;
use super::ring_tests::{Mode, attach, settle_on_ring};
use super::tests::{body_of, fill, open, served, settle};
use crate::policy::cache_control::CacheControl;
use crate::policy::vary::VaryKey;
use crate::storage::Body;
use crate::store::{Lookup, Store};

/// 2 MiB on disk: 16 segments of 128 KiB; objects of 20 KiB, disk only (memory takes none).
const DISK: u64 = 2 << 20;
const OBJECT: usize = 20 << 10;
/// Memory for the index (metadata only): all of it stays indexed while on disk.
const MEMORY: u64 = 4 << 20;

fn segment_size() -> u64 {
    DiskConfig::new("/", DISK, 1 << 20).segment_size()
}

fn disk(store: &Store) -> super::DiskCounters {
    store.counters().disk.expect("a disk store")
}

/// The inode of the file `key`'s body is served from (not marking it hit: no lookup).
fn file_of(store: &Store, key: &str) -> Option<(u64, u64)> {
    let Lookup::Found(response) = store.lookup(key, |_| Vec::new()) else {
        return None;
    };
    let Body::File(range) = &response.body else {
        return None;
    };
    let metadata = range.file.metadata().expect("stat");
    Some((metadata.ino(), metadata.nlink()))
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("listed")
        .map(|entry| entry.expect("entry").path())
        .collect();
    paths.sort();
    paths
}

#[test]
fn a_hit_object_survives_its_segment_and_one_never_hit_is_evicted() {
    let dir = tempfile::tempdir().expect("a directory");
    let (hot, cold) = ("http://o/hot", "http://o/cold");
    {
        let store = open(dir.path(), MEMORY, 0, DISK);
        assert!(fill(&store, hot, &body_of(hot, OBJECT)));
        assert!(fill(&store, cold, &body_of(cold, OBJECT)));
        settle(&store);
        // Three times round the whole store; the hot object is hit now and then.
        for n in 0..300 {
            let key = format!("http://o/{n}");
            assert!(fill(&store, &key, &body_of(&key, OBJECT)));
            settle(&store);
            if n % 20 == 0 {
                let (bytes, on_disk) = served(&store, hot).expect("the hot object stays");
                assert!(on_disk);
                assert_eq!(bytes, body_of(hot, OBJECT), "after {n} fills");
            }
        }
        let counters = disk(&store);
        assert!(counters.segments_evicted > 16, "{counters:?}");
        assert!(counters.evacuated >= 3, "{counters:?}");
        assert!(counters.evacuated_bytes >= counters.evacuated * OBJECT as u64);
        assert!(served(&store, cold).is_none(), "never hit: evicted");
        let (_, links) = file_of(&store, hot).expect("kept");
        assert!(links > 0, "served from a segment still on disk");
    }
    let store = open(dir.path(), MEMORY, 0, DISK);
    let (bytes, on_disk) = served(&store, hot).expect("kept across a restart");
    assert!(on_disk);
    assert_eq!(bytes, body_of(hot, OBJECT));
    assert!(served(&store, cold).is_none());
}

#[test]
fn at_most_a_quarter_of_a_segment_is_re_appended_per_deletion() {
    let dir = tempfile::tempdir().expect("a directory");
    let store = open(dir.path(), MEMORY, 0, DISK);
    let keys: Vec<String> = (0..200).map(|n| format!("http://o/{n}")).collect();
    for key in &keys {
        assert!(fill(&store, key, &body_of(key, OBJECT)));
        settle(&store);
        // Every object is hit once, as soon as it is written.
        assert!(served(&store, key).is_some());
    }
    let counters = disk(&store);
    assert!(counters.segments_evicted > 0, "{counters:?}");
    assert!(counters.evacuated > 0, "{counters:?}");
    assert!(
        counters.evacuated_bytes <= counters.segments_evicted * segment_size() / 4,
        "{counters:?}"
    );
    // One object of 20 KiB fits a quarter of a 128 KiB segment: the other hit objects of
    // each deleted segment were dropped.
    assert!(
        counters.evacuated <= counters.segments_evicted,
        "{counters:?}"
    );
    assert!(fill(&store, "http://o/last", b"x"));
    for key in &keys {
        if let Some((bytes, _)) = served(&store, key) {
            assert_eq!(bytes, body_of(key, OBJECT), "{key}");
        }
    }
}

#[test]
fn the_most_recently_hit_object_goes_first() {
    let dir = tempfile::tempdir().expect("a directory");
    let store = open(dir.path(), MEMORY, 0, DISK);
    // Six records of 20 KiB fill the first segment (the seventh starts the second).
    let keys: Vec<String> = (0..7).map(|n| format!("http://o/{n}")).collect();
    for key in &keys {
        assert!(fill_one(&store, key));
    }
    assert_eq!(disk(&store).segments, 2);
    // Hit oldest first: the sixth is the most recent (marks are in milliseconds).
    for key in &keys[..6] {
        std::thread::sleep(Duration::from_millis(3));
        assert!(served(&store, key).is_some());
    }
    let mut n = 0;
    while disk(&store).segments_evicted == 0 {
        assert!(fill_one(&store, &format!("http://o/more/{n}")));
        n += 1;
        assert!(n < 1000, "never deleted a segment");
    }
    assert_eq!(disk(&store).evacuated, 1);
    assert!(fill(&store, "http://o/last", b"x"));
    for key in &keys[..5] {
        assert!(
            served(&store, key).is_none(),
            "{key}: dropped over the bound"
        );
    }
    assert_eq!(
        served(&store, &keys[5])
            .expect("the most recent hit stays")
            .0,
        body_of(&keys[5], OBJECT)
    );
}

#[test]
fn a_torn_re_appended_record_falls_back_to_the_old_copy_never_to_wrong_bytes() {
    let dir = tempfile::tempdir().expect("a directory");
    let hot = "http://o/hot";
    let body = body_of(hot, OBJECT);
    let first = dir.path().join(format!("{:016x}.cws", 1));
    let backup = tempfile::NamedTempFile::new().expect("a file");
    {
        let store = open(dir.path(), MEMORY, 0, DISK);
        assert!(fill(&store, hot, &body));
        settle(&store);
        let mut n = 0;
        while disk(&store).evacuated == 0 {
            let key = format!("http://o/{n}");
            assert!(fill(&store, &key, &body_of(&key, OBJECT)));
            settle(&store);
            if n == 0 {
                assert!(served(&store, hot).is_some(), "hit once");
            }
            if disk(&store).segments == 2 && backup.as_file().metadata().expect("stat").len() == 0 {
                // The first segment, sealed: what a crash before its deletion leaves.
                std::fs::copy(&first, backup.path()).expect("copied");
            }
            n += 1;
            assert!(n < 1000, "never evacuated");
        }
        settle(&store);
    }
    // The segment holding the re-appended copy: the one whose record of `hot` is newest.
    let (copy_path, copy_record) = segments(dir.path())
        .into_iter()
        .filter_map(|path| {
            let id = u64::from_str_radix(path.file_stem()?.to_str()?, 16).ok()?;
            let bytes = std::fs::read(&path).ok()?;
            let record = format::scan(&bytes, id)
                .into_iter()
                .find(|record| record.key == hot)?;
            Some((path, record))
        })
        .max_by_key(|(_, record)| record.seq)
        .expect("the re-appended copy");
    let whole = std::fs::read(&copy_path).expect("read");
    let ids_then: Vec<PathBuf> = segments(dir.path());
    // Where its checked bytes end (only padding follows).
    let data_end = (copy_record.body_offset + copy_record.body_len) as usize;
    let cuts = (copy_record.offset as usize..data_end)
        .step_by(4099)
        .chain([copy_record.offset as usize + 47, data_end - 1, data_end]);
    for cut in cuts {
        // The crash left the old segment (not deleted yet) and the new one torn at `cut`.
        std::fs::copy(backup.path(), &first).expect("restored");
        let mut torn = whole[..cut].to_vec();
        torn.extend(std::iter::repeat_n((cut % 3) as u8 * 0x5a, cut % 200));
        std::fs::write(&copy_path, &torn).expect("written");
        // A budget large enough to keep every segment found.
        let store = open(dir.path(), MEMORY, 0, 4 * DISK);
        let (bytes, _) = served(&store, hot).expect("the old copy at least");
        assert_eq!(bytes, body, "cut at {cut}");
        let (ino, _) = file_of(&store, hot).expect("on disk");
        let from_copy = ino == std::fs::metadata(&copy_path).expect("stat").ino();
        // Whole, the newer copy wins; torn, the old one is served.
        assert_eq!(from_copy, cut == data_end, "cut at {cut}");
        drop(store);
        for path in segments(dir.path()) {
            if !ids_then.contains(&path) {
                std::fs::remove_file(path).expect("removed");
            }
        }
    }
    // Without the old copy (its segment deleted, as after a clean run), the new one.
    std::fs::write(&copy_path, &whole).expect("written");
    assert!(!first.exists());
    let store = open(dir.path(), MEMORY, 0, 4 * DISK);
    assert_eq!(served(&store, hot).expect("kept").0, body);
}

#[test]
fn a_freshened_head_is_carried_into_the_re_appended_record() {
    let dir = tempfile::tempdir().expect("a directory");
    let hot = "http://o/freshened";
    let body = body_of(hot, OBJECT);
    let t0 = SystemTime::now() - Duration::from_secs(100);
    {
        let store = open(dir.path(), MEMORY, 0, DISK);
        // Stale at once, with a validator; then a `304` freshens it for an hour.
        let mut stale = Fields::new();
        stale.push("Cache-Control", b"max-age=0");
        stale.push("ETag", b"\"v1\"");
        let mut fill = store
            .begin_fill(hot.to_owned(), 200, Some(body.len() as u64))
            .expect("a fill");
        assert!(fill.push(Bytes::copy_from_slice(&body)));
        assert!(fill.finish(&store, stale, VaryKey::default(), t0, t0));
        settle(&store);
        let mut not_modified = Fields::new();
        not_modified.push("Cache-Control", b"max-age=3600");
        not_modified.push("ETag", b"\"v1\"");
        not_modified.push("X-Refreshed", b"yes");
        let at = t0 + Duration::from_secs(50);
        let freshened = store.freshen_with_304(hot, None, &not_modified, (at, at));
        assert_eq!(freshened.updated, 1);
        settle(&store);
        assert!(served(&store, hot).is_some(), "hit once");
        let mut n = 0;
        while disk(&store).evacuated == 0 {
            let key = format!("http://o/{n}");
            assert!(fill_one(&store, &key));
            n += 1;
            assert!(n < 1000, "never evacuated");
        }
        settle(&store);
    }
    // Its first segment (and the head record there) is gone: the new record carries it.
    assert!(!dir.path().join(format!("{:016x}.cws", 1)).exists());
    let store = open(dir.path(), MEMORY, 0, DISK);
    let Lookup::Found(response) = store.lookup(hot, |_| Vec::new()) else {
        panic!("kept across a restart");
    };
    assert_eq!(response.fields.get("x-refreshed"), Some(&b"yes"[..]));
    assert_eq!(response.response_time, t0 + Duration::from_secs(50));
    assert!(response.is_fresh_for(SystemTime::now(), &CacheControl::default()));
    assert_eq!(served(&store, hot).expect("served").0, body);
}

fn fill_one(store: &Store, key: &str) -> bool {
    let stored = fill(store, key, &body_of(key, OBJECT));
    settle(store);
    stored
}

#[test]
fn on_a_ring_a_hit_object_is_re_appended_by_a_ring_write() {
    let dir = tempfile::tempdir().expect("a directory");
    let hot = "http://o/hot";
    let mode = Mode::Pieces(5000);
    {
        let store = open(dir.path(), MEMORY, 0, DISK);
        let (_lane, _wakes) = attach(&store);
        assert!(fill(&store, hot, &body_of(hot, OBJECT)));
        settle_on_ring(&store, mode);
        for n in 0..120 {
            let key = format!("http://o/{n}");
            assert!(fill(&store, &key, &body_of(&key, OBJECT)));
            settle_on_ring(&store, mode);
            if n % 20 == 0 {
                let (bytes, _) = served(&store, hot).expect("the hot object stays");
                assert_eq!(bytes, body_of(hot, OBJECT), "after {n} fills");
            }
        }
        let counters = disk(&store);
        assert!(counters.evacuated >= 1, "{counters:?}");
        assert!(counters.ring_writes_completed > 0, "{counters:?}");
        assert!(served(&store, "http://o/0").is_none(), "never hit: evicted");
    }
    let store = open(dir.path(), MEMORY, 0, DISK);
    assert_eq!(served(&store, hot).expect("kept").0, body_of(hot, OBJECT));
}
