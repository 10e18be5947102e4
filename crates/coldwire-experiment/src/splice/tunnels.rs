//! Part three of the `splice` experiment: CONNECT tunnels through `coldwire proxy` (a
//! forward proxy, one worker, `--io epoll`) with each data path — `copy`, `splice` and
//! `sockmap` (spliced in the kernel by a BPF sockmap) — for tunnel sizes from 16 KiB to
//! 16 MiB: seed 002 Fig. 7's axes (proxy CPU against size) per MiB carried.
//!
//! Each tunnel: the client connects to the proxy, sends `CONNECT`, reads the `200`, sends
//! the number of bytes it wants (8 bytes); the origin sends them and closes its side; the
//! client reads until the end of stream and closes. The origin and the clients are threads
//! of this process, pinned to the generator CPU; the proxy is pinned to the server CPU.
//!
//! Two measurements per size and path, the paths interleaved within each size (their
//! order rotated every round), a fresh proxy for each:
//! - at a fixed offered rate in MiB/s (tunnels per second = rate / size, open loop, up to a
//!   cap): the proxy's on-CPU time (all threads, `/proc/PID/task/*/schedstat`) per MiB
//!   received by the clients, and the machine's kernel helper threads' (kworker,
//!   ksoftirqd) — the sockmap's sends run in a kworker, outside the proxy, so "proxy +
//!   helpers" is the fair total (machine-wide, so other work on a shared machine adds
//!   noise to it);
//! - at saturation: a fixed number of clients running tunnels back to back, the MiB/s
//!   reached and the same CPU per MiB.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;
use coldwire_report::{ExperimentRecord, Scale, Table};
use serde::{Deserialize, Serialize};

use super::size_name;
use crate::RunContext;
use crate::figures::{axis, figure, median, series, short};
use crate::process::{server_error, start_server};
use crate::serve::Pinning;

const MIB: f64 = 1024.0 * 1024.0;

/// `[tunnels]` in `experiments/splice.toml`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TunnelParameters {
    /// Bytes each tunnel carries (origin → client).
    pub(super) object_bytes: Vec<u64>,
    /// Data paths: copy, splice, sockmap.
    pub(super) paths: Vec<String>,
    /// The fixed offered rate, MiB/s.
    pub(super) rate_mib: f64,
    /// Most tunnels per second offered at the fixed rate (small tunnels).
    pub(super) max_tunnels_per_second: f64,
    /// Clients of the saturation part (0 skips it).
    pub(super) saturation_clients: u64,
    pub(super) warmup: f64,
    pub(super) duration: f64,
    pub(super) rounds: u64,
}

/// One measured window.
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    proxy_ns: u64,
    helpers_ns: u64,
    bytes: u64,
    tunnels: u64,
    seconds: f64,
}

impl Window {
    fn mib(&self) -> f64 {
        self.bytes as f64 / MIB
    }

    /// Proxy µs per MiB.
    fn proxy_us_per_mib(&self) -> f64 {
        self.proxy_ns as f64 / 1000.0 / self.mib()
    }

    /// Proxy + kernel helper threads, µs per MiB.
    fn total_us_per_mib(&self) -> f64 {
        (self.proxy_ns + self.helpers_ns) as f64 / 1000.0 / self.mib()
    }
}

/// One point: a round, a size, a path, a load.
#[derive(Clone, Copy, Debug)]
struct Point {
    round: u64,
    size: u64,
    path: usize,
    saturated: bool,
    window: Window,
}

