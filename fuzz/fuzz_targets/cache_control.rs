//! Fuzz target: `coldwire_cache::CacheControl::parse`.
//!
//! Input: `Cache-Control` field values, one per line (split on `\n`).
//!
//! Property:
//! - parsing never panics, and every delta-seconds value (`max-age`, `s-maxage`,
//!   `min-fresh`, `max-stale=N`, `stale-while-revalidate`, `stale-if-error`) is at most
//!   `DELTA_SECONDS_MAX` (2^31): nothing overflows, huge values clamp;
//! - the field lines combined into one value (joined with `,`, RFC 9110 §5.3) parse to the
//!   same directives as the separate lines, when no line leaves a quoted string open (an
//!   open quote swallows the commas after it, across the join too);
//! - directive names are case-insensitive: the input upper-cased or lower-cased parses the
//!   same (arguments are digits, so case does not touch them);
//! - the parsed directives, written back as a canonical `Cache-Control` value (the crate
//!   has no serialiser, so the target writes one), parse to the same directives, so parsing
//!   is a fixed point after one step;
//! - `max-age=N` for any decimal `u64` N (taken from the first eight input bytes) parses to
//!   `min(N, 2^31)`, plain and quoted; an earlier `max-age` inside a quoted string does not
//!   count, a later one does not override it (the first occurrence counts).
#![no_main]

use coldwire_cache::CacheControl;
use coldwire_cache::policy::cache_control::DELTA_SECONDS_MAX;
use libfuzzer_sys::fuzz_target;

/// Writes the directives as one canonical `Cache-Control` value. The struct is taken apart
/// field by field, so a directive added to `CacheControl` fails to compile here until the
/// serialiser writes it too.
fn serialise(directives: &CacheControl) -> Vec<u8> {
    let CacheControl {
        max_age,
        s_maxage,
        no_store,
        no_cache,
        private,
        public,
        must_revalidate,
        proxy_revalidate,
        min_fresh,
        max_stale,
        only_if_cached,
        stale_while_revalidate,
        stale_if_error,
        must_understand,
        qualified,
    } = *directives;
    let mut members: Vec<String> = Vec::new();
    for (name, value) in [
        ("max-age", max_age),
        ("s-maxage", s_maxage),
        ("min-fresh", min_fresh),
        ("stale-while-revalidate", stale_while_revalidate),
        ("stale-if-error", stale_if_error),
    ] {
        if let Some(value) = value {
            members.push(format!("{name}={value}"));
        }
    }
    match max_stale {
        Some(Some(value)) => members.push(format!("max-stale={value}")),
        Some(None) => members.push("max-stale".to_owned()),
        None => {}
    }
    for (name, present) in [
        ("no-store", no_store),
        ("no-cache", no_cache),
        ("private", private),
        ("public", public),
        ("must-revalidate", must_revalidate),
        ("proxy-revalidate", proxy_revalidate),
        ("only-if-cached", only_if_cached),
        ("must-understand", must_understand),
    ] {
        if present {
            members.push(name.to_owned());
        }
    }
    if qualified {
        members.push("no-cache=\"x-fuzz\"".to_owned());
    }
    members.join(", ").into_bytes()
}

/// Whether `line` ends outside a quoted string (a backslash inside one escapes a byte).
fn quotes_closed(line: &[u8]) -> bool {
    let (mut quoted, mut escaped) = (false, false);
    for &byte in line {
        if escaped {
            escaped = false;
        } else if quoted && byte == b'\\' {
            escaped = true;
        } else if byte == b'"' {
            quoted = !quoted;
        }
    }
    !quoted
}

fn assert_bounded(directives: &CacheControl) {
    for value in [
        directives.max_age,
        directives.s_maxage,
        directives.min_fresh,
        directives.max_stale.flatten(),
        directives.stale_while_revalidate,
        directives.stale_if_error,
    ]
    .into_iter()
    .flatten()
    {
        assert!(
            value <= DELTA_SECONDS_MAX,
            "delta-seconds {value} over 2^31"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let lines: Vec<&[u8]> = data.split(|&byte| byte == b'\n').collect();
    let parsed = CacheControl::parse(lines.iter().copied());
    assert_bounded(&parsed);

    if lines.iter().all(|line| quotes_closed(line)) {
        let combined = lines.join(&b","[..]);
        assert_eq!(CacheControl::parse([combined.as_slice()]), parsed);
    }

    let upper = data.to_ascii_uppercase();
    let lower = data.to_ascii_lowercase();
    for cased in [upper, lower] {
        let cased_lines = cased.split(|&byte| byte == b'\n');
        assert_eq!(CacheControl::parse(cased_lines), parsed);
    }

    let canonical = serialise(&parsed);
    assert_eq!(
        CacheControl::parse([canonical.as_slice()]),
        parsed,
        "canonical form {:?}",
        String::from_utf8_lossy(&canonical)
    );

    if let Some(first) = data.first_chunk::<8>() {
        let seconds = u64::from_le_bytes(*first);
        let expected = Some(seconds.min(DELTA_SECONDS_MAX));
        let plain = format!("max-age={seconds}");
        assert_eq!(CacheControl::parse([plain.as_bytes()]).max_age, expected);
        let quoted =
            format!("ext=\"max-age=1, x\", public, Max-Age=\"{seconds}\" ,private, max-age=7");
        assert_eq!(CacheControl::parse([quoted.as_bytes()]).max_age, expected);
    }
});
