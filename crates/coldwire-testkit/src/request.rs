//! What a test origin receives: one request read leniently from a connection — request
//! line, fields (names lower-cased, the last of repeated names kept) and a body framed by
//! `Content-Length` or chunked. Origins that must judge the bytes strictly (the smuggling
//! suite's recording origin) parse them themselves.

use std::collections::HashMap;
use std::io::BufRead;

/// A request as a test origin saw it.
#[derive(Debug, Default)]
pub struct OriginRequest {
    /// Method.
    pub method: String,
    /// Target as sent (origin form from a proxy).
    pub path: String,
    /// Fields, names lower-cased.
    pub headers: HashMap<String, String>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl OriginRequest {
    /// A field's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// The path without its query.
    pub fn route(&self) -> &str {
        self.path.split('?').next().unwrap_or("")
    }
}

/// Reads the next request from `reader`; `None` when the connection ends (or times out)
/// before a complete head.
pub fn read_request(reader: &mut impl BufRead) -> Option<OriginRequest> {
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let mut request = OriginRequest {
        method: parts.next().unwrap_or("").to_owned(),
        path: parts.next().unwrap_or("").to_owned(),
        ..OriginRequest::default()
    };
    loop {
        let mut field = String::new();
        if reader.read_line(&mut field).unwrap_or(0) == 0 {
            return None;
        }
        let field = field.trim_end();
        if field.is_empty() {
            break;
        }
        if let Some((name, value)) = field.split_once(':') {
            request
                .headers
                .insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    request.body = read_body(reader, &request.headers);
    Some(request)
}

fn read_body(reader: &mut impl BufRead, headers: &HashMap<String, String>) -> Vec<u8> {
    let mut body = Vec::new();
    if let Some(length) = headers
        .get("content-length")
        .and_then(|value| value.parse::<usize>().ok())
    {
        body.resize(length, 0);
        let _ = reader.read_exact(&mut body);
    } else if headers
        .get("transfer-encoding")
        .is_some_and(|value| value.contains("chunked"))
    {
        loop {
            let mut size = String::new();
            if reader.read_line(&mut size).unwrap_or(0) == 0 {
                break;
            }
            let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            if size == 0 {
                let mut end = String::new();
                let _ = reader.read_line(&mut end);
                break;
            }
            let mut chunk = vec![0; size + 2];
            let _ = reader.read_exact(&mut chunk);
            body.extend_from_slice(&chunk[..size]);
        }
    }
    body
}
