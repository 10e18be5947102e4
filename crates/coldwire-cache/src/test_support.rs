//! Helpers shared by this crate's unit tests (compiled for tests only): fields and request
//! lookups built from `(name, value)` pairs, and invented clocks.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use coldwire_http::owned_fields::Fields;

use crate::policy::vary::VaryKey;
use crate::stored::StoredResponse;

/// A moment the tests count from (November 2023).
pub(crate) const T: u64 = 1_700_000_000;

/// Two dates a day apart, for `Last-Modified` / `Date` / `If-Modified-Since`.
pub(crate) const MONDAY: &str = "Mon, 02 Nov 2026 00:00:00 GMT";
pub(crate) const TUESDAY: &str = "Tue, 03 Nov 2026 00:00:00 GMT";

/// `seconds` after the Unix epoch.
pub(crate) fn at(seconds: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(seconds)
}

/// Fields from `(name, value)` pairs, in order.
pub(crate) fn fields(pairs: &[(&str, &str)]) -> Fields {
    let mut fields = Fields::new();
    for (name, value) in pairs {
        fields.push(name, value.as_bytes());
    }
    fields
}

/// A request's field lookup (as the store and the policy take it) over `(name, value)`
/// pairs, names compared without case.
pub(crate) fn request<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Vec<&'a [u8]> + 'a {
    move |name| {
        pairs
            .iter()
            .filter(|(field, _)| field.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_bytes())
            .collect()
    }
}

/// A request without fields.
pub(crate) fn no_fields(_: &str) -> Vec<&'static [u8]> {
    Vec::new()
}

/// A `200` fresh for 60 s, received at [`T`], with `body` bytes in memory.
pub(crate) fn response(body: usize, vary: VaryKey) -> StoredResponse {
    StoredResponse::new(
        200,
        fields(&[("Cache-Control", "max-age=60")]),
        vec![Bytes::from(vec![7u8; body])],
        vary,
        at(T),
        at(T),
    )
}
