//! Phase 7, body (copied): the response body streams to the client as it arrives —
//! `Content-Length`; chunked, decoded strictly and written again in canonical form (no
//! chunk extensions, trailer fields only those allowed there and only to a client that
//! sent `TE: trailers`; decoded and close-delimited for an HTTP/1.0 client); or
//! close-delimited (re-chunked for a keep-alive HTTP/1.1 client) — with a copy collected
//! for the store while it streams (no store-then-forward delay). Parts of it may take the
//! splice path instead (`splice.rs`, planned here after each piece).
//!
//! Back-pressure: the origin is read again only once the client has taken what was sent
//! ([`Worker::client_drained`]); meanwhile the client's write timeout rules, not the
//! origin's.
//!
//! Invariants: a body that outgrows what the store takes drops its fill and, if it led a
//! collapsed fetch, releases its followers at once; surplus bytes after the body's end
//! make the origin connection unusable again; a chunked body that turns out malformed
//! closes both connections at once (nothing stored, the client sees a truncated response).

use bytes::Bytes;
use coldwire_http::ResponseFraming;
use coldwire_io::{Chunk, Driver, Flush};

use super::exchange::SplicePlan;
use super::head::write_last_chunk_with_trailers;
use super::state::{Client, Origin};
use super::worker::{Step, Worker};
use crate::session::Phase;

impl<D: Driver> Worker<D> {
    /// Forwards body bytes; true once the body is complete.
    pub(super) fn feed_body(&mut self, client: &mut Client, bytes: &[u8]) -> bool {
        let client_id = client.session.id;
        let Some(exchange) = client.state.exchange_mut() else {
            return true;
        };
        let accepts_trailers = exchange.request.accepts_trailers;
        let Some(progress) = exchange.response.as_mut() else {
            return true;
        };
        let (body, complete, surplus) = match progress.framing {
            ResponseFraming::Empty => (&bytes[..0], true, !bytes.is_empty()),
            ResponseFraming::Length(_) => {
                let take = bytes
                    .len()
                    .min(usize::try_from(progress.remaining).unwrap_or(usize::MAX));
                progress.remaining -= take as u64;
                (&bytes[..take], progress.remaining == 0, take < bytes.len())
            }
            ResponseFraming::Chunked => {
                let mut fill = progress.fill.take();
                let mut encoded = self.driver.take_vec();
                let mut announced = progress.announced;
                let mut decoded = 0u64;
                let dechunk = progress.dechunk;
                let result = progress.decoder.decode(bytes, |data| {
                    decoded += data.len() as u64;
                    if let Some((collected, _)) = fill.as_mut()
                        && !collected.push(Bytes::copy_from_slice(data))
                    {
                        fill = None;
                    }
                    if dechunk {
                        encoded.extend_from_slice(data);
                        return;
                    }
                    let raw = usize::try_from(announced).map_or(data.len(), |a| a.min(data.len()));
                    if raw > 0 {
                        encoded.extend_from_slice(&data[..raw]);
                        announced -= raw as u64;
                        if announced == 0 {
                            coldwire_http::write_chunk_end(&mut encoded);
                        }
                    }
                    coldwire_http::write_chunk(&mut encoded, &data[raw..]);
                });
                progress.fill = fill;
                progress.announced = announced;
                match result {
                    Ok(step) => {
                        if step.done && !dechunk {
                            write_last_chunk_with_trailers(
                                &mut encoded,
                                &progress.decoder,
                                accepts_trailers,
                            );
                        }
                        progress.body_bytes += decoded;
                        if !encoded.is_empty() {
                            self.driver.send(client_id, Chunk::Owned(encoded));
                        }
                        (&bytes[..0], step.done, step.consumed < bytes.len())
                    }
                    Err(_) => {
                        // Garbage from the origin mid-body: end it as truncated, now.
                        progress.fill = None;
                        progress.upstream_keep_alive = false;
                        progress.framing = ResponseFraming::Length(u64::MAX);
                        progress.corrupt = true;
                        (&bytes[..0], false, true)
                    }
                }
            }
            ResponseFraming::UntilClose => (bytes, false, false),
        };
        if surplus {
            progress.upstream_keep_alive = false;
        }
        if !body.is_empty() {
            progress.body_bytes += body.len() as u64;
            if progress.rechunk {
                let mut line = self.driver.take_vec();
                coldwire_http::write_chunk_header(&mut line, body.len() as u64);
                self.driver.send(client_id, Chunk::Owned(line));
            }
            match progress.fill.as_mut() {
                Some((fill, _)) => {
                    let shared = Bytes::copy_from_slice(body);
                    if !fill.push(shared.clone()) {
                        progress.fill = None;
                    }
                    self.driver.send(client_id, Chunk::Shared(shared));
                }
                _ => {
                    let mut copy = self.driver.take_vec();
                    copy.extend_from_slice(body);
                    self.driver.send(client_id, Chunk::Owned(copy));
                }
            }
            if progress.rechunk {
                let mut end = self.driver.take_vec();
                end.extend_from_slice(b"\r\n");
                self.driver.send(client_id, Chunk::Owned(end));
            }
        }
        complete
    }

