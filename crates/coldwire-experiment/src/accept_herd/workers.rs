//! One measured point of `accept-herd`: N worker threads accept connections in one of four
//! ways while client threads connect a fixed number of times, and every worker counts its
//! wake-ups.
//!
//! Two kinds of wake-up are counted, because they differ:
//! * *returns*: every return from `accept()` (blocking modes) or from `epoll_wait()` with the
//!   listener ready (epoll modes). A return whose non-blocking `accept()` then finds nothing
//!   (`EAGAIN`) is a *wasted* return. This is what a server sees.
//! * *sleeps*: the worker's voluntary context switches (`getrusage(RUSAGE_THREAD)`), i.e. how
//!   often it went to sleep, hence how often the kernel woke it. A worker that the kernel
//!   wakes, that re-checks readiness inside `epoll_wait()`, finds the connection gone and
//!   sleeps again costs a sleep without a return; only this count shows that herd.
//!
//! Each accepted connection is closed at once with `SO_LINGER` 0 (a reset, so no
//! `TIME_WAIT` piles up). A client waits for that close before its next connect, so each
//! client thread has one connection in flight. Workers stop when the main thread shuts the
//! listeners down (blocking modes: `accept()` fails) or signals an eventfd that every epoll
//! instance watches; a 2 s timeout on every wait is the backstop, counted apart.

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use socket2::{Domain, Protocol, SockRef, Socket, Type};

/// How long any wait may block before it re-checks the stop flag (a backstop: the normal
/// stop is a shutdown or an eventfd).
const WAIT_BACKSTOP: Duration = Duration::from_secs(2);
/// How long a client waits for its connection to be accepted and closed.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// Listen backlog (above any in-flight count a scenario allows).
const BACKLOG: i32 = 1024;

/// How the workers wait for connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// N threads blocking in `accept()` on one listener.
    BlockingAccept,
    /// N threads, each with its own epoll instance watching the one listener
    /// (level-triggered, no `EPOLLEXCLUSIVE`), then a non-blocking `accept()`.
    EpollShared,
    /// As [`Mode::EpollShared`], registered with `EPOLLEXCLUSIVE`.
    EpollExclusive,
    /// N `SO_REUSEPORT` listeners on one port, one per thread, blocking `accept()`.
    ReusePort,
}

impl Mode {
    /// The four modes, in the order they are plotted.
    pub const ALL: [Mode; 4] = [
        Mode::BlockingAccept,
        Mode::EpollShared,
        Mode::EpollExclusive,
        Mode::ReusePort,
    ];

    /// Legend entry.
    pub fn label(self) -> &'static str {
        match self {
            Mode::BlockingAccept => "blocking accept, one listener",
            Mode::EpollShared => "epoll per thread, shared listener",
            Mode::EpollExclusive => "epoll per thread, EPOLLEXCLUSIVE",
            Mode::ReusePort => "SO_REUSEPORT, listener per thread",
        }
    }

    fn uses_epoll(self) -> bool {
        matches!(self, Mode::EpollShared | Mode::EpollExclusive)
    }
}

/// What one worker counted.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct WorkerCounts {
    /// Connections it accepted.
    pub accepted: u64,
    /// Returns from `accept()` / `epoll_wait()` caused by a ready listener.
    pub returns: u64,
    /// Returns after which a non-blocking `accept()` found nothing.
    pub wasted_returns: u64,
    /// Voluntary context switches while it ran (each is one sleep, then one wake-up).
    pub sleeps: u64,
    /// Waits that ended by the backstop timeout (not counted as returns).
    pub timeouts: u64,
}

/// One point: a mode, a number of workers, what each worker counted and how long it took.
#[derive(Clone, Debug, Serialize)]
pub struct PointResult {
    /// The mode.
    pub mode: Mode,
    /// Worker threads.
    pub workers: usize,
    /// Which repetition of this mode and N (0 first; set by the caller).
    pub repetition: usize,
    /// Connections the clients made (all were accepted).
    pub connections: u64,
    /// Seconds from the first connect to the last connection's close.
    pub elapsed_seconds: f64,
    /// CPU seconds (user + system) the whole process used from the first connect until
    /// every worker had stopped: workers and clients together.
    pub cpu_seconds: f64,
    /// One entry per worker.
    pub per_worker: Vec<WorkerCounts>,
}

