//! Partial content in the store (RFC 9111 §3.3, §3.4): `206` pieces of a URI are kept
//! under a key of their own ([`partial_key`], so a plain lookup never finds them), combined
//! while their strong validator is the same, and turned into a complete `200` under the
//! URI's own key once they cover the whole representation.
//!
//! Invariants: a partial entry holds one representation per `Vary` key; a piece whose
//! complete length or strong validator differs from what is held replaces it; the complete
//! object made from pieces takes the newest piece's fields (without `Content-Range`) and is
//! charged, evicted and invalidated like any stored response.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::{Bytes, BytesMut};

use coldwire_http::owned_fields::Fields;

use super::{Store, StoredResponse};
use crate::index::Segments;
use crate::policy::partial::{ContentRange, combines, has_strong_validator};
use crate::policy::vary::VaryKey;

/// The key partial content of `key` is kept under (a space never occurs in a URI).
pub fn partial_key(key: &str) -> String {
    format!("{key} partial")
}

/// What [`Store::add_partial`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartialStored {
    /// Not stored (no single-part range, no strong validator, wrong length, too large).
    No,
    /// Kept as partial content.
    Partial,
    /// The pieces now cover the representation: stored whole under the URI's key.
    Complete,
}

impl Store {
    /// Stores the body of a `206` (`fields`: its end-to-end fields, `Content-Range`
    /// included) for `key`, combined with the pieces held for the same representation.
    /// `times` are when the request was sent and when the response arrived.
    pub fn add_partial(
        &self,
        key: &str,
        fields: Fields,
        vary: VaryKey,
        body: Vec<Bytes>,
        times: (SystemTime, SystemTime),
    ) -> PartialStored {
        let Some(range) = fields.get("content-range").and_then(ContentRange::parse) else {
            return PartialStored::No;
        };
        let length: u64 = body.iter().map(|piece| piece.len() as u64).sum();
        if length != range.len() || !has_strong_validator(&fields) {
            return PartialStored::No;
        }
        let bytes = join(body);
        let partial_key = partial_key(key);
        let held = self.partial_variant(&partial_key, &vary);
        let mut segments = match held {
            Some(held)
                if held.segments.as_ref().is_some_and(|segments| {
                    combines(
                        &held.fields,
                        segments.complete_len(),
                        &fields,
                        range.complete,
                    )
                }) =>
            {
                held.segments
                    .clone()
                    .unwrap_or_else(|| Segments::new(range.complete))
            }
            _ => Segments::new(range.complete),
        };
        segments.add(range.first, bytes);
        let mut fields = fields;
        fields.remove("content-range");
        if let Some(whole) = segments.complete() {
            let complete =
                StoredResponse::new_targeted(200, fields, vec![whole], vary, times, &self.targets);
            self.purge(&partial_key);
            return if self.insert(key, complete) {
                PartialStored::Complete
            } else {
                PartialStored::No
            };
        }
        let partial = StoredResponse::partial(fields, segments, vary, times, &self.targets);
        if self.insert(&partial_key, partial) {
            PartialStored::Partial
        } else {
            PartialStored::No
        }
    }

    /// The partial content held for `key` that a request (whose fields `request` returns)
    /// selects, without counting a lookup.
    pub fn lookup_partial<'r>(
        &self,
        key: &str,
        request: impl Fn(&str) -> Vec<&'r [u8]>,
    ) -> Option<Arc<StoredResponse>> {
        self.index.select(&partial_key(key), request)
    }

    fn partial_variant(&self, partial_key: &str, vary: &VaryKey) -> Option<Arc<StoredResponse>> {
        self.index
            .shard(partial_key)
            .variants(partial_key)
            .iter()
            .find(|variant| variant.vary == *vary)
            .cloned()
    }
}

fn join(body: Vec<Bytes>) -> Bytes {
    if body.len() == 1 {
        return body.into_iter().next().unwrap_or_default();
    }
    let mut joined = BytesMut::with_capacity(body.iter().map(Bytes::len).sum());
    for piece in body {
        joined.extend_from_slice(&piece);
    }
    joined.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Lookup, StoreConfig};
    use crate::test_support::{T, at, no_fields};
    use std::time::UNIX_EPOCH;

    fn piece(range: &str, etag: &str) -> Fields {
        let mut fields = Fields::new();
        fields.push("Cache-Control", b"max-age=60");
        fields.push("ETag", etag.as_bytes());
        fields.push("Content-Range", range.as_bytes());
        fields
    }

    const NOW: (SystemTime, SystemTime) = (UNIX_EPOCH, UNIX_EPOCH);

    fn times() -> (SystemTime, SystemTime) {
        (at(T), at(T))
    }

    #[test]
    fn rfc9111_3_4_pieces_with_the_same_strong_etag_combine_into_a_complete_object() {
        let store = Store::new(StoreConfig::default());
        let add = |range: &str, etag: &str, body: &'static [u8]| {
            store.add_partial(
                "k",
                piece(range, etag),
                VaryKey::default(),
                vec![Bytes::from_static(body)],
                times(),
            )
        };
        assert_eq!(
            add("bytes 0-3/10", "\"a\"", b"0123"),
            PartialStored::Partial
        );
        assert!(matches!(store.lookup("k", no_fields), Lookup::Miss));
        let partial = store.lookup_partial("k", no_fields).expect("partial");
        let segments = partial.segments.as_ref().unwrap();
        assert_eq!(segments.covering(1, 2).as_deref(), Some(&b"12"[..]));
        assert!(partial.fields.get("content-range").is_none());
        // Another representation replaces what was held.
        assert_eq!(
            add("bytes 4-9/10", "\"b\"", b"456789"),
            PartialStored::Partial
        );
        let held = store.lookup_partial("k", no_fields).unwrap();
        assert_eq!(held.segments.as_ref().unwrap().held(), 6);
        // The same one completes it.
        assert_eq!(
            add("bytes 0-3/10", "\"b\"", b"0123"),
            PartialStored::Complete
        );
        match store.lookup("k", no_fields) {
            Lookup::Found(found) => {
                assert_eq!(found.status, 200);
                assert_eq!(found.body.memory().unwrap().concat(), b"0123456789");
                assert!(found.fields.get("content-range").is_none());
            }
            other => panic!("{other:?}"),
        }
        assert!(store.lookup_partial("k", no_fields).is_none());
    }

    #[test]
    fn rfc9111_3_3_pieces_without_a_strong_validator_or_of_the_wrong_length_are_refused() {
        let store = Store::new(StoreConfig::default());
        let body = || vec![Bytes::from_static(b"0123")];
        for (fields, body) in [
            (piece("bytes 0-3/10", "W/\"a\""), body()),
            (piece("bytes 0-4/10", "\"a\""), body()),
            (piece("bytes 0-3/*", "\"a\""), body()),
        ] {
            assert_eq!(
                store.add_partial("k", fields, VaryKey::default(), body, NOW),
                PartialStored::No
            );
        }
        assert!(store.lookup_partial("k", no_fields).is_none());
    }
}
