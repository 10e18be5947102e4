//! Incremental reading of one response on a connection: the head (parsed in place when it
//! arrives whole, which is the common case, else gathered in a small vector), then the body
//! by its framing — `Content-Length`, chunked, or until the server closes.
//!
//! Never panics on what the server sends: a malformed head, an over-long head, ambiguous
//! framing or bytes beyond the response (nothing was asked for them) are
//! [`ReadOutcome::Malformed`].

use coldwire_http::{ChunkedDecoder, ResponseFraming, parse_response_head};

/// Largest response head accepted.
pub const MAX_RESPONSE_HEAD: usize = 64 * 1024;

#[derive(Debug)]
enum State {
    Head,
    Length(u64),
    Chunked(Box<ChunkedDecoder>),
    UntilClose,
}

/// What feeding bytes produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOutcome {
    /// The response is not complete yet.
    NeedMore,
    /// The response is complete.
    Complete {
        /// Its status code.
        status: u16,
        /// Whether the connection may carry another request.
        keep_alive: bool,
    },
    /// The server sent something that is not a valid response (or more than one).
    Malformed(&'static str),
}

/// Reads one response at a time; [`ResponseReader::reset`] before the next request.
#[derive(Debug)]
pub struct ResponseReader {
    partial_head: Vec<u8>,
    state: State,
    status: u16,
    keep_alive: bool,
    /// Bytes received for this response (head and body).
    received: u64,
    /// The request was HEAD: the response has no body whatever its framing fields say.
    head_request: bool,
}

impl Default for ResponseReader {
    fn default() -> Self {
        ResponseReader::new()
    }
}

impl ResponseReader {
    /// A reader waiting for a response head.
    pub fn new() -> ResponseReader {
        ResponseReader {
            partial_head: Vec::new(),
            state: State::Head,
            status: 0,
            keep_alive: false,
            received: 0,
            head_request: false,
        }
    }

    /// Forgets the previous response.
    pub fn reset(&mut self) {
        self.partial_head.clear();
        self.state = State::Head;
        self.status = 0;
        self.received = 0;
    }

    /// Reads the next responses as answers to HEAD requests (no body) when `head`.
    pub fn set_head_request(&mut self, head: bool) {
        self.head_request = head;
    }

    /// Bytes received for the current response so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// True before any byte of the response has arrived.
    pub fn nothing_received(&self) -> bool {
        self.received == 0
    }

    /// Feeds bytes that arrived.
    pub fn feed(&mut self, input: &[u8]) -> ReadOutcome {
        self.received += input.len() as u64;
        let body = match self.state {
            State::Head => {
                let parsed = if self.partial_head.is_empty() {
                    parse_response_head(input, self.head_request)
                } else {
                    self.partial_head.extend_from_slice(input);
                    parse_response_head(&self.partial_head, self.head_request)
                };
                match parsed {
                    Ok(None) => {
                        if self.partial_head.is_empty() {
                            self.partial_head.extend_from_slice(input);
                        }
                        if self.partial_head.len() > MAX_RESPONSE_HEAD {
                            return ReadOutcome::Malformed("response head too large");
                        }
                        return ReadOutcome::NeedMore;
                    }
                    Err(_) => return ReadOutcome::Malformed("malformed response head"),
                    Ok(Some(head)) => {
                        self.status = head.status;
                        self.keep_alive = head.keep_alive;
                        self.state = match head.framing {
                            ResponseFraming::Empty => State::Length(0),
                            ResponseFraming::Length(length) => State::Length(length),
                            ResponseFraming::Chunked => {
                                State::Chunked(Box::new(ChunkedDecoder::new()))
                            }
                            ResponseFraming::UntilClose => State::UntilClose,
                        };
                        if self.partial_head.is_empty() {
                            input.get(head.head_len..).unwrap_or_default()
                        } else {
                            let gathered = std::mem::take(&mut self.partial_head);
                            let outcome =
                                self.body(gathered.get(head.head_len..).unwrap_or_default());
                            self.partial_head = gathered;
                            self.partial_head.clear();
                            return outcome;
                        }
                    }
                }
            }
            _ => input,
        };
        self.body(body)
    }

