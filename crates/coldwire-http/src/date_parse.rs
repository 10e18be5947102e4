//! A tolerant parser for the three HTTP-date forms RFC 9110 §5.6.7 requires recipients to
//! accept: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form
//! (`Sunday, 06-Nov-94 08:49:37 GMT`) and ANSI C's asctime form
//! (`Sun Nov  6 08:49:37 1994`).
//!
//! Tolerance, as the RFC's robustness advice and real caches want it: day and month names
//! and `GMT` in any letter case; a day name that is a real day name but not the right one
//! for the date is accepted (the date is what counts — the `httpdate` crate rejects those);
//! runs of spaces count as one. A two-digit RFC 850 year more than 50 years in the future
//! is the most recent past year with those digits (§5.6.7).
//!
//! Invariants: never panics, never allocates; the calendar is validated (no 31 April, 29
//! February only in leap years, hours below 24, minutes below 60, seconds up to 60 — a
//! leap second counts as 59); years 1601–9999 only.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
const LONG_DAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];
const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// Parses an HTTP-date in any of the three forms, relative to `now` for a two-digit year.
pub fn parse_http_date_at(value: &[u8], now: SystemTime) -> Option<SystemTime> {
    let mut cursor = Cursor {
        bytes: value,
        at: 0,
    };
    cursor.spaces();
    let weekday = cursor.word();
    if !is_day_name(weekday) {
        return None;
    }
    let parts = if cursor.eat(b',') {
        // IMF-fixdate or RFC 850: day, month and year separated by spaces or dashes.
        cursor.spaces();
        let day = cursor.number(1, 2)?;
        if !(cursor.eat(b'-') || cursor.spaces()) {
            return None;
        }
        let month = month_of(cursor.word())?;
        if !(cursor.eat(b'-') || cursor.spaces()) {
            return None;
        }
        let year_start = cursor.at;
        let year = cursor.number(2, 4)?;
        let year = match cursor.at - year_start {
            4 => year,
            2 => two_digit_year(year, now),
            _ => return None,
        };
        if !cursor.spaces() {
            return None;
        }
        let time = cursor.time()?;
        if !cursor.spaces() || !cursor.word().eq_ignore_ascii_case(b"gmt") {
            return None;
        }
        Parts {
            year,
            month,
            day,
            time,
        }
    } else {
        // asctime: `Sun Nov  6 08:49:37 1994`.
        if !cursor.spaces() {
            return None;
        }
        let month = month_of(cursor.word())?;
        if !cursor.spaces() {
            return None;
        }
        let day = cursor.number(1, 2)?;
        if !cursor.spaces() {
            return None;
        }
        let time = cursor.time()?;
        if !cursor.spaces() {
            return None;
        }
        let year_start = cursor.at;
        let year = cursor.number(4, 4)?;
        if cursor.at - year_start != 4 {
            return None;
        }
        Parts {
            year,
            month,
            day,
            time,
        }
    };
    cursor.spaces();
    if cursor.at != value.len() {
        return None;
    }
    parts.to_system_time()
}

struct Parts {
    year: u64,
    /// 1–12.
    month: u64,
    day: u64,
    /// Seconds into the day.
    time: u64,
}

impl Parts {
    fn to_system_time(&self) -> Option<SystemTime> {
        if !(1601..=9999).contains(&self.year) || self.day == 0 {
            return None;
        }
        if self.day > days_in_month(self.year, self.month) {
            return None;
        }
        let days = days_from_civil(self.year as i64, self.month as i64, self.day as i64);
        let seconds = days * 86_400 + self.time as i64;
        if seconds >= 0 {
            UNIX_EPOCH.checked_add(Duration::from_secs(seconds as u64))
        } else {
            UNIX_EPOCH.checked_sub(Duration::from_secs(seconds.unsigned_abs()))
        }
    }
}

fn is_leap(year: u64) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days-from-civil,
/// the inverse of [`crate::civil_from_days`]).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let month_index = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// RFC 9110 §5.6.7: a two-digit year more than 50 years ahead of `now` is in the past.
fn two_digit_year(digits: u64, now: SystemTime) -> u64 {
    let days = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs() / 86_400);
    let (current, _, _) = crate::civil_from_days(days as i64);
    let current = current.max(0) as u64;
    let candidate = current - current % 100 + digits;
    if candidate > current + 50 {
        candidate - 100
    } else {
        candidate
    }
}

fn is_day_name(word: &[u8]) -> bool {
    DAYS.iter()
        .chain(LONG_DAYS.iter())
        .any(|name| word.eq_ignore_ascii_case(name.as_bytes()))
}

