//! `Fields`: an owned, ordered list of header fields (name, value) as a cache keeps them
//! for a stored response. Names keep their received spelling; lookups ignore ASCII case.
//! Values are raw bytes, never re-encoded, so a stored head is replayed as received.

use coldwire_http::fields::comma_list;

/// Header fields in order; repeated names appear repeatedly.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    entries: Vec<(String, Vec<u8>)>,
}

impl Fields {
    /// No fields.
    pub fn new() -> Fields {
        Fields::default()
    }

    /// Appends a field.
    pub fn push(&mut self, name: &str, value: &[u8]) {
        self.entries.push((name.to_owned(), value.to_vec()));
    }

    /// Every field, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.entries
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_slice()))
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.entries
            .iter()
            .find(|(field, _)| field.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_slice())
    }

    /// Every value of `name`, in order.
    pub fn values<'a, 'n>(&'a self, name: &'n str) -> impl Iterator<Item = &'a [u8]> + use<'a, 'n> {
        self.entries
            .iter()
            .filter(move |(field, _)| field.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_slice())
    }

    /// Every member of the comma-separated lists in fields named `name`.
    pub fn list_members<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.values(name).flat_map(comma_list)
    }

    /// Removes every field named `name`.
    pub fn remove(&mut self, name: &str) {
        self.entries
            .retain(|(field, _)| !field.eq_ignore_ascii_case(name));
    }

    /// Replaces every field named `name` with one field.
    pub fn set(&mut self, name: &str, value: &[u8]) {
        self.remove(name);
        self.push(name, value);
    }

    /// Bytes the fields take when written as `name: value\r\n` lines.
    pub fn wire_len(&self) -> usize {
        self.entries
            .iter()
            .map(|(name, value)| name.len() + value.len() + 4)
            .sum()
    }

    /// Updates these stored fields with those of a `304 Not Modified` (RFC 9111 §3.2):
    /// every field the 304 carries replaces the stored ones of that name, except the
    /// framing fields, which describe the stored body and not the empty 304.
    pub fn update_from(&mut self, fresh: &Fields) {
        for (name, _) in fresh.iter() {
            if is_framing(name) {
                continue;
            }
            self.remove(name);
        }
        for (name, value) in fresh.iter() {
            if !is_framing(name) {
                self.push(name, value);
            }
        }
    }
}

fn is_framing(name: &str) -> bool {
    ["content-length", "transfer-encoding", "content-range"]
        .iter()
        .any(|framing| name.eq_ignore_ascii_case(framing))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_ignore_case_and_keep_order() {
        let mut fields = Fields::new();
        fields.push("Cache-Control", b"max-age=5");
        fields.push("cache-control", b"public, no-transform");
        let members: Vec<&[u8]> = fields.list_members("CACHE-CONTROL").collect();
        assert_eq!(
            members,
            vec![&b"max-age=5"[..], &b"public"[..], &b"no-transform"[..]]
        );
        assert_eq!(fields.get("cache-control"), Some(&b"max-age=5"[..]));
    }

    #[test]
    fn a_304_replaces_fields_but_not_the_framing() {
        let mut stored = Fields::new();
        stored.push("Content-Length", b"10");
        stored.push("ETag", b"\"a\"");
        stored.push("Cache-Control", b"max-age=1");
        let mut fresh = Fields::new();
        fresh.push("Content-Length", b"0");
        fresh.push("Cache-Control", b"max-age=60");
        stored.update_from(&fresh);
        assert_eq!(stored.get("content-length"), Some(&b"10"[..]));
        assert_eq!(stored.get("cache-control"), Some(&b"max-age=60"[..]));
        assert_eq!(stored.get("etag"), Some(&b"\"a\""[..]));
    }
}
