//! `coldwire proxy --cache-dir` on a disk that fails for real: an ext4 file system on a
//! loop device, shut down with ext4's `EXT4_IOC_SHUTDOWN` ioctl while the proxy serves,
//! after which the kernel answers every write, sync, create and read of it with `EIO`. The
//! proxy must keep serving — misses stream from the origin, memory hits go on — count the
//! errors by kind, log a warning, stop using the disk for the objects concerned, never
//! crash and never serve a wrong byte. Needs root and loop devices (`losetup`,
//! `mkfs.ext4`); skipped with a line saying so otherwise. (ENOSPC on a small tmpfs is in
//! `proxy_disk.rs`.)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use coldwire_testkit::Proxy;

use crate::proxy_disk::{DiskOrigin, get, object_bytes, settle};

coldwire_testkit::backend_tests! {
    eio_from_a_shut_down_ext4_turns_the_disk_tier_off_and_the_proxy_keeps_serving,
}

/// `EXT4_IOC_SHUTDOWN`: `_IOR('X', 125, __u32)`.
const EXT4_IOC_SHUTDOWN: libc::c_ulong = 0x8004_587d;
/// Shut down at once, without flushing the journal: every later I/O fails with `EIO`.
const EXT4_GOING_FLAGS_NOLOGFLUSH: u32 = 2;

fn run(program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program).args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// A 64 MiB ext4 file system on a loop device, mounted; unmounted, detached and deleted
/// when dropped.
struct LoopExt4 {
    image: PathBuf,
    device: Option<String>,
    mount: PathBuf,
    mounted: bool,
}

impl LoopExt4 {
    /// `None` (with why) when this machine cannot make one: not root, no loop devices, no
    /// `mkfs.ext4`.
    fn make(dir: &Path) -> Result<LoopExt4, String> {
        // SAFETY: geteuid(2) has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root (mounting a loop device needs it)".into());
        }
        if !Path::new("/dev/loop-control").exists() {
            return Err("no /dev/loop-control (no loop devices)".into());
        }
        let mut made = LoopExt4 {
            image: dir.join("ext4.img"),
            device: None,
            mount: dir.join("mnt"),
            mounted: false,
        };
        let image = made.image.to_str().ok_or("a non-UTF-8 path")?.to_owned();
        let mount = made.mount.to_str().ok_or("a non-UTF-8 path")?.to_owned();
        std::fs::create_dir_all(&made.mount).map_err(|error| error.to_string())?;
        run("truncate", &["-s", "64M", &image]).ok_or("truncate failed")?;
        let device = run("losetup", &["--find", "--show", &image])
            .ok_or("losetup --find failed (no free loop device?)")?;
        made.device = Some(device.clone());
        run("mkfs.ext4", &["-q", "-F", &device]).ok_or("mkfs.ext4 failed (install e2fsprogs)")?;
        run("mount", &["-t", "ext4", &device, &mount]).ok_or("mount failed")?;
        made.mounted = true;
        Ok(made)
    }

    /// Shuts the file system down (`EXT4_IOC_SHUTDOWN`): from now on the kernel answers
    /// its I/O with `EIO`.
    fn shut_down(&self) {
        let dir = std::fs::File::open(&self.mount).expect("the mount point opens");
        let flags = EXT4_GOING_FLAGS_NOLOGFLUSH;
        // SAFETY: the descriptor is open for the call; the ioctl reads one u32 from a
        // pointer to a live local.
        let result = unsafe {
            libc::ioctl(
                std::os::fd::AsRawFd::as_raw_fd(&dir),
                EXT4_IOC_SHUTDOWN as _,
                &flags as *const u32,
            )
        };
        assert_eq!(
            result,
            0,
            "EXT4_IOC_SHUTDOWN: {}",
            std::io::Error::last_os_error()
        );
    }
}

impl Drop for LoopExt4 {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        }
        if let Some(device) = &self.device {
            let _ = Command::new("losetup").args(["-d", device]).status();
        }
        let _ = std::fs::remove_file(&self.image);
    }
}

/// Whether a `GET` of `path` through the proxy answered the origin's exact bytes; a
/// response cut short (the connection closed) is `false`, a wrong body panics.
fn fetch(proxy: &Proxy, origin: &DiskOrigin, path: &str) -> (bool, String) {
    let Some((status, cache_status, body)) = get(proxy.address, &origin.url(path)) else {
        return (false, String::new());
    };
    let expected = object_bytes(path);
    if status != 200 || body.len() != expected.len() {
        return (false, cache_status);
    }
    assert!(body == expected, "{path}: a wrong body was served");
    (true, cache_status)
}

