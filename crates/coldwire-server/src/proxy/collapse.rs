//! Collapsed forwarding: concurrent misses for one cache key send one request to the
//! origin. The first miss takes the store's [`Claim`] on the key (the leader) and goes
//! forward; a miss that finds the key claimed — by an exchange of any worker — waits
//! (the follower): its request stays unconsumed in its input, and is re-routed when the
//! leader releases the claim (see "Wake-ups" below), or at the latest by its [`POLL`]
//! timer. Once the leader's response is stored, the re-routed
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
//! Hit-for-miss (Varnish's term): when a leader's response will not be stored (not
//! storable, too large for `--max-object-bytes` or the store, at its head or while its body
//! streams), the store marks the key for the response's freshness lifetime, else
//! [`coldwire_cache::HIT_FOR_MISS_DEFAULT`], at most [`coldwire_cache::HIT_FOR_MISS_MAX`];
//! until then its misses go to the origin at once, in parallel, neither claiming nor
//! waiting (`Cache-Status: …; detail=hit-for-miss`). A response that is stored clears the
//! marker. Answers that say nothing about the resource — `304`, `206`, `5xx` — and exchanges
//! that fail or are cut do not mark: followers go alone that once, later misses collapse.
//!
//! Who takes part: `GET` misses without `Range`, `Authorization`, `no-store` or
//! `no-cache` (their answers could not fill the cache for the others). Stale entries being
//! revalidated are not collapsed.
//!
//! Wake-ups: leader and followers may be on different workers. A follower registers its
//! worker with the claim ([`coldwire_cache::Store::follow`]) and is listed in the worker's
//! [`Followers`] under the claim's number; releasing the claim (stored, refused at the head,
//! failed, cut — whichever thread drops it) puts the number in the mailbox of every
//! registered worker and wakes its loop through its `Waker` (registered by the worker at
//! start); on `Completion::Woken` the worker re-routes the requests parked on the released
//! claims at once. The [`POLL`] stays as a fallback (a request still writing earlier
//! pipelined answers when woken, a claim released before the follower registered) and
//! for the `--collapse-wait` deadline; each poll costs one re-parse of the waiting request.

use std::collections::HashMap;
use std::time::Duration;

use coldwire_cache::{CacheControl, Claim, Freshness, hit_for_miss_lifetime};
use coldwire_http::RequestHead;
use coldwire_http::owned_fields::Fields;
use coldwire_io::{ConnectionId, Driver};

use super::state::{Client, ClientState, Parked};
use super::worker::{Step, Worker};
use crate::session::Phase;

/// How often a waiting request looks again.
pub(super) const POLL: Duration = Duration::from_millis(10);

/// A worker's waiting requests, by the number of the claim each waits for; entries of
/// requests that stopped waiting (routed by their poll, closed) are dropped when the claim
/// is released.
#[derive(Default)]
pub(super) struct Followers {
    by_claim: HashMap<u64, Vec<ConnectionId>>,
    /// Numbers of released claims, taken from the store (kept to reuse its allocation).
    released: Vec<u64>,
}

/// What a miss does about other fetches of its key.
pub(super) enum Collapse {
    /// Go to the origin holding the key's claim (others wait for this response).
    Lead(Claim),
    /// Go to the origin without a claim (not collapsible, or waited enough).
    Alone,
    /// Go to the origin without a claim because the key is marked hit-for-miss: its last
    /// leader's response was not storable.
    HitForMiss,
    /// Wait for the fetch that holds the claim (the client is to park so).
    Wait(Parked),
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
    /// Decides for a miss of `key`. `waited` is the earlier wait of a request parked
    /// before; when it must wait (again), the wait is returned and its poll timer armed.
    pub(super) fn collapse(
        &mut self,
        client: &mut Client,
        head: &RequestHead<'_>,
        directives: &CacheControl,
        key: &str,
        waited: Option<Parked>,
    ) -> Collapse {
        let Some(store) = self.store.as_ref() else {
            return Collapse::Alone;
        };
        if self.config.collapse_wait.is_zero() || !collapsible(head, directives) {
            return Collapse::Alone;
        }
        if store.is_hit_for_miss(key, self.wall_clock) {
            return Collapse::HitForMiss;
        }
        let now = self.driver.now();
        let parked = match (store.claim(key), waited) {
            (Some(claim), None) => return Collapse::Lead(claim),
            // The leader ended and its answer was not stored for this request: go alone.
            (Some(_released), Some(_)) => return Collapse::Alone,
            (None, Some(waited)) if now >= waited.until => return Collapse::Alone,
            // The leader this request waited for is gone; another one claimed the key
            // since: do not queue behind it.
            (None, Some(waited)) if store.claim_holder(key) != Some(waited.behind) => {
                return Collapse::Alone;
            }
            (None, Some(waited)) => waited,
            (None, None) => {
                // Registered with the claim: its release wakes this worker.
                let followed = store.follow(key, self.index);
                if let Some(number) = followed {
                    let ids = self.followers.by_claim.entry(number).or_default();
                    ids.push(client.session.id);
                }
                Parked {
                    until: now + self.config.collapse_wait,
                    behind: followed.unwrap_or(0),
                }
            }
        };
        client.session.set_deadline(&mut self.driver, now + POLL);
        Collapse::Wait(parked)
    }

    /// A leader's response will not be stored (`fields` are its head's, `None` when the
    /// body outgrew the limits mid-stream): the claim is released, so its followers go to
    /// the origin themselves, and the key is marked hit-for-miss so that later misses do
    /// too, at once — unless the answer says nothing about the resource's cacheability: a
    /// `304` or `206` (answers to the client's conditionals or range) or a `5xx` (a
    /// failing origin; parallel misses would pile onto it).
    pub(super) fn leader_not_stored(&self, claim: Claim, status: u16, fields: Option<&Fields>) {
        let Some(store) = self.store.as_ref() else {
            return;
        };
        if matches!(status, 304 | 206) || status >= 500 {
            return;
        }
        let lifetime = fields.map_or(std::time::Duration::ZERO, |fields| {
            Freshness::of_targeted(status, fields, self.wall_clock, store.targets()).lifetime
        });
        store.mark_hit_for_miss(
            claim.key(),
            self.wall_clock + hit_for_miss_lifetime(lifetime),
        );
        // Marked first, released second: a follower that re-routes finds the marker.
        drop(claim);
    }

    /// The loop was woken: routes again, at once, the requests waiting for claims that
    /// were released (instead of at their next poll). A request still writing earlier
    /// answers is left to the poll that follows its write.
    pub(super) fn wake_followers(&mut self) {
        let Some(store) = self.store.as_ref() else {
            return;
        };
        let mut released = std::mem::take(&mut self.followers.released);
        store.take_released(self.index, &mut released);
        for number in released.drain(..) {
            let Some(ids) = self.followers.by_claim.remove(&number) else {
                continue;
            };
            for id in ids {
                let Some(mut client) = self.take_client(id) else {
                    continue;
                };
                let waiting = matches!(client.state, ClientState::Parked(parked) if parked.behind == number)
                    && client.session.phase != Phase::Writing;
                let step = if waiting {
                    // Routed again at once: a hit now, or forward, or wait more.
                    self.process(&mut client)
                } else {
                    Step::Keep
                };
                self.put_client(client, step);
            }
        }
        self.followers.released = released;
    }
}
