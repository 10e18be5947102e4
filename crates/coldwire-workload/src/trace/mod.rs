//! Web access logs as workloads: parsing Common Log Format (plain and combined) and Squid's
//! native `access.log` ([`parse`]), the statistics of a trace ([`stats`]), the rule that
//! splits a client's requests into persistent connections ([`connections`]), the objects a
//! trace names with the sizes it logged ([`catalogue`]), a trace as a replay plan
//! ([`replay`]: clients, due times, connections), and a seeded generator of
//! synthetic traces with the shape of well-known ones ([`generate`]).
//!
//! Pure: no sockets, no files (callers read the text). `coldwire origin --trace` serves a
//! [`Catalogue`], `coldwire bench --replay` replays the [`Record`]s, `coldwire trace`
//! generates and describes traces. A malformed line is counted and skipped, never a panic
//! (a proptest feeds arbitrary lines to both parsers).

pub mod catalogue;
mod clf;
pub mod connections;
pub mod generate;
pub mod parse;
pub mod replay;
mod squid;
pub mod stats;
mod time;

pub use catalogue::{Catalogue, TraceObject};
pub use connections::{ConnectionRule, split_connections};
pub use parse::{Malformed, Trace, TraceFormat, parse_trace};
pub use replay::{PlannedClient, PlannedRequest, ReplayPlan};
pub use stats::TraceStats;

/// One logged request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// When it was logged, in milliseconds since the Unix epoch (Common Log Format has
    /// whole seconds; Squid's native format milliseconds).
    pub time_ms: i64,
    /// The client: a host name or address as logged.
    pub client: String,
    /// The request method as logged (`GET`, `HEAD`, ...).
    pub method: String,
    /// The request target as logged (a path, or an absolute URL in a proxy's log).
    pub url: String,
    /// The response status (0 when the log has none, as Squid's `000`).
    pub status: u16,
    /// The size logged: body bytes in Common Log Format (`-` is 0), all bytes sent to the
    /// client (headers included) in Squid's native format.
    pub size: u64,
}

impl Record {
    /// The path (and query) the request names: an absolute URL loses its scheme and
    /// authority (`http://host/a?b` → `/a?b`); anything else is kept as logged.
    pub fn path(&self) -> &str {
        request_path(&self.url)
    }

    /// True for the methods a replay sends (`GET`, `HEAD`); other records are skipped.
    pub fn replayable(&self) -> bool {
        matches!(self.method.as_str(), "GET" | "HEAD")
    }
}

/// The path (and query) a request target names: `http://host:80/a?b` → `/a?b`,
/// `http://host` → `/`, a path or anything else unchanged. The origin looks objects up by
/// this, so a proxy's log and a server's log of the same requests name the same objects.
pub fn request_path(target: &str) -> &str {
    let lower_starts = |prefix: &str| {
        target.len() >= prefix.len() && target[..prefix.len()].eq_ignore_ascii_case(prefix)
    };
    let rest = if lower_starts("http://") {
        &target[7..]
    } else if lower_starts("https://") {
        &target[8..]
    } else {
        return target;
    };
    match rest.find(['/', '?']) {
        Some(at) if rest.as_bytes()[at] == b'/' => &rest[at..],
        _ => "/",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_urls_lose_scheme_and_authority() {
        assert_eq!(request_path("/a/b?c"), "/a/b?c");
        assert_eq!(request_path("http://example.com/a?b"), "/a?b");
        assert_eq!(request_path("HTTPS://example.com:8443/x"), "/x");
        assert_eq!(request_path("http://example.com"), "/");
        assert_eq!(request_path("http://example.com?q"), "/");
        assert_eq!(request_path("example.com:443"), "example.com:443");
        assert_eq!(request_path("http:/"), "http:/");
    }
}
