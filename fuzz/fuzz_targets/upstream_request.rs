//! Fuzz target: the proxy's request rewriting (`coldwire_server::proxy::head::
//! write_upstream_request`), checked by re-parsing what it writes.
//!
//! Input: one flags byte, then a request head. Bit 0 picks the proxy's mode (forward, or
//! reverse to `origin.test:8080`); bit 1 makes it a revalidation on the cache's behalf, with
//! a stored response whose `ETag`, `Last-Modified` and `Date` are the values of the request's
//! own `X-Stored-ETag`, `X-Stored-Last-Modified` and `X-Stored-Date` fields (values that
//! passed the parser, as a stored response's did). The head is parsed with `parse_request`;
//! a request the proxy forwards (the decisions of `proxy/route.rs::route` are mirrored below, with the proxy's own
//! `split_authority` and `path_and_query`:
//! loops, CONNECT, origin-form to a forward proxy, non-`http` schemes and bad authorities
//! are not forwarded) is written as the proxy writes it.
//!
//! Property (a differential one: what the proxy writes, read back by the same parser):
//! - the upstream bytes parse as `Complete`, with `head_len` equal to the written length
//!   (no second request hides in the head), as HTTP/1.1, with the same method and the
//!   origin-form target the proxy chose;
//! - the same body framing, on exactly one framing line: chunked stays chunked, a
//!   `Content-Length` stays the same length, no framing stays none;
//! - exactly one `Host`, whose value is the destination's authority;
//! - no hop-by-hop field (`Connection`, `Keep-Alive`, `TE`, `Trailer`, `Upgrade`, `Proxy-*`)
//!   and no field named by the client's `Connection`, except the fields the proxy writes
//!   itself (`Host`, the framing line, its `Via`, its validators), which must be exactly the
//!   proxy's own;
//! - the proxy's `Via` is the last field (the client's `Via` fields, if forwarded, come
//!   before it); on a revalidation, none of the client's conditionals or `Range`, and the
//!   stored validators, once each;
//! - every other upstream field is one of the client's, unchanged and in the client's order.
//!
//! A request whose `Connection` names `Content-Length`, `Transfer-Encoding` or `Host` is
//! refused by the proxy (`connection_names_framing`, 400), so it is not checked further.
//! The seeds `connection_names_te`, `connection_names_cl`, `te_two_fields` and
//! `absolute_invalid_authority` reproduce the three findings of docs/fuzzing.md, since fixed.
#![no_main]

use coldwire_cache::{Fields, StoredResponse, VaryKey};
use coldwire_http::fields::comma_list;
use coldwire_http::{
    BodyFraming, Limits, MAX_HEAD_BYTES_CAP, MAX_HEADERS_CAP, Parsed, RequestHead, Target, Version,
    parse_request, parse_target,
};
use coldwire_server::proxy::head::{connection_names_framing, via_hops, write_upstream_request};
use coldwire_server::proxy::{path_and_query, split_authority};
use libfuzzer_sys::fuzz_target;
use std::borrow::Cow;
use std::time::UNIX_EPOCH;

const VIA_NAME: &str = "coldwire";
const REVERSE_HOST: &str = "origin.test";
const REVERSE_PORT: u16 = 8080;

/// The `Host` value and origin-form target the proxy sends, as `proxy/route.rs::route`
/// decides them; `None` for a request it does not forward (refused, a loop, CONNECT,
/// origin-form to a forward proxy, a scheme other than `http`, PURGE).
fn destination<'a>(head: &RequestHead<'a>, forward: bool) -> Option<(Cow<'a, str>, Cow<'a, str>)> {
    if via_hops(head, VIA_NAME) > 0
        || connection_names_framing(head)
        || head.method_str() == "PURGE"
    {
        return None;
    }
    match (parse_target(head.method(), head.target()).ok()?, forward) {
        (
            Target::Absolute {
                scheme, authority, ..
            },
            true,
        ) => {
            if !scheme.eq_ignore_ascii_case("http") {
                return None;
            }
            split_authority(authority, 80)?;
            Some((
                Cow::Borrowed(authority),
                path_and_query(head.target(), authority),
            ))
        }
        (Target::Origin { .. } | Target::Asterisk, false) => Some((
            head.host()
                .and_then(|value| std::str::from_utf8(value).ok())
                .filter(|value| !value.is_empty())
                .map_or(
                    Cow::Owned(format!("{REVERSE_HOST}:{REVERSE_PORT}")),
                    Cow::Borrowed,
                ),
            Cow::Borrowed(head.target()),
        )),
        (
            Target::Absolute {
                scheme, authority, ..
            },
            false,
        ) => {
            if !scheme.eq_ignore_ascii_case("http") {
                return None;
            }
            Some((
                Cow::Borrowed(authority),
                path_and_query(head.target(), authority),
            ))
        }
        (Target::Authority(_), _) | (Target::Origin { .. } | Target::Asterisk, true) => None,
    }
}

fn is_hop_by_hop(name: &[u8]) -> bool {
    [
        &b"connection"[..],
        b"keep-alive",
        b"te",
        b"trailer",
        b"upgrade",
    ]
    .iter()
    .any(|fixed| name.eq_ignore_ascii_case(fixed))
        || name
            .get(..6)
            .is_some_and(|prefix| prefix.eq_ignore_ascii_case(b"proxy-"))
}

