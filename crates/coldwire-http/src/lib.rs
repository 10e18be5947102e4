//! coldwire's HTTP/1.x codec: request-head parsing with explicit limits, body framing,
//! chunked coding, response-head writing, dates, validators, conditional requests, ranges
//! and content types.
//!
//! Invariants, for every module:
//! - **Pure.** No sockets, no files, no clocks read implicitly (callers pass `SystemTime`), no
//!   dependency on coldwire's I/O crate. Everything works on byte slices and caller-owned
//!   `Vec<u8>` buffers.
//! - **Never panics on input.** All network-facing functions accept arbitrary bytes and
//!   return [`HttpError`] (which maps to a status via [`HttpError::status`]) or a neutral
//!   outcome; they are property-tested and fuzzed (see `fuzz/` at the repository root).
//! - **Limits are explicit.** Head size, header count, request-line length, chunk-line length
//!   and trailer size are all bounded by documented defaults ([`Limits`],
//!   [`ChunkedDecoder::with_limits`]).
//! - **No allocation on the hot path.** [`parse_request`] borrows from the input buffer;
//!   writers append to caller buffers; [`PrebuiltHead`] turns a response head into one copy
//!   plus a 29-byte date patch.
//!
//! Typical server flow: [`parse_request`] → [`parse_target`] / [`split_target`] →
//! [`resolve_path`] → [`evaluate_conditionals`] → [`evaluate_request_range`] → write the head
//! with [`PrebuiltHead`] or the [`write_status_line`] family, choosing the `Connection` line
//! with [`connection_header`]`(head.version(), head.keep_alive())`.

mod chunk_line;
pub mod chunked;
pub mod chunked_encoder;
pub mod conditional;
pub mod date;
pub mod date_parse;
pub mod error;
pub mod etag;
pub mod fields;
pub mod framing;
pub mod limits;
pub mod method;
pub mod mime;
pub mod owned_fields;
pub mod path;
pub mod prebuilt;
pub mod range;
pub mod request;
pub mod response;
pub mod response_parse;
pub mod status;
pub mod target;
pub mod trailers;
pub mod version;

pub use chunked::{
    ChunkedDecoder, ChunkedProgress, DEFAULT_MAX_CHUNK_LINE_BYTES, DEFAULT_MAX_TRAILER_BYTES,
};
pub use chunked_encoder::{
    ChunkSizeLine, write_chunk, write_chunk_end, write_chunk_header, write_last_chunk,
};
pub use conditional::{
    Precondition, Validators, evaluate_conditionals, evaluate_request_range, if_range_allows,
};
pub use date::{
    DateCache, HTTP_DATE_LEN, civil_from_days, format_http_date, parse_http_date,
    truncate_to_seconds, unix_seconds,
};
pub use error::HttpError;
pub use etag::{ETAG_MAX_LEN, ETag, EntityTagRef};
pub use framing::{BodyFraming, parse_content_length};
pub use limits::{Limits, MAX_HEAD_BYTES_CAP, MAX_HEADERS_CAP};
pub use method::Method;
pub use mime::{DEFAULT_CONTENT_TYPE, content_type_for};
pub use path::{normalize_path, percent_decode_path, resolve_path};
pub use prebuilt::{PrebuiltHead, PrebuiltHeadBuilder};
pub use range::{
    RangeOutcome, evaluate_range, write_content_range, write_unsatisfied_content_range,
};
pub use request::{Headers, Parsed, RequestHead, parse_request};
pub use response::{
    connection_header, finish, write_content_length, write_date, write_header, write_status_line,
};
pub use response_parse::{
    ResponseFraming, ResponseHead, ResponseParts, parse_response_head, parse_response_head_with,
};
pub use status::Status;
pub use target::{Target, is_valid_target, parse_target, split_target};
pub use trailers::{TrailerFields, allowed_in_trailers};
pub use version::Version;
