//! A strict HTTP/1.1 request parser for the recording origin: what a careful origin
//! accepts from the proxy and nothing more. CRLF only; request line `METHOD SP TARGET SP
//! HTTP/1.1`; field lines `token ":" OWS value OWS` with visible, obs-text, SP or HTAB
//! value bytes; exactly one framing (one `Content-Length` of digits, or one
//! `Transfer-Encoding: chunked`, never both); chunked bodies by the RFC 9112 §7.1 grammar
//! (hex sizes, extensions as `;name[=token|quoted-string]`, trailer field lines).
//! Anything else is an error, reported as text.

/// One complete request.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// The head, byte for byte, including the blank line.
    pub head: Vec<u8>,
    /// The decoded body.
    pub body: Vec<u8>,
    /// Trailer fields as `name: value` (chunked only).
    pub trailers: Vec<String>,
}

/// Progress on a buffer.
#[derive(Debug)]
pub enum Parse {
    /// Not complete yet.
    Partial {
        /// The head is complete and carried `Expect: 100-continue`.
        wants_continue: bool,
    },
    /// A request and the bytes it took.
    Complete(Request, usize),
}

type Result<T> = std::result::Result<T, String>;

fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

fn is_token(bytes: &[u8]) -> bool {
    !bytes.is_empty() && bytes.iter().copied().all(is_tchar)
}

