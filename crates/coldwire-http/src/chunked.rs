//! Incremental decoding of the chunked transfer coding (RFC 9112 §7.1): [`ChunkedDecoder`].
//!
//! Invariants:
//! - Input may be split anywhere; the decoded body and the position of the end of the message
//!   are the same for every split (property-tested).
//! - Body bytes are handed out as sub-slices of the input, never copied.
//! - Every line ends in CRLF (a bare LF or bare CR is an error: lenient line endings inside
//!   bodies are a request-smuggling vector). Size lines follow the grammar exactly
//!   (`chunk_line.rs`): chunk extensions are checked, then skipped. Trailer lines must
//!   be field lines (`token ":" value`); they are kept (see [`ChunkedDecoder::trailers`]) for
//!   the caller to filter ([`crate::trailers`]). Size lines and the trailer section are
//!   bounded, and a chunk size that overflows `u64` is an error, so a peer cannot make the
//!   decoder loop or buffer unboundedly.
//! - After an error the decoder stays failed; after the end it consumes nothing more.

use crate::chunk_line::{LineStep, SizeLine};
use crate::error::HttpError;
use crate::trailers::{TrailerFields, check_field_line};

/// Default bound on one chunk-size line including extensions (bytes before the CRLF).
pub const DEFAULT_MAX_CHUNK_LINE_BYTES: usize = 4096;

/// Default bound on the whole trailer section (bytes of all trailer lines).
pub const DEFAULT_MAX_TRAILER_BYTES: usize = 8192;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Inside a chunk-size line (size, then extensions).
    Size(SizeLine),
    /// Saw CR at the end of a size line.
    SizeLf,
    /// Inside chunk data.
    Data,
    /// Expecting the CR after chunk data.
    DataCr,
    /// Expecting the LF after chunk data.
    DataLf,
    /// At the start of a trailer line (or of the final CRLF).
    TrailerLineStart,
    /// Inside a trailer field line.
    TrailerLine,
    /// Saw CR at the end of a trailer field line.
    TrailerLineLf,
    /// Saw CR of the final empty line.
    TrailerEndLf,
    /// The message is complete.
    Done,
    /// A previous call failed.
    Failed,
}

/// Progress reported by [`ChunkedDecoder::decode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkedProgress {
    /// Bytes of input consumed. When `done`, the bytes after this belong to the next message.
    pub consumed: usize,
    /// True once the last chunk and the trailer section have been read.
    pub done: bool,
}

/// Incremental chunked-body decoder. Feed it input as it arrives; it calls back with body data.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
    chunk_size: u64,
    remaining: u64,
    line_len: usize,
    trailer_len: usize,
    body_len: u64,
    max_line: usize,
    max_trailer: usize,
    error: Option<HttpError>,
    /// Trailer lines received so far, each without its CRLF and followed by `\n`.
    trailer: Vec<u8>,
}

impl Default for ChunkedDecoder {
    /// Same as [`ChunkedDecoder::new`].
    fn default() -> Self {
        ChunkedDecoder::new()
    }
}

impl ChunkedDecoder {
    /// A decoder with [`DEFAULT_MAX_CHUNK_LINE_BYTES`] and [`DEFAULT_MAX_TRAILER_BYTES`].
    pub fn new() -> ChunkedDecoder {
        ChunkedDecoder::with_limits(DEFAULT_MAX_CHUNK_LINE_BYTES, DEFAULT_MAX_TRAILER_BYTES)
    }

    /// A decoder with explicit bounds on a chunk-size line and on the trailer section.
    pub fn with_limits(max_chunk_line_bytes: usize, max_trailer_bytes: usize) -> ChunkedDecoder {
        ChunkedDecoder {
            state: State::Size(SizeLine::Start),
            chunk_size: 0,
            remaining: 0,
            line_len: 0,
            trailer_len: 0,
            body_len: 0,
            max_line: max_chunk_line_bytes,
            max_trailer: max_trailer_bytes,
            error: None,
            trailer: Vec::new(),
        }
    }

