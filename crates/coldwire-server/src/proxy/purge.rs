//! `PURGE URL`: removes every stored variant of a URI from the cache. Only clients the ACL
//! allows reach this (others get the 403 every request of theirs gets); the answer is
//! `200` with the number of responses removed, or `404` when nothing was stored (or the
//! cache is off). Never forwarded to the origin.

use coldwire_http::{BodyFraming, RequestHead, Status};
use coldwire_io::Driver;

use super::lookup::cache_key;
use super::policy::TextAnswer;
use super::route::Destination;
use super::state::{Client, Routed};
use super::worker::Worker;
use crate::output::Output;

/// Whether a request is a `PURGE` (method names are case-sensitive).
pub(super) fn is_purge(head: &RequestHead<'_>) -> bool {
    head.method_str() == "PURGE"
}

impl<D: Driver> Worker<D> {
    /// Answers a `PURGE` of `destination`'s URI.
    pub(super) fn purge(
        &mut self,
        client: &mut Client,
        head: &RequestHead<'_>,
        destination: &Destination<'_>,
        output: &mut Output,
    ) -> Routed {
        let key = cache_key(destination);
        let removed = self.store.as_ref().map_or(0, |store| store.purge(&key));
        // A body would be taken for the next request: close after answering instead.
        let no_body = matches!(
            head.body_framing(),
            BodyFraming::None | BodyFraming::Length(0)
        );
        let keep_alive = head.keep_alive() && no_body && self.drain_deadline.is_none();
        let (status, text) = if removed > 0 {
            (
                Status::OK,
                format!("purged {removed} stored response(s) for {key}"),
            )
        } else if self.store.is_none() {
            (
                Status::NOT_FOUND,
                format!("nothing cached for {key}: the cache is off (--cache-bytes 0)"),
            )
        } else {
            (Status::NOT_FOUND, format!("nothing cached for {key}"))
        };
        let answer = TextAnswer {
            version: head.version(),
            status,
            keep_alive,
            text: &text,
            cache: Some("purge"),
        };
        self.answer_text(client, &answer, output)
    }
}