fn eio_from_a_shut_down_ext4_turns_the_disk_tier_off_and_the_proxy_keeps_serving(backend: &str) {
    let scratch = tempfile::tempdir().expect("a directory");
    let disk = match LoopExt4::make(scratch.path()) {
        Ok(disk) => disk,
        Err(why) => {
            eprintln!("skipped: cannot make an ext4 file system on a loop device: {why}");
            return;
        }
    };
    let cache = disk.mount.join("cache");
    let origin = DiskOrigin::start();
    let proxy = Proxy::start_keeping_stderr(
        backend,
        &[
            "--cache-dir",
            cache.to_str().expect("a UTF-8 path"),
            "--cache-dir-size",
            "32MiB",
            "--admin",
            "127.0.0.1:0",
            "--cache-bytes",
            "4194304",
            "--max-object-bytes",
            "65536",
        ],
    );
    // 8 KiB objects live in memory (and on disk); 256 KiB ones on disk only.
    let in_memory: Vec<String> = (0..8).map(|seed| DiskOrigin::path(seed, 8 << 10)).collect();
    let on_disk: Vec<String> = (100..108)
        .map(|seed| DiskOrigin::path(seed, 256 << 10))
        .collect();
    for path in in_memory.iter().chain(&on_disk) {
        assert!(fetch(&proxy, &origin, path).0, "{path} before the fault");
    }
    settle(&proxy);
    for path in in_memory.iter().chain(&on_disk) {
        let (ok, cache_status) = fetch(&proxy, &origin, path);
        assert!(ok && cache_status.contains("hit"), "{path}: {cache_status}");
    }

    disk.shut_down();

    // Memory hits go on.
    for path in &in_memory {
        let (ok, cache_status) = fetch(&proxy, &origin, path);
        assert!(ok, "{path}: a memory hit after the fault");
        assert!(cache_status.contains("hit"), "{path}: {cache_status}");
    }
    // Objects only on the failed disk, before anything is written: the first hit cannot
    // read its body (the response is cut short, never wrong); the proxy reports it, the
    // store finds its segments unreadable and forgets them; from then on they are misses
    // fetched from the origin, whole.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut cut_short = 0;
    for path in &on_disk {
        loop {
            let (ok, cache_status) = fetch(&proxy, &origin, path);
            if ok {
                assert!(
                    cut_short > 0 || cache_status.contains("miss"),
                    "{path}: {cache_status}"
                );
                break;
            }
            cut_short += 1;
            assert!(Instant::now() < deadline, "{path} never served whole again");
        }
    }
    for path in &on_disk {
        let (ok, cache_status) = fetch(&proxy, &origin, path);
        assert!(
            ok && cache_status.contains("miss"),
            "{path}: {cache_status}"
        );
    }
    assert!(
        proxy.wait_for_stderr("cannot read", Duration::from_secs(10)),
        "the unreadable segments were logged: {}",
        proxy.stderr_tail()
    );
    // Misses stream from the origin, whole, while their disk copies fail.
    let io_errors =
        |proxy: &Proxy| proxy.stats()["cache"]["disk"]["io_errors_by_kind"]["io"].clone();
    let unreadable = io_errors(&proxy).as_u64().expect("a count");
    assert!(
        unreadable > 0,
        "the unreadable segments were counted as EIO"
    );
    let mut seed = 1000;
    loop {
        for length in [8 << 10, 256 << 10] {
            let path = DiskOrigin::path(seed, length);
            assert!(
                fetch(&proxy, &origin, &path).0,
                "{path}: a miss after the fault"
            );
            seed += 1;
        }
        let stats = proxy.stats();
        if stats["cache"]["disk"]["io_errors_by_kind"]["io"].as_u64() > Some(unreadable) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no EIO counted for the writes: {}",
            stats["cache"]["disk"]
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats = proxy.stats();
    let counters = &stats["cache"]["disk"];
    assert!(counters["io_errors"].as_u64() > Some(0), "{counters}");
    // Still alive: a new miss and a memory hit.
    let path = DiskOrigin::path(9999, 4096);
    assert!(fetch(&proxy, &origin, &path).0);
    assert!(fetch(&proxy, &origin, &in_memory[0]).0);
    println!(
        "eio {backend}: responses cut short={cut_short} stderr={} counters={counters}",
        proxy.stderr_tail()
    );
}
