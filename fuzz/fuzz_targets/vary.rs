//! Fuzz target: `Vary` parsing and the variant key (`coldwire_cache::VaryKey`).
//!
//! Input, split on `\n`: the first line's first byte says how many of the following lines
//! (1 to 4) are the response's `Vary` field values; every later line is a request field
//! `name:value` (a line without `:` is a field with an empty value).
//!
//! Property:
//! - building a key and matching never panic; `size()` and `is_empty()` never panic, and
//!   an empty key is one whose `Vary` named nothing;
//! - the key of a request is deterministic: built twice, it is equal;
//! - a request matches the key built from it (unless `Vary: *`, which never matches);
//! - two requests with identical selecting fields get the same key, and each matches the
//!   other's key: the second request drops every non-selecting field, adds others, spells
//!   the names in another case, reorders fields of different names, pads values with
//!   optional whitespace, and writes each content-negotiation list (`Accept`,
//!   `Accept-Charset`, `Accept-Encoding`, `Accept-Language`) as one line with its members
//!   reversed and upper-cased;
//! - changing the value of one selecting field (or removing it) makes the request not match.
#![no_main]

use coldwire_cache::policy::vary::NEGOTIATION_LISTS;
use coldwire_cache::{Fields, VaryKey};
use coldwire_http::fields::comma_list;
use libfuzzer_sys::fuzz_target;

type Request = Vec<(Vec<u8>, Vec<u8>)>;

fn lookup<'a>(request: &'a Request) -> impl Fn(&str) -> Vec<&'a [u8]> + 'a {
    move |name| {
        request
            .iter()
            .filter(|(field, _)| field.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, value)| value.as_slice())
            .collect()
    }
}

/// The names the key selects on, as `VaryKey::new` derives them.
fn selecting_names(response: &Fields) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for member in response.list_members("vary") {
        if let Ok(name) = std::str::from_utf8(member) {
            let name = name.to_ascii_lowercase();
            if name != "*" && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

fn is_selecting(names: &[String], field: &[u8]) -> bool {
    names
        .iter()
        .any(|name| field.eq_ignore_ascii_case(name.as_bytes()))
}

fn trim(value: &[u8]) -> &[u8] {
    coldwire_http::fields::trim_ows(value)
}

fuzz_target!(|data: &[u8]| {
    let mut lines = data.split(|&byte| byte == b'\n');
    let Some(first) = lines.next() else {
        return;
    };
    let vary_lines = usize::from(first.first().copied().unwrap_or(0) % 4) + 1;
    let mut response = Fields::new();
    response.push("Content-Type", b"text/plain");
    for value in lines.by_ref().take(vary_lines) {
        response.push(if value.len() % 2 == 0 { "Vary" } else { "vary" }, value);
    }
    let request: Request = lines
        .map(|line| match line.iter().position(|&byte| byte == b':') {
            Some(colon) => (line[..colon].to_vec(), line[colon + 1..].to_vec()),
            None => (line.to_vec(), Vec::new()),
        })
        .collect();

    let key = VaryKey::new(&response, lookup(&request));
    let _ = key.size();
    let star = response.list_members("vary").any(|member| member == b"*");
    let names = selecting_names(&response);
    assert_eq!(key.is_empty(), names.is_empty() && !star);
    assert_eq!(VaryKey::new(&response, lookup(&request)), key);
    assert_eq!(key.matches(lookup(&request)), !star);

    // Same selecting fields, everything else different.
    let mut same: Request = request
        .iter()
        .filter(|(name, _)| is_selecting(&names, name))
        .map(|(name, value)| {
            let mut padded = b" \t".to_vec();
            padded.extend_from_slice(trim(value));
            padded.push(b' ');
            (name.to_ascii_uppercase(), padded)
        })
        .collect();
    // Names in reverse order; the sort is stable, so same-named fields keep their order
    // (their values are joined in order).
    same.sort_by_key(|(name, _)| std::cmp::Reverse(name.to_ascii_lowercase()));
    // The content-negotiation lists compare as sets of case-insensitive members: all their
    // lines become one line, members reversed and upper-cased.
    for list in NEGOTIATION_LISTS {
        let members: Vec<Vec<u8>> = same
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case(list.as_bytes()))
            .flat_map(|(_, value)| comma_list(value))
            .map(<[u8]>::to_ascii_uppercase)
            .collect();
        if let Some(first) = same
            .iter()
            .position(|(name, _)| name.eq_ignore_ascii_case(list.as_bytes()))
        {
            let mut reversed: Vec<&[u8]> = members.iter().map(Vec::as_slice).collect();
            reversed.reverse();
            let line = (
                list.to_ascii_uppercase().into_bytes(),
                reversed.join(&b" , "[..]),
            );
            same.retain(|(name, _)| !name.eq_ignore_ascii_case(list.as_bytes()));
            same.insert(first.min(same.len()), line);
        }
    }
    for extra in [&b"x-coldwire-fuzz"[..], b"accept", b"cookie"] {
        if !is_selecting(&names, extra) {
            same.insert(0, (extra.to_vec(), b"other".to_vec()));
        }
    }
    let same_key = VaryKey::new(&response, lookup(&same));
    assert_eq!(same_key, key);
    assert_eq!(same_key.matches(lookup(&request)), !star);
    assert_eq!(key.matches(lookup(&same)), !star);

    // One selecting field changed, then removed: no match.
    if let Some(name) = names.first() {
        let mut changed = request.clone();
        match changed
            .iter_mut()
            .rev()
            .find(|(field, _)| field.eq_ignore_ascii_case(name.as_bytes()))
        {
            Some((_, value)) => value.extend_from_slice(b"~changed"),
            None => changed.push((name.as_bytes().to_vec(), Vec::new())),
        }
        assert!(!key.matches(lookup(&changed)));
        let removed: Request = request
            .iter()
            .filter(|(field, _)| !field.eq_ignore_ascii_case(name.as_bytes()))
            .cloned()
            .collect();
        let had_field = removed.len() != request.len();
        assert_eq!(key.matches(lookup(&removed)), !star && !had_field);
    }
});
