//! Fuzz target: the chunked decoder must never panic, and feeding the same bytes in two pieces
//! (split at a point taken from the input) must give the same body and end position as
//! feeding them at once.
#![no_main]

use coldwire_http::ChunkedDecoder;
use libfuzzer_sys::fuzz_target;

fn decode(pieces: &[&[u8]]) -> Option<(Vec<u8>, usize, bool)> {
    let mut decoder = ChunkedDecoder::with_limits(64, 256);
    let mut body = Vec::new();
    let mut consumed = 0;
    for piece in pieces {
        let progress = decoder
            .decode(piece, |data| body.extend_from_slice(data))
            .ok()?;
        consumed += progress.consumed;
        if progress.done {
            return Some((body, consumed, true));
        }
        assert_eq!(progress.consumed, piece.len());
    }
    Some((body, consumed, false))
}

fuzz_target!(|data: &[u8]| {
    let Some((&split_byte, input)) = data.split_first() else {
        return;
    };
    let split = usize::from(split_byte).min(input.len());
    let whole = decode(&[input]);
    let (first, second) = input.split_at(split);
    let pieces = decode(&[first, second]);
    assert_eq!(whole, pieces);
    if let Some((body, consumed, _)) = whole {
        assert!(consumed <= input.len());
        assert!(body.len() <= consumed);
    }
});
