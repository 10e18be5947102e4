//! The per-request context of a forwarded request: an [`Exchange`], created by the
//! upstream phase (`upstream.rs`) and carried by [`ClientState::Exchange`] through every
//! later phase until `finish.rs` or `failure.rs` ends it. Its parts follow the phases:
//! what the client asked ([`ClientRequest`]), the origin and what was sent to it
//! ([`Upstream`]), what the cache does ([`CacheWork`]), the response streaming back
//! ([`Progress`]), and what the access log will say ([`ExchangeLog`]).
//!
//! Invariants: `response` is `None` until the final response head has been answered, and
//! from then on no error answer can be sent (an error cuts the connection instead);
//! `upstream.origin` names the origin connection whose [`OriginState::Exchange`] names
//! this client.
//!
//! [`ClientState::Exchange`]: super::state::ClientState::Exchange
//! [`OriginState::Exchange`]: super::state::OriginState::Exchange

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use coldwire_cache::{CacheControl, Claim, Fields, Fill, Forward, StoredResponse};
use coldwire_http::{ChunkedDecoder, ResponseFraming, Version};
use coldwire_io::ConnectionId;

/// One request forwarded to an origin.
pub struct Exchange {
    /// What the client asked for, and how its answer is framed.
    pub request: ClientRequest,
    /// The origin and the request sent to it.
    pub upstream: Upstream,
    /// Cache work.
    pub cache: CacheWork,
    /// The response, once its final head arrived.
    pub response: Option<Progress>,
    /// What the access log will say.
    pub log: ExchangeLog,
}

/// The client's side of an exchange.
pub struct ClientRequest {
    /// Client's request version.
    pub version: Version,
    /// The client connection stays open after this response.
    pub keep_alive: bool,
    /// `HEAD`: the response has no body.
    pub head_only: bool,
    /// The client said `TE: trailers`: a chunked response's allowed trailer fields are
    /// passed on (otherwise they are dropped).
    pub accepts_trailers: bool,
    /// The client has had a `100 Continue` for this request (the proxy's own, or the
    /// origin's forwarded): another is not sent.
    pub continue_sent: bool,
    /// Request body still to forward.
    pub body: RequestBody,
    /// The body waits for the origin to accept more before the client is read again.
    pub body_blocked: bool,
}

impl ClientRequest {
    /// Whether part of the request body is still to come from the client.
    pub fn body_pending(&self) -> bool {
        !matches!(self.body, RequestBody::Done)
    }
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

/// The origin's side of an exchange.
pub struct Upstream {
    /// The host to resolve.
    pub host: String,
    /// The origin's port.
    pub port: u16,
    /// The resolved address.
    pub address: Option<SocketAddr>,
    /// The upstream connection, once there is one.
    pub origin: Option<ConnectionId>,
    /// The request head as sent upstream (kept to retry on a fresh connection).
    pub request_head: Vec<u8>,
    /// The request may be retried on a fresh connection (idempotent, no body).
    pub retry_allowed: bool,
    /// Already retried (or refetched) once.
    pub retried: bool,
    /// The origin connection came from the pool.
    pub reused: bool,
    /// When the request was sent (for the response's age).
    pub request_time: SystemTime,
    /// Bytes at the start of the origin's response already handled as interim (1xx)
    /// responses (forwarded or dropped), skipped when the head is parsed again.
    pub interim_skip: usize,
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
    pub claim: Option<Claim>,
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
    /// validator): the request went again, unconditionally.
    pub refetch: bool,
}

impl CacheWork {
    /// Cache work for a request that does not use the cache.
    pub fn bypass() -> CacheWork {
        CacheWork::forward(Forward::Bypass, CacheControl::default())
    }

    /// Cache work for a request that goes forward for `reason` (filled in by the lookup).
    pub fn forward(reason: Forward, request_directives: CacheControl) -> CacheWork {
        CacheWork {
            key: None,
            forward: reason,
            stored: None,
            request_directives,
            request_fields: Fields::new(),
            claim: None,
            hit_for_miss: false,
            invalidate: None,
            freshened: false,
            refetch: false,
        }
    }
}

/// The access log's words for an exchange.
pub struct ExchangeLog {
    /// The cache status word, once the response head is known.
    pub cache: &'static str,
    /// Request sent to response head received.
    pub upstream_time: Option<Duration>,
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
    /// The origin sent bytes that are not a valid chunked body: the response is cut at
    /// once (both connections close) rather than when the origin closes or times out.
    pub corrupt: bool,
}

impl Progress {
    /// A response whose final head has just been answered.
    pub fn new(
        status: u16,
        framing: ResponseFraming,
        upstream_keep_alive: bool,
        rechunk: bool,
        fill: Option<(Fill, Fields)>,
    ) -> Progress {
        Progress {
            status,
            framing,
            remaining: match framing {
                ResponseFraming::Length(length) => length,
                _ => 0,
            },
            decoder: ChunkedDecoder::new(),
            rechunk,
            dechunk: false,
            announced: 0,
            upstream_keep_alive,
            fill,
            body_bytes: 0,
            splice: SplicePlan::No,
            splice_length: 0,
            corrupt: false,
        }
    }
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
