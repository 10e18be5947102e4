//! The request body's deadline: a client sending a body must keep a minimum pace, and an
//! upload that keeps it is never cut for taking long.
//!
//! While a request body is still to come from the client, the client is in
//! [`Phase::Head`]: its deadline starts at `--header-timeout` after the head and each
//! received body byte moves it later by `1 / BODY_MIN_RATE` s — never more than
//! `--header-timeout` ahead of now, so credit cannot be banked by a burst. A slow-POST
//! client (R-U-Dead-Yet: a byte every few seconds) is cut once it falls behind, as a slow
//! head is (counted as a header timeout), and the origin connection working for it closes
//! with it. While the origin is not taking the body (back-pressure, or still connecting)
//! the client is not read, so the client's deadline waits and the origin's timer rules.
//!
//! The origin's timer (`--upstream-timeout`) restarts whenever body bytes go to it: before,
//! it ran from the request head, so any upload longer than `--upstream-timeout` (30 s) was
//! answered `504` while the origin was still receiving it. And when it fires before the
//! response has begun, bytes the kernel still holds for the origin that left since the
//! last look (`Driver::unsent_bytes`, as for a client's write timeout) mean the origin is
//! still reading the request: it waits on (`failure.rs`, `exchange_origin_timer`).

use std::time::Duration;

use coldwire_io::Driver;

use super::state::{Client, ClientState};
use super::worker::{Step, Worker};
use crate::session::Phase;

/// The slowest pace a request body may keep, in bytes a second (mod_reqtimeout's
/// `MinRate` idea; its default is 500).
pub(super) const BODY_MIN_RATE: u64 = 1024;

impl<D: Driver> Worker<D> {
    /// The request body is now awaited from the client: its pace deadline starts.
    pub(super) fn await_request_body(&mut self, client: &mut Client) {
        client.session.enter(&mut self.driver, Phase::Head);
        let due = self.driver.now() + self.config.runtime.header_timeout;
        client.session.set_deadline(&mut self.driver, due);
    }

    /// `bytes` of request body arrived: the pace deadline moves later by their share.
    pub(super) fn request_body_arrived(&mut self, client: &mut Client, bytes: usize) {
        if client.session.phase != Phase::Head {
            return;
        }
        let now = self.driver.now();
        let credit = Duration::from_secs_f64(bytes as f64 / BODY_MIN_RATE as f64);
        let due = (client.session.due + credit).min(now + self.config.runtime.header_timeout);
        if due > client.session.due {
            client.session.set_deadline(&mut self.driver, due);
        }
    }

    /// The whole request body went to the origin: the client's timer only guards against
    /// a silent origin again (the origin's own timer answers 504 first).
    pub(super) fn request_body_done(&mut self, client: &mut Client) {
        if client.session.phase != Phase::Head {
            return;
        }
        client.session.enter(&mut self.driver, Phase::Idle);
        let due = self.upstream_deadline() + self.config.upstream_timeout;
        client.session.set_deadline(&mut self.driver, due);
    }

    /// The pace deadline passed. When the proxy is not reading the client (the origin has
    /// not taken the body sent so far, or is not connected yet) the client is not to blame:
    /// the deadline starts again. Otherwise `None`: the connection is cut as for a slow head.
    pub(super) fn request_body_deadline(&mut self, client: &mut Client) -> Option<Step> {
        let ClientState::Exchange(exchange) = &client.state else {
            return None;
        };
        let waiting_for_origin =
            exchange.request.body_blocked || exchange.upstream.origin.is_none();
        if !waiting_for_origin {
            return None;
        }
        let due = self.driver.now() + self.config.runtime.header_timeout;
        client.session.set_deadline(&mut self.driver, due);
        Some(Step::Keep)
    }
}
