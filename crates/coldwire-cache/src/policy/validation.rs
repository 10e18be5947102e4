//! Validation, both ways (RFC 9111 §4.3): which stored responses a `304 Not Modified`
//! freshens ([`select_for_304`], §4.3.4), whether a `HEAD` response matches a stored `GET`
//! response ([`head_matches`], §4.3.5), and a client's conditional request answered from a
//! stored response ([`client_not_modified`], RFC 9110 §13.2.2 with RFC 9111 §4.3.2).
//!
//! Invariants: a strong validator in a `304` selects only stored responses with the same
//! strong `ETag`; weaker evidence (a weak `ETag`, `Last-Modified`) selects at most one, the
//! most recent; a `304` without validators selects only the response that was asked about
//! (or the single stored one). A client's `If-None-Match` (weak comparison) always takes
//! precedence over `If-Modified-Since`, which is evaluated against `Last-Modified` only:
//! a stored response without one never answers `If-Modified-Since` with 304 on its `Date`.

use coldwire_http::etag::{list_matches, strong_match, weak_match};
use coldwire_http::{ETag, parse_http_date};

use coldwire_http::owned_fields::Fields;

/// The validators a message carries.
#[derive(Clone, Copy)]
struct Validators {
    etag: Option<ETag>,
    last_modified: Option<std::time::SystemTime>,
}

impl Validators {
    fn of(fields: &Fields) -> Validators {
        Validators {
            etag: fields.get("etag").and_then(ETag::parse),
            last_modified: fields.get("last-modified").and_then(parse_http_date),
        }
    }

    fn is_empty(&self) -> bool {
        self.etag.is_none() && self.last_modified.is_none()
    }

    fn strong_etag(&self) -> Option<ETag> {
        self.etag.filter(|etag| !etag.is_weak())
    }
}

/// RFC 9111 §4.3.4: the indices of the stored responses (`stored`, oldest first) a `304`
/// with fields `not_modified` selects for freshening. `asked` is the index of the stored
/// response whose validators the request carried, when the cache itself asked.
///
/// 1. The 304 has a strong `ETag`: every stored response with the same strong `ETag`.
/// 2. Else it has a weak `ETag` and/or `Last-Modified`: the most recent stored response
///    whose `ETag` matches weakly and whose `Last-Modified` is the same (each only when
///    the 304 has it).
/// 3. Else (no validator): the response asked about, or the only stored response. (RFC 9111
///    wants that one to lack validators as well; a 304 answering the cache's own conditional
///    request, which carried that response's validators, validates it regardless.)
pub fn select_for_304(
    stored: &[&Fields],
    not_modified: &Fields,
    asked: Option<usize>,
) -> Vec<usize> {
    let new = Validators::of(not_modified);
    if let Some(strong) = new.strong_etag() {
        return stored
            .iter()
            .enumerate()
            .filter(|(_, fields)| {
                Validators::of(fields)
                    .strong_etag()
                    .is_some_and(|etag| strong_match(etag.as_tag_ref(), strong.as_tag_ref()))
            })
            .map(|(index, _)| index)
            .collect();
    }
    if !new.is_empty() {
        return stored
            .iter()
            .enumerate()
            .rev()
            .find(|(_, fields)| {
                let old = Validators::of(fields);
                let etag_matches = match (new.etag, old.etag) {
                    (None, _) => true,
                    (Some(new), Some(old)) => weak_match(new.as_tag_ref(), old.as_tag_ref()),
                    (Some(_), None) => false,
                };
                let date_matches = new.last_modified.is_none()
                    || (old.last_modified.is_some() && old.last_modified == new.last_modified);
                etag_matches && date_matches
            })
            .map(|(index, _)| vec![index])
            .unwrap_or_default();
    }
    match asked {
        Some(index) if index < stored.len() => vec![index],
        _ if stored.len() == 1 => vec![0],
        _ => Vec::new(),
    }
}

/// RFC 9111 §4.3.5: whether a `200` answering `HEAD` (fields `head`, as received, framing
/// included) matches a stored response (`stored` fields, `stored_length` body bytes): every
/// validator the `HEAD` response carries (`ETag`, `Last-Modified`) has the same value in the
/// stored response, and its `Content-Length`, if any, is the stored body's length. A
/// matching stored response is updated with the `HEAD` response's fields; one that does
/// not match is to be considered stale.
pub fn head_matches(stored: &Fields, stored_length: u64, head: &Fields) -> bool {
    let new = Validators::of(head);
    let old = Validators::of(stored);
    let etag_matches = match (head.get("etag"), new.etag) {
        (None, _) => true,
        (Some(_), Some(new)) => old.etag.is_some_and(|old| old.as_bytes() == new.as_bytes()),
        // A malformed ETag cannot be compared: no match.
        (Some(_), None) => false,
    };
    let date_matches = match (head.get("last-modified"), new.last_modified) {
        (None, _) => true,
        (Some(_), Some(new)) => old.last_modified == Some(new),
        (Some(_), None) => false,
    };
    let length_matches = head.get("content-length").is_none_or(|length| {
        std::str::from_utf8(length)
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            == Some(stored_length)
    });
    etag_matches && date_matches && length_matches
}

