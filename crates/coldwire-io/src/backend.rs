//! The `Backend` enum: the event mechanisms coldwire can run on, in order of preference,
//! each with a probe that says whether this kernel and sandbox allow it.
//!
//! Start-up picks `--io` explicitly or [`Backend::best_available`]; the caller then turns
//! the choice into a concrete, monomorphised driver with one `match`, so the hot loop has no
//! dynamic dispatch.

use std::fmt;
use std::io;
use std::str::FromStr;

use crate::poller::Poller;
use crate::poller::epoll::EpollPoller;
use crate::poller::poll::PollPoller;
use crate::poller::select::SelectPoller;
use crate::poller::uring_poll::UringPoller;
use crate::uring::{Needs, probe as probe_uring};

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

impl Backend {
    /// Every backend, most preferred first. epoll leads: it is the portable baseline, and
    /// io_uring did not measure better on this workload (see `docs/backends.md`), while it is
    /// the one most often switched off (sysctl, seccomp).
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
            Backend::Uring => "uring",
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

    /// The most preferred backend whose probe succeeds (poll and select always do).
    pub fn best_available() -> Backend {
        Backend::ALL
            .into_iter()
            .find(|backend| backend.probe().is_ok())
            .unwrap_or(Backend::Poll)
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// The error for a `--io` name that is not a backend.
#[derive(Debug, thiserror::Error)]
#[error("unknown I/O backend `{0}`: expected one of select, poll, epoll, uring-poll, uring")]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for backend in Backend::ALL {
            assert_eq!(backend.name().parse::<Backend>().unwrap(), backend);
        }
        let error = "kqueue".parse::<Backend>().unwrap_err();
        assert!(
            error
                .to_string()
                .contains("select, poll, epoll, uring-poll, uring")
        );
    }

    #[test]
    fn every_backend_probes_on_linux_and_epoll_is_preferred() {
        for backend in Backend::ALL {
            match (backend, backend.probe()) {
                (_, Ok(())) => {}
                (Backend::Uring | Backend::UringPoll, Err(reason)) => {
                    println!("skipped: {backend}: {reason}");
                }
                (_, Err(reason)) => panic!("{backend} does not probe: {reason}"),
            }
        }
        assert_eq!(Backend::best_available(), Backend::Epoll);
    }
}
