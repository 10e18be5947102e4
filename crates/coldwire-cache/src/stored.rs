//! [`StoredResponse`]: one complete response as the index keeps it — status, end-to-end
//! fields, the [`Body`] handle (where the storage keeps its bytes), the `Vary` key it was
//! selected by, and its freshness facts — with the age and freshness questions asked of
//! it, and the copies made when a `304` or a `HEAD` response freshens it (RFC 9111 §4.3.4,
//! §4.3.5).
//!
//! Invariants: immutable once built (the index shares it as an `Arc`; freshening makes a
//! new one that shares the body); a freshened copy takes its age from the message that
//! freshened it, never from the stored `Date`/`Age`, and keeps the stored framing fields;
//! it is charged against the memory budget for its head, its key and the body bytes it
//! keeps in memory.

use std::time::{Duration, SystemTime};

use coldwire_http::owned_fields::Fields;

use crate::index::{OBJECT_OVERHEAD, Segments};
use crate::policy::cache_control::{CacheControl, qualified_fields};
use crate::policy::freshness::{Freshness, corrected_initial_age, current_age};
use crate::policy::targeted::{NO_TARGETS, Targets};
use crate::policy::vary::VaryKey;
use crate::storage::Body;

/// A complete stored response.
#[derive(Debug)]
pub struct StoredResponse {
    /// Status code.
    pub status: u16,
    /// End-to-end header fields as received (hop-by-hop fields already removed).
    pub fields: Fields,
    /// The body: in memory (the pieces it arrived in), or where a storage keeps it.
    pub body: Body,
    /// Body length.
    pub body_len: u64,
    /// The request fields this response was selected by.
    pub vary: VaryKey,
    /// When the response (or its last 304) arrived.
    pub response_time: SystemTime,
    /// Its age when it arrived (RFC 9111 §4.2.3).
    pub initial_age: Duration,
    /// How long it stays fresh.
    pub freshness: Freshness,
    /// Partial content (RFC 9111 §3.3): the byte segments held of the representation;
    /// `body` is then empty and `body_len` counts the bytes held.
    pub segments: Option<Segments>,
}

impl StoredResponse {
    /// Builds a stored response from what arrived; the request was sent at `request_time`.
    /// Its freshness follows `Cache-Control` only (see [`StoredResponse::new_targeted`]).
    pub fn new(
        status: u16,
        fields: Fields,
        body: impl Into<Body>,
        vary: VaryKey,
        request_time: SystemTime,
        response_time: SystemTime,
    ) -> StoredResponse {
        let times = (request_time, response_time);
        StoredResponse::new_targeted(status, fields, body, vary, times, &NO_TARGETS)
    }

    /// Builds a stored response from what arrived, its freshness from the directives
    /// `targets` selects (RFC 9213); `times` are when the request was sent and when the
    /// response arrived.
    pub fn new_targeted(
        status: u16,
        fields: Fields,
        body: impl Into<Body>,
        vary: VaryKey,
        times: (SystemTime, SystemTime),
        targets: &Targets,
    ) -> StoredResponse {
        let (request_time, response_time) = times;
        let body = body.into();
        let body_len = body.len();
        let mut fields = fields;
        remove_qualified_fields(&mut fields, targets);
        StoredResponse {
            initial_age: corrected_initial_age(&fields, request_time, response_time),
            freshness: Freshness::of_targeted(status, &fields, response_time, targets),
            status,
            fields,
            body,
            body_len,
            vary,
            response_time,
            segments: None,
        }
    }

    /// A response a storage kept (read back after a restart, or written to disk before it
    /// was indexed): its age at arrival as recorded, its freshness computed again from its
    /// fields with the directives `targets` selects (none left when it was made stale).
    pub fn restored(restored: crate::storage::Restored, targets: &Targets) -> StoredResponse {
        let body_len = restored.body.len();
        let mut freshness = Freshness::of_targeted(
            restored.status,
            &restored.fields,
            restored.response_time,
            targets,
        );
        if restored.stale {
            // As `made_stale`: it must be revalidated first.
            freshness.lifetime = Duration::ZERO;
            freshness.heuristic = false;
        }
        StoredResponse {
            freshness,
            initial_age: restored.initial_age,
            status: restored.status,
            fields: restored.fields,
            body: restored.body,
            body_len,
            vary: restored.vary,
            response_time: restored.response_time,
            segments: None,
        }
    }