fn path_flags(path: &str) -> anyhow::Result<&'static [&'static str]> {
    Ok(match path {
        "copy" => &["--data-path", "copy"],
        "splice" => &["--data-path", "splice", "--splice-threshold", "1"],
        "sockmap" => &["--data-path", "sockmap"],
        other => anyhow::bail!(
            "unknown tunnel data path {other:?} in [tunnels]: use copy, splice or sockmap"
        ),
    })
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: Option<usize>) {
    let Some(cpu) = cpu else { return };
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it;
    // sched_setaffinity reads `size_of::<cpu_set_t>()` bytes of it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// On-CPU nanoseconds of every thread of `pid`.
fn process_cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|text| text.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// On-CPU nanoseconds of the machine's kernel helper threads (kworker, ksoftirqd).
fn helpers_cpu_ns() -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|entry| {
            std::fs::read_to_string(entry.path().join("comm"))
                .is_ok_and(|comm| comm.starts_with("kworker") || comm.starts_with("ksoftirqd"))
        })
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("schedstat")).ok())
        .filter_map(|text| text.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// The tunnels' far end: sends what each tunnel asks for, then closes its side.
struct TunnelOrigin {
    address: SocketAddr,
}

impl TunnelOrigin {
    fn start(threads: usize, cpu: Option<usize>) -> anyhow::Result<TunnelOrigin> {
        let listener = TcpListener::bind("127.0.0.1:0").context("binding the tunnel origin")?;
        let address = listener.local_addr()?;
        let listener = Arc::new(listener);
        for _ in 0..threads {
            let listener = listener.clone();
            thread::spawn(move || {
                pin(cpu);
                let payload = vec![0x5au8; 256 * 1024];
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    let _ = serve_tunnel(stream, &payload);
                }
            });
        }
        Ok(TunnelOrigin { address })
    }
}

fn serve_tunnel(mut stream: TcpStream, payload: &[u8]) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut wanted = [0u8; 8];
    stream.read_exact(&mut wanted)?;
    let mut left = u64::from_le_bytes(wanted);
    while left > 0 {
        let step = left.min(payload.len() as u64) as usize;
        stream.write_all(&payload[..step])?;
        left -= step as u64;
    }
    stream.shutdown(Shutdown::Write)?;
    let mut rest = [0u8; 64];
    while stream.read(&mut rest)? > 0 {}
    Ok(())
}

/// Counters the clients share with the measuring thread.
#[derive(Default)]
struct Progress {
    bytes: AtomicU64,
    tunnels: AtomicU64,
    errors: AtomicU64,
}

/// One tunnel through the proxy, carrying `size` bytes to the client.
fn run_tunnel(proxy: SocketAddr, origin: SocketAddr, size: u64, progress: &Progress) {
    let outcome = (|| -> std::io::Result<()> {
        let mut stream = TcpStream::connect(proxy)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        stream
            .write_all(format!("CONNECT {origin} HTTP/1.1\r\nHost: {origin}\r\n\r\n").as_bytes())?;
        let mut head = Vec::with_capacity(64);
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if stream.read(&mut byte)? == 0 || head.len() > 4096 {
                return Err(std::io::Error::other("no CONNECT answer"));
            }
            head.push(byte[0]);
        }
        if !head.starts_with(b"HTTP/1.1 200") {
            return Err(std::io::Error::other("CONNECT refused"));
        }
        stream.write_all(&size.to_le_bytes())?;
        let mut buffer = vec![0u8; 256 * 1024];
        loop {
            let read = stream.read(&mut buffer)?;
            if read == 0 {
                break;
            }
            progress.bytes.fetch_add(read as u64, Ordering::Relaxed);
        }
        Ok(())
    })();
    match outcome {
        Ok(()) => progress.tunnels.fetch_add(1, Ordering::Relaxed),
        Err(_) => progress.errors.fetch_add(1, Ordering::Relaxed),
    };
}

