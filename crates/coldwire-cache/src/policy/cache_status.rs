//! The `Cache-Status` response field (RFC 9211): one list member naming this cache, with
//! `hit`, or `fwd=<reason>` plus `fwd-status`, `stored`, `ttl` and `detail` parameters.
//!
//! Invariant: the written value is always a syntactically valid structured-field list
//! member (tokens and integers only; `detail` is a token chosen from fixed strings).

/// Why a request went forward to the origin (RFC 9211 §2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forward {
    /// The cache was bypassed (method, configuration).
    Bypass,
    /// The client's request required going forward (e.g. `no-cache`).
    Request,
    /// Nothing stored under this URI.
    UriMiss,
    /// Something stored under this URI, but `Vary` selected none of it.
    VaryMiss,
    /// A stored response was stale and was revalidated.
    Stale,
}

impl Forward {
    fn token(self) -> &'static str {
        match self {
            Forward::Bypass => "bypass",
            Forward::Request => "request",
            Forward::UriMiss => "uri-miss",
            Forward::VaryMiss => "vary-miss",
            Forward::Stale => "stale",
        }
    }
}

/// What the cache did for one response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheStatus {
    /// `None`: served from the cache (`hit`); otherwise why it went forward.
    pub forward: Option<Forward>,
    /// Status the origin answered with, when it went forward.
    pub forward_status: Option<u16>,
    /// The response was stored (or a stored one refreshed).
    pub stored: bool,
    /// Seconds of freshness left (negative when stale), on hits and stores.
    pub ttl: Option<i64>,
    /// A short token saying why not stored, or why stale content was served.
    pub detail: Option<&'static str>,
}

impl CacheStatus {
    /// A hit with `ttl` seconds of freshness left.
    pub fn hit(ttl: i64) -> CacheStatus {
        CacheStatus {
            forward: None,
            forward_status: None,
            stored: false,
            ttl: Some(ttl),
            detail: None,
        }
    }

    /// Went forward for `reason`.
    pub fn forward(reason: Forward) -> CacheStatus {
        CacheStatus {
            forward: Some(reason),
            forward_status: None,
            stored: false,
            ttl: None,
            detail: None,
        }
    }

    /// One word for an access log: `hit`, `stale` (served stale: `stale-while-revalidate`
    /// or `stale-if-error`), `revalidated` (a 304 refreshed the stored response), `miss`
    /// (nothing usable stored), `refreshed` (a stale entry was replaced by the origin's new
    /// answer), `client-refresh` (the request's `no-cache`) or `bypass`.
    pub fn log_token(&self) -> &'static str {
        if self
            .detail
            .is_some_and(|detail| detail.starts_with("stale-"))
        {
            return "stale";
        }
        match self.forward {
            None => "hit",
            Some(Forward::Stale) if self.forward_status == Some(304) => "revalidated",
            Some(Forward::Stale) => "refreshed",
            Some(Forward::UriMiss | Forward::VaryMiss) => "miss",
            Some(Forward::Request) => "client-refresh",
            Some(Forward::Bypass) => "bypass",
        }
    }

    /// Appends the field value (without the name) for the cache called `cache_name`, a
    /// structured-field token such as `coldwire`.
    pub fn write_value(&self, cache_name: &str, out: &mut Vec<u8>) {
        out.extend_from_slice(cache_name.as_bytes());
        match self.forward {
            None => out.extend_from_slice(b"; hit"),
            Some(reason) => {
                out.extend_from_slice(b"; fwd=");
                out.extend_from_slice(reason.token().as_bytes());
            }
        }
        if let Some(status) = self.forward_status {
            out.extend_from_slice(b"; fwd-status=");
            out.extend_from_slice(itoa::Buffer::new().format(status).as_bytes());
        }
        if self.stored {
            out.extend_from_slice(b"; stored");
        }
        if let Some(ttl) = self.ttl {
            out.extend_from_slice(b"; ttl=");
            out.extend_from_slice(itoa::Buffer::new().format(ttl).as_bytes());
        }
        if let Some(detail) = self.detail {
            out.extend_from_slice(b"; detail=");
            out.extend_from_slice(detail.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(status: CacheStatus) -> String {
        let mut out = Vec::new();
        status.write_value("coldwire", &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn values_follow_rfc_9211() {
        assert_eq!(text(CacheStatus::hit(42)), "coldwire; hit; ttl=42");
        let mut miss = CacheStatus::forward(Forward::UriMiss);
        miss.forward_status = Some(200);
        miss.stored = true;
        miss.ttl = Some(60);
        assert_eq!(
            text(miss),
            "coldwire; fwd=uri-miss; fwd-status=200; stored; ttl=60"
        );
        let mut refused = CacheStatus::forward(Forward::VaryMiss);
        refused.detail = Some("no-store");
        assert_eq!(text(refused), "coldwire; fwd=vary-miss; detail=no-store");
    }

    #[test]
    fn log_tokens_name_what_happened() {
        assert_eq!(CacheStatus::hit(3).log_token(), "hit");
        let mut revalidated = CacheStatus::forward(Forward::Stale);
        revalidated.forward_status = Some(304);
        assert_eq!(revalidated.log_token(), "revalidated");
        assert_eq!(CacheStatus::forward(Forward::VaryMiss).log_token(), "miss");
        let mut stale = CacheStatus::hit(-5);
        stale.detail = Some("stale-while-revalidate");
        assert_eq!(stale.log_token(), "stale");
    }
}
