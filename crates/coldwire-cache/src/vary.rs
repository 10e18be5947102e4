//! `Vary` (RFC 9111 §4.1): the request fields a stored response was selected by, and the
//! check that a new request selects the same response.
//!
//! Invariants: names are lower-cased; values are the request's field values joined with
//! `", "` and with surrounding whitespace trimmed (the normalisation RFC 9111 §4.1 allows);
//! an absent field matches only an absent field. `Vary: *` never matches (and is refused
//! for storage by [`crate::storability`]).

use crate::fields::Fields;

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
            let value = normalise(&request(&name));
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
                .all(|(name, value)| normalise(&request(name)) == *value)
    }

    /// True when the response varied on nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && !self.star
    }

    /// Bytes this key holds (for the store's budget).
    pub fn size(&self) -> usize {
        self.entries
            .iter()
            .map(|(name, value)| name.len() + value.as_ref().map_or(0, Vec::len) + 32)
            .sum()
    }
}

fn normalise(values: &[&[u8]]) -> Option<Vec<u8>> {
    if values.is_empty() {
        return None;
    }
    let mut joined = Vec::new();
    for (index, value) in values.iter().enumerate() {
        if index > 0 {
            joined.extend_from_slice(b", ");
        }
        joined.extend_from_slice(coldwire_http::fields::trim_ows(value));
    }
    Some(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Vec<&'a [u8]> + 'a {
        move |name| {
            pairs
                .iter()
                .filter(|(field, _)| field.eq_ignore_ascii_case(name))
                .map(|(_, value)| value.as_bytes())
                .collect()
        }
    }

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
    fn star_never_matches_and_no_vary_always_does() {
        let mut response = Fields::new();
        response.push("Vary", b"*");
        assert!(!VaryKey::new(&response, request(&[])).matches(request(&[])));
        let plain = VaryKey::new(&Fields::new(), request(&[("x", "y")]));
        assert!(plain.is_empty());
        assert!(plain.matches(request(&[("anything", "else")])));
    }
}
