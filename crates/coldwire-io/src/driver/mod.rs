//! The completion interface the server is written against: operations in, completions
//! out. The server never sees readiness; it asks to receive, queues output and flushes,
//! closes, arms timers, and reacts to [`Completion`]s. `ReadinessDriver<P>` implements it
//! over any [`crate::Poller`]; `UringDriver` implements it natively on io_uring. Because
//! the server logic is identical over every driver, comparing backends measures the
//! mechanism.
//!
//! Two traits: [`Driver`], what every backend does, and [`Splice`], the extension that
//! moves bytes from socket to socket inside the kernel. A driver names its splicer
//! ([`Driver::Splicer`]: itself, or [`NoSplice`] where the mechanism has none) and hands
//! it out through [`Driver::splicer`], so generic code asks once and never calls a splice
//! method that would silently do nothing. No method of either trait has a default: each
//! backend states what it does.
//!
//! Contract:
//! - a connection id is valid from its `Accepted` completion until the server calls
//!   [`Driver::close`]; after that the id may be reused for a new connection, and no
//!   completion for the old connection is delivered;
//! - [`Driver::recv`] arms exactly one receive; its result comes as one `Received`,
//!   `PeerClosed` or `Failed` completion. A buffer is taken from the pool only when data has
//!   arrived, so an idle connection owns none;
//! - [`Driver::send`] queues output and [`Driver::flush`] starts writing it. A flush that
//!   finishes at once reports [`Flush::Done`]; otherwise the driver keeps writing and later
//!   delivers `Sent` (or `Failed`). Output is written in queue order. A completion driver
//!   may report `Done` for output it has queued for submission: it then owns the bytes,
//!   hands them to the kernel with the next [`Driver::wait`] (one system call for the whole
//!   loop turn) and writes them even if the connection is closed meanwhile;
//! - each connection has at most one timer; arming it again replaces the deadline.

use std::fs::File;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::core::counters::LoopCounters;
use crate::core::waker::Waker;

mod file_work;
mod splice;

use crate::pools::buffer_pool::Buffer;
pub use file_work::{FileRequest, FileWork};
pub use splice::{NoSplice, Splice};

/// A connection's identity inside one driver: its slot in the slot table (dense, lowest
/// free reused first) and the slot's generation, so a completion meant for a closed
/// connection can never reach the connection that reused its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId {
    /// The slot index.
    pub slot: u32,
    /// How many connections used this slot before (wrapping).
    pub generation: u32,
}

impl ConnectionId {
    /// The slot index, for indexing per-connection state kept by the server.
    pub fn index(self) -> usize {
        self.slot as usize
    }
}

/// A listening socket registered with a driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ListenerId(pub u32);

/// A piece of output queued on a connection.
#[derive(Debug)]
pub enum Chunk {
    /// Bytes owned by this response (a head, a small body); the allocation goes back to the
    /// driver's pool once written (see [`Driver::take_vec`]).
    Owned(Vec<u8>),
    /// Shared immutable bytes (a cached body): written without copying in user space.
    Shared(Bytes),
    /// A byte range of a file, sent with `sendfile(2)`.
    File {
        /// The open file (shared with a file cache).
        file: Arc<File>,
        /// First byte to send.
        offset: u64,
        /// How many bytes to send.
        length: u64,
    },
}

impl Chunk {
    /// Bytes this chunk will put on the wire.
    pub fn len(&self) -> u64 {
        match self {
            Chunk::Owned(bytes) => bytes.len() as u64,
            Chunk::Shared(bytes) => bytes.len() as u64,
            Chunk::File { length, .. } => *length,
        }
    }

