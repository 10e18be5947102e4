//! The cache on the request path: the key of a request, the lookup (fresh hit answered at
//! once, client conditionals included; stale or `--revalidate-always` entries revalidated
//! with the stored validators), answering from a stored response (`Age`, `Cache-Status`,
//! the body's shared `Bytes` or file range without a copy), and the `304` refresh.

use coldwire_cache::policy::validation::has_origin_only_preconditions;
use coldwire_cache::{
    BodyPiece, CacheControl, CacheStatus, Forward, Lookup, Pieces, StoredResponse,
};
use coldwire_http::owned_fields::Fields;
use coldwire_http::{Method, RangeOutcome, RequestHead, Version};
use coldwire_io::{Chunk, Driver};

use super::cache_range::{add_content_range, range_for};
use super::client::{Destination, Routed};
use super::collapse::Collapse;
use super::head::{ClientFraming, ClientHead, write_client_head};
use super::state::{CacheWork, Client};
use super::worker::Worker;
use crate::output::Output;

/// Whether a client's conditionals (`If-None-Match`, else `If-Modified-Since`) are
/// satisfied by a stored response, so the answer is `304` (RFC 9110 §13.2.2, RFC 9111
/// §4.3.2; the rules are coldwire-cache's). `values` returns the request's field values.
pub(super) fn client_not_modified<'a>(
    values: impl Fn(&str) -> Vec<&'a [u8]>,
    stored: &StoredResponse,
) -> bool {
    coldwire_cache::policy::validation::client_not_modified(values, stored.status, &stored.fields)
}

/// A stored body's piece as the driver sends it: shared bytes, or a file range
/// (`sendfile`), neither copied.
fn chunk(piece: BodyPiece) -> Chunk {
    match piece {
        BodyPiece::Shared(bytes) => Chunk::Shared(bytes),
        BodyPiece::File(range) => Chunk::File {
            file: range.file,
            offset: range.offset,
            length: range.length,
        },
    }
}

/// The cache key of a request: `http://authority/path?query`, the authority lowercased.
pub(super) fn cache_key(destination: &Destination<'_>) -> String {
    let mut key =
        String::with_capacity(16 + destination.authority.len() + destination.path_and_query.len());
    key.push_str("http://");
    key.push_str(&destination.authority.to_ascii_lowercase());
    key.push_str(&destination.path_and_query);
    key
}

/// What the cache decided for a request.
// Returned and matched at once, never stored: boxing `CacheWork` would cost an allocation
// per miss for nothing.
#[allow(clippy::large_enum_variant)]
pub(super) enum CacheDecision {
    /// Answered from the store (or refused with `only-if-cached`).
    Answered(Routed),
    /// Goes to the origin with this cache work.
    Forward(CacheWork),
    /// Waits for another request's fetch of the same key (collapsed forwarding).
    Wait,
}

/// A response answered from the store.
pub(super) struct FromStore<'a> {
    pub stored: &'a StoredResponse,
    pub version: Version,
    pub keep_alive: bool,
    pub head_only: bool,
    pub not_modified: bool,
    pub status: CacheStatus,
    /// The byte range asked for (`Full` when none applies).
    pub range: RangeOutcome,
}

fn request_directives(head: &RequestHead<'_>) -> CacheControl {
    let mut directives = CacheControl::parse(head.header_values("cache-control"));
    if head.header("cache-control").is_none()
        && head
            .header_values("pragma")
            .any(|value| coldwire_http::fields::has_token(value, b"no-cache"))
    {
        directives.no_cache = true;
    }
    directives
}

fn bypass() -> CacheWork {
    CacheWork {
        key: None,
        forward: Forward::Bypass,
        stored: None,
        request_directives: CacheControl::default(),
        request_fields: Fields::new(),
        claim: None,
        hit_for_miss: false,
        invalidate: None,
        freshened: false,
        refetch: false,
    }
}

