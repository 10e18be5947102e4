//! For how long a stored response is fresh ([`Freshness`], RFC 9111 §4.2.1–4.2.2) and how
//! old it is ([`current_age`], §4.2.3). What may be stored at all is in
//! [`crate::policy::storable`].
//!
//! Invariants: every time is passed in by the caller; clock skew never makes an age
//! negative (ages saturate at 0); the heuristic lifetime (10 % of the time since
//! `Last-Modified`, at most one day) applies only to statuses that are heuristically
//! cacheable, or to a response marked `public` (RFC 9111 §5.2.2.9), and only when the response has no explicit expiration; an `Age` field counts
//! by its first member only and a malformed one counts as absent (§5.1); an invalid
//! `Expires` means already expired (§5.3).

use std::time::{Duration, SystemTime};

use coldwire_http::parse_http_date;

use crate::policy::cache_control::{CacheControl, DELTA_SECONDS_MAX};
use crate::policy::storable::is_heuristically_cacheable;
use crate::policy::targeted::{NO_TARGETS, Targets};
use coldwire_http::owned_fields::Fields;

/// Upper bound of a heuristic freshness lifetime.
pub const HEURISTIC_MAX: Duration = Duration::from_secs(24 * 3600);

/// The freshness facts of a stored response, computed once when it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Freshness {
    /// How long the response is fresh for, counted from its corrected initial age of 0.
    pub lifetime: Duration,
    /// The lifetime came from the `Last-Modified` heuristic.
    pub heuristic: bool,
    /// `no-cache`: every use must be revalidated first.
    pub no_cache: bool,
    /// `must-revalidate` / `proxy-revalidate` / `s-maxage`: never serve it stale.
    pub must_revalidate: bool,
    /// `stale-while-revalidate` (RFC 5861 §3): how long after going stale it may be served
    /// while a background revalidation runs.
    pub stale_while_revalidate: Duration,
    /// `stale-if-error` (RFC 5861 §4): how long after going stale it may be served when
    /// the origin fails.
    pub stale_if_error: Duration,
}

impl Freshness {
    /// Freshness of a response with `status` and fields, received at `response_time`, for
    /// a cache that obeys only `Cache-Control`.
    pub fn of(status: u16, response: &Fields, response_time: SystemTime) -> Freshness {
        Freshness::of_targeted(status, response, response_time, &NO_TARGETS)
    }

    /// Freshness of a response with `status` and fields, received at `response_time`, for
    /// a cache whose directives come from `targets` (RFC 9213: a targeted field, when one
    /// rules, replaces `Cache-Control` and `Expires`).
    pub fn of_targeted(
        status: u16,
        response: &Fields,
        response_time: SystemTime,
        targets: &Targets,
    ) -> Freshness {
        let ruling = targets.directives(response);
        let directives = ruling.control;
        let expires = if ruling.targeted {
            None
        } else {
            response.get("expires")
        };
        let date = response
            .get("date")
            .and_then(parse_http_date)
            .unwrap_or(response_time);
        let mut heuristic = false;
        let lifetime = if let Some(seconds) = directives.s_maxage.or(directives.max_age) {
            Duration::from_secs(seconds)
        } else if let Some(expires) = expires {
            // An invalid Expires (e.g. "0") means already expired (RFC 9111 §5.3).
            parse_http_date(expires)
                .and_then(|expires| expires.duration_since(date).ok())
                .unwrap_or(Duration::ZERO)
        } else if (is_heuristically_cacheable(status) || directives.public)
            && let Some(modified) = response.get("last-modified").and_then(parse_http_date)
        {
            heuristic = true;
            (date.duration_since(modified).unwrap_or(Duration::ZERO) / 10).min(HEURISTIC_MAX)
        } else {
            Duration::ZERO
        };
        Freshness {
            lifetime,
            heuristic,
            no_cache: directives.no_cache,
            must_revalidate: directives.must_revalidate
                || directives.proxy_revalidate
                || directives.s_maxage.is_some(),
            stale_while_revalidate: Duration::from_secs(
                directives.stale_while_revalidate.unwrap_or(0),
            ),
            stale_if_error: Duration::from_secs(directives.stale_if_error.unwrap_or(0)),
        }
    }

