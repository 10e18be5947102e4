//! Fuzz target: the chunked encoder (`coldwire_http::chunked_encoder`) and `ChunkedDecoder`
//! against each other.
//!
//! Input: `flags`, `n`, `n` chunk-length bytes, `m`, `m` feed-length bytes, then the body.
//! The body is cut into chunks of those lengths (times `1 + flags >> 4`; the rest is one
//! last chunk; a zero length writes nothing, as the encoder promises) and encoded with
//! `write_chunk`, with `write_chunk_header` + data + `write_chunk_end` (flag bit 0) or with
//! `ChunkSizeLine` (flag bit 1), then `write_last_chunk`. The bytes of a next message follow.
//! The decoder is fed pieces of the feed lengths (an empty piece included), then the rest;
//! with flag bit 2 a piece starting inside chunk data is first partly taken past the
//! decoder with `skip_data` (as the proxy's splice path does).
//!
//! Property: the decoded body (handed-out and skipped bytes, in order) equals the input
//! body; no handed-out run is empty; the decoder reports done exactly when the last byte of
//! the encoding has been fed, never before, and has then consumed exactly the encoded length
//! (not one byte of the next message); `body_len()` equals the body length; after done it
//! consumes nothing more.
#![no_main]

use coldwire_http::{
    ChunkSizeLine, ChunkedDecoder, write_chunk, write_chunk_end, write_chunk_header,
    write_last_chunk,
};
use libfuzzer_sys::fuzz_target;

const NEXT_MESSAGE: &[u8] = b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n";

/// Splits `data` into a length-prefixed list of bytes and the rest.
fn take_list(data: &[u8]) -> (&[u8], &[u8]) {
    let Some((&count, rest)) = data.split_first() else {
        return (&[], &[]);
    };
    rest.split_at(usize::from(count).min(rest.len()))
}

fn encode(body: &[u8], chunk_lengths: &[u8], flags: u8) -> Vec<u8> {
    let scale = 1 + usize::from(flags >> 4);
    let mut out = Vec::new();
    let mut rest = body;
    let write = |out: &mut Vec<u8>, data: &[u8]| {
        if flags & 1 == 1 {
            write_chunk_header(out, data.len() as u64);
            out.extend_from_slice(data);
            if !data.is_empty() {
                write_chunk_end(out);
            }
        } else if flags & 2 == 2 {
            if !data.is_empty() {
                out.extend_from_slice(ChunkSizeLine::new(data.len() as u64).as_bytes());
                out.extend_from_slice(data);
                write_chunk_end(out);
            }
        } else {
            write_chunk(out, data);
        }
    };
    for &length in chunk_lengths {
        let (chunk, after) = rest.split_at((usize::from(length) * scale).min(rest.len()));
        write(&mut out, chunk);
        rest = after;
    }
    write(&mut out, rest);
    write_last_chunk(&mut out);
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, data)) = data.split_first() else {
        return;
    };
    let (chunk_lengths, data) = take_list(data);
    let (feed_lengths, body) = take_list(data);

    let encoded = encode(body, chunk_lengths, flags);
    let mut stream = encoded.clone();
    stream.extend_from_slice(NEXT_MESSAGE);

    let mut decoder = ChunkedDecoder::new();
    let mut decoded = Vec::new();
    let mut position = 0;
    let mut feeds = feed_lengths.iter().map(|&length| usize::from(length));
    let mut done = false;
    while !done {
        let length = feeds.next().unwrap_or(stream.len() - position);
        let mut piece = &stream[position..(position + length).min(stream.len())];
        if flags & 4 == 4 && decoder.pending_data() > 0 && !piece.is_empty() {
            let wanted = (piece.len() as u64).div_ceil(2);
            let taken = decoder.skip_data(wanted);
            assert!(taken > 0 && taken <= wanted);
            let taken = taken as usize;
            decoded.extend_from_slice(&piece[..taken]);
            position += taken;
            piece = &piece[taken..];
        }
        let progress = decoder
            .decode(piece, |run| {
                assert!(!run.is_empty(), "an empty run of body bytes");
                decoded.extend_from_slice(run);
            })
            .expect("the encoder's output decodes");
        position += progress.consumed;
        done = progress.done;
        assert_eq!(decoder.is_done(), done);
        if done {
            assert_eq!(position, encoded.len(), "done at the wrong place");
        } else {
            assert_eq!(progress.consumed, piece.len(), "stopped early without done");
            assert!(
                position < encoded.len(),
                "all of the encoding fed, not done"
            );
        }
    }
    assert_eq!(decoded, body);
    assert_eq!(decoder.body_len(), body.len() as u64);
    let after = decoder
        .decode(NEXT_MESSAGE, |_| panic!("body bytes after the end"))
        .expect("done stays done");
    assert_eq!((after.consumed, after.done), (0, true));
});
