//! What a response says about itself, read as it arrives: whether a cache answered it
//! (`Cache-Status`, RFC 9211), and whether its body is the object it claims to be
//! (`X-Coldwire-Object: id=<hex>; v=<hex>; size=<n>` from `coldwire origin`, checked byte
//! for byte against `coldwire_workload`'s generated body, without a copy).
//!
//! **Hit or miss.** A response is a hit when one of its `Cache-Status` entries has the
//! `hit` parameter (a collapsed request, `hit; detail=collapsed`, included); without the
//! field, or with `fwd=…` only, it is a miss. The origin has no marker of its own: a
//! response straight from `coldwire origin` is always a miss.
//!
//! **Integrity.** A body is verified when its response names an object: a different
//! object than the request asked for, a body whose bytes differ from the named object's,
//! or a body longer or shorter than the named size is an integrity failure (counted, the
//! response still timed). A response without the field is not checked (counted as
//! unverified).

use coldwire_workload::{BODY_HEADER, matching_prefix};

use crate::response::Inspect;

/// Why a body failed its check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntegrityFailure {
    /// The response names another object than the one requested.
    WrongObject,
    /// A byte differs from the named object's body.
    WrongBytes,
    /// The body is longer or shorter than the named size.
    WrongSize,
    /// The object field is there but cannot be read.
    BadField,
}

/// The check of one response, fed by the response reader.
#[derive(Clone, Debug, Default)]
pub struct Check {
    /// The object the request asked for.
    expected: Option<u64>,
    /// Saw a `Cache-Status` hit.
    pub hit: bool,
    /// The object the response names: (id, version, size).
    object: Option<(u64, u64, u64)>,
    /// Body bytes seen.
    pub body_bytes: u64,
    /// The first failure, if any.
    failure: Option<IntegrityFailure>,
}

impl Check {
    /// A check expecting the object `expected` (if known).
    pub fn new(expected: Option<u64>) -> Check {
        Check {
            expected,
            ..Check::default()
        }
    }

    /// The verdict once the response is complete: `Some(Ok(()))` verified, `Some(Err)`
    /// failed, `None` not checkable (no object field). A `HEAD` or `304` answer has no
    /// body to compare: only its object id is checked.
    pub fn verdict(&self, has_body: bool) -> Option<Result<(), IntegrityFailure>> {
        if let Some(failure) = self.failure {
            return Some(Err(failure));
        }
        let (_, _, size) = self.object?;
        if has_body && self.body_bytes != size {
            return Some(Err(IntegrityFailure::WrongSize));
        }
        Some(Ok(()))
    }

    fn fail(&mut self, failure: IntegrityFailure) {
        if self.failure.is_none() {
            self.failure = Some(failure);
        }
    }
}

/// `true` when a `Cache-Status` value says some cache answered from storage.
pub fn cache_status_is_hit(value: &[u8]) -> bool {
    value.split(|&byte| byte == b',').any(|entry| {
        entry.split(|&byte| byte == b';').skip(1).any(|parameter| {
            let parameter = parameter.trim_ascii();
            parameter.eq_ignore_ascii_case(b"hit")
        })
    })
}

/// `true` when an `X-Cache` value (Squid's, Varnish's and most CDNs' header, from before
/// `Cache-Status`) starts with `HIT` (`HIT from proxy`, `HIT`); `MISS`, `REFRESH_HIT`
/// (revalidated with the origin) and anything else are not hits.
pub fn x_cache_is_hit(value: &[u8]) -> bool {
    let value = value.trim_ascii_start();
    value.len() >= 3
        && value[..3].eq_ignore_ascii_case(b"hit")
        && value
            .get(3)
            .is_none_or(|byte| !byte.is_ascii_alphanumeric() && *byte != b'_')
}

/// Parses `id=<hex>; v=<hex>; size=<n>`.
pub fn parse_object_field(value: &[u8]) -> Option<(u64, u64, u64)> {
    let text = std::str::from_utf8(value).ok()?;
    let (mut id, mut version, mut size) = (None, None, None);
    for part in text.split(';') {
        let (name, value) = part.trim().split_once('=')?;
        match name {
            "id" => id = u64::from_str_radix(value, 16).ok(),
            "v" => version = u64::from_str_radix(value, 16).ok(),
            "size" => size = value.parse().ok(),
            _ => {}
        }
    }
    Some((id?, version?, size?))
}

