//! `coldwire proxy --cache-dir`: the disk store end to end, on every backend — objects kept
//! across a restart (hits byte for byte, the origin not asked again), a `PURGE` that
//! outlives the restart, concurrent readers of an object being written, `SIGKILL` at random
//! moments while the proxy fills and evicts (every object served afterwards checked
//! against the origin's bytes), and a disk that fills up (a small tmpfs: ENOSPC), with the
//! segment writes on the store's thread or, on `--io uring`, on the workers' rings.

use std::collections::HashMap;
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use coldwire_testkit::{
    Proxy, connect, pseudo_random_bytes, read_request, read_until_closed, spawn_server,
    split_response,
};

/// Requests the origin saw, per path.
#[derive(Default)]
struct Seen {
    requests: Mutex<HashMap<String, usize>>,
}

/// `/o/SEED?n=LENGTH`: `LENGTH` pseudo-random bytes of `SEED`, fresh for an hour — each
/// object's bytes its own, so a wrong object can never pass for the right one.
fn serve(stream: TcpStream, seen: &Seen) {
    let mut reader = BufReader::new(stream.try_clone().expect("a clone"));
    let mut writer = stream;
    while let Some(request) = read_request(&mut reader) {
        *seen
            .requests
            .lock()
            .unwrap()
            .entry(request.path.clone())
            .or_default() += 1;
        let body = object_bytes(&request.path);
        let head = format!(
            "HTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        if writer.write_all(head.as_bytes()).is_err() || writer.write_all(&body).is_err() {
            return;
        }
    }
}

mod cold_pages;

/// The bytes the origin answers for `path`.
pub(crate) fn object_bytes(path: &str) -> Vec<u8> {
    let (seed, length) = path
        .strip_prefix("/o/")
        .and_then(|rest| rest.split_once("?n="))
        .expect("an object path");
    pseudo_random_bytes(
        length.parse().expect("a length"),
        seed.parse().expect("a seed"),
    )
}

coldwire_testkit::backend_tests! {
    disk_cache_keeps_objects_across_a_restart,
    concurrent_readers_of_an_object_being_written_get_its_bytes,
    sigkill_while_filling_never_serves_a_wrong_object,
    a_full_disk_turns_disk_copies_off_and_the_proxy_keeps_serving,
}

pub(crate) struct DiskOrigin {
    pub(crate) address: SocketAddr,
    seen: std::sync::Arc<Seen>,
}

impl DiskOrigin {
    pub(crate) fn start() -> DiskOrigin {
        let (address, seen) = spawn_server(serve);
        DiskOrigin { address, seen }
    }

