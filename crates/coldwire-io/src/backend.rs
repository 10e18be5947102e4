//! The backends coldwire can run on: the one list of them ([`Backend::ALL`], in order of
//! preference), each one's name and probe, and the one place that turns a backend into a
//! driver type ([`Backend::dispatch`]).
//!
//! Start-up picks `--io` explicitly or [`Backend::best_available`], then hands a job — the
//! code to run on the driver, generic over its type ([`WithDriver`]) — to
//! [`Backend::dispatch`], which builds the driver and runs the job monomorphised for it: the
//! hot loop has no dynamic dispatch, and no caller needs a `match` of its own. Tests run one
//! test per backend with [`for_each_backend!`](crate::for_each_backend), generated from the
//! same list (a unit test below keeps the two in step).
//!
//! Adding a backend: its file (a poller in `poller/`, or a driver), and its registration
//! here — a variant, its place in [`Backend::ALL`], its arms in [`Backend::name`],
//! [`Backend::probe`] and [`Backend::dispatch`] (the compiler asks for each), and its test
//! module in `for_each_backend!` (the unit test asks for it).

use std::fmt;
use std::io;
use std::str::FromStr;

use crate::driver::{Driver, DriverConfig};
use crate::poller::{EpollPoller, PollPoller, Poller, SelectPoller, UringPoller};
use crate::readiness::ReadinessDriver;
use crate::uring::{Needs, UringDriver, UringOptions, probe as probe_uring};

/// An event mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// `epoll(7)`, edge-triggered: cost per wait grows with ready descriptors only.
    Epoll,
    /// `poll(2)`: the kernel scans every registered descriptor on each wait.
    Poll,
    /// `select(2)` with unbounded bitmaps: scans every descriptor up to the highest.
    Select,
    /// io_uring as a readiness notifier (multishot `POLL_ADD`) under the same driver as
    /// epoll: batching without the completion model.
    UringPoll,
    /// io_uring as a completion driver: multishot accept and receive into a shared
    /// provided-buffer ring, sends and file reads submitted, one enter per loop turn.
    Uring,
}

/// Code to run on a driver, whichever backend it is: [`Backend::dispatch`] builds the
/// driver and calls [`WithDriver::run`] with it, monomorphised for its type.
///
/// ```
/// use coldwire_io::{Backend, Driver, DriverConfig, UringOptions, WithDriver};
///
/// struct BackendName;
///
/// impl WithDriver for BackendName {
///     type Output = &'static str;
///     fn run<D: Driver + Send + 'static>(self, driver: D) -> &'static str {
///         driver.backend_name()
///     }
/// }
///
/// let name = Backend::Poll
///     .dispatch(&DriverConfig::default(), UringOptions::default(), BackendName)
///     .unwrap();
/// assert_eq!(name, "poll");
/// ```
pub trait WithDriver {
    /// What the job returns.
    type Output;

    /// Runs the job on `driver` (which may be moved to another thread: every driver is
    /// built on the thread that calls `dispatch` and may run on another).
    fn run<D: Driver + Send + 'static>(self, driver: D) -> Self::Output;
}