impl<D: Driver> Worker<D> {
    /// Looks the request up: a fresh hit is answered into `output`; otherwise the cache
    /// work for the exchange is returned.
    pub(super) fn try_cache(
        &mut self,
        client: &mut Client,
        head: &RequestHead<'_>,
        destination: &Destination<'_>,
        output: &mut Output,
    ) -> CacheDecision {
        let Some(store) = self.store.clone() else {
            return CacheDecision::Forward(bypass());
        };
        let key = cache_key(destination);
        if !head.method().is_get_or_head() {
            let mut work = bypass();
            if !matches!(head.method(), Method::Options | Method::Trace) {
                // An unsafe method invalidates what is stored for its target once the origin
                // answers it with a non-error status (RFC 9111 §4.4, `invalidate.rs`).
                work.invalidate = Some(key);
            }
            return CacheDecision::Forward(work);
        }
        let directives = request_directives(head);
        let lookup = store.lookup(&key, |name| head.header_values(name).collect());
        // The request's fields are kept only for what goes forward (Vary, conditionals
        // after a 304): a hit copies nothing.
        let mut work = CacheWork {
            key: None,
            forward: Forward::UriMiss,
            stored: None,
            request_directives: directives,
            request_fields: Fields::new(),
            claim: None,
            hit_for_miss: false,
            invalidate: None,
            freshened: false,
            refetch: false,
        };
        let values = |name: &str| head.header_values(name).collect::<Vec<_>>();
        match lookup {
            Lookup::Found(_) if has_origin_only_preconditions(values) => {
                // If-Match / If-Unmodified-Since are for the origin to evaluate (RFC 9111
                // §4.3.2): the request goes as it came, its answer may be stored.
                work.forward = Forward::Request;
            }
            Lookup::Found(stored) => {
                let fresh = stored.is_fresh_for(self.wall_clock, &directives);
                if fresh && !self.config.revalidate_always {
                    let answer = FromStore {
                        stored: &stored,
                        version: head.version(),
                        keep_alive: head.keep_alive() && self.drain_deadline.is_none(),
                        head_only: head.method() == Method::Head,
                        not_modified: client_not_modified(values, &stored),
                        status: CacheStatus {
                            detail: client.collapsed_wait.map(|_| "collapsed"),
                            ..CacheStatus::hit(stored.ttl(self.wall_clock))
                        },
                        range: range_for(head, &stored),
                    };
                    let keep_alive = answer.keep_alive;
                    let (status, body_bytes) = self.answer_from_store(&answer, output);
                    self.log_answer(client, status, body_bytes, Some(answer.status.log_token()));
                    return CacheDecision::Answered(if keep_alive {
                        Routed::Answered
                    } else {
                        Routed::AnsweredThenClose
                    });
                }
                if !self.config.revalidate_always
                    && stored.may_serve_while_revalidating(self.wall_clock, &directives)
                {
                    let mut status = CacheStatus::hit(stored.ttl(self.wall_clock));
                    status.detail = Some("stale-while-revalidate");
                    let answer = FromStore {
                        stored: &stored,
                        version: head.version(),
                        keep_alive: head.keep_alive() && self.drain_deadline.is_none(),
                        head_only: head.method() == Method::Head,
                        not_modified: client_not_modified(values, &stored),
                        status,
                        range: range_for(head, &stored),
                    };
                    let keep_alive = answer.keep_alive;
                    let (code, body_bytes) = self.answer_from_store(&answer, output);
                    self.log_answer(client, code, body_bytes, Some("stale"));
                    self.revalidate_in_background(&key, head, destination, &stored);
                    return CacheDecision::Answered(if keep_alive {
                        Routed::Answered
                    } else {
                        Routed::AnsweredThenClose
                    });
                }
                work.forward = if directives.no_cache {
                    Forward::Request
                } else {
                    Forward::Stale
                };
                work.stored = Some(stored);
            }
            Lookup::VaryMiss | Lookup::Miss => {
                if matches!(lookup, Lookup::VaryMiss) {
                    work.forward = Forward::VaryMiss;
                }
                if !has_origin_only_preconditions(values)
                    && let Some(answered) =
                        self.answer_from_partial(client, head, &key, &directives, output)
                {
                    return CacheDecision::Answered(answered);
                }
                if !directives.only_if_cached {
                    match self.collapse(client, head, &directives, &key) {
                        Collapse::Lead(claim) => work.claim = Some(claim),
                        Collapse::Alone => {}
                        Collapse::HitForMiss => work.hit_for_miss = true,
                        Collapse::Wait => return CacheDecision::Wait,
                    }
                }
            }
        }
        for (name, value) in head.headers() {
            work.request_fields.push(name, value);
        }
        if directives.only_if_cached {
            let status = coldwire_http::Status::GATEWAY_TIMEOUT;
            let keep_alive = head.keep_alive();
            return CacheDecision::Answered(self.answer_error(
                client,
                head.version(),
                status,
                keep_alive,
                output,
            ));
        }
        work.key = Some(key);
        CacheDecision::Forward(work)
    }

