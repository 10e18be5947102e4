//! `Cache-Control` (RFC 9111 §5.2), parsed into the directives a shared cache acts on.
//!
//! Invariants: parsing never fails — unknown directives are ignored and a malformed
//! delta-seconds argument makes the directive count as present with the most conservative
//! value (0), as RFC 9111 §1.2.2 and §4.2.1 advise; values overflowing are clamped to
//! 2^31 seconds (RFC 9111 §1.2.2). The grammar is RFC 9111 §5.2's
//! `token [ "=" ( token / quoted-string ) ]`: commas inside a quoted string do not
//! separate directives (`ext="a, max-age=9"` is one unknown directive), and there is no
//! whitespace around `=` (`max-age =9` is an unknown directive, `max-age= 9` a malformed
//! argument). A directive given twice (in one line or in several) counts by its first
//! occurrence (RFC 9111 §4.2.1). A `no-cache` or `private` qualified with field names
//! (`no-cache="Set-Cookie"`, §5.2.2.4, §5.2.2.7) restricts only those fields: the cache
//! stores the response without them ([`qualified_fields`]); it counts as the unqualified
//! directive when it names a field the cache itself reads (`Cache-Control`, `Date`,
//! `ETag`, …), which it cannot drop.

use coldwire_http::fields::trim_ows;

use crate::policy::directive_list::{directive, members, typed_argument};

/// The largest delta-seconds value a cache must handle (RFC 9111 §1.2.2).
pub const DELTA_SECONDS_MAX: u64 = 1 << 31;

/// Directives of one message's `Cache-Control` fields (all of them combined).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheControl {
    /// `max-age=N`.
    pub max_age: Option<u64>,
    /// `s-maxage=N` (responses; overrides `max-age` in a shared cache).
    pub s_maxage: Option<u64>,
    /// `no-store`.
    pub no_store: bool,
    /// `no-cache` without a field list (or with one naming a field the cache reads).
    pub no_cache: bool,
    /// `private` without a field list (or with one naming a field the cache reads): a
    /// shared cache must not store the response.
    pub private: bool,
    /// A `no-cache` or `private` with a field list: those fields are not stored
    /// ([`qualified_fields`]), the rest of the response is.
    pub qualified: bool,
    /// `public`.
    pub public: bool,
    /// `must-revalidate`.
    pub must_revalidate: bool,
    /// `proxy-revalidate`.
    pub proxy_revalidate: bool,
    /// `min-fresh=N` (requests).
    pub min_fresh: Option<u64>,
    /// `max-stale` (requests): `Some(None)` for any staleness, `Some(Some(n))` for up to n s.
    pub max_stale: Option<Option<u64>>,
    /// `only-if-cached` (requests).
    pub only_if_cached: bool,
    /// `stale-while-revalidate=N` (RFC 5861 §3, responses): for N s after going stale the
    /// response may be served while one revalidation runs in the background.
    pub stale_while_revalidate: Option<u64>,
    /// `stale-if-error=N` (RFC 5861 §4, responses and requests): for N s after going stale
    /// the response may be served when the origin fails (unreachable, 5xx).
    pub stale_if_error: Option<u64>,
    /// `must-understand` (RFC 9111 §5.2.2.3, responses): store only if the cache
    /// understands the status code's caching semantics, and then `no-store` is ignored.
    pub must_understand: bool,
}

fn delta_seconds(argument: Option<&[u8]>) -> u64 {
    let Some(argument) = argument else {
        return 0;
    };
    let digits = argument
        .strip_prefix(b"\"")
        .and_then(|inner| inner.strip_suffix(b"\""))
        .unwrap_or(argument);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return 0;
    }
    let mut value: u64 = 0;
    for &digit in digits {
        value = value
            .saturating_mul(10)
            .saturating_add(u64::from(digit - b'0'));
    }
    value.min(DELTA_SECONDS_MAX)
}

impl CacheControl {
    /// Parses every value given (one per `Cache-Control` field line).
    pub fn parse<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> CacheControl {
        CacheControl::parse_with(values, false)
    }

    /// Parses the values of a targeted field (RFC 9213), already known to be a Structured
    /// Field Dictionary: arguments of another type than their directive implies are not
    /// consumed (`max-age="60"`, `max-age=1.5`: no `max-age`), `?0` is absent, parameters
    /// are dropped (`directive_list::typed_argument`), and a repeated key counts by its last
    /// occurrence, as in any Dictionary.
    pub fn parse_targeted<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> CacheControl {
        CacheControl::parse_with(values, true)
    }

    /// Parses a request's `Cache-Control` values: as [`CacheControl::parse`], except that a
    /// `no-cache` with an argument (not defined for requests) is a plain `no-cache`, never
    /// a qualified one.
    pub fn parse_request<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> CacheControl {
        let mut directives = CacheControl::default();
        for value in values {
            for member in members(value) {
                let (name, argument) = directive(member);
                if name.eq_ignore_ascii_case(b"no-cache") {
                    directives.no_cache = true;
                } else {
                    directives.apply(name, argument);
                }
            }
        }
        directives
    }

