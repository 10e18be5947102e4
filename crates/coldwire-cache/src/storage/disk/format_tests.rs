//! Tests of the on-disk format: heads and records round-trip, and a torn or damaged segment
//! never yields a record that was not written (proptested over truncations and byte flips).

use super::*;
use proptest::prelude::*;

fn head(status: u16, seconds: u64) -> Head {
    let mut fields = Fields::new();
    fields.push("Content-Type", b"text/plain");
    fields.push("Cache-Control", b"max-age=60");
    fields.push("X-Empty", b"");
    Head {
        status,
        fields,
        vary: VaryKey::from_parts(
            vec![
                ("accept-encoding".into(), Some(b"gzip".to_vec())),
                ("cookie".into(), None),
            ],
            false,
        ),
        response_time: UNIX_EPOCH + Duration::new(seconds, 123),
        initial_age: Duration::from_millis(1500),
    }
}

/// An object as written: sequence number, key, body.
type Written = (u64, String, Vec<u8>);

/// A segment holding `objects` (key, body) as object records with sequence numbers 1.., and
/// the records as they should scan.
fn segment(objects: &[(String, Vec<u8>)]) -> (Vec<u8>, Vec<Written>) {
    let mut bytes = segment_header(7).to_vec();
    let mut expected = Vec::new();
    for (number, (key, body)) in objects.iter().enumerate() {
        let seq = number as u64 + 1;
        let encoded = encode_head(&head(200, seq));
        append_record(&mut bytes, seq, key.as_bytes(), &encoded, [body.as_slice()]);
        expected.push((seq, key.clone(), body.clone()));
    }
    (bytes, expected)
}

/// The (seq, key, body) of every scanned object, its body read from `bytes`.
fn scanned(bytes: &[u8]) -> Vec<Written> {
    scan(bytes, 7)
        .into_iter()
        .map(|record| {
            let start = record.body_offset as usize;
            let body = bytes[start..start + record.body_len as usize].to_vec();
            (record.seq, record.key, body)
        })
        .collect()
}

#[test]
fn a_head_round_trips() {
    let original = head(404, 1_700_000_000);
    let decoded = decode_head(&encode_head(&original)).expect("decodes");
    assert_eq!(decoded, original);
    let star = Head {
        vary: VaryKey::from_parts(Vec::new(), true),
        ..head(200, 1)
    };
    assert_eq!(decode_head(&encode_head(&star)), Some(star));
}

#[test]
fn a_head_with_bytes_left_over_or_missing_is_refused() {
    let mut encoded = encode_head(&head(200, 5));
    encoded.push(0);
    assert_eq!(decode_head(&encoded), None);
    encoded.truncate(encoded.len() - 2);
    assert_eq!(decode_head(&encoded), None);
    assert_eq!(decode_head(&[]), None);
}

#[test]
fn records_scan_back_in_order_with_their_bodies() {
    let objects = vec![
        ("http://a/1".to_owned(), b"hello".to_vec()),
        ("http://a/2".to_owned(), Vec::new()),
        ("http://a/3".to_owned(), vec![7u8; 10_000]),
    ];
    let (bytes, expected) = segment(&objects);
    assert_eq!(scanned(&bytes), expected);
    let records = scan(&bytes, 7);
    assert_eq!(
        records.last().map(|record| record.end),
        Some(bytes.len() as u64)
    );
    assert!(records.iter().all(|record| record.end % 8 == 0));
}

#[test]
fn a_segment_with_another_id_or_no_header_yields_nothing() {
    let (bytes, _) = segment(&[("k".to_owned(), b"v".to_vec())]);
    assert!(scan(&bytes, 8).is_empty(), "a file renamed over another id");
    assert!(scan(&bytes[SEGMENT_HEADER as usize..], 7).is_empty());
    assert!(scan(&[], 7).is_empty());
}

#[test]
fn a_record_killed_in_place_is_skipped_and_the_next_still_read() {
    let objects = vec![
        ("http://a/1".to_owned(), b"one".to_vec()),
        ("http://a/2".to_owned(), b"two".to_vec()),
    ];
    let (mut bytes, expected) = segment(&objects);
    let first = scan(&bytes, 7).remove(0);
    let dead = record_header(Kind::Dead, first.seq, first.lengths, 0);
    let at = first.offset as usize;
    bytes[at..at + dead.len()].copy_from_slice(&dead);
    assert_eq!(scanned(&bytes), expected[1..]);
}

#[test]
fn a_record_whose_data_is_damaged_is_skipped_by_its_checked_length() {
    let objects = vec![
        ("http://a/1".to_owned(), b"one".to_vec()),
        ("http://a/2".to_owned(), b"two".to_vec()),
    ];
    let (mut bytes, expected) = segment(&objects);
    let first = scan(&bytes, 7).remove(0);
    bytes[first.body_offset as usize] ^= 1;
    assert_eq!(scanned(&bytes), expected[1..]);
}

