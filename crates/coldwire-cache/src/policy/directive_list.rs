//! The list syntax shared by `Cache-Control` (RFC 9111 §5.2) and the targeted fields
//! (RFC 9213, Structured Field Dictionaries): members split at commas outside quoted
//! strings ([`members`]), a member split into name and argument ([`directive`]), and the
//! types RFC 9213 §2.1 infers for a targeted field's arguments ([`typed_argument`]).
//!
//! Invariants: nothing here fails or allocates; a backslash inside a quoted string escapes
//! the next byte, so `"a\", b"` is one string; whitespace is never trimmed around `=`.

use coldwire_http::fields::trim_ows;

/// `value` split at every `separator` outside quoted strings, pieces as they are (empty
/// ones and surrounding whitespace kept: a Structured Field parser rejects those).
pub(crate) fn split_outside_quotes(value: &[u8], separator: u8) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(value);
    std::iter::from_fn(move || {
        let current = rest?;
        let (mut quoted, mut escaped) = (false, false);
        let end = current.iter().position(|&byte| {
            if escaped {
                escaped = false;
            } else if quoted && byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                quoted = !quoted;
            } else if byte == separator && !quoted {
                return true;
            }
            false
        });
        match end {
            Some(end) => {
                rest = current.get(end + 1..);
                current.get(..end)
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}

/// The members of a comma-separated directive list: split outside quoted strings, outer
/// whitespace trimmed, empty members skipped.
pub(crate) fn members(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    split_outside_quotes(value, b',')
        .map(trim_ows)
        .filter(|member| !member.is_empty())
}

/// A member's name and argument (the bytes after the first `=`, untrimmed).
pub(crate) fn directive(member: &[u8]) -> (&[u8], Option<&[u8]>) {
    match member.iter().position(|&byte| byte == b'=') {
        Some(equals) => (
            member.get(..equals).unwrap_or(&[]),
            Some(member.get(equals + 1..).unwrap_or(&[])),
        ),
        None => (member, None),
    }
}

/// Directives whose argument is a number of seconds (an Integer in a targeted field).
const SECONDS: [&str; 6] = [
    "max-age",
    "s-maxage",
    "stale-while-revalidate",
    "stale-if-error",
    "min-fresh",
    "max-stale",
];

/// Directives whose argument may list field names (a String in a targeted field).
const FIELD_LISTS: [&str; 2] = ["no-cache", "private"];

/// RFC 9213 §2.1: a targeted field's member read with the types its directive implies —
/// seconds are non-negative Integers, `no-cache` / `private` may carry a String, every
/// other directive is a Boolean (`?1` or no value: present; `?0`: absent). Parameters
/// (`;x=1`) are dropped. `None` when the value is of another type: RFC 9213 says not to
/// consume it (no coercing `max-age="60"` or `max-age=1.5`), so the directive is ignored.
/// `Some(argument)` is what to apply, as [`directive`] would give it.
pub(crate) fn typed_argument<'a>(
    name: &[u8],
    argument: Option<&'a [u8]>,
) -> Option<Option<&'a [u8]>> {
    let is_one_of = |names: &[&str]| {
        names
            .iter()
            .any(|known| name.eq_ignore_ascii_case(known.as_bytes()))
    };
    let value = match argument {
        Some(argument) => split_outside_quotes(argument, b';').next(),
        None => None,
    };
    if is_one_of(&SECONDS) {
        let digits = value?;
        let integer =
            !digits.is_empty() && digits.len() <= 15 && digits.iter().all(u8::is_ascii_digit);
        return integer.then_some(Some(digits));
    }
    match value {
        None | Some(b"?1") => Some(None),
        Some(b"?0") => None,
        Some(string) if string.starts_with(b"\"") && is_one_of(&FIELD_LISTS) => Some(Some(string)),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commas_inside_quoted_strings_do_not_split() {
        let pieces: Vec<&[u8]> = split_outside_quotes(b"a=\"x, \\\"y,\", b,, c", b',').collect();
        assert_eq!(pieces, [&b"a=\"x, \\\"y,\""[..], b" b", b"", b" c"]);
        let members: Vec<&[u8]> = members(b" a , ,b=\"1,2\" ").collect();
        assert_eq!(members, [&b"a"[..], b"b=\"1,2\""]);
    }

    #[test]
    fn rfc9213_2_1_targeted_arguments_keep_their_inferred_types() {
        assert_eq!(
            typed_argument(b"max-age", Some(b"60")),
            Some(Some(&b"60"[..]))
        );
        assert_eq!(
            typed_argument(b"max-age", Some(b"60;a=1")),
            Some(Some(&b"60"[..]))
        );
        for wrong in [
            &b"\"60\""[..],
            b"1.5",
            b"-1",
            b"?1",
            b"abc",
            b"1234567890123456",
        ] {
            assert_eq!(typed_argument(b"max-age", Some(wrong)), None, "{wrong:?}");
        }
        assert_eq!(typed_argument(b"max-age", None), None);
        assert_eq!(typed_argument(b"no-store", None), Some(None));
        assert_eq!(typed_argument(b"no-store", Some(b"?1")), Some(None));
        assert_eq!(typed_argument(b"no-store", Some(b"?0")), None);
        assert_eq!(typed_argument(b"no-store", Some(b"\"x\"")), None);
        assert_eq!(
            typed_argument(b"private", Some(b"\"set-cookie\"")),
            Some(Some(&b"\"set-cookie\""[..]))
        );
    }
}
