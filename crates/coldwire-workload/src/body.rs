//! Bodies generated from an object's id and version, so the receiver can check every byte:
//! [`fill_body`] writes bytes `offset..offset + len` of a body, [`body_hash`] is what the
//! origin announces in [`BODY_HEADER`] (`id=<hex>; v=<hex>; size=<n>`), and a client that
//! knows the header regenerates the body and compares.
//!
//! The body is a sequence of 8-byte words; word `k` is a hash of (id, version, k), so a
//! body from another object, another version, or shifted by any number of bytes differs.

use crate::draws::mix;

/// The response field naming the object a body was generated from.
pub const BODY_HEADER: &str = "X-Coldwire-Object";

fn word(id: u64, version: u64, index: u64) -> [u8; 8] {
    mix(id ^ mix(version ^ mix(index))).to_le_bytes()
}

/// Appends bytes `offset..offset + len` of the body of (`id`, `version`) to `out`.
pub fn fill_body(out: &mut Vec<u8>, id: u64, version: u64, offset: u64, len: u64) {
    let mut position = offset;
    let end = offset + len;
    out.reserve(len as usize);
    while position < end {
        let index = position / 8;
        let within = (position % 8) as usize;
        let take = ((8 - within) as u64).min(end - position) as usize;
        out.extend_from_slice(&word(id, version, index)[within..within + take]);
        position += take as u64;
    }
}

/// How many of `bytes`, taken as bytes `offset..offset + bytes.len()` of the body of
/// (`id`, `version`), match it from their start: `bytes.len()` when all do. For a client
/// that checks a body piece by piece as it arrives, without a copy of its own.
pub fn matching_prefix(id: u64, version: u64, offset: u64, bytes: &[u8]) -> usize {
    let mut checked = 0;
    while checked < bytes.len() {
        let position = offset + checked as u64;
        let within = (position % 8) as usize;
        let expected = word(id, version, position / 8);
        let take = (8 - within).min(bytes.len() - checked);
        let got = &bytes[checked..checked + take];
        if got != &expected[within..within + take] {
            let same = got
                .iter()
                .zip(&expected[within..])
                .take_while(|(a, b)| a == b)
                .count();
            return checked + same;
        }
        checked += take;
    }
    checked
}

/// FNV-1a over the whole body (for a quick whole-body check).
pub fn body_hash(id: u64, version: u64, size: u64) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let mut chunk = Vec::with_capacity(8192);
    let mut offset = 0;
    while offset < size {
        chunk.clear();
        let len = (size - offset).min(8192);
        fill_body(&mut chunk, id, version, offset, len);
        for &byte in &chunk {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
        offset += len;
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_the_same_however_it_is_cut() {
        let mut whole = Vec::new();
        fill_body(&mut whole, 42, 3, 0, 1000);
        let mut pieces = Vec::new();
        for (offset, len) in [(0, 3), (3, 13), (16, 1), (17, 983)] {
            fill_body(&mut pieces, 42, 3, offset, len);
        }
        assert_eq!(whole, pieces);
        assert_eq!(whole.len(), 1000);
    }

    #[test]
    fn pieces_of_a_body_match_and_a_changed_byte_is_found() {
        let mut body = Vec::new();
        fill_body(&mut body, 7, 2, 0, 1000);
        assert_eq!(matching_prefix(7, 2, 0, &body), 1000);
        assert_eq!(matching_prefix(7, 2, 13, &body[13..500]), 487);
        assert_eq!(matching_prefix(7, 3, 0, &body), 0);
        body[321] ^= 1;
        assert_eq!(matching_prefix(7, 2, 0, &body), 321);
        assert_eq!(matching_prefix(7, 2, 300, &body[300..400]), 21);
    }

    #[test]
    fn other_objects_versions_and_shifts_differ() {
        let body = |id, version, offset| {
            let mut out = Vec::new();
            fill_body(&mut out, id, version, offset, 64);
            out
        };
        assert_ne!(body(1, 0, 0), body(2, 0, 0));
        assert_ne!(body(1, 0, 0), body(1, 1, 0));
        assert_ne!(body(1, 0, 0), body(1, 0, 1));
        assert_ne!(body_hash(1, 0, 100), body_hash(1, 1, 100));
    }
}
