//! Fuzz target: HTTP-date parsing and formatting (`coldwire_http::date`, `date_parse`).
//!
//! Input: the bytes of a field value; their first eight bytes, read as a little-endian
//! `u64`, also give an instant for the formatting checks.
//!
//! Property:
//! - `parse_http_date` never panics, and surrounding SP/HTAB never changes its result;
//! - a date that parses (with the clock fixed at 2026-01-01, which decides RFC 850's
//!   two-digit years) is a whole second from 1601 to the end of 9999; from 1970 on, its
//!   IMF-fixdate is 29 ASCII bytes that parse again to the same instant, and formatting that
//!   gives the same bytes (a fixed point); before 1970 it formats as the epoch (the
//!   documented clamp);
//! - the same instant written in the two obsolete formats RFC 9110 §5.6.7 requires
//!   recipients to accept (asctime, from 1601; RFC 850 for the years its two digits name
//!   unambiguously around the clock, 1978–2075) parses to the same instant;
//! - any instant from 1601 to 9999 (from the input's first eight bytes) round-trips through
//!   those forms, and from 1970 through `format_http_date` and `parse_http_date`.
#![no_main]

use coldwire_http::date_parse::parse_http_date_at;
use coldwire_http::{HTTP_DATE_LEN, civil_from_days, format_http_date, parse_http_date};
use libfuzzer_sys::fuzz_target;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// 9999-12-31T23:59:59Z.
const LAST_SECOND: i64 = 253_402_300_799;
/// 1601-01-01T00:00:00Z, the first second the parser accepts.
const FIRST_SECOND: i64 = -11_644_473_600;
/// The parser's clock: 2026-01-01T00:00:00Z.
const NOW: u64 = 1_767_225_600;

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
    hour: i64,
    minute: i64,
    second: i64,
}

fn civil(seconds: i64) -> Civil {
    let days = seconds.div_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let of_day = seconds.rem_euclid(86_400);
    Civil {
        year,
        month: MONTHS[month as usize - 1],
        day,
        weekday: DAYS[days.rem_euclid(7) as usize],
        hour: of_day / 3600,
        minute: of_day / 60 % 60,
        second: of_day % 60,
    }
}

/// `Sun Nov  6 08:49:37 1994`.
fn asctime(seconds: i64) -> String {
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
fn rfc850(seconds: i64) -> String {
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

fn at(seconds: i64) -> SystemTime {
    if seconds >= 0 {
        UNIX_EPOCH + Duration::from_secs(seconds.unsigned_abs())
    } else {
        UNIX_EPOCH - Duration::from_secs(seconds.unsigned_abs())
    }
}

fn parse(value: &[u8]) -> Option<SystemTime> {
    parse_http_date_at(value, UNIX_EPOCH + Duration::from_secs(NOW))
}

fn seconds_of(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => {
            assert_eq!(after.subsec_nanos(), 0);
            i64::try_from(after.as_secs()).expect("in range")
        }
        Err(before) => {
            assert_eq!(before.duration().subsec_nanos(), 0);
            -i64::try_from(before.duration().as_secs()).expect("in range")
        }
    }
}

fn check_instant(seconds: i64) {
    let time = at(seconds);
    if seconds >= 0 {
        let formatted = format_http_date(time);
        assert_eq!(formatted.len(), HTTP_DATE_LEN);
        assert!(formatted.is_ascii());
        assert_eq!(parse(&formatted), Some(time));
        assert_eq!(parse_http_date(&formatted), Some(time));
    } else {
        assert_eq!(format_http_date(time), format_http_date(UNIX_EPOCH));
    }
    assert_eq!(
        parse(asctime(seconds).as_bytes()),
        Some(time),
        "asctime {}",
        asctime(seconds)
    );
    if (1978..=2075).contains(&civil(seconds).year) {
        assert_eq!(
            parse(rfc850(seconds).as_bytes()),
            Some(time),
            "rfc850 {}",
            rfc850(seconds)
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let mut padded = b" \t".to_vec();
    padded.extend_from_slice(data);
    padded.extend_from_slice(b"\t ");
    assert_eq!(parse_http_date(&padded), parse_http_date(data));

    if let Some(time) = parse(coldwire_http::fields::trim_ows(data)) {
        let seconds = seconds_of(time);
        assert!((FIRST_SECOND..=LAST_SECOND).contains(&seconds), "{seconds}");
        if seconds >= 0 {
            let formatted = format_http_date(time);
            assert_eq!(parse(&formatted), Some(time));
            let again = parse(&formatted).map(format_http_date);
            assert_eq!(again, Some(formatted));
        }
        check_instant(seconds);
    }

    if let Some(first) = data.first_chunk::<8>() {
        let span = (LAST_SECOND - FIRST_SECOND + 1).unsigned_abs();
        let offset = u64::from_le_bytes(*first) % span;
        check_instant(FIRST_SECOND + i64::try_from(offset).expect("in range"));
    }
});
