//! Byte ranges served from the cache: a `GET` with one `Range` that hits a fresh stored
//! `200` gets `206` with `Content-Range` and just those bytes (slices of the stored
//! `Bytes`, no copy), `416` with `Content-Range: bytes */LEN` when the range is
//! unsatisfiable; `If-Range` (strong ETag or exact Last-Modified) that does not match the
//! stored response means the whole `200`. The rules are coldwire-http's
//! (`evaluate_request_range`), the same as `coldwire serve`'s for files.
//!
//! On a miss the request goes to the origin as it came, `Range` included; its `206` is
//! passed on, and stored as partial content when it is a single range of a representation
//! with a strong validator (RFC 9111 §3.3; pieces of the same representation are combined,
//! and once they cover it the whole object is stored, §3.4 — coldwire-cache's
//! `store/partial.rs`). A later `GET` whose single range one held piece covers is answered
//! from it ([`Worker::answer_from_partial`]); any other goes to the origin, and so does one
//! with `If-None-Match` / `If-Modified-Since`.

use coldwire_cache::{CacheControl, CacheStatus, StoredResponse};
use coldwire_http::range::{write_content_range, write_unsatisfied_content_range};
use coldwire_http::{
    ETag, Method, RangeOutcome, RequestHead, Validators, evaluate_request_range, parse_http_date,
};
use coldwire_io::{Chunk, Driver};

use super::head::{ClientFraming, ClientHead, write_client_head};
use super::state::{Client, Routed};
use super::worker::Worker;
use crate::output::Output;

impl<D: Driver> Worker<D> {
    /// A `GET` with one `Range` that missed the complete objects: answers it from the
    /// partial content held for `key` when that is fresh, selected by `Vary`, and one held
    /// piece covers the range (`If-Range` evaluated against the piece's validators); `None`
    /// sends the request on.
    pub(super) fn answer_from_partial(
        &mut self,
        client: &mut Client,
        head: &RequestHead<'_>,
        key: &str,
        directives: &CacheControl,
        output: &mut Output,
    ) -> Option<Routed> {
        if head.method() != Method::Get
            || head.header("range").is_none()
            || self.config.revalidate_always
        {
            return None;
        }
        let store = self.store.clone()?;
        let partial = store.lookup_partial(key, |name| head.header_values(name).collect())?;
        let values = |name: &str| head.header_values(name).collect::<Vec<_>>();
        // A conditional the pieces would answer with 304 goes on: a 304 for a range is
        // the origin's to give.
        let conditional =
            !values("if-none-match").is_empty() || !values("if-modified-since").is_empty();
        if conditional || !partial.is_fresh_for(self.wall_clock, directives) {
            return None;
        }
        let segments = partial.segments.as_ref()?;
        let complete_len = segments.complete_len();
        let validators = Validators {
            last_modified: partial
                .fields
                .get("last-modified")
                .and_then(parse_http_date),
            etag: partial.fields.get("etag").and_then(ETag::parse),
        };
        let range = evaluate_request_range(head, &validators, complete_len);
        let RangeOutcome::Partial {
            start,
            end_inclusive,
        } = range
        else {
            return None;
        };
        let bytes = segments.covering(start, end_inclusive)?;
        let keep_alive = head.keep_alive() && self.drain_deadline.is_none();
        let status = CacheStatus {
            detail: Some("partial"),
            ..CacheStatus::hit(partial.ttl(self.wall_clock))
        };
        let client_head = ClientHead {
            version: head.version(),
            status: 206,
            reason: "",
            fields: &partial.fields,
            framing: ClientFraming::Length(bytes.len() as u64),
            keep_alive,
            age: Some(partial.age(self.wall_clock).as_secs()),
            name: &self.config.name,
            cache_status: Some(status),
            date: self.date.bytes(),
            hidden: store.targets(),
        };
        let out = output.bytes(&mut self.driver);
        write_client_head(out, &client_head);
        add_content_range(out, range, complete_len);
        let body_bytes = bytes.len() as u64;
        output.chunk(&mut self.driver, Chunk::Shared(bytes));
        self.http
            .count_timed_response(206, client.session.request_elapsed(self.driver.now()));
        self.http.body_bytes += body_bytes;
        self.log_answer(client, 206, body_bytes, Some("hit"));
        Some(Routed::answered(keep_alive))
    }
}

/// The range to serve from `stored` for `head` (only `200`s are ever sliced).
pub(super) fn range_for(head: &RequestHead<'_>, stored: &StoredResponse) -> RangeOutcome {
    if stored.status != 200 {
        return RangeOutcome::Full;
    }
    let validators = Validators {
        last_modified: strong_last_modified(stored),
        etag: stored.fields.get("etag").and_then(ETag::parse),
    };
    coldwire_http::evaluate_request_range(head, &validators, stored.body_len)
}

/// The stored `Last-Modified` when it is a strong validator for a cache (RFC 9110
/// §8.8.2.2): the entry's `Date` (else the time it arrived) at least one second later.
/// A weaker one never satisfies an `If-Range` date (§13.1.5), so the range is ignored.
fn strong_last_modified(stored: &StoredResponse) -> Option<std::time::SystemTime> {
    let modified = stored
        .fields
        .get("last-modified")
        .and_then(parse_http_date)?;
    let date = stored
        .fields
        .get("date")
        .and_then(parse_http_date)
        .unwrap_or(stored.response_time);
    let second_later = date
        .duration_since(modified)
        .is_ok_and(|gap| gap >= std::time::Duration::from_secs(1));
    second_later.then_some(modified)
}

/// Inserts `Content-Range` into a complete response head written at the end of `out`
/// (before its final empty line).
pub(super) fn add_content_range(out: &mut Vec<u8>, range: RangeOutcome, complete_len: u64) {
    if !out.ends_with(b"\r\n\r\n") {
        return;
    }
    out.truncate(out.len() - 2);
    match range {
        RangeOutcome::Partial {
            start,
            end_inclusive,
        } => write_content_range(out, start, end_inclusive, complete_len),
        RangeOutcome::Unsatisfiable => write_unsatisfied_content_range(out, complete_len),
        RangeOutcome::Full => {}
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_range_goes_before_the_empty_line() {
        let mut out = b"HTTP/1.1 206 Partial Content\r\nA: b\r\n\r\n".to_vec();
        add_content_range(
            &mut out,
            RangeOutcome::Partial {
                start: 0,
                end_inclusive: 1,
            },
            10,
        );
        assert_eq!(
            out,
            b"HTTP/1.1 206 Partial Content\r\nA: b\r\nContent-Range: bytes 0-1/10\r\n\r\n"
        );
    }
}