    /// True for a chunk with nothing to send.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The outcome of [`Driver::flush`].
#[derive(Debug)]
pub enum Flush {
    /// Everything queued has been handed to the kernel.
    Done,
    /// Some output waits for the peer; a `Sent` or `Failed` completion will follow.
    Pending,
    /// Writing failed (e.g. the peer reset the connection); the queue was dropped.
    Failed(io::Error),
}

/// What a driver reports back.
#[derive(Debug)]
pub enum Completion {
    /// A new connection; its receive is not armed yet.
    Accepted {
        /// Which listener accepted it.
        listener: ListenerId,
        /// The new connection.
        connection: ConnectionId,
        /// The client's address.
        peer: SocketAddr,
    },
    /// An outgoing connection from [`Driver::connect`] is established; its receive is not
    /// armed yet. (A failed connect is reported as `Failed`.)
    Connected {
        /// The connection.
        connection: ConnectionId,
    },
    /// Data arrived for an armed receive.
    Received {
        /// The connection.
        connection: ConnectionId,
        /// A pooled buffer holding the data; give it back with [`Driver::recycle`].
        buffer: Buffer,
    },
    /// The peer closed its sending side (end of stream) on an armed receive.
    PeerClosed {
        /// The connection.
        connection: ConnectionId,
    },
    /// All output queued before a `Flush::Pending` has been written.
    Sent {
        /// The connection.
        connection: ConnectionId,
    },
    /// A receive or a pending send failed (reset, broken pipe...). The server should close.
    Failed {
        /// The connection.
        connection: ConnectionId,
        /// The system error.
        error: io::Error,
    },
    /// The connection's timer expired.
    TimerExpired {
        /// The connection.
        connection: ConnectionId,
    },
    /// Another thread called [`Waker::wake`].
    Woken,
}

impl Completion {
    /// The connection this completion is about, if any.
    pub fn connection(&self) -> Option<ConnectionId> {
        match self {
            Completion::Accepted { connection, .. }
            | Completion::Connected { connection }
            | Completion::Received { connection, .. }
            | Completion::PeerClosed { connection }
            | Completion::Sent { connection }
            | Completion::Failed { connection, .. }
            | Completion::TimerExpired { connection } => Some(*connection),
            Completion::Woken => None,
        }
    }
}

/// [`Driver::connect`] refused: the driver already holds
/// [`DriverConfig::max_connections`] connections. The `io::Error` it returns carries this
/// value ([`io::Error::get_ref`]); [`is_out_of_connections`] recognises it.
#[derive(Clone, Copy, Debug, thiserror::Error)]
#[error(
    "connection limit reached ({limit} connections open in this loop): raise --max-connections (and the open-files limit with it) or add workers"
)]
pub struct ConnectionLimitReached {
    /// The limit that was reached.
    pub limit: usize,
}

impl ConnectionLimitReached {
    /// The `io::Error` [`Driver::connect`] returns at the limit.
    pub fn error(limit: usize) -> io::Error {
        io::Error::other(ConnectionLimitReached { limit })
    }
}

/// Whether a failed [`Driver::connect`] (or accept) ran out of connections rather than
/// reaching a peer: the driver's own limit ([`ConnectionLimitReached`]) or the system's
/// (`EMFILE`/`ENFILE`: descriptors; `ENOBUFS`/`ENOMEM`: kernel memory). A server answers
/// such a failure as its own overload (503), not as the peer's (502).
pub fn is_out_of_connections(error: &io::Error) -> bool {
    error
        .get_ref()
        .is_some_and(|inner| inner.is::<ConnectionLimitReached>())
        || error
            .raw_os_error()
            .is_some_and(crate::core::accept_gate::is_descriptor_exhaustion)
}

