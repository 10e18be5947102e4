//! What one phase records: latency histograms (corrected from the intended start and raw
//! from the actual send, in nanoseconds, HdrHistogram with 3 significant digits), schedule
//! lateness, counts of requests and responses, errors by kind (and by cause: the errno of a
//! socket error, the status code of a bad status) and bytes.
//!
//! Which request counts where: a request *belongs* to the phase's measured window when its
//! intended start falls inside it; its latency and its errors are recorded even if it
//! completes after the window closed (bounded by `--timeout`). Throughput counts the
//! responses that *completed* inside the window.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

/// The highest latency recorded exactly: one hour, in nanoseconds (longer ones saturate).
pub(crate) const HIGHEST_NANOSECONDS: u64 = 3_600_000_000_000;

/// Failed requests by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ErrorCounts {
    /// The connection could not be established (refused, unreachable, or not within
    /// `--timeout`).
    pub connect: u64,
    /// No complete response within `--timeout` of the request's send.
    pub timeout: u64,
    /// The request waited for a free connection longer than `--timeout` and was never sent.
    pub queue_timeout: u64,
    /// The connection was reset (ECONNRESET, EPIPE).
    pub reset: u64,
    /// The server closed the connection before the response was complete.
    pub closed: u64,
    /// The response's status was 400 or above.
    pub bad_status: u64,
    /// The response could not be parsed (or the server sent bytes nobody asked for).
    pub bad_response: u64,
    /// Other socket errors.
    pub other: u64,
    /// No descriptor or connection slot was left to open a connection.
    pub no_descriptor: u64,
    /// The TLS handshake or a TLS record failed (a certificate not trusted, a protocol
    /// error): the message is in the error's cause.
    pub tls: u64,
}

impl ErrorCounts {
    /// All errors together.
    pub fn total(&self) -> u64 {
        self.connect
            + self.timeout
            + self.queue_timeout
            + self.reset
            + self.closed
            + self.bad_status
            + self.bad_response
            + self.other
            + self.no_descriptor
            + self.tls
    }
}

/// What happened during one second of the measured window (for plots over time).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Interval {
    /// Responses completed (any status).
    pub completed: u64,
    /// Of which with a status below 400.
    pub succeeded: u64,
    /// Requests that failed (any kind), counted when they failed.
    pub errors: u64,
    /// Slots missed by the generator.
    pub missed: u64,
}

/// Most seconds kept in the per-second series (longer windows keep their first hour).
const MAX_INTERVALS: usize = 3600;

/// The kinds of [`ErrorCounts`], for recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// See [`ErrorCounts::connect`].
    Connect,
    /// See [`ErrorCounts::timeout`].
    Timeout,
    /// See [`ErrorCounts::queue_timeout`].
    QueueTimeout,
    /// See [`ErrorCounts::reset`].
    Reset,
    /// See [`ErrorCounts::closed`].
    Closed,
    /// See [`ErrorCounts::bad_status`].
    BadStatus,
    /// See [`ErrorCounts::bad_response`].
    BadResponse,
    /// See [`ErrorCounts::other`].
    Other,
    /// See [`ErrorCounts::no_descriptor`].
    NoDescriptor,
    /// See [`ErrorCounts::tls`].
    Tls,
}

impl ErrorKind {
    /// How the kind reads in an error's cause (`connect`, `timeout`, …).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Timeout => "timeout",
            ErrorKind::QueueTimeout => "queue timeout",
            ErrorKind::Reset => "reset",
            ErrorKind::Closed => "closed by the server",
            ErrorKind::BadStatus => "status",
            ErrorKind::BadResponse => "bad response",
            ErrorKind::Other => "socket error",
            ErrorKind::NoDescriptor => "no descriptor",
            ErrorKind::Tls => "tls",
        }
    }
}

