//! Dates for people: a Unix time as `YYYY-MM-DD HH:MM UTC` (the calendar arithmetic is
//! `coldwire_http::civil_from_days`, shared with the access log).

/// `YYYY-MM-DD HH:MM UTC` for a Unix time (proleptic Gregorian calendar).
pub fn utc_time(unix_seconds: f64) -> String {
    if !unix_seconds.is_finite() {
        return "at an unknown time".to_string();
    }
    let seconds = unix_seconds.floor() as i64;
    let second_of_day = seconds.rem_euclid(86_400);
    format!(
        "{} {:02}:{:02} UTC",
        utc_date(unix_seconds),
        second_of_day / 3600,
        second_of_day % 3600 / 60
    )
}

/// `YYYY-MM-DD` (UTC) of a Unix time: the date in `results/<date>-<machine>/`.
pub fn utc_date(unix_seconds: f64) -> String {
    let days = (unix_seconds.floor() as i64).div_euclid(86_400);
    let (year, month, day) = coldwire_http::civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::{utc_date, utc_time};

    #[test]
    fn unix_times_become_utc_dates() {
        assert_eq!(utc_time(0.0), "1970-01-01 00:00 UTC");
        // `date -u -d @1795350000`
        assert_eq!(utc_time(1_795_350_000.0), "2026-11-22 12:20 UTC");
        assert_eq!(utc_date(951_782_400.0), "2000-02-29");
        assert_eq!(utc_date(1_795_305_600.0 + 86_399.0), "2026-11-22");
        assert_eq!(utc_time(951_782_400.0), "2000-02-29 00:00 UTC");
    }
}
