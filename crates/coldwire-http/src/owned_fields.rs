//! [`Fields`]: an owned, ordered list of header fields (name, value), for heads that outlive
//! the buffer they were parsed from — a response head as a cache keeps it, an origin's head
//! the proxy rewrites, a request's fields kept for `Vary`. Names keep their received
//! spelling; lookups ignore ASCII case. Values are raw bytes, never re-encoded, so a stored
//! head is replayed as received. (The borrowed view of a request head is
//! [`crate::Headers`].)
//!
//! Invariants: names and values each live in one buffer (a head of twenty fields is three
//! allocations, not forty); removing a field packs the rest again, so a head refreshed over
//! and over does not grow; the framing fields never change through
//! [`Fields::update_from`] (RFC 9111 §3.2).

use std::ops::Range;

use crate::fields::comma_list;

/// Header fields in order; repeated names appear repeatedly. All names share one string and
/// all values one byte buffer (a head of twenty fields is three allocations, not forty).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    names: String,
    values: Vec<u8>,
    /// Each field's name range in `names` and value range in `values`, in order.
    entries: Vec<(Range<u32>, Range<u32>)>,
}

/// A buffer offset as stored in an entry (heads are bounded far below 4 GiB).
fn offset(length: usize) -> u32 {
    u32::try_from(length).unwrap_or(u32::MAX)
}

impl Fields {
    /// No fields.
    pub fn new() -> Fields {
        Fields::default()
    }

    /// No fields, with room for `fields` fields whose names take `name_bytes` and values
    /// `value_bytes` (exact sizes keep a stored head from holding spare capacity).
    pub fn with_capacity(fields: usize, name_bytes: usize, value_bytes: usize) -> Fields {
        Fields {
            names: String::with_capacity(name_bytes),
            values: Vec::with_capacity(value_bytes),
            entries: Vec::with_capacity(fields),
        }
    }

    /// Appends a field.
    pub fn push(&mut self, name: &str, value: &[u8]) {
        let name_start = offset(self.names.len());
        self.names.push_str(name);
        let value_start = offset(self.values.len());
        self.values.extend_from_slice(value);
        self.entries.push((
            name_start..offset(self.names.len()),
            value_start..offset(self.values.len()),
        ));
    }

    /// How many fields there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every field, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.entries.iter().map(|(name, value)| {
            (
                // Ranges were recorded around whole `&str`s, so they fall on char boundaries.
                self.names
                    .get(name.start as usize..name.end as usize)
                    .unwrap_or(""),
                self.values
                    .get(value.start as usize..value.end as usize)
                    .unwrap_or(b""),
            )
        })
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.values(name).next()
    }

    /// Every value of `name`, in order.
    pub fn values<'a, 'n>(&'a self, name: &'n str) -> impl Iterator<Item = &'a [u8]> + use<'a, 'n> {
        self.iter()
            .filter(move |(field, _)| field.eq_ignore_ascii_case(name))
            .map(|(_, value)| value)
    }

    /// Every member of the comma-separated lists in fields named `name`.
    pub fn list_members<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.values(name).flat_map(comma_list)
    }

    /// Removes every field named `name` (the rest are packed again, so a stored head that is
    /// refreshed again and again does not grow).
    pub fn remove(&mut self, name: &str) {
        if self.values(name).next().is_none() {
            return;
        }
        let mut kept = Fields::with_capacity(self.len(), self.names.len(), self.values.len());
        for (field, value) in self.iter() {
            if !field.eq_ignore_ascii_case(name) {
                kept.push(field, value);
            }
        }
        *self = kept;
    }

    /// Replaces every field named `name` with one field.
    pub fn set(&mut self, name: &str, value: &[u8]) {
        self.remove(name);
        self.push(name, value);
    }

    /// Bytes of all names and of all values.
    pub fn byte_counts(&self) -> (usize, usize) {
        (self.names.len(), self.values.len())
    }

    /// Bytes the fields take when written as `name: value\r\n` lines.
    pub fn wire_len(&self) -> usize {
        self.iter()
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

    #[test]
    fn removing_keeps_the_others_in_order_and_does_not_grow() {
        let mut fields = Fields::new();
        fields.push("A", b"1");
        fields.push("Set-Cookie", b"x=1");
        fields.push("B", b"2");
        fields.push("set-cookie", b"y=2");
        for _ in 0..100 {
            fields.set("Age", b"12345");
        }
        fields.remove("SET-COOKIE");
        let listed: Vec<(&str, &[u8])> = fields.iter().collect();
        assert_eq!(
            listed,
            vec![("A", &b"1"[..]), ("B", &b"2"[..]), ("Age", &b"12345"[..])]
        );
        assert_eq!(fields.len(), 3);
        assert_eq!(fields.wire_len(), (1 + 1 + 4) + (1 + 1 + 4) + (3 + 5 + 4));
        assert!(fields.values.len() <= 16, "removed values are not kept");
    }
}
