//! Access log, buffered per worker: lines accumulate in memory and are written with one
//! `write` (to a file opened with `O_APPEND`, or stdout for `--access-log -`, so workers'
//! writes do not interleave) when the buffer passes 32 KiB, at least once a second, and at
//! shutdown. Write errors (a full disk, a closed stdout pipe) drop the lines, never the
//! process.
//!
//! Three formats ([`AccessLogFormat`], `--access-log-format`):
//! - `clf` (default): `host ident authuser [date] "request line" status bytes`, dates in
//!   UTC; the proxy appends its cache status, the upstream time in seconds and the error
//!   word (RFC 9209's error type, `-` for none).
//! - `squid`: Squid's native format, `time elapsed client code/status bytes method URL
//!   ident hierarchy/peer type` (`1764162936.123     12 127.0.0.1 TCP_MISS/200 1024 GET
//!   http://… - HIER_DIRECT/127.0.0.1 -`); bytes are body bytes (Squid counts the head
//!   too) and the content type is `-`.
//! - `json`: one JSON object per line (`time`, `client`, `method`, `target`, `version`,
//!   `status`, `bytes`, `elapsed_ms`, and for the proxy `cache`, `upstream`,
//!   `upstream_ms`, `error`).

use std::fs::File;
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// How access-log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AccessLogFormat {
    /// Common Log Format (plus the proxy's cache status, upstream time and error).
    #[default]
    Clf,
    /// Squid's native access.log format.
    Squid,
    /// JSON lines.
    Json,
}

impl AccessLogFormat {
    /// Every format, by name.
    pub const ALL: [AccessLogFormat; 3] = [
        AccessLogFormat::Clf,
        AccessLogFormat::Squid,
        AccessLogFormat::Json,
    ];

    /// The format's name (`clf`, `squid`, `json`).
    pub fn name(self) -> &'static str {
        match self {
            AccessLogFormat::Clf => "clf",
            AccessLogFormat::Squid => "squid",
            AccessLogFormat::Json => "json",
        }
    }
}

impl FromStr for AccessLogFormat {
    type Err = String;

    fn from_str(text: &str) -> Result<AccessLogFormat, String> {
        AccessLogFormat::ALL
            .into_iter()
            .find(|format| format.name() == text)
            .ok_or_else(|| {
                format!("unknown access log format {text:?}: expected clf, squid or json")
            })
    }
}

/// One response, as logged.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    /// The client's address.
    pub peer: IpAddr,
    /// Method as sent (`-` when no request line was read).
    pub method: &'a [u8],
    /// Target as sent.
    pub target: &'a [u8],
    /// `HTTP/1.1`.
    pub version: &'a [u8],
    /// Status sent.
    pub status: u16,
    /// Body bytes sent.
    pub body_bytes: u64,
    /// Wall-clock time of the line.
    pub now: SystemTime,
    /// Request received to response logged, when known.
    pub elapsed: Option<Duration>,
    /// The proxy's part: `None` for the origin server.
    pub proxy: Option<ProxyFields<'a>>,
}

/// What the proxy adds to each line.
#[derive(Clone, Copy, Debug)]
pub struct ProxyFields<'a> {
    /// Cache status word (`hit`, `miss`, …, `-`).
    pub cache: &'a str,
    /// Request sent to response head received, when the origin was asked.
    pub upstream_time: Option<Duration>,
    /// The origin's address, when one was chosen.
    pub upstream: Option<SocketAddr>,
    /// RFC 9209 error type, `-` for none.
    pub error: &'a str,
}

/// Buffer size that triggers a write.
const FLUSH_BYTES: usize = 32 * 1024;

/// One worker's access log writer.
pub struct AccessLog {
    file: Arc<File>,
    format: AccessLogFormat,
    buffer: Vec<u8>,
    clf_second: u64,
    clf_date: [u8; 28],
    last_flush: Instant,
}

