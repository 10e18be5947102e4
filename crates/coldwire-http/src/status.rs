//! Response status codes ([`Status`]), their reason phrases and prebuilt status lines.
//!
//! Invariants: a [`Status`] always holds a three-digit code (100..=999). Every code in the
//! table below has a `'static` reason phrase and `'static` status lines for both versions, so
//! writing a known status line is a single copy with no formatting or allocation.

use crate::version::Version;

/// An HTTP response status code (always three digits, 100..=999).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Status(u16);

impl Status {
    /// Wraps a code. Returns `None` unless `code` has exactly three digits (100..=999).
    /// Codes outside the built-in table are allowed (a proxy may relay them); they simply have
    /// no reason phrase or static status line.
    pub const fn from_u16(code: u16) -> Option<Status> {
        if code >= 100 && code <= 999 {
            Some(Status(code))
        } else {
            None
        }
    }

    /// The numeric code, e.g. `404`.
    pub const fn code(self) -> u16 {
        self.0
    }

    /// The standard reason phrase, e.g. `"Not Found"`; `""` for codes outside the table
    /// (RFC 9112 §4 allows an empty reason phrase).
    pub const fn reason(self) -> &'static str {
        match table_entry(self.0) {
            Some((reason, _, _)) => reason,
            None => "",
        }
    }

    /// The full status line including the trailing CRLF, e.g. `b"HTTP/1.1 200 OK\r\n"`, as a
    /// static byte string. `None` for codes outside the table; use
    /// [`write_status_line`](crate::write_status_line), which handles every code.
    pub const fn status_line(self, version: Version) -> Option<&'static [u8]> {
        match table_entry(self.0) {
            Some((_, http10, http11)) => match version {
                Version::Http10 => Some(http10),
                Version::Http11 => Some(http11),
            },
            None => None,
        }
    }

    /// True for 1xx, 204 and 304: responses that never carry a body (RFC 9112 §6.3).
    pub const fn forbids_body(self) -> bool {
        (self.0 >= 100 && self.0 < 200) || self.0 == 204 || self.0 == 304
    }

    /// True for 2xx.
    pub const fn is_success(self) -> bool {
        self.0 >= 200 && self.0 < 300
    }
}

macro_rules! status_table {
    ($( $name:ident = $code:literal, $reason:literal; )*) => {
        impl Status {
            $(
                #[doc = concat!("`", $code, " ", $reason, "`.")]
                pub const $name: Status = Status($code);
            )*
        }

        /// (reason, HTTP/1.0 line, HTTP/1.1 line) for a known code.
        const fn table_entry(code: u16) -> Option<(&'static str, &'static [u8], &'static [u8])> {
            match code {
                $(
                    $code => Some((
                        $reason,
                        concat!("HTTP/1.0 ", $code, " ", $reason, "\r\n").as_bytes(),
                        concat!("HTTP/1.1 ", $code, " ", $reason, "\r\n").as_bytes(),
                    )),
                )*
                _ => None,
            }
        }
    };
}

status_table! {
    CONTINUE = 100, "Continue";
    SWITCHING_PROTOCOLS = 101, "Switching Protocols";
    OK = 200, "OK";
    CREATED = 201, "Created";
    ACCEPTED = 202, "Accepted";
    NON_AUTHORITATIVE_INFORMATION = 203, "Non-Authoritative Information";
    NO_CONTENT = 204, "No Content";
    RESET_CONTENT = 205, "Reset Content";
    PARTIAL_CONTENT = 206, "Partial Content";
    MULTIPLE_CHOICES = 300, "Multiple Choices";
    MOVED_PERMANENTLY = 301, "Moved Permanently";
    FOUND = 302, "Found";
    SEE_OTHER = 303, "See Other";
    NOT_MODIFIED = 304, "Not Modified";
    TEMPORARY_REDIRECT = 307, "Temporary Redirect";
    PERMANENT_REDIRECT = 308, "Permanent Redirect";
    BAD_REQUEST = 400, "Bad Request";
    UNAUTHORIZED = 401, "Unauthorized";
    FORBIDDEN = 403, "Forbidden";
    NOT_FOUND = 404, "Not Found";
    METHOD_NOT_ALLOWED = 405, "Method Not Allowed";
    NOT_ACCEPTABLE = 406, "Not Acceptable";
    REQUEST_TIMEOUT = 408, "Request Timeout";
    CONFLICT = 409, "Conflict";
    GONE = 410, "Gone";
    LENGTH_REQUIRED = 411, "Length Required";
    PRECONDITION_FAILED = 412, "Precondition Failed";
    CONTENT_TOO_LARGE = 413, "Content Too Large";
    URI_TOO_LONG = 414, "URI Too Long";
    UNSUPPORTED_MEDIA_TYPE = 415, "Unsupported Media Type";
    RANGE_NOT_SATISFIABLE = 416, "Range Not Satisfiable";
    EXPECTATION_FAILED = 417, "Expectation Failed";
    MISDIRECTED_REQUEST = 421, "Misdirected Request";
    UNPROCESSABLE_CONTENT = 422, "Unprocessable Content";
    UPGRADE_REQUIRED = 426, "Upgrade Required";
    PRECONDITION_REQUIRED = 428, "Precondition Required";
    TOO_MANY_REQUESTS = 429, "Too Many Requests";
    REQUEST_HEADER_FIELDS_TOO_LARGE = 431, "Request Header Fields Too Large";
    INTERNAL_SERVER_ERROR = 500, "Internal Server Error";
    NOT_IMPLEMENTED = 501, "Not Implemented";
    BAD_GATEWAY = 502, "Bad Gateway";
    SERVICE_UNAVAILABLE = 503, "Service Unavailable";
    GATEWAY_TIMEOUT = 504, "Gateway Timeout";
    HTTP_VERSION_NOT_SUPPORTED = 505, "HTTP Version Not Supported";
}

impl Status {
    /// Alias of [`Status::CONTENT_TOO_LARGE`] under its RFC 7231 name (`413`).
    pub const PAYLOAD_TOO_LARGE: Status = Status::CONTENT_TOO_LARGE;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_codes_have_static_lines() {
        assert_eq!(
            Status::OK.status_line(Version::Http11),
            Some(&b"HTTP/1.1 200 OK\r\n"[..])
        );
        assert_eq!(
            Status::NOT_FOUND.status_line(Version::Http10),
            Some(&b"HTTP/1.0 404 Not Found\r\n"[..])
        );
        assert_eq!(Status::RANGE_NOT_SATISFIABLE.code(), 416);
        assert_eq!(
            Status::REQUEST_HEADER_FIELDS_TOO_LARGE.reason(),
            "Request Header Fields Too Large"
        );
        assert_eq!(Status::PAYLOAD_TOO_LARGE.code(), 413);
    }

    #[test]
    fn unknown_codes_have_no_reason_and_no_static_line() {
        let teapot = Status::from_u16(418).expect("three digits");
        assert_eq!(teapot.reason(), "");
        assert_eq!(teapot.status_line(Version::Http11), None);
    }

    #[test]
    fn from_u16_accepts_only_three_digit_codes() {
        assert!(Status::from_u16(99).is_none());
        assert!(Status::from_u16(1000).is_none());
        assert_eq!(Status::from_u16(599).map(Status::code), Some(599));
    }

    #[test]
    fn body_rules() {
        assert!(Status::NOT_MODIFIED.forbids_body());
        assert!(Status::NO_CONTENT.forbids_body());
        assert!(Status::CONTINUE.forbids_body());
        assert!(!Status::OK.forbids_body());
        assert!(Status::PARTIAL_CONTENT.is_success());
    }
}