    fn parse_with<'a>(values: impl IntoIterator<Item = &'a [u8]>, targeted: bool) -> CacheControl {
        let mut directives = CacheControl::default();
        if targeted {
            // A Structured Field Dictionary: the last value of a key wins (RFC 8941
            // §4.2.2), across lines too; a value of the wrong type still hides earlier ones.
            let all: Vec<&[u8]> = values.into_iter().flat_map(members).collect();
            let mut seen: Vec<&[u8]> = Vec::with_capacity(all.len());
            for member in all.iter().rev() {
                let (name, argument) = directive(member);
                if seen.contains(&name) {
                    continue;
                }
                seen.push(name);
                if let Some(argument) = typed_argument(name, argument) {
                    directives.apply(name, argument);
                }
            }
            return directives;
        }
        for value in values {
            for member in members(value) {
                let (name, argument) = directive(member);
                directives.apply(name, argument);
            }
        }
        directives
    }

    fn apply(&mut self, name: &[u8], argument: Option<&[u8]>) {
        let is = |directive: &str| name.eq_ignore_ascii_case(directive.as_bytes());
        if is("max-age") {
            self.max_age.get_or_insert(delta_seconds(argument));
        } else if is("s-maxage") {
            self.s_maxage.get_or_insert(delta_seconds(argument));
        } else if is("no-store") {
            self.no_store = true;
        } else if is("no-cache") {
            match argument {
                Some(names) if !names_cache_fields(names) => self.qualified = true,
                _ => self.no_cache = true,
            }
        } else if is("private") {
            match argument {
                Some(names) if !names_cache_fields(names) => self.qualified = true,
                _ => self.private = true,
            }
        } else if is("public") {
            self.public = true;
        } else if is("must-revalidate") {
            self.must_revalidate = true;
        } else if is("proxy-revalidate") {
            self.proxy_revalidate = true;
        } else if is("min-fresh") {
            self.min_fresh.get_or_insert(delta_seconds(argument));
        } else if is("max-stale") {
            self.max_stale
                .get_or_insert(argument.map(|value| delta_seconds(Some(value))));
        } else if is("only-if-cached") {
            self.only_if_cached = true;
        } else if is("stale-while-revalidate") {
            self.stale_while_revalidate
                .get_or_insert(delta_seconds(argument));
        } else if is("stale-if-error") {
            self.stale_if_error.get_or_insert(delta_seconds(argument));
        } else if is("must-understand") {
            self.must_understand = true;
        }
    }
}

/// Fields the cache reads to store, age, validate or select a response: a qualified
/// directive naming one of them counts as unqualified.
const CACHE_FIELDS: [&str; 10] = [
    "cache-control",
    "expires",
    "date",
    "age",
    "last-modified",
    "etag",
    "vary",
    "content-length",
    "content-range",
    "transfer-encoding",
];

/// The field names of a qualified directive's argument (`"a, b"` or a bare token).
fn field_names(argument: &[u8]) -> impl Iterator<Item = &[u8]> {
    let inner = argument
        .strip_prefix(b"\"")
        .and_then(|inner| inner.strip_suffix(b"\""))
        .unwrap_or(argument);
    inner
        .split(|&byte| byte == b',')
        .map(trim_ows)
        .filter(|name| !name.is_empty())
}

fn names_cache_fields(argument: &[u8]) -> bool {
    field_names(argument).any(|name| {
        CACHE_FIELDS
            .iter()
            .any(|field| name.eq_ignore_ascii_case(field.as_bytes()))
    })
}