/// An errno as people look it up: `ECONNREFUSED (111)` (the number alone for one this
/// table does not name).
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::ECONNRESET => "ECONNRESET",
        libc::ECONNABORTED => "ECONNABORTED",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EHOSTUNREACH => "EHOSTUNREACH",
        libc::ENETUNREACH => "ENETUNREACH",
        libc::ENETDOWN => "ENETDOWN",
        libc::EHOSTDOWN => "EHOSTDOWN",
        libc::EPIPE => "EPIPE",
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
        libc::EADDRINUSE => "EADDRINUSE",
        libc::EMFILE => "EMFILE",
        libc::ENFILE => "ENFILE",
        libc::ENOBUFS => "ENOBUFS",
        libc::ENOMEM => "ENOMEM",
        libc::EAGAIN => "EAGAIN",
        libc::EACCES => "EACCES",
        libc::EPERM => "EPERM",
        libc::ENOTCONN => "ENOTCONN",
        libc::EPROTO => "EPROTO",
        libc::EINVAL => "EINVAL",
        _ => return format!("errno {errno}"),
    };
    format!("{name} ({errno})")
}

impl ErrorKind {
    /// Classifies a socket error on an established connection.
    pub fn of_io_error(error: &std::io::Error) -> ErrorKind {
        match error.raw_os_error() {
            Some(libc::ECONNRESET | libc::EPIPE | libc::ECONNABORTED) => ErrorKind::Reset,
            Some(libc::ETIMEDOUT) => ErrorKind::Timeout,
            _ => ErrorKind::Other,
        }
    }
}