const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// `[10/Oct/2000:13:55:36 +0000]` for a Unix time (proleptic Gregorian, UTC).
pub fn format_clf_date(unix_seconds: u64) -> [u8; 28] {
    let days = (unix_seconds / 86_400) as i64;
    let seconds_of_day = unix_seconds % 86_400;
    let (year, month, day) = coldwire_http::civil_from_days(days);
    let mut out = [0u8; 28];
    let text = format!(
        "[{:02}/{}/{:04}:{:02}:{:02}:{:02} +0000]",
        day,
        std::str::from_utf8(MONTHS[(month - 1) as usize]).unwrap_or("Jan"),
        year,
        seconds_of_day / 3600,
        seconds_of_day / 60 % 60,
        seconds_of_day % 60
    );
    let bytes = text.as_bytes();
    let length = bytes.len().min(out.len());
    out[..length].copy_from_slice(&bytes[..length]);
    out
}

fn push_escaped(out: &mut Vec<u8>, text: &[u8]) {
    for &byte in text {
        match byte {
            b'"' | b'\\' => {
                out.push(b'\\');
                out.push(byte);
            }
            0x20..=0x7e => out.push(byte),
            _ => out.extend_from_slice(format!("\\x{byte:02x}").as_bytes()),
        }
    }
}

impl AccessLog {
    /// A writer appending CLF lines to `file`.
    pub fn new(file: Arc<File>) -> AccessLog {
        AccessLog::with_format(file, AccessLogFormat::Clf)
    }

    /// A writer appending `format` lines to `file`.
    pub fn with_format(file: Arc<File>, format: AccessLogFormat) -> AccessLog {
        AccessLog {
            file,
            format,
            buffer: Vec::with_capacity(FLUSH_BYTES * 2),
            clf_second: u64::MAX,
            clf_date: [b' '; 28],
            last_flush: Instant::now(),
        }
    }

    /// Records one response.
    #[expect(
        clippy::too_many_arguments,
        reason = "one CLF line has this many fields"
    )]
    pub fn record(
        &mut self,
        peer: IpAddr,
        method: &[u8],
        target: &[u8],
        version: &[u8],
        status: u16,
        body_bytes: u64,
        now: SystemTime,
    ) {
        self.record_entry(&Entry {
            peer,
            method,
            target,
            version,
            status,
            body_bytes,
            now,
            elapsed: None,
            proxy: None,
        });
    }

    /// Records one response.
    pub fn record_entry(&mut self, entry: &Entry<'_>) {
        match self.format {
            AccessLogFormat::Clf => self.write_clf(entry),
            AccessLogFormat::Squid => write_squid(&mut self.buffer, entry),
            AccessLogFormat::Json => write_json(&mut self.buffer, entry),
        }
        self.buffer.push(b'\n');
        if self.buffer.len() >= FLUSH_BYTES {
            let _ = self.flush();
        }
    }

    fn write_clf(&mut self, entry: &Entry<'_>) {
        let second = unix_time(entry.now).as_secs();
        if second != self.clf_second {
            self.clf_second = second;
            self.clf_date = format_clf_date(second);
        }
        let _ = write!(self.buffer, "{} - - ", entry.peer);
        self.buffer.extend_from_slice(&self.clf_date);
        self.buffer.extend_from_slice(b" \"");
        push_escaped(&mut self.buffer, entry.method);
        self.buffer.push(b' ');
        push_escaped(&mut self.buffer, entry.target);
        self.buffer.push(b' ');
        self.buffer.extend_from_slice(entry.version);
        let _ = write!(self.buffer, "\" {} {}", entry.status, entry.body_bytes);
        if let Some(proxy) = entry.proxy {
            self.buffer.push(b' ');
            push_escaped(&mut self.buffer, proxy.cache.as_bytes());
            match proxy.upstream_time {
                Some(elapsed) => {
                    let _ = write!(self.buffer, " {:.3}", elapsed.as_secs_f64());
                }
                None => self.buffer.extend_from_slice(b" -"),
            }
            self.buffer.push(b' ');
            push_escaped(&mut self.buffer, proxy.error.as_bytes());
        }
    }

    /// True when buffered lines are waiting.
    pub fn has_pending(&self) -> bool {
        !self.buffer.is_empty()
    }

    /// Writes buffered lines if a second has passed since the last write.
    pub fn flush_if_due(&mut self, now: Instant) {
        if self.has_pending() && now.saturating_duration_since(self.last_flush).as_secs() >= 1 {
            let _ = self.flush();
        }
    }

    /// The format written.
    pub fn format(&self) -> AccessLogFormat {
        self.format
    }

    /// Writes buffered lines now.
    pub fn flush(&mut self) -> io::Result<()> {
        self.last_flush = Instant::now();
        let result = (&*self.file).write_all(&self.buffer);
        self.buffer.clear();
        result
    }
}