    pub(crate) fn path(seed: u64, length: usize) -> String {
        format!("/o/{seed}?n={length}")
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    pub(crate) fn requests(&self, path: &str) -> usize {
        self.seen
            .requests
            .lock()
            .unwrap()
            .get(path)
            .copied()
            .unwrap_or(0)
    }
}

/// `GET url` through the proxy on a connection of its own: status, `Cache-Status`, body.
pub(crate) fn get(proxy: SocketAddr, url: &str) -> Option<(u16, String, Vec<u8>)> {
    let mut stream = TcpStream::connect_timeout(&proxy, Duration::from_secs(5)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let request = format!("GET {url} HTTP/1.1\r\nHost: origin\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let (raw, _) = read_until_closed(&mut stream).ok()?;
    if raw.is_empty() {
        return None;
    }
    let (response, body) = split_response(&raw);
    let status = response.header("cache-status").unwrap_or("").to_owned();
    Some((response.status, status, body))
}

/// Starts a proxy whose disk store is in `dir`, with stats.
pub(crate) fn disk_proxy(backend: &str, dir: &Path, extra: &[&str]) -> Proxy {
    let dir = dir.to_str().expect("a UTF-8 path");
    let mut args = vec![
        "--cache-dir",
        dir,
        "--admin",
        "127.0.0.1:0",
        "--cache-bytes",
        "1048576",
        "--max-object-bytes",
        "65536",
    ];
    args.extend_from_slice(extra);
    Proxy::start(backend, &args)
}

/// Waits until the proxy's disk store has written everything queued.
pub(crate) fn settle(proxy: &Proxy) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stats = proxy.stats();
        let disk = &stats["cache"]["disk"];
        if disk["queue_depth"] == 0 && disk["queue_bytes"] == 0 {
            return stats;
        }
        assert!(
            Instant::now() < deadline,
            "the disk store never caught up: {disk}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether the segment writes were ring operations (all completed once settled: on
/// `--io uring`) or the store's thread did them (elsewhere, or with `--disk-thread-writes`).
fn assert_ring_writes(on_ring: bool, disk: &serde_json::Value) {
    let submitted = disk["ring_writes_submitted"].as_u64().expect("a counter");
    let completed = disk["ring_writes_completed"].as_u64().expect("a counter");
    if on_ring {
        assert!(submitted > 0, "writes on the ring: {disk}");
    } else {
        assert_eq!(submitted, 0, "writes on the thread: {disk}");
    }
    assert_eq!(submitted, completed, "{disk}");
}

fn disk_cache_keeps_objects_across_a_restart(backend: &str) {
    let origin = DiskOrigin::start();
    let dir = tempfile::tempdir().expect("a directory");
    // 8 KiB bodies are kept in memory and on disk; 256 KiB ones (over --max-object-bytes)
    // on disk only.
    let paths: Vec<String> = (0..12)
        .map(|seed| DiskOrigin::path(seed, if seed % 2 == 0 { 8 << 10 } else { 256 << 10 }))
        .collect();
    {
        let proxy = disk_proxy(backend, dir.path(), &[]);
        for path in &paths {
            let (status, cache_status, body) = get(proxy.address, &origin.url(path)).expect("ok");
            assert_eq!(status, 200);
            assert!(cache_status.contains("fwd=uri-miss"), "{cache_status}");
            assert!(body == object_bytes(path), "{path}");
        }
        let stats = settle(&proxy);
        assert_eq!(stats["cache"]["disk"]["objects_written"], 12, "{stats}");
        assert_ring_writes(backend == "uring", &stats["cache"]["disk"]);
        // PURGE reaches the disk too.
        let purged = origin.url(&paths[0]);
        let mut stream = connect(proxy.address);
        let purge = format!("PURGE {purged} HTTP/1.1\r\nHost: o\r\nConnection: close\r\n\r\n");
        stream.write_all(purge.as_bytes()).expect("sent");
        let (raw, _) = read_until_closed(&mut stream).expect("answered");
        assert_eq!(split_response(&raw).0.status, 200);
        settle(&proxy);
    }
    let proxy = disk_proxy(backend, dir.path(), &[]);
    let stats = proxy.stats();
    assert_eq!(stats["cache"]["disk"]["recovered"], 11, "{stats}");
    for path in &paths[1..] {
        let (status, cache_status, body) = get(proxy.address, &origin.url(path)).expect("ok");
        assert_eq!(status, 200);
        assert!(cache_status.contains("hit"), "{path}: {cache_status}");
        assert!(body == object_bytes(path), "{path} byte for byte");
        assert_eq!(
            origin.requests(path),
            1,
            "{path}: the origin was not asked again"
        );
    }
    let (_, cache_status, body) = get(proxy.address, &origin.url(&paths[0])).expect("ok");
    assert!(
        cache_status.contains("miss"),
        "purged before the restart: {cache_status}"
    );
    assert!(body == object_bytes(&paths[0]));
    let stats = proxy.stats();
    assert!(
        stats["cache"]["hits_on_disk"].as_u64() >= Some(6),
        "{stats}"
    );
}

fn concurrent_readers_of_an_object_being_written_get_its_bytes(backend: &str) {
    let origin = DiskOrigin::start();
    let dir = tempfile::tempdir().expect("a directory");
    let proxy = disk_proxy(backend, dir.path(), &[]);
    // 2 MiB: over the memory tier's limit, so it is written to disk while readers come.
    let path = DiskOrigin::path(77, 2 << 20);
    let url = origin.url(&path);
    let expected = object_bytes(&path);
    for _round in 0..2 {
        std::thread::scope(|scope| {
            let readers: Vec<_> = (0..6)
                .map(|_| scope.spawn(|| get(proxy.address, &url)))
                .collect();
            for reader in readers {
                let (status, _, body) = reader.join().expect("a reader").expect("answered");
                assert_eq!(status, 200);
                assert!(body == expected, "byte for byte");
            }
        });
    }
    settle(&proxy);
    let (_, cache_status, body) = get(proxy.address, &url).expect("ok");
    assert!(cache_status.contains("hit"), "{cache_status}");
    assert!(body == expected);
}

/// One cycle of the fault-injection test: a proxy filling and evicting a small disk store
/// is killed with SIGKILL after `life`; then a fresh proxy on the same directory serves
/// every object, each checked against the origin's bytes. Returns (objects checked, hits,
/// mismatches).
fn kill_cycle(
    backend: &str,
    origin: &SocketAddr,
    dir: &Path,
    seeds: std::ops::Range<u64>,
    life: Duration,
) -> (usize, usize, usize) {
    let url = |seed: u64| {
        let length = 1000 + (seed as usize * 7919) % (200 << 10);
        format!("http://{origin}{}", DiskOrigin::path(seed, length))
    };
    let small = ["--cache-dir-size", "4MiB"];
    {
        let proxy = disk_proxy(backend, dir, &small);
        let address = proxy.address;
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for client in 0..3u64 {
                let (stop, seeds) = (&stop, seeds.clone());
                let url = &url;
                scope.spawn(move || {
                    let mut seed = seeds.start + client;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let _ = get(address, &url(seed));
                        seed = seeds.start + (seed + 3 - seeds.start) % (seeds.end - seeds.start);
                    }
                });
            }
            std::thread::sleep(life);
            // SAFETY: kill(2) on the proxy's own process id, a child of this test.
            unsafe { libc::kill(proxy.pid() as libc::pid_t, libc::SIGKILL) };
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
    }
    let proxy = disk_proxy(backend, dir, &small);
    let (mut hits, mut mismatches) = (0, 0);
    for seed in seeds.clone() {
        let url = url(seed);
        let (status, cache_status, body) = get(proxy.address, &url).expect("answered");
        let path = &url[url.find("/o/").expect("a path")..];
        if status != 200 || body != object_bytes(path) {
            mismatches += 1;
        }
        if cache_status.contains("hit") {
            hits += 1;
        }
    }
    (seeds.count(), hits, mismatches)
}

/// Three cycles in CI; `COLDWIRE_DISK_CRASH_CYCLES=N` runs N (bench/disk-crash.sh), each
/// killing the proxy after a pseudo-random 50-850 ms, and prints the totals.
fn sigkill_while_filling_never_serves_a_wrong_object(backend: &str) {
    let cycles: u64 = std::env::var("COLDWIRE_DISK_CRASH_CYCLES")
        .ok()
        .and_then(|cycles| cycles.parse().ok())
        .unwrap_or(3);
    let origin = DiskOrigin::start();
    let dir = tempfile::tempdir().expect("a directory");
    let (mut checked, mut hits, mut mismatches) = (0, 0, 0);
    for cycle in 0..cycles {
        let life = 50 + (cycle * 7_919 + 13) % 800;
        let seeds = (cycle * 20)..(cycle * 20 + 60);
        let (cycle_checked, cycle_hits, cycle_mismatches) = kill_cycle(
            backend,
            &origin.address,
            dir.path(),
            seeds,
            Duration::from_millis(life),
        );
        checked += cycle_checked;
        hits += cycle_hits;
        mismatches += cycle_mismatches;
    }
    println!(
        "disk-crash {backend}: cycles={cycles} objects_checked={checked} hits_after_restart={hits} \
         mismatches={mismatches}"
    );
    assert_eq!(mismatches, 0, "an object served wrong after SIGKILL");
    assert!(hits > 0, "some objects survived the kills");
}

/// Unmounts the test's tmpfs when dropped.
struct Mounted<'a>(&'a Path);

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.0)
            .status();
    }
}

