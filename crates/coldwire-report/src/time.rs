//! Dates for people: a Unix time as `YYYY-MM-DD HH:MM UTC`, without a calendar crate.

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
    // Howard Hinnant's days-to-civil algorithm.
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