/// Runs the load (open loop at `per_second`, or `clients` back to back when
/// `saturate`), measures one window after the warm-up, stops and waits for the clients.
#[allow(clippy::too_many_arguments)]
fn measure(
    proxy_pid: u32,
    proxy: SocketAddr,
    origin: SocketAddr,
    size: u64,
    per_second: f64,
    clients: usize,
    saturate: bool,
    parameters: &TunnelParameters,
    cpu: Option<usize>,
) -> (Window, u64) {
    let progress = Arc::new(Progress::default());
    let stop = Arc::new(AtomicBool::new(false));
    let (sender, receiver) = mpsc::channel::<()>();
    let receiver = Arc::new(Mutex::new(receiver));
    let mut workers = Vec::new();
    for _ in 0..clients {
        let (progress, stop, receiver) = (progress.clone(), stop.clone(), receiver.clone());
        workers.push(thread::spawn(move || {
            pin(cpu);
            while !stop.load(Ordering::Relaxed) {
                if !saturate {
                    let job = receiver
                        .lock()
                        .map(|receiver| receiver.recv_timeout(Duration::from_millis(50)));
                    match job {
                        Ok(Ok(())) => {}
                        Ok(Err(mpsc::RecvTimeoutError::Timeout)) => continue,
                        _ => return,
                    }
                }
                run_tunnel(proxy, origin, size, &progress);
            }
        }));
    }
    let start = Instant::now();
    let warmup = Duration::from_secs_f64(parameters.warmup);
    let end = warmup + Duration::from_secs_f64(parameters.duration);
    let interval = Duration::from_secs_f64(1.0 / per_second.max(0.001));
    let mut sent = 0u64;
    let mut before = None;
    loop {
        let elapsed = start.elapsed();
        if before.is_none() && elapsed >= warmup {
            before = Some((
                Instant::now(),
                process_cpu_ns(proxy_pid),
                helpers_cpu_ns(),
                progress.bytes.load(Ordering::Relaxed),
                progress.tunnels.load(Ordering::Relaxed),
            ));
        }
        if elapsed >= end {
            break;
        }
        if !saturate {
            while interval * (sent as u32) <= elapsed {
                let _ = sender.send(());
                sent += 1;
            }
        }
        thread::sleep(Duration::from_millis(1));
    }
    let (at, proxy_ns, helpers_ns, bytes, tunnels) = before.unwrap_or((start, 0, 0, 0, 0));
    let window = Window {
        proxy_ns: process_cpu_ns(proxy_pid).saturating_sub(proxy_ns),
        helpers_ns: helpers_cpu_ns().saturating_sub(helpers_ns),
        bytes: progress.bytes.load(Ordering::Relaxed) - bytes,
        tunnels: progress.tunnels.load(Ordering::Relaxed) - tunnels,
        seconds: at.elapsed().as_secs_f64(),
    };
    stop.store(true, Ordering::Relaxed);
    drop(sender);
    for worker in workers {
        let _ = worker.join();
    }
    (window, progress.errors.load(Ordering::Relaxed))
}