fn trim_ows(mut bytes: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = bytes {
        bytes = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = bytes {
        bytes = rest;
    }
    bytes
}

/// The next CRLF-terminated line at `at`: `Ok(None)` while incomplete; bare CR or LF is
/// an error.
fn line(buffer: &[u8], at: usize) -> Result<Option<(&[u8], usize)>> {
    let rest = buffer.get(at..).unwrap_or(&[]);
    for (index, &byte) in rest.iter().enumerate() {
        match byte {
            b'\n' => return Err(format!("bare LF at byte {}", at + index)),
            b'\r' => {
                return match rest.get(index + 1) {
                    None => Ok(None),
                    Some(b'\n') => Ok(Some((&rest[..index], at + index + 2))),
                    Some(_) => Err(format!("bare CR at byte {}", at + index)),
                };
            }
            _ => {}
        }
    }
    Ok(None)
}

/// A field line: its name and trimmed value.
fn field_line(line: &[u8]) -> Result<(&[u8], &[u8])> {
    let colon = line
        .iter()
        .position(|&byte| byte == b':')
        .ok_or_else(|| format!("field line without colon: {:?}", lossy(line)))?;
    let (name, value) = (&line[..colon], &line[colon + 1..]);
    if !is_token(name) {
        return Err(format!("invalid field name {:?}", lossy(name)));
    }
    let value = trim_ows(value);
    if value
        .iter()
        .any(|&byte| byte != b'\t' && (byte < 0x20 || byte == 0x7f))
    {
        return Err(format!("control byte in field value {:?}", lossy(value)));
    }
    Ok((name, value))
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

enum Body {
    None,
    Length(usize),
    Chunked,
}

/// Parses the request at the start of `buffer`.
pub fn parse(buffer: &[u8]) -> Result<Parse> {
    let Some((request_line, mut at)) = line(buffer, 0)? else {
        return Ok(Parse::Partial {
            wants_continue: false,
        });
    };
    let parts: Vec<&[u8]> = request_line.split(|&byte| byte == b' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(format!("bad request line {:?}", lossy(request_line)));
    };
    if !is_token(method)
        || target.is_empty()
        || target.iter().any(|&byte| !(0x21..0x7f).contains(&byte))
        || version != b"HTTP/1.1"
    {
        return Err(format!("bad request line {:?}", lossy(request_line)));
    }
    let mut lengths = Vec::new();
    let mut codings = Vec::new();
    let mut hosts = 0;
    let mut expects_continue = false;
    loop {
        let Some((field, next)) = line(buffer, at)? else {
            return Ok(Parse::Partial {
                wants_continue: false,
            });
        };
        at = next;
        if field.is_empty() {
            break;
        }
        let (name, value) = field_line(field)?;
        if name.eq_ignore_ascii_case(b"content-length") {
            lengths.push(value);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            codings.push(value);
        } else if name.eq_ignore_ascii_case(b"host") {
            hosts += 1;
        } else if name.eq_ignore_ascii_case(b"expect") {
            expects_continue |= value.eq_ignore_ascii_case(b"100-continue");
        }
    }
    if hosts != 1 {
        return Err(format!("{hosts} Host fields"));
    }
    let body = match (&lengths[..], &codings[..]) {
        ([], []) => Body::None,
        ([length], []) => {
            if length.is_empty() || !length.iter().all(u8::is_ascii_digit) || length.len() > 12 {
                return Err(format!("bad Content-Length {:?}", lossy(length)));
            }
            Body::Length(lossy(length).parse().unwrap_or(0))
        }
        ([], [coding]) if coding.eq_ignore_ascii_case(b"chunked") => Body::Chunked,
        _ => {
            let list = |values: &[&[u8]]| {
                let values: Vec<String> = values.iter().map(|value| lossy(value)).collect();
                values.join(" | ")
            };
            return Err(format!(
                "framing it does not accept: Content-Length [{}], Transfer-Encoding [{}]",
                list(&lengths),
                list(&codings)
            ));
        }
    };
    let head = buffer[..at].to_vec();
    let mut request = Request {
        head,
        ..Request::default()
    };
    let partial = Parse::Partial {
        wants_continue: expects_continue,
    };
    match body {
        Body::None => Ok(Parse::Complete(request, at)),
        Body::Length(length) => match buffer.get(at..at + length) {
            Some(body) => {
                request.body = body.to_vec();
                Ok(Parse::Complete(request, at + length))
            }
            None => Ok(partial),
        },
        Body::Chunked => match chunked(buffer, at, &mut request)? {
            Some(end) => Ok(Parse::Complete(request, end)),
            None => Ok(partial),
        },
    }
}

/// Decodes a chunked body starting at `at` into `request`; the end, or `None` while
/// incomplete.
fn chunked(buffer: &[u8], mut at: usize, request: &mut Request) -> Result<Option<usize>> {
    loop {
        let Some((size_line, next)) = line(buffer, at)? else {
            return Ok(None);
        };
        let size = chunk_size(size_line)?;
        at = next;
        if size == 0 {
            break;
        }
        let Some(data) = buffer.get(at..at + size) else {
            return Ok(None);
        };
        match buffer.get(at + size..at + size + 2) {
            None => return Ok(None),
            Some(b"\r\n") => {}
            Some(other) => return Err(format!("chunk data not followed by CRLF: {other:?}")),
        }
        request.body.extend_from_slice(data);
        at += size + 2;
    }
    loop {
        let Some((field, next)) = line(buffer, at)? else {
            return Ok(None);
        };
        at = next;
        if field.is_empty() {
            return Ok(Some(at));
        }
        let (name, value) = field_line(field)?;
        request
            .trailers
            .push(format!("{}: {}", lossy(name), lossy(value)));
    }
}

/// `1*HEXDIG *( BWS ";" BWS token [ BWS "=" BWS ( token / quoted-string ) ] )`.
fn chunk_size(line: &[u8]) -> Result<usize> {
    let bad = || format!("bad chunk-size line {:?}", lossy(line));
    let digits = line
        .iter()
        .take_while(|byte| byte.is_ascii_hexdigit())
        .count();
    if digits == 0 || digits > 12 {
        return Err(bad());
    }
    let size = usize::from_str_radix(&lossy(&line[..digits]), 16).map_err(|_| bad())?;
    let mut rest = &line[digits..];
    let skip_bws = |bytes: &mut &[u8]| {
        while let [b' ' | b'\t', tail @ ..] = *bytes {
            *bytes = tail;
        }
    };
    let take_token = |bytes: &mut &[u8]| -> bool {
        let length = bytes.iter().take_while(|&&byte| is_tchar(byte)).count();
        *bytes = &bytes[length..];
        length > 0
    };
    loop {
        let mut before_semicolon = rest;
        skip_bws(&mut before_semicolon);
        let Some((b';', tail)) = before_semicolon.split_first() else {
            break;
        };
        rest = tail;
        skip_bws(&mut rest);
        if !take_token(&mut rest) {
            return Err(bad());
        }
        let mut after_name = rest;
        skip_bws(&mut after_name);
        let Some((b'=', tail)) = after_name.split_first() else {
            continue;
        };
        rest = tail;
        skip_bws(&mut rest);
        if let Some((b'"', tail)) = rest.split_first() {
            rest = quoted_string_rest(tail).ok_or_else(bad)?;
        } else if !take_token(&mut rest) {
            return Err(bad());
        }
    }
    if rest.is_empty() {
        Ok(size)
    } else {
        Err(bad())
    }
}

/// What follows a quoted string whose opening quote is already consumed.
fn quoted_string_rest(mut bytes: &[u8]) -> Option<&[u8]> {
    loop {
        match bytes.split_first()? {
            (b'"', tail) => return Some(tail),
            (b'\\', tail) => {
                let (&escaped, tail) = tail.split_first()?;
                if escaped != b'\t' && (escaped < 0x20 || escaped == 0x7f) {
                    return None;
                }
                bytes = tail;
            }
            (&byte, tail) => {
                if byte != b'\t' && (byte < 0x20 || byte == 0x7f) {
                    return None;
                }
                bytes = tail;
            }
        }
    }
}
