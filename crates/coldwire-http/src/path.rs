//! Turning a request path into a safe, root-relative file path: percent-decoding
//! ([`percent_decode_path`]) and normalisation ([`normalize_path`]), or both at once
//! ([`resolve_path`]).
//!
//! Invariants: decoding happens before normalisation, so an encoded `..` (`%2e%2e`) or an
//! encoded separator (`%2F`) is seen exactly as the filesystem would see it. A normalised path
//! never contains a `..` segment, an empty segment, a `.` segment, a NUL byte, or a leading
//! `/`; joining it to a document root cannot escape the root. Bytes are not required to be
//! UTF-8, and `\` is an ordinary byte (Linux semantics). Both steps reuse the caller's buffer,
//! so in steady state they do not allocate.

use crate::error::HttpError;

/// Percent-decodes `path` into `out` (which is cleared first).
///
/// `%XX` with two hex digits becomes that byte; `+` stays `+` (form encoding applies to
/// queries, not paths). A `%` not followed by two hex digits is [`HttpError::BadRequest`], and
/// so is any decoded or literal NUL byte.
pub fn percent_decode_path(path: &str, out: &mut Vec<u8>) -> Result<(), HttpError> {
    out.clear();
    let bytes = path.as_bytes();
    if !bytes.contains(&b'%') {
        // Common case: nothing to decode (memchr-speed scans instead of a byte loop).
        if bytes.contains(&0) {
            return Err(HttpError::BadRequest("NUL byte in path"));
        }
        out.extend_from_slice(bytes);
        return Ok(());
    }
    out.reserve(path.len());
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        let decoded = if byte == b'%' {
            let high = bytes.get(index + 1).copied().and_then(hex_value);
            let low = bytes.get(index + 2).copied().and_then(hex_value);
            match (high, low) {
                (Some(high), Some(low)) => {
                    index += 3;
                    (high << 4) | low
                }
                _ => return Err(HttpError::BadRequest("invalid percent-encoding in path")),
            }
        } else {
            index += 1;
            byte
        };
        if decoded == 0 {
            return Err(HttpError::BadRequest("NUL byte in path"));
        }
        out.push(decoded);
    }
    Ok(())
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// Normalises a decoded absolute path in place into a path relative to the root.
///
/// The leading `/` is removed, empty segments (`//`) and `.` segments are dropped, and a
/// trailing `/` is kept when the input ended in `/` or `/.` (so it still names a directory):
/// `"/a//./b/"` → `"a/b/"`, `"/"` → `""`, `"/a/."` → `"a/"`.
///
/// Errors: a path not starting with `/` or containing NUL → [`HttpError::BadRequest`];
/// any `..` segment, wherever it is → [`HttpError::Forbidden`] (403), even when it would stay
/// inside the root, because no legitimate client sends one.
pub fn normalize_path(path: &mut Vec<u8>) -> Result<(), HttpError> {
    if path.first() != Some(&b'/') {
        return Err(HttpError::BadRequest("path must start with /"));
    }
    if path.contains(&0) {
        return Err(HttpError::BadRequest("NUL byte in path"));
    }
    let len = path.len();
    let mut read = 1;
    let mut write = 0;
    let mut ends_as_directory;
    loop {
        let rest = path.get(read..).unwrap_or(&[]);
        let segment_end = rest
            .iter()
            .position(|&byte| byte == b'/')
            .map_or(len, |slash| read + slash);
        let segment_len = segment_end - read;
        match path.get(read..segment_end).unwrap_or(&[]) {
            b"" | b"." => ends_as_directory = true,
            b".." => return Err(HttpError::Forbidden("'..' segment in path")),
            _ => {
                // Invariant: write < read here, so the copy only moves bytes leftwards
                // inside the vector.
                if write > 0 {
                    if let Some(slot) = path.get_mut(write) {
                        *slot = b'/';
                    }
                    write += 1;
                }
                if segment_end <= len && write + segment_len <= len {
                    path.copy_within(read..segment_end, write);
                }
                write += segment_len;
                ends_as_directory = false;
            }
        }
        if segment_end >= len {
            break;
        }
        read = segment_end + 1;
    }
    if ends_as_directory
        && write > 0
        && let Some(slot) = path.get_mut(write)
    {
        *slot = b'/';
        write += 1;
    }
    path.truncate(write);
    Ok(())
}