/// Runs one point: `workers` threads in `mode`, `client_threads` clients making
/// `connections` connections in total (each waits for its connection's close).
pub fn measure(
    mode: Mode,
    workers: usize,
    connections: u64,
    client_threads: usize,
) -> anyhow::Result<PointResult> {
    let listeners = open_listeners(mode, workers)?;
    let address = listeners[0]
        .local_addr()
        .context("cannot read the listener's address")?;
    let stop = AtomicBool::new(false);
    let stop_event = if mode.uses_epoll() {
        Some(new_eventfd()?)
    } else {
        None
    };
    let barrier = Barrier::new(workers + 1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|index| {
                let listener = &listeners[if mode == Mode::ReusePort { index } else { 0 }];
                let stop = &stop;
                let barrier = &barrier;
                let stop_fd = stop_event.as_ref().map(AsRawFd::as_raw_fd);
                scope.spawn(move || match stop_fd {
                    Some(stop_fd) => epoll_worker(
                        listener,
                        mode == Mode::EpollExclusive,
                        stop_fd,
                        stop,
                        barrier,
                    ),
                    None => blocking_worker(listener, stop, barrier),
                })
            })
            .collect();
        barrier.wait();
        let cpu_before = process_cpu_seconds()?;
        let started = Instant::now();
        let clients = run_clients(address, connections, client_threads);
        let elapsed_seconds = started.elapsed().as_secs_f64();
        stop.store(true, Ordering::SeqCst);
        match &stop_event {
            Some(event) => signal_eventfd(event.as_raw_fd())?,
            None => {
                for listener in &listeners {
                    // Wakes every thread blocked in accept() on it (accept fails with EINVAL);
                    // an error only means the backstop timeout will end the wait instead.
                    let _ = SockRef::from(listener).shutdown(std::net::Shutdown::Both);
                }
            }
        }
        let mut per_worker = Vec::with_capacity(workers);
        for handle in handles {
            let counts = handle
                .join()
                .map_err(|_| anyhow::anyhow!("an accept-herd worker thread panicked"))??;
            per_worker.push(counts);
        }
        let cpu_seconds = process_cpu_seconds()? - cpu_before;
        clients?;
        let accepted: u64 = per_worker.iter().map(|counts| counts.accepted).sum();
        if accepted != connections {
            bail!(
                "{mode:?} with {workers} workers accepted {accepted} of {connections} connections"
            );
        }
        Ok(PointResult {
            mode,
            workers,
            repetition: 0,
            connections,
            elapsed_seconds,
            cpu_seconds,
            per_worker,
        })
    })
}

fn open_listeners(mode: Mode, workers: usize) -> anyhow::Result<Vec<TcpListener>> {
    let count = if mode == Mode::ReusePort { workers } else { 1 };
    let mut address: SocketAddr = ([127, 0, 0, 1], 0).into();
    let mut listeners = Vec::with_capacity(count);
    for _ in 0..count {
        let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))
            .context("cannot create a listening socket")?;
        if mode == Mode::ReusePort {
            socket
                .set_reuse_port(true)
                .context("cannot set SO_REUSEPORT")?;
        }
        socket
            .bind(&address.into())
            .with_context(|| format!("cannot bind {address}"))?;
        socket
            .listen(BACKLOG)
            .with_context(|| format!("cannot listen on {address}"))?;
        socket
            .set_nonblocking(mode.uses_epoll())
            .context("cannot set the listener's blocking mode")?;
        // accept() honours SO_RCVTIMEO: the backstop for blocking workers.
        socket
            .set_read_timeout(Some(WAIT_BACKSTOP))
            .context("cannot set the listener's timeout")?;
        let listener: TcpListener = socket.into();
        address = listener
            .local_addr()
            .context("cannot read the bound address")?;
        listeners.push(listener);
    }
    Ok(listeners)
}

/// Closes an accepted connection with a reset, so no `TIME_WAIT` is left behind.
fn close_accepted(stream: TcpStream) {
    // Without the linger option the close is merely graceful; either way it is closed.
    let _ = SockRef::from(&stream).set_linger(Some(Duration::ZERO));
    drop(stream);
}

fn blocking_worker(
    listener: &TcpListener,
    stop: &AtomicBool,
    barrier: &Barrier,
) -> anyhow::Result<WorkerCounts> {
    barrier.wait();
    let sleeps_before = voluntary_switches()?;
    let mut counts = WorkerCounts::default();
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                counts.returns += 1;
                counts.accepted += 1;
                close_accepted(stream);
            }
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                counts.timeouts += 1;
            }
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(_) if stop.load(Ordering::SeqCst) => break,
            Err(error) => return Err(error).context("accept() failed in a blocking worker"),
        }
    }
    counts.sleeps = voluntary_switches()?.saturating_sub(sleeps_before);
    Ok(counts)
}

/// epoll `data` of the listener and of the stop eventfd.
const LISTENER_TOKEN: u64 = 0;
const STOP_TOKEN: u64 = 1;

