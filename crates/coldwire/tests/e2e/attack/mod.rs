//! The attack-vector audit's regression tests (docs/attack-audit.md): each failed before
//! its fix. The real binaries on 127.0.0.1, driven with raw sockets, on every I/O backend:
//! cache poisoning and deception (`cache.rs`), forward-proxy abuse (`forward.rs`), what
//! `coldwire serve` writes back (`serve.rs`).

mod cache;
mod forward;
mod serve;

use cache::*;
use forward::*;
use serve::*;

coldwire_testkit::backend_tests! {
    a_response_with_set_cookie_is_never_stored_nor_handed_to_another_client,
    a_get_with_a_body_is_neither_stored_nor_answered_from_the_store,
    a_directory_redirect_never_points_at_another_host,
    the_admin_endpoint_and_the_proxy_itself_are_not_destinations,
}