/// Percent-decodes then normalises a raw origin-form path (without its query) into `out`,
/// which is cleared first. See [`percent_decode_path`] and [`normalize_path`] for the rules.
pub fn resolve_path(raw_path: &str, out: &mut Vec<u8>) -> Result<(), HttpError> {
    percent_decode_path(raw_path, out)?;
    normalize_path(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(raw: &str) -> Result<Vec<u8>, HttpError> {
        let mut out = Vec::new();
        resolve_path(raw, &mut out).map(|()| out)
    }

    #[test]
    fn decodes_escapes() {
        let mut out = Vec::new();
        percent_decode_path("/a%20b%2fc%C3%A9+", &mut out).expect("valid");
        assert_eq!(out, b"/a b/c\xc3\xa9+");
        assert!(percent_decode_path("/%zz", &mut out).is_err());
        assert!(percent_decode_path("/%4", &mut out).is_err());
        assert!(percent_decode_path("/%", &mut out).is_err());
        assert_eq!(
            percent_decode_path("/a%00b", &mut out),
            Err(HttpError::BadRequest("NUL byte in path"))
        );
    }

    #[test]
    fn normalizes_to_root_relative() {
        assert_eq!(resolved("/").unwrap(), b"");
        assert_eq!(resolved("//").unwrap(), b"");
        assert_eq!(resolved("/./").unwrap(), b"");
        assert_eq!(resolved("/a/b/").unwrap(), b"a/b/");
        assert_eq!(resolved("/a//b").unwrap(), b"a/b");
        assert_eq!(resolved("/a/./b/.").unwrap(), b"a/b/");
        assert_eq!(resolved("/index.html").unwrap(), b"index.html");
        assert_eq!(resolved("/...").unwrap(), b"...");
        assert_eq!(resolved("/..\\x").unwrap(), b"..\\x");
        assert_eq!(resolved("/.hidden/").unwrap(), b".hidden/");
    }

    #[test]
    fn rejects_dot_dot_even_when_encoded() {
        for raw in [
            "/../etc/passwd",
            "/%2e%2e/etc/passwd",
            "/a/%2E%2e",
            "/a/..",
            "/a/%2e./b",
            "/a%2f..%2fb",
        ] {
            assert!(
                matches!(resolved(raw), Err(HttpError::Forbidden(_))),
                "{raw} must be forbidden"
            );
        }
    }

    #[test]
    fn rejects_relative_input() {
        let mut path = b"a/b".to_vec();
        assert!(matches!(
            normalize_path(&mut path),
            Err(HttpError::BadRequest(_))
        ));
        let mut empty = Vec::new();
        assert!(normalize_path(&mut empty).is_err());
    }

    proptest::proptest! {
        #[test]
        fn normalized_paths_are_safe(raw in "/[a-z./%2eE0]{0,40}") {
            if let Ok(path) = resolved(&raw) {
                proptest::prop_assert!(path.first() != Some(&b'/'));
                for segment in path.split(|&byte| byte == b'/') {
                    proptest::prop_assert!(segment != b".." && segment != b".");
                }
                proptest::prop_assert!(!path.windows(2).any(|pair| pair == b"//"));
                // Idempotent: re-rooting and normalising again changes nothing.
                let mut again = Vec::with_capacity(path.len() + 1);
                again.push(b'/');
                again.extend_from_slice(&path);
                normalize_path(&mut again).expect("already normal");
                proptest::prop_assert_eq!(again, path);
            }
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let mut path = bytes;
            let _ = normalize_path(&mut path);
        }
    }
}
