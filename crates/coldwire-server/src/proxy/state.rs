//! The proxy's per-connection state. Every driver slot holds either a [`Client`] (a
//! downstream connection, in exactly one [`ClientState`]) or an [`Origin`] (an upstream
//! connection, in one [`OriginState`]).
//!
//! Two values describe a client connection, on purpose:
//! - [`ClientState`] says what the connection is doing, and so which handlers apply to its
//!   events (`client.rs` matches on it for every completion);
//! - the session's [`Phase`](crate::session::Phase) (shared with `coldwire serve`) says
//!   which deadline runs — idle, whole head, stalled write, linger — and keeps the
//!   active-connections gauge. A client in [`ClientState::Exchange`] is in phase `Idle`
//!   while the origin thinks and `Writing` while the client is slow to read, for example.
//!
//! Invariants: a client has at most one exchange at a time (pipelined requests wait in its
//! input and are answered in order); an exchange names its origin connection and that
//! origin names the client back ([`OriginState::Exchange`]), so either side's completion
//! finds the other; the same holds for a tunnel. A client in [`ClientState::Closing`] or
//! [`ClientState::Lingering`] never has its input parsed again.

use std::net::SocketAddr;
use std::time::Instant;

use coldwire_io::ConnectionId;

use super::access::RequestLine;
use super::exchange::Exchange;
use crate::session::Session;

/// One slot's occupant.
pub enum Peer {
    /// A downstream connection.
    Client(Box<Client>),
    /// An upstream connection.
    Origin(Origin),
}

/// A downstream (client) connection.
pub struct Client {
    /// Input buffer, timer phase and deadlines, as for the origin server.
    pub session: Session,
    /// The client's address is outside the ACL: its first request gets 403.
    pub denied: bool,
    /// What the connection is doing.
    pub state: ClientState,
    /// The line of the request being answered, for the access log (only when logging). It
    /// belongs to the connection, not to an exchange: hits, refusals and tunnels are logged
    /// with it too, whatever state answers them.
    pub request_line: Option<Box<RequestLine>>,
}

/// What a client connection is doing. Transitions happen in the handlers of `client.rs`
/// (per event) and at the ends of the request path's phases (`request.rs`).
///
/// ```text
///            ┌────────────── answered (hit, error, keep-alive) ─────────────┐
///            ▼                                                               │
///  accept → Requests ── forwarded ──► Exchange ── response done ────────────┤
///            │  │  ╰─── CONNECT ───► Tunnel ── both sides done → closed      │
///            │  ╰───── collapsed miss ──► Parked ── leader done / poll ──────┘
///            ╰─ answer with close ─► Closing ── written ─► Lingering → closed (or closed at once)
/// ```
#[expect(
    clippy::large_enum_variant,
    reason = "the client is boxed already; boxing the exchange too would cost an allocation \
              per forwarded request"
)]
pub enum ClientState {
    /// Between requests: waiting for one (phase `Idle`), reading a head (phase `Head`), or
    /// writing answers the proxy made itself — hits, refusals (phase `Writing`).
    Requests,
    /// One request forwarded to an origin (the per-request context).
    Exchange(Exchange),
    /// A CONNECT tunnel: connecting, then relaying both ways.
    Tunnel(Tunnel),
    /// A miss waiting for another request's fetch of its key (collapsed forwarding); its
    /// head stays unconsumed in the input and is routed again when the fetch ends.
    Parked(Parked),
    /// The last answer is being written; then the connection closes, or lingers.
    Closing {
        /// Linger (shut down writes, drain the client) rather than close at once, because
        /// unread client bytes would make the kernel reset the connection under the answer.
        linger: bool,
    },
    /// Write side shut: the client's leftovers are drained until the linger deadline.
    Lingering,
}

