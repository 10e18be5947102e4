//! What a shared cache may store ([`storability`], RFC 9111 §3) and which status codes get
//! heuristic freshness (RFC 9111 §4.2.2, RFC 9110 §15.1).
//!
//! Invariants: any final status code may be stored when the response gives an explicit
//! lifetime (`max-age`, `s-maxage`, or — unless a targeted field rules — `Expires`); only
//! the heuristically cacheable codes, and any code marked `public` (RFC 9111 §5.2.2.9: a
//! `public` response without explicit freshness is heuristically cacheable), are stored
//! without one; `304` is never stored (it
//! updates stored responses, §4.3.4) and `1xx` never; `must-understand` stores only codes
//! whose semantics RFC 9110 defines, and then overrides `no-store` (§5.2.2.3). A response
//! carrying `Set-Cookie` is not stored (stricter than RFC 9111, as nginx and Varnish):
//! a shared cache would hand one client's cookie to every client — unless the origin
//! says to store it without the cookie (`no-cache="Set-Cookie"` or
//! `private="Set-Cookie"`, RFC 9111 §5.2.2.4, §5.2.2.7).

use crate::policy::cache_control::{CacheControl, qualified_fields};
use crate::policy::targeted::{NO_TARGETS, Targets};
use coldwire_http::owned_fields::Fields;

/// Status codes defined as heuristically cacheable (RFC 9110 §15.1). `206` is among them;
/// the proxy stores partial content only where it can combine it (see the proxy's docs).
pub const HEURISTICALLY_CACHEABLE: [u16; 12] =
    [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501];

/// Whether `status` may be given a heuristic freshness lifetime.
pub fn is_heuristically_cacheable(status: u16) -> bool {
    HEURISTICALLY_CACHEABLE.contains(&status)
}

/// Final status codes whose caching semantics RFC 9110 defines (for `must-understand`).
pub fn is_understood(status: u16) -> bool {
    matches!(
        status,
        200..=206 | 300..=305 | 307 | 308 | 400..=417 | 421 | 422 | 426 | 500..=505
    )
}

/// Whether a response may be stored, and if not, why (for `Cache-Status` details and tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storability {
    /// It may be stored.
    Store,
    /// It must not be stored, for the reason given.
    No(&'static str),
}

/// RFC 9111 §3 for a shared cache that obeys only `Cache-Control`: may the response to this
/// request be stored? See [`storability_targeted`].
pub fn storability(
    method: &str,
    request: &CacheControl,
    request_has_authorization: bool,
    status: u16,
    response: &Fields,
) -> Storability {
    storability_targeted(
        method,
        request,
        request_has_authorization,
        status,
        response,
        &NO_TARGETS,
    )
}

/// The ruling directives name `Set-Cookie` in a qualified `no-cache` or `private`: the
/// response is stored without it.
fn cookie_left_out(response: &Fields, targets: &Targets) -> bool {
    let (values, targeted) = targets.ruling_values(response);
    qualified_fields(values.iter().copied(), targeted)
        .iter()
        .any(|name| name == "set-cookie")
}

