//! The disk store's bytes on disk, as pure functions (no files): a segment's header, the
//! records appended after it — objects and tombstones — and the scan that reads a segment
//! back, stopping at the first record that is torn, damaged or from somewhere else.
//!
//! ```text
//! segment file  NNNNNNNNNNNNNNNN.cws   (the id, 16 hex digits; ids only grow)
//!   segment header (32 bytes): "CWSEG001" | id u64 | reserved u64 | crc32 of bytes 0..24 | 0
//!   record, record, ...        each padded to a multiple of 8 bytes
//! record
//!   header (48 bytes): magic "CWR1" u32 | kind u8 | 0 0 0 | seq u64 | key_len u32 |
//!                      head_len u32 | body_len u64 | data_crc u32 | 0 u32 |
//!                      header_crc u32 (of bytes 0..40) | 0 u32
//!   key (key_len) | head (head_len) | body (body_len)
//!   data_crc = crc32 of key ‖ head ‖ body
//! ```
//!
//! An *object* record's head is the stored response's metadata ([`encode_head`]). A *head*
//! record ([`Kind::Head`]) carries a newer head for an object already written (a `304`
//! freshened it): its body is the object's sequence number and a flag ([`super::heads`]). An object
//! the index dropped is *killed in place*: its header is rewritten as a [`Kind::Dead`]
//! header with the same lengths (48 bytes written over bytes that exist: no new space
//! needed, the body untouched for hits still sending it). Integers are little-endian.
//!
//! Invariants: [`scan`] returns only object and head records whose header checksum,
//! lengths, key (UTF-8), data checksum and head all check out (a head record's body too:
//! exactly its 9 bytes, naming an older sequence number), in file order. A record whose header
//! checks out but whose data does not (or that is dead) is skipped — the header's checksum
//! vouches for the lengths that lead to the next record; the scan stops at the first header
//! that does not check out or runs past the end (a torn tail: records are appended by one
//! thread in order). Nothing here panics on any input (proptested).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use coldwire_http::owned_fields::Fields;

use crate::policy::vary::VaryKey;

/// Bytes of a segment's header; records start here.
pub const SEGMENT_HEADER: u64 = 32;
/// Bytes of a record's header.
pub const RECORD_HEADER: u64 = 48;
const SEGMENT_MAGIC: &[u8; 8] = b"CWSEG001";
const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"CWR1");
/// Longest key a record may carry (longer keys are not written to disk).
pub const MAX_KEY: usize = 64 << 10;
/// Longest encoded head a record may carry.
pub const MAX_HEAD: usize = 1 << 20;

/// What a record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A stored response: head and body.
    Object,
    /// An object the index dropped (purged, replaced, evicted): skipped, never served.
    Dead,
    /// A newer head for an object (a `304` or a `HEAD` response freshened it): its body
    /// names the object's sequence number ([`super::heads`]).
    Head,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::Object => 1,
            Kind::Dead => 2,
            Kind::Head => 3,
        }
    }

    fn from_byte(byte: u8) -> Option<Kind> {
        match byte {
            1 => Some(Kind::Object),
            2 => Some(Kind::Dead),
            3 => Some(Kind::Head),
            _ => None,
        }
    }
}

/// A record's length on disk, padding included.
pub fn record_len(key: usize, head: usize, body: u64) -> u64 {
    let raw = RECORD_HEADER + key as u64 + head as u64 + body;
    raw.div_ceil(8) * 8
}

/// The segment header of segment `id`.
pub fn segment_header(id: u64) -> [u8; SEGMENT_HEADER as usize] {
    let mut header = [0u8; SEGMENT_HEADER as usize];
    header[0..8].copy_from_slice(SEGMENT_MAGIC);
    header[8..16].copy_from_slice(&id.to_le_bytes());
    let crc = crc32fast::hash(&header[0..24]);
    header[24..28].copy_from_slice(&crc.to_le_bytes());
    header
}

/// Whether `bytes` start with the header of segment `id`.
pub fn is_segment_header(bytes: &[u8], id: u64) -> bool {
    bytes.len() >= SEGMENT_HEADER as usize && bytes[..SEGMENT_HEADER as usize] == segment_header(id)
}

/// A record's lengths: key, head, body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lengths {
    /// Key bytes.
    pub key: usize,
    /// Encoded head bytes.
    pub head: usize,
    /// Body bytes.
    pub body: u64,
}

impl Lengths {
    /// The record's length on disk, padding included.
    pub fn record(&self) -> u64 {
        record_len(self.key, self.head, self.body)
    }
}

