//! Freshening stored responses in place (RFC 9111 §4.3.4, §4.3.5): a `304 Not Modified`
//! updates the stored responses its validators select, a `200` answering `HEAD` updates
//! the stored `GET` responses it matches and makes the others stale.
//!
//! Invariants: selection follows [`crate::policy::validation`]; every updated copy is handed
//! to the storage ([`Storage::refresh`](crate::storage::Storage::refresh): the disk store
//! persists the new head) and goes through the shard's insert (replacing the variant with the same `Vary` key, charged against the
//! budget, evicting as any insert does); a copy that no longer fits is not stored.

use std::sync::Arc;
use std::time::SystemTime;

use coldwire_http::owned_fields::Fields;

use super::{Store, StoredResponse};
use crate::policy::validation::{head_matches, select_for_304};

/// What a `304` or a `HEAD` response did to the stored responses of a key.
#[derive(Debug, Default)]
pub struct Freshened {
    /// Stored responses updated (merged fields, clock restarted).
    pub updated: usize,
    /// Stored responses made stale (a `HEAD` response did not match them).
    pub made_stale: usize,
    /// The updated copy of the response the cache asked about, when the `304` selected it.
    pub asked: Option<Arc<StoredResponse>>,
}

impl Store {
    /// A `304` with end-to-end fields `not_modified` arrived for `key` (RFC 9111 §4.3.4):
    /// every stored response it selects is updated. `asked` is the stored response whose
    /// validators the request carried, when the cache itself revalidated one (it counts
    /// even if it was evicted meanwhile). `times` are when the request was sent and when
    /// the `304` arrived.
    pub fn freshen_with_304(
        &self,
        key: &str,
        asked: Option<&Arc<StoredResponse>>,
        not_modified: &Fields,
        times: (SystemTime, SystemTime),
    ) -> Freshened {
        let capacity = self.index.shard_capacity();
        let mut shard = self.index.shard(key);
        let mut candidates = shard.variants(key).to_vec();
        let asked_index = asked.map(|asked| {
            candidates
                .iter()
                .position(|candidate| Arc::ptr_eq(candidate, asked))
                .unwrap_or_else(|| {
                    candidates.push(asked.clone());
                    candidates.len() - 1
                })
        });
        let fields: Vec<&Fields> = candidates
            .iter()
            .map(|candidate| &candidate.fields)
            .collect();
        let selected = select_for_304(&fields, not_modified, asked_index);
        let mut result = Freshened::default();
        let mut evicted = 0;
        for index in selected {
            let refreshed =
                Arc::new(candidates[index].refreshed_targeted(not_modified, times, &self.targets));
            if Some(index) == asked_index {
                result.asked = Some(refreshed.clone());
            }
            if self.fits(key, &refreshed) {
                self.storage.refresh(key, &refreshed, false);
                evicted += shard.insert(key.to_owned(), refreshed, capacity, &*self.storage);
                result.updated += 1;
            }
        }
        drop(shard);
        self.index.count_updates(result.updated, evicted);
        result
    }

