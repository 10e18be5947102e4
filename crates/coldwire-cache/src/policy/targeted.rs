//! Targeted cache-control fields (RFC 9213): response fields such as `CDN-Cache-Control`
//! that carry directives for one class of caches and take precedence over `Cache-Control`
//! there. [`Targets`] is the ordered list of field names this cache obeys; [`Targets::directives`]
//! picks the directives that rule a response.
//!
//! Invariants: names are kept lower-cased, in precedence order; the first listed field with
//! a valid, non-empty value (a Structured Field Dictionary, RFC 8941, checked for syntax
//! here) wins and then `Cache-Control` *and* `Expires` are ignored (RFC 9213 §2.1); when no
//! listed field has one, `Cache-Control` (and `Expires`) rule as usual. An empty `Targets`
//! is a cache that obeys only `Cache-Control`.

use coldwire_http::fields::trim_ows;

use crate::policy::cache_control::CacheControl;
use crate::policy::directive_list::split_outside_quotes;
use coldwire_http::owned_fields::Fields;

/// The targeted fields this cache obeys, highest precedence first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Targets {
    names: Vec<String>,
}

/// The directives that rule one response for this cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponseDirectives {
    /// The directives.
    pub control: CacheControl,
    /// They came from a targeted field: `Expires` is to be ignored.
    pub targeted: bool,
}

/// `Targets` that obey only `Cache-Control`.
pub static NO_TARGETS: Targets = Targets { names: Vec::new() };

impl Targets {
    /// Obeys these fields, in this order of precedence (names compared without case).
    pub fn new<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> Targets {
        let mut targets = Targets::default();
        for name in names {
            let name = name.as_ref().to_ascii_lowercase();
            if !name.is_empty() && !targets.names.contains(&name) {
                targets.names.push(name);
            }
        }
        targets
    }

    /// Whether `name` is one of the targeted fields.
    pub fn is_target(&self, name: &str) -> bool {
        self.names
            .iter()
            .any(|target| target.eq_ignore_ascii_case(name))
    }

    /// The targeted field names, highest precedence first.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    /// The directives ruling `response` for this cache: the first targeted field with a
    /// valid non-empty value, else `Cache-Control`.
    pub fn directives(&self, response: &Fields) -> ResponseDirectives {
        let (values, targeted) = self.ruling_values(response);
        let control = if targeted {
            CacheControl::parse_targeted(values)
        } else {
            CacheControl::parse(values)
        };
        ResponseDirectives { control, targeted }
    }

    /// The values of the field whose directives rule `response` (see
    /// [`Targets::directives`]), and whether it is a targeted one.
    pub fn ruling_values<'a>(&self, response: &'a Fields) -> (Vec<&'a [u8]>, bool) {
        for name in &self.names {
            let values: Vec<&[u8]> = response.values(name).collect();
            if !values.is_empty() && values.iter().all(|value| is_dictionary(value)) {
                return (values, true);
            }
        }
        (response.values("cache-control").collect(), false)
    }
}

/// Whether `value` is a non-empty Structured Field Dictionary (RFC 8941 §3.2), syntax only.
fn is_dictionary(value: &[u8]) -> bool {
    let value = trim_ows(value);
    !value.is_empty() && split_outside_quotes(value, b',').all(|member| is_member(trim_ows(member)))
}

fn is_member(member: &[u8]) -> bool {
    let mut parts = split_outside_quotes(member, b';');
    let Some(first) = parts.next() else {
        return false;
    };
    let item_ok = match first.iter().position(|&byte| byte == b'=') {
        Some(equals) => is_key(&first[..equals]) && is_bare_item(&first[equals + 1..]),
        None => is_key(first),
    };
    item_ok
        && parts.all(|parameter| {
            let parameter = trim_ows(parameter);
            match parameter.iter().position(|&byte| byte == b'=') {
                Some(equals) => {
                    is_key(&parameter[..equals]) && is_bare_item(&parameter[equals + 1..])
                }
                None => is_key(parameter),
            }
        })
}

fn is_key(key: &[u8]) -> bool {
    match key.split_first() {
        Some((first, rest)) => {
            (first.is_ascii_lowercase() || *first == b'*')
                && rest.iter().all(|&byte| {
                    byte.is_ascii_lowercase()
                        || byte.is_ascii_digit()
                        || matches!(byte, b'_' | b'-' | b'.' | b'*')
                })
        }
        None => false,
    }
}

fn is_bare_item(item: &[u8]) -> bool {
    match item {
        [] => false,
        [b'?', b'0' | b'1'] => true,
        [b'"', inner @ .., b'"'] => inner
            .iter()
            .all(|&byte| ((0x20..0x7f).contains(&byte) && byte != b'"') || byte == b'\\'),
        [b':', inner @ .., b':'] => inner
            .iter()
            .all(|&byte| byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'/' | b'=')),
        [first, ..] if first.is_ascii_digit() || *first == b'-' => {
            let digits = item.strip_prefix(b"-").unwrap_or(item);
            !digits.is_empty()
                && digits.len() <= 16
                && digits
                    .iter()
                    .all(|&byte| byte.is_ascii_digit() || byte == b'.')
        }
        [first, rest @ ..] => {
            (first.is_ascii_alphabetic() || *first == b'*')
                && rest.iter().all(|&byte| {
                    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&byte)
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fields;

    fn coldwire_then_cdn() -> Targets {
        Targets::new(["Coldwire-Cache-Control", "CDN-Cache-Control"])
    }

    #[test]
    fn rfc9213_2_1_the_first_targeted_field_present_wins() {
        let response = fields(&[
            ("Cache-Control", "no-store"),
            ("CDN-Cache-Control", "max-age=60"),
            ("Coldwire-Cache-Control", "max-age=5"),
        ]);
        let directives = coldwire_then_cdn().directives(&response);
        assert!(directives.targeted);
        assert_eq!(directives.control.max_age, Some(5));
        assert!(!directives.control.no_store, "Cache-Control is ignored");
        let response = fields(&[
            ("Cache-Control", "no-store"),
            ("cdn-cache-control", "max-age=60"),
        ]);
        let directives = coldwire_then_cdn().directives(&response);
        assert_eq!(directives.control.max_age, Some(60));
        assert!(!directives.control.no_store);
    }

    #[test]
    fn rfc9213_2_1_invalid_or_empty_targeted_fields_fall_back_to_cache_control() {
        for value in ["", "Max-Age=5", "max-age=5,,", "max-age=\"5", "max-age=5 6"] {
            let response = fields(&[("Cache-Control", "max-age=7"), ("CDN-Cache-Control", value)]);
            let directives = coldwire_then_cdn().directives(&response);
            assert!(!directives.targeted, "{value:?}");
            assert_eq!(directives.control.max_age, Some(7), "{value:?}");
        }
        let response = fields(&[("CDN-Cache-Control", "max-age=5, must-revalidate;x=?1")]);
        assert!(coldwire_then_cdn().directives(&response).targeted);
    }

    #[test]
    fn no_targets_obey_cache_control_only() {
        let response = fields(&[
            ("Cache-Control", "max-age=7"),
            ("CDN-Cache-Control", "max-age=60"),
        ]);
        let directives = NO_TARGETS.directives(&response);
        assert!(!directives.targeted);
        assert_eq!(directives.control.max_age, Some(7));
        assert!(coldwire_then_cdn().is_target("cdn-cache-control"));
        assert!(!NO_TARGETS.is_target("cdn-cache-control"));
    }
}