impl Backend {
    /// Every backend, most preferred first: the one list (help texts, tests and
    /// [`Backend::best_available`] read it). epoll leads: it is the portable baseline, and
    /// io_uring did not measure better on this workload (see `docs/backends.md`), while it
    /// is the one most often switched off (sysctl, seccomp).
    pub const ALL: [Backend; 5] = [
        Backend::Epoll,
        Backend::Uring,
        Backend::UringPoll,
        Backend::Poll,
        Backend::Select,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Epoll => EpollPoller::NAME,
            Backend::Poll => PollPoller::NAME,
            Backend::Select => SelectPoller::NAME,
            Backend::UringPoll => UringPoller::NAME,
            Backend::Uring => UringDriver::NAME,
        }
    }

    /// Checks that the mechanism works here by creating (and dropping) a poller, or for
    /// io_uring by reading the sysctl, creating a ring and probing the opcodes used. Returns
    /// the reason when it does not, e.g. a seccomp filter refusing `epoll_create1` or
    /// `io_uring_setup`.
    pub fn probe(self) -> io::Result<()> {
        match self {
            Backend::Epoll => EpollPoller::new().map(drop),
            Backend::Poll => PollPoller::new().map(drop),
            Backend::Select => SelectPoller::new().map(drop),
            Backend::UringPoll => probe_uring(Needs::Poll),
            Backend::Uring => probe_uring(Needs::Completion),
        }
    }

    /// Whether this kernel or sandbox may refuse the backend: io_uring can be switched off
    /// (`kernel.io_uring_disabled`) or filtered (the default seccomp profiles of Docker
    /// and containerd), while select, poll and epoll are part of every Linux kernel. A
    /// refused optional backend is skipped with its reason; any other failing is an error.
    pub fn is_optional(self) -> bool {
        matches!(self, Backend::Uring | Backend::UringPoll)
    }

    /// The most preferred backend whose probe succeeds (poll and select always do).
    pub fn best_available() -> Backend {
        Backend::ALL
            .into_iter()
            .find(|backend| backend.probe().is_ok())
            .unwrap_or(Backend::Poll)
    }

    /// Builds this backend's driver with `config` (and `uring`, read by the io_uring
    /// completion driver only) and runs `job` on it. The only place a backend becomes a
    /// driver type. Fails, before running the job, when the driver cannot be built here
    /// (the mechanism refused, no descriptors).
    pub fn dispatch<J: WithDriver>(
        self,
        config: &DriverConfig,
        uring: UringOptions,
        job: J,
    ) -> io::Result<J::Output> {
        Ok(match self {
            Backend::Epoll => job.run(ReadinessDriver::<EpollPoller>::new(config.clone())?),
            Backend::Poll => job.run(ReadinessDriver::<PollPoller>::new(config.clone())?),
            Backend::Select => job.run(ReadinessDriver::<SelectPoller>::new(config.clone())?),
            Backend::UringPoll => job.run(ReadinessDriver::<UringPoller>::new(config.clone())?),
            Backend::Uring => job.run(UringDriver::new(config.clone(), uring)?),
        })
    }

    /// The backends' names in [`Backend::ALL`]'s order, joined by `separator`.
    pub fn names(separator: &str) -> String {
        Backend::ALL.map(Backend::name).join(separator)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// The error for a `--io` name that is not a backend.
#[derive(Debug, thiserror::Error)]
#[error("unknown I/O backend `{0}`: expected one of {names}", names = Backend::names(", "))]
pub struct UnknownBackend(pub String);

impl FromStr for Backend {
    type Err = UnknownBackend;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Backend::ALL
            .into_iter()
            .find(|backend| backend.name() == name)
            .ok_or_else(|| UnknownBackend(name.to_owned()))
    }
}

/// Runs `job` on a fresh driver of `backend` with the default configuration, for
/// [`for_each_backend!`](crate::for_each_backend). An optional backend this machine refuses
/// prints `skipped: <reason>` and the job does not run; any other failing panics.
pub fn run_test<J: WithDriver<Output = ()>>(backend: Backend, job: J) {
    if !test_can_run(backend) {
        return;
    }
    backend
        .dispatch(&DriverConfig::default(), UringOptions::default(), job)
        .unwrap_or_else(|error| panic!("cannot create a {backend} driver: {error}"));
}

/// Whether a test of `backend` can run here: true when its probe succeeds; false, with
/// `skipped: <reason>` printed, for an optional backend this machine refuses. Panics for a
/// backend that must work. The probe runs on a helper thread: tearing down its io_uring can
/// post task work to the thread that created the ring, which makes that thread's next
/// socket call with a timeout fail with `EINTR`.
pub fn test_can_run(backend: Backend) -> bool {
    let probe = std::thread::spawn(move || backend.probe())
        .join()
        .expect("the probe thread");
    match probe {
        Ok(()) => true,
        Err(reason) if backend.is_optional() => {
            println!("skipped: {backend} is unavailable here: {reason}");
            false
        }
        Err(reason) => panic!("backend {backend} does not work here: {reason}"),
    }
}

