//! Tests for [`super::ChunkedDecoder`]: framing rules, limits, and split-invariance.

use super::*;
use proptest::prelude::*;

/// Decodes `input` in one call, returning (body, consumed, done).
fn decode_all(input: &[u8]) -> Result<(Vec<u8>, usize, bool), HttpError> {
    let mut decoder = ChunkedDecoder::new();
    let mut body = Vec::new();
    let progress = decoder.decode(input, |data| body.extend_from_slice(data))?;
    Ok((body, progress.consumed, progress.done))
}

/// Decodes `input` fed in pieces cut at `cuts`, like a socket would deliver it.
fn decode_split(input: &[u8], cuts: &[usize]) -> Result<(Vec<u8>, usize, bool), HttpError> {
    let mut decoder = ChunkedDecoder::new();
    let mut body = Vec::new();
    let mut offset = 0;
    let mut boundaries: Vec<usize> = cuts.iter().map(|&cut| cut.min(input.len())).collect();
    boundaries.sort_unstable();
    boundaries.push(input.len());
    for boundary in boundaries {
        if boundary < offset {
            continue;
        }
        let progress = decoder.decode(&input[offset..boundary], |data| {
            body.extend_from_slice(data);
        })?;
        offset += progress.consumed;
        if progress.done {
            return Ok((body, offset, true));
        }
        // Not done means everything handed over was consumed.
        assert_eq!(offset, boundary);
    }
    Ok((body, offset, decoder.is_done()))
}

#[test]
fn simple_body() {
    let input = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    assert_eq!(
        decode_all(input),
        Ok((b"hello world".to_vec(), input.len(), true))
    );
}

#[test]
fn extensions_and_trailers_are_skipped() {
    let input = b"5;name=value;flag\r\nhello\r\nA ; q=\"x;y\"\r\n0123456789\r\n\
                  0;last\r\nExpires: never\r\nX-Checksum: abc\r\n\r\nGET / HTTP/1.1\r\n";
    let (body, consumed, done) = decode_all(input).expect("valid");
    assert!(done);
    assert_eq!(body, b"hello0123456789");
    assert_eq!(&input[consumed..], b"GET / HTTP/1.1\r\n");
}

#[test]
fn stops_at_end_of_message_for_pipelining() {
    let input = b"0\r\n\r\nNEXT";
    let mut decoder = ChunkedDecoder::new();
    let progress = decoder.decode(input, |_| {}).expect("valid");
    assert_eq!(
        progress,
        ChunkedProgress {
            consumed: 5,
            done: true
        }
    );
    let again = decoder.decode(b"more", |_| {}).expect("still done");
    assert_eq!(
        again,
        ChunkedProgress {
            consumed: 0,
            done: true
        }
    );
}

#[test]
fn upper_and_lower_case_hex_and_leading_zeros() {
    let input = b"000A\r\n0123456789\r\na\r\n0123456789\r\n0\r\n\r\n";
    let (body, _, done) = decode_all(input).expect("valid");
    assert!(done);
    assert_eq!(body.len(), 20);
}

#[test]
fn counts_body_len() {
    let mut decoder = ChunkedDecoder::new();
    decoder
        .decode(b"3\r\nabc\r\n2\r\nde", |_| {})
        .expect("valid so far");
    assert_eq!(decoder.body_len(), 5);
    assert!(!decoder.is_done());
}

