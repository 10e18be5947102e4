//! The grammar of one chunk-size line (RFC 9112 §7.1, §7.1.1), checked byte by byte:
//! [`SizeLine`].
//!
//! ```text
//! chunk-size-line = chunk-size [ chunk-ext ] CRLF
//! chunk-size      = 1*HEXDIG
//! chunk-ext       = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//! chunk-ext-name  = token
//! chunk-ext-val   = token / quoted-string
//! ```
//!
//! Invariants: nothing outside that grammar is accepted — no `0x` prefix, sign, leading
//! whitespace, whitespace after the size or after an extension unless another `;` or `=`
//! follows, no empty extension name, no unterminated quoted string, no control byte. Lenient
//! size lines are how one parser's chunk becomes another parser's request ("funky chunks"),
//! so the proxy and the origin must never be able to read the same line two ways. Extension
//! names and values are checked, never interpreted.

use crate::error::HttpError;

/// Where in a size line the last byte left us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SizeLine {
    /// At the start: a hex digit must come.
    Start,
    /// After one or more hex digits.
    Digits,
    /// Whitespace after the size: only `;` (or more whitespace) may follow.
    AfterSize,
    /// After `;`, before the extension's name (whitespace allowed).
    NameStart,
    /// Inside an extension name.
    Name,
    /// Whitespace after a name: `=` or `;` must follow.
    AfterName,
    /// After `=`, before the value (whitespace allowed).
    ValueStart,
    /// Inside a token value.
    Token,
    /// Inside a quoted-string value.
    Quoted,
    /// After a backslash in a quoted string.
    QuotedEscape,
    /// After a value (token ended by whitespace, or a closing quote): `;` or CR.
    AfterValue,
    /// Whitespace after a value: only `;` (or more whitespace) may follow.
    AfterValueSpace,
}

/// What one byte did to the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineStep {
    /// More of the line follows.
    Continue(SizeLine),
    /// A hex digit of the size (its value).
    Digit(u8),
    /// The CR that ends the line (the LF must follow).
    End,
}

/// True for a `tchar` (RFC 9110 §5.6.2).
pub(crate) fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric()
        || matches!(
            byte,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
}

fn invalid(reason: &'static str) -> HttpError {
    HttpError::InvalidChunkedBody(reason)
}

impl SizeLine {
    /// Advances by one byte of the line.
    pub(crate) fn step(self, byte: u8) -> Result<LineStep, HttpError> {
        use LineStep::{Continue, Digit, End};
        use SizeLine::*;
        let whitespace = byte == b' ' || byte == b'\t';
        Ok(match self {
            Start | Digits if byte.is_ascii_hexdigit() => Digit(hex_value(byte)),
            Start => return Err(invalid("missing chunk size")),
            Digits | AfterValue | Token | Name if byte == b'\r' => End,
            Digits | AfterSize if whitespace => Continue(AfterSize),
            Digits | AfterSize | AfterName | AfterValue | AfterValueSpace | Token | Name
                if byte == b';' =>
            {
                Continue(NameStart)
            }
            Digits => return Err(invalid("invalid chunk size")),
            AfterSize => return Err(invalid("whitespace after chunk size")),
            NameStart if whitespace => Continue(NameStart),
            NameStart | Name if is_tchar(byte) => Continue(Name),
            NameStart => return Err(invalid("invalid chunk extension name")),
            Name | AfterName if whitespace => Continue(AfterName),
            Name | AfterName if byte == b'=' => Continue(ValueStart),
            Name => return Err(invalid("invalid chunk extension name")),
            AfterName => return Err(invalid("whitespace at the end of a chunk extension")),
            ValueStart if whitespace => Continue(ValueStart),
            ValueStart if byte == b'"' => Continue(Quoted),
            ValueStart | Token if is_tchar(byte) => Continue(Token),
            ValueStart => return Err(invalid("invalid chunk extension value")),
            Token | AfterValue | AfterValueSpace if whitespace => Continue(AfterValueSpace),
            Token => return Err(invalid("invalid chunk extension value")),
            Quoted if byte == b'"' => Continue(AfterValue),
            Quoted if byte == b'\\' => Continue(QuotedEscape),
            Quoted if is_qdtext(byte) => Continue(Quoted),
            Quoted => return Err(invalid("invalid byte in a quoted chunk extension")),
            QuotedEscape if byte == b'\t' || byte == b' ' || is_vchar_or_obs(byte) => {
                Continue(Quoted)
            }
            QuotedEscape => return Err(invalid("invalid quoted-pair in a chunk extension")),
            AfterValue => return Err(invalid("invalid byte after a chunk extension")),
            AfterValueSpace => return Err(invalid("whitespace at the end of a chunk extension")),
        })
    }
}

/// `qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text`.
fn is_qdtext(byte: u8) -> bool {
    matches!(byte, b'\t' | b' ' | 0x21 | 0x23..=0x5b | 0x5d..=0x7e | 0x80..=0xff)
}

/// `VCHAR / obs-text`.
pub(crate) fn is_vchar_or_obs(byte: u8) -> bool {
    matches!(byte, 0x21..=0x7e | 0x80..=0xff)
}

fn hex_value(byte: u8) -> u8 {
    match byte {
        b'0'..=b'9' => byte - b'0',
        b'a'..=b'f' => byte - b'a' + 10,
        b'A'..=b'F' => byte - b'A' + 10,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a whole line (up to and including its CR); Ok(size) when it ends well.
    fn line(text: &[u8]) -> Result<u64, HttpError> {
        let mut state = SizeLine::Start;
        let mut size = 0u64;
        for &byte in text {
            match state.step(byte)? {
                LineStep::Continue(next) => state = next,
                LineStep::Digit(value) => {
                    size = size * 16 + u64::from(value);
                    state = SizeLine::Digits;
                }
                LineStep::End => return Ok(size),
            }
        }
        Err(invalid("unterminated"))
    }

    #[test]
    fn rfc9112_section_7_1_valid_size_lines() {
        for (text, size) in [
            (&b"5\r"[..], 5),
            (b"00A\r", 10),
            (b"5;a\r", 5),
            (b"5;a=b\r", 5),
            (b"5 ;a\r", 5),
            (b"5\t; a = b ; c\r", 5),
            (b"5;a=\"q s;\\\"x\"\r", 5),
            (b"5;a=\"\"\r", 5),
            (b"5;a=b;c=\"d\"\r", 5),
        ] {
            assert_eq!(line(text), Ok(size), "{:?}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn rfc9112_section_7_1_1_malformed_size_lines() {
        for text in [
            &b"0x5\r"[..],
            b"+5\r",
            b"-5\r",
            b" 5\r",
            b"5 \r",
            b"5\t\r",
            b"5;\r",
            b"5;=x\r",
            b"5;a b\r",
            b"5;a \r",
            b"5;a=\r",
            b"5;a= \r",
            b"5;a=b \r",
            b"5;a=\"unterminated\r",
            b"5;a=\"x\"y\r",
            b"5;a=b\"c\"\r",
            b"5;a\x01\r",
            b"5;a=\"\x01\"\r",
            b"5;a=\x7f\r",
            b"5 5\r",
            b";a\r",
            b"5\n",
        ] {
            assert!(line(text).is_err(), "{:?}", String::from_utf8_lossy(text));
        }
    }
}