    /// After body bytes were queued for the client: finish a complete response, else
    /// write what was queued and read the origin again — at once when the client took it,
    /// on its `Sent` otherwise — or start the planned splice.
    pub(super) fn after_body_bytes(
        &mut self,
        client: &mut Client,
        origin: Origin,
        complete: bool,
    ) -> Step {
        if complete {
            return self.finish_response(client, Some(origin));
        }
        let corrupt = client
            .state
            .exchange()
            .and_then(|exchange| exchange.response.as_ref())
            .is_some_and(|progress| progress.corrupt);
        if corrupt {
            // Not a chunked body: cut the client off now (it sees a truncated response,
            // or none if the head had not gone out) instead of waiting for the origin to
            // close or time out. What was queued goes out first, if the socket takes it.
            let _ = self.driver.flush(client.session.id);
            let error = std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "invalid chunked body from the origin",
            );
            return self.exchange_origin_closed(client, origin, Some(error));
        }
        let id = origin.id;
        self.put_origin(origin);
        let splice = self.plan_splice(client);
        self.release_claim_of_dropped_fill(client);
        let flushed = if splice {
            // The head and the bytes that came with it leave with the spliced data.
            self.driver.flush_more(client.session.id)
        } else {
            self.driver.flush(client.session.id)
        };
        match flushed {
            Flush::Done if splice => self.start_body_splice(client),
            Flush::Done => {
                let deadline = self.upstream_deadline();
                self.driver.set_timer(id, deadline);
                self.driver.recv_eager(id);
                Step::Keep
            }
            Flush::Pending => {
                if let Some(mut origin) = self.take_origin(id) {
                    origin.waiting_for_client = true;
                    // The client is slow, not the origin: the client's write timeout rules.
                    self.driver.cancel_timer(id);
                    self.put_origin(origin);
                }
                self.wait_for_client(client);
                Step::Keep
            }
            Flush::Failed(_) => Step::Close,
        }
    }

    /// The client took everything sent: read the origin again (or start or finish the
    /// body's splice).
    pub(super) fn client_drained(&mut self, client: &mut Client) -> Step {
        let Some(exchange) = client.state.exchange() else {
            return Step::Keep;
        };
        let Some(origin_id) = exchange.upstream.origin else {
            return Step::Keep;
        };
        let plan = exchange
            .response
            .as_ref()
            .map_or(SplicePlan::No, |progress| progress.splice);
        match plan {
            SplicePlan::Pending => return self.start_body_splice(client),
            SplicePlan::Running => return self.finish_body_splice(client, origin_id),
            SplicePlan::No => {}
        }
        if exchange.request.body_pending() {
            // Output (a `100 Continue`, an early answer) is out; the body still comes.
            self.await_request_body(client);
        } else {
            client.session.enter(&mut self.driver, Phase::Idle);
        }
        if let Some(mut origin) = self.take_origin(origin_id) {
            if origin.waiting_for_client {
                origin.waiting_for_client = false;
                let deadline = self.upstream_deadline();
                self.driver.set_timer(origin.id, deadline);
                self.driver.recv_eager(origin.id);
            }
            self.put_origin(origin);
        }
        Step::Keep
    }

    /// The fill was dropped mid-body (the object outgrew what the store takes, or its
    /// kept copy was lost): the requests collapsed behind this fetch go to the origin now,
    /// and later misses of the key for a while (hit-for-miss), instead of waiting for a
    /// body that will not be stored to end.
    pub(super) fn release_claim_of_dropped_fill(&self, client: &mut Client) {
        let Some(exchange) = client.state.exchange_mut() else {
            return;
        };
        let Some(progress) = exchange.response.as_ref() else {
            return;
        };
        if progress.fill.is_none()
            && let Some(claim) = exchange.cache.claim.take()
        {
            self.leader_not_stored(claim, progress.status, None);
        }
    }
}