fn is_one_of(name: &[u8], names: &[&str]) -> bool {
    names
        .iter()
        .any(|known| name.eq_ignore_ascii_case(known.as_bytes()))
}

const FRAMING: [&str; 2] = ["content-length", "transfer-encoding"];
const CONDITIONALS: [&str; 6] = [
    "if-none-match",
    "if-modified-since",
    "if-match",
    "if-unmodified-since",
    "if-range",
    "range",
];

fuzz_target!(|data: &[u8]| {
    let Some((&flags, input)) = data.split_first() else {
        return;
    };
    let Ok(Parsed::Complete { head, .. }) = parse_request(input, &Limits::default()) else {
        return;
    };
    let Some((authority, target)) = destination(&head, flags & 1 == 1) else {
        return;
    };
    let named: Vec<&[u8]> = head
        .header_values("connection")
        .flat_map(comma_list)
        .collect();
    let stored = (flags & 2 == 2).then(|| {
        let mut fields = Fields::new();
        for (field, stored_as) in [
            ("x-stored-etag", "ETag"),
            ("x-stored-last-modified", "Last-Modified"),
            ("x-stored-date", "Date"),
        ] {
            if let Some(value) = head.header(field) {
                fields.push(stored_as, value);
            }
        }
        StoredResponse::new(
            200,
            fields,
            Vec::new(),
            VaryKey::default(),
            UNIX_EPOCH,
            UNIX_EPOCH,
        )
    });

    let mut out = Vec::new();
    write_upstream_request(
        &mut out,
        &head,
        &target,
        &authority,
        VIA_NAME,
        stored.as_ref(),
    );

    let lenient = Limits {
        max_head_bytes: MAX_HEAD_BYTES_CAP,
        max_headers: MAX_HEADERS_CAP,
        max_request_line_bytes: MAX_HEAD_BYTES_CAP,
    };
    let upstream = match parse_request(&out, &lenient) {
        Ok(Parsed::Complete { head, head_len }) => {
            assert_eq!(head_len, out.len(), "bytes after the upstream head");
            head
        }
        other => panic!(
            "upstream request does not parse: {other:?}\n{}",
            String::from_utf8_lossy(&out)
        ),
    };
    let shown = String::from_utf8_lossy(&out);
    assert_eq!(upstream.method_str(), head.method_str(), "{shown}");
    assert_eq!(upstream.method(), head.method());
    assert_eq!(upstream.version(), Version::Http11);
    assert_eq!(upstream.target(), &*target);

    // Framing: the same, on one line.
    assert_eq!(upstream.body_framing(), head.body_framing(), "{shown}");
    let framing_lines = upstream
        .headers()
        .filter(|(name, _)| is_one_of(name.as_bytes(), &FRAMING))
        .count();
    let expected_lines = usize::from(head.body_framing() != BodyFraming::None);
    assert_eq!(framing_lines, expected_lines, "framing lines in\n{shown}");

    // Host: one, the destination's.
    let hosts: Vec<&[u8]> = upstream.header_values("host").collect();
    assert_eq!(hosts, [authority.as_bytes()], "{shown}");

    // Via: ours, after the client's (which the loop below checks like any field).
    let our_via = format!("1.1 {VIA_NAME}");
    let (last_name, last_value) = upstream.headers().last().expect("Host at least");
    assert!(
        last_name.eq_ignore_ascii_case("via") && last_value == our_via.as_bytes(),
        "our Via is not the last field in\n{shown}"
    );

    // Validators on a revalidation: the stored ones, once each; no client conditional.
    let mut own_validators: Vec<&str> = Vec::new();
    if let Some(stored) = &stored {
        let etag = stored.fields.get("etag");
        let modified = stored
            .fields
            .get("last-modified")
            .or_else(|| stored.fields.get("date"));
        let inm: Vec<&[u8]> = upstream.header_values("if-none-match").collect();
        let ims: Vec<&[u8]> = upstream.header_values("if-modified-since").collect();
        assert_eq!(inm, etag.into_iter().collect::<Vec<_>>(), "{shown}");
        assert_eq!(ims, modified.into_iter().collect::<Vec<_>>(), "{shown}");
        for conditional in &CONDITIONALS[2..] {
            assert_eq!(upstream.header_values(conditional).count(), 0, "{shown}");
        }
        own_validators.extend_from_slice(&CONDITIONALS[..2]);
    }

    // No hop-by-hop field, no field the client's Connection names, except our own.
    let mut client_fields = head.headers();
    for (index, (name, value)) in upstream.headers().enumerate() {
        let bytes = name.as_bytes();
        assert!(!is_hop_by_hop(bytes), "hop-by-hop {name} in\n{shown}");
        let own = is_one_of(bytes, &["host"])
            || is_one_of(bytes, &FRAMING)
            || is_one_of(bytes, &own_validators)
            || index + 1 == upstream.header_count();
        if own {
            continue;
        }
        assert!(
            !named
                .iter()
                .any(|member| member.eq_ignore_ascii_case(bytes)),
            "{name} is named by Connection but forwarded in\n{shown}"
        );
        // Every other field is the client's, unchanged, in order.
        assert!(
            client_fields
                .any(|(client_name, client_value)| client_name == name && client_value == value),
            "{name} is not one of the client's fields (or out of order) in\n{shown}"
        );
    }
});
