//! The HTTP protocol version of a message ([`Version`]).
//!
//! Invariant: only HTTP/1.0 and HTTP/1.1 exist here; anything else is rejected by the request
//! parser before a [`Version`] is ever produced.

/// An HTTP/1.x protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    /// `HTTP/1.0`: connections close after each response unless `Connection: keep-alive`.
    Http10,
    /// `HTTP/1.1`: persistent connections by default; `Host` is mandatory in requests.
    Http11,
}

impl Version {
    /// The version as written on the wire, e.g. `b"HTTP/1.1"`.
    pub const fn as_bytes(self) -> &'static [u8] {
        match self {
            Version::Http10 => b"HTTP/1.0",
            Version::Http11 => b"HTTP/1.1",
        }
    }

    /// The version as written on the wire, e.g. `"HTTP/1.1"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_spelling() {
        assert_eq!(Version::Http10.as_bytes(), b"HTTP/1.0");
        assert_eq!(Version::Http11.as_str(), "HTTP/1.1");
        assert!(Version::Http10 < Version::Http11);
    }
}