impl ClientState {
    /// The state's name, for tests.
    #[cfg(test)]
    pub fn name(&self) -> &'static str {
        match self {
            ClientState::Requests => "requests",
            ClientState::Exchange(_) => "exchange",
            ClientState::Tunnel(_) => "tunnel",
            ClientState::Parked(_) => "parked",
            ClientState::Closing { .. } => "closing",
            ClientState::Lingering => "lingering",
        }
    }

    /// The exchange, in [`ClientState::Exchange`].
    pub fn exchange(&self) -> Option<&Exchange> {
        match self {
            ClientState::Exchange(exchange) => Some(exchange),
            _ => None,
        }
    }

    /// The exchange, in [`ClientState::Exchange`].
    pub fn exchange_mut(&mut self) -> Option<&mut Exchange> {
        match self {
            ClientState::Exchange(exchange) => Some(exchange),
            _ => None,
        }
    }

    /// Ends the exchange: the state becomes [`ClientState::Requests`] and the exchange is
    /// returned (`None`, and no change, in any other state).
    pub fn take_exchange(&mut self) -> Option<Exchange> {
        if !matches!(self, ClientState::Exchange(_)) {
            return None;
        }
        match std::mem::replace(self, ClientState::Requests) {
            ClientState::Exchange(exchange) => Some(exchange),
            _ => None,
        }
    }

    /// The tunnel, in [`ClientState::Tunnel`].
    pub fn tunnel_mut(&mut self) -> Option<&mut Tunnel> {
        match self {
            ClientState::Tunnel(tunnel) => Some(tunnel),
            _ => None,
        }
    }

    /// Stops waiting: the state becomes [`ClientState::Requests`] and the wait is returned
    /// (`None`, and no change, in any other state).
    pub fn take_parked(&mut self) -> Option<Parked> {
        match *self {
            ClientState::Parked(parked) => {
                *self = ClientState::Requests;
                Some(parked)
            }
            _ => None,
        }
    }

    /// The upstream connection working for this client (an exchange's or a tunnel's).
    pub fn origin(&self) -> Option<ConnectionId> {
        match self {
            ClientState::Exchange(exchange) => exchange.upstream.origin,
            ClientState::Tunnel(tunnel) => tunnel.origin,
            _ => None,
        }
    }
}

/// What a request led the connection to (the outcome of one pass of the request path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routed {
    /// Answered at once (cache hit or error); go on with the next pipelined request.
    Answered,
    /// Answered, and the connection closes afterwards.
    AnsweredThenClose,
    /// Forwarded: an exchange (or tunnel) is in flight.
    InFlight,
    /// Waits for another fetch of its key ([`ClientState::Parked`]).
    Parked,
}

impl Routed {
    /// [`Routed::Answered`] for a connection kept alive, else [`Routed::AnsweredThenClose`].
    pub fn answered(keep_alive: bool) -> Routed {
        if keep_alive {
            Routed::Answered
        } else {
            Routed::AnsweredThenClose
        }
    }
}

/// A request waiting for another fetch of its key (collapsed forwarding, `collapse.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parked {
    /// It goes to the origin itself at the latest then (`--collapse-wait`).
    pub until: Instant,
    /// The number of the claim (the leader's fetch) it waits for: once another claim holds
    /// the key, that fetch ended without an answer for this request, and it goes to the
    /// origin itself instead of queueing behind the next leader.
    pub behind: u64,
}

/// A CONNECT tunnel.
pub struct Tunnel {
    /// The upstream end, once the connection is being opened.
    pub origin: Option<ConnectionId>,
    /// The port.
    pub port: u16,
    /// The client finished sending.
    pub client_done: bool,
    /// The origin finished sending.
    pub origin_done: bool,
    /// Both directions are spliced by the driver.
    pub spliced: bool,
    /// Bytes both splices had delivered at the last idle check.
    pub spliced_seen: u64,
    /// Spliced in the kernel by the BPF sockmap (`sockmap_tunnel.rs`) instead.
    pub kernel: Option<coldwire_io::sockmap::SplicedPair>,
    /// Kernel-spliced: the client's (0) / origin's (1) direction ended and waits for its
    /// bytes to be delivered before its end of stream is passed on.
    pub ending: [bool; 2],
    /// Kernel-spliced: bytes of each direction that the program handed to user space (an
    /// end of stream while the pair was half inserted) and the worker wrote to the peer.
    pub passed: [u64; 2],
}

/// What an upstream connection is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OriginState {
    /// Carrying this client's exchange.
    Exchange(ConnectionId),
    /// Idle in the pool.
    Idle,
    /// The upstream end of this client's tunnel.
    Tunnel(ConnectionId),
}

/// An upstream connection.
pub struct Origin {
    /// Its id.
    pub id: ConnectionId,
    /// The address it is connected to (the pool's key).
    pub address: SocketAddr,
    /// What it does.
    pub state: OriginState,
    /// The connect completed.
    pub connected: bool,
    /// Bytes of a response head not yet complete.
    pub head: Vec<u8>,
    /// Some response byte arrived for the current exchange.
    pub received_any: bool,
    /// A receive waits for the client to drain (armed on the client's `Sent`).
    pub waiting_for_client: bool,
    /// Request bytes the kernel still held for the origin when its timer last fired
    /// (`u64::MAX` before): fewer now means the origin is still taking the request.
    pub unsent_mark: u64,
}

impl Origin {
    /// A new connection to `address`, connecting.
    pub fn connecting(id: ConnectionId, address: SocketAddr, state: OriginState) -> Origin {
        Origin {
            id,
            address,
            state,
            connected: false,
            head: Vec::new(),
            received_any: false,
            waiting_for_client: false,
            unsent_mark: u64::MAX,
        }
    }
}