fn unix_time(now: SystemTime) -> Duration {
    now.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
}

/// Squid's result code for a cache word and status (`TCP_HIT`, `TCP_MISS`,
/// `TCP_REFRESH_UNMODIFIED`, `TCP_DENIED`, `NONE_NONE`...).
pub fn squid_code(cache: &str, status: u16, error: &str) -> &'static str {
    match cache {
        "hit" => "TCP_HIT",
        "stale" => "TCP_REFRESH_FAIL_OLD",
        "revalidated" => "TCP_REFRESH_UNMODIFIED",
        "refreshed" => "TCP_REFRESH_MODIFIED",
        "client-refresh" => "TCP_CLIENT_REFRESH_MISS",
        "tunnel" => "TCP_TUNNEL",
        "aborted" => "TCP_MISS_ABORTED",
        "miss" | "bypass" | "purge" => "TCP_MISS",
        _ if status == 403 => "TCP_DENIED",
        _ if error == "http_request_error" => "NONE_NONE",
        _ => "TCP_MISS",
    }
}

fn write_squid(out: &mut Vec<u8>, entry: &Entry<'_>) {
    let time = unix_time(entry.now);
    let elapsed = entry.elapsed.unwrap_or_default().as_millis();
    let (cache, error) = entry
        .proxy
        .map_or(("-", "-"), |proxy| (proxy.cache, proxy.error));
    let code = squid_code(cache, entry.status, error);
    let _ = write!(
        out,
        "{}.{:03} {:>6} {} {}/{:03} {} ",
        time.as_secs(),
        time.subsec_millis(),
        elapsed,
        entry.peer,
        code,
        entry.status,
        entry.body_bytes
    );
    push_token(out, entry.method);
    out.push(b' ');
    push_token(out, entry.target);
    out.extend_from_slice(b" - ");
    match entry.proxy.and_then(|proxy| proxy.upstream) {
        Some(address) => {
            let _ = write!(out, "HIER_DIRECT/{}", address.ip());
        }
        None => out.extend_from_slice(b"HIER_NONE/-"),
    }
    out.extend_from_slice(b" -");
}

/// Bytes as one space-free field (spaces and controls percent-encoded, as Squid logs URLs).
fn push_token(out: &mut Vec<u8>, text: &[u8]) {
    if text.is_empty() {
        out.push(b'-');
    }
    for &byte in text {
        match byte {
            0x21..=0x7e => out.push(byte),
            _ => {
                let _ = write!(out, "%{byte:02X}");
            }
        }
    }
}

