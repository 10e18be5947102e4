//! `Vary` (RFC 9111 §4.1): the request fields a stored response was selected by, and the
//! check that a new request selects the same response.
//!
//! Invariants: names are lower-cased; values are normalised before they are compared, as
//! RFC 9111 §4.1 allows (see [`normalise`]): whitespace is trimmed and collapsed, dropped
//! next to commas (list separators: `1,2` selects the response stored for ` 1, 2 `, and
//! two lines are one comma-joined list), and for
//! the list-valued, case-insensitive content-negotiation fields (`Accept`,
//! `Accept-Charset`, `Accept-Encoding`, `Accept-Language`) members are lower-cased, the
//! whitespace around `;` and `=` dropped and the members sorted, so `gzip, br` selects the
//! response stored for `BR,gzip`. An absent field matches only an absent field. `Vary: *`
//! never matches (and is refused for storage by [`crate::storability`]).

use coldwire_http::owned_fields::Fields;

/// One selecting field of a [`VaryKey`]: its lower-cased name and the request's normalised
/// value (`None`: the request lacked it).
pub type VaryEntry = (String, Option<Vec<u8>>);

/// The selecting fields of one stored response and the values the original request had.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VaryKey {
    entries: Vec<(String, Option<Vec<u8>>)>,
    star: bool,
}

impl VaryKey {
    /// Records, for a response with `response` fields, what the request that caused it
    /// sent in each field its `Vary` names. `request` returns a request field's values.
    pub fn new<'r>(response: &Fields, request: impl Fn(&str) -> Vec<&'r [u8]>) -> VaryKey {
        let mut key = VaryKey::default();
        for member in response.list_members("vary") {
            if member == b"*" {
                key.star = true;
                continue;
            }
            let Ok(name) = std::str::from_utf8(member) else {
                continue;
            };
            let name = name.to_ascii_lowercase();
            if key.entries.iter().any(|(known, _)| *known == name) {
                continue;
            }
            let value = normalise(&name, &request(&name));
            key.entries.push((name, value));
        }
        key
    }

    /// Whether a request with these fields selects the response this key belongs to.
    pub fn matches<'r>(&self, request: impl Fn(&str) -> Vec<&'r [u8]>) -> bool {
        !self.star
            && self
                .entries
                .iter()
                .all(|(name, value)| normalise(name, &request(name)) == *value)
    }

    /// True when the response varied on nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && !self.star
    }

    /// The selecting fields (lower-cased names) and the request's normalised values
    /// (`None`: the request lacked the field), and whether the response said `Vary: *` —
    /// what a disk store writes down to rebuild the key ([`VaryKey::from_parts`]).
    pub fn parts(&self) -> (&[VaryEntry], bool) {
        (&self.entries, self.star)
    }

    /// The key [`VaryKey::parts`] described (read back from a disk store's record).
    pub fn from_parts(entries: Vec<VaryEntry>, star: bool) -> VaryKey {
        VaryKey { entries, star }
    }

    /// Bytes this key holds (for the store's budget).
    pub fn size(&self) -> usize {
        self.entries
            .iter()
            .map(|(name, value)| name.len() + value.as_ref().map_or(0, Vec::len) + 32)
            .sum()
    }
}

/// Fields whose value is a comma-separated list of case-insensitive members whose order
/// carries no meaning of its own (preferences are given by `q` weights).
pub const NEGOTIATION_LISTS: [&str; 4] = [
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
];

/// The comparable form of a request field's values (`name` lower-cased): `None` when the
/// request lacks the field. Every value's whitespace is trimmed, runs of it collapsed to
/// one space and dropped next to a comma; several lines are one comma-separated list. For [`NEGOTIATION_LISTS`] fields
/// the members are also lower-cased, stripped of whitespace around `;` and `=`, and sorted.
pub fn normalise(name: &str, values: &[&[u8]]) -> Option<Vec<u8>> {
    if values.is_empty() {
        return None;
    }
    if NEGOTIATION_LISTS.contains(&name) {
        let mut members: Vec<Vec<u8>> = values
            .iter()
            .flat_map(|value| coldwire_http::fields::comma_list(value))
            .map(|member| {
                let mut member = collapse_whitespace(member);
                member.make_ascii_lowercase();
                tighten(&member, b";=")
            })
            .filter(|member| !member.is_empty())
            .collect();
        members.sort();
        return Some(members.join(&b","[..]));
    }
    let mut joined = Vec::new();
    for (index, value) in values.iter().enumerate() {
        if index > 0 {
            joined.push(b',');
        }
        joined.extend_from_slice(&tighten(&collapse_whitespace(value), b","));
    }
    Some(joined)
}