#[test]
fn a_record_rewritten_with_another_body_fails_its_checksum() {
    let (mut bytes, _) = segment(&[("k".to_owned(), b"right".to_vec())]);
    let records = scan(&bytes, 7);
    let start = records[0].body_offset as usize;
    bytes[start..start + 5].copy_from_slice(b"wrong");
    assert!(scan(&bytes, 7).is_empty());
}

/// A record as it scans back: sequence number, key, what it refreshes (head records), body.
type Any = (u64, String, Option<super::super::heads::Refresh>, Vec<u8>);

/// A segment of `objects`, each followed by a head record for it (sequence number 1000 +
/// its own, stale every other one), and every record as it should scan.
fn segment_with_heads(objects: &[(String, Vec<u8>)]) -> (Vec<u8>, Vec<Any>) {
    use super::super::heads::{Refresh, encode_body};
    let mut bytes = segment_header(7).to_vec();
    let mut expected = Vec::new();
    for (number, (key, body)) in objects.iter().enumerate() {
        let seq = number as u64 + 1;
        let encoded = encode_head(&head(200, seq));
        append_record(&mut bytes, seq, key.as_bytes(), &encoded, [body.as_slice()]);
        expected.push((seq, key.clone(), None, body.clone()));
        let refresh = Refresh {
            target: seq,
            stale: number % 2 == 1,
        };
        let newer = encode_head(&head(304, seq + 60));
        let refresh_body = encode_body(refresh);
        append_record_of(
            Kind::Head,
            &mut bytes,
            1000 + seq,
            key.as_bytes(),
            &newer,
            [refresh_body.as_slice()],
        );
        expected.push((
            1000 + seq,
            key.clone(),
            Some(refresh),
            refresh_body.to_vec(),
        ));
    }
    (bytes, expected)
}

fn scanned_any(bytes: &[u8]) -> Vec<Any> {
    scan(bytes, 7)
        .into_iter()
        .map(|record| {
            let start = record.body_offset as usize;
            let body = bytes[start..start + record.body_len as usize].to_vec();
            (record.seq, record.key, record.refresh, body)
        })
        .collect()
}

#[test]
fn head_records_scan_back_beside_the_objects() {
    let objects = vec![
        ("http://a/1".to_owned(), b"one".to_vec()),
        ("http://a/2".to_owned(), vec![9u8; 5000]),
    ];
    let (bytes, expected) = segment_with_heads(&objects);
    assert_eq!(scanned_any(&bytes), expected);
}

fn objects() -> impl Strategy<Value = Vec<(String, Vec<u8>)>> {
    prop::collection::vec(
        ("[a-z/:.]{1,40}", prop::collection::vec(any::<u8>(), 0..300)),
        1..8,
    )
}

proptest! {
    /// A crash cuts the file anywhere: what scans back is a prefix of what was written.
    #[test]
    fn a_torn_segment_scans_to_a_prefix(objects in objects(), cut in any::<prop::sample::Index>()) {
        let (bytes, expected) = segment(&objects);
        let cut = cut.index(bytes.len() + 1);
        let found = scanned(&bytes[..cut]);
        prop_assert!(found.len() <= expected.len());
        prop_assert_eq!(&found[..], &expected[..found.len()]);
    }

    /// Any byte damaged (or garbage written over a tail): every record that scans back is
    /// exactly one that was written, key, sequence number and body.
    #[test]
    fn a_damaged_segment_never_yields_a_wrong_record(
        objects in objects(),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let (mut bytes, expected) = segment(&objects);
        let at = at.index(bytes.len());
        bytes[at] ^= flip;
        for record in scanned(&bytes) {
            prop_assert!(expected.contains(&record), "{:?} was never written", record.0);
        }
    }

    /// With head records among the objects, cut or damaged anywhere: every record that
    /// scans back — object or head record — is exactly one that was written.
    #[test]
    fn head_records_cut_or_damaged_never_yield_a_wrong_record(
        objects in objects(),
        at in any::<prop::sample::Index>(),
        cut in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let (mut bytes, expected) = segment_with_heads(&objects);
        let found = scanned_any(&bytes[..cut.index(bytes.len() + 1)]);
        prop_assert_eq!(&found[..], &expected[..found.len()]);
        let at = at.index(bytes.len());
        bytes[at] ^= flip;
        for record in scanned_any(&bytes) {
            prop_assert!(expected.contains(&record), "{:?} was never written", record.0);
        }
    }

    /// Garbage of any kind never panics the scan or the head decoder.
    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let mut segment = segment_header(7).to_vec();
        segment.extend_from_slice(&bytes);
        let _ = scan(&segment, 7);
        let _ = decode_head(&bytes);
    }
}