/// The header of a record of `kind` with sequence number `seq` and `lengths`, whose key,
/// head and body have the checksum `data_crc` (a dead record's may be anything).
pub fn record_header(
    kind: Kind,
    seq: u64,
    lengths: Lengths,
    data_crc: u32,
) -> [u8; RECORD_HEADER as usize] {
    let (key, head, body_len) = (lengths.key, lengths.head, lengths.body);
    let mut header = [0u8; RECORD_HEADER as usize];
    header[0..4].copy_from_slice(&RECORD_MAGIC.to_le_bytes());
    header[4] = kind.byte();
    header[8..16].copy_from_slice(&seq.to_le_bytes());
    header[16..20].copy_from_slice(&(key as u32).to_le_bytes());
    header[20..24].copy_from_slice(&(head as u32).to_le_bytes());
    header[24..32].copy_from_slice(&body_len.to_le_bytes());
    header[32..36].copy_from_slice(&data_crc.to_le_bytes());
    let crc = crc32fast::hash(&header[0..40]);
    header[40..44].copy_from_slice(&crc.to_le_bytes());
    header
}

/// The checksum of a record's key, head and body pieces.
pub fn data_crc<'a>(key: &[u8], head: &[u8], body: impl IntoIterator<Item = &'a [u8]>) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(key);
    hasher.update(head);
    for piece in body {
        hasher.update(piece);
    }
    hasher.finalize()
}

/// Appends one whole object record (header, key, head, body pieces, padding) to `out`.
pub fn append_record<'a>(
    out: &mut Vec<u8>,
    seq: u64,
    key: &[u8],
    head: &[u8],
    body: impl IntoIterator<Item = &'a [u8]> + Clone,
) -> Lengths {
    append_record_of(Kind::Object, out, seq, key, head, body)
}

/// Appends one whole record of `kind` (an object, or a head record) to `out`.
pub fn append_record_of<'a>(
    kind: Kind,
    out: &mut Vec<u8>,
    seq: u64,
    key: &[u8],
    head: &[u8],
    body: impl IntoIterator<Item = &'a [u8]> + Clone,
) -> Lengths {
    let lengths = Lengths {
        key: key.len(),
        head: head.len(),
        body: body
            .clone()
            .into_iter()
            .map(|piece| piece.len() as u64)
            .sum(),
    };
    let crc = data_crc(key, head, body.clone());
    let start = out.len();
    out.extend_from_slice(&record_header(kind, seq, lengths, crc));
    out.extend_from_slice(key);
    out.extend_from_slice(head);
    for piece in body {
        out.extend_from_slice(piece);
    }
    out.resize(start + lengths.record() as usize, 0);
    lengths
}

/// A record found by [`scan`], with where its parts are in the segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scanned {
    /// Its sequence number (unique in the store, growing with time).
    pub seq: u64,
    /// The cache key.
    pub key: String,
    /// The decoded head.
    pub head: Head,
    /// Where the record starts in the segment file.
    pub offset: u64,
    /// Its lengths.
    pub lengths: Lengths,
    /// Where the body starts in the segment file.
    pub body_offset: u64,
    /// Body bytes.
    pub body_len: u64,
    /// Where the record ends (padding included): the next record's offset.
    pub end: u64,
    /// For a head record ([`Kind::Head`]): the object it refreshes; `None` for an object.
    pub refresh: Option<super::heads::Refresh>,
}

/// Reads the records of a segment whose bytes (from the start of the file) are `bytes`,
/// in order, up to the first one that is incomplete or fails a check.
pub fn scan(bytes: &[u8], id: u64) -> Vec<Scanned> {
    let mut records = Vec::new();
    if !is_segment_header(bytes, id) {
        return records;
    }
    let mut offset = SEGMENT_HEADER;
    while let Some((end, record)) = read_record(bytes, offset) {
        offset = end;
        records.extend(record);
    }
    records
}

/// The live object record that `bytes` (read from the record's offset) start with, when it
/// is whole and passes every check [`scan`] makes; its offsets are relative to `bytes`.
pub fn read_object(bytes: &[u8]) -> Option<Scanned> {
    read_record(bytes, 0)?
        .1
        .filter(|record| record.refresh.is_none())
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default())
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or_default())
}

