//! Interim (1xx) responses from the origin (RFC 9110 §15.2): forwarded to HTTP/1.1
//! clients as they arrive — `100 Continue`, `102 Processing`, `103 Early Hints` and any
//! other 1xx but `101` — with hop-by-hop fields removed, then the final response follows.
//! Never stored.
//!
//! Invariants: an HTTP/1.0 client never gets one (it cannot parse them); a client gets at
//! most one `100 Continue` per request (the proxy answers `Expect: 100-continue` itself, so
//! the origin's own 100 is then dropped); `101 Switching Protocols` is never forwarded — the
//! proxy never forwards `Upgrade`, so a 101 is an origin error (502, `response_head.rs`).

use coldwire_http::Version;
use coldwire_http::owned_fields::Fields;
use coldwire_io::Driver;

use super::head::{UpstreamResponse, end_to_end};
use super::state::Client;
use super::worker::Worker;
use crate::output::Output;

impl<D: Driver> Worker<D> {
    /// Passes an interim response on to the client (when it may have it) and sends it at
    /// once: the final response may be long in coming (that is what 103 is for).
    pub(super) fn forward_interim(&mut self, client: &mut Client, response: &UpstreamResponse) {
        let Some(exchange) = client.state.exchange_mut() else {
            return;
        };
        if exchange.request.version != Version::Http11 {
            return;
        }
        if response.status == 100 {
            if exchange.request.continue_sent {
                return;
            }
            exchange.request.continue_sent = true;
        }
        let mut output = Output::new(client.session.id);
        write_interim_head(
            output.bytes(&mut self.driver),
            response.status,
            &response.reason,
            &end_to_end(&response.fields),
        );
        output.finish(&mut self.driver);
        // Pending: the driver writes the rest when the client can take it.
        let _ = self.driver.flush(client.session.id);
    }
}

/// `HTTP/1.1 1xx Reason` and the end-to-end fields (`fields` has hop-by-hop ones removed).
pub(super) fn write_interim_head(out: &mut Vec<u8>, status: u16, reason: &str, fields: &Fields) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(itoa::Buffer::new().format(status).as_bytes());
    out.push(b' ');
    let reason = if reason.is_empty() {
        match status {
            100 => "Continue",
            102 => "Processing",
            103 => "Early Hints",
            _ => "Informational",
        }
    } else {
        reason
    };
    out.extend_from_slice(reason.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in fields.iter() {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::super::head::parse_upstream_response;
    use super::*;

    #[test]
    fn rfc9110_15_2_interim_heads_lose_their_hop_by_hop_fields() {
        let raw = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\
                    Connection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n\r\n";
        let response = parse_upstream_response(raw, false, 4096).unwrap().unwrap();
        assert_eq!(response.status, 103);
        let mut out = Vec::new();
        write_interim_head(
            &mut out,
            response.status,
            &response.reason,
            &end_to_end(&response.fields),
        );
        assert_eq!(
            out,
            b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
        );
        let mut out = Vec::new();
        write_interim_head(&mut out, 102, "", &Fields::new());
        assert_eq!(out, b"HTTP/1.1 102 Processing\r\n\r\n");
    }
}