/// Starts `coldwire proxy` for the tunnels with `path`.
fn start_proxy(
    context: &RunContext,
    path: &str,
    origin: SocketAddr,
    cpu: Option<usize>,
) -> anyhow::Result<(coldwire_process::Process, SocketAddr)> {
    let mut args: Vec<String> = [
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--io",
        "epoll",
        "--cache-bytes",
        "0",
        "--idle-timeout",
        "600",
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect();
    args.extend(["--connect-port".to_owned(), origin.port().to_string()]);
    args.extend(path_flags(path)?.iter().map(|flag| (*flag).to_owned()));
    let mut process = start_server(&context.coldwire, &args, cpu)?;
    let listen = process
        .wait_for_line("proxy listening on http://", Duration::from_secs(10))
        .map_err(server_error)?;
    Ok((process, listen.parse()?))
}

/// Runs the tunnel part and adds its figures, tables and findings to `record`.
pub(super) fn run_tunnels(
    context: &RunContext,
    parameters: &TunnelParameters,
    pinning: Pinning,
    record: &mut ExperimentRecord,
    warnings: &mut Vec<String>,
) -> anyhow::Result<()> {
    for path in &parameters.paths {
        path_flags(path)?;
    }
    let origin = TunnelOrigin::start(64, pinning.generator_cpu)?;
    let mut points = Vec::new();
    let rounds = parameters.rounds.max(1);
    let paths = &parameters.paths;
    for round in 1..=rounds {
        for &size in &parameters.object_bytes {
            for offset in 0..paths.len() {
                let path_index = (offset + round as usize) % paths.len();
                let path = &paths[path_index];
                for saturated in [false, true] {
                    if saturated && parameters.saturation_clients == 0 {
                        continue;
                    }
                    let load = if saturated {
                        "saturation"
                    } else {
                        "fixed rate"
                    };
                    context.progress(&format!(
                        "tunnels, round {round}/{rounds}: {} {path}, {load}",
                        size_name(size)
                    ));
                    let (mut process, proxy) =
                        start_proxy(context, path, origin.address, pinning.server_cpu)?;
                    let per_second = (parameters.rate_mib * MIB / size as f64)
                        .min(parameters.max_tunnels_per_second);
                    let clients = if saturated {
                        parameters.saturation_clients as usize
                    } else {
                        64
                    };
                    let (window, errors) = measure(
                        process.pid(),
                        proxy,
                        origin.address,
                        size,
                        per_second,
                        clients,
                        saturated,
                        parameters,
                        pinning.generator_cpu,
                    );
                    process.stop();
                    if errors > 0 {
                        warnings.push(format!(
                            "tunnels {} {path} {load}, round {round}: {errors} tunnels failed",
                            size_name(size)
                        ));
                    }
                    if window.bytes == 0 {
                        warnings.push(format!(
                            "tunnels {} {path} {load}, round {round}: no byte arrived in the window",
                            size_name(size)
                        ));
                        continue;
                    }
                    context.progress(&format!(
                        "  {} µs proxy CPU per MiB ({} with kernel helpers), {:.0} MiB/s, {} tunnels",
                        short(window.proxy_us_per_mib()),
                        short(window.total_us_per_mib()),
                        window.mib() / window.seconds,
                        window.tunnels
                    ));
                    points.push(Point {
                        round,
                        size,
                        path: path_index,
                        saturated,
                        window,
                    });
                }
            }
        }
    }
    summarise(record, parameters, &points);
    Ok(())
}

fn median_of(
    points: &[Point],
    size: u64,
    path: usize,
    saturated: bool,
    pick: fn(&Window) -> f64,
) -> f64 {
    median(
        &points
            .iter()
            .filter(|point| {
                point.size == size && point.path == path && point.saturated == saturated
            })
            .map(|point| pick(&point.window))
            .collect::<Vec<_>>(),
    )
}

/// Median over rounds of the per-round ratio of `pick` for `top` over `bottom`.
fn median_ratio(
    points: &[Point],
    size: u64,
    top: usize,
    bottom: usize,
    saturated: bool,
    pick: fn(&Window) -> f64,
) -> f64 {
    let find = |round: u64, path: usize| {
        points
            .iter()
            .find(|point| {
                point.round == round
                    && point.size == size
                    && point.path == path
                    && point.saturated == saturated
            })
            .map(|point| pick(&point.window))
    };
    let last = points.iter().map(|point| point.round).max().unwrap_or(0);
    let ratios: Vec<f64> = (1..=last)
        .filter_map(|round| match (find(round, top), find(round, bottom)) {
            (Some(top), Some(bottom)) if bottom > 0.0 => Some(top / bottom),
            _ => None,
        })
        .collect();
    median(&ratios)
}

fn summarise(record: &mut ExperimentRecord, parameters: &TunnelParameters, points: &[Point]) {
    let paths = &parameters.paths;
    let copy = paths.iter().position(|path| path == "copy");
    let kib = |size: u64| size as f64 / 1024.0;
    for saturated in [false, true] {
        let load = if saturated {
            format!("saturation ({} clients)", parameters.saturation_clients)
        } else {
            format!("{} MiB/s offered", parameters.rate_mib)
        };
        if !points.iter().any(|point| point.saturated == saturated) {
            continue;
        }
        let tag = if saturated { "saturation" } else { "fixed" };
        record.figures.push(figure(
            &format!("tunnel-cpu-per-mib-{tag}"),
            &format!("Proxy CPU per MiB carried by CONNECT tunnels vs tunnel size, {load}"),
            Some("seed 002, Fig. 7"),
            axis("tunnel size", "KiB", Scale::Log),
            axis("proxy CPU per MiB", "µs", Scale::Log),
            paths
                .iter()
                .enumerate()
                .map(|(index, path)| {
                    series(
                        path,
                        parameters.object_bytes.iter().map(|&size| {
                            (
                                kib(size),
                                median_of(points, size, index, saturated, Window::proxy_us_per_mib),
                            )
                        }),
                    )
                })
                .collect(),
            "Median over rounds; the proxy's threads only (schedstat).",
        ));
        if let Some(copy) = copy {
            record.figures.push(figure(
                &format!("tunnel-ratio-{tag}"),
                &format!("Proxy CPU per MiB relative to copy, CONNECT tunnels, {load}"),
                Some("seed 002, Fig. 7"),
                axis("tunnel size", "KiB", Scale::Log),
                axis("CPU per MiB relative to copy", "ratio", Scale::Linear),
                paths
                    .iter()
                    .enumerate()
                    .filter(|(index, _)| *index != copy)
                    .map(|(index, path)| {
                        series(
                            &format!("{path} / copy"),
                            parameters.object_bytes.iter().map(|&size| {
                                (
                                    kib(size),
                                    median_ratio(
                                        points,
                                        size,
                                        index,
                                        copy,
                                        saturated,
                                        Window::proxy_us_per_mib,
                                    ),
                                )
                            }),
                        )
                    })
                    .collect(),
                "Below 1: cheaper than copying. Median of per-round ratios (runs side by side).",
            ));
        }
        let mut columns = vec!["tunnel".to_owned()];
        columns.extend(paths.iter().map(|path| format!("{path} (µs/MiB)")));
        columns.extend(paths.iter().map(|path| format!("{path} +helpers (µs/MiB)")));
        columns.extend(paths.iter().map(|path| format!("{path} (MiB/s)")));
        if let Some(copy) = copy {
            for (index, path) in paths.iter().enumerate() {
                if index != copy {
                    columns.push(format!("{path}/copy"));
                    columns.push(format!("{path}/copy +helpers"));
                }
            }
        }
        let mut rows = Vec::new();
        for &size in &parameters.object_bytes {
            let mut row = vec![size_name(size)];
            for pick in [
                Window::proxy_us_per_mib,
                Window::total_us_per_mib,
                |window: &Window| window.mib() / window.seconds,
            ] {
                row.extend(
                    (0..paths.len())
                        .map(|index| short(median_of(points, size, index, saturated, pick))),
                );
            }
            if let Some(copy) = copy {
                let mut sentence = Vec::new();
                for (index, path) in paths.iter().enumerate() {
                    if index == copy {
                        continue;
                    }
                    let ratio = median_ratio(
                        points,
                        size,
                        index,
                        copy,
                        saturated,
                        Window::proxy_us_per_mib,
                    );
                    let total = median_ratio(
                        points,
                        size,
                        index,
                        copy,
                        saturated,
                        Window::total_us_per_mib,
                    );
                    row.push(format!("{ratio:.2}"));
                    row.push(format!("{total:.2}"));
                    sentence.push(format!(
                        "{path}/copy = {ratio:.2} (with kernel helper threads {total:.2})"
                    ));
                }
                record.findings.push(format!(
                    "tunnels of {}, {load}: proxy CPU per MiB {}.",
                    size_name(size),
                    sentence.join(", ")
                ));
            }
            rows.push(row);
        }
        record.tables.push(Table {
            title: format!(
                "CONNECT tunnels, {load}: proxy CPU per MiB (median over rounds; +helpers adds the machine's kworker/ksoftirqd time), MiB/s reached, and ratios to copy (median of per-round ratios)"
            ),
            columns,
            rows,
        });
    }
}
