//! The attack-vector audit's regression tests (docs/attack-audit.md): each failed before
//! its fix. The real binaries on 127.0.0.1, driven with raw sockets, on every I/O backend:
//! cache poisoning and deception (`cache.rs`), slow bodies and half-closes
//! (`connection.rs`), forward-proxy abuse (`forward.rs`), what
//! `coldwire serve` writes back (`serve.rs`), the admin listener under slow clients
//! (`admin.rs`).

mod admin;
mod cache;
mod connection;
mod forward;
mod serve;

use admin::*;
use cache::*;
use connection::*;
use forward::*;
use serve::*;

coldwire_testkit::backend_tests! {
    a_response_with_set_cookie_is_never_stored_nor_handed_to_another_client,
    a_get_with_a_body_is_neither_stored_nor_answered_from_the_store,
    purge_is_refused_to_clients_outside_the_purge_acl,
    a_field_stripped_as_hop_by_hop_does_not_key_the_stored_answer,
    a_directory_redirect_never_points_at_another_host,
    a_request_and_its_end_of_stream_together_are_answered_and_closed,
    the_admin_endpoint_and_the_proxy_itself_are_not_destinations,
    an_upload_longer_than_the_upstream_timeout_is_not_cut,
    an_origin_still_reading_the_request_body_is_not_timed_out,
    a_trickled_request_body_is_cut_at_its_pace_deadline,
    a_request_followed_by_a_half_close_is_answered,
    a_slow_client_does_not_block_the_admin_endpoint,
}
