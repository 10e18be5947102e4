//! Access log in Common Log Format, buffered per worker: lines accumulate in memory and
//! are written with one `write` (to a file opened with `O_APPEND`, so workers' writes do not
//! interleave) when the buffer passes 32 KiB, at least once a second, and at shutdown.
//!
//! `host ident authuser [date] "request line" status bytes`, dates in UTC; callers may
//! append fields after these (the proxy adds its cache status and upstream time).

use std::fs::File;
use std::io::{self, Write};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// Buffer size that triggers a write.
const FLUSH_BYTES: usize = 32 * 1024;

/// One worker's access log writer.
pub struct AccessLog {
    file: Arc<File>,
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
    /// A writer appending to `file`.
    pub fn new(file: Arc<File>) -> AccessLog {
        AccessLog {
            file,
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
        self.record_extended(peer, method, target, version, status, body_bytes, now, b"");
    }

    /// Records one response with `extra` fields after the CLF ones (separated by a space;
    /// nothing added when empty), e.g. the proxy's cache status and upstream time.
    #[expect(
        clippy::too_many_arguments,
        reason = "one CLF line has this many fields"
    )]
    pub fn record_extended(
        &mut self,
        peer: IpAddr,
        method: &[u8],
        target: &[u8],
        version: &[u8],
        status: u16,
        body_bytes: u64,
        now: SystemTime,
        extra: &[u8],
    ) {
        let second = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        if second != self.clf_second {
            self.clf_second = second;
            self.clf_date = format_clf_date(second);
        }
        let _ = write!(self.buffer, "{peer} - - ");
        self.buffer.extend_from_slice(&self.clf_date);
        self.buffer.extend_from_slice(b" \"");
        push_escaped(&mut self.buffer, method);
        self.buffer.push(b' ');
        push_escaped(&mut self.buffer, target);
        self.buffer.push(b' ');
        self.buffer.extend_from_slice(version);
        let _ = write!(self.buffer, "\" {status} {body_bytes}");
        if !extra.is_empty() {
            self.buffer.push(b' ');
            push_escaped(&mut self.buffer, extra);
        }
        self.buffer.push(b'\n');
        if self.buffer.len() >= FLUSH_BYTES {
            let _ = self.flush();
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

    /// Writes buffered lines now.
    pub fn flush(&mut self) -> io::Result<()> {
        self.last_flush = Instant::now();
        let result = (&*self.file).write_all(&self.buffer);
        self.buffer.clear();
        result
    }
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
}
