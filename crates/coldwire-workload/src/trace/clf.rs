//! One line of Common Log Format, plain or combined:
//! `host ident user [10/Oct/2000:13:55:36 -0700] "GET /a.gif HTTP/1.0" 200 2326` and
//! optionally `"referer" "user-agent"` after it.
//!
//! Real logs (NASA's among them) hold request lines with stray quotes or no version, so
//! the request's closing quote is the first `"` followed by a status and a size, not simply
//! the next `"`. A size of `-` is 0.

use super::Record;
use super::time::parse_clf_time;

/// The record a line holds, or why it holds none.
pub fn parse_line(line: &str) -> Result<Record, &'static str> {
    let (client, rest) = line.split_once(' ').ok_or("no fields")?;
    if client.is_empty() {
        return Err("no client");
    }
    let open = rest.find('[').ok_or("no [timestamp]")?;
    let after_open = &rest[open + 1..];
    let close = after_open.find(']').ok_or("no [timestamp]")?;
    let seconds = parse_clf_time(&after_open[..close]).ok_or("bad timestamp")?;
    let rest = after_open[close + 1..].trim_start();
    let request_and_more = rest.strip_prefix('"').ok_or("no \"request\"")?;
    let (request, status, size) = split_request(request_and_more).ok_or("no status and size")?;
    let mut words = request.split_ascii_whitespace();
    let method = words.next().ok_or("empty request")?;
    let url = words.next().ok_or("request without a target")?;
    if !method.bytes().all(|byte| byte.is_ascii_alphabetic()) {
        return Err("bad method");
    }
    Ok(Record {
        time_ms: seconds.checked_mul(1000).ok_or("bad timestamp")?,
        client: client.to_owned(),
        method: method.to_owned(),
        url: url.to_owned(),
        status,
        size,
    })
}

/// Splits `GET /a HTTP/1.0" 200 2326 ...` at the first quote followed by a status and a
/// size: (request, status, size).
fn split_request(text: &str) -> Option<(&str, u16, u64)> {
    let mut from = 0;
    while let Some(found) = text[from..].find('"') {
        let quote = from + found;
        if let Some((status, size)) = status_and_size(&text[quote + 1..]) {
            return Some((&text[..quote], status, size));
        }
        from = quote + 1;
    }
    None
}

fn status_and_size(text: &str) -> Option<(u16, u64)> {
    if !text.starts_with(' ') {
        return None;
    }
    let mut words = text.split_ascii_whitespace();
    let status = words.next()?;
    if status.len() != 3 || !status.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let status: u16 = status.parse().ok()?;
    if !(100..=599).contains(&status) {
        return None;
    }
    let size = match words.next()? {
        "-" => 0,
        digits if digits.bytes().all(|byte| byte.is_ascii_digit()) => digits.parse().ok()?,
        _ => return None,
    };
    // Combined format: what follows is quoted (referer, user agent); anything else is not
    // this format.
    match words.next() {
        None => Some((status, size)),
        Some(next) if next.starts_with('"') => Some((status, size)),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_combined_lines() {
        let record = parse_line(
            "199.72.81.55 - - [01/Jul/1995:00:00:01 -0400] \"GET /history/apollo/ HTTP/1.0\" 200 6245",
        )
        .unwrap();
        assert_eq!(record.client, "199.72.81.55");
        assert_eq!(record.time_ms, 804_571_201_000);
        assert_eq!(record.method, "GET");
        assert_eq!(record.url, "/history/apollo/");
        assert_eq!((record.status, record.size), (200, 6245));
        let combined = parse_line(
            "127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] \"GET /apache_pb.gif HTTP/1.0\" 200 2326 \"http://www.example.com/start.html\" \"Mozilla/4.08 [en] (Win98; I ;Nav)\"",
        )
        .unwrap();
        assert_eq!(combined.url, "/apache_pb.gif");
        assert_eq!((combined.status, combined.size), (200, 2326));
    }

    #[test]
    fn nasa_quirks_are_read() {
        // No HTTP version, `-` size, a stray quote inside the request.
        let record =
            parse_line("unicomp6.unicomp.net - - [01/Jul/1995:00:00:06 -0400] \"GET /shuttle/countdown/\" 304 -")
                .unwrap();
        assert_eq!(
            (record.url.as_str(), record.status, record.size),
            ("/shuttle/countdown/", 304, 0)
        );
        let quoted =
            parse_line("h - - [01/Jul/1995:00:00:06 -0400] \"GET /a\"b.html HTTP/1.0\" 404 0")
                .unwrap();
        assert_eq!(quoted.url, "/a\"b.html");
    }

    #[test]
    fn malformed_lines_say_why() {
        for line in [
            "",
            "host",
            "host - - 01/Jul/1995:00:00:01 -0400 \"GET / HTTP/1.0\" 200 1",
            "host - - [01/Jul/1995:00:00:01 -0400 \"GET / HTTP/1.0\" 200 1",
            "host - - [01/Jul/1995:00:00:01 -0400] GET / HTTP/1.0 200 1",
            "host - - [01/Jul/1995:00:00:01 -0400] \"GET / HTTP/1.0\" 2000 1",
            "host - - [01/Jul/1995:00:00:01 -0400] \"GET / HTTP/1.0\" 200 x",
            "host - - [01/Jul/1995:00:00:01 -0400] \"GET / HTTP/1.0\" 200",
            "host - - [01/Jul/1995:00:00:01 -0400] \"\" 200 1",
            "host - - [01/Jul/1995:00:00:01 -0400] \"GET\" 200 1",
            "host - - [32/Jul/1995:00:00:01 -0400] \"GET / HTTP/1.0\" 200 1",
            "host - - [01/Jul/1995:00:00:01 -0400] \"G=T / HTTP/1.0\" 200 1",
            "host - - [01/Jul/1995:00:00:01 -0400] \"GET / HTTP/1.0\" 200 99999999999999999999999",
        ] {
            assert!(parse_line(line).is_err(), "{line:?}");
        }
    }
}
