//! Explicit size limits applied while parsing a request head ([`Limits`]).
//!
//! Invariants: every limit has a documented default; [`Limits::max_headers`] is clamped to
//! [`MAX_HEADERS_CAP`] (the size of the on-stack header index) and the head window is clamped to
//! [`MAX_HEAD_BYTES_CAP`] (so header offsets fit in `u32`), whatever the configuration says.

/// Hard upper bound on the number of header fields a request may carry, whatever
/// [`Limits::max_headers`] says. It sizes the fixed, on-stack header index of a
/// [`RequestHead`](crate::RequestHead).
pub const MAX_HEADERS_CAP: usize = 128;

/// Hard upper bound on the request head size, whatever [`Limits::max_head_bytes`] says (1 MiB).
pub const MAX_HEAD_BYTES_CAP: usize = 1024 * 1024;

/// Size limits for parsing a request head. Exceeding one is an error with its own status
/// (414 or 431), never a silent truncation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Maximum bytes of the whole head (request line, header fields and the blank line).
    /// A buffer this long without a complete head is rejected with 431. Default 16 KiB.
    /// Values above [`MAX_HEAD_BYTES_CAP`] behave as the cap.
    pub max_head_bytes: usize,
    /// Maximum number of header fields. More is rejected with 431. Default 100. Values above
    /// [`MAX_HEADERS_CAP`] behave as the cap.
    pub max_headers: usize,
    /// Maximum length of the request line (method, target and version, excluding the CRLF and
    /// counting from the start of the buffer). Longer is rejected with 414. Default 8 KiB.
    pub max_request_line_bytes: usize,
}

impl Limits {
    /// `max_headers` clamped to [`MAX_HEADERS_CAP`].
    pub const fn effective_max_headers(&self) -> usize {
        if self.max_headers < MAX_HEADERS_CAP {
            self.max_headers
        } else {
            MAX_HEADERS_CAP
        }
    }

    /// `max_head_bytes` clamped to [`MAX_HEAD_BYTES_CAP`].
    pub const fn effective_max_head_bytes(&self) -> usize {
        if self.max_head_bytes < MAX_HEAD_BYTES_CAP {
            self.max_head_bytes
        } else {
            MAX_HEAD_BYTES_CAP
        }
    }
}

impl Default for Limits {
    /// 16 KiB head, 100 header fields, 8 KiB request line.
    fn default() -> Self {
        Limits {
            max_head_bytes: 16 * 1024,
            max_headers: 100,
            max_request_line_bytes: 8 * 1024,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_documented_values() {
        let limits = Limits::default();
        assert_eq!(limits.max_head_bytes, 16384);
        assert_eq!(limits.max_headers, 100);
        assert_eq!(limits.max_request_line_bytes, 8192);
    }

    #[test]
    fn clamps_to_caps() {
        let limits = Limits {
            max_head_bytes: usize::MAX,
            max_headers: 10_000,
            max_request_line_bytes: 1,
        };
        assert_eq!(limits.effective_max_headers(), MAX_HEADERS_CAP);
        assert_eq!(limits.effective_max_head_bytes(), MAX_HEAD_BYTES_CAP);
    }
}