#[test]
fn disk_thread_writes_keep_uring_writes_on_the_thread() {
    if !coldwire_io::backend::test_can_run(coldwire_io::Backend::Uring) {
        return;
    }
    let origin = DiskOrigin::start();
    let dir = tempfile::tempdir().expect("a directory");
    let proxy = disk_proxy("uring", dir.path(), &["--disk-thread-writes"]);
    for seed in 0..3 {
        let path = DiskOrigin::path(seed, 64 << 10);
        let (status, _, body) = get(proxy.address, &origin.url(&path)).expect("answered");
        assert_eq!(status, 200);
        assert!(body == object_bytes(&path));
    }
    let stats = settle(&proxy);
    let disk = &stats["cache"]["disk"];
    assert_eq!(disk["objects_written"], 3, "{disk}");
    assert_ring_writes(false, disk);
}

fn a_full_disk_turns_disk_copies_off_and_the_proxy_keeps_serving(backend: &str) {
    let dir = tempfile::tempdir().expect("a directory");
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
        .arg(dir.path())
        .status()
        .is_ok_and(|status| status.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here (not root?)");
        return;
    }
    let _unmount = Mounted(dir.path());
    let origin = DiskOrigin::start();
    // The store believes it has 64 MiB; the file system has 2 MiB.
    let proxy = disk_proxy(backend, dir.path(), &["--cache-dir-size", "64MiB"]);
    let paths: Vec<String> = (0..40)
        .map(|seed| DiskOrigin::path(seed, 200 << 10))
        .collect();
    for round in 0..2 {
        for path in &paths {
            let (status, _, body) = get(proxy.address, &origin.url(path)).expect("answered");
            assert_eq!(status, 200, "round {round}");
            assert!(body == object_bytes(path), "{path} byte for byte");
        }
        settle(&proxy);
    }
    let stats = proxy.stats();
    let disk = &stats["cache"]["disk"];
    assert!(disk["io_errors"].as_u64() > Some(0), "{disk}");
    assert!(
        disk["io_errors_by_kind"]["no_space"].as_u64() > Some(0),
        "counted as out of space: {disk}"
    );
    // Still alive and serving.
    let (status, _, body) = get(proxy.address, &origin.url(&paths[39])).expect("answered");
    assert_eq!(status, 200);
    assert!(body == object_bytes(&paths[39]));
}