/// The end of the record at `offset` when its header checks out and it is whole, with the
/// record when it is a live object that checks out too.
fn read_record(bytes: &[u8], offset: u64) -> Option<(u64, Option<Scanned>)> {
    let start = usize::try_from(offset).ok()?;
    let header = bytes.get(start..start.checked_add(RECORD_HEADER as usize)?)?;
    if u32_at(header, 0) != RECORD_MAGIC || u32_at(header, 40) != crc32fast::hash(&header[..40]) {
        return None;
    }
    let kind = Kind::from_byte(header[4])?;
    let seq = u64_at(header, 8);
    let key_len = u32_at(header, 16) as usize;
    let head_len = u32_at(header, 20) as usize;
    let body_len = u64_at(header, 24);
    if key_len > MAX_KEY || head_len > MAX_HEAD {
        return None;
    }
    let key_start = start + RECORD_HEADER as usize;
    let head_start = key_start + key_len;
    let body_start = head_start + head_len;
    let body_end = body_start.checked_add(usize::try_from(body_len).ok()?)?;
    let data = bytes.get(key_start..body_end)?;
    let lengths = Lengths {
        key: key_len,
        head: head_len,
        body: body_len,
    };
    let end = offset + lengths.record();
    if kind == Kind::Dead || crc32fast::hash(data) != u32_at(header, 32) {
        return Some((end, None));
    }
    let key = std::str::from_utf8(&bytes[key_start..head_start]).ok();
    let head = decode_head(&bytes[head_start..body_start]);
    let (Some(key), Some(head)) = (key, head) else {
        return Some((end, None));
    };
    let refresh = match kind {
        Kind::Head => match super::heads::decode_body(&bytes[body_start..body_end], seq) {
            Some(refresh) => Some(refresh),
            None => return Some((end, None)),
        },
        _ => None,
    };
    Some((
        end,
        Some(Scanned {
            seq,
            key: key.to_owned(),
            head,
            offset,
            lengths,
            body_offset: body_start as u64,
            body_len,
            end,
            refresh,
        }),
    ))
}

/// A stored response's metadata as a record keeps it: enough to rebuild the
/// [`StoredResponse`](crate::StoredResponse) (its freshness is computed again from the
/// fields and times).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// Status code.
    pub status: u16,
    /// End-to-end fields as stored.
    pub fields: Fields,
    /// The `Vary` key it was selected by.
    pub vary: VaryKey,
    /// When it arrived.
    pub response_time: SystemTime,
    /// Its age when it arrived.
    pub initial_age: Duration,
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

fn put_duration(out: &mut Vec<u8>, duration: Duration) {
    out.extend_from_slice(&duration.as_secs().to_le_bytes());
    out.extend_from_slice(&duration.subsec_nanos().to_le_bytes());
}

/// Encodes a head (see [`Head`]).
pub fn encode_head(head: &Head) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + head.fields.wire_len() + head.vary.size());
    out.extend_from_slice(&head.status.to_le_bytes());
    let since_epoch = head
        .response_time
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    put_duration(&mut out, since_epoch);
    put_duration(&mut out, head.initial_age);
    out.extend_from_slice(&(head.fields.len() as u32).to_le_bytes());
    for (name, value) in head.fields.iter() {
        put_bytes(&mut out, name.as_bytes());
        put_bytes(&mut out, value);
    }
    let (entries, star) = head.vary.parts();
    out.push(u8::from(star));
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (name, value) in entries {
        put_bytes(&mut out, name.as_bytes());
        match value {
            Some(value) => {
                out.push(1);
                put_bytes(&mut out, value);
            }
            None => out.push(0),
        }
    }
    out
}

/// A cursor over an encoded head; every read is bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        if count > self.bytes.len() {
            return None;
        }
        let (taken, rest) = self.bytes.split_at(count);
        self.bytes = rest;
        Some(taken)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn duration(&mut self) -> Option<Duration> {
        let seconds = self.u64()?;
        let nanos = self.u32()?;
        (nanos < 1_000_000_000).then(|| Duration::new(seconds, nanos))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let length = self.u32()? as usize;
        self.take(length)
    }

    fn text(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }
}

/// Decodes a head written by [`encode_head`]; `None` for anything else.
pub fn decode_head(bytes: &[u8]) -> Option<Head> {
    let mut reader = Reader { bytes };
    let status = u16::from_le_bytes(reader.take(2)?.try_into().ok()?);
    let response_time = UNIX_EPOCH.checked_add(reader.duration()?)?;
    let initial_age = reader.duration()?;
    let count = reader.u32()? as usize;
    let mut fields = Fields::new();
    for _ in 0..count.min(bytes.len()) {
        let name = reader.text()?;
        let value = reader.bytes()?;
        fields.push(name, value);
    }
    if fields.len() != count {
        return None;
    }
    let star = match reader.u8()? {
        0 => false,
        1 => true,
        _ => return None,
    };
    let count = reader.u32()? as usize;
    let mut entries = Vec::new();
    for _ in 0..count.min(bytes.len()) {
        let name = reader.text()?.to_owned();
        let value = match reader.u8()? {
            0 => None,
            1 => Some(reader.bytes()?.to_vec()),
            _ => return None,
        };
        entries.push((name, value));
    }
    if entries.len() != count || !reader.bytes.is_empty() {
        return None;
    }
    Some(Head {
        status,
        fields,
        vary: VaryKey::from_parts(entries, star),
        response_time,
        initial_age,
    })
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
