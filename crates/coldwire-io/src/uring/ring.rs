//! `Ring`: one io_uring instance as both io_uring backends use it — set up for a single
//! issuer thread, entered once per loop turn (submit everything queued and wait for
//! completions in the same `io_uring_enter`), with the counters the experiments read:
//! submissions, completions, `io_uring_enter` calls.
//!
//! Set-up: `SINGLE_ISSUER | DEFER_TASKRUN | SUBMIT_ALL` (completion work runs only when this thread
//! enters the kernel to wait: no inter-processor interrupts, no task-work storms), created
//! `R_DISABLED` because the server builds its drivers on the main thread and runs each on its
//! worker thread: the ring is enabled — and its descriptor registered, which is per thread —
//! by the first enter, on the thread that will keep using it. With `--sqpoll` a kernel thread
//! polls the submission queue instead (`DEFER_TASKRUN` is not allowed with it), so submitting
//! costs no system call; waiting still does.
//!
//! Invariant: only the thread that first entered the ring submits to it (`SINGLE_ISSUER`).

use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

use io_uring::{EnterFlags, IoUring, cqueue, squeue};

/// `IORING_REGISTER_RING_FDS`.
const REGISTER_RING_FDS: libc::c_uint = 20;

/// `struct io_uring_rsrc_update`, to register the ring's own descriptor.
#[repr(C)]
struct RingFdUpdate {
    offset: u32,
    reserved: u32,
    data: u64,
}

/// `struct __kernel_timespec`.
#[repr(C)]
struct KernelTimespec {
    seconds: i64,
    nanoseconds: i64,
}

/// `struct io_uring_getevents_arg` (`IORING_ENTER_EXT_ARG`): a wait with a timeout, a
/// minimum wait, or both.
#[repr(C)]
struct GeteventsArg {
    sigmask: u64,
    sigmask_size: u32,
    min_wait_usec: u32,
    timespec: u64,
}

/// How a ring is set up.
#[derive(Clone, Copy, Debug)]
pub struct RingOptions {
    /// Submission queue entries (a power of two).
    pub entries: u32,
    /// Completion queue entries (a power of two, at least `entries`): multishot operations
    /// post many completions per submission, so the completion queue is the larger one.
    pub completion_entries: u32,
    /// Kernel-side submission polling with this idle time in milliseconds (`None`: off).
    pub sqpoll_idle_millis: Option<u32>,
    /// Batch completions per wait: a wait sleeps until [`MIN_WAIT_BATCH`] completions are
    /// ready or this long has passed with at least one ready (`IORING_ENTER_EXT_ARG`'s
    /// `min_wait_usec`, Linux 6.12; ignored where the kernel lacks
    /// `IORING_FEAT_MIN_TIMEOUT`). `None`: a wait ends at the first completion.
    pub min_wait: Option<Duration>,
}

/// With a minimum wait, the completions a wait asks for before its minimum wait is over.
pub const MIN_WAIT_BATCH: u32 = 64;

impl Default for RingOptions {
    fn default() -> Self {
        RingOptions {
            entries: 1024,
            completion_entries: 8192,
            sqpoll_idle_millis: None,
            min_wait: None,
        }
    }
}

/// Counters of one ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingCounters {
    /// Submission queue entries queued for the kernel (each is submitted by the next enter,
    /// or picked up by the polling kernel thread).
    pub submissions: u64,
    /// Completion queue entries reaped.
    pub completions: u64,
    /// `io_uring_enter` system calls, all kinds.
    pub enter_calls: u64,
    /// Of those, the ones made to wait for completions (one per loop turn at most).
    pub wait_calls: u64,
    /// Of those, the ones made because the submission queue was full mid-turn.
    pub sq_full_enters: u64,
    /// Waits that asked for a batch of completions ([`RingOptions::min_wait`]).
    pub batched_waits: u64,
    /// Completions the kernel could not post for want of room in the completion queue
    /// (its overflow counter: they wait on the kernel's overflow list until an enter
    /// flushes them).
    pub cq_overflows: u64,
}

/// An io_uring instance driven by one thread.
pub struct Ring {
    ring: IoUring,
    enabled: bool,
    /// What `io_uring_enter` is given: the registered index of the ring (with
    /// `IORING_ENTER_REGISTERED_RING`, no descriptor lookup per call) or its descriptor.
    enter_target: (i32, u32),
    sqpoll: bool,
    /// The minimum wait in µs (0: none, or the kernel cannot).
    min_wait_usec: u32,
    counters: RingCounters,
}