    /// Partial content of one representation (a `206`'s fields without `Content-Range`,
    /// and the segments held), its freshness from the directives `targets` selects.
    pub fn partial(
        fields: Fields,
        segments: Segments,
        vary: VaryKey,
        times: (SystemTime, SystemTime),
        targets: &Targets,
    ) -> StoredResponse {
        let mut response =
            StoredResponse::new_targeted(206, fields, Body::default(), vary, times, targets);
        response.body_len = segments.held();
        response.segments = Some(segments);
        response
    }

    /// Its current age.
    pub fn age(&self, now: SystemTime) -> Duration {
        current_age(self.initial_age, self.response_time, now)
    }

    /// Seconds of freshness left (negative once stale).
    pub fn ttl(&self, now: SystemTime) -> i64 {
        let lifetime = self.freshness.lifetime.as_secs() as i64;
        lifetime - self.age(now).as_secs() as i64
    }

    /// Whether it may answer a request with `request` directives at `now` without asking
    /// the origin.
    pub fn is_fresh_for(&self, now: SystemTime, request: &CacheControl) -> bool {
        self.freshness.is_fresh_for(self.age(now), request)
    }

    /// Whether it may be served stale while revalidated in the background (RFC 5861 §3).
    pub fn may_serve_while_revalidating(&self, now: SystemTime, request: &CacheControl) -> bool {
        self.freshness
            .may_serve_while_revalidating(self.age(now), request)
    }

    /// Whether it may be served because the origin failed (RFC 5861 §4).
    pub fn may_serve_on_error(&self, now: SystemTime, request: &CacheControl) -> bool {
        self.freshness.may_serve_on_error(self.age(now), request)
    }

    /// Whether it may be served, `window` at most past its freshness, when the origin
    /// cannot be reached (`--serve-stale-on-error`, RFC 9111 §4.2.4: a disconnected cache).
    pub fn may_serve_disconnected(&self, now: SystemTime, window: Duration) -> bool {
        self.freshness.may_serve_disconnected(self.age(now), window)
    }

    /// A copy with the fields of a `304 Not Modified` merged in and the clock restarted
    /// (RFC 9111 §4.3.4), for a cache that obeys `Cache-Control` only; see
    /// [`StoredResponse::refreshed_targeted`].
    pub fn refreshed(
        &self,
        not_modified: &Fields,
        request_time: SystemTime,
        response_time: SystemTime,
    ) -> StoredResponse {
        let times = (request_time, response_time);
        self.refreshed_targeted(not_modified, times, &NO_TARGETS)
    }

    /// A copy with the fields of a `304 Not Modified` or of a matching `HEAD` response
    /// merged in (RFC 9111 §3.2: every field it carries replaces the stored ones, except
    /// the framing fields `Content-Length`, `Content-Range` and `Transfer-Encoding`, and
    /// `Set-Cookie`, which is never stored) and the
    /// clock restarted: its age comes from the new message's own `Date` and `Age`, not the
    /// stored ones. The body is shared, not copied.
    pub fn refreshed_targeted(
        &self,
        update: &Fields,
        times: (SystemTime, SystemTime),
        targets: &Targets,
    ) -> StoredResponse {
        let (request_time, response_time) = times;
        let mut fields = self.fields.clone();
        // The stored Age described the old message; the new one's (if any) is merged in.
        fields.remove("age");
        fields.update_from(update);
        // A stored response never carries a cookie (`storable.rs`); a 304 must not add one
        // that every later hit would hand out.
        fields.remove("set-cookie");
        remove_qualified_fields(&mut fields, targets);
        StoredResponse {
            initial_age: corrected_initial_age(update, request_time, response_time),
            freshness: Freshness::of_targeted(self.status, &fields, response_time, targets),
            status: self.status,
            fields,
            body: self.body.clone(),
            body_len: self.body_len,
            vary: self.vary.clone(),
            response_time,
            segments: self.segments.clone(),
        }
    }

    /// A copy that is stale at once (a `HEAD` response showed it no longer matches the
    /// origin, RFC 9111 §4.3.5): the next use revalidates it.
    pub fn made_stale(&self) -> StoredResponse {
        StoredResponse {
            status: self.status,
            fields: self.fields.clone(),
            body: self.body.clone(),
            body_len: self.body_len,
            vary: self.vary.clone(),
            response_time: self.response_time,
            initial_age: self.initial_age,
            freshness: Freshness {
                lifetime: Duration::ZERO,
                heuristic: false,
                ..self.freshness
            },
            segments: self.segments.clone(),
        }
    }

