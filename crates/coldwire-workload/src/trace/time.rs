//! Calendar arithmetic for log timestamps: Common Log Format's
//! `[10/Oct/2000:13:55:36 -0700]` to and from seconds since the Unix epoch (proleptic
//! Gregorian, Howard Hinnant's days-from-civil), with no dependency and no panic.

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Days since 1970-01-01 of a date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day since 1970-01-01: (year, month 1–12, day 1–31).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
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
    (year, month, day)
}

fn number(text: &str, digits: usize) -> Option<i64> {
    (text.len() == digits && text.bytes().all(|byte| byte.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// Seconds since the Unix epoch of `10/Oct/2000:13:55:36 -0700` (the text between the
/// brackets); `None` if it is not exactly that shape or names no real time.
pub fn parse_clf_time(text: &str) -> Option<i64> {
    let (stamp, zone) = text.split_once(' ')?;
    let mut parts = stamp.splitn(3, '/');
    let day = number(parts.next()?, 2)?;
    let month_name = parts.next()?;
    let month = MONTHS.iter().position(|name| *name == month_name)? as i64 + 1;
    let rest = parts.next()?;
    let mut clock = rest.split(':');
    let year = number(clock.next()?, 4)?;
    let hour = number(clock.next()?, 2)?;
    let minute = number(clock.next()?, 2)?;
    let second = number(clock.next()?, 2)?;
    if clock.next().is_some() || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60
    {
        return None;
    }
    let sign = match zone.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let zone_digits = zone.get(1..)?;
    let zone_hours = number(zone_digits.get(..2)?, 2)?;
    let zone_minutes = number(zone_digits.get(2..)?, 2)?;
    let offset = sign * (zone_hours * 3600 + zone_minutes * 60);
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

/// `seconds` since the Unix epoch as Common Log Format shows it in a zone `offset_minutes`
/// east of UTC: `01/Jul/1995:00:00:01 -0400` (no brackets).
pub fn format_clf_time(seconds: i64, offset_minutes: i64) -> String {
    let local = seconds + offset_minutes * 60;
    let (year, month, day) = civil_from_days(local.div_euclid(86_400));
    let in_day = local.rem_euclid(86_400);
    let sign = if offset_minutes < 0 { '-' } else { '+' };
    let zone = offset_minutes.abs();
    format!(
        "{day:02}/{}/{year:04}:{:02}:{:02}:{:02} {sign}{:02}{:02}",
        MONTHS[(month - 1) as usize],
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60,
        zone / 60,
        zone % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_timestamps() {
        // date -u -d '1995-07-01 04:00:01' +%s
        assert_eq!(
            parse_clf_time("01/Jul/1995:00:00:01 -0400"),
            Some(804_571_201)
        );
        assert_eq!(
            parse_clf_time("10/Oct/2000:13:55:36 -0700"),
            Some(971_211_336)
        );
        assert_eq!(parse_clf_time("01/Jan/1970:00:00:00 +0000"), Some(0));
        assert_eq!(
            parse_clf_time("29/Feb/2024:12:00:00 +0530"),
            Some(1_709_188_200)
        );
    }

    #[test]
    fn malformed_timestamps_are_none() {
        for text in [
            "",
            "01/Jul/1995:00:00:01",
            "01/Jux/1995:00:00:01 -0400",
            "1/Jul/1995:00:00:01 -0400",
            "01/Jul/1995:24:00:01 -0400",
            "01/Jul/1995:00:00:01 0400",
            "01/Jul/1995:00:00:01:02 -0400",
            "01/Jul/1995:00:00:01 -04",
            "01/Jul/1995:00:00:01 -04000",
            "ü1/Jul/1995:00:00:01 -0400",
        ] {
            assert_eq!(parse_clf_time(text), None, "{text:?}");
        }
    }

    #[test]
    fn formatting_round_trips() {
        for seconds in [0, 804_571_201, 971_211_336, 1_709_188_200, 4_102_444_800] {
            for offset in [-240, 0, 330] {
                let text = format_clf_time(seconds, offset);
                assert_eq!(parse_clf_time(&text), Some(seconds), "{text}");
            }
        }
        assert_eq!(
            format_clf_time(804_571_201, -240),
            "01/Jul/1995:00:00:01 -0400"
        );
    }
}
