//! One line of Squid's native `access.log`:
//! `time elapsed client code/status bytes method URL ident hierarchy/from type`, e.g.
//! `1066036250.618    340 192.168.1.1 TCP_MISS/200 1514 GET http://example.com/ - DIRECT/1.2.3.4 text/html`.
//!
//! `time` is seconds since the epoch with milliseconds; `bytes` counts everything sent to
//! the client, headers included; the fields after the URL are not needed and may be
//! missing.

use super::Record;

/// The record a line holds, or why it holds none.
pub fn parse_line(line: &str) -> Result<Record, &'static str> {
    let mut fields = line.split_ascii_whitespace();
    let time = fields.next().ok_or("no fields")?;
    let _elapsed = fields
        .next()
        .filter(|elapsed| elapsed.bytes().all(|byte| byte.is_ascii_digit()))
        .ok_or("bad elapsed time")?;
    let client = fields.next().ok_or("no client")?;
    let code = fields.next().ok_or("no code/status")?;
    let bytes = fields.next().ok_or("no size")?;
    let method = fields.next().ok_or("no method")?;
    let url = fields.next().ok_or("no URL")?;
    let time_ms = parse_time(time).ok_or("bad timestamp")?;
    let (_, status) = code.split_once('/').ok_or("no code/status")?;
    if status.len() != 3 || !status.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err("bad status");
    }
    let status: u16 = status.parse().map_err(|_| "bad status")?;
    if status != 0 && !(100..=599).contains(&status) {
        return Err("bad status");
    }
    if !bytes.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err("bad size");
    }
    let size = bytes.parse().map_err(|_| "bad size")?;
    if !method
        .bytes()
        .all(|byte| byte.is_ascii_alphabetic() || byte == b'_')
    {
        return Err("bad method");
    }
    Ok(Record {
        time_ms,
        client: client.to_owned(),
        method: method.to_owned(),
        url: url.to_owned(),
        status,
        size,
    })
}

/// `1066036250.618` → milliseconds (fewer or no decimals allowed, more are truncated).
fn parse_time(text: &str) -> Option<i64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty()
        || whole.len() > 12
        || !whole.bytes().all(|byte| byte.is_ascii_digit())
        || !fraction.bytes().all(|byte| byte.is_ascii_digit())
    {
        return None;
    }
    let seconds: i64 = whole.parse().ok()?;
    let mut milliseconds = 0;
    for (position, digit) in fraction.bytes().take(3).enumerate() {
        milliseconds += i64::from(digit - b'0') * [100, 10, 1][position];
    }
    Some(seconds * 1000 + milliseconds)
}

/// Whether a line looks like Squid's native format (its first field is a decimal time
/// and its fourth a `CODE/status`).
pub fn looks_like(line: &str) -> bool {
    let mut fields = line.split_ascii_whitespace();
    let time = fields.next();
    let code = fields.nth(2);
    time.and_then(parse_time).is_some() && code.is_some_and(|code| code.contains('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_native_line() {
        let record = parse_line(
            "1066036250.618    340 192.168.1.1 TCP_MISS/200 1514 GET http://www.example.com/a.html - DIRECT/1.2.3.4 text/html",
        )
        .unwrap();
        assert_eq!(record.time_ms, 1_066_036_250_618);
        assert_eq!(record.client, "192.168.1.1");
        assert_eq!((record.status, record.size), (200, 1514));
        assert_eq!(record.method, "GET");
        assert_eq!(record.url, "http://www.example.com/a.html");
        assert_eq!(record.path(), "/a.html");
        let short =
            parse_line("1066036250.6 0 10.0.0.1 TCP_DENIED/000 0 CONNECT host:443").unwrap();
        assert_eq!((short.time_ms, short.status), (1_066_036_250_600, 0));
        assert!(!short.replayable());
        assert!(looks_like(
            "1066036250.618 340 1.2.3.4 TCP_HIT/200 10 GET /"
        ));
        assert!(!looks_like(
            "1.2.3.4 - - [01/Jul/1995:00:00:01 -0400] \"GET / HTTP/1.0\" 200 1"
        ));
    }

    #[test]
    fn malformed_lines_say_why() {
        for line in [
            "",
            "1066036250.618",
            "1066036250.618 340 1.2.3.4 TCP_MISS/200 1514 GET",
            "x 340 1.2.3.4 TCP_MISS/200 1514 GET /",
            "1066036250.618 -3 1.2.3.4 TCP_MISS/200 1514 GET /",
            "1066036250.618 340 1.2.3.4 TCP_MISS 1514 GET /",
            "1066036250.618 340 1.2.3.4 TCP_MISS/2000 1514 GET /",
            "1066036250.618 340 1.2.3.4 TCP_MISS/200 -1 GET /",
            "1066036250.618 340 1.2.3.4 TCP_MISS/200 99999999999999999999999 GET /",
            "99999999999999999.618 340 1.2.3.4 TCP_MISS/200 1 GET /",
        ] {
            assert!(parse_line(line).is_err(), "{line:?}");
        }
    }
}
