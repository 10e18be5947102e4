//! HTTP dates: formatting as IMF-fixdate ([`format_http_date`]), parsing the three formats
//! RFC 9110 §5.6.7 requires ([`parse_http_date`]), and a per-second cache of the current
//! `Date` value ([`DateCache`]).
//!
//! Invariants: a formatted date is always exactly [`HTTP_DATE_LEN`] (29) ASCII bytes, e.g.
//! `Sun, 06 Nov 1994 08:49:37 GMT`; nothing here allocates or panics. Times before 1970 are
//! formatted as the epoch and times after 9999-12-31 as the last second of 9999 (httpdate
//! cannot represent either).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub const HTTP_DATE_LEN: usize = 29;

/// Seconds from the epoch to 9999-12-31T23:59:59Z, the last second httpdate can format.
const LAST_FORMATTABLE_SECOND: u64 = 253_402_300_799;

/// The proleptic Gregorian (year, month 1–12, day 1–31) of a count of days since
/// 1970-01-01 (negative before it), by Howard Hinnant's days-to-civil algorithm — for the
/// other date formats the project writes (access-log lines, result directory names).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    // Both are in range by construction (1..=12, 1..=31).
    (year, month as u32, day as u32)
}

/// Formats `time` (truncated to whole seconds) as an IMF-fixdate, without allocating.
pub fn format_http_date(time: SystemTime) -> [u8; HTTP_DATE_LEN] {
    let seconds = unix_seconds(time).min(LAST_FORMATTABLE_SECOND);
    let date = httpdate::HttpDate::from(UNIX_EPOCH + Duration::from_secs(seconds));
    let mut writer = FixedWriter {
        bytes: [b' '; HTTP_DATE_LEN],
        len: 0,
    };
    // FixedWriter never fails before 29 bytes, and httpdate always writes exactly 29.
    let _ = std::fmt::Write::write_fmt(&mut writer, format_args!("{date}"));
    writer.bytes
}

/// Parses an HTTP-date in any of the three formats RFC 9110 §5.6.7 requires recipients to
/// accept (IMF-fixdate, RFC 850, asctime), tolerantly: a day name that is not the date's
/// own and unusual letter case do not make a valid date invalid (see
/// [`crate::date_parse`]). Surrounding whitespace is ignored; anything else invalid gives
/// `None`. A two-digit year is read relative to the current clock.
pub fn parse_http_date(value: &[u8]) -> Option<SystemTime> {
    crate::date_parse::parse_http_date_at(crate::fields::trim_ows(value), SystemTime::now())
}

/// Whole seconds since the Unix epoch; 0 for times before it.
pub fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |since_epoch| since_epoch.as_secs())
}

/// Truncates `time` to whole seconds (HTTP dates have one-second resolution, so validators and
/// comparisons must use truncated times). Times before the epoch become the epoch.
pub fn truncate_to_seconds(time: SystemTime) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(unix_seconds(time))
}

struct FixedWriter {
    bytes: [u8; HTTP_DATE_LEN],
    len: usize,
}

impl std::fmt::Write for FixedWriter {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        let end = self.len.checked_add(text.len()).ok_or(std::fmt::Error)?;
        let slot = self.bytes.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        slot.copy_from_slice(text.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// The current `Date` header value, reformatted at most once per second.
///
/// An event loop calls [`DateCache::update`] once per iteration with the loop's clock and
/// copies [`DateCache::bytes`] into every response head.
#[derive(Debug, Clone)]
pub struct DateCache {
    second: u64,
    formatted: [u8; HTTP_DATE_LEN],
}

impl DateCache {
    /// A cache holding the date for `now`.
    pub fn new(now: SystemTime) -> DateCache {
        DateCache {
            second: unix_seconds(now),
            formatted: format_http_date(now),
        }
    }

    /// Refreshes the cached value if `now` falls in a different second than the cached one.
    /// Returns true when the value changed.
    pub fn update(&mut self, now: SystemTime) -> bool {
        let second = unix_seconds(now);
        if second == self.second {
            return false;
        }
        self.second = second;
        self.formatted = format_http_date(now);
        true
    }

    /// The cached IMF-fixdate.
    pub fn bytes(&self) -> &[u8; HTTP_DATE_LEN] {
        &self.formatted
    }
}

impl Default for DateCache {
    /// A cache holding the date for `SystemTime::now()`.
    fn default() -> Self {
        DateCache::new(SystemTime::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds)
    }

    #[test]
    fn civil_dates_across_eras_and_leap_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
        assert_eq!(civil_from_days(-719_468), (0, 3, 1));
    }

    #[test]
    fn formats_imf_fixdate() {
        assert_eq!(
            &format_http_date(at(784_111_777)),
            b"Sun, 06 Nov 1994 08:49:37 GMT"
        );
        assert_eq!(&format_http_date(at(0)), b"Thu, 01 Jan 1970 00:00:00 GMT");
    }

    #[test]
    fn clamps_unrepresentable_times() {
        let before_epoch = UNIX_EPOCH - Duration::from_secs(10);
        assert_eq!(
            &format_http_date(before_epoch),
            b"Thu, 01 Jan 1970 00:00:00 GMT"
        );
        let far_future = at(u64::MAX / 4);
        assert_eq!(
            &format_http_date(far_future),
            b"Fri, 31 Dec 9999 23:59:59 GMT"
        );
    }

    #[test]
    fn parses_all_three_formats() {
        let expected = Some(at(784_111_777));
        assert_eq!(parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT"), expected);
        assert_eq!(parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT"), expected);
        assert_eq!(parse_http_date(b"Sun Nov  6 08:49:37 1994"), expected);
        assert_eq!(
            parse_http_date(b" Sun, 06 Nov 1994 08:49:37 GMT "),
            expected
        );
        assert_eq!(parse_http_date(b"Mon, 06 Nov 1994 08:49:37 GMT"), expected);
        assert_eq!(parse_http_date(b"yesterday"), None);
        assert_eq!(parse_http_date(b"\xff\xfe"), None);
    }

    #[test]
    fn cache_updates_once_per_second() {
        let mut cache = DateCache::new(at(100));
        assert!(!cache.update(at(100) + Duration::from_millis(999)));
        assert!(cache.update(at(101)));
        assert_eq!(cache.bytes(), &format_http_date(at(101)));
        assert!(!cache.update(at(101)));
    }

    #[test]
    fn truncation() {
        assert_eq!(
            truncate_to_seconds(at(5) + Duration::from_millis(700)),
            at(5)
        );
    }

    proptest::proptest! {
        #[test]
        fn round_trips(seconds in 0u64..LAST_FORMATTABLE_SECOND) {
            let formatted = format_http_date(at(seconds));
            proptest::prop_assert_eq!(parse_http_date(&formatted), Some(at(seconds)));
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            let _ = parse_http_date(&bytes);
        }
    }
}
