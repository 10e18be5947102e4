//! Starting worker threads on any backend, written once for `serve` and `proxy`: a worker
//! says what it runs ([`WorkerLoop`]); [`spawn_worker`] builds the driver the backend
//! names (one `match`, the only place a backend becomes a type), pins the thread when
//! asked, and returns its waker and handle.

use std::thread::JoinHandle;

use coldwire_io::{
    Backend, Driver, DriverConfig, EpollPoller, PollPoller, Poller, ReadinessDriver, SelectPoller,
    UringDriver, UringOptions, UringPoller, Waker,
};

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
    match backend {
        Backend::Epoll => spawn_on(readiness_driver::<EpollPoller>(driver_config)?, work),
        Backend::Poll => spawn_on(readiness_driver::<PollPoller>(driver_config)?, work),
        Backend::Select => spawn_on(readiness_driver::<SelectPoller>(driver_config)?, work),
        Backend::UringPoll => spawn_on(readiness_driver::<UringPoller>(driver_config)?, work),
        Backend::Uring => {
            let driver = UringDriver::new(driver_config.clone(), uring).map_err(|source| {
                ServerError::Backend {
                    backend: "uring",
                    source,
                }
            })?;
            spawn_on(driver, work)
        }
    }
}

/// A readiness driver over poller `P`.
fn readiness_driver<P: Poller>(
    driver_config: &DriverConfig,
) -> Result<ReadinessDriver<P>, ServerError> {
    ReadinessDriver::<P>::new(driver_config.clone()).map_err(|source| ServerError::Backend {
        backend: P::NAME,
        source,
    })
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