/// The fields a shared cache must not store (RFC 9111 §5.2.2.4, §5.2.2.7): those named by
/// a qualified `no-cache` or `private` in these `Cache-Control` values (`targeted`: a
/// targeted field's, RFC 9213), lower-cased. Empty when no directive is qualified, or when
/// one names a field the cache reads (it then counts as unqualified).
pub fn qualified_fields<'a>(
    values: impl IntoIterator<Item = &'a [u8]> + Clone,
    targeted: bool,
) -> Vec<String> {
    let mut names = Vec::new();
    if !CacheControl::parse_with(values.clone(), targeted).qualified {
        return names;
    }
    for value in values {
        for member in members(value) {
            let (name, argument) = directive(member);
            let argument = if targeted {
                typed_argument(name, argument).flatten()
            } else {
                argument
            };
            let Some(argument) = argument else {
                continue;
            };
            if !(name.eq_ignore_ascii_case(b"no-cache") || name.eq_ignore_ascii_case(b"private")) {
                continue;
            }
            for field in field_names(argument) {
                let field = String::from_utf8_lossy(field).to_ascii_lowercase();
                if !names.contains(&field) {
                    names.push(field);
                }
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn common_response_directives() {
        let directives = CacheControl::parse([
            &b"public, max-age=60"[..],
            b"s-maxage=\"30\", must-revalidate",
        ]);
        assert_eq!(directives.max_age, Some(60));
        assert_eq!(directives.s_maxage, Some(30));
        assert!(directives.public && directives.must_revalidate);
        assert!(!directives.no_store);
    }

    #[test]
    fn malformed_and_huge_values_are_conservative() {
        let directives = CacheControl::parse([&b"max-age=abc, s-maxage=99999999999999999999"[..]]);
        assert_eq!(directives.max_age, Some(0));
        assert_eq!(directives.s_maxage, Some(DELTA_SECONDS_MAX));
    }

    #[test]
    fn request_directives() {
        let directives = CacheControl::parse([&b"No-Cache, max-stale, min-fresh=5"[..]]);
        assert!(directives.no_cache);
        assert_eq!(directives.max_stale, Some(None));
        assert_eq!(directives.min_fresh, Some(5));
    }

    #[test]
    fn rfc_5861_extensions() {
        let directives =
            CacheControl::parse([&b"max-age=1, stale-while-revalidate=30, stale-if-error=600"[..]]);
        assert_eq!(directives.stale_while_revalidate, Some(30));
        assert_eq!(directives.stale_if_error, Some(600));
    }

    #[test]
    fn rfc9111_5_2_quoted_strings_hide_directives() {
        let directives = CacheControl::parse([&b"ext=\"a, max-age=100, no-store\", max-age=1"[..]]);
        assert_eq!(directives.max_age, Some(1));
        assert!(!directives.no_store);
        let escaped = CacheControl::parse([&b"ext=\"q\\\", max-age=100\", max-age=2"[..]]);
        assert_eq!(escaped.max_age, Some(2));
    }

    #[test]
    fn rfc9111_5_2_no_whitespace_around_equals() {
        assert_eq!(CacheControl::parse([&b"max-age =100"[..]]).max_age, None);
        assert_eq!(CacheControl::parse([&b"max-age= 100"[..]]).max_age, Some(0));
        assert_eq!(
            CacheControl::parse([&b" max-age=100 "[..]]).max_age,
            Some(100)
        );
    }

    #[test]
    fn rfc9111_4_2_1_the_first_occurrence_counts_across_lines() {
        assert_eq!(
            CacheControl::parse([&b"max-age=1800, max-age=1"[..]]).max_age,
            Some(1800)
        );
        let lines = CacheControl::parse([&b"max-age=1"[..], b"max-age=1800, s-maxage=5"]);
        assert_eq!((lines.max_age, lines.s_maxage), (Some(1), Some(5)));
    }

    #[test]
    fn rfc9111_5_2_2_4_qualified_no_cache_and_private_name_fields() {
        let directives = CacheControl::parse([&b"no-cache=\"A, b\", private=c, max-age=5"[..]]);
        assert!(directives.qualified && !directives.no_cache && !directives.private);
        assert_eq!(
            qualified_fields([&b"no-cache=\"A, b\", max-age=5"[..], b"private=c"], false),
            ["a", "b", "c"]
        );
        assert!(qualified_fields([&b"max-age=5"[..]], false).is_empty());
        assert_eq!(
            qualified_fields([&b"private=\"A\", no-cache=?0, no-cache=b"[..]], true),
            ["a"]
        );
        // Naming a field the cache reads: the directive counts unqualified.
        let essential = CacheControl::parse([&b"no-cache=\"x, ETag\", private=\"Date\""[..]]);
        assert!(essential.no_cache && essential.private && !essential.qualified);
        assert!(qualified_fields([&b"no-cache=\"x, ETag\""[..]], false).is_empty());
    }

    #[test]
    fn a_request_no_cache_with_an_argument_is_plain_no_cache() {
        let request = CacheControl::parse_request([&b"no-cache=\"x\", max-age=5"[..]]);
        assert!(request.no_cache && !request.qualified);
        assert_eq!(request.max_age, Some(5));
    }

    #[test]
    fn rfc9213_2_1_targeted_values_of_the_wrong_type_are_not_consumed() {
        let typed =
            CacheControl::parse_targeted([&b"max-age=\"60\", s-maxage=1.5, no-store=?0"[..]]);
        assert_eq!(
            (typed.max_age, typed.s_maxage, typed.no_store),
            (None, None, false)
        );
        let typed = CacheControl::parse_targeted([&b"max-age=60;x=1, must-revalidate=?1"[..]]);
        assert_eq!(typed.max_age, Some(60));
        assert!(typed.must_revalidate);
        // Dictionary keys: the last occurrence wins, across lines too.
        let last =
            CacheControl::parse_targeted([&b"max-age=5, no-store"[..], b"max-age=60, no-store=?0"]);
        assert_eq!((last.max_age, last.no_store), (Some(60), false));
    }

    proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = CacheControl::parse([bytes.as_slice()]);
        }
    }
}
