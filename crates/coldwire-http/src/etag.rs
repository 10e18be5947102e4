//! Entity tags (RFC 9110 §8.8.3): an owned, inline [`ETag`] for a representation's own
//! validator, a borrowed [`EntityTagRef`] for tags read from requests, the strong and weak
//! comparison functions, and `If-Match` / `If-None-Match` list matching.
//!
//! Invariants: an [`ETag`] always holds a syntactically valid entity-tag in wire form
//! (`"xyz"` or `W/"xyz"`) of at most [`ETAG_MAX_LEN`] bytes, stored inline so building or
//! copying one never allocates. Longer tags (e.g. from an upstream) are refused, which only
//! disables etag-based revalidation for that representation.

use std::time::SystemTime;

use crate::date::unix_seconds;
use crate::fields::trim_ows;

/// Maximum wire length of an [`ETag`], including `W/` and the quotes.
pub const ETAG_MAX_LEN: usize = 96;

/// An entity tag in wire form, stored inline.
#[derive(Clone, Copy)]
pub struct ETag {
    bytes: [u8; ETAG_MAX_LEN],
    len: u8,
    weak: bool,
}

/// An entity tag borrowed from a field value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntityTagRef<'a> {
    /// True for `W/"..."`.
    pub weak: bool,
    /// The characters between the quotes.
    pub opaque: &'a [u8],
}

impl ETag {
    /// Parses a single entity-tag (surrounding whitespace allowed). `None` if the value is not
    /// exactly one valid entity-tag or is longer than [`ETAG_MAX_LEN`].
    pub fn parse(value: &[u8]) -> Option<ETag> {
        let (tag, rest) = parse_entity_tag_prefix(trim_ows(value))?;
        if !rest.is_empty() {
            return None;
        }
        ETag::from_parts(tag.weak, tag.opaque)
    }

    /// Builds an entity tag from its opaque part. `None` if `opaque` contains a byte not
    /// allowed in an entity-tag (`"`, controls, space) or the result would be too long.
    pub fn from_parts(weak: bool, opaque: &[u8]) -> Option<ETag> {
        if !opaque.iter().all(|&byte| is_etag_char(byte)) {
            return None;
        }
        let prefix: &[u8] = if weak { b"W/\"" } else { b"\"" };
        let total = prefix.len() + opaque.len() + 1;
        if total > ETAG_MAX_LEN {
            return None;
        }
        let mut bytes = [0u8; ETAG_MAX_LEN];
        bytes.get_mut(..prefix.len())?.copy_from_slice(prefix);
        bytes
            .get_mut(prefix.len()..total - 1)?
            .copy_from_slice(opaque);
        *bytes.get_mut(total - 1)? = b'"';
        Some(ETag {
            bytes,
            len: total as u8,
            weak,
        })
    }

    /// The strong validator nginx uses for static files: `"<mtime secs hex>-<size hex>"`,
    /// e.g. `"5e0b8c2f-1a4"`. Changes whenever the file's size or mtime second changes.
    pub fn from_size_and_mtime(size: u64, mtime: SystemTime) -> ETag {
        let mut bytes = [0u8; ETAG_MAX_LEN];
        let mut len = 0;
        let mut push = |byte: u8| {
            if let Some(slot) = bytes.get_mut(len) {
                *slot = byte;
                len += 1;
            }
        };
        push(b'"');
        push_hex(unix_seconds(mtime), &mut push);
        push(b'-');
        push_hex(size, &mut push);
        push(b'"');
        ETag {
            bytes,
            len: len as u8,
            weak: false,
        }
    }

    /// True for a weak tag (`W/"..."`).
    pub fn is_weak(&self) -> bool {
        self.weak
    }

    /// The wire form, ready to be a field value: `"xyz"` or `W/"xyz"`.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..usize::from(self.len)).unwrap_or(&[])
    }

    /// The tag as a borrowed [`EntityTagRef`].
    pub fn as_tag_ref(&self) -> EntityTagRef<'_> {
        let start = if self.weak { 3 } else { 1 };
        let end = usize::from(self.len).saturating_sub(1);
        EntityTagRef {
            weak: self.weak,
            opaque: self.bytes.get(start..end).unwrap_or(&[]),
        }
    }
}

impl PartialEq for ETag {
    fn eq(&self, other: &ETag) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for ETag {}

impl std::fmt::Debug for ETag {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "ETag({})",
            String::from_utf8_lossy(self.as_bytes())
        )
    }
}

fn push_hex(value: u64, push: &mut impl FnMut(u8)) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut started = false;
    for shift in (0..16).rev() {
        let nibble = ((value >> (shift * 4)) & 0xf) as usize;
        if nibble != 0 || started || shift == 0 {
            started = true;
            push(DIGITS.get(nibble).copied().unwrap_or(b'0'));
        }
    }
}

/// `etagc = %x21 / %x23-7E / obs-text`.
fn is_etag_char(byte: u8) -> bool {
    byte == 0x21 || (0x23..=0x7e).contains(&byte) || byte >= 0x80
}

/// Parses one entity-tag at the start of `input`, returning it and the unparsed rest.
pub(crate) fn parse_entity_tag_prefix(input: &[u8]) -> Option<(EntityTagRef<'_>, &[u8])> {
    let (weak, quoted) = match input.strip_prefix(b"W/") {
        Some(rest) => (true, rest),
        None => (false, input),
    };
    let inner = quoted.strip_prefix(b"\"")?;
    let close = inner.iter().position(|&byte| byte == b'"')?;
    let opaque = inner.get(..close)?;
    if !opaque.iter().all(|&byte| is_etag_char(byte)) {
        return None;
    }
    Some((EntityTagRef { weak, opaque }, inner.get(close + 1..)?))
}

