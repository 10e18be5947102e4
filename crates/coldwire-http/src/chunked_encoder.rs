//! Writing the chunked transfer coding: chunk-size lines, chunk ends and the last chunk.
//!
//! Invariants: output is always canonical (lower-case hex size without leading zeros, no
//! extensions, no trailers), and a zero-length chunk is never written by
//! [`write_chunk_header`] (it would end the body), only by [`write_last_chunk`].
//! [`ChunkSizeLine`] is a small inline buffer for vectored writes where the data itself is
//! not copied.

/// Longest chunk-size line: 16 hex digits + CRLF.
const MAX_SIZE_LINE: usize = 18;

/// A chunk-size line (`<hex>\r\n`) held inline, for scatter/gather writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkSizeLine {
    bytes: [u8; MAX_SIZE_LINE],
    len: u8,
}

impl ChunkSizeLine {
    /// The size line for a chunk of `len` bytes (`len` must be non-zero for a data chunk;
    /// `0` yields `0\r\n`, the start of the last chunk).
    pub fn new(len: u64) -> ChunkSizeLine {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut bytes = [0u8; MAX_SIZE_LINE];
        let significant_nibbles = if len == 0 {
            1
        } else {
            (64 - len.leading_zeros()).div_ceil(4) as usize
        };
        for (index, slot) in bytes.iter_mut().take(significant_nibbles).enumerate() {
            let shift = (significant_nibbles - 1 - index) * 4;
            let nibble = ((len >> shift) & 0xf) as usize;
            *slot = DIGITS.get(nibble).copied().unwrap_or(b'0');
        }
        if let Some(line_end) = bytes.get_mut(significant_nibbles..significant_nibbles + 2) {
            line_end.copy_from_slice(b"\r\n");
        }
        ChunkSizeLine {
            bytes,
            len: (significant_nibbles + 2) as u8,
        }
    }

    /// The line's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..usize::from(self.len)).unwrap_or(&[])
    }
}

/// Appends the size line for a chunk of `len` bytes; the caller then writes exactly `len`
/// data bytes and [`write_chunk_end`]. Does nothing for `len == 0`, because an empty chunk
/// would terminate the body.
pub fn write_chunk_header(out: &mut Vec<u8>, len: u64) {
    if len != 0 {
        out.extend_from_slice(ChunkSizeLine::new(len).as_bytes());
    }
}

/// Appends the CRLF that follows a chunk's data.
pub fn write_chunk_end(out: &mut Vec<u8>) {
    out.extend_from_slice(b"\r\n");
}

/// Appends a whole chunk (size line, data, CRLF). Does nothing for empty `data`.
pub fn write_chunk(out: &mut Vec<u8>, data: &[u8]) {
    if !data.is_empty() {
        write_chunk_header(out, data.len() as u64);
        out.extend_from_slice(data);
        write_chunk_end(out);
    }
}

/// Appends the last chunk with an empty trailer section: `0\r\n\r\n`.
pub fn write_last_chunk(out: &mut Vec<u8>) {
    out.extend_from_slice(b"0\r\n\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunked::ChunkedDecoder;

    #[test]
    fn size_lines() {
        assert_eq!(ChunkSizeLine::new(0).as_bytes(), b"0\r\n");
        assert_eq!(ChunkSizeLine::new(1).as_bytes(), b"1\r\n");
        assert_eq!(ChunkSizeLine::new(255).as_bytes(), b"ff\r\n");
        assert_eq!(ChunkSizeLine::new(4096).as_bytes(), b"1000\r\n");
        assert_eq!(
            ChunkSizeLine::new(u64::MAX).as_bytes(),
            b"ffffffffffffffff\r\n"
        );
    }

    #[test]
    fn writes_a_body_the_decoder_reads_back() {
        let mut out = Vec::new();
        write_chunk(&mut out, b"hello ");
        write_chunk(&mut out, b"");
        write_chunk_header(&mut out, 5);
        out.extend_from_slice(b"world");
        write_chunk_end(&mut out);
        write_last_chunk(&mut out);
        assert_eq!(out, b"6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n");

        let mut decoder = ChunkedDecoder::new();
        let mut body = Vec::new();
        let progress = decoder
            .decode(&out, |data| body.extend_from_slice(data))
            .expect("valid");
        assert!(progress.done);
        assert_eq!(progress.consumed, out.len());
        assert_eq!(body, b"hello world");
    }

    proptest::proptest! {
        #[test]
        fn size_line_is_lowercase_hex_of_len(len in proptest::num::u64::ANY) {
            let line = ChunkSizeLine::new(len);
            let text = std::str::from_utf8(line.as_bytes()).expect("ascii");
            proptest::prop_assert_eq!(text, format!("{len:x}\r\n"));
        }
    }
}
