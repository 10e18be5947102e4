//! Phase 3, cache lookup: the key of a request, and what the store says for it — a fresh
//! hit answered at once (`hit.rs`; client conditionals and ranges included), a stale hit
//! within `stale-while-revalidate` answered while one background revalidation runs
//! (`stale.rs`), partial content covering a range (`cache_range.rs`), or the request goes
//! forward with its [`CacheWork`]: the stored response to revalidate, the claim when it
//! leads a collapsed fetch, the key to invalidate after an unsafe method — or it waits for
//! another request's fetch of the key (`collapse.rs`).
//!
//! Invariants: a hit copies nothing of the request (its fields are kept only for what goes
//! forward); `If-Match` / `If-Unmodified-Since` always go to the origin; `only-if-cached`
//! never goes forward (504); a `GET` or `HEAD` with a body bypasses the store (neither
//! answered from it nor stored: the key does not hold the body).

use coldwire_cache::policy::validation::has_origin_only_preconditions;
use coldwire_cache::{CacheControl, CacheStatus, Forward, Lookup};
use coldwire_http::{Method, RequestHead, Status};
use coldwire_io::Driver;

use super::cache_range::range_for;
use super::collapse::Collapse;
use super::error::ExchangeError;
use super::exchange::CacheWork;
use super::head::cache_request_fields;
use super::hit::{FromStore, client_not_modified};
use super::route::Destination;
use super::state::{Client, Parked, Routed};
use super::worker::Worker;
use crate::output::Output;

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
#[expect(
    clippy::large_enum_variant,
    reason = "returned and matched at once, never stored: boxing `CacheWork` would cost an \
              allocation per miss for nothing"
)]
pub(super) enum CacheDecision {
    /// Answered from the store (or refused with `only-if-cached`).
    Answered(Routed),
    /// Goes to the origin with this cache work.
    Forward(CacheWork),
    /// Waits for another request's fetch of the same key (collapsed forwarding).
    Wait(Parked),
}

fn request_directives(head: &RequestHead<'_>) -> CacheControl {
    let mut directives = CacheControl::parse_request(head.header_values("cache-control"));
    if head.header("cache-control").is_none()
        && head
            .header_values("pragma")
            .any(|value| coldwire_http::fields::has_token(value, b"no-cache"))
    {
        directives.no_cache = true;
    }
    directives
}

impl<D: Driver> Worker<D> {
    /// Looks the request up: a hit is answered into `output`; otherwise the cache work for
    /// the exchange is returned, or the wait of a collapsed miss. `waited` is the earlier
    /// wait of a parked request routed again.
    pub(super) fn lookup(
        &mut self,
        client: &mut Client,
        head: &RequestHead<'_>,
        destination: &Destination<'_>,
        waited: Option<Parked>,
        output: &mut Output,
    ) -> CacheDecision {
        let Some(store) = self.store.clone() else {
            return CacheDecision::Forward(CacheWork::bypass());
        };
        let key = cache_key(destination);
        if !head.method().is_get_or_head() {
            let mut work = CacheWork::bypass();
            if !matches!(head.method(), Method::Options | Method::Trace) {
                // An unsafe method invalidates what is stored for its target once the origin
                // answers it with a non-error status (RFC 9111 §4.4, `invalidate.rs`).
                work.invalidate = Some(key);
            }
            return CacheDecision::Forward(work);
        }
        if head.body_framing().has_body() {
            // A GET or HEAD with a body ("fat GET"): the key does not hold the body, yet an
            // origin may read it, so its answer could poison the entry for every client.
            // Neither answered from the store nor stored (as a method the cache bypasses).
            return CacheDecision::Forward(CacheWork::bypass());
        }
        let directives = request_directives(head);
        let lookup = store.lookup(&key, |name| head.header_values(name).collect());
        // The request's fields are kept only for what goes forward (Vary, conditionals
        // after a 304): a hit copies nothing.
        let mut work = CacheWork::forward(Forward::UriMiss, directives);
        let values = |name: &str| head.header_values(name).collect::<Vec<_>>();
        match lookup {
            Lookup::Found(_) if has_origin_only_preconditions(values) => {
                // If-Match / If-Unmodified-Since are for the origin to evaluate (RFC 9111
                // §4.3.2): the request goes as it came, its answer may be stored.
                work.forward = Forward::Request;
            }
            Lookup::Found(stored) => {
                let fresh = stored.is_fresh_for(self.wall_clock, &directives);
                let keep_alive = head.keep_alive() && self.drain_deadline.is_none();
                let hit = |status| FromStore {
                    stored: &stored,
                    version: head.version(),
                    keep_alive,
                    head_only: head.method() == Method::Head,
                    not_modified: client_not_modified(values, &stored),
                    status,
                    range: range_for(head, &stored),
                };
                if fresh && !self.config.revalidate_always {
                    let answer = hit(CacheStatus {
                        detail: waited.map(|_| "collapsed"),
                        ..CacheStatus::hit(stored.ttl(self.wall_clock))
                    });
                    let (status, body_bytes) = self.answer_from_store(&answer, output);
                    self.http
                        .response_time
                        .record(client.session.request_elapsed(self.driver.now()));
                    self.log_answer(client, status, body_bytes, Some(answer.status.log_token()));
                    return CacheDecision::Answered(Routed::answered(keep_alive));
                }
                if !self.config.revalidate_always
                    && stored.may_serve_while_revalidating(self.wall_clock, &directives)
                {
                    let answer = hit(CacheStatus {
                        detail: Some("stale-while-revalidate"),
                        ..CacheStatus::hit(stored.ttl(self.wall_clock))
                    });
                    let (code, body_bytes) = self.answer_from_store(&answer, output);
                    self.http
                        .response_time
                        .record(client.session.request_elapsed(self.driver.now()));
                    self.log_answer(client, code, body_bytes, Some("stale"));
                    self.revalidate_in_background(&key, head, destination, &stored);
                    return CacheDecision::Answered(Routed::answered(keep_alive));
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
                    match self.collapse(client, head, &directives, &key, waited) {
                        Collapse::Lead(claim) => work.claim = Some(claim),
                        Collapse::Alone => {}
                        Collapse::HitForMiss => work.hit_for_miss = true,
                        Collapse::Wait(parked) => return CacheDecision::Wait(parked),
                    }
                }
            }
        }
        if directives.only_if_cached {
            let problem = ExchangeError::cache(Status::GATEWAY_TIMEOUT).problem(None);
            let (version, keep_alive) = (head.version(), head.keep_alive());
            let cache_status = Some(CacheStatus::forward(Forward::UriMiss));
            let routed = self.answer_problem_with(
                client,
                &problem,
                keep_alive,
                cache_status,
                version,
                output,
            );
            return CacheDecision::Answered(routed);
        }
        work.request_fields = cache_request_fields(head);
        work.key = Some(key);
        CacheDecision::Forward(work)
    }
}