    /// How long past its freshness a response of this `age` is (zero while fresh).
    pub fn staleness(&self, age: Duration) -> Duration {
        age.saturating_sub(self.lifetime)
    }

    /// Whether a stale response of this `age` may be served at once while it is
    /// revalidated in the background (RFC 5861 §3): within `stale-while-revalidate`, never
    /// for `no-cache` / `must-revalidate` responses, and not when the request asks for
    /// freshness itself (`no-cache`, `max-age`, `min-fresh`).
    pub fn may_serve_while_revalidating(&self, age: Duration, request: &CacheControl) -> bool {
        !self.no_cache
            && !self.must_revalidate
            && !request.no_cache
            && request.max_age.is_none()
            && request.min_fresh.is_none()
            && !self.stale_while_revalidate.is_zero()
            && self.staleness(age) <= self.stale_while_revalidate
    }

    /// Whether a response of this `age` may be served when the origin fails (RFC 5861 §4):
    /// within the larger of the response's and the request's `stale-if-error`; never for
    /// `no-cache` / `must-revalidate` responses (RFC 9111 §4.2.4).
    pub fn may_serve_on_error(&self, age: Duration, request: &CacheControl) -> bool {
        let window = self
            .stale_if_error
            .max(Duration::from_secs(request.stale_if_error.unwrap_or(0)));
        !self.no_cache
            && !self.must_revalidate
            && !window.is_zero()
            && self.staleness(age) <= window
    }

    /// Whether a response of this `age` may be served, at most `window` past its freshness,
    /// when the origin cannot be reached (`--serve-stale-on-error`; RFC 9111 §4.2.4 lets a
    /// disconnected cache serve stale content); never for `no-cache` / `must-revalidate`
    /// responses.
    pub fn may_serve_disconnected(&self, age: Duration, window: Duration) -> bool {
        !self.no_cache
            && !self.must_revalidate
            && !window.is_zero()
            && self.staleness(age) <= window
    }

    /// Whether a response of this freshness and `age` may be served without revalidation
    /// to a request with `request` directives.
    pub fn is_fresh_for(&self, age: Duration, request: &CacheControl) -> bool {
        if self.no_cache || request.no_cache {
            return false;
        }
        let mut lifetime = self.lifetime;
        if let Some(max_age) = request.max_age {
            lifetime = lifetime.min(Duration::from_secs(max_age));
        }
        let needed = age + Duration::from_secs(request.min_fresh.unwrap_or(0));
        if needed < lifetime {
            return true;
        }
        // max-stale lets a client accept a stale response, unless the origin forbade it.
        match request.max_stale {
            Some(limit) if !self.must_revalidate && request.max_age.is_none() => {
                limit.is_none_or(|seconds| needed < lifetime + Duration::from_secs(seconds))
            }
            _ => false,
        }
    }
}

/// The age a response had when it arrived (RFC 9111 §4.2.3, `corrected_initial_age`): the
/// larger of what its `Date` implies and its `Age` plus the time the exchange took.
pub fn corrected_initial_age(
    response: &Fields,
    request_time: SystemTime,
    response_time: SystemTime,
) -> Duration {
    let date = response.get("date").and_then(parse_http_date);
    let apparent = date
        .and_then(|date| response_time.duration_since(date).ok())
        .unwrap_or(Duration::ZERO);
    let age_value = age_value(response);
    let delay = response_time
        .duration_since(request_time)
        .unwrap_or(Duration::ZERO);
    apparent.max(age_value + delay)
}

/// The `Age` a response carries (RFC 9111 §5.1): the first member when the field is a list
/// or comes in several lines; a malformed value counts as no `Age` (zero), never as an
/// error of the whole response; values past 2^31 s are clamped.
pub fn age_value(response: &Fields) -> Duration {
    let Some(first) = response.list_members("age").next() else {
        return Duration::ZERO;
    };
    if first.is_empty() || !first.iter().all(u8::is_ascii_digit) {
        return Duration::ZERO;
    }
    let seconds = first.iter().fold(0u64, |value, &digit| {
        value
            .saturating_mul(10)
            .saturating_add(u64::from(digit - b'0'))
    });
    Duration::from_secs(seconds.min(DELTA_SECONDS_MAX))
}