    /// A `200` answering `HEAD` arrived for `key` (RFC 9111 §4.3.5): each stored `GET`
    /// response the request could have selected (`request` returns the request's field
    /// values, for `Vary`) is updated with `update` (the end-to-end fields) when `head` (the
    /// fields as received, `Content-Length` included) matches it, and made stale when not.
    pub fn freshen_with_head<'r>(
        &self,
        key: &str,
        request: impl Fn(&str) -> Vec<&'r [u8]>,
        head: &Fields,
        update: &Fields,
        times: (SystemTime, SystemTime),
    ) -> Freshened {
        let capacity = self.index.shard_capacity();
        let mut shard = self.index.shard(key);
        let candidates: Vec<Arc<StoredResponse>> = shard
            .variants(key)
            .iter()
            .filter(|candidate| candidate.vary.matches(&request))
            .cloned()
            .collect();
        let mut result = Freshened::default();
        let mut evicted = 0;
        for candidate in candidates {
            let matches = head_matches(&candidate.fields, candidate.body_len, head);
            let copy = if matches {
                candidate.refreshed_targeted(update, times, &self.targets)
            } else {
                candidate.made_stale()
            };
            let copy = Arc::new(copy);
            if self.fits(key, &copy) {
                self.storage.refresh(key, &copy, !matches);
                evicted += shard.insert(key.to_owned(), copy, capacity, &*self.storage);
                if matches {
                    result.updated += 1;
                } else {
                    result.made_stale += 1;
                }
            }
        }
        drop(shard);
        self.index
            .count_updates(result.updated + result.made_stale, evicted);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::cache_control::CacheControl;
    use crate::policy::vary::VaryKey;
    use crate::store::{Lookup, StoreConfig};
    use crate::test_support::{T, at, fields, request};
    use bytes::Bytes;

    fn vary_on_language(language: &'static str) -> VaryKey {
        VaryKey::new(
            &fields(&[("Vary", "Accept-Language")]),
            request(&[("Accept-Language", language)]),
        )
    }

    fn response(etag: &str, language: &'static str) -> StoredResponse {
        let mut stored = fields(&[("Cache-Control", "max-age=0"), ("Vary", "Accept-Language")]);
        stored.push("ETag", etag.as_bytes());
        StoredResponse::new(
            200,
            stored,
            vec![Bytes::from_static(b"0123456789")],
            vary_on_language(language),
            at(T),
            at(T),
        )
    }

    fn found(store: &Store, language: &'static str) -> Arc<StoredResponse> {
        match store.lookup("k", request(&[("Accept-Language", language)])) {
            Lookup::Found(found) => found,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rfc9111_4_3_4_a_304_freshens_every_variant_with_its_strong_etag() {
        let store = Store::new(StoreConfig::default());
        store.insert("k", response("\"a\"", "fr"));
        store.insert("k", response("\"a\"", "de"));
        store.insert("k", response("\"b\"", "en"));
        let asked = found(&store, "fr");
        let later = at(T + 100);
        let not_modified = fields(&[("ETag", "\"a\""), ("Cache-Control", "max-age=60")]);
        let result = store.freshen_with_304("k", Some(&asked), &not_modified, (later, later));
        assert_eq!(result.updated, 2);
        assert!(result.asked.is_some());
        let fresh = CacheControl::default();
        assert!(found(&store, "fr").is_fresh_for(later, &fresh));
        assert!(found(&store, "de").is_fresh_for(later, &fresh));
        assert!(!found(&store, "en").is_fresh_for(later, &fresh));
    }

    #[test]
    fn rfc9111_4_3_4_a_304_with_another_strong_etag_freshens_nothing() {
        let store = Store::new(StoreConfig::default());
        store.insert("k", response("\"a\"", "fr"));
        let asked = found(&store, "fr");
        let not_modified = fields(&[("ETag", "\"z\""), ("Cache-Control", "max-age=60")]);
        let result = store.freshen_with_304("k", Some(&asked), &not_modified, (at(T), at(T)));
        assert_eq!(result.updated, 0);
        assert!(result.asked.is_none());
    }

    #[test]
    fn rfc9111_4_3_5_head_updates_matching_responses_and_makes_others_stale() {
        let store = Store::new(StoreConfig::default());
        store.insert("k", response("\"a\"", "fr"));
        store.insert("k", response("\"a\"", "de"));
        let french = |name: &str| -> Vec<&'static [u8]> {
            if name == "accept-language" {
                vec![b"fr"]
            } else {
                Vec::new()
            }
        };
        let later = at(T + 100);
        let head = fields(&[
            ("ETag", "\"a\""),
            ("Content-Length", "10"),
            ("Cache-Control", "max-age=60"),
            ("X-New", "1"),
        ]);
        let update = fields(&[
            ("ETag", "\"a\""),
            ("Cache-Control", "max-age=60"),
            ("X-New", "1"),
        ]);
        let result = store.freshen_with_head("k", french, &head, &update, (later, later));
        assert_eq!((result.updated, result.made_stale), (1, 0));
        let refreshed = found(&store, "fr");
        assert!(refreshed.is_fresh_for(later, &CacheControl::default()));
        assert_eq!(refreshed.fields.get("x-new"), Some(&b"1"[..]));
        assert!(
            found(&store, "de").fields.get("x-new").is_none(),
            "only what the request could select"
        );
        // A HEAD response that differs makes the stored response stale.
        store.freshen_with_304(
            "k",
            None,
            &fields(&[("ETag", "\"a\""), ("Cache-Control", "max-age=600")]),
            (later, later),
        );
        let head = fields(&[("ETag", "\"b\""), ("Cache-Control", "max-age=60")]);
        let result = store.freshen_with_head("k", french, &head, &head, (later, later));
        assert_eq!((result.updated, result.made_stale), (0, 1));
        assert!(!found(&store, "fr").is_fresh_for(later, &CacheControl::default()));
        assert!(found(&store, "de").is_fresh_for(later, &CacheControl::default()));
    }
}
