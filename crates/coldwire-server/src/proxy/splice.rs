//! Phase 7, body (spliced): parts of a response body that move origin → client inside the
//! kernel (`Driver::splice`) instead of through user space — the rest of a long
//! `Content-Length` body after the bytes that came with the head, each chunk of a chunked
//! body whose data still to come is at least `--splice-threshold` (size lines, CRLFs and
//! trailers still pass through the codec), or a close-delimited body to a client whose
//! copy is close-delimited too and that is not being stored. A copy for the store is kept
//! with `tee` while the object can still fit. See [`SplicePlan`] for the steps.
//!
//! This file is also the proxy's only user of the driver's splice operations (tunnels
//! splice through [`Worker::splice_tunnel`] and [`Worker::tunnel_spliced_bytes`]), so a
//! change in how a driver offers splicing touches the proxy here only.
//!
//! Invariants: a splice starts only once the client's queue is empty (everything before
//! it written); while it runs nobody receives from the origin or sends to the client; a
//! refused splice falls back to copying, with nothing lost.

use bytes::Bytes;
use coldwire_http::ResponseFraming;
use coldwire_io::{Chunk, ConnectionId, Driver, Splice};

use super::exchange::SplicePlan;
use super::state::Client;
use super::worker::{Step, Worker};
use crate::session::Phase;

/// Most bytes of an origin's response head (and the body bytes after it) read into user
/// space on the splice path before the body is spliced: a head of a few hundred bytes
/// leaves the rest of one page to the body, like seed 002's two-segment first read.
pub(super) const HEAD_READ_BYTES: usize = 4096;

/// How far a tunnel's splices got ([`Worker::splice_tunnel`]).
pub(super) enum TunnelSplice {
    /// Not spliced: relay by copying.
    Copied,
    /// Both directions are spliced.
    Spliced,
    /// The client → origin splice started but the other was refused: the tunnel cannot go
    /// on.
    Broken,
}

impl<D: Driver> Worker<D> {
    /// Whether the splice data path is configured and the driver can splice.
    fn splicing(&mut self) -> bool {
        self.config.data_path.splices() && self.driver.splicer().is_ok()
    }

    /// Whether this exchange's body may take the splice path at all.
    pub(super) fn splice_allowed(&mut self, client: &Client) -> bool {
        self.splicing()
            && client
                .state
                .exchange()
                .is_some_and(|exchange| !exchange.request.head_only)
    }

    /// Arms the receive of an origin's response head: on the splice path it takes at most
    /// [`HEAD_READ_BYTES`], so that a long body stays in the kernel for the splice.
    pub(super) fn arm_response_head_read(&mut self, origin: ConnectionId) {
        if self.config.data_path.splices()
            && let Ok(splicer) = self.driver.splicer()
        {
            splicer.recv_at_most(origin, HEAD_READ_BYTES);
        } else {
            self.driver.recv(origin);
        }
    }

    /// True when the body's next part is to be spliced: planned at the head for a long
    /// `Content-Length` or a close-delimited body; for a chunked body, whenever the rest of
    /// the current chunk's data is at least the threshold (a copy for the store is kept
    /// only while the object can still fit).
    pub(super) fn plan_splice(&mut self, client: &mut Client) -> bool {
        let allowed = self.splice_allowed(client);
        let threshold = self.config.splice_threshold.max(1);
        let Some(progress) = client
            .state
            .exchange_mut()
            .and_then(|exchange| exchange.response.as_mut())
        else {
            return false;
        };
        match progress.splice {
            SplicePlan::Pending => return true,
            SplicePlan::Running => return false,
            SplicePlan::No => {}
        }
        if !allowed || progress.framing != ResponseFraming::Chunked {
            return false;
        }
        let pending = progress.decoder.pending_data();
        if pending < threshold {
            return false;
        }
        if progress
            .fill
            .as_ref()
            .is_some_and(|(fill, _)| !fill.fits(pending))
        {
            progress.fill = None;
        }
        progress.splice = SplicePlan::Pending;
        if !progress.dechunk {
            // The chunk's size line goes ahead of its spliced data (and its CRLF after,
            // in `finish_body_splice`); if the splice is refused, the copy path writes the
            // announced bytes without a size line of their own.
            let mut line = self.driver.take_vec();
            coldwire_http::write_chunk_header(&mut line, pending);
            self.driver.send(client.session.id, Chunk::Owned(line));
            progress.announced = pending;
        }
        true
    }