/// RFC 9110 §13.2.2 / RFC 9111 §4.3.2: whether a client's conditional request is answered
/// with `304` from a stored response (`status`, `stored` fields). `values` returns the
/// request's values of a field.
///
/// `If-None-Match` takes precedence (weak comparison; `*` matches any stored response); only
/// without it does `If-Modified-Since` count, against `Last-Modified` — or, for a stored
/// response without one, its `Date` (RFC 9111 §4.3.2 SHOULD; see
/// [`client_not_modified_at`] for the time it was received when it has no `Date` either).
/// Only `2xx` stored responses are ever answered with 304; an invalid date, or one with
/// more than one member, is ignored, and so is a stored `Last-Modified` that is not a date.
pub fn client_not_modified<'r>(
    values: impl Fn(&str) -> Vec<&'r [u8]>,
    status: u16,
    stored: &Fields,
) -> bool {
    client_not_modified_at(values, status, stored, None)
}

/// [`client_not_modified`] for a stored response `received` at that time: without
/// `Last-Modified` and `Date`, `If-Modified-Since` is compared with when it was received
/// (RFC 9111 §4.3.2).
pub fn client_not_modified_at<'r>(
    values: impl Fn(&str) -> Vec<&'r [u8]>,
    status: u16,
    stored: &Fields,
    received: Option<std::time::SystemTime>,
) -> bool {
    if !(200..300).contains(&status) {
        return false;
    }
    let if_none_match = values("if-none-match");
    if !if_none_match.is_empty() {
        let etag = stored.get("etag").and_then(ETag::parse);
        return if_none_match
            .iter()
            .any(|value| list_matches(value, etag.as_ref(), false));
    }
    let since = values("if-modified-since");
    let [since] = since.as_slice() else {
        return false;
    };
    let modified = match stored.get("last-modified") {
        Some(modified) => parse_http_date(modified),
        None => stored.get("date").and_then(parse_http_date).or(received),
    };
    match (parse_http_date(since), modified) {
        (Some(since), Some(modified)) => modified <= since,
        _ => false,
    }
}

