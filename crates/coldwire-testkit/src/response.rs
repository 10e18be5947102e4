//! Parsing HTTP responses in tests: a head into status and fields ([`parse_head`]), one
//! whole response from a stream ([`read_response`]) or from bytes ([`split_response`]),
//! and a field of a head kept as text ([`header`]).

use std::io::{self, BufRead, ErrorKind};

/// One parsed HTTP response.
#[derive(Debug)]
pub struct Response {
    /// The status line, e.g. `HTTP/1.1 200 OK`.
    pub status_line: String,
    /// The status code.
    pub status: u16,
    /// Header fields, names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    /// The body (by Content-Length; empty for HEAD, 1xx, 204 and 304).
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(field, _)| *field == name)
            .map(|(_, value)| value.as_str())
    }

    /// Content-Length as a number (panics when absent or malformed).
    pub fn content_length(&self) -> u64 {
        self.header("content-length")
            .unwrap_or_else(|| panic!("no Content-Length in {:?}", self.headers))
            .parse()
            .expect("a numeric Content-Length")
    }

    /// The body as text (lossy), for messages and contains-checks.
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A field's value in a head kept as text (the first line, the status line, never
/// matches: it has no `name:` form).
pub fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (field, value) = line.split_once(':')?;
        field.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// Parses a response head (status line and fields, without the blank line).
pub fn parse_head(head: &str) -> (String, u16, Vec<(String, String)>) {
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default().to_owned();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers = lines
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (name, value) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("bad header line {line:?}"));
            (name.trim().to_ascii_lowercase(), value.trim().to_owned())
        })
        .collect();
    (status_line, status, headers)
}

/// Reads one response from `reader`; `head_request` says the request was HEAD (no body).
/// Errors when the connection closes or times out before the response is complete.
pub fn read_response<R: BufRead>(reader: &mut R, head_request: bool) -> io::Result<Response> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let count = reader.read_line(&mut line)?;
        if count == 0 {
            return Err(io::Error::new(
                ErrorKind::UnexpectedEof,
                format!("connection closed inside a response head: {head:?}"),
            ));
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
        if head.len() > 64 * 1024 {
            return Err(io::Error::other("response head over 64 KiB"));
        }
    }
    let (status_line, status, headers) = parse_head(head.trim_end());
    let mut response = Response {
        status_line,
        status,
        headers,
        body: Vec::new(),
    };
    let bodyless = head_request || status / 100 == 1 || status == 204 || status == 304;
    if !bodyless {
        let length = response.content_length();
        let mut body = vec![0u8; usize::try_from(length).expect("a small body")];
        reader.read_exact(&mut body)?;
        response.body = body;
    }
    Ok(response)
}

/// Splits raw bytes into a response head (parsed; its body left empty) and what follows
/// it.
pub fn split_response(raw: &[u8]) -> (Response, Vec<u8>) {
    let end = raw
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no complete head in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let (status_line, status, headers) = parse_head(&head);
    let response = Response {
        status_line,
        status,
        headers,
        body: Vec::new(),
    };
    (response, raw[end + 4..].to_vec())
}