/// Limits and sizes of a driver, with the defaults a server on this machine wants.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    /// Most connections open at once; at the limit, accepting pauses until one closes.
    pub max_connections: usize,
    /// Receive buffer size (the pool's buffer size). Default 16 KiB, the request-head limit.
    pub buffer_size: usize,
    /// Free buffers the pool keeps for reuse.
    pub max_free_buffers: usize,
    /// How long accepting pauses after `EMFILE`/`ENFILE` (descriptors exhausted).
    pub accept_pause: Duration,
    /// Connections accepted per listener per loop turn before serving others again.
    pub accept_batch: usize,
    /// Keep a second slot free for each client accepted until its first request has had
    /// its loop turn: a proxy's request needs one more connection, upstream. Without it, a
    /// loop near `max_connections` gives the slots those upstream connections need to the
    /// next clients it accepts, and the requests fail with [`ConnectionLimitReached`]
    /// (issue 19). The readiness drivers read a new client's request in the turn that
    /// accepts it, so they keep a slot per client accepted in the current turn; io_uring
    /// receives it one turn later, so it keeps one per client of this turn and the last
    /// (`accept_holds` in the counters). Default off (a server that opens nothing per
    /// request); the proxy turns it on.
    pub reserve_upstream: bool,
    /// Timer resolution: deadlines fire no earlier than set and at most this much later.
    pub timer_tick: Duration,
    /// Slots of the timer wheel (a power of two). `timer_tick × timer_slots` should exceed
    /// the usual timeout: a timer further away than one rotation is revisited once per
    /// rotation, which can cost an empty wake-up.
    pub timer_slots: usize,
    /// Readiness backends: before `sendfile` sends a file's bytes, check they are in the
    /// page cache and have a thread pool read them if not, so the loop never waits for the
    /// disk (see `readiness/read_ahead.rs`). Default on; `COLDWIRE_READ_AHEAD=off` in the
    /// environment turns it off (for comparisons). The io_uring driver needs no such thing
    /// (its file splices run in the kernel's workers) and ignores it.
    pub read_ahead: bool,
}

/// Whether `COLDWIRE_READ_AHEAD` leaves read-ahead on (anything but `off`, `0`, `false`, `no`).
fn read_ahead_from_environment() -> bool {
    !std::env::var("COLDWIRE_READ_AHEAD").is_ok_and(|value| {
        matches!(
            value.trim().to_ascii_lowercase().as_str(),
            "off" | "0" | "false" | "no"
        )
    })
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            max_connections: 19_000,
            buffer_size: 16 * 1024,
            max_free_buffers: 1024,
            accept_pause: Duration::from_millis(100),
            accept_batch: 128,
            reserve_upstream: false,
            timer_tick: Duration::from_millis(50),
            timer_slots: 8192,
            read_ahead: read_ahead_from_environment(),
        }
    }
}

/// A completion-style I/O driver for one event loop (one thread). See the module doc for
/// the contract.
pub trait Driver {
    /// The backend name, for logs and reports.
    fn backend_name(&self) -> &'static str;

    /// Starts accepting on a listening socket (made non-blocking here).
    fn listen(&mut self, listener: TcpListener) -> io::Result<ListenerId>;

    /// Starts a non-blocking connection to `address` (TCP_NODELAY set). The id is valid at
    /// once: output may be queued before `Connected` arrives and is written after it. Fails
    /// at once only for local errors (no descriptors); refusals and timeouts come as
    /// `Failed`. Counts towards the connection limit. The attempt may begin only at the
    /// next [`Driver::wait`]: io_uring submits its `CONNECT` with the loop turn's other
    /// submissions.
    fn connect(&mut self, address: SocketAddr) -> io::Result<ConnectionId>;

    /// [`Driver::connect`] from the local address `source` (bound before connecting): a
    /// load generator's users each with an address of their own. A bind failure (an
    /// address not on this host) fails at once.
    fn connect_from(&mut self, address: SocketAddr, source: IpAddr) -> io::Result<ConnectionId>;

    /// Stops accepting on a listener and closes it (graceful shutdown).
    fn close_listener(&mut self, listener: ListenerId);

    /// Arms one receive on the connection. Does nothing if one is already armed.
    fn recv(&mut self, connection: ConnectionId);

    /// Arms one receive that tries the socket at once, even when the last receive drained
    /// it. For streams whose end may already be pending — a close-delimited response body,
    /// an origin that closes right after its last byte — which an edge-triggered poller
    /// reports together with the data and never again. Costs at most one `EAGAIN` more than
    /// [`Driver::recv`]. A completion driver has no such gap: there it is `recv`.
    fn recv_eager(&mut self, connection: ConnectionId);