    /// Writes a response from the store into `output`; returns its status and body bytes.
    pub(super) fn answer_from_store(
        &mut self,
        answer: &FromStore<'_>,
        output: &mut Output,
    ) -> (u16, u64) {
        let stored = answer.stored;
        let range = if answer.not_modified {
            RangeOutcome::Full
        } else {
            answer.range
        };
        let (status, framing) = match range {
            _ if answer.not_modified => (304, ClientFraming::Empty(None)),
            RangeOutcome::Full => (stored.status, ClientFraming::Length(stored.body_len)),
            RangeOutcome::Partial { .. } => {
                (206, ClientFraming::Length(range.partial_len().unwrap_or(0)))
            }
            RangeOutcome::Unsatisfiable => (416, ClientFraming::Length(0)),
        };
        let head = ClientHead {
            version: answer.version,
            status,
            reason: "",
            fields: &stored.fields,
            framing,
            keep_alive: answer.keep_alive,
            age: Some(stored.age(self.wall_clock).as_secs()),
            name: &self.config.name,
            cache_status: Some(answer.status),
            date: self.date.bytes(),
            hidden: self
                .store
                .as_deref()
                .map_or(&coldwire_cache::NO_TARGETS, coldwire_cache::Store::targets),
        };
        let out = output.bytes(&mut self.driver);
        write_client_head(out, &head);
        add_content_range(out, range, stored.body_len);
        let mut body_bytes = 0;
        let pieces = match range {
            _ if answer.not_modified || answer.head_only => Pieces::default(),
            RangeOutcome::Full => stored.body.pieces(),
            RangeOutcome::Partial {
                start,
                end_inclusive,
            } => stored.body.range(start, end_inclusive),
            RangeOutcome::Unsatisfiable => Pieces::default(),
        };
        for piece in pieces {
            body_bytes += piece.len();
            output.chunk(&mut self.driver, chunk(piece));
        }
        self.http.count_response(status);
        self.http.body_bytes += body_bytes;
        (status, body_bytes)
    }

    /// A `304` answered a revalidation and freshened the stored response: answer the
    /// client from the freshened copy.
    pub(super) fn refresh_from_304(&mut self, client: &mut Client, output: &mut Output) -> bool {
        let Some(exchange) = client.exchange.as_ref() else {
            return false;
        };
        // The store was freshened when the 304's head arrived (`freshen.rs`); `stored` is
        // the freshened copy.
        let (Some(refreshed), true) = (exchange.cache.stored.clone(), exchange.cache.freshened)
        else {
            return false;
        };
        let fields = &exchange.cache.request_fields;
        let mut status = CacheStatus::forward(exchange.cache.forward);
        status.forward_status = Some(304);
        status.stored = true;
        status.ttl = Some(refreshed.ttl(self.wall_clock));
        let answer = FromStore {
            stored: &refreshed,
            version: exchange.version,
            keep_alive: exchange.keep_alive,
            head_only: exchange.head_only,
            not_modified: client_not_modified(|name| fields.values(name).collect(), &refreshed),
            status,
            // Ranges are served from fresh hits only; after a 304 the whole body goes.
            range: RangeOutcome::Full,
        };
        let (status, body_bytes) = self.answer_from_store(&answer, output);
        let upstream = self.wall_clock.duration_since(exchange.request_time).ok();
        self.log_line(client, status, body_bytes, "revalidated", upstream);
        true
    }
}