/// Trims `value` and collapses each run of spaces and tabs inside it to one space.
fn collapse_whitespace(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    for &byte in coldwire_http::fields::trim_ows(value) {
        let blank = byte == b' ' || byte == b'\t';
        if blank {
            if out.last() != Some(&b' ') {
                out.push(b' ');
            }
        } else {
            out.push(byte);
        }
    }
    out
}

/// Drops the spaces next to any of `separators` (`;` and `=` of parameters:
/// `text/html ; q=0.5` → `text/html;q=0.5`; `,` of lists: `1 , 2` → `1,2`).
fn tighten(member: &[u8], separators: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::with_capacity(member.len());
    for (index, &byte) in member.iter().enumerate() {
        if byte == b' ' {
            let before = out.last().copied();
            let after = member.get(index + 1).copied();
            let separates = |byte: Option<u8>| byte.is_some_and(|byte| separators.contains(&byte));
            if separates(before) || separates(after) {
                continue;
            }
        }
        out.push(byte);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::request;

    #[test]
    fn same_values_match_and_different_ones_do_not() {
        let mut response = Fields::new();
        response.push("Vary", b"Accept-Encoding, accept-language");
        let key = VaryKey::new(&response, request(&[("Accept-Encoding", "gzip")]));
        assert!(key.matches(request(&[("accept-encoding", " gzip ")])));
        assert!(!key.matches(request(&[("accept-encoding", "br")])));
        assert!(!key.matches(request(&[
            ("accept-encoding", "gzip"),
            ("accept-language", "fr")
        ])));
        assert!(!key.matches(request(&[])));
    }

    #[test]
    fn rfc9111_4_1_selecting_values_are_normalised_before_comparing() {
        let mut response = Fields::new();
        response.push(
            "Vary",
            b"Accept-Encoding, Accept-Language, Accept, X-Custom",
        );
        let key = VaryKey::new(
            &response,
            request(&[
                ("Accept-Encoding", "gzip, br"),
                ("Accept-Language", "en-GB, fr;q=0.5"),
                ("Accept", "text/html ; q=0.9, */*"),
                ("X-Custom", "a  b"),
            ]),
        );
        assert!(key.matches(request(&[
            ("accept-encoding", "BR,gzip"),
            ("accept-language", "fr; q=0.5"),
            ("accept-language", "EN-gb"),
            ("accept", "*/*,Text/HTML;q=0.9"),
            ("x-custom", " a \t b "),
        ])));
        // Other fields keep their letter case; different members never match.
        assert!(!key.matches(request(&[
            ("accept-encoding", "br, gzip"),
            ("accept-language", "en-gb, fr;q=0.5"),
            ("accept", "text/html;q=0.9, */*"),
            ("x-custom", "A b"),
        ])));
        assert!(!key.matches(request(&[
            ("accept-encoding", "br"),
            ("accept-language", "en-gb, fr;q=0.5"),
            ("accept", "text/html;q=0.9, */*"),
            ("x-custom", "a b"),
        ])));
    }

    #[test]
    fn rfc9111_4_1_whitespace_next_to_commas_and_line_splits_do_not_count() {
        let mut response = Fields::new();
        response.push("Vary", b"Foo");
        let key = VaryKey::new(&response, request(&[("Foo", "1,2")]));
        assert!(key.matches(request(&[("foo", " 1, 2 ")])));
        assert!(key.matches(request(&[("foo", "1"), ("foo", "2")])));
        assert!(!key.matches(request(&[("foo", "1 2")])));
        assert!(!key.matches(request(&[("foo", "2,1")])));
    }

    #[test]
    fn rfc9111_4_1_vary_star_never_matches() {
        let mut response = Fields::new();
        response.push("Vary", b"Accept-Encoding, *");
        let key = VaryKey::new(&response, request(&[("Accept-Encoding", "gzip")]));
        assert!(!key.matches(request(&[("Accept-Encoding", "gzip")])));
        assert!(!key.is_empty());
    }

    #[test]
    fn star_never_matches_and_no_vary_always_does() {
        let mut response = Fields::new();
        response.push("Vary", b"*");
        assert!(!VaryKey::new(&response, request(&[])).matches(request(&[])));
        let plain = VaryKey::new(&Fields::new(), request(&[("x", "y")]));
        assert!(plain.is_empty());
        assert!(plain.matches(request(&[("anything", "else")])));
    }
}