fn month_of(word: &[u8]) -> Option<u64> {
    MONTHS
        .iter()
        .position(|name| word.eq_ignore_ascii_case(name.as_bytes()))
        .map(|index| index as u64 + 1)
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    /// Skips spaces; true when there was at least one.
    fn spaces(&mut self) -> bool {
        let start = self.at;
        while self
            .bytes
            .get(self.at)
            .is_some_and(|&byte| byte == b' ' || byte == b'\t')
        {
            self.at += 1;
        }
        self.at > start
    }

    fn eat(&mut self, expected: u8) -> bool {
        if self.bytes.get(self.at) == Some(&expected) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// The ASCII letters from here.
    fn word(&mut self) -> &'a [u8] {
        let start = self.at;
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_alphabetic) {
            self.at += 1;
        }
        &self.bytes[start..self.at]
    }

    /// `min..=max` decimal digits.
    fn number(&mut self, min: usize, max: usize) -> Option<u64> {
        let start = self.at;
        let mut value = 0u64;
        while self.at - start < max
            && let Some(&digit) = self.bytes.get(self.at).filter(|byte| byte.is_ascii_digit())
        {
            value = value * 10 + u64::from(digit - b'0');
            self.at += 1;
        }
        let length = self.at - start;
        let more_digits = self.bytes.get(self.at).is_some_and(u8::is_ascii_digit);
        (length >= min && !more_digits).then_some(value)
    }

    /// `HH:MM:SS` as seconds into the day.
    fn time(&mut self) -> Option<u64> {
        let hour = self.number(2, 2)?;
        if !self.eat(b':') {
            return None;
        }
        let minute = self.number(2, 2)?;
        if !self.eat(b':') {
            return None;
        }
        let second = self.number(2, 2)?;
        if hour > 23 || minute > 59 || second > 60 {
            return None;
        }
        Some(hour * 3600 + minute * 60 + second.min(59))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(seconds)
    }

    /// 2026-11-22, the "now" of these tests.
    const NOW: u64 = 1_795_305_600;

    fn parse(text: &str) -> Option<SystemTime> {
        parse_http_date_at(text.as_bytes(), at(NOW))
    }

    #[test]
    fn rfc9110_5_6_7_all_three_forms() {
        let expected = Some(at(784_111_777));
        assert_eq!(parse("Sun, 06 Nov 1994 08:49:37 GMT"), expected);
        assert_eq!(parse("Sunday, 06-Nov-94 08:49:37 GMT"), expected);
        assert_eq!(parse("Sun Nov  6 08:49:37 1994"), expected);
        assert_eq!(parse("Sun Nov 06 08:49:37 1994"), expected);
    }

    #[test]
    fn rfc9110_5_6_7_wrong_weekday_and_letter_case_are_tolerated() {
        let expected = Some(at(784_111_777));
        // 6 November 1994 was a Sunday.
        assert_eq!(parse("Mon, 06 Nov 1994 08:49:37 GMT"), expected);
        assert_eq!(parse("SUN, 06 NOV 1994 08:49:37 gmt"), expected);
        assert_eq!(parse("monday, 06-nov-94 08:49:37 Gmt"), expected);
        assert_eq!(parse("wed nov  6 08:49:37 1994"), expected);
        assert_eq!(parse("Sun,  06  Nov 1994 08:49:37 GMT"), expected);
    }

    #[test]
    fn rfc9110_5_6_7_two_digit_years_are_never_more_than_50_years_ahead() {
        // Now is 2026: "76" is 2076 (50 years ahead), "77" is 1977.
        let year = |text: &str| {
            let seconds = parse(text).unwrap().duration_since(UNIX_EPOCH).unwrap();
            crate::civil_from_days((seconds.as_secs() / 86_400) as i64).0
        };
        assert_eq!(year("Fri, 01-Jan-76 00:00:00 GMT"), 2076);
        assert_eq!(year("Sat, 01-Jan-77 00:00:00 GMT"), 1977);
        assert_eq!(year("Thu, 01-Jan-26 00:00:00 GMT"), 2026);
    }

    #[test]
    fn invalid_dates_are_none() {
        for text in [
            "",
            "0",
            "-1",
            "yesterday",
            "Sun, 31 Apr 2026 00:00:00 GMT",
            "Sun, 29 Feb 2026 00:00:00 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:00 GMT",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 08:49:37",
            "Sun, 06 Nov 1994 08:49:37 GMT trailing",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Xyz, 06 Nov 1994 08:49:37 GMT",
            "Sun, 006 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 19945 08:49:37 GMT",
            "Sun Nov  6 08:49:37 94",
            "Sun, 06 Nov 1994 8:49:37 GMT",
        ] {
            assert_eq!(parse(text), None, "{text:?}");
        }
        assert_eq!(
            parse("Sat, 29 Feb 2020 00:00:00 GMT"),
            Some(at(1_582_934_400))
        );
        assert_eq!(
            parse("Wed, 31 Dec 1969 23:59:59 GMT"),
            UNIX_EPOCH.checked_sub(Duration::from_secs(1))
        );
        // A leap second counts as the second before it.
        assert_eq!(
            parse("Sat, 31 Dec 2016 23:59:60 GMT"),
            parse("Sat, 31 Dec 2016 23:59:59 GMT")
        );
    }

    #[test]
    fn days_from_civil_inverts_civil_from_days() {
        for days in [-719_468, -1, 0, 1, 11_016, 20_779, 2_932_896] {
            let (year, month, day) = crate::civil_from_days(days);
            assert_eq!(
                days_from_civil(year, i64::from(month), i64::from(day)),
                days
            );
        }
    }
}