    /// True once the whole chunked body (including trailers) has been consumed.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The trailer fields received (complete once [`ChunkedDecoder::is_done`]), as
    /// (name, value) in received order; every one passed [`crate::trailers`]' field-line
    /// check. Filter them with [`crate::trailers::allowed_in_trailers`] before forwarding.
    pub fn trailers(&self) -> TrailerFields<'_> {
        TrailerFields::new(&self.trailer)
    }

    /// Total body bytes decoded so far (what `Content-Length` would have been); use it to
    /// enforce a body size limit.
    pub fn body_len(&self) -> u64 {
        self.body_len
    }

    /// Bytes of the current chunk's data still to come (0 outside chunk data). A proxy may
    /// move them without looking at them (`splice(2)`) and report them with
    /// [`ChunkedDecoder::skip_data`].
    pub fn pending_data(&self) -> u64 {
        if self.state == State::Data {
            self.remaining
        } else {
            0
        }
    }

    /// Accounts for `count` bytes of the current chunk's data that went past without being
    /// fed (at most [`ChunkedDecoder::pending_data`]; returns how many were taken). The
    /// framing after them (CRLF, next size line) is decoded as usual.
    pub fn skip_data(&mut self, count: u64) -> u64 {
        let taken = count.min(self.pending_data());
        self.remaining -= taken;
        self.body_len = self.body_len.saturating_add(taken);
        if taken > 0 && self.remaining == 0 {
            self.state = State::DataCr;
        }
        taken
    }

    /// Consumes as much of `input` as possible, calling `on_data` with each run of body bytes
    /// (sub-slices of `input`, never empty).
    ///
    /// Returns how many bytes were consumed and whether the body is complete. Unless done,
    /// all of `input` is consumed, so the caller can discard it and feed only new bytes next
    /// time. Errors are [`HttpError::InvalidChunkedBody`] and are sticky.
    pub fn decode(
        &mut self,
        input: &[u8],
        mut on_data: impl FnMut(&[u8]),
    ) -> Result<ChunkedProgress, HttpError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        let mut position = 0;
        while position < input.len() {
            if self.state == State::Done {
                break;
            }
            if self.state == State::Data {
                let available = input.len() - position;
                let take = usize::try_from(self.remaining).map_or(available, |r| r.min(available));
                if let Some(data) = input.get(position..position + take)
                    && !data.is_empty()
                {
                    on_data(data);
                }
                position += take;
                self.remaining -= take as u64;
                self.body_len = self.body_len.saturating_add(take as u64);
                if self.remaining == 0 {
                    self.state = State::DataCr;
                }
                continue;
            }
            let Some(&byte) = input.get(position) else {
                break;
            };
            position += 1;
            if let Err(error) = self.step(byte) {
                self.state = State::Failed;
                self.error = Some(error);
                return Err(error);
            }
        }
        Ok(ChunkedProgress {
            consumed: position,
            done: self.state == State::Done,
        })
    }

    /// Advances the framing state machine by one byte (never called in `Data` or `Done`).
    fn step(&mut self, byte: u8) -> Result<(), HttpError> {
        match self.state {
            State::Size(line) => {
                self.line_len += 1;
                if self.line_len > self.max_line {
                    return Err(HttpError::InvalidChunkedBody("chunk size line too long"));
                }
                match line.step(byte)? {
                    LineStep::Continue(next) => self.state = State::Size(next),
                    LineStep::Digit(value) => {
                        if self.chunk_size > (u64::MAX >> 4) {
                            return Err(HttpError::InvalidChunkedBody("chunk size overflow"));
                        }
                        self.chunk_size = (self.chunk_size << 4) | u64::from(value);
                        self.state = State::Size(SizeLine::Digits);
                    }
                    LineStep::End => self.state = State::SizeLf,
                }
                Ok(())
            }
            State::SizeLf => {
                expect_lf(byte)?;
                self.line_len = 0;
                if self.chunk_size == 0 {
                    self.state = State::TrailerLineStart;
                } else {
                    self.remaining = self.chunk_size;
                    self.state = State::Data;
                }
                Ok(())
            }
            State::DataCr => {
                if byte != b'\r' {
                    return Err(HttpError::InvalidChunkedBody(
                        "chunk data longer than its size (no CRLF after it)",
                    ));
                }
                self.state = State::DataLf;
                Ok(())
            }
            State::DataLf => {
                expect_lf(byte)?;
                self.chunk_size = 0;
                self.state = State::Size(SizeLine::Start);
                Ok(())
            }
            State::TrailerLineStart | State::TrailerLine => {
                self.trailer_len += 1;
                if self.trailer_len > self.max_trailer {
                    return Err(HttpError::InvalidChunkedBody("trailer section too large"));
                }
                match (self.state, byte) {
                    (State::TrailerLineStart, b'\r') => self.state = State::TrailerEndLf,
                    (_, b'\r') => self.state = State::TrailerLineLf,
                    (_, b'\n') => return Err(HttpError::InvalidChunkedBody("bare LF")),
                    _ => {
                        self.trailer.push(byte);
                        self.state = State::TrailerLine;
                    }
                }
                Ok(())
            }
            State::TrailerLineLf => {
                expect_lf(byte)?;
                let line_start = self
                    .trailer
                    .iter()
                    .rposition(|&stored| stored == b'\n')
                    .map_or(0, |newline| newline + 1);
                check_field_line(self.trailer.get(line_start..).unwrap_or(&[]))?;
                self.trailer.push(b'\n');
                self.state = State::TrailerLineStart;
                Ok(())
            }
            State::TrailerEndLf => {
                expect_lf(byte)?;
                self.state = State::Done;
                Ok(())
            }
            State::Data | State::Done | State::Failed => Ok(()),
        }
    }
}

fn expect_lf(byte: u8) -> Result<(), HttpError> {
    if byte == b'\n' {
        Ok(())
    } else {
        Err(HttpError::InvalidChunkedBody(
            "bare CR (not followed by LF)",
        ))
    }
}

#[cfg(test)]
#[path = "chunked_tests.rs"]
mod tests;
