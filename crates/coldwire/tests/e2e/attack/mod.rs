//! The attack-vector audit's regression tests (docs/attack-audit.md): each failed before
//! its fix. The real binaries on 127.0.0.1, driven with raw sockets, on every I/O backend:
//! cache poisoning and deception (`cache.rs`), what `coldwire serve` writes back
//! (`serve.rs`).

mod cache;

use cache::*;

coldwire_testkit::backend_tests! {
    a_response_with_set_cookie_is_never_stored_nor_handed_to_another_client,
    a_get_with_a_body_is_neither_stored_nor_answered_from_the_store,
}
