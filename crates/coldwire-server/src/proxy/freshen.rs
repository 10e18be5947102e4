//! What a final response head does to the store before it is passed on (RFC 9111 §4.3.4,
//! §4.3.5, §4.4): a `304` freshens the stored responses its validators select — and when
//! it answered the proxy's own revalidation without selecting the response revalidated
//! (another strong `ETag`), the request goes again without conditionals, since the stored
//! body is not the origin's; a `200` answering `HEAD` updates or stales the stored `GET`
//! responses; an unsafe method's non-error answer invalidates (`invalidate.rs`).
//!
//! Invariants: the store is changed here, once per response head, before the client sees
//! anything of the response; a refetch happens at most once per exchange and only for a
//! request without a body.

use coldwire_http::Status;
use coldwire_io::Driver;

use super::head::{UpstreamResponse, end_to_end};
use super::state::{Client, RequestBody};
use super::worker::{Step, Worker};

/// What the exchange does after [`Worker::final_head_arrived`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AfterHead {
    /// Pass the response on (or answer from the freshened store).
    Continue,
    /// Send the request again without the stored validators (see the module docs).
    Refetch,
}

impl<D: Driver> Worker<D> {
    /// A final response head arrived for the client's exchange: freshen, stale or
    /// invalidate stored responses as it says.
    pub(super) fn final_head_arrived(
        &mut self,
        client: &mut Client,
        response: &UpstreamResponse,
    ) -> AfterHead {
        let Some(store) = self.store.clone() else {
            return AfterHead::Continue;
        };
        let Some(exchange) = client.exchange.as_mut() else {
            return AfterHead::Continue;
        };
        if let Some(key) = exchange.cache.invalidate.take() {
            if (200..400).contains(&response.status) {
                super::invalidate::after_unsafe_method(&store, &key, &response.fields);
            }
            return AfterHead::Continue;
        }
        let Some(key) = exchange.cache.key.as_deref() else {
            return AfterHead::Continue;
        };
        let times = (exchange.request_time, self.wall_clock);
        match response.status {
            304 => {
                let update = end_to_end(&response.fields);
                let asked = exchange.cache.stored.as_ref();
                let freshened = store.freshen_with_304(key, asked, &update, times);
                if asked.is_none() {
                    // The client's own conditional request: passed on as it came.
                    return AfterHead::Continue;
                }
                match freshened.asked {
                    Some(refreshed) => {
                        exchange.cache.stored = Some(refreshed);
                        exchange.cache.freshened = true;
                        AfterHead::Continue
                    }
                    None if !exchange.cache.refetch
                        && matches!(exchange.body, RequestBody::Done)
                        && exchange.address.is_some() =>
                    {
                        exchange.cache.refetch = true;
                        AfterHead::Refetch
                    }
                    // Already refetched once (an origin that answers an unconditional
                    // request with 304): pass it on.
                    None => AfterHead::Continue,
                }
            }
            200 if exchange.head_only => {
                let request = &exchange.cache.request_fields;
                let update = end_to_end(&response.fields);
                store.freshen_with_head(
                    key,
                    |name: &str| request.values(name).collect::<Vec<_>>(),
                    &response.fields,
                    &update,
                    times,
                );
                AfterHead::Continue
            }
            _ => AfterHead::Continue,
        }
    }

    /// The revalidation's `304` did not select the stored response: send the request again
    /// without the stored validators, on a fresh connection (the origin connection has been
    /// closed by the caller), and serve what the origin answers.
    pub(super) fn refetch_unconditionally(&mut self, client: &mut Client) -> Step {
        let Some(exchange) = client.exchange.as_mut() else {
            return Step::Close;
        };
        exchange.origin = None;
        exchange.cache.stored = None;
        exchange.request = without_validators(&exchange.request);
        exchange.retried = true;
        exchange.interim_skip = 0;
        let Some(address) = exchange.address else {
            return self.fail_before_response(client, Status::BAD_GATEWAY);
        };
        self.open_upstream(client, address);
        if client.exchange.is_none() {
            return self.flush_client(client);
        }
        Step::Keep
    }
}

/// The upstream request head without `If-None-Match` / `If-Modified-Since` lines (a
/// revalidation's head carries only the proxy's own; the client's were never forwarded).
fn without_validators(request: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(request.len());
    for line in request.split_inclusive(|&byte| byte == b'\n') {
        let name = line.split(|&byte| byte == b':').next().unwrap_or_default();
        if name.eq_ignore_ascii_case(b"if-none-match")
            || name.eq_ignore_ascii_case(b"if-modified-since")
        {
            continue;
        }
        out.extend_from_slice(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refetch_drops_only_the_validators() {
        let request = b"GET /a HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"a\"\r\n\
                        if-modified-since: Mon, 02 Nov 2026 00:00:00 GMT\r\n\
                        Accept: */*\r\nVia: 1.1 coldwire\r\n\r\n";
        assert_eq!(
            without_validators(request),
            b"GET /a HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nVia: 1.1 coldwire\r\n\r\n"
        );
    }
}
