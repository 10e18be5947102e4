//! How long a disk store takes to open with a given amount of objects in it: fills a
//! directory through the [`Store`] as the proxy does, closes it, then times opening it
//! again (scan, checksums, indexing) — with the page cache warm, and, with `--cold`, after
//! `echo 3 > /proc/sys/vm/drop_caches` (root only).
//!
//! `cargo run --release -p coldwire-cache --example disk_restart -- DIR BYTES OBJECT_BYTES [--cold]`
//! prints one CSV line: objects,bytes,fill_seconds,open_warm_ms,open_warm_cpu_ms,
//! open_cold_ms,open_cold_cpu_ms,recovered (wall and CPU time of opening: scan, checksums,
//! indexing).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use coldwire_cache::{DiskConfig, StorageChoice, Store, StoreConfig, VaryKey};
use coldwire_http::owned_fields::Fields;

fn open(dir: &str, size: u64) -> Arc<Store> {
    let config = StoreConfig {
        capacity: 256 << 20,
        max_object: 1 << 20,
        ..StoreConfig::default()
    };
    let disk = DiskConfig::new(dir, size, 8 << 20);
    let storage = StorageChoice::Disk(disk)
        .open(&config)
        .expect("the store opens");
    let store = Arc::new(Store::with_storage(config, storage));
    store.attach_storage();
    store
}

fn settle(store: &Store) {
    loop {
        let disk = store.counters().disk.expect("a disk store");
        if disk.queue_depth == 0 && disk.queue_bytes == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// CPU time this process has used (user + system, every thread), in milliseconds, from
/// /proc/self/stat (10 ms ticks): a measure the busy machine's other loads do not inflate.
fn cpu_ms() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after_name
        .split_whitespace()
        .map(|field| field.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (fields.get(11).unwrap_or(&0) + fields.get(12).unwrap_or(&0)) * 10
}

/// Opens the store: wall milliseconds, CPU milliseconds, and the objects recovered.
fn timed_open(dir: &str, size: u64) -> (f64, u64, u64) {
    let cpu = cpu_ms();
    let started = Instant::now();
    let store = open(dir, size);
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    let disk = store.counters().disk.expect("disk");
    (elapsed, cpu_ms() - cpu, disk.recovered)
}

fn main() {
    let arguments: Vec<String> = std::env::args().collect();
    let [_, dir, bytes, object, ..] = arguments.as_slice() else {
        eprintln!("usage: disk_restart DIR BYTES OBJECT_BYTES [--cold]");
        std::process::exit(2);
    };
    let cold = arguments.iter().any(|argument| argument == "--cold");
    let total: u64 = bytes.parse().expect("BYTES: a number");
    let object: usize = object.parse().expect("OBJECT_BYTES: a number");
    // The directory's budget: the objects' bytes, with room for headers and the segment
    // being written.
    let size = total + total / 8;
    let count = total / object as u64;
    let started = Instant::now();
    {
        let store = open(dir, size);
        let body = Bytes::from(vec![0x5au8; object]);
        let mut fields = Fields::new();
        fields.push("Cache-Control", b"max-age=86400");
        fields.push("Content-Type", b"application/octet-stream");
        for number in 0..count {
            let key = format!("http://origin.test/objects/{number}");
            let mut fill = store
                .begin_fill(key, 200, Some(object as u64))
                .expect("a fill");
            fill.push(body.clone());
            let now = SystemTime::now();
            fill.finish(&store, fields.clone(), VaryKey::default(), now, now);
            if number % 4096 == 0 {
                settle(&store);
            }
        }
        settle(&store);
    }
    let fill_seconds = started.elapsed().as_secs_f64();
    // Once to warm the page cache, then measured.
    timed_open(dir, size);
    let (warm, warm_scan, recovered) = timed_open(dir, size);
    let cold_ms = if cold {
        std::fs::write("/proc/sys/vm/drop_caches", "3").expect("dropping caches (root)");
        let (cold, cold_scan, _) = timed_open(dir, size);
        format!("{cold:.0},{cold_scan}")
    } else {
        "-,-".to_owned()
    };
    println!("{count},{total},{fill_seconds:.1},{warm:.0},{warm_scan},{cold_ms},{recovered}");
}
