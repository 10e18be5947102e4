//! Fuzz target: `parse_request` and every accessor and follow-up step a server performs on a
//! parsed head must never panic, and must respect the crate's documented invariants.
#![no_main]

use coldwire_http::{
    Limits, Parsed, RangeOutcome, Validators, evaluate_conditionals, evaluate_range,
    evaluate_request_range, if_range_allows, parse_request, parse_target, resolve_path,
    split_target,
};
use libfuzzer_sys::fuzz_target;
use std::time::{Duration, UNIX_EPOCH};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    let Ok(Parsed::Complete { head, head_len }) = parse_request(data, &limits) else {
        return;
    };
    assert!(head_len <= data.len());
    assert!(head_len <= limits.max_head_bytes);
    let _ = (head.method(), head.method_str(), head.version(), head.raw());
    let _ = (
        head.keep_alive(),
        head.body_framing(),
        head.expects_continue(),
        head.host(),
    );
    assert_eq!(head.headers().count(), head.header_count());
    for (name, value) in head.headers() {
        assert!(head.header_values(name).count() > 0);
        let _ = value;
    }
    let _ = head.header("content-type");

    let _ = parse_target(head.method(), head.target());
    let (path, _query) = split_target(head.target());
    let mut resolved = Vec::new();
    if resolve_path(path, &mut resolved).is_ok() {
        assert!(!resolved.starts_with(b"/"));
        assert!(
            !resolved
                .split(|&byte| byte == b'/')
                .any(|segment| segment == b"..")
        );
    }

    let validators = Validators::for_file(1234, UNIX_EPOCH + Duration::from_secs(784_111_777));
    let _ = evaluate_conditionals(&head, &validators);
    let _ = if_range_allows(&head, &validators);
    for len in [0, 1, 10, u64::MAX] {
        for outcome in [
            evaluate_range(head.header("range"), len),
            evaluate_request_range(&head, &validators, len),
        ] {
            if let RangeOutcome::Partial {
                start,
                end_inclusive,
            } = outcome
            {
                assert!(start <= end_inclusive && end_inclusive < len);
            }
        }
    }
});
