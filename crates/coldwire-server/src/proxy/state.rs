//! The proxy's per-connection state. Every driver slot holds either a [`Client`] (a
//! downstream connection, with at most one [`Exchange`] in flight, or a CONNECT
//! [`Tunnel`]) or an [`Origin`] (an upstream connection: busy with one client's exchange,
//! idle in the pool, or one end of a tunnel).
//!
//! Invariants: a client has at most one exchange at a time (pipelined requests wait in its
//! input and are answered in order); an exchange names its origin connection and that
//! origin names the client back, so either side's completion finds the other.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use coldwire_cache::{CacheControl, Fields, Fill, Forward, StoredResponse};
use coldwire_http::{ChunkedDecoder, ResponseFraming, Version};
use coldwire_io::ConnectionId;

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
    /// Input buffer, phase and deadlines, as for the origin server.
    pub session: Session,
    /// The client's address is outside the ACL: its first request gets 403.
    pub denied: bool,
    /// The request being forwarded, if any.
    pub exchange: Option<Exchange>,
    /// The CONNECT tunnel, once the connection became one.
    pub tunnel: Option<Tunnel>,
    /// A request body waits for the origin to accept more before reading the client again.
    pub body_blocked: bool,
    /// The current request waits for another fetch of its key until then (collapsed
    /// forwarding); its head stays in the input.
    pub collapsed_wait: Option<std::time::Instant>,
    /// While `collapsed_wait` is set: the number of the claim (the leader's fetch) the
    /// request waits for. Once another claim holds the key, that fetch ended unstored for
    /// this request, and it goes to the origin itself instead of queueing behind the next.
    pub collapsed_behind: u64,
    /// The current request's line, for the access log (only when logging).
    pub request_line: Option<Box<super::access::RequestLine>>,
}

/// How much of a request body is still to come from the client.
pub enum RequestBody {
    /// No (more) body.
    Done,
    /// This many bytes.
    Length(u64),
    /// Chunked; decoded strictly and written to the origin again in canonical form.
    Chunked(Box<ChunkedDecoder>),
}

/// What the cache does for one exchange.
pub struct CacheWork {
    /// The cache key (absolute URI), when the request may use the cache.
    pub key: Option<String>,
    /// Why the request went forward (for `Cache-Status`).
    pub forward: Forward,
    /// The stored response being revalidated, if any.
    pub stored: Option<Arc<StoredResponse>>,
    /// The request's `Cache-Control`.
    pub request_directives: CacheControl,
    /// The request's fields (for `Vary` and for client conditionals after a 304).
    pub request_fields: Fields,
    /// This exchange leads the fetch of its key (collapsed forwarding); dropped when its
    /// response turns out not storable or the exchange ends.
    pub claim: Option<coldwire_cache::Claim>,
    /// The key was marked hit-for-miss: the request went forward at once, neither leading
    /// nor waiting (`Cache-Status: …; detail=hit-for-miss`).
    pub hit_for_miss: bool,
    /// An unsafe method's target key: invalidated (with same-origin `Location` /
    /// `Content-Location`) once the origin answers 2xx or 3xx (RFC 9111 §4.4).
    pub invalidate: Option<String>,
    /// A `304` answered the revalidation and `stored` is the freshened copy now in the
    /// store (RFC 9111 §4.3.4).
    pub freshened: bool,
    /// A `304` answered the revalidation without selecting `stored` (another strong
    /// validator): the request goes again, unconditionally.
    pub refetch: bool,
}

/// One request forwarded to an origin.
pub struct Exchange {
    /// The host to resolve.
    pub host: String,
    /// The origin's port.
    pub port: u16,
    /// The resolved address.
    pub address: Option<SocketAddr>,
    /// The upstream connection, once there is one.
    pub origin: Option<ConnectionId>,
    /// The request head as sent upstream (kept to retry on a fresh connection).
    pub request: Vec<u8>,
    /// `HEAD`: the response has no body.
    pub head_only: bool,
    /// Client's request version.
    pub version: Version,
    /// The client connection stays open after this response.
    pub keep_alive: bool,
    /// Request body still to forward.
    pub body: RequestBody,
    /// The client said `TE: trailers`: a chunked response's allowed trailer fields are
    /// passed on (otherwise they are dropped).
    pub accepts_trailers: bool,
    /// The request may be retried on a fresh connection (idempotent, no body).
    pub retry_allowed: bool,
    /// Already retried once.
    pub retried: bool,
    /// The origin connection came from the pool.
    pub reused: bool,
    /// Cache work.
    pub cache: CacheWork,
    /// The response, once its head arrived.
    pub response: Option<Progress>,
    /// When the request was sent (for the response's age).
    pub request_time: SystemTime,
    /// The cache status word for the access log, once the response head is known.
    pub log_cache: &'static str,
    /// Request sent to response head received, for the access log.
    pub upstream_time: Option<std::time::Duration>,
    /// Bytes at the start of the origin's response already handled as interim (1xx)
    /// responses (forwarded or dropped), skipped when the head is parsed again.
    pub interim_skip: usize,
    /// The client has had a `100 Continue` for this request (the proxy's own, or the
    /// origin's forwarded): another is not sent.
    pub continue_sent: bool,
}

/// A response streaming from the origin to the client.
pub struct Progress {
    /// Status code.
    pub status: u16,
    /// Framing from the origin.
    pub framing: ResponseFraming,
    /// Bytes left of a `Content-Length` body.
    pub remaining: u64,
    /// Chunked decoder (a chunked body is decoded, then written to the client again in
    /// canonical form: no extensions, allowed trailers only).
    pub decoder: ChunkedDecoder,
    /// A close-delimited body is re-chunked for a keep-alive HTTP/1.1 client.
    pub rechunk: bool,
    /// A chunked body goes to an HTTP/1.0 client decoded, delimited by the close.
    pub dechunk: bool,
    /// Bytes of the current chunk whose size line the client already got (written before
    /// its data was handed to a splice), and which follow without a size line of their own.
    pub announced: u64,
    /// The origin connection may be reused once the body is complete.
    pub upstream_keep_alive: bool,
    /// The body being collected for the store, with what it will be stored with.
    pub fill: Option<(Fill, Fields)>,
    /// Body bytes sent to the client.
    pub body_bytes: u64,
    /// Whether (part of) the body is spliced next, or is being spliced.
    pub splice: SplicePlan,
    /// Bytes handed to the running splice: the rest of a `Content-Length` body, the rest
    /// of one chunk's data, or everything until the origin closes (`u64::MAX`).
    pub splice_length: u64,
}

/// The splice data path of one response body: the rest of a `Content-Length` body, each
/// long chunk's data of a chunked body (size lines and trailers pass through user space),
/// or a close-delimited body until the origin closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplicePlan {
    /// Copied through user space (for now: a chunked body may splice its next chunk).
    No,
    /// Spliced once what was queued for the client (head, bytes that came with it) is
    /// written.
    Pending,
    /// The driver is splicing `splice_length` bytes.
    Running,
}

/// A CONNECT tunnel.
pub struct Tunnel {
    /// The upstream end, once the connection is open.
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
}

#[cfg(test)]
impl Client {
    /// The connection's state, by name (for tests and debugging).
    pub fn state_name(&self) -> &'static str {
        if self.exchange.is_some() {
            "exchange"
        } else if self.tunnel.is_some() {
            "tunnel"
        } else if self.collapsed_wait.is_some() {
            "parked"
        } else if self.session.phase == crate::session::Phase::Lingering {
            "lingering"
        } else {
            "requests"
        }
    }
}