fn write_json(out: &mut Vec<u8>, entry: &Entry<'_>) {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let milliseconds = |elapsed: Duration| (elapsed.as_secs_f64() * 1e6).round() / 1e3;
    let time = unix_time(entry.now);
    let mut line = serde_json::json!({
        "time": format!("{}.{:03}", time.as_secs(), time.subsec_millis()).parse::<f64>().unwrap_or(0.0),
        "client": entry.peer.to_string(),
        "method": text(entry.method),
        "target": text(entry.target),
        "version": text(entry.version),
        "status": entry.status,
        "bytes": entry.body_bytes,
        "elapsed_ms": entry.elapsed.map(milliseconds),
    });
    if let (Some(proxy), Some(object)) = (entry.proxy, line.as_object_mut()) {
        let dash_is_none = |word: &str| (word != "-").then(|| word.to_owned());
        object.insert("cache".into(), dash_is_none(proxy.cache).into());
        object.insert(
            "upstream".into(),
            proxy.upstream.map(|address| address.to_string()).into(),
        );
        object.insert(
            "upstream_ms".into(),
            proxy.upstream_time.map(milliseconds).into(),
        );
        object.insert("error".into(), dash_is_none(proxy.error).into());
    }
    let _ = serde_json::to_writer(&mut *out, &line);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clf_dates_match_known_instants() {
        assert_eq!(&format_clf_date(0), b"[01/Jan/1970:00:00:00 +0000]");
        assert_eq!(
            &format_clf_date(971_186_136),
            b"[10/Oct/2000:13:55:36 +0000]"
        );
        assert_eq!(
            &format_clf_date(1_709_164_800),
            b"[29/Feb/2024:00:00:00 +0000]"
        );
    }

    #[test]
    fn request_lines_are_escaped() {
        let mut out = Vec::new();
        push_escaped(&mut out, b"/a\"b\x01");
        assert_eq!(out, b"/a\\\"b\\x01");
    }

    fn entry(proxy: Option<ProxyFields<'static>>) -> Entry<'static> {
        Entry {
            peer: IpAddr::from([127, 0, 0, 1]),
            method: b"GET",
            target: b"http://o/a b",
            version: b"HTTP/1.1",
            status: 502,
            body_bytes: 120,
            now: SystemTime::UNIX_EPOCH + Duration::from_millis(971_186_136_250),
            elapsed: Some(Duration::from_millis(12)),
            proxy,
        }
    }

    #[test]
    fn squid_and_json_lines_carry_the_proxy_fields() {
        let proxy = ProxyFields {
            cache: "-",
            upstream_time: None,
            upstream: Some(SocketAddr::from(([127, 0, 0, 1], 9))),
            error: "connection_refused",
        };
        let mut out = Vec::new();
        write_squid(&mut out, &entry(Some(proxy)));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "971186136.250     12 127.0.0.1 TCP_MISS/502 120 GET http://o/a%20b - \
             HIER_DIRECT/127.0.0.1 -"
        );
        let mut out = Vec::new();
        write_json(&mut out, &entry(Some(proxy)));
        let line: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(line["error"], "connection_refused");
        assert_eq!(line["cache"], serde_json::Value::Null);
        assert_eq!(line["upstream"], "127.0.0.1:9");
        assert_eq!(line["elapsed_ms"], 12.0);
        let mut out = Vec::new();
        write_json(&mut out, &entry(None));
        let line: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert!(line.get("error").is_none(), "{line}");
    }

    #[test]
    fn squid_codes_follow_the_cache_word() {
        assert_eq!(squid_code("hit", 200, "-"), "TCP_HIT");
        assert_eq!(
            squid_code("revalidated", 200, "-"),
            "TCP_REFRESH_UNMODIFIED"
        );
        assert_eq!(squid_code("-", 403, "http_request_denied"), "TCP_DENIED");
        assert_eq!(squid_code("-", 400, "http_request_error"), "NONE_NONE");
        assert_eq!(
            squid_code("aborted", 200, "http_response_incomplete"),
            "TCP_MISS_ABORTED"
        );
        assert_eq!("squid".parse(), Ok(AccessLogFormat::Squid));
        assert!(
            "apache"
                .parse::<AccessLogFormat>()
                .unwrap_err()
                .contains("clf, squid or json")
        );
    }
}
