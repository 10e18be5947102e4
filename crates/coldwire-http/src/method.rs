//! Request methods ([`Method`]).
//!
//! Invariant: classification is exact and case-sensitive (RFC 9110 §9.1: methods are
//! case-sensitive); anything not standard becomes [`Method::Other`], and the original spelling
//! stays available through `RequestHead::method_str`.

/// A request method. Unknown methods are [`Method::Other`]; they are not errors here, the
/// server decides (typically 501 or 405).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET`.
    Get,
    /// `HEAD`.
    Head,
    /// `POST`.
    Post,
    /// `PUT`.
    Put,
    /// `DELETE`.
    Delete,
    /// `OPTIONS`.
    Options,
    /// `TRACE`.
    Trace,
    /// `CONNECT`.
    Connect,
    /// `PATCH`.
    Patch,
    /// Any other (syntactically valid) method token.
    Other,
}

impl Method {
    /// Classifies a method token. Case-sensitive: `get` is [`Method::Other`].
    pub fn from_bytes(token: &[u8]) -> Method {
        match token {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"OPTIONS" => Method::Options,
            b"TRACE" => Method::Trace,
            b"CONNECT" => Method::Connect,
            b"PATCH" => Method::Patch,
            _ => Method::Other,
        }
    }

    /// True for `GET` and `HEAD`, the methods for which conditional requests may yield 304
    /// and for which `Range` is honoured.
    pub const fn is_get_or_head(self) -> bool {
        matches!(self, Method::Get | Method::Head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_standard_methods_case_sensitively() {
        assert_eq!(Method::from_bytes(b"GET"), Method::Get);
        assert_eq!(Method::from_bytes(b"CONNECT"), Method::Connect);
        assert_eq!(Method::from_bytes(b"get"), Method::Other);
        assert_eq!(Method::from_bytes(b"PROPFIND"), Method::Other);
        assert!(Method::Head.is_get_or_head());
        assert!(!Method::Post.is_get_or_head());
    }
}
