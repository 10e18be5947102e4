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

use coldwire_io::Driver;

use super::head::{UpstreamResponse, end_to_end};
use super::state::Client;
use super::worker::Worker;

/// What the exchange does after [`Worker::final_head_arrived`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AfterHead {
    /// Pass the response on (or answer from the freshened store).
    Continue,
    /// Send the request again without the stored validators (see the module docs;
    /// `failure.rs` does it).
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
        let Some(exchange) = client.state.exchange_mut() else {
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
        let times = (exchange.upstream.request_time, self.wall_clock);
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
                        && !exchange.request.body_pending()
                        && exchange.upstream.address.is_some() =>
                    {
                        exchange.cache.refetch = true;
                        AfterHead::Refetch
                    }
                    // Already refetched once (an origin that answers an unconditional
                    // request with 304): pass it on.
                    None => AfterHead::Continue,
                }
            }
            200 if exchange.request.head_only => {
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
}