/// The recordings of one phase.
#[derive(Clone, Debug)]
pub struct Recorder {
    /// Latency from the intended start (ns).
    pub corrected: Histogram<u64>,
    /// Latency from the actual send (ns).
    pub raw: Histogram<u64>,
    /// How late the generator handled each slot it sent (ns): its own timing error.
    pub lateness: Histogram<u64>,
    /// Slots of the window's schedule (the offered requests), sent or not.
    pub offered: u64,
    /// Slots skipped because the generator itself was late by more than the lateness limit.
    pub missed: u64,
    /// Requests of the window that were written to a connection.
    pub sent: u64,
    /// Requests of the window that got a complete response with a status below 400.
    pub succeeded: u64,
    /// Responses (any status) completed inside the window, whatever their request's slot.
    pub completed_in_window: u64,
    /// Responses with a status below 400 completed inside the window (the achieved rate).
    pub succeeded_in_window: u64,
    /// Bytes of the responses completed inside the window (heads and bodies).
    pub bytes_in_window: u64,
    /// Responses of the window's requests by status class (1xx … 5xx).
    pub status_classes: [u64; 5],
    /// Failed requests of the window, by kind.
    pub errors: ErrorCounts,
    /// Connections the generator opened for hot requests during the window.
    pub connections_opened: u64,
    /// Cold connections the server closed during the phase.
    pub cold_closed_by_server: u64,
    /// Per second of the window.
    pub intervals: Vec<Interval>,
    /// Failed requests of the window by cause (`connect: ECONNREFUSED (111)`,
    /// `status 503`, `timeout`, …): what a person needs to act on them.
    pub causes: BTreeMap<String, u64>,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_NANOSECONDS, 3)
        .expect("constant histogram bounds are valid")
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    /// Empty recordings.
    pub fn new() -> Recorder {
        Recorder {
            corrected: histogram(),
            raw: histogram(),
            lateness: histogram(),
            offered: 0,
            missed: 0,
            sent: 0,
            succeeded: 0,
            completed_in_window: 0,
            succeeded_in_window: 0,
            bytes_in_window: 0,
            status_classes: [0; 5],
            errors: ErrorCounts::default(),
            connections_opened: 0,
            cold_closed_by_server: 0,
            intervals: Vec::new(),
            causes: BTreeMap::new(),
        }
    }

    /// The counts of second `index` of the window (`None` past the kept range).
    pub fn interval(&mut self, index: usize) -> Option<&mut Interval> {
        if index >= MAX_INTERVALS {
            return None;
        }
        if index >= self.intervals.len() {
            self.intervals.resize(index + 1, Interval::default());
        }
        self.intervals.get_mut(index)
    }

    /// Records a complete response of a window request.
    pub fn response(&mut self, status: u16, corrected_ns: u64, raw_ns: u64) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.status_classes[class] += 1;
        if status >= 400 {
            self.errors.bad_status += 1;
            *self.causes.entry(format!("status {status}")).or_default() += 1;
            return;
        }
        self.succeeded += 1;
        self.corrected.saturating_record(corrected_ns.max(1));
        self.raw.saturating_record(raw_ns.max(1));
    }

    /// Records a failed window request and its cause: the kind, with the errno of the
    /// socket error when there was one (`connect: ECONNREFUSED (111)`), or `detail` (a
    /// TLS alert's text).
    pub fn error_with(&mut self, kind: ErrorKind, errno: Option<i32>, detail: Option<&str>) {
        self.count(kind);
        let cause = match (errno, detail) {
            (Some(errno), _) => format!("{}: {}", kind.name(), errno_name(errno)),
            (None, Some(detail)) => format!("{}: {detail}", kind.name()),
            (None, None) => kind.name().to_owned(),
        };
        *self.causes.entry(cause).or_default() += 1;
    }

    /// Records a failed window request whose cause is its kind alone (see
    /// [`Recorder::error_with`]).
    pub fn error(&mut self, kind: ErrorKind) {
        self.error_with(kind, None, None);
    }

    fn count(&mut self, kind: ErrorKind) {
        let errors = &mut self.errors;
        let counter = match kind {
            ErrorKind::Connect => &mut errors.connect,
            ErrorKind::Timeout => &mut errors.timeout,
            ErrorKind::QueueTimeout => &mut errors.queue_timeout,
            ErrorKind::Reset => &mut errors.reset,
            ErrorKind::Closed => &mut errors.closed,
            ErrorKind::BadStatus => &mut errors.bad_status,
            ErrorKind::BadResponse => &mut errors.bad_response,
            ErrorKind::Other => &mut errors.other,
            ErrorKind::NoDescriptor => &mut errors.no_descriptor,
            ErrorKind::Tls => &mut errors.tls,
        };
        *counter += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_split_into_successes_and_bad_statuses() {
        let mut recorder = Recorder::new();
        recorder.response(200, 2_000, 1_000);
        recorder.response(304, 4_000, 3_000);
        recorder.response(503, 9_000, 9_000);
        recorder.error(ErrorKind::Timeout);
        assert_eq!(recorder.succeeded, 2);
        assert_eq!(recorder.status_classes, [0, 1, 1, 0, 1]);
        assert_eq!(recorder.errors.bad_status, 1);
        assert_eq!(recorder.errors.total(), 2);
        assert_eq!(recorder.corrected.len(), 2);
        assert_eq!(recorder.raw.max(), recorder.raw.highest_equivalent(3_000));
    }

    #[test]
    fn causes_name_the_errno_and_the_status() {
        let mut recorder = Recorder::new();
        for _ in 0..3 {
            recorder.error_with(ErrorKind::Connect, Some(libc::ECONNREFUSED), None);
        }
        recorder.error_with(ErrorKind::Connect, None, Some("timed out"));
        recorder.error(ErrorKind::Timeout);
        recorder.error_with(ErrorKind::Other, Some(4242), None);
        recorder.response(503, 1, 1);
        recorder.response(503, 1, 1);
        let causes: Vec<(&str, u64)> = recorder
            .causes
            .iter()
            .map(|(cause, count)| (cause.as_str(), *count))
            .collect();
        assert_eq!(
            causes,
            [
                ("connect: ECONNREFUSED (111)", 3),
                ("connect: timed out", 1),
                ("socket error: errno 4242", 1),
                ("status 503", 2),
                ("timeout", 1),
            ]
        );
        assert_eq!(recorder.errors.connect, 4);
        assert_eq!(recorder.errors.total(), 8);
    }

    #[test]
    fn io_errors_are_classified() {
        let reset = std::io::Error::from_raw_os_error(libc::ECONNRESET);
        let pipe = std::io::Error::from_raw_os_error(libc::EPIPE);
        let other = std::io::Error::from_raw_os_error(libc::EHOSTUNREACH);
        assert_eq!(ErrorKind::of_io_error(&reset), ErrorKind::Reset);
        assert_eq!(ErrorKind::of_io_error(&pipe), ErrorKind::Reset);
        assert_eq!(ErrorKind::of_io_error(&other), ErrorKind::Other);
    }
}