/// Whether a request carries preconditions only an origin server can evaluate
/// (`If-Match`, `If-Unmodified-Since`; RFC 9111 §4.3.2): such a request is not answered
/// from the cache.
pub fn has_origin_only_preconditions<'r>(values: impl Fn(&str) -> Vec<&'r [u8]>) -> bool {
    !values("if-match").is_empty() || !values("if-unmodified-since").is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{MONDAY, TUESDAY, fields, request};

    #[test]
    fn rfc9111_4_3_4_a_strong_etag_selects_every_response_with_it() {
        let a = fields(&[("ETag", "\"a\"")]);
        let b = fields(&[("ETag", "\"b\"")]);
        let weak_a = fields(&[("ETag", "W/\"a\"")]);
        let stored = [&a, &b, &weak_a, &a];
        assert_eq!(
            select_for_304(&stored, &fields(&[("ETag", "\"a\"")]), Some(1)),
            vec![0, 3]
        );
        assert!(
            select_for_304(&stored, &fields(&[("ETag", "\"c\"")]), Some(1)).is_empty(),
            "a mismatching strong validator selects nothing, not even the one asked about"
        );
    }

    #[test]
    fn rfc9111_4_3_4_weak_validators_select_the_most_recent_match() {
        let old = fields(&[("ETag", "W/\"a\""), ("Last-Modified", MONDAY)]);
        let newer = fields(&[("ETag", "\"a\""), ("Last-Modified", MONDAY)]);
        let other = fields(&[("Last-Modified", TUESDAY)]);
        let stored = [&old, &newer, &other];
        assert_eq!(
            select_for_304(&stored, &fields(&[("ETag", "W/\"a\"")]), None),
            vec![1]
        );
        assert_eq!(
            select_for_304(&stored, &fields(&[("Last-Modified", TUESDAY)]), Some(0)),
            vec![2]
        );
        assert!(
            select_for_304(
                &stored,
                &fields(&[("Last-Modified", "Wed, 04 Nov 2026 00:00:00 GMT")]),
                Some(0)
            )
            .is_empty()
        );
    }

    #[test]
    fn rfc9111_4_3_4_without_validators_only_the_response_asked_about_or_the_single_one() {
        let a = fields(&[("ETag", "\"a\"")]);
        let plain = fields(&[]);
        let none = fields(&[("Cache-Control", "max-age=60")]);
        assert_eq!(select_for_304(&[&a, &plain], &none, Some(1)), vec![1]);
        assert_eq!(select_for_304(&[&plain], &none, None), vec![0]);
        assert!(select_for_304(&[&a, &plain], &none, None).is_empty());
    }

    #[test]
    fn rfc9111_4_3_5_head_matches_on_validators_and_length() {
        let stored = fields(&[("ETag", "\"a\""), ("Last-Modified", MONDAY)]);
        assert!(head_matches(&stored, 10, &fields(&[("ETag", "\"a\"")])));
        assert!(head_matches(
            &stored,
            10,
            &fields(&[("Last-Modified", MONDAY), ("Content-Length", "10")])
        ));
        assert!(!head_matches(&stored, 10, &fields(&[("ETag", "\"b\"")])));
        assert!(!head_matches(&stored, 10, &fields(&[("ETag", "W/\"a\"")])));
        assert!(!head_matches(
            &stored,
            10,
            &fields(&[("Last-Modified", TUESDAY)])
        ));
        assert!(!head_matches(
            &stored,
            10,
            &fields(&[("ETag", "\"a\""), ("Content-Length", "11")])
        ));
        assert!(!head_matches(
            &fields(&[]),
            10,
            &fields(&[("ETag", "\"a\"")])
        ));
    }

    #[test]
    fn rfc9110_13_2_2_if_none_match_takes_precedence_and_compares_weakly() {
        let stored = fields(&[("ETag", "W/\"a\""), ("Last-Modified", MONDAY)]);
        assert!(client_not_modified(
            request(&[("If-None-Match", "\"a\"")]),
            200,
            &stored
        ));
        assert!(client_not_modified(
            request(&[("If-None-Match", "\"x\""), ("If-None-Match", "W/\"a\"")]),
            200,
            &stored
        ));
        assert!(client_not_modified(
            request(&[("If-None-Match", "*")]),
            200,
            &stored
        ));
        // If-None-Match does not match: If-Modified-Since is not looked at.
        assert!(!client_not_modified(
            request(&[("If-None-Match", "\"b\""), ("If-Modified-Since", TUESDAY)]),
            200,
            &stored
        ));
        assert!(!client_not_modified(
            request(&[("If-None-Match", "\"a\"")]),
            404,
            &stored
        ));
    }

    #[test]
    fn rfc9111_4_3_2_if_modified_since_is_evaluated_against_last_modified_else_date() {
        let stored = fields(&[("Last-Modified", MONDAY), ("Date", TUESDAY)]);
        assert!(client_not_modified(
            request(&[("If-Modified-Since", MONDAY)]),
            200,
            &stored
        ));
        assert!(client_not_modified(
            request(&[("If-Modified-Since", TUESDAY)]),
            200,
            &stored
        ));
        assert!(!client_not_modified(
            request(&[("If-Modified-Since", "Sun, 01 Nov 2026 00:00:00 GMT")]),
            200,
            &stored
        ));
        assert!(!client_not_modified(
            request(&[("If-Modified-Since", "not a date")]),
            200,
            &stored
        ));
        // No Last-Modified: the stored Date counts (RFC 9111 §4.3.2), else the time it
        // was received; a Last-Modified that is not a date counts as no match.
        let dated = fields(&[("Date", TUESDAY)]);
        assert!(client_not_modified(
            request(&[("If-Modified-Since", TUESDAY)]),
            200,
            &dated
        ));
        assert!(!client_not_modified(
            request(&[("If-Modified-Since", MONDAY)]),
            200,
            &dated
        ));
        let tuesday = parse_http_date(TUESDAY.as_bytes());
        let undated = fields(&[("ETag", "\"a\"")]);
        let since = request(&[("If-Modified-Since", TUESDAY)]);
        assert!(client_not_modified_at(&since, 200, &undated, tuesday));
        assert!(!client_not_modified(&since, 200, &undated));
        let garbled = fields(&[("Last-Modified", "soon"), ("Date", MONDAY)]);
        assert!(!client_not_modified(&since, 200, &garbled));
    }

    #[test]
    fn rfc9111_4_3_2_if_match_and_if_unmodified_since_are_for_the_origin() {
        assert!(has_origin_only_preconditions(request(&[(
            "If-Match", "\"a\""
        )])));
        assert!(has_origin_only_preconditions(request(&[(
            "If-Unmodified-Since",
            MONDAY
        )])));
        assert!(!has_origin_only_preconditions(request(&[(
            "If-None-Match",
            "\"a\""
        )])));
    }
}
