//! Small helpers for header field values: optional-whitespace trimming and comma-separated
//! lists (RFC 9110 §5.6.1).
//!
//! Invariants: everything here borrows from its input, never allocates and never panics.
//! List splitting is purely syntactic on `,`: quoted strings containing commas are not
//! recognised, which only matters for parameters no caller in this crate inspects.

/// Strips leading and trailing optional whitespace (SP and HTAB) from a field value.
pub fn trim_ows(value: &[u8]) -> &[u8] {
    let start = value
        .iter()
        .position(|&byte| byte != b' ' && byte != b'\t')
        .unwrap_or(value.len());
    let end = value
        .iter()
        .rposition(|&byte| byte != b' ' && byte != b'\t')
        .map_or(start, |last| last + 1);
    value.get(start..end).unwrap_or(&[])
}

/// Iterates the non-empty, whitespace-trimmed members of a comma-separated list value.
/// Empty members (`a,,b`, leading or trailing commas) are skipped, as RFC 9110 §5.6.1 requires.
pub fn comma_list(value: &[u8]) -> CommaList<'_> {
    CommaList { rest: Some(value) }
}

/// Iterator returned by [`comma_list`].
#[derive(Debug, Clone)]
pub struct CommaList<'a> {
    rest: Option<&'a [u8]>,
}

impl<'a> Iterator for CommaList<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            let rest = self.rest?;
            let member = match rest.iter().position(|&byte| byte == b',') {
                Some(comma) => {
                    self.rest = rest.get(comma + 1..);
                    rest.get(..comma).unwrap_or(&[])
                }
                None => {
                    self.rest = None;
                    rest
                }
            };
            let member = trim_ows(member);
            if !member.is_empty() {
                return Some(member);
            }
        }
    }
}

/// True when the comma-separated list `value` contains `token` (ASCII case-insensitive),
/// e.g. `has_token(b"keep-alive, Upgrade", b"upgrade")`. Parameters after `;` are ignored.
pub fn has_token(value: &[u8], token: &[u8]) -> bool {
    comma_list(value).any(|member| strip_parameters(member).eq_ignore_ascii_case(token))
}

/// The part of a list member before any `;` parameters, whitespace-trimmed.
pub fn strip_parameters(member: &[u8]) -> &[u8] {
    let end = member
        .iter()
        .position(|&byte| byte == b';')
        .unwrap_or(member.len());
    trim_ows(member.get(..end).unwrap_or(&[]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_spaces_and_tabs_only() {
        assert_eq!(trim_ows(b" \tabc \t"), b"abc");
        assert_eq!(trim_ows(b"   "), b"");
        assert_eq!(trim_ows(b""), b"");
        assert_eq!(trim_ows(b"a b"), b"a b");
    }

    #[test]
    fn comma_list_skips_empty_members() {
        let members: Vec<&[u8]> = comma_list(b" , a,, b ,c,").collect();
        assert_eq!(members, vec![&b"a"[..], b"b", b"c"]);
        assert_eq!(comma_list(b"").count(), 0);
        assert_eq!(comma_list(b",,,").count(), 0);
    }

    #[test]
    fn has_token_is_case_insensitive() {
        assert!(has_token(b"Keep-Alive, Upgrade", b"keep-alive"));
        assert!(has_token(b"foo, CLOSE", b"close"));
        assert!(!has_token(b"closed", b"close"));
        assert!(has_token(b"chunked;q=1", b"chunked"));
    }

    proptest::proptest! {
        #[test]
        fn helpers_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let _ = trim_ows(&bytes);
            let _ = comma_list(&bytes).count();
            let _ = has_token(&bytes, b"close");
        }
    }
}
