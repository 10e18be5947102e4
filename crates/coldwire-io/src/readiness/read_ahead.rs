//! Read-ahead for file output on the readiness driver, so the loop never waits for the disk.
//!
//! `sendfile(2)` from pages that are not in the page cache reads them from the disk first,
//! on the calling thread: a disk hit of `coldwire proxy --cache-dir` (or a file of
//! `coldwire serve`) whose bytes were evicted would stop the whole loop — every other
//! connection of the worker — for the read. So before sending a *window* (up to
//! [`WINDOW`] bytes) of a [`Chunk::File`], the driver asks the kernel whether the window is
//! resident: `cachestat(2)` (Linux 6.5+, one system call), else `mincore(2)` on a
//! temporary mapping (three), else — neither available — it counts the window as cold.
//!
//! - Resident: `sendfile` at once, bounded to the window (the next window is probed when
//!   this one is sent).
//! - Cold: the window is handed to a pool of [`THREADS`] read-ahead threads (one pool for
//!   the process, started at the first cold window), which `pread` it into a scratch
//!   buffer — that brings the pages in — and report back through an eventfd registered
//!   with the loop's poller. The connection's output waits (flag `FILE_READING`; no
//!   writable interest meanwhile) while the loop serves everyone else, then `sendfile`
//!   continues from memory. This is nginx's `aio threads` (a thread pool reads, the event
//!   loop sends), and Squid's aufs.
//!
//! Invariants: a connection has at most one window in flight (`FILE_READING` is set while
//! it is); a report names the connection by id and generation, so a report for a connection
//! closed meanwhile is dropped; the window is remembered as *progress* within the front
//! chunk (`Connection::file_ready`), reset whenever the front chunk changes, so a report
//! never marks the wrong file ready. If the pages are evicted again between the read and
//! the `sendfile`, that `sendfile` blocks as before — correct, only slower, and rare.
//! `COLDWIRE_READ_AHEAD=off` ([`DriverConfig::read_ahead`]) switches all of it off.
//!
//! On `--io uring` none of this is needed: a file's `IORING_OP_SPLICE` is always executed
//! by the kernel's io-wq workers (the ring never runs it inline), so a cold read blocks a
//! kernel worker, not the loop.
//!
//! [`Chunk::File`]: crate::Chunk::File
//! [`DriverConfig::read_ahead`]: crate::DriverConfig::read_ahead

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};

use super::{FILE_READING, READ_AHEAD_TOKEN, ReadinessDriver, WRITE_WAITING};
use crate::core::waker::Waker;
use crate::driver::{Chunk, ConnectionId};
use crate::poller::{Interest, Poller};
use crate::sys;

/// Most bytes probed, read ahead and then sent per window: large enough that a big file
/// costs one probe per half megabyte, small enough that the read of one window holds a
/// connection back only briefly.
pub(super) const WINDOW: u64 = 512 * 1024;

/// Read-ahead threads in the process (shared by every loop): two, like a small nginx
/// `thread_pool`; more would mostly queue on the same disk.
pub(super) const THREADS: usize = 2;

/// Size of each thread's scratch buffer (the bytes read are thrown away): a whole window,
/// so a cold window is one `pread` — one request to the disk, as the kernel's readahead
/// (switched off for the file, see `read_window`) would have made it.
const SCRATCH: usize = WINDOW as usize;

/// What the driver may do with the front file chunk now.
pub(super) enum FileWindow {
    /// Send at most this many bytes (from the chunk's current progress): they are resident.
    Send(u64),
    /// The window is being read ahead; the connection waits for the report.
    Reading,
}

/// A loop's side of read-ahead: whether it is on, where its reports arrive, and which
/// windows its jobs are reading.
pub(super) struct ReadAhead {
    enabled: bool,
    /// Created, and its eventfd registered, at the loop's first cold window.
    reports: Option<Arc<Reports>>,
    /// Windows being read for this loop: (file, start, end). Their pages enter the page
    /// cache *before* the disk has filled them, and a probe counts them resident, so a
    /// window overlapping one of these is read ahead too (its job waits for the pages in
    /// the pool, not on the loop).
    in_flight: Vec<(usize, u64, u64)>,
}

impl ReadAhead {
    pub(super) fn new(enabled: bool) -> ReadAhead {
        ReadAhead {
            enabled,
            reports: None,
            in_flight: Vec::new(),
        }
    }

    fn is_being_read(&self, file: usize, start: u64, end: u64) -> bool {
        self.in_flight
            .iter()
            .any(|&(other, from, to)| other == file && start < to && from < end)
    }
}

/// Finished windows of one loop, and the eventfd that wakes it.
struct Reports {
    done: Mutex<Vec<Done>>,
    waker: Waker,
}

/// One window read ahead.
struct Done {
    connection: ConnectionId,
    /// The chunk's file (`Arc::as_ptr`), to recognise the chunk the window belongs to.
    file: usize,
    /// File offsets of the window.
    start: u64,
    end: u64,
}

struct Job {
    file: Arc<File>,
    connection: ConnectionId,
    start: u64,
    end: u64,
    reports: Arc<Reports>,
}

