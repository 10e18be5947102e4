//! The `Backend` enum: the event mechanisms coldwire can run on, in order of preference,
//! each with a probe that says whether this kernel and sandbox allow it.
//!
//! Start-up picks `--io` explicitly or [`Backend::best_available`]; the caller then turns
//! the choice into a concrete, monomorphised driver with one `match`, so the hot loop has no
//! dynamic dispatch.

use std::fmt;
use std::io;
use std::str::FromStr;

use crate::epoll::EpollPoller;
use crate::poll::PollPoller;
use crate::poller::Poller;
use crate::select::SelectPoller;

/// An event mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// `epoll(7)`, edge-triggered: cost per wait grows with ready descriptors only.
    Epoll,
    /// `poll(2)`: the kernel scans every registered descriptor on each wait.
    Poll,
    /// `select(2)` with unbounded bitmaps: scans every descriptor up to the highest.
    Select,
}

impl Backend {
    /// Every backend, most preferred first.
    pub const ALL: [Backend; 3] = [Backend::Epoll, Backend::Poll, Backend::Select];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Epoll => EpollPoller::NAME,
            Backend::Poll => PollPoller::NAME,
            Backend::Select => SelectPoller::NAME,
        }
    }

    /// Checks that the mechanism works here by creating (and dropping) a poller. Returns
    /// the reason when it does not, e.g. a seccomp filter refusing `epoll_create1`.
    pub fn probe(self) -> io::Result<()> {
        match self {
            Backend::Epoll => EpollPoller::new().map(drop),
            Backend::Poll => PollPoller::new().map(drop),
            Backend::Select => SelectPoller::new().map(drop),
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
#[error("unknown I/O backend `{0}`: expected one of select, poll, epoll")]
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
        assert!(error.to_string().contains("select, poll, epoll"));
    }

    #[test]
    fn every_backend_probes_on_linux_and_epoll_is_preferred() {
        for backend in Backend::ALL {
            backend.probe().unwrap();
        }
        assert_eq!(Backend::best_available(), Backend::Epoll);
    }
}
