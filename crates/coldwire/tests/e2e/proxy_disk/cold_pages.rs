//! Disk hits whose segment pages are not in the page cache, on every backend: the store's
//! segment files are written back and evicted (`posix_fadvise(DONTNEED)`) after the fill,
//! then every object is fetched again — byte for byte the origin's — and on the readiness
//! backends the cold windows were read ahead by the pool (`loop.file_reads_offloaded`)
//! rather than by `sendfile` on the loop. Where the file system ignores the advice, the
//! test prints `skipped: <why>`.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use super::{DiskOrigin, disk_proxy, get, object_bytes, settle};

coldwire_testkit::backend_tests! {
    a_disk_hit_from_evicted_pages_is_byte_exact,
}

/// Writes back and evicts every segment file of the store in `dir`; returns the pages
/// still cached afterwards (0 when the eviction worked).
fn evict_segments(dir: &Path) -> u64 {
    let mut left = 0;
    for entry in std::fs::read_dir(dir).expect("the cache directory") {
        let path = entry.expect("an entry").path();
        if path.extension().is_none_or(|extension| extension != "cws") {
            continue;
        }
        let file = File::open(&path).expect("a segment");
        // Dirty pages cannot be dropped: write them back first (the store syncs only
        // about once a second).
        file.sync_all().expect("synced");
        let fd = file.as_raw_fd();
        // SAFETY: advice on a descriptor we own; no memory arguments.
        unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
        let length = file.metadata().expect("its length").len();
        if length > 0 {
            left += coldwire_io::sys::cached_pages(fd, 0, length)
                .or_else(|_| coldwire_io::sys::cached_pages_by_mincore(fd, 0, length))
                .unwrap_or(u64::MAX);
        }
    }
    left
}

fn a_disk_hit_from_evicted_pages_is_byte_exact(backend: &str) {
    let origin = DiskOrigin::start();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a directory");
    let proxy = disk_proxy(backend, dir.path(), &[]);
    // 256 KiB and 1 MiB bodies: over --max-object-bytes, so on disk only — every hit is a
    // disk hit.
    let paths: Vec<String> = (0..8)
        .map(|seed| DiskOrigin::path(seed + 500, if seed % 2 == 0 { 256 << 10 } else { 1 << 20 }))
        .collect();
    for path in &paths {
        let (status, _, body) = get(proxy.address, &origin.url(path)).expect("answered");
        assert_eq!(status, 200);
        assert!(body == object_bytes(path), "{path}");
    }
    settle(&proxy);
    let left = evict_segments(dir.path());
    if left > 0 {
        eprintln!(
            "skipped: {left} segment pages stayed in the page cache after POSIX_FADV_DONTNEED \
             ({} does not evict on advice)",
            dir.path().display()
        );
        return;
    }
    let before = proxy.stats();
    for path in &paths {
        let (status, cache_status, body) = get(proxy.address, &origin.url(path)).expect("ok");
        assert_eq!(status, 200);
        assert!(cache_status.contains("hit"), "{path}: {cache_status}");
        assert!(
            body == object_bytes(path),
            "{path}: byte for byte from cold pages"
        );
    }
    let after = proxy.stats();
    let counter =
        |stats: &serde_json::Value, name: &str| stats["total"]["loop"][name].as_u64().unwrap_or(0);
    let offloaded =
        counter(&after, "file_reads_offloaded") - counter(&before, "file_reads_offloaded");
    let read_ahead_on = std::env::var("COLDWIRE_READ_AHEAD").map_or(true, |value| value != "off");
    if backend == "uring" {
        assert_eq!(offloaded, 0, "io_uring's file splices need no read-ahead");
    } else if read_ahead_on {
        assert!(
            offloaded >= 1,
            "{backend}: the cold disk hits were read ahead off the loop: {}",
            after["total"]["loop"]
        );
    }
}