impl<P: Poller> ReadinessDriver<P> {
    /// Decides about the front chunk of connection `slot`, a file chunk (descriptor
    /// `file`) at `progress` (bytes of it already sent): how much may be sent now, or that
    /// it waits for the disk.
    pub(super) fn file_window(
        &mut self,
        slot: usize,
        file: RawFd,
        offset: u64,
        length: u64,
        progress: u64,
    ) -> FileWindow {
        let remaining = length - progress;
        if !self.read_ahead.enabled {
            return FileWindow::Send(remaining);
        }
        let Some(connection) = self.connections.get_mut(slot) else {
            return FileWindow::Send(remaining);
        };
        if connection.flags & FILE_READING != 0 {
            return FileWindow::Reading;
        }
        if connection.file_ready > progress {
            return FileWindow::Send(connection.file_ready - progress);
        }
        let window = remaining.min(WINDOW);
        let start = offset + progress;
        let Some(Chunk::File { file: shared, .. }) = connection.output.front() else {
            return FileWindow::Send(remaining);
        };
        let key = Arc::as_ptr(shared) as usize;
        self.counters.file_probe_calls += 1;
        if is_resident(file, start, window)
            && (self.read_ahead.in_flight.is_empty()
                || !self.read_ahead.is_being_read(key, start, start + window))
        {
            connection.file_ready = progress + window;
            return FileWindow::Send(window);
        }
        let file = shared.clone();
        let connection_id = ConnectionId {
            slot: slot as u32,
            generation: connection.generation,
        };
        let Some(reports) = self.reports() else {
            return FileWindow::Send(remaining);
        };
        let job = Job {
            file,
            connection: connection_id,
            start,
            end: start + window,
            reports,
        };
        if !submit(job) {
            // No thread could be started: send from the loop, as without read-ahead.
            return FileWindow::Send(remaining);
        }
        self.counters.file_reads_offloaded += 1;
        self.read_ahead.in_flight.push((key, start, start + window));
        if let Some(connection) = self.connections.get_mut(slot) {
            connection.flags |= FILE_READING;
        }
        self.update_interest(connection_id);
        FileWindow::Reading
    }

    /// This loop's report queue, created (and its eventfd registered) on first use; `None`
    /// if that fails (out of descriptors): the caller sends from the loop instead.
    fn reports(&mut self) -> Option<Arc<Reports>> {
        if let Some(reports) = &self.read_ahead.reports {
            return Some(reports.clone());
        }
        let waker = Waker::new().ok()?;
        self.poller
            .register(waker.raw_fd(), READ_AHEAD_TOKEN, Interest::READABLE)
            .ok()?;
        let reports = Arc::new(Reports {
            done: Mutex::new(Vec::new()),
            waker,
        });
        self.read_ahead.reports = Some(reports.clone());
        Some(reports)
    }

    /// The read-ahead eventfd fired: every finished window lets its connection send again.
    pub(super) fn read_ahead_reported(&mut self) {
        let Some(reports) = self.read_ahead.reports.clone() else {
            return;
        };
        // Drain before taking the list: a report pushed after the take wakes us again.
        reports.waker.drain();
        let done =
            std::mem::take(&mut *reports.done.lock().unwrap_or_else(PoisonError::into_inner));
        for report in done {
            let finished = (report.file, report.start, report.end);
            if let Some(index) = self
                .read_ahead
                .in_flight
                .iter()
                .position(|&window| window == finished)
            {
                self.read_ahead.in_flight.swap_remove(index);
            }
            let id = report.connection;
            let Some(connection) = self.connections.get_mut(id.index()) else {
                continue;
            };
            if connection.generation != id.generation || connection.flags & FILE_READING == 0 {
                continue;
            }
            connection.flags &= !FILE_READING;
            if let Some(Chunk::File { file, offset, .. }) = connection.output.front()
                && Arc::as_ptr(file) as usize == report.file
                && offset + connection.front_progress == report.start
            {
                connection.file_ready = connection.front_progress + (report.end - report.start);
            }
            if connection.flags & WRITE_WAITING != 0 {
                self.continue_write(id);
            } else {
                self.update_interest(id);
            }
        }
    }
}

/// How residency is asked: learnt at the first probe, process-wide.
static PROBE: AtomicU8 = AtomicU8::new(PROBE_CACHESTAT);
const PROBE_CACHESTAT: u8 = 0;
const PROBE_MINCORE: u8 = 1;
const PROBE_NONE: u8 = 2;

/// Whether every page of `[start, start + length)` of `file` is in the page cache. A
/// probe that fails says "no" (the window is then read ahead: slower, never blocking).
fn is_resident(fd: RawFd, start: u64, length: u64) -> bool {
    let wanted = sys::pages_spanned(start, length);
    loop {
        let method = PROBE.load(Ordering::Relaxed);
        let answer = match method {
            PROBE_CACHESTAT => sys::cached_pages(fd, start, length),
            PROBE_MINCORE => sys::cached_pages_by_mincore(fd, start, length),
            _ => return false,
        };
        match answer {
            Ok(cached) => return cached >= wanted,
            // The kernel (or a seccomp filter) lacks this call: use the next way for good.
            Err(error) if matches!(error.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                let next = if method == PROBE_CACHESTAT {
                    PROBE_MINCORE
                } else {
                    PROBE_NONE
                };
                PROBE.store(next, Ordering::Relaxed);
            }
            Err(_) => return false,
        }
    }
}

