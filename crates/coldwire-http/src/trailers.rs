//! The trailer section of a chunked message (RFC 9112 §7.1.2, RFC 9110 §6.5): each line is
//! checked as a field line (`check_field_line`), kept by the decoder, and read back with
//! [`TrailerFields`]; [`allowed_in_trailers`] says which fields may be forwarded.
//!
//! Invariants: a trailer line that is not `token ":" OWS value OWS` (no leading whitespace,
//! i.e. no obs-fold; no whitespace before the colon; no control byte but HTAB in the value)
//! is a framing error, because a recipient that reads it another way may see a different
//! message. Fields that decide framing, routing, authentication, caching or how the content
//! is processed are never allowed in trailers, whatever the sender meant (RFC 9110 §6.5.1).

use crate::chunk_line::{is_tchar, is_vchar_or_obs};
use crate::error::HttpError;
use crate::fields::trim_ows;

/// Checks one trailer line (without its CRLF) as a field line.
pub(crate) fn check_field_line(line: &[u8]) -> Result<(), HttpError> {
    let colon = line
        .iter()
        .position(|&byte| byte == b':')
        .ok_or(HttpError::InvalidChunkedBody("trailer line is not a field"))?;
    let (name, value) = line.split_at(colon);
    if name.is_empty() || !name.iter().all(|&byte| is_tchar(byte)) {
        return Err(HttpError::InvalidChunkedBody("invalid trailer field name"));
    }
    let value = value.get(1..).unwrap_or(&[]);
    if !value
        .iter()
        .all(|&byte| byte == b' ' || byte == b'\t' || is_vchar_or_obs(byte))
    {
        return Err(HttpError::InvalidChunkedBody("invalid trailer field value"));
    }
    Ok(())
}

/// True when a field named `name` may be sent in a trailer section and acted on: not one
/// of the fields RFC 9110 §6.5.1 says a sender must not put there (message framing, routing,
/// request modifiers, authentication, response control data, how to process the content),
/// nor one of the hop-by-hop fields. A proxy drops the others rather than forward them.
pub fn allowed_in_trailers(name: &[u8]) -> bool {
    const FORBIDDEN: [&[u8]; 29] = [
        b"transfer-encoding",
        b"content-length",
        b"host",
        b"trailer",
        b"te",
        b"connection",
        b"keep-alive",
        b"upgrade",
        b"expect",
        b"max-forwards",
        b"range",
        b"authorization",
        b"www-authenticate",
        b"authentication-info",
        b"cookie",
        b"set-cookie",
        b"cache-control",
        b"pragma",
        b"age",
        b"expires",
        b"date",
        b"location",
        b"retry-after",
        b"vary",
        b"warning",
        b"via",
        b"etag",
        b"last-modified",
        b"accept-ranges",
    ];
    const FORBIDDEN_PREFIXES: [&[u8]; 3] = [b"content-", b"proxy-", b"if-"];
    let normalized_equal = |forbidden: &[u8]| {
        forbidden.len() == name.len()
            && forbidden
                .iter()
                .zip(name)
                .all(|(&want, &got)| want == normalize(got))
    };
    !(FORBIDDEN
        .iter()
        .any(|forbidden| normalized_equal(forbidden))
        || FORBIDDEN_PREFIXES.iter().any(|prefix| {
            name.len() >= prefix.len()
                && prefix
                    .iter()
                    .zip(name)
                    .all(|(&want, &got)| want == normalize(got))
        }))
}

/// Lower case, with `_` read as `-` (gateways map both to the same CGI variable, so
/// `Content_Length` must be treated like `Content-Length`).
fn normalize(byte: u8) -> u8 {
    if byte == b'_' {
        b'-'
    } else {
        byte.to_ascii_lowercase()
    }
}

/// The trailer fields a decoder kept, as (name, value) with the value trimmed; returned by
/// [`ChunkedDecoder::trailers`](crate::ChunkedDecoder::trailers).
#[derive(Debug, Clone)]
pub struct TrailerFields<'a> {
    rest: &'a [u8],
}

