//! Conditional requests (RFC 9110 §13): a representation's [`Validators`], the precondition
//! evaluation order of §13.2.2 ([`evaluate_conditionals`]), and `If-Range`
//! ([`if_range_allows`], [`evaluate_request_range`]).
//!
//! Invariants: evaluation assumes the target representation exists (a server answers 404
//! before asking), so `*` always matches. Dates compare at whole-second resolution. Invalid
//! date fields are ignored, as the RFC requires; malformed entity-tag lists match nothing.

use std::time::SystemTime;

use crate::date::{parse_http_date, truncate_to_seconds};
use crate::etag::{ETag, list_matches, strong_match};
use crate::fields::trim_ows;
use crate::method::Method;
use crate::range::{RangeOutcome, evaluate_range};
use crate::request::{RequestHead, field_flags};

/// The validators of the selected representation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Validators {
    /// Last modification time, truncated to whole seconds (see
    /// [`truncate_to_seconds`]); `None` when unknown.
    pub last_modified: Option<SystemTime>,
    /// The current entity tag, if any.
    pub etag: Option<ETag>,
}

impl Validators {
    /// Validators for a static file: `Last-Modified` = mtime truncated to seconds, and the
    /// nginx-style strong tag from [`ETag::from_size_and_mtime`].
    pub fn for_file(size: u64, mtime: SystemTime) -> Validators {
        Validators {
            last_modified: Some(truncate_to_seconds(mtime)),
            etag: Some(ETag::from_size_and_mtime(size, mtime)),
        }
    }
}

/// What the preconditions of a request say to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// No precondition failed: process the request normally.
    Proceed,
    /// Answer `304 Not Modified` (GET/HEAD whose cached copy is current).
    NotModified,
    /// Answer `412 Precondition Failed`.
    Failed,
}

/// Evaluates `If-Match`, `If-Unmodified-Since`, `If-None-Match` and `If-Modified-Since` in the
/// order of RFC 9110 §13.2.2:
///
/// 1. `If-Match` (strong comparison; any field value matching suffices) → `Failed` if none
///    matches. Only when absent: `If-Unmodified-Since` → `Failed` if modified after it.
/// 2. `If-None-Match` (weak comparison) → on a match, `NotModified` for GET/HEAD and `Failed`
///    otherwise. Only when absent, and only for GET/HEAD: `If-Modified-Since` → `NotModified`
///    if `last_modified <= date`.
/// 3. Otherwise `Proceed`.
///
/// Date fields that do not parse, or that the representation has no date to compare with,
/// are ignored.
pub fn evaluate_conditionals(request: &RequestHead<'_>, validators: &Validators) -> Precondition {
    if !request.has_any_field(field_flags::PRECONDITIONS) {
        return Precondition::Proceed;
    }
    let current_etag = validators.etag.as_ref();
    let last_modified = validators.last_modified.map(truncate_to_seconds);

    let mut if_match_seen = false;
    let mut if_match_matched = false;
    for value in request.header_values("if-match") {
        if_match_seen = true;
        if_match_matched |= list_matches(value, current_etag, true);
    }
    if if_match_seen {
        if !if_match_matched {
            return Precondition::Failed;
        }
    } else if let (Some(since), Some(modified)) = (
        request
            .header("if-unmodified-since")
            .and_then(parse_http_date),
        last_modified,
    ) && modified > since
    {
        return Precondition::Failed;
    }

    let is_get_or_head = request.method().is_get_or_head();
    let mut if_none_match_seen = false;
    let mut if_none_match_matched = false;
    for value in request.header_values("if-none-match") {
        if_none_match_seen = true;
        if_none_match_matched |= list_matches(value, current_etag, false);
    }
    if if_none_match_seen {
        if if_none_match_matched {
            return if is_get_or_head {
                Precondition::NotModified
            } else {
                Precondition::Failed
            };
        }
    } else if is_get_or_head
        && let (Some(since), Some(modified)) = (
            request
                .header("if-modified-since")
                .and_then(parse_http_date),
            last_modified,
        )
        && modified <= since
    {
        return Precondition::NotModified;
    }
    Precondition::Proceed
}

/// Whether `If-Range` lets a `Range` header apply (RFC 9110 §13.1.5). True when there is no
/// `If-Range`. An entity-tag value must strongly match the current tag (weak tags never do);
/// a date value must equal `last_modified` exactly. Anything else (including garbage) is
/// false, meaning: ignore `Range` and send the full representation.
pub fn if_range_allows(request: &RequestHead<'_>, validators: &Validators) -> bool {
    if !request.has_any_field(field_flags::IF_RANGE) {
        return true;
    }
    let Some(value) = request.header("if-range") else {
        return true;
    };
    let value = trim_ows(value);
    if value.starts_with(b"\"") || value.starts_with(b"W/") {
        return match (ETag::parse(value), validators.etag.as_ref()) {
            (Some(requested), Some(current)) => {
                strong_match(requested.as_tag_ref(), current.as_tag_ref())
            }
            _ => false,
        };
    }
    match (parse_http_date(value), validators.last_modified) {
        (Some(date), Some(modified)) => truncate_to_seconds(modified) == date,
        _ => false,
    }
}

/// The range to serve for `request`: `Range` applies only to GET (RFC 9110 §14.2), only
/// when [`if_range_allows`], and only when there is a single `Range` field; otherwise
/// [`RangeOutcome::Full`]. See
/// [`evaluate_range`] for the `Range` rules. Call this after
/// [`evaluate_conditionals`] returned [`Precondition::Proceed`].
pub fn evaluate_request_range(
    request: &RequestHead<'_>,
    validators: &Validators,
    representation_len: u64,
) -> RangeOutcome {
    if request.method() != Method::Get || !request.has_any_field(field_flags::RANGE) {
        return RangeOutcome::Full;
    }
    let mut ranges = request.header_values("range");
    let Some(range) = ranges.next() else {
        return RangeOutcome::Full;
    };
    // `Range` is not a list: two fields are invalid, and a server may ignore `Range`
    // (RFC 9110 §14.2) — rather than pick one that another server would not.
    if ranges.next().is_some() {
        return RangeOutcome::Full;
    }
    if !if_range_allows(request, validators) {
        return RangeOutcome::Full;
    }
    evaluate_range(Some(range), representation_len)
}

#[cfg(test)]
#[path = "conditional_tests.rs"]
mod tests;
