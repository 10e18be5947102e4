//! Starting worker threads on any backend, written once for `serve` and `proxy`: a worker
//! says what it runs ([`WorkerLoop`]); [`spawn_worker`] has `Backend::dispatch` (the only
//! place a backend becomes a type) build the driver, pins the thread when asked, and
//! returns its waker and handle.

use std::thread::JoinHandle;

use coldwire_io::{Backend, Driver, DriverConfig, UringOptions, Waker, WithDriver};

use crate::error::ServerError;
use crate::system;

/// A started loop: its waker and its thread.
pub(crate) type Spawned = (Waker, JoinHandle<std::io::Result<()>>);

/// What one worker thread runs, for whichever driver its backend gives it.
pub trait WorkerLoop: Send + 'static {
    /// The thread's name (`coldwire-worker-0`, …).
    fn thread_name(&self) -> String;
    /// The CPU to pin the thread to (modulo the number of CPUs), if any.
    fn pin(&self) -> Option<usize>;
    /// Runs the event loop on `driver` until the worker stops.
    fn run<D: Driver>(self, driver: D) -> std::io::Result<()>;
}

/// Starts `work` on a thread of its own with a driver for `backend` (`uring` is used by
/// the io_uring completion driver only).
pub(crate) fn spawn_worker<W: WorkerLoop>(
    backend: Backend,
    driver_config: &DriverConfig,
    uring: UringOptions,
    work: W,
) -> Result<Spawned, ServerError> {
    backend
        .dispatch(driver_config, uring, SpawnOn(work))
        .map_err(|source| ServerError::Backend {
            backend: backend.name(),
            source,
        })?
}

/// The job [`Backend::dispatch`] runs on the driver it built: start the worker's thread.
struct SpawnOn<W>(W);

impl<W: WorkerLoop> WithDriver for SpawnOn<W> {
    type Output = Result<Spawned, ServerError>;

    fn run<D: Driver + Send + 'static>(self, driver: D) -> Self::Output {
        spawn_on(driver, self.0)
    }
}

/// Starts the thread that runs `work` on `driver`.
fn spawn_on<D: Driver + Send + 'static, W: WorkerLoop>(
    driver: D,
    work: W,
) -> Result<Spawned, ServerError> {
    let waker = driver.waker();
    let pin = work.pin();
    let thread = std::thread::Builder::new()
        .name(work.thread_name())
        .spawn(move || {
            if let Some(cpu) = pin {
                let _ = system::pin_current_thread(cpu % system::cpu_count());
            }
            work.run(driver)
        })
        .map_err(|source| ServerError::System {
            context: "cannot spawn a worker thread",
            source,
        })?;
    Ok((waker, thread))
}