    /// Hands the next part of the body (see [`SplicePlan`]) to the driver's splice, with a
    /// tee'd copy when it is being stored; falls back to copying if the driver refuses.
    pub(super) fn start_body_splice(&mut self, client: &mut Client) -> Step {
        let client_id = client.session.id;
        let Some(exchange) = client.state.exchange() else {
            return Step::Keep;
        };
        let (Some(origin), Some(progress)) = (exchange.upstream.origin, exchange.response.as_ref())
        else {
            return Step::Keep;
        };
        let length = match progress.framing {
            ResponseFraming::Length(_) => progress.remaining,
            ResponseFraming::Chunked => progress.decoder.pending_data(),
            ResponseFraming::UntilClose => u64::MAX,
            ResponseFraming::Empty => 0,
        };
        let keep_copy = progress.fill.is_some();
        let framing = progress.framing;
        let started = self.splice_body_part(origin, client_id, framing, length, keep_copy);
        let Some(progress) = client
            .state
            .exchange_mut()
            .and_then(|exchange| exchange.response.as_mut())
        else {
            return Step::Keep;
        };
        match started {
            Ok(()) => {
                progress.splice = SplicePlan::Running;
                progress.splice_length = length;
                self.driver.cancel_timer(origin);
                // Nothing left to write: the driver finished the splice at once and its
                // `Sent` is queued for this turn, so there is no stalled write to watch
                // for (and no SIOCOUTQ to read for the progress mark). A running transfer,
                // bounded or not, counts in `queued_bytes`.
                if self.driver.queued_bytes(client_id) > 0 {
                    self.wait_for_client(client);
                }
            }
            Err(_) => {
                progress.splice = SplicePlan::No;
                let deadline = self.upstream_deadline();
                self.driver.set_timer(origin, deadline);
                self.driver.recv_eager(origin);
            }
        }
        Step::Keep
    }

    /// The driver spliced its part of the body: keep the tee'd copy, then finish (a
    /// `Content-Length` or close-delimited body) or read the chunked body's framing on.
    pub(super) fn finish_body_splice(
        &mut self,
        client: &mut Client,
        origin_id: ConnectionId,
    ) -> Step {
        let copy = self
            .driver
            .splicer()
            .ok()
            .and_then(|splicer| splicer.take_splice_copy(client.session.id));
        let Some(progress) = client
            .state
            .exchange_mut()
            .and_then(|exchange| exchange.response.as_mut())
        else {
            return Step::Close;
        };
        progress.splice = SplicePlan::No;
        let copied = copy.as_ref().map_or(0, |copy| copy.len() as u64);
        let stored = match (progress.fill.as_mut(), copy) {
            (Some((fill, _)), Some(copy)) => fill.push(Bytes::from(copy)),
            // A fill without its copy cannot be completed.
            (Some(_), None) => false,
            (None, _) => true,
        };
        if !stored {
            progress.fill = None;
        }
        match progress.framing {
            ResponseFraming::Chunked => {
                let skipped = progress.decoder.skip_data(progress.splice_length);
                progress.body_bytes += skipped;
                progress.announced = progress.announced.saturating_sub(skipped);
                if !progress.dechunk && progress.announced == 0 {
                    let mut end = self.driver.take_vec();
                    coldwire_http::write_chunk_end(&mut end);
                    self.driver.send(client.session.id, Chunk::Owned(end));
                }
                // The chunk's CRLF and the next size line come through user space; the
                // next long chunk is spliced again.
                client.session.enter(&mut self.driver, Phase::Idle);
                let deadline = self.upstream_deadline();
                self.driver.set_timer(origin_id, deadline);
                self.arm_response_head_read(origin_id);
                self.release_claim_of_dropped_fill(client);
                return Step::Keep;
            }
            ResponseFraming::UntilClose => {
                // The origin closed: the body is complete and the connection is done.
                // (Its length is known only when a copy was kept.)
                progress.body_bytes += copied;
                progress.upstream_keep_alive = false;
            }
            ResponseFraming::Length(_) | ResponseFraming::Empty => {
                progress.body_bytes += progress.remaining;
                progress.remaining = 0;
            }
        }
        let origin = self.take_origin(origin_id);
        self.finish_response(client, origin)
    }

    /// Splices a tunnel both ways (client → origin, then origin → client) when the splice
    /// path is on; both sides' queues must be empty.
    pub(super) fn splice_tunnel(
        &mut self,
        client: ConnectionId,
        origin: ConnectionId,
    ) -> TunnelSplice {
        if !self.config.data_path.splices() {
            return TunnelSplice::Copied;
        }
        let Ok(splicer) = self.driver.splicer() else {
            return TunnelSplice::Copied;
        };
        if splicer.splice(client, origin, u64::MAX, false).is_err() {
            return TunnelSplice::Copied;
        }
        match splicer.splice(origin, client, u64::MAX, false) {
            Ok(()) => TunnelSplice::Spliced,
            Err(_) => TunnelSplice::Broken,
        }
    }

    /// Bytes a spliced tunnel's two transfers have delivered so far (wrapping).
    pub(super) fn tunnel_spliced_bytes(
        &mut self,
        client: ConnectionId,
        origin: Option<ConnectionId>,
    ) -> u64 {
        // Only a driver that splices has spliced tunnels.
        let Ok(splicer) = self.driver.splicer() else {
            return 0;
        };
        let to_origin = origin.map_or(0, |origin| splicer.splice_delivered(origin));
        splicer.splice_delivered(client).wrapping_add(to_origin)
    }
}