impl Ring {
    /// Creates a ring (disabled until its first enter; see the module doc).
    pub fn new(options: RingOptions) -> io::Result<Ring> {
        let build = |submit_all: bool| {
            let mut builder = IoUring::builder();
            builder
                .setup_cqsize(options.completion_entries.max(options.entries))
                .setup_r_disabled()
                .setup_single_issuer();
            if submit_all {
                builder.setup_submit_all();
            }
            match options.sqpoll_idle_millis {
                Some(idle) => {
                    builder.setup_sqpoll(idle);
                }
                None => {
                    builder.setup_defer_taskrun();
                }
            }
            builder.build(options.entries)
        };
        // `SUBMIT_ALL` (Linux 5.18): an entry that fails while being submitted (a connect
        // to a bad address) completes with its error and the entries behind it are
        // submitted all the same, instead of waiting for the next enter.
        let ring = match build(true) {
            Err(error) if error.raw_os_error() == Some(libc::EINVAL) => build(false)?,
            other => other?,
        };
        let min_wait_usec = match options.min_wait {
            Some(wait) if ring.params().is_feature_min_timeout() => {
                wait.as_micros().clamp(0, u128::from(u32::MAX)) as u32
            }
            _ => 0,
        };
        Ok(Ring {
            enter_target: (ring.as_raw_fd(), 0),
            ring,
            enabled: false,
            sqpoll: options.sqpoll_idle_millis.is_some(),
            min_wait_usec,
            counters: RingCounters::default(),
        })
    }

    /// The ring's counters.
    pub fn counters(&self) -> RingCounters {
        self.counters
    }

    /// The ring, for registrations (buffer rings, probes).
    pub fn io_uring(&self) -> &IoUring {
        &self.ring
    }

    /// Enables the ring on the calling thread, which becomes its only submitter, and
    /// registers the ring descriptor for this thread (saves a descriptor lookup per enter).
    fn ensure_enabled(&mut self) -> io::Result<()> {
        if self.enabled {
            return Ok(());
        }
        self.ring.submitter().register_enable_rings()?;
        let descriptor = self.ring.as_raw_fd();
        let mut update = RingFdUpdate {
            offset: u32::MAX,
            reserved: 0,
            data: descriptor as u64,
        };
        // SAFETY: `update` is a valid io_uring_rsrc_update for one entry; the kernel writes
        // the chosen index into `offset`. Registration is per thread, hence done here, on
        // the thread that will enter the ring. Optional: without it enters still work.
        let registered = unsafe {
            libc::syscall(
                libc::SYS_io_uring_register,
                descriptor,
                REGISTER_RING_FDS,
                &mut update as *mut RingFdUpdate,
                1,
            )
        };
        if registered == 1 {
            self.enter_target = (update.offset as i32, EnterFlags::REGISTERED_RING.bits());
        }
        self.enabled = true;
        Ok(())
    }