#[test]
fn rejects_malformed_framing() {
    for input in [
        &b"\r\n"[..],
        b"g\r\n",
        b";ext\r\n",
        b" 5\r\nhello\r\n",
        b"5\nhello\r\n",
        b"5\r\nhelloX\r\n",
        b"5\r\nhello\r0",
        b"5\r\nhello\n",
        b"1 2\r\n",
        b"5;ext\nhello",
        b"5;e\x01\r\n",
        b"0\r\nTrailer: x\n\r\n",
        b"0\r\n\n",
        b"0\r\n\rX",
    ] {
        assert!(
            matches!(decode_all(input), Err(HttpError::InvalidChunkedBody(_))),
            "{:?} must be rejected",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn rejects_size_overflow() {
    assert!(decode_all(b"ffffffffffffffff\r\n").is_ok());
    assert_eq!(
        decode_all(b"10000000000000000\r\n"),
        Err(HttpError::InvalidChunkedBody("chunk size overflow"))
    );
}

#[test]
fn enforces_line_and_trailer_limits() {
    let mut decoder = ChunkedDecoder::with_limits(8, 16);
    assert!(decoder.decode(b"1;abcdefgh\r\n", |_| {}).is_err());
    let mut decoder = ChunkedDecoder::with_limits(8, 16);
    assert!(
        decoder
            .decode(b"0\r\nX-Long: 0123456789\r\n\r\n", |_| {})
            .is_err()
    );
    let mut decoder = ChunkedDecoder::new();
    let long_extension = [b"1;".as_slice(), &[b'x'; DEFAULT_MAX_CHUNK_LINE_BYTES]].concat();
    assert!(decoder.decode(&long_extension, |_| {}).is_err());
}

#[test]
fn errors_are_sticky() {
    let mut decoder = ChunkedDecoder::new();
    assert!(decoder.decode(b"z", |_| {}).is_err());
    assert!(decoder.decode(b"0\r\n\r\n", |_| {}).is_err());
}

/// Encodes `chunks` with optional extensions and trailers, the way a client might.
fn encode(chunks: &[Vec<u8>], with_extensions: bool, trailers: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in chunks.iter().filter(|chunk| !chunk.is_empty()) {
        out.extend_from_slice(format!("{:X}", chunk.len()).as_bytes());
        if with_extensions {
            out.extend_from_slice(b" ;ext=\"v\";flag");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n");
    for trailer in trailers {
        out.extend_from_slice(trailer.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

proptest! {
    #[test]
    fn arbitrary_splits_decode_identically(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..6),
        with_extensions in any::<bool>(),
        trailers in prop::collection::vec("[A-Za-z-]{1,10}: [ -~]{0,20}", 0..3),
        cuts in prop::collection::vec(0usize..400, 0..8),
    ) {
        let mut input = encode(&chunks, with_extensions, &trailers);
        let message_len = input.len();
        input.extend_from_slice(b"NEXT REQUEST");
        let expected_body: Vec<u8> = chunks.concat();

        let whole = decode_all(&input).expect("valid encoding");
        prop_assert_eq!(&whole, &(expected_body.clone(), message_len, true));
        let split = decode_split(&input, &cuts).expect("valid encoding");
        prop_assert_eq!(split, whole);
    }

    #[test]
    fn never_panics_and_splits_agree(
        input in prop::collection::vec(any::<u8>(), 0..200),
        cuts in prop::collection::vec(0usize..200, 0..6),
    ) {
        let whole = decode_all(&input);
        let split = decode_split(&input, &cuts);
        match (whole, split) {
            (Ok(whole), Ok(split)) => prop_assert_eq!(whole, split),
            (Err(_), Err(_)) => {}
            (whole, split) => prop_assert!(false, "disagree: {:?} vs {:?}", whole, split),
        }
    }
}

#[test]
fn skipped_chunk_data_resumes_at_the_framing() {
    // A proxy splices chunk data past the decoder and feeds it only the framing.
    let mut decoder = ChunkedDecoder::new();
    let mut body = Vec::new();
    let first = decoder
        .decode(b"a\r\n01", |data| body.extend_from_slice(data))
        .unwrap();
    assert_eq!((first.consumed, first.done), (5, false));
    assert_eq!(decoder.pending_data(), 8);
    assert_eq!(decoder.skip_data(100), 8, "never skips past the chunk");
    assert_eq!(decoder.pending_data(), 0);
    let rest = decoder
        .decode(b"\r\n3\r\nxyz\r\n0\r\n\r\n", |data| {
            body.extend_from_slice(data)
        })
        .unwrap();
    assert!(rest.done);
    assert_eq!(body, b"01xyz");
    assert_eq!(decoder.body_len(), 13);
}

#[test]
fn nothing_to_skip_outside_chunk_data() {
    let mut decoder = ChunkedDecoder::new();
    decoder.decode(b"5\r", |_| {}).unwrap();
    assert_eq!(decoder.pending_data(), 0);
    assert_eq!(decoder.skip_data(3), 0);
    let progress = decoder.decode(b"\nhello\r\n0\r\n\r\n", |_| {}).unwrap();
    assert!(progress.done);
}
