//! Tests for [`super::evaluate_conditionals`], [`super::if_range_allows`] and
//! [`super::evaluate_request_range`].

use super::*;
use crate::limits::Limits;
use crate::request::{Parsed, parse_request};
use std::time::{Duration, UNIX_EPOCH};

const MODIFIED: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
const EARLIER: &str = "Sun, 06 Nov 1994 08:49:36 GMT";
const LATER: &str = "Sun, 06 Nov 1994 08:49:38 GMT";

fn validators() -> Validators {
    Validators {
        last_modified: Some(UNIX_EPOCH + Duration::from_secs(784_111_777)),
        etag: ETag::parse(b"\"v2\""),
    }
}

fn with_head<T>(
    method: &str,
    headers: &[(&str, &str)],
    check: impl FnOnce(&RequestHead<'_>) -> T,
) -> T {
    let mut input = format!("{method} /file HTTP/1.1\r\nHost: a\r\n");
    for (name, value) in headers {
        input.push_str(&format!("{name}: {value}\r\n"));
    }
    input.push_str("\r\n");
    match parse_request(input.as_bytes(), &Limits::default()) {
        Ok(Parsed::Complete { head, .. }) => check(&head),
        other => panic!("unexpected {other:?}"),
    }
}

fn precondition(method: &str, headers: &[(&str, &str)]) -> Precondition {
    with_head(method, headers, |head| {
        evaluate_conditionals(head, &validators())
    })
}

#[test]
fn no_conditionals_proceed() {
    assert_eq!(precondition("GET", &[]), Precondition::Proceed);
}

#[test]
fn if_modified_since() {
    assert_eq!(
        precondition("GET", &[("If-Modified-Since", MODIFIED)]),
        Precondition::NotModified
    );
    assert_eq!(
        precondition("HEAD", &[("If-Modified-Since", LATER)]),
        Precondition::NotModified
    );
    assert_eq!(
        precondition("GET", &[("If-Modified-Since", EARLIER)]),
        Precondition::Proceed
    );
    assert_eq!(
        precondition("POST", &[("If-Modified-Since", MODIFIED)]),
        Precondition::Proceed
    );
    assert_eq!(
        precondition("GET", &[("If-Modified-Since", "garbage")]),
        Precondition::Proceed
    );
}

#[test]
fn if_none_match() {
    let weak_list = "W/\"v1\", W/\"v2\"";
    assert_eq!(
        precondition("GET", &[("If-None-Match", weak_list)]),
        Precondition::NotModified
    );
    assert_eq!(
        precondition("GET", &[("If-None-Match", "\"v1\"")]),
        Precondition::Proceed
    );
    assert_eq!(
        precondition("GET", &[("If-None-Match", "*")]),
        Precondition::NotModified
    );
    assert_eq!(
        precondition("PUT", &[("If-None-Match", "*")]),
        Precondition::Failed
    );
    assert_eq!(
        precondition("DELETE", &[("If-None-Match", "\"v2\"")]),
        Precondition::Failed
    );
    // Split over two field lines.
    assert_eq!(
        precondition(
            "GET",
            &[("If-None-Match", "\"v0\""), ("If-None-Match", "\"v2\"")]
        ),
        Precondition::NotModified
    );
}

#[test]
fn if_none_match_takes_precedence_over_if_modified_since() {
    assert_eq!(
        precondition(
            "GET",
            &[("If-None-Match", "\"v1\""), ("If-Modified-Since", LATER)]
        ),
        Precondition::Proceed
    );
}

#[test]
fn if_match_uses_strong_comparison() {
    assert_eq!(
        precondition("PUT", &[("If-Match", "\"v2\"")]),
        Precondition::Proceed
    );
    assert_eq!(
        precondition("PUT", &[("If-Match", "\"v1\", \"v2\"")]),
        Precondition::Proceed
    );
    assert_eq!(
        precondition("PUT", &[("If-Match", "W/\"v2\"")]),
        Precondition::Failed
    );
    assert_eq!(
        precondition("GET", &[("If-Match", "\"v1\"")]),
        Precondition::Failed
    );
    assert_eq!(
        precondition("PUT", &[("If-Match", "*")]),
        Precondition::Proceed
    );
}

#[test]
fn if_unmodified_since_only_without_if_match() {
    assert_eq!(
        precondition("PUT", &[("If-Unmodified-Since", EARLIER)]),
        Precondition::Failed
    );
    assert_eq!(
        precondition("PUT", &[("If-Unmodified-Since", MODIFIED)]),
        Precondition::Proceed
    );
    assert_eq!(
        precondition(
            "PUT",
            &[("If-Match", "\"v2\""), ("If-Unmodified-Since", EARLIER)]
        ),
        Precondition::Proceed
    );
    assert_eq!(
        precondition("PUT", &[("If-Unmodified-Since", "nonsense")]),
        Precondition::Proceed
    );
}

#[test]
fn if_match_failure_beats_if_none_match() {
    assert_eq!(
        precondition(
            "GET",
            &[("If-Match", "\"v1\""), ("If-None-Match", "\"v2\"")]
        ),
        Precondition::Failed
    );
}

#[test]
fn missing_validators_never_match_tags_or_dates() {
    let none = Validators::default();
    with_head(
        "GET",
        &[("If-None-Match", "\"v2\""), ("If-Modified-Since", MODIFIED)],
        |head| {
            assert_eq!(evaluate_conditionals(head, &none), Precondition::Proceed);
        },
    );
    with_head("GET", &[("If-Modified-Since", MODIFIED)], |head| {
        assert_eq!(evaluate_conditionals(head, &none), Precondition::Proceed);
    });
}

#[test]
fn file_validators_truncate_mtime() {
    let mtime = UNIX_EPOCH + Duration::from_millis(784_111_777_900);
    let file = Validators::for_file(10, mtime);
    assert_eq!(
        file.last_modified,
        Some(UNIX_EPOCH + Duration::from_secs(784_111_777))
    );
    with_head("GET", &[("If-Modified-Since", MODIFIED)], |head| {
        assert_eq!(
            evaluate_conditionals(head, &file),
            Precondition::NotModified
        );
    });
}

#[test]
fn if_range() {
    let allows = |value: &str| {
        with_head("GET", &[("If-Range", value)], |head| {
            if_range_allows(head, &validators())
        })
    };
    assert!(with_head("GET", &[], |head| if_range_allows(
        head,
        &validators()
    )));
    assert!(allows("\"v2\""));
    assert!(!allows("\"v1\""));
    assert!(!allows("W/\"v2\""));
    assert!(allows(MODIFIED));
    assert!(!allows(LATER));
    assert!(!allows("garbage"));
}

#[test]
fn request_range_combines_method_if_range_and_range() {
    let range = |method: &str, headers: &[(&str, &str)]| {
        with_head(method, headers, |head| {
            evaluate_request_range(head, &validators(), 10)
        })
    };
    let partial = RangeOutcome::Partial {
        start: 5,
        end_inclusive: 9,
    };
    assert_eq!(range("GET", &[("Range", "bytes=5-")]), partial);
    assert_eq!(range("HEAD", &[("Range", "bytes=5-")]), RangeOutcome::Full);
    assert_eq!(range("GET", &[]), RangeOutcome::Full);
    assert_eq!(
        range("GET", &[("Range", "bytes=5-"), ("If-Range", "\"v2\"")]),
        partial
    );
    assert_eq!(
        range("GET", &[("Range", "bytes=5-"), ("If-Range", "\"v1\"")]),
        RangeOutcome::Full
    );
    assert_eq!(
        range("GET", &[("Range", "bytes=-0")]),
        RangeOutcome::Unsatisfiable
    );
}

#[test]
fn rfc9110_section_14_2_two_range_fields_are_ignored() {
    let range = |headers: &[(&str, &str)]| {
        with_head("GET", headers, |head| {
            evaluate_request_range(head, &validators(), 10)
        })
    };
    assert_eq!(
        range(&[("Range", "bytes=0-1"), ("Range", "bytes=5-")]),
        RangeOutcome::Full
    );
    assert_eq!(
        range(&[("Range", "bytes=0-1")]),
        RangeOutcome::Partial {
            start: 0,
            end_inclusive: 1
        }
    );
}
