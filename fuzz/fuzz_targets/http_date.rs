//! Fuzz target: HTTP-date parsing and formatting (`coldwire_http::date`).
//!
//! Input: the bytes of a field value; their first eight bytes, read as a little-endian
//! `u64`, also give an instant for the formatting checks.
//!
//! Property:
//! - `parse_http_date` never panics, and surrounding SP/HTAB never changes its result;
//! - a date that parses is a whole second between 1970 and the end of 9999; formatted as an
//!   IMF-fixdate it is 29 ASCII bytes that parse again to the same instant, and formatting
//!   that gives the same bytes (a fixed point);
//! - the same instant written in the two obsolete formats RFC 9110 §5.6.7 requires
//!   recipients to accept (asctime; RFC 850 for the years its two digits can name,
//!   1970–2069) parses to the same instant;
//! - any instant from 1970 to 9999 (from the input's first eight bytes) round-trips through
//!   `format_http_date` and `parse_http_date`.
#![no_main]

use coldwire_http::{HTTP_DATE_LEN, civil_from_days, format_http_date, parse_http_date};
use libfuzzer_sys::fuzz_target;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// 9999-12-31T23:59:59Z.
const LAST_SECOND: u64 = 253_402_300_799;

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
/// Weekday names from Thursday (1970-01-01 was a Thursday).
const DAYS: [&str; 7] = [
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
];

struct Civil {
    year: i64,
    month: &'static str,
    day: u32,
    weekday: &'static str,
    hour: u64,
    minute: u64,
    second: u64,
}

fn civil(seconds: u64) -> Civil {
    let days = seconds / 86_400;
    let (year, month, day) = civil_from_days(days as i64);
    let of_day = seconds % 86_400;
    Civil {
        year,
        month: MONTHS[month as usize - 1],
        day,
        weekday: DAYS[(days % 7) as usize],
        hour: of_day / 3600,
        minute: of_day / 60 % 60,
        second: of_day % 60,
    }
}

/// `Sun Nov  6 08:49:37 1994`.
fn asctime(seconds: u64) -> String {
    let c = civil(seconds);
    format!(
        "{} {} {:>2} {:02}:{:02}:{:02} {}",
        &c.weekday[..3],
        c.month,
        c.day,
        c.hour,
        c.minute,
        c.second,
        c.year
    )
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`.
fn rfc850(seconds: u64) -> String {
    let c = civil(seconds);
    format!(
        "{}, {:02}-{}-{:02} {:02}:{:02}:{:02} GMT",
        c.weekday,
        c.day,
        c.month,
        c.year % 100,
        c.hour,
        c.minute,
        c.second
    )
}

fn at(seconds: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(seconds)
}

fn check_instant(seconds: u64) {
    let formatted = format_http_date(at(seconds));
    assert_eq!(formatted.len(), HTTP_DATE_LEN);
    assert!(formatted.is_ascii());
    assert_eq!(parse_http_date(&formatted), Some(at(seconds)));
    assert_eq!(
        parse_http_date(asctime(seconds).as_bytes()),
        Some(at(seconds)),
        "asctime {}",
        asctime(seconds)
    );
    if civil(seconds).year < 2070 {
        assert_eq!(
            parse_http_date(rfc850(seconds).as_bytes()),
            Some(at(seconds)),
            "rfc850 {}",
            rfc850(seconds)
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let parsed = parse_http_date(data);
    let mut padded = b" \t".to_vec();
    padded.extend_from_slice(data);
    padded.extend_from_slice(b"\t ");
    assert_eq!(parse_http_date(&padded), parsed);

    if let Some(time) = parsed {
        let since = time
            .duration_since(UNIX_EPOCH)
            .expect("a parsed date is not before 1970");
        assert_eq!(since.subsec_nanos(), 0);
        assert!(since.as_secs() <= LAST_SECOND);
        let formatted = format_http_date(time);
        assert_eq!(parse_http_date(&formatted), Some(time));
        let again = parse_http_date(&formatted).map(format_http_date);
        assert_eq!(again, Some(formatted));
        check_instant(since.as_secs());
    }

    if let Some(first) = data.first_chunk::<8>() {
        check_instant(u64::from_le_bytes(*first) % (LAST_SECOND + 1));
    }
});
