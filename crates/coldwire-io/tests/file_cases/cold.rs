//! Cold files: a file range whose pages were evicted from the page cache (written, synced,
//! then `posix_fadvise(DONTNEED)`) still arrives byte-exact on every driver; on the
//! readiness drivers its windows are probed and read ahead by the pool rather than read by
//! `sendfile` on the loop (`file_reads_offloaded`), and with read-ahead off nothing is
//! probed. Where the file system ignores `DONTNEED`, the tests print `skipped: <why>`.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use coldwire_io::{Chunk, Completion, Driver, DriverConfig, Flush, sys};

use crate::support::{accept_one, is_uring_driver, listener, run_until};

/// A file of `size` bytes (a pattern from `seed`) on a disk file system, none of whose
/// pages are in the page cache; `None` (with a `skipped:` line) where they cannot be
/// evicted.
pub fn cold_file(size: usize, seed: u32) -> Option<(File, Vec<u8>)> {
    let directory = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = directory.path().join("cold");
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let content: Vec<u8> = (0..size as u32)
        .map(|index| (index.wrapping_mul(seed) % 251) as u8)
        .collect();
    file.write_all(&content).unwrap();
    // Dirty pages cannot be dropped: write them back first.
    file.sync_all().unwrap();
    // SAFETY: plain advice on a descriptor we own; no memory arguments.
    let advised = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let cached = sys::cached_pages(file.as_raw_fd(), 0, size as u64)
        .or_else(|_| sys::cached_pages_by_mincore(file.as_raw_fd(), 0, size as u64))
        .unwrap_or(u64::MAX);
    if advised != 0 || cached > 0 {
        eprintln!(
            "skipped: the page cache kept {cached} pages of {} after POSIX_FADV_DONTNEED \
             (advice returned {advised}) — this file system does not evict on advice",
            directory.path().display()
        );
        return None;
    }
    Some((file, content))
}

/// Sends `[offset, offset + length)` of a cold file behind a head and checks every byte.
fn send_cold_range<D: Driver>(
    driver: &mut D,
    file: File,
    content: &[u8],
    offset: usize,
    length: usize,
) {
    let (listener, address) = listener();
    driver.listen(listener).unwrap();
    let mut client = TcpStream::connect(address).unwrap();
    let id = accept_one(driver);
    let mut head = driver.take_vec();
    head.extend_from_slice(b"HEAD");
    driver.send(id, Chunk::Owned(head));
    driver.send(
        id,
        Chunk::File {
            file: Arc::new(file),
            offset: offset as u64,
            length: length as u64,
        },
    );
    let reader = std::thread::spawn(move || {
        let mut received = vec![0u8; 4 + length];
        client.read_exact(&mut received).unwrap();
        received
    });
    if let Flush::Pending = driver.flush(id) {
        run_until(
            driver,
            |_, completion| matches!(completion, Completion::Sent { connection } if connection == id),
        );
    }
    let received = reader.join().unwrap();
    assert_eq!(&received[..4], b"HEAD");
    assert!(
        received[4..] == content[offset..offset + length],
        "the cold range arrived altered"
    );
    driver.close(id);
}

pub fn a_cold_file_range_is_read_ahead_and_arrives_exact<D: Driver>(mut driver: D) {
    let Some((file, content)) = cold_file(3 << 20, 17) else {
        return;
    };
    let length = content.len() - 5000 - 77;
    send_cold_range(&mut driver, file, &content, 5000, length);
    let counters = driver.counters();
    if is_uring_driver(&driver) {
        // The file's splices run in the kernel's io-wq workers: nothing to probe.
        assert_eq!(counters.file_probe_calls, 0);
    } else if DriverConfig::default().read_ahead {
        assert!(counters.file_probe_calls >= 1, "{counters:?}");
        assert!(
            counters.file_reads_offloaded >= 1,
            "the evicted range was read by the pool, not by sendfile on the loop: {counters:?}"
        );
    } else {
        eprintln!("COLDWIRE_READ_AHEAD=off in the environment: counters not checked");
    }
}

/// With read-ahead off (`COLDWIRE_READ_AHEAD=off`), a cold range is sent by `sendfile` on
/// the loop, unprobed, and still arrives exact.
pub fn with_read_ahead_off_a_cold_range_is_sent_unprobed<D: Driver>(mut driver: D) {
    let Some((file, content)) = cold_file(1 << 20, 29) else {
        return;
    };
    send_cold_range(&mut driver, file, &content, 0, content.len());
    let counters = driver.counters();
    assert_eq!(counters.file_probe_calls, 0, "{counters:?}");
    assert_eq!(counters.file_reads_offloaded, 0, "{counters:?}");
}