/// One `#[test]` per backend for each test function named, in a module per backend named
/// after it (`epoll::my_test`, `uring_poll::my_test`, …), so `cargo test uring` picks one
/// backend's tests. It defines those modules, so it is invoked once per module, naming all
/// of the module's tests (a second form goes in a module of its own). A backend this machine refuses (io_uring switched off or filtered)
/// prints `skipped: <reason>` instead of running; see [`backend::test_can_run`].
///
/// Two forms:
///
/// - `for_each_backend!(a, b)`: each `fn a<D: Driver>(driver: D)` gets a fresh driver of
///   the backend with the default configuration (built by [`Backend::dispatch`]);
/// - `for_each_backend!(by_name: a, b)`: each `fn a(backend: &'static str)` gets the
///   backend's `--io` name — for end-to-end tests that start `coldwire` itself.
///
/// ```
/// use coldwire_io::Driver;
///
/// fn counts_nothing_before_it_runs<D: Driver>(driver: D) {
///     assert_eq!(driver.counters().accepted, 0);
/// }
///
/// coldwire_io::for_each_backend!(counts_nothing_before_it_runs);
///
/// mod end_to_end {
///     fn serves_a_file(io: &'static str) {
///         // start `coldwire serve --io {io}` and ask it for a file
/// #       let _ = io;
///     }
///
///     coldwire_io::for_each_backend!(by_name: serves_a_file);
/// }
/// # fn main() {}
/// ```
///
/// [`backend::test_can_run`]: crate::backend::test_can_run
#[macro_export]
macro_rules! for_each_backend {
    // The list, in `Backend::ALL`'s order: test module, variant.
    (@list $form:ident $tests:tt) => {
        $crate::for_each_backend! { @$form $tests
            epoll Epoll,
            uring Uring,
            uring_poll UringPoll,
            poll Poll,
            select Select
        }
    };
    (@all () $($module:ident $variant:ident),+) => {
        [$($crate::Backend::$variant),+]
    };
    (@drivers $tests:tt $($module:ident $variant:ident),+) => {
        $($crate::for_each_backend! { @driver_module $module $variant $tests })+
    };
    (@names $tests:tt $($module:ident $variant:ident),+) => {
        $($crate::for_each_backend! { @name_module $module $variant $tests })+
    };
    (@driver_module $module:ident $variant:ident ($($test:ident),+)) => {
        mod $module {
            $(
                #[test]
                fn $test() {
                    struct Test;
                    impl $crate::WithDriver for Test {
                        type Output = ();
                        fn run<D: $crate::Driver + Send + 'static>(self, driver: D) {
                            super::$test(driver)
                        }
                    }
                    $crate::backend::run_test($crate::Backend::$variant, Test);
                }
            )+
        }
    };
    (@name_module $module:ident $variant:ident ($($test:ident),+)) => {
        mod $module {
            $(
                #[test]
                fn $test() {
                    let backend = $crate::Backend::$variant;
                    if $crate::backend::test_can_run(backend) {
                        super::$test(backend.name());
                    }
                }
            )+
        }
    };
    (by_name: $($test:ident),+ $(,)?) => {
        $crate::for_each_backend! { @list names ($($test),+) }
    };
    ($($test:ident),+ $(,)?) => {
        $crate::for_each_backend! { @list drivers ($($test),+) }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_macro_lists_every_backend_in_order() {
        let listed = crate::for_each_backend!(@list all ());
        assert_eq!(
            listed,
            Backend::ALL,
            "add the backend to `for_each_backend!`'s list"
        );
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for backend in Backend::ALL {
            assert_eq!(backend.name().parse::<Backend>().unwrap(), backend);
        }
        let error = "kqueue".parse::<Backend>().unwrap_err();
        assert!(
            error
                .to_string()
                .contains("epoll, uring, uring-poll, poll, select")
        );
    }

    #[test]
    fn every_backend_probes_on_linux_and_epoll_is_preferred() {
        for backend in Backend::ALL {
            match backend.probe() {
                Ok(()) => {}
                Err(reason) if backend.is_optional() => {
                    println!("skipped: {backend}: {reason}");
                }
                Err(reason) => panic!("{backend} does not probe: {reason}"),
            }
        }
        assert_eq!(Backend::best_available(), Backend::Epoll);
    }

    struct Name;

    impl WithDriver for Name {
        type Output = &'static str;
        fn run<D: Driver + Send + 'static>(self, driver: D) -> &'static str {
            driver.backend_name()
        }
    }

    #[test]
    fn dispatch_builds_the_driver_the_backend_names() {
        for backend in Backend::ALL {
            if !test_can_run(backend) {
                continue;
            }
            let name = backend
                .dispatch(&DriverConfig::default(), UringOptions::default(), Name)
                .unwrap();
            assert_eq!(name, backend.name());
        }
    }
}