/// The process's read-ahead threads and their queue of jobs.
struct Pool {
    jobs: Mutex<VecDeque<Job>>,
    available: Condvar,
}

/// `None` inside: the threads could not be started (then nothing is offloaded).
static POOL: OnceLock<Option<&'static Pool>> = OnceLock::new();

/// Queues a job for the pool, starting the pool on first use; false if it cannot run.
fn submit(job: Job) -> bool {
    let Some(pool) = *POOL.get_or_init(start_pool) else {
        return false;
    };
    pool.jobs
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push_back(job);
    pool.available.notify_one();
    true
}

fn start_pool() -> Option<&'static Pool> {
    // The pool lives as long as the process (its threads never end), like the loops it
    // serves.
    let pool: &'static Pool = Box::leak(Box::new(Pool {
        jobs: Mutex::new(VecDeque::new()),
        available: Condvar::new(),
    }));
    let mut started = 0;
    for index in 0..THREADS {
        let spawned = std::thread::Builder::new()
            .name(format!("coldwire-readahead-{index}"))
            .stack_size(256 * 1024)
            .spawn(move || read_ahead_thread(pool));
        if spawned.is_ok() {
            started += 1;
        }
    }
    (started > 0).then_some(pool)
}

fn read_ahead_thread(pool: &'static Pool) {
    let mut scratch = vec![0u8; SCRATCH];
    loop {
        let job = {
            let mut jobs = pool.jobs.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if let Some(job) = jobs.pop_front() {
                    break job;
                }
                jobs = pool
                    .available
                    .wait(jobs)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        read_window(&job.file, job.start, job.end, &mut scratch);
        let report = Done {
            connection: job.connection,
            file: Arc::as_ptr(&job.file) as usize,
            start: job.start,
            end: job.end,
        };
        let first = {
            let mut done = job
                .reports
                .done
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            done.push(report);
            done.len() == 1
        };
        if first {
            // Only the first report of a batch writes the eventfd: the loop drains it before
            // taking the list, so later ones ride along. A failed write would leave the
            // connection waiting, but an eventfd write fails only on counter overflow.
            let _ = job.reports.waker.wake();
        }
    }
}

/// Reads `[start, end)` of `file` and throws the bytes away: the point is the page cache.
/// An error or an early end stops it; the `sendfile` that follows reports the problem.
///
/// First it switches the file's kernel readahead off (`POSIX_FADV_RANDOM`, on the open file
/// description the loop's `sendfile` shares): a file found cold is read by the pool, window
/// by window, and the kernel must not start reads of its own — from a `sendfile` on the
/// loop that meets a readahead mark (submitting I/O can block), or beyond this window
/// (pages in flight look resident to the next probe).
fn read_window(file: &File, start: u64, end: u64, scratch: &mut [u8]) {
    // Advice is only an optimisation: a failure changes nothing else.
    let _ = sys::advise_random_access(file.as_raw_fd());
    let mut position = start;
    while position < end {
        let want = ((end - position) as usize).min(scratch.len());
        match file.read_at(&mut scratch[..want], position) {
            Ok(0) => return,
            Ok(read) => position += read as u64,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn a_written_file_is_resident_and_a_range_past_its_end_is_not() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&vec![1u8; 64 * 1024]).unwrap();
        let fd = file.as_raw_fd();
        assert!(is_resident(fd, 0, 64 * 1024));
        assert!(is_resident(fd, 100, 5000));
        assert!(
            !is_resident(fd, 0, 1 << 20),
            "pages past the end are absent"
        );
    }

    #[test]
    fn mincore_agrees_with_cachestat_on_a_written_file() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&vec![2u8; 40_000]).unwrap();
        let fd = file.as_raw_fd();
        assert_eq!(sys::cached_pages_by_mincore(fd, 10, 30_000).unwrap(), 8);
        if let Ok(cached) = sys::cached_pages(fd, 10, 30_000) {
            assert_eq!(cached, 8);
        } else {
            eprintln!("skipped: cachestat(2) unavailable on this kernel");
        }
    }

    #[test]
    fn a_window_overlapping_one_being_read_is_recognised() {
        let mut read_ahead = ReadAhead::new(true);
        read_ahead.in_flight.push((7, 1000, 2000));
        assert!(read_ahead.is_being_read(7, 1999, 3000));
        assert!(read_ahead.is_being_read(7, 0, 1001));
        assert!(
            !read_ahead.is_being_read(7, 2000, 3000),
            "adjacent, not overlapping"
        );
        assert!(!read_ahead.is_being_read(8, 1000, 2000), "another file");
    }

    #[test]
    fn read_window_stops_at_the_end_of_the_file() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"short").unwrap();
        let mut scratch = vec![0u8; 4];
        read_window(&file, 0, 1 << 20, &mut scratch);
    }
}
