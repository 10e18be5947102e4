//! The crate's single error type, [`HttpError`], and its mapping to a response status.
//!
//! Invariants: every variant is allocation-free (reasons are `&'static str`), cheap to copy,
//! and maps to exactly one [`Status`] via [`HttpError::status`], so a server can answer any
//! codec error without further thought.

use crate::status::Status;

/// Everything that can go wrong while decoding or validating HTTP/1.x input.
///
/// Each variant maps to the status code a server should answer with (see
/// [`HttpError::status`]). After any of these on a request head the connection should be
/// closed after the error response, because framing can no longer be trusted.
#[derive(thiserror::Error, Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpError {
    /// The request is malformed (syntax, framing, missing or duplicate `Host`, ...). → 400.
    #[error("bad request: {0}")]
    BadRequest(&'static str),
    /// The request line is longer than [`Limits::max_request_line_bytes`](crate::Limits). → 414.
    #[error("request line too long")]
    UriTooLong,
    /// The request head is longer than [`Limits::max_head_bytes`](crate::Limits). → 431.
    #[error("request head too large")]
    HeadTooLarge,
    /// The request has more header fields than [`Limits::max_headers`](crate::Limits). → 431.
    #[error("too many header fields")]
    TooManyHeaders,
    /// The request is well-formed but asks for something never allowed, such as a path with
    /// a `..` segment. → 403.
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
    /// The request uses a feature this codec does not implement, such as a transfer coding
    /// other than `chunked`. → 501.
    #[error("not implemented: {0}")]
    NotImplemented(&'static str),
    /// The request line names a well-formed HTTP version other than 1.0 and 1.1 (e.g.
    /// `HTTP/2.0` on an HTTP/1 connection). → 505.
    #[error("HTTP version not supported")]
    VersionNotSupported,
    /// A chunked message body is malformed or exceeds the decoder's limits. → 400.
    #[error("invalid chunked body: {0}")]
    InvalidChunkedBody(&'static str),
    /// The request's `Expect` names an expectation other than `100-continue`, which
    /// nothing here can meet (RFC 9110 §10.1.1). → 417.
    #[error("unsupported expectation (only 100-continue is supported)")]
    ExpectationFailed,
}

impl HttpError {
    /// The status code a server should answer with for this error.
    ///
    /// `BadRequest` and `InvalidChunkedBody` → 400, `UriTooLong` → 414, `HeadTooLarge` and
    /// `TooManyHeaders` → 431, `Forbidden` → 403, `NotImplemented` → 501, `VersionNotSupported` → 505,
    /// `ExpectationFailed` → 417.
    pub const fn status(&self) -> Status {
        match self {
            HttpError::BadRequest(_) | HttpError::InvalidChunkedBody(_) => Status::BAD_REQUEST,
            HttpError::UriTooLong => Status::URI_TOO_LONG,
            HttpError::HeadTooLarge | HttpError::TooManyHeaders => {
                Status::REQUEST_HEADER_FIELDS_TOO_LARGE
            }
            HttpError::Forbidden(_) => Status::FORBIDDEN,
            HttpError::NotImplemented(_) => Status::NOT_IMPLEMENTED,
            HttpError::VersionNotSupported => Status::HTTP_VERSION_NOT_SUPPORTED,
            HttpError::ExpectationFailed => Status::EXPECTATION_FAILED,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_maps_to_its_status() {
        assert_eq!(HttpError::BadRequest("x").status().code(), 400);
        assert_eq!(HttpError::InvalidChunkedBody("x").status().code(), 400);
        assert_eq!(HttpError::UriTooLong.status().code(), 414);
        assert_eq!(HttpError::HeadTooLarge.status().code(), 431);
        assert_eq!(HttpError::TooManyHeaders.status().code(), 431);
        assert_eq!(HttpError::Forbidden("x").status().code(), 403);
        assert_eq!(HttpError::NotImplemented("x").status().code(), 501);
        assert_eq!(HttpError::ExpectationFailed.status().code(), 417);
    }

    #[test]
    fn display_includes_reason() {
        assert_eq!(
            HttpError::BadRequest("missing Host").to_string(),
            "bad request: missing Host"
        );
    }
}