fn epoll_worker(
    listener: &TcpListener,
    exclusive: bool,
    stop_fd: RawFd,
    stop: &AtomicBool,
    barrier: &Barrier,
) -> anyhow::Result<WorkerCounts> {
    // SAFETY: epoll_create1 takes no pointers; the result is checked before use.
    let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error()).context("epoll_create1 failed");
    }
    // SAFETY: `raw` is a descriptor epoll_create1 just returned, owned by nobody else.
    let epoll = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut listener_events = libc::EPOLLIN as u32;
    if exclusive {
        listener_events |= libc::EPOLLEXCLUSIVE as u32;
    }
    epoll_add(
        &epoll,
        listener.as_raw_fd(),
        listener_events,
        LISTENER_TOKEN,
    )?;
    epoll_add(&epoll, stop_fd, libc::EPOLLIN as u32, STOP_TOKEN)?;
    barrier.wait();
    let sleeps_before = voluntary_switches()?;
    let mut counts = WorkerCounts::default();
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 4];
    let timeout_ms = WAIT_BACKSTOP.as_millis() as i32;
    'wait: loop {
        // SAFETY: `events` is a live array of `events.len()` epoll_event structs that the
        // kernel may write; `epoll` is an open epoll descriptor.
        let ready = unsafe {
            libc::epoll_wait(
                epoll.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as i32,
                timeout_ms,
            )
        };
        if ready < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(error).context("epoll_wait failed in an epoll worker");
        }
        if ready == 0 {
            counts.timeouts += 1;
            if stop.load(Ordering::SeqCst) {
                break;
            }
            continue;
        }
        for event in &events[..ready as usize] {
            if event.u64 == STOP_TOKEN {
                break 'wait;
            }
        }
        counts.returns += 1;
        match listener.accept() {
            Ok((stream, _)) => {
                counts.accepted += 1;
                close_accepted(stream);
            }
            Err(error) if error.kind() == ErrorKind::WouldBlock => counts.wasted_returns += 1,
            Err(error) if error.kind() == ErrorKind::Interrupted => counts.wasted_returns += 1,
            Err(error) => return Err(error).context("accept() failed in an epoll worker"),
        }
    }
    counts.sleeps = voluntary_switches()?.saturating_sub(sleeps_before);
    Ok(counts)
}

fn epoll_add(epoll: &OwnedFd, fd: RawFd, events: u32, token: u64) -> anyhow::Result<()> {
    let mut event = libc::epoll_event { events, u64: token };
    // SAFETY: `event` is a live epoll_event the kernel only reads; both descriptors are open.
    let result = unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) };
    if result < 0 {
        return Err(std::io::Error::last_os_error())
            .context("epoll_ctl(EPOLL_CTL_ADD) failed (EPOLLEXCLUSIVE needs Linux 4.5 or later)");
    }
    Ok(())
}

fn new_eventfd() -> anyhow::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers; the result is checked before use.
    let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error()).context("eventfd failed");
    }
    // SAFETY: `raw` is a descriptor eventfd just returned, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

fn signal_eventfd(fd: RawFd) -> anyhow::Result<()> {
    let one: u64 = 1;
    // SAFETY: writes the 8 bytes of `one`, which lives across the call, to an open eventfd.
    let written = unsafe { libc::write(fd, (&one as *const u64).cast(), size_of::<u64>()) };
    if written != size_of::<u64>() as isize {
        return Err(std::io::Error::last_os_error()).context("cannot signal the stop eventfd");
    }
    Ok(())
}

fn rusage(who: libc::c_int) -> anyhow::Result<libc::rusage> {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a live rusage the kernel fills.
    let result = unsafe { libc::getrusage(who, &mut usage) };
    if result < 0 {
        return Err(std::io::Error::last_os_error()).context("getrusage failed");
    }
    Ok(usage)
}

/// User plus system CPU seconds of the whole process so far.
fn process_cpu_seconds() -> anyhow::Result<f64> {
    let usage = rusage(libc::RUSAGE_SELF)?;
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 * 1e-6;
    Ok(seconds(usage.ru_utime) + seconds(usage.ru_stime))
}

/// The calling thread's voluntary context switches so far.
fn voluntary_switches() -> anyhow::Result<u64> {
    let usage = rusage(libc::RUSAGE_THREAD)?;
    Ok(u64::try_from(usage.ru_nvcsw).unwrap_or(0))
}

/// Makes `connections` connections from `client_threads` threads, each waiting for the
/// server's close of its connection before the next connect.
fn run_clients(address: SocketAddr, connections: u64, client_threads: usize) -> anyhow::Result<()> {
    let threads = client_threads as u64;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|index| {
                let share = connections / threads + u64::from(index < connections % threads);
                scope.spawn(move || connect_serially(address, share))
            })
            .collect();
        for handle in handles {
            handle
                .join()
                .map_err(|_| anyhow::anyhow!("an accept-herd client thread panicked"))??;
        }
        Ok(())
    })
}

fn connect_serially(address: SocketAddr, count: u64) -> anyhow::Result<()> {
    let mut byte = [0u8; 1];
    for number in 0..count {
        let mut stream = match TcpStream::connect(address) {
            Ok(stream) => stream,
            // The server accepted and reset the connection before connect() returned (the
            // handshake completes in the kernel, a worker on the other core may be quicker
            // than this thread). Counted: the workers' accept total is checked afterwards.
            Err(error) if error.kind() == ErrorKind::ConnectionReset => continue,
            Err(error) => {
                return Err(error)
                    .with_context(|| format!("client connect {number} to {address} failed"));
            }
        };
        stream
            .set_read_timeout(Some(CLIENT_TIMEOUT))
            .context("cannot set the client's read timeout")?;
        match stream.read(&mut byte) {
            Ok(_) => {}
            Err(error)
                if matches!(
                    error.kind(),
                    ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
                ) => {}
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                bail!(
                    "connection {number} to {address} was not accepted within {} s",
                    CLIENT_TIMEOUT.as_secs()
                )
            }
            Err(error) => return Err(error).context("client read failed"),
        }
    }
    Ok(())
}
