//! End-to-end tests of `coldwire serve`: the real binary serves a temporary document root
//! and is checked from outside, with the real `curl` and with raw sockets — file bodies byte
//! for byte, HEAD, keep-alive, pipelining, ranges, conditional requests, redirects and
//! errors, RFC 9110 method and expectation rules, path traversal, request-head limits and deadlines, thousands of idle
//! connections, the stats endpoint, the access log and graceful shutdown. Every test runs
//! against every I/O backend (select, poll, epoll, uring-poll, uring) through `coldwire_testkit::backend_tests!`;
//! an io_uring backend the kernel does not allow prints `skipped: <reason>`.

mod conformance;
mod curl;
mod lifecycle;
mod limits;
mod raw;

use conformance::*;
use curl::*;
use lifecycle::*;
use limits::*;
use raw::*;

coldwire_testkit::backend_tests! {
    curl_downloads_every_file_byte_for_byte,
    curl_head_gives_the_headers_and_no_body,
    curl_reuses_one_connection_for_two_urls,
    curl_range_gets_206_with_exactly_those_bytes,
    curl_unsatisfiable_range_gets_416_with_the_full_length,
    curl_if_none_match_with_the_etag_gets_304_without_body,
    curl_if_modified_since_last_modified_gets_304,
    curl_directory_without_slash_is_redirected_to_slash,
    curl_directory_with_slash_serves_its_index,
    curl_missing_file_gets_404,
    curl_post_gets_405_allowing_get_and_head,
    hundred_pipelined_requests_in_one_write_are_answered_in_order,
    thousand_pipelined_requests_over_many_buffers_are_all_answered,
    http10_request_is_answered_then_the_server_closes,
    http10_keep_alive_request_keeps_the_connection_open,
    traversal_attempts_never_reveal_files_outside_the_root,
    symlink_out_of_the_root_is_refused_and_symlink_inside_is_served,
    twenty_kib_request_header_gets_431,
    trickled_request_head_is_cut_off_at_the_header_deadline,
    idle_connection_is_not_cut_off_by_the_header_deadline,
    five_thousand_idle_connections_do_not_keep_a_new_client_waiting,
    stats_count_requests_and_name_the_backend,
    access_log_has_a_common_log_format_line_per_request,
    sigterm_lets_a_slow_download_finish_then_exits_zero,
    sigterm_stops_the_server_after_its_last_connection_closed,
    garbage_request_line_gets_400_and_others_are_still_served,
    content_length_with_transfer_encoding_gets_400,
    running_out_of_descriptors_pauses_accepting_without_spinning,
    connection_limit_defers_new_connections_until_one_closes,
    stalled_reader_is_dropped_after_the_write_timeout_but_a_slow_one_is_not,
    unknown_methods_get_501_and_known_ones_405,
    unknown_expectation_gets_417,
    malformed_host_values_get_400,
    two_range_fields_get_the_full_representation,
}