    /// Like [`Driver::flush`], but tells the kernel more output follows at once
    /// (`MSG_MORE`), so a short tail such as a response head may be held back and leave in
    /// one segment with what follows. Call it only when a send or [`Splice::splice`] on the
    /// same connection follows right away (the next write without the hint pushes
    /// everything). A driver that cannot pass the hint on flushes as `flush` does.
    fn flush_more(&mut self, connection: ConnectionId) -> Flush;

    /// The driver's splice extension: `Self` for a backend that moves bytes between
    /// sockets inside the kernel, [`NoSplice`] for one that cannot.
    type Splicer: Splice;

    /// The splice extension, or an `Unsupported` error where the backend has none (callers
    /// then copy through user space). Statically dispatched: for a backend that splices
    /// it is `Ok(self)`, which the compiler sees through.
    fn splicer(&mut self) -> io::Result<&mut Self::Splicer>;

    /// Queues output; nothing is written until [`Driver::flush`].
    fn send(&mut self, connection: ConnectionId, chunk: Chunk);

    /// Writes queued output as far as the socket allows now.
    fn flush(&mut self, connection: ConnectionId) -> Flush;

    /// Bytes queued and not yet written.
    fn queued_bytes(&self, connection: ConnectionId) -> u64;

    /// Bytes not yet received by the peer: queued here plus written but unacknowledged in
    /// the kernel. One `ioctl`; meant for rare checks such as a stalled-write timeout, where
    /// the user-space queue alone would not move while a multi-megabyte kernel buffer
    /// drains to a slow reader.
    fn unsent_bytes(&self, connection: ConnectionId) -> u64;

    /// Sends FIN after the queued output (lingering close); receiving still works.
    fn shutdown_write(&mut self, connection: ConnectionId);

    /// Closes the connection now, dropping any queued output and its timer.
    fn close(&mut self, connection: ConnectionId);

    /// Arms (or re-arms) the connection's single timer.
    fn set_timer(&mut self, connection: ConnectionId, deadline: Instant);

    /// Disarms the connection's timer, if any.
    fn cancel_timer(&mut self, connection: ConnectionId);

    /// Waits for the next completions: blocks at most `timeout` (and never while
    /// completions are already waiting), then performs the ready operations.
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()>;

    /// The next completion, in order; `None` when the queue is empty.
    fn next_completion(&mut self) -> Option<Completion>;

    /// The loop's clock, read once per wait.
    fn now(&self) -> Instant;

    /// Returns a received buffer to the pool.
    fn recycle(&mut self, buffer: Buffer);

    /// A cleared vector from the driver's pool, for building an [`Chunk::Owned`].
    fn take_vec(&mut self) -> Vec<u8>;

    /// A snapshot of the loop's counters.
    fn counters(&self) -> LoopCounters;

    /// Moves the active-connections gauge (kept by the server, which knows what "active"
    /// means) by `delta`.
    fn adjust_active(&mut self, delta: i64);

    /// A handle other threads use to wake this loop.
    fn waker(&self) -> Waker;

    /// Whether [`Driver::submit_file`] takes file work (a driver with a ring: `--io uring`).
    fn has_file_ring(&self) -> bool;

    /// Submits file work ([`FileWork`]) as an operation on this loop's ring; its
    /// `complete` is called by a later [`Driver::wait`]. A driver without a ring hands the
    /// work back at once (`Err`): the caller performs it elsewhere (a thread).
    fn submit_file(&mut self, work: Box<dyn FileWork>) -> Result<(), Box<dyn FileWork>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_connections_is_the_limit_or_exhausted_descriptors_not_a_refusal() {
        let limit = ConnectionLimitReached::error(3);
        assert!(is_out_of_connections(&limit));
        assert!(limit.to_string().contains("--max-connections"), "{limit}");
        for code in [libc::EMFILE, libc::ENFILE] {
            assert!(is_out_of_connections(&io::Error::from_raw_os_error(code)));
        }
        for code in [libc::ECONNREFUSED, libc::ENETUNREACH] {
            assert!(!is_out_of_connections(&io::Error::from_raw_os_error(code)));
        }
        assert!(!is_out_of_connections(&io::Error::other(
            "no free connection slot"
        )));
    }
}