    /// A copy whose body is kept as `body` instead (the same bytes elsewhere: a storage
    /// spilled it from memory to disk); everything else is the same.
    pub fn with_body(&self, body: Body) -> StoredResponse {
        StoredResponse {
            status: self.status,
            fields: self.fields.clone(),
            body,
            body_len: self.body_len,
            vary: self.vary.clone(),
            response_time: self.response_time,
            initial_age: self.initial_age,
            freshness: self.freshness,
            segments: self.segments.clone(),
        }
    }

    /// Bytes charged against the memory budget: the head, the `Vary` key, a fixed
    /// overhead, and the body when it is in memory (partial content: the bytes held).
    #[inline]
    pub fn size(&self) -> u64 {
        let body = if self.body.is_in_memory() {
            self.body_len
        } else {
            0
        };
        body + self.fields.wire_len() as u64 + self.vary.size() as u64 + OBJECT_OVERHEAD
    }
}

/// Drops the fields a qualified `no-cache` / `private` names (RFC 9111 §5.2.2.4,
/// §5.2.2.7): a shared cache stores the response without them.
fn remove_qualified_fields(fields: &mut Fields, targets: &Targets) {
    let (values, targeted) = targets.ruling_values(fields);
    let names = qualified_fields(values, targeted);
    for name in names {
        fields.remove(&name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{T, at};
    use bytes::Bytes;
    use coldwire_http::format_http_date;

    fn date(seconds: u64) -> Vec<u8> {
        format_http_date(at(seconds)).to_vec()
    }

    fn stored() -> StoredResponse {
        let mut fields = Fields::new();
        fields.push("Date", &date(T));
        fields.push("Age", b"50");
        fields.push("Cache-Control", b"max-age=60");
        fields.push("Content-Range", b"bytes 0-9/10");
        fields.push("ETag", b"\"a\"");
        let body = vec![Bytes::from_static(b"0123456789")];
        StoredResponse::new(200, fields, body, VaryKey::default(), at(T), at(T))
    }

    #[test]
    fn rfc9111_4_3_4_a_304_restarts_the_clock_from_its_own_date_and_age() {
        let stored = stored();
        assert_eq!(stored.age(at(T)), Duration::from_secs(50));
        // A 304 without Date or Age: the old Date and Age no longer count.
        let mut not_modified = Fields::new();
        not_modified.push("ETag", b"\"a\"");
        let later = at(T + 1000);
        let refreshed = stored.refreshed(&not_modified, later, later);
        assert_eq!(refreshed.age(later), Duration::ZERO);
        assert!(refreshed.is_fresh_for(later, &CacheControl::default()));
        assert!(refreshed.fields.get("age").is_none());
        // A 304 with an Age: that one counts.
        not_modified.push("Age", b"7");
        let refreshed = stored.refreshed(&not_modified, later, later);
        assert_eq!(refreshed.age(later), Duration::from_secs(7));
        assert_eq!(refreshed.fields.get("age"), Some(&b"7"[..]));
    }

    #[test]
    fn rfc9111_3_2_a_304_never_replaces_framing_fields() {
        let stored = stored();
        let mut not_modified = Fields::new();
        not_modified.push("Content-Length", b"0");
        not_modified.push("Content-Range", b"bytes */99");
        not_modified.push("Transfer-Encoding", b"chunked");
        not_modified.push("Cache-Control", b"max-age=600");
        let refreshed = stored.refreshed(&not_modified, at(T), at(T));
        assert_eq!(
            refreshed.fields.get("content-range"),
            Some(&b"bytes 0-9/10"[..])
        );
        assert!(refreshed.fields.get("content-length").is_none());
        assert!(refreshed.fields.get("transfer-encoding").is_none());
        assert_eq!(refreshed.body_len, 10);
        assert_eq!(refreshed.freshness.lifetime, Duration::from_secs(600));
    }

    #[test]
    fn a_304_never_adds_a_cookie_to_a_stored_response() {
        let mut not_modified = Fields::new();
        not_modified.push("Set-Cookie", b"session=victim");
        not_modified.push("X-New", b"1");
        let refreshed = stored().refreshed(&not_modified, at(T), at(T));
        assert!(refreshed.fields.get("set-cookie").is_none());
        assert_eq!(refreshed.fields.get("x-new"), Some(&b"1"[..]));
    }

    #[test]
    fn made_stale_is_stale_at_once() {
        let stale = stored().made_stale();
        assert!(!stale.is_fresh_for(at(T), &CacheControl::default()));
        assert_eq!(stale.body_len, 10);
    }
}
