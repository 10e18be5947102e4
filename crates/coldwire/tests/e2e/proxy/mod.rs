//! End-to-end tests of `coldwire proxy`: the real binary between curl (or raw sockets) and
//! a test origin whose answers the tests control. Every test runs on every I/O backend
//! (select, poll, epoll, uring-poll, uring; io_uring ones skip themselves where the kernel
//! refuses io_uring) through `coldwire_testkit::backend_tests!`: miss then hit, revalidation observed at
//! the origin, no-store not stored, Vary, pipelining, chunked POST, an upstream reset
//! mid-body (error to the client, nothing cached), a denied client, reverse mode, two chained proxies (`--name`), CONNECT
//! to a TLS server, 1 MiB bodies byte for byte, and a 503 with `Proxy-Status` when
//! connections or descriptors run out, for requests and CONNECT tunnels (`limits.rs`).

mod cache;
mod errors;
mod forward;
mod limits;
mod tunnel;

use cache::*;
use errors::*;
use forward::*;
use limits::*;
use tunnel::*;

coldwire_testkit::backend_tests! {
    miss_then_hit_is_served_from_the_cache,
    stale_entry_is_revalidated_and_a_304_refreshes_it,
    revalidate_always_asks_the_origin_every_time,
    no_store_is_never_stored,
    vary_keeps_variants_apart,
    pipelined_requests_are_answered_in_order,
    chunked_post_reaches_the_origin_and_its_answer_comes_back,
    upstream_reset_mid_body_is_an_error_and_nothing_is_cached,
    close_delimited_response_is_rechunked_and_complete,
    client_outside_the_acl_gets_403,
    unreachable_origin_gets_502,
    reverse_proxy_forwards_origin_form_requests,
    two_chained_proxies_need_their_own_names,
    a_reverse_proxy_tells_the_origin_who_asked,
    megabyte_bodies_are_byte_identical_on_miss_and_hit,
    connect_tunnel_reaches_a_tls_server,
    spliced_connect_tunnel_reaches_a_tls_server,
    bodies_are_identical_through_every_data_path,
    stale_pooled_connection_is_retried_on_a_fresh_one,
    silent_origin_gets_504,
    stats_endpoint_counts_requests_and_responses,
    hop_by_hop_and_proxy_headers_never_reach_the_origin,
    garbage_request_gets_400,
    connect_is_limited_to_allowed_ports,
    access_log_has_a_line_per_response_with_cache_status,
    silent_tunnels_are_closed_and_active_ones_kept,
    purge_removes_every_variant_for_allowed_clients_only,
    ranges_are_served_from_cached_objects,
    stale_while_revalidate_answers_at_once_and_refreshes_once,
    stale_if_error_answers_when_the_origin_fails,
    concurrent_misses_send_one_request_to_the_origin,
    refused_origin_says_connection_refused_everywhere,
    unknown_host_is_a_dns_error,
    silent_origin_is_a_response_timeout,
    origin_closing_without_an_answer_is_connection_terminated,
    half_a_response_head_is_incomplete,
    garbage_from_the_origin_is_a_protocol_error,
    malformed_and_oversized_requests_are_request_errors,
    a_forwarding_loop_is_detected,
    only_if_cached_with_nothing_stored_is_an_internal_response,
    refused_tunnels_say_why,
    connection_limit_answers_503_with_proxy_status_and_keeps_serving,
    running_out_of_descriptors_answers_503_and_says_so,
    a_tunnel_out_of_connections_is_503_and_a_refused_one_502,
}