/// Strong comparison (RFC 9110 §8.8.3.2): both tags strong and opaque parts identical.
pub fn strong_match(left: EntityTagRef<'_>, right: EntityTagRef<'_>) -> bool {
    !left.weak && !right.weak && left.opaque == right.opaque
}

/// Weak comparison: opaque parts identical, weakness ignored.
pub fn weak_match(left: EntityTagRef<'_>, right: EntityTagRef<'_>) -> bool {
    left.opaque == right.opaque
}

/// Whether an `If-Match` / `If-None-Match` field value matches the current tag.
///
/// `*` matches whenever a current representation exists (callers evaluate conditionals only
/// for existing representations, so it always matches here, even without a tag). Otherwise
/// the value is a comma-separated list of entity-tags compared with `strong` (If-Match) or
/// weak (If-None-Match) comparison; a malformed member stops the scan and counts as no match.
pub fn list_matches(value: &[u8], current: Option<&ETag>, strong: bool) -> bool {
    let value = trim_ows(value);
    if value == b"*" {
        return true;
    }
    let Some(current) = current.map(ETag::as_tag_ref) else {
        return false;
    };
    let mut rest = value;
    loop {
        rest = trim_list_separators(rest);
        if rest.is_empty() {
            return false;
        }
        let Some((tag, after)) = parse_entity_tag_prefix(rest) else {
            return false;
        };
        let matched = if strong {
            strong_match(tag, current)
        } else {
            weak_match(tag, current)
        };
        if matched {
            return true;
        }
        let after = trim_ows(after);
        if !after.is_empty() && after.first() != Some(&b',') {
            return false;
        }
        rest = after;
    }
}

fn trim_list_separators(mut rest: &[u8]) -> &[u8] {
    while let Some((&first, tail)) = rest.split_first() {
        if matches!(first, b' ' | b'\t' | b',') {
            rest = tail;
        } else {
            break;
        }
    }
    rest
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn parses_and_formats() {
        let strong = ETag::parse(b" \"abc\" ").expect("valid");
        assert!(!strong.is_weak());
        assert_eq!(strong.as_bytes(), b"\"abc\"");
        assert_eq!(strong.as_tag_ref().opaque, b"abc");
        let weak = ETag::parse(b"W/\"abc\"").expect("valid");
        assert!(weak.is_weak());
        assert_eq!(weak.as_bytes(), b"W/\"abc\"");
        assert_eq!(weak.as_tag_ref().opaque, b"abc");
        assert_eq!(
            ETag::parse(b"\"\"").map(|tag| tag.as_tag_ref().opaque.len()),
            Some(0)
        );
        assert!(ETag::parse(b"abc").is_none());
        assert!(ETag::parse(b"\"abc").is_none());
        assert!(ETag::parse(b"\"a\" \"b\"").is_none());
        assert!(ETag::parse(b"w/\"abc\"").is_none());
        assert!(ETag::from_parts(false, &[b'a'; ETAG_MAX_LEN]).is_none());
        assert!(ETag::from_parts(false, b"a b").is_none());
    }

    #[test]
    fn nginx_style_file_tag() {
        let mtime = UNIX_EPOCH + Duration::from_secs(0x5e0b_8c2f);
        let tag = ETag::from_size_and_mtime(0x1a4, mtime);
        assert_eq!(tag.as_bytes(), b"\"5e0b8c2f-1a4\"");
        let zero = ETag::from_size_and_mtime(0, UNIX_EPOCH);
        assert_eq!(zero.as_bytes(), b"\"0-0\"");
        let max = ETag::from_size_and_mtime(u64::MAX, UNIX_EPOCH);
        assert_eq!(max.as_bytes(), b"\"0-ffffffffffffffff\"");
    }

    #[test]
    fn comparison_functions() {
        let strong = EntityTagRef {
            weak: false,
            opaque: b"1",
        };
        let weak = EntityTagRef {
            weak: true,
            opaque: b"1",
        };
        assert!(strong_match(strong, strong));
        assert!(!strong_match(weak, strong));
        assert!(!strong_match(weak, weak));
        assert!(weak_match(weak, strong));
        assert!(weak_match(weak, weak));
    }

    #[test]
    fn list_matching() {
        let current = ETag::parse(b"\"v2\"").expect("valid");
        assert!(list_matches(b"W/\"v1\", W/\"v2\"", Some(&current), false));
        assert!(!list_matches(b"W/\"v1\", W/\"v2\"", Some(&current), true));
        assert!(list_matches(b"\"v1\",\"v2\"", Some(&current), true));
        assert!(list_matches(b"*", Some(&current), true));
        assert!(list_matches(b"*", None, false));
        assert!(!list_matches(b"\"v2\"", None, false));
        assert!(!list_matches(b"garbage, \"v2\"", Some(&current), false));
        assert!(!list_matches(b"\"v1\" \"v2\"", Some(&current), false));
        assert!(!list_matches(b"", Some(&current), false));
        assert!(list_matches(b" , \"v2\" ,", Some(&current), false));
    }

    proptest::proptest! {
        #[test]
        fn list_matching_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let current = ETag::parse(b"\"x\"");
            let _ = list_matches(&bytes, current.as_ref(), true);
            let _ = list_matches(&bytes, current.as_ref(), false);
            if let Some(tag) = ETag::parse(&bytes) {
                proptest::prop_assert_eq!(ETag::parse(tag.as_bytes()), Some(tag));
            }
        }
    }
}
