//! Head records: a `304` (or a `200` answering `HEAD`) freshens an object already on disk
//! — new fields, a new response time, or made stale — without rewriting its body. The new
//! head goes into a record of its own ([`Kind::Head`](super::format::Kind::Head)),
//! appended like any other and guarded like any other (the header's crc32 and lengths, the
//! crc32 of key ‖ head ‖ body, the head decoded exactly); at recovery, the newest intact
//! head record naming an object (by its sequence number, for the same key and `Vary` key)
//! replaces the head the object was written with (`apply`).
//!
//! ```text
//! head record = record header (kind 3, its own seq) | key | head | body (9 bytes):
//!               target seq u64 (the object's) | flags u8 (bit 0: made stale)
//! ```
//!
//! Invariants: a head record only ever changes the head of an object with the same key,
//! the same `Vary` key and a smaller sequence number than its own, and never its body; the
//! newest one wins (sequence numbers only grow, recovery takes the largest); one that is
//! torn, damaged or names an object that is gone (killed, its segment deleted) is ignored:
//! the object then comes back with its older head, a response that was correct for its key,
//! revalidated as usual once stale.

use std::collections::HashMap;

use super::format::Head;
use super::recovery::Found;

/// Bytes of a head record's body.
pub const BODY: usize = 9;

/// What a head record does, as read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refresh {
    /// The sequence number of the object it refreshes.
    pub target: u64,
    /// The object was made stale (a `HEAD` response did not match it): it must be
    /// revalidated before it is served again.
    pub stale: bool,
}

/// The body of a head record for `refresh`.
pub fn encode_body(refresh: Refresh) -> [u8; BODY] {
    let mut body = [0u8; BODY];
    body[..8].copy_from_slice(&refresh.target.to_le_bytes());
    body[8] = u8::from(refresh.stale);
    body
}

/// Reads the body of head record `seq`: `None` unless it is exactly [`BODY`] bytes with a
/// known flag, naming an older object.
pub fn decode_body(body: &[u8], seq: u64) -> Option<Refresh> {
    let body: &[u8; BODY] = body.try_into().ok()?;
    let target = u64::from_le_bytes(body[..8].try_into().ok()?);
    let stale = match body[8] {
        0 => false,
        1 => true,
        _ => return None,
    };
    (target < seq).then_some(Refresh { target, stale })
}

/// A head record found at recovery.
#[derive(Debug)]
pub(super) struct FoundHead {
    pub seq: u64,
    pub key: String,
    pub head: Head,
    pub refresh: Refresh,
}

/// Gives each object in `objects` the newest head record naming it (same key, same `Vary`
/// key), if any.
pub(super) fn apply(objects: &mut [Found], heads: Vec<FoundHead>) {
    if heads.is_empty() {
        return;
    }
    let mut newest: HashMap<u64, FoundHead> = HashMap::with_capacity(heads.len());
    for head in heads {
        match newest.get(&head.refresh.target) {
            Some(kept) if kept.seq > head.seq => {}
            _ => {
                newest.insert(head.refresh.target, head);
            }
        }
    }
    for object in objects {
        let Some(found) = newest.remove(&object.seq) else {
            continue;
        };
        if found.key == object.key && found.head.vary == object.head.vary && found.seq > object.seq
        {
            object.head = found.head;
            object.stale = found.refresh.stale;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_round_trips_and_anything_else_is_refused() {
        let refresh = Refresh {
            target: 41,
            stale: true,
        };
        assert_eq!(decode_body(&encode_body(refresh), 42), Some(refresh));
        // It must name an older object.
        assert_eq!(decode_body(&encode_body(refresh), 41), None);
        let mut bad = encode_body(refresh);
        bad[8] = 2;
        assert_eq!(decode_body(&bad, 42), None);
        assert_eq!(decode_body(&bad[..8], 42), None);
        assert_eq!(decode_body(&[0; 10], 42), None);
    }
}