/// RFC 9111 §3 for a shared cache whose response directives come from `targets`
/// (RFC 9213): may the response to this request be stored?
///
/// `method` is the request method, `request` the request's `Cache-Control`,
/// `request_has_authorization` whether it carried `Authorization`.
pub fn storability_targeted(
    method: &str,
    request: &CacheControl,
    request_has_authorization: bool,
    status: u16,
    response: &Fields,
    targets: &Targets,
) -> Storability {
    if method != "GET" {
        return Storability::No("method");
    }
    if !(200..=599).contains(&status) || status == 304 {
        return Storability::No("status");
    }
    let ruling = targets.directives(response);
    let directives = ruling.control;
    if directives.must_understand && !is_understood(status) {
        return Storability::No("must-understand");
    }
    if request.no_store || (directives.no_store && !directives.must_understand) {
        return Storability::No("no-store");
    }
    if directives.private {
        return Storability::No("private");
    }
    if response.get("set-cookie").is_some() && !cookie_left_out(response, targets) {
        // One client's cookie must not be handed to every client that hits the entry
        // (session fixation, a session leak): nginx and Varnish refuse to store these too.
        return Storability::No("set-cookie");
    }
    if request_has_authorization
        && !(directives.public || directives.s_maxage.is_some() || directives.must_revalidate)
    {
        return Storability::No("authorization");
    }
    if response.list_members("vary").any(|member| member == b"*") {
        return Storability::No("vary-star");
    }
    let explicit = directives.max_age.is_some()
        || directives.s_maxage.is_some()
        || (!ruling.targeted && response.get("expires").is_some());
    if !(explicit || directives.public || is_heuristically_cacheable(status)) {
        return Storability::No("status");
    }
    Storability::Store
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fields;

    fn store(pairs: &[(&str, &str)], status: u16) -> Storability {
        storability(
            "GET",
            &CacheControl::default(),
            false,
            status,
            &fields(pairs),
        )
    }

    #[test]
    fn storability_rules() {
        let request = CacheControl::default();
        assert_eq!(store(&[], 200), Storability::Store);
        assert_eq!(
            store(&[("Cache-Control", "no-store")], 200),
            Storability::No("no-store")
        );
        assert_eq!(
            store(&[("Cache-Control", "private, max-age=9")], 200),
            Storability::No("private")
        );
        assert_eq!(store(&[("Vary", "*")], 200), Storability::No("vary-star"));
        assert_eq!(
            store(
                &[
                    ("Cache-Control", "public, max-age=60"),
                    ("Set-Cookie", "s=1")
                ],
                200
            ),
            Storability::No("set-cookie")
        );
        for qualifier in ["no-cache=\"Set-Cookie\"", "private=\"set-cookie, x-a\""] {
            assert_eq!(
                store(
                    &[
                        ("Cache-Control", &format!("max-age=60, {qualifier}")),
                        ("Set-Cookie", "s=1")
                    ],
                    200
                ),
                Storability::Store,
                "{qualifier}"
            );
        }
        assert_eq!(store(&[], 302), Storability::No("status"));
        assert_eq!(
            store(&[("Cache-Control", "max-age=9")], 302),
            Storability::Store
        );
        assert_eq!(store(&[], 500), Storability::No("status"));
        assert_eq!(
            storability("POST", &request, false, 200, &fields(&[])),
            Storability::No("method")
        );
        let authorized = |control| {
            storability(
                "GET",
                &request,
                true,
                200,
                &fields(&[("Cache-Control", control)]),
            )
        };
        assert_eq!(authorized("max-age=5"), Storability::No("authorization"));
        assert_eq!(authorized("public"), Storability::Store);
        let no_store = CacheControl::parse([&b"no-store"[..]]);
        assert_eq!(
            storability("GET", &no_store, false, 200, &fields(&[])),
            Storability::No("no-store")
        );
    }

    #[test]
    fn rfc9111_3_any_final_status_is_storable_with_explicit_freshness() {
        for status in [200, 299, 302, 307, 400, 403, 500, 502, 503, 504, 599] {
            for explicit in [
                ("Cache-Control", "max-age=60"),
                ("Cache-Control", "s-maxage=60"),
                ("Expires", "Sun, 06 Nov 2094 08:49:37 GMT"),
                ("Cache-Control", "public, max-age=60"),
            ] {
                assert_eq!(
                    store(&[explicit], status),
                    Storability::Store,
                    "{status} {explicit:?}"
                );
            }
        }
        // RFC 9111 §5.2.2.9: `public` without a lifetime makes any code heuristically
        // cacheable.
        for status in [299, 302, 500, 599] {
            assert_eq!(
                store(&[("Cache-Control", "public")], status),
                Storability::Store
            );
        }
        assert_eq!(
            store(&[("Cache-Control", "public")], 404),
            Storability::Store
        );
    }

    #[test]
    fn rfc9111_4_2_2_only_heuristically_cacheable_codes_are_stored_without_a_lifetime() {
        for status in [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501] {
            assert_eq!(store(&[], status), Storability::Store, "{status}");
        }
        for status in [
            201, 202, 205, 299, 302, 303, 307, 400, 403, 500, 502, 503, 504, 599,
        ] {
            assert_eq!(store(&[], status), Storability::No("status"), "{status}");
        }
    }

    #[test]
    fn rfc9111_3_interim_and_304_responses_are_never_stored() {
        for status in [100, 101, 103, 199, 304, 600] {
            assert_eq!(
                store(&[("Cache-Control", "max-age=60")], status),
                Storability::No("status"),
                "{status}"
            );
        }
    }

    #[test]
    fn rfc9111_5_2_2_3_must_understand() {
        assert_eq!(
            store(
                &[("Cache-Control", "must-understand, no-store, max-age=9")],
                200
            ),
            Storability::Store,
            "understood: no-store is overridden"
        );
        assert_eq!(
            store(
                &[("Cache-Control", "must-understand, no-store, max-age=9")],
                299
            ),
            Storability::No("must-understand")
        );
    }

    #[test]
    fn rfc9213_targeted_directives_rule_storability() {
        let targets = Targets::new(["CDN-Cache-Control"]);
        let with = |pairs: &[(&str, &str)], status| {
            storability_targeted(
                "GET",
                &CacheControl::default(),
                false,
                status,
                &fields(pairs),
                &targets,
            )
        };
        assert_eq!(
            with(
                &[
                    ("Cache-Control", "no-store"),
                    ("CDN-Cache-Control", "max-age=60")
                ],
                200
            ),
            Storability::Store
        );
        assert_eq!(
            with(
                &[
                    ("Cache-Control", "max-age=60"),
                    ("CDN-Cache-Control", "no-store")
                ],
                200
            ),
            Storability::No("no-store")
        );
        // A targeted field rules out Expires as an explicit lifetime.
        assert_eq!(
            with(
                &[
                    ("Expires", "Sun, 06 Nov 2094 08:49:37 GMT"),
                    ("CDN-Cache-Control", "must-revalidate")
                ],
                500
            ),
            Storability::No("status")
        );
    }
}