impl Inspect for Check {
    fn head(&mut self, fields: &[httparse::Header<'_>]) {
        for field in fields {
            if field.name.eq_ignore_ascii_case("cache-status") {
                self.hit |= cache_status_is_hit(field.value);
            } else if field.name.eq_ignore_ascii_case("x-cache") {
                self.hit |= x_cache_is_hit(field.value);
            } else if field.name.eq_ignore_ascii_case(BODY_HEADER) {
                match parse_object_field(field.value) {
                    Some(object) => {
                        if self.expected.is_some_and(|expected| expected != object.0) {
                            self.fail(IntegrityFailure::WrongObject);
                        }
                        self.object = Some(object);
                    }
                    None => self.fail(IntegrityFailure::BadField),
                }
            }
        }
    }

    fn body(&mut self, bytes: &[u8]) {
        let offset = self.body_bytes;
        self.body_bytes += bytes.len() as u64;
        let Some((id, version, size)) = self.object else {
            return;
        };
        if self.failure.is_some() {
            return;
        }
        if self.body_bytes > size {
            self.fail(IntegrityFailure::WrongSize);
            return;
        }
        if matching_prefix(id, version, offset, bytes) != bytes.len() {
            self.fail(IntegrityFailure::WrongBytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::{ReadOutcome, ResponseReader};

    fn response(id: u64, version: u64, size: u64, named_id: u64, cache_status: &str) -> Vec<u8> {
        let mut bytes = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n{cache_status}X-Coldwire-Object: id={named_id:x}; v={version:x}; size={size}\r\n\r\n"
        )
        .into_bytes();
        coldwire_workload::fill_body(&mut bytes, id, version, 0, size);
        bytes
    }

    fn check(bytes: &[u8], expected: u64, piece: usize) -> Check {
        let mut reader = ResponseReader::new();
        let mut check = Check::new(Some(expected));
        let mut last = ReadOutcome::NeedMore;
        for chunk in bytes.chunks(piece) {
            last = reader.feed_with(chunk, &mut check);
        }
        assert!(matches!(last, ReadOutcome::Complete { .. }), "{last:?}");
        check
    }

    #[test]
    fn hits_are_read_from_cache_status() {
        assert!(cache_status_is_hit(b"coldwire; hit; ttl=30"));
        assert!(cache_status_is_hit(b"origin; fwd=miss, coldwire; hit"));
        assert!(!cache_status_is_hit(b"coldwire; fwd=miss; stored"));
        assert!(!cache_status_is_hit(b"hit"));
        assert!(x_cache_is_hit(b"HIT from coldwire-experiment"));
        assert!(x_cache_is_hit(b"hit"));
        assert!(!x_cache_is_hit(b"MISS from coldwire-experiment"));
        assert!(!x_cache_is_hit(b"HITCH"));
        assert!(!x_cache_is_hit(b"REFRESH_HIT from squid"));
        let bytes = response(5, 1, 100, 5, "Cache-Status: coldwire; hit; ttl=9\r\n");
        assert!(check(&bytes, 5, 7).hit);
        let bytes = response(5, 1, 100, 5, "Cache-Status: coldwire; fwd=uri-miss\r\n");
        assert!(!check(&bytes, 5, 7).hit);
    }

    #[test]
    fn a_good_body_verifies_however_it_arrives() {
        let bytes = response(77, 3, 5000, 77, "");
        for piece in [1, 9, 100, 4096, bytes.len()] {
            assert_eq!(check(&bytes, 77, piece).verdict(true), Some(Ok(())));
        }
    }

    #[test]
    fn wrong_objects_bytes_and_sizes_are_caught() {
        // Another object's body under its own name, served for id 77.
        let other = response(78, 3, 500, 78, "");
        assert_eq!(
            check(&other, 77, 64).verdict(true),
            Some(Err(IntegrityFailure::WrongObject))
        );
        let mut flipped = response(77, 3, 500, 77, "");
        let last = flipped.len() - 10;
        flipped[last] ^= 0x20;
        assert_eq!(
            check(&flipped, 77, 64).verdict(true),
            Some(Err(IntegrityFailure::WrongBytes))
        );
        // The right bytes, but the field claims a longer body.
        let mut short =
            b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\nX-Coldwire-Object: id=4d; v=3; size=501\r\n\r\n"
                .to_vec();
        coldwire_workload::fill_body(&mut short, 77, 3, 0, 500);
        assert_eq!(
            check(&short, 77, 64).verdict(true),
            Some(Err(IntegrityFailure::WrongSize))
        );
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(check(plain, 77, 64).verdict(true), None);
    }
}