    fn body(&mut self, input: &[u8]) -> ReadOutcome {
        match &mut self.state {
            State::Head => ReadOutcome::NeedMore,
            State::Length(remaining) => {
                let length = input.len() as u64;
                if length > *remaining {
                    return ReadOutcome::Malformed("bytes beyond the response");
                }
                *remaining -= length;
                if *remaining == 0 {
                    self.complete()
                } else {
                    ReadOutcome::NeedMore
                }
            }
            State::Chunked(decoder) => match decoder.decode(input, |_| {}) {
                Err(_) => ReadOutcome::Malformed("invalid chunked body"),
                Ok(progress) if progress.done => {
                    if progress.consumed < input.len() {
                        ReadOutcome::Malformed("bytes beyond the response")
                    } else {
                        self.complete()
                    }
                }
                Ok(_) => ReadOutcome::NeedMore,
            },
            State::UntilClose => ReadOutcome::NeedMore,
        }
    }

    fn complete(&mut self) -> ReadOutcome {
        let outcome = ReadOutcome::Complete {
            status: self.status,
            keep_alive: self.keep_alive,
        };
        self.state = State::Head;
        outcome
    }

    /// The server closed the connection: completes a close-delimited body, else `None`
    /// (the response was cut short).
    pub fn end_of_stream(&mut self) -> Option<ReadOutcome> {
        match self.state {
            State::UntilClose => Some(self.complete()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_in_pieces(response: &[u8], piece: usize) -> Vec<ReadOutcome> {
        let mut reader = ResponseReader::new();
        response
            .chunks(piece)
            .map(|bytes| reader.feed(bytes))
            .collect()
    }

    #[test]
    fn content_length_and_chunked_complete_for_every_split() {
        let length = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789";
        let chunked =
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
        for piece in 1..=length.len() {
            let outcomes = feed_in_pieces(length, piece);
            assert_eq!(
                outcomes.last(),
                Some(&ReadOutcome::Complete {
                    status: 200,
                    keep_alive: true
                })
            );
            assert!(
                outcomes[..outcomes.len() - 1]
                    .iter()
                    .all(|outcome| *outcome == ReadOutcome::NeedMore)
            );
        }
        for piece in 1..=chunked.len() {
            assert_eq!(
                feed_in_pieces(chunked, piece).last(),
                Some(&ReadOutcome::Complete {
                    status: 404,
                    keep_alive: true
                })
            );
        }
    }

    #[test]
    fn close_delimited_body_ends_at_end_of_stream() {
        let mut reader = ResponseReader::new();
        assert_eq!(
            reader.feed(b"HTTP/1.0 200 OK\r\n\r\nabc"),
            ReadOutcome::NeedMore
        );
        assert_eq!(
            reader.end_of_stream(),
            Some(ReadOutcome::Complete {
                status: 200,
                keep_alive: false
            })
        );
        let mut cut = ResponseReader::new();
        cut.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab");
        assert_eq!(cut.end_of_stream(), None);
    }

    #[test]
    fn garbage_extra_bytes_and_huge_heads_are_malformed() {
        let mut reader = ResponseReader::new();
        assert!(matches!(
            reader.feed(b"\x16\x03\x01 hello\r\n\r\n"),
            ReadOutcome::Malformed(_)
        ));
        let mut extra = ResponseReader::new();
        assert!(matches!(
            extra.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab"),
            ReadOutcome::Malformed(_)
        ));
        let mut huge = ResponseReader::new();
        huge.feed(b"HTTP/1.1 200 OK\r\n");
        let field = [b'a'; 1000];
        let mut last = ReadOutcome::NeedMore;
        for _ in 0..100 {
            last = huge.feed(&field);
            if last != ReadOutcome::NeedMore {
                break;
            }
        }
        assert!(matches!(last, ReadOutcome::Malformed(_)));
    }

    #[test]
    fn a_head_response_has_no_body_whatever_its_length_says() {
        let mut reader = ResponseReader::new();
        reader.set_head_request(true);
        assert_eq!(
            reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"),
            ReadOutcome::Complete {
                status: 200,
                keep_alive: true
            }
        );
        reader.set_head_request(false);
        reader.reset();
        assert_eq!(
            reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"),
            ReadOutcome::NeedMore
        );
    }

    #[test]
    fn reader_is_reusable_after_reset() {
        let mut reader = ResponseReader::new();
        let response = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        for _ in 0..3 {
            assert!(matches!(
                reader.feed(response),
                ReadOutcome::Complete { .. }
            ));
            reader.reset();
            assert!(reader.nothing_received());
        }
    }
}
