//! Fuzz target: the client-side response-head parser must never panic; a complete head
//! never claims more bytes than it was given; and any shorter prefix of a complete head is
//! either still incomplete or an error, never a different complete head.
#![no_main]

use coldwire_http::parse_response_head;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, input)) = data.split_first() else {
        return;
    };
    let request_was_head = flags & 1 == 1;
    if let Ok(Some(head)) = parse_response_head(input, request_was_head) {
        assert!(head.head_len <= input.len());
        let cut = usize::from(flags >> 1).min(head.head_len.saturating_sub(1));
        if let Ok(Some(shorter)) = parse_response_head(&input[..cut], request_was_head) {
            panic!(
                "a prefix of {} bytes parsed as a complete head: {shorter:?}",
                cut
            );
        }
    }
});