    /// Queues one submission; when the queue is full, submits what is queued first (one
    /// extra `io_uring_enter`, counted).
    ///
    /// # Safety
    ///
    /// Every pointer in `entry` (buffers, `msghdr`s, iovecs) must stay valid, and every
    /// buffer the kernel may write unaliased, until the entry's last completion is reaped.
    pub unsafe fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        for _ in 0..2 {
            // SAFETY: the caller guarantees the entry's memory outlives the operation.
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                self.counters.submissions += 1;
                return Ok(());
            }
            self.counters.sq_full_enters += 1;
            self.enter(0, None, false)?;
        }
        Err(io::Error::other("io_uring submission queue stays full"))
    }

    /// Submits everything queued and waits until at least one completion is ready or
    /// `timeout` passes (`None`: forever; `Some(ZERO)`: do not wait). With a minimum wait
    /// ([`RingOptions::min_wait`]) the wait goes on, within `timeout`, until
    /// [`MIN_WAIT_BATCH`] completions are ready or the minimum wait has passed with one
    /// ready. With nothing to submit, completions already waiting and no wait asked, no
    /// system call is made.
    pub fn submit_and_wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.submit_and_wait_batch(timeout, true)
    }

    /// [`Ring::submit_and_wait`], batching completions only if `batch` (and a minimum wait
    /// is set): a caller whose last turn was long enough to collect completions by itself
    /// passes `false`, so a busy loop never sleeps while completions are ready.
    pub fn submit_and_wait_batch(
        &mut self,
        timeout: Option<Duration>,
        batch: bool,
    ) -> io::Result<()> {
        let queued = self.ring.submission().len();
        let ready = !self.ring.completion().is_empty();
        let wait = !ready && timeout != Some(Duration::ZERO);
        if queued == 0 && ready {
            return Ok(());
        }
        if self.sqpoll && !wait {
            // The kernel thread takes the submissions; enter only to wake it up.
            if queued == 0 || !self.ring.submission().need_wakeup() {
                return Ok(());
            }
        }
        let want = match (wait, batch && self.min_wait_usec > 0) {
            (false, _) => 0,
            (true, false) => 1,
            (true, true) => MIN_WAIT_BATCH,
        };
        if want > 1 {
            self.counters.batched_waits += 1;
        }
        self.enter(want, timeout.filter(|_| wait), wait)
    }

    /// The minimum wait in effect (`None`: off, or the kernel cannot).
    pub fn min_wait(&self) -> Option<Duration> {
        (self.min_wait_usec > 0).then(|| Duration::from_micros(u64::from(self.min_wait_usec)))
    }

    /// Submits what is queued now and runs the ring's pending completion work without
    /// waiting (one `io_uring_enter`): for operations whose effect must not wait for the
    /// next loop turn, such as dropping the kernel's reference to a file about to be closed.
    pub fn submit_now(&mut self) -> io::Result<()> {
        self.enter(0, None, false)
    }

    fn enter(&mut self, want: u32, timeout: Option<Duration>, is_wait: bool) -> io::Result<()> {
        self.ensure_enabled()?;
        let queued = self.ring.submission().len() as u32;
        let mut flags = EnterFlags::GETEVENTS;
        if self.sqpoll {
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            if self.ring.submission().need_wakeup() {
                flags |= EnterFlags::SQ_WAKEUP;
            }
        }
        self.counters.enter_calls += 1;
        if is_wait {
            self.counters.wait_calls += 1;
        }
        let (target, registered) = self.enter_target;
        let mut timespec = KernelTimespec {
            seconds: 0,
            nanoseconds: 0,
        };
        let mut argument = GeteventsArg {
            sigmask: 0,
            sigmask_size: 0,
            min_wait_usec: 0,
            timespec: 0,
        };
        if let Some(timeout) = timeout {
            timespec.seconds = i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX);
            timespec.nanoseconds = i64::from(timeout.subsec_nanos());
            argument.timespec = &timespec as *const KernelTimespec as u64;
        }
        // A batch wait (more than one completion wanted) is bounded by the minimum wait: set
        // only where the kernel has `IORING_FEAT_MIN_TIMEOUT` (`Ring::new`), so an older
        // kernel never sleeps for the whole batch.
        if want > 1 {
            argument.min_wait_usec = self.min_wait_usec;
        }
        let (argument_pointer, argument_size) = if timeout.is_some() || want > 1 {
            flags |= EnterFlags::EXT_ARG;
            (
                &argument as *const GeteventsArg as *const libc::c_void,
                size_of::<GeteventsArg>(),
            )
        } else {
            (std::ptr::null(), 0)
        };
        // SAFETY: `target` names this ring (its descriptor, or its registered index with the
        // matching flag); the extended argument and the timespec it points to live across
        // the call; the counts describe this ring's own queues.
        let result = unsafe {
            libc::syscall(
                libc::SYS_io_uring_enter,
                target,
                queued,
                want,
                flags.bits() | registered,
                argument_pointer,
                argument_size,
            )
        };
        let result = if result < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(result)
        };
        match result {
            Ok(_) => Ok(()),
            // Timed out, interrupted, or completions must be reaped first: all fine for an
            // event loop, which reaps and comes back.
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
                ) =>
            {
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    /// Moves every ready completion, in order, to the end of `into`.
    pub fn drain_into(&mut self, into: &mut Vec<cqueue::Entry>) {
        let before = into.len();
        let mut completion = self.ring.completion();
        self.counters.cq_overflows = u64::from(completion.overflow());
        into.extend(&mut completion);
        self.counters.completions += (into.len() - before) as u64;
    }
}