/// The current age of a stored response: its corrected initial age plus the time it has
/// been resident since `response_time`.
pub fn current_age(initial_age: Duration, response_time: SystemTime, now: SystemTime) -> Duration {
    initial_age + now.duration_since(response_time).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{T, at, fields};
    use coldwire_http::format_http_date;
    use proptest::prelude::*;

    fn date(seconds: u64) -> String {
        String::from_utf8(format_http_date(at(seconds)).to_vec()).unwrap()
    }

    #[test]
    fn s_maxage_beats_max_age_beats_expires() {
        let response = fields(&[
            ("Cache-Control", "max-age=60, s-maxage=30"),
            ("Expires", &date(T + 1000)),
            ("Date", &date(T)),
        ]);
        let freshness = Freshness::of(200, &response, at(T));
        assert_eq!(freshness.lifetime, Duration::from_secs(30));
        assert!(
            freshness.must_revalidate,
            "s-maxage implies proxy-revalidate"
        );
        let response = fields(&[
            ("Cache-Control", "max-age=60"),
            ("Expires", &date(T + 1000)),
        ]);
        assert_eq!(
            Freshness::of(200, &response, at(T)).lifetime,
            Duration::from_secs(60)
        );
    }

    #[test]
    fn expires_counts_from_date_and_invalid_expires_is_stale() {
        let response = fields(&[("Expires", &date(T + 100)), ("Date", &date(T))]);
        assert_eq!(
            Freshness::of(200, &response, at(T + 5)).lifetime,
            Duration::from_secs(100)
        );
        let response = fields(&[("Expires", "0"), ("Date", &date(T))]);
        assert_eq!(
            Freshness::of(200, &response, at(T)).lifetime,
            Duration::ZERO
        );
    }

    #[test]
    fn heuristic_is_a_tenth_of_the_last_modified_age_capped_at_a_day() {
        let response = fields(&[("Date", &date(T)), ("Last-Modified", &date(T - 1000))]);
        let freshness = Freshness::of(200, &response, at(T));
        assert_eq!(freshness.lifetime, Duration::from_secs(100));
        assert!(freshness.heuristic);
        let response = fields(&[
            ("Date", &date(T)),
            ("Last-Modified", &date(T - 100_000_000)),
        ]);
        assert_eq!(Freshness::of(200, &response, at(T)).lifetime, HEURISTIC_MAX);
        // Not for a status that is not heuristically cacheable.
        assert_eq!(
            Freshness::of(302, &response, at(T)).lifetime,
            Duration::ZERO
        );
    }

    #[test]
    fn stale_windows_of_rfc_5861() {
        let now = at(1_000_000);
        let response = fields(&[(
            "Cache-Control",
            "max-age=10, stale-while-revalidate=20, stale-if-error=100",
        )]);
        let freshness = Freshness::of(200, &response, now);
        let plain = CacheControl::default();
        let secs = Duration::from_secs;
        assert!(freshness.may_serve_while_revalidating(secs(30), &plain));
        assert!(!freshness.may_serve_while_revalidating(secs(31), &plain));
        assert!(freshness.may_serve_on_error(secs(110), &plain));
        assert!(!freshness.may_serve_on_error(secs(111), &plain));
        let asks_fresh = CacheControl::parse([&b"max-age=0"[..]]);
        assert!(!freshness.may_serve_while_revalidating(secs(15), &asks_fresh));
        let request_window = CacheControl::parse([&b"stale-if-error=1000"[..]]);
        assert!(freshness.may_serve_on_error(secs(500), &request_window));
        let strict = fields(&[(
            "Cache-Control",
            "max-age=10, must-revalidate, stale-while-revalidate=20, stale-if-error=100",
        )]);
        let strict = Freshness::of(200, &strict, now);
        assert!(!strict.may_serve_while_revalidating(secs(15), &plain));
        assert!(!strict.may_serve_on_error(secs(15), &request_window));
    }

    #[test]
    fn request_directives_shorten_or_forbid_freshness() {
        let freshness = Freshness {
            lifetime: Duration::from_secs(100),
            heuristic: false,
            no_cache: false,
            must_revalidate: false,
            stale_while_revalidate: Duration::ZERO,
            stale_if_error: Duration::ZERO,
        };
        let none = CacheControl::default();
        assert!(freshness.is_fresh_for(Duration::from_secs(50), &none));
        assert!(!freshness.is_fresh_for(Duration::from_secs(100), &none));
        assert!(!freshness.is_fresh_for(
            Duration::from_secs(50),
            &CacheControl::parse([&b"max-age=10"[..]])
        ));
        assert!(!freshness.is_fresh_for(
            Duration::from_secs(50),
            &CacheControl::parse([&b"no-cache"[..]])
        ));
        assert!(!freshness.is_fresh_for(
            Duration::from_secs(50),
            &CacheControl::parse([&b"min-fresh=60"[..]])
        ));
        assert!(freshness.is_fresh_for(
            Duration::from_secs(150),
            &CacheControl::parse([&b"max-stale=60"[..]])
        ));
        let strict = Freshness {
            must_revalidate: true,
            ..freshness
        };
        assert!(!strict.is_fresh_for(
            Duration::from_secs(150),
            &CacheControl::parse([&b"max-stale"[..]])
        ));
        let no_cache = Freshness {
            no_cache: true,
            ..freshness
        };
        assert!(!no_cache.is_fresh_for(Duration::ZERO, &none));
    }

    #[test]
    fn age_takes_the_larger_of_date_and_age_plus_delay() {
        let response = fields(&[("Date", &date(T - 10)), ("Age", "3")]);
        assert_eq!(
            corrected_initial_age(&response, at(T - 1), at(T)),
            Duration::from_secs(10)
        );
        let response = fields(&[("Date", &date(T)), ("Age", "30")]);
        assert_eq!(
            corrected_initial_age(&response, at(T - 2), at(T)),
            Duration::from_secs(32)
        );
        // A Date in the future (clock skew) does not make the age negative.
        let response = fields(&[("Date", &date(T + 50))]);
        assert_eq!(
            corrected_initial_age(&response, at(T), at(T)),
            Duration::ZERO
        );
        assert_eq!(
            current_age(Duration::from_secs(5), at(T), at(T + 7)),
            Duration::from_secs(12)
        );
    }

    #[test]
    fn rfc9111_5_1_age_uses_the_first_member_of_a_list_or_of_several_lines() {
        assert_eq!(
            age_value(&fields(&[("Age", "30, 40")])),
            Duration::from_secs(30)
        );
        assert_eq!(
            age_value(&fields(&[("Age", "12"), ("Age", "99")])),
            Duration::from_secs(12)
        );
        let response = fields(&[("Date", &date(T)), ("Age", "30, 40")]);
        assert_eq!(
            corrected_initial_age(&response, at(T), at(T)),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn rfc9111_5_1_a_malformed_age_is_ignored_not_the_response() {
        for value in ["abc", "-5", "1.5", "", "30x", "0x10"] {
            let response = fields(&[
                ("Date", &date(T)),
                ("Age", value),
                ("Cache-Control", "max-age=60"),
            ]);
            assert_eq!(
                corrected_initial_age(&response, at(T), at(T)),
                Duration::ZERO,
                "{value:?}"
            );
            assert_eq!(
                Freshness::of(200, &response, at(T)).lifetime,
                Duration::from_secs(60)
            );
        }
        assert_eq!(
            age_value(&fields(&[("Age", "99999999999999999999")])),
            Duration::from_secs(DELTA_SECONDS_MAX)
        );
    }

    #[test]
    fn rfc9111_5_3_invalid_expires_means_already_expired() {
        for value in ["0", "-1", "never", "Sun, 31 Apr 2094 00:00:00 GMT", ""] {
            let response = fields(&[("Expires", value), ("Date", &date(T))]);
            assert_eq!(
                Freshness::of(200, &response, at(T)).lifetime,
                Duration::ZERO,
                "{value:?}"
            );
        }
    }

    #[test]
    fn rfc9110_5_6_7_expires_in_any_date_form_counts() {
        // T + 100 s is Tue, 14 Nov 2023 22:15:00 GMT; wrong weekday and odd case included.
        for value in [
            "Tue, 14 Nov 2023 22:15:00 GMT",
            "Sat, 14 NOV 2023 22:15:00 gmt",
            "Tuesday, 14-Nov-23 22:15:00 GMT",
            "Tue Nov 14 22:15:00 2023",
        ] {
            let response = fields(&[("Expires", value), ("Date", &date(T))]);
            assert_eq!(
                Freshness::of(200, &response, at(T)).lifetime,
                Duration::from_secs(100),
                "{value:?}"
            );
        }
    }

    #[test]
    fn rfc9111_4_2_2_heuristics_only_for_heuristically_cacheable_codes() {
        let response = fields(&[("Date", &date(T)), ("Last-Modified", &date(T - 1000))]);
        for status in [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501] {
            let freshness = Freshness::of(status, &response, at(T));
            assert_eq!(freshness.lifetime, Duration::from_secs(100), "{status}");
            assert!(freshness.heuristic);
        }
        for status in [299, 302, 400, 500, 503, 599] {
            assert_eq!(
                Freshness::of(status, &response, at(T)).lifetime,
                Duration::ZERO,
                "{status}"
            );
        }
        // RFC 9111 §5.2.2.9: `public` makes any status heuristically cacheable.
        let public = fields(&[
            ("Cache-Control", "public"),
            ("Date", &date(T)),
            ("Last-Modified", &date(T - 1000)),
        ]);
        for status in [299, 302, 500, 599] {
            let freshness = Freshness::of(status, &public, at(T));
            assert_eq!(freshness.lifetime, Duration::from_secs(100), "{status}");
        }
        // An explicit lifetime holds for any status.
        let explicit = fields(&[("Cache-Control", "max-age=60")]);
        assert_eq!(
            Freshness::of(503, &explicit, at(T)).lifetime,
            Duration::from_secs(60)
        );
    }

    #[test]
    fn rfc9213_a_targeted_field_replaces_cache_control_and_expires() {
        let targets = Targets::new(["Coldwire-Cache-Control", "CDN-Cache-Control"]);
        let response = fields(&[
            ("Cache-Control", "max-age=5"),
            ("Expires", &date(T + 1000)),
            ("Date", &date(T)),
            ("CDN-Cache-Control", "max-age=60"),
            ("Coldwire-Cache-Control", "max-age=600"),
        ]);
        assert_eq!(
            Freshness::of_targeted(200, &response, at(T), &targets).lifetime,
            Duration::from_secs(600)
        );
        assert_eq!(
            Freshness::of(200, &response, at(T)).lifetime,
            Duration::from_secs(5)
        );
        let response = fields(&[
            ("Expires", &date(T + 1000)),
            ("Date", &date(T)),
            ("CDN-Cache-Control", "must-revalidate"),
        ]);
        let freshness = Freshness::of_targeted(200, &response, at(T), &targets);
        assert_eq!(freshness.lifetime, Duration::ZERO, "Expires is ignored");
        assert!(freshness.must_revalidate);
    }

    proptest! {
        #[test]
        fn age_is_monotonic_in_now(initial in 0u64..10_000, stored in 0u64..1_000_000, later in 0u64..1_000_000) {
            let first = current_age(Duration::from_secs(initial), at(T + stored), at(T + stored + later));
            let second = current_age(Duration::from_secs(initial), at(T + stored), at(T + stored + later + 1));
            prop_assert!(second >= first);
            prop_assert!(first >= Duration::from_secs(initial));
        }

        #[test]
        fn freshness_never_panics(value in "[ -~]{0,60}", status in 100u16..600) {
            let response = fields(&[("Cache-Control", &value), ("Expires", &value), ("Last-Modified", &value), ("Date", &value)]);
            let freshness = Freshness::of(status, &response, at(T));
            prop_assert!(freshness.lifetime <= Duration::from_secs(DELTA_SECONDS_MAX).max(Duration::from_secs(T)));
        }
    }
}
