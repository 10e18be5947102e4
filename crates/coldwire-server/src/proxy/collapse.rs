//! Collapsed forwarding: concurrent misses for one cache key send one request to the
//! origin. The first miss takes the store's [`Claim`] on the key (the leader) and goes
//! forward; a miss that finds the key claimed — by an exchange of any worker — waits
//! (the follower): its request stays unconsumed in its input, and every
//! [`POLL`] its timer re-routes it. Once the leader's response is stored, the re-routed
//! request is a hit (`Cache-Status: …; hit; …; detail=collapsed`). The leader releases the
//! claim as soon as its response turns out not to be storable (at its head), or when its
//! exchange ends in any way (stored, failed, cut): a follower that then still misses goes
//! to the origin itself, without claiming, so followers of an uncacheable response go in
//! parallel rather than one after another. A follower waits for ONE leader — the claim it
//! found (claims are numbered): if another claim holds the key when it looks again, the
//! fetch it waited for ended without an answer for it, and it goes to the origin itself
//! rather than queueing behind the next leader (under steady load the key is almost always
//! claimed, and waiting for "no claim" starved followers for up to `--collapse-wait`: a
//! convoy with p99 near a second at 1,200 requests/s). A follower waits at most
//! `--collapse-wait`; then it goes to the origin itself.
//!
//! Who takes part: `GET` misses without `Range`, `Authorization`, `no-store` or
//! `no-cache` (their answers could not fill the cache for the others). Stale entries being
//! revalidated are not collapsed.
//!
//! Polling (not a wake-up from the leader) because leader and followers may be on
//! different workers; the cost is one re-parse per waiting request per poll.

use std::time::{Duration, Instant};

use coldwire_cache::{CacheControl, Claim};
use coldwire_http::RequestHead;
use coldwire_io::Driver;

use super::state::Client;
use super::worker::{Step, Worker};

/// How often a waiting request looks again.
pub(super) const POLL: Duration = Duration::from_millis(10);

/// What a miss does about other fetches of its key.
pub(super) enum Collapse {
    /// Go to the origin holding the key's claim (others wait for this response).
    Lead(Claim),
    /// Go to the origin without a claim (not collapsible, or waited enough).
    Alone,
    /// Wait for the fetch that holds the claim.
    Wait,
}

/// Whether a request may lead or follow: its answer could fill the cache for everyone.
fn collapsible(head: &RequestHead<'_>, directives: &CacheControl) -> bool {
    head.method() == coldwire_http::Method::Get
        && head.header("range").is_none()
        && head.header("authorization").is_none()
        && !directives.no_store
        && !directives.no_cache
}

impl<D: Driver> Worker<D> {
    /// Decides for a miss of `key`; when it must wait, the client is parked.
    pub(super) fn collapse(
        &mut self,
        client: &mut Client,
        head: &RequestHead<'_>,
        directives: &CacheControl,
        key: &str,
    ) -> Collapse {
        let Some(store) = self.store.as_ref() else {
            return Collapse::Alone;
        };
        if self.config.collapse_wait.is_zero() || !collapsible(head, directives) {
            return Collapse::Alone;
        }
        let now = self.driver.now();
        match (store.claim(key), client.collapsed_wait) {
            (Some(claim), None) => Collapse::Lead(claim),
            // The leader ended and its answer was not stored for this request: go alone.
            (Some(_released), Some(_)) => Collapse::Alone,
            (None, waiting) if waited_enough(waiting, now) => Collapse::Alone,
            (None, waiting) => {
                let holder = store.claim_holder(key);
                match waiting {
                    // The leader this request waited for is gone; another one claimed the
                    // key since: do not queue behind it.
                    Some(_) if holder != Some(client.collapsed_behind) => {
                        return Collapse::Alone;
                    }
                    Some(_) => {}
                    None => client.collapsed_behind = holder.unwrap_or(0),
                }
                let deadline = waiting.unwrap_or(now + self.config.collapse_wait);
                client.collapsed_wait = Some(deadline);
                client.session.set_deadline(&mut self.driver, now + POLL);
                Collapse::Wait
            }
        }
    }

    /// A waiting request's poll: route it again (a hit now, or forward, or wait more).
    pub(super) fn collapsed_poll(&mut self, client: &mut Client) -> Step {
        self.process(client)
    }
}

/// Whether a wait that ends at `deadline` is over at `now`.
pub(super) fn waited_enough(deadline: Option<Instant>, now: Instant) -> bool {
    deadline.is_some_and(|deadline| now >= deadline)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_ends_at_its_deadline() {
        let now = Instant::now();
        assert!(!waited_enough(None, now));
        assert!(!waited_enough(Some(now + Duration::from_secs(1)), now));
        assert!(waited_enough(Some(now), now));
    }
}
