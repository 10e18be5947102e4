//! How long a key stays *hit-for-miss* (Varnish's term) after a leader's response to a miss
//! was not stored: meanwhile its misses go to the origin at once, in parallel, instead of
//! waiting for one leader (collapsed forwarding). The marker itself lives in the
//! [index](crate::index); this is only the rule for its lifetime.
//!
//! Invariant: a lifetime is never zero and never longer than [`HIT_FOR_MISS_MAX`].

use std::time::Duration;

/// How long a key stays hit-for-miss when the response that was not stored gave no
/// freshness lifetime (Varnish's default for uncacheable responses is the same 2 minutes).
pub const HIT_FOR_MISS_DEFAULT: Duration = Duration::from_secs(120);

/// The longest a key stays hit-for-miss, whatever freshness lifetime the response gave.
pub const HIT_FOR_MISS_MAX: Duration = Duration::from_secs(600);

/// How long a key stays hit-for-miss after a response with this freshness `lifetime` was
/// not stored: the lifetime if it had one, else [`HIT_FOR_MISS_DEFAULT`], at most
/// [`HIT_FOR_MISS_MAX`].
pub fn hit_for_miss_lifetime(lifetime: Duration) -> Duration {
    if lifetime.is_zero() {
        HIT_FOR_MISS_DEFAULT
    } else {
        lifetime.min(HIT_FOR_MISS_MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_for_miss_lifetime_has_a_default_and_a_cap() {
        assert_eq!(hit_for_miss_lifetime(Duration::ZERO), HIT_FOR_MISS_DEFAULT);
        let short = Duration::from_secs(5);
        assert_eq!(hit_for_miss_lifetime(short), short);
        assert_eq!(
            hit_for_miss_lifetime(Duration::from_secs(86_400)),
            HIT_FOR_MISS_MAX
        );
    }
}