impl<'a> TrailerFields<'a> {
    pub(crate) fn new(lines: &'a [u8]) -> TrailerFields<'a> {
        TrailerFields { rest: lines }
    }
}

impl<'a> Iterator for TrailerFields<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.rest.is_empty() {
                return None;
            }
            let end = self
                .rest
                .iter()
                .position(|&byte| byte == b'\n')
                .unwrap_or(self.rest.len());
            let (line, rest) = self.rest.split_at(end);
            self.rest = rest.get(1..).unwrap_or(&[]);
            // Only complete lines end in `\n`, and every complete line has a colon.
            if rest.is_empty() {
                return None;
            }
            if let Some(colon) = line.iter().position(|&byte| byte == b':') {
                let (name, value) = line.split_at(colon);
                return Some((name, trim_ows(value.get(1..).unwrap_or(&[]))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChunkedDecoder;

    fn trailers_of(input: &[u8]) -> Result<Vec<(String, String)>, HttpError> {
        let mut decoder = ChunkedDecoder::new();
        let progress = decoder.decode(input, |_| {})?;
        assert!(progress.done);
        Ok(decoder
            .trailers()
            .map(|(name, value)| {
                (
                    String::from_utf8_lossy(name).into_owned(),
                    String::from_utf8_lossy(value).into_owned(),
                )
            })
            .collect())
    }

    #[test]
    fn rfc9112_section_7_1_2_trailer_fields_are_kept_in_order() {
        assert_eq!(
            trailers_of(b"0\r\nX-Sum: abc \r\nExpires:\tnever\r\n\r\n"),
            Ok(vec![
                ("X-Sum".to_owned(), "abc".to_owned()),
                ("Expires".to_owned(), "never".to_owned())
            ])
        );
        assert_eq!(trailers_of(b"0\r\n\r\n"), Ok(vec![]));
        assert_eq!(
            trailers_of(b"0\r\nX-Empty:\r\n\r\n"),
            Ok(vec![("X-Empty".to_owned(), String::new())])
        );
    }

    #[test]
    fn rfc9112_section_7_1_2_trailer_lines_that_are_not_fields_are_errors() {
        for input in [
            &b"0\r\nnot a field\r\n\r\n"[..],
            b"0\r\n leading: space\r\n\r\n",
            b"0\r\n\tfold: x\r\n\r\n",
            b"0\r\n: no-name\r\n\r\n",
            b"0\r\nX : y\r\n\r\n",
            b"0\r\nX\x00Y: z\r\n\r\n",
            b"0\r\nX: a\x00b\r\n\r\n",
            b"0\r\nX: a\rb\r\n\r\n",
            b"0\r\nX: a\r\n continued\r\n\r\n",
            b"0\r\nnocolon\r\n\r\n",
        ] {
            let mut decoder = ChunkedDecoder::new();
            assert!(
                decoder.decode(input, |_| {}).is_err(),
                "{:?} must be rejected",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn rfc9110_section_6_5_1_fields_not_allowed_in_trailers() {
        for name in [
            &b"Content-Length"[..],
            b"transfer-encoding",
            b"Transfer_Encoding",
            b"Content_Length",
            b"Host",
            b"Authorization",
            b"Proxy-Authorization",
            b"Content-Type",
            b"Content-Encoding",
            b"Trailer",
            b"TE",
            b"Cache-Control",
            b"If-None-Match",
            b"Set-Cookie",
            b"Connection",
        ] {
            assert!(
                !allowed_in_trailers(name),
                "{}",
                String::from_utf8_lossy(name)
            );
        }
        for name in [
            &b"X-Checksum"[..],
            b"Server-Timing",
            b"Digest",
            b"X-Content",
        ] {
            assert!(
                allowed_in_trailers(name),
                "{}",
                String::from_utf8_lossy(name)
            );
        }
    }
}
