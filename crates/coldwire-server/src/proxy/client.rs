//! The downstream side: a client's bytes become requests (parsed with the codec's limits,
//! pipelined requests answered strictly in order, one exchange at a time), each routed to
//! the cache, an origin or a tunnel; errors become 4xx/5xx answers; after each response the
//! connection goes back to idle, answers the next pipelined request, or closes.

use std::borrow::Cow;

use coldwire_http::{
    BodyFraming, HttpError, Method, Parsed, RequestHead, Status, Target, Version, parse_request,
    parse_target,
};
use coldwire_io::{Buffer, Driver, Flush};

use super::cache_fill::CacheDecision;
use super::collapse::POLL;
use super::config::Mode;
use super::forward::BodyStep;
use super::head::{connection_names_framing, via_hops};
use super::policy::TextAnswer;
use super::purge::is_purge;
use super::state::{Client, RequestBody};
use super::worker::{Step, Worker};
use crate::origin::error_response;
use crate::output::Output;
use crate::session::{Phase, append_input};

/// What a parsed request led to.
pub(super) enum Routed {
    /// Answered at once (cache hit or error); go on with the next pipelined request.
    Answered,
    /// Answered, and the connection closes afterwards.
    AnsweredThenClose,
    /// Forwarded: an exchange (or tunnel) is in flight.
    InFlight,
    /// Waits for another fetch of its key; its head stays in the input (collapsed
    /// forwarding re-routes it).
    Parked,
}

/// Where a request goes.
pub(super) struct Destination<'a> {
    /// Host to resolve.
    pub host: &'a str,
    /// Port.
    pub port: u16,
    /// `Host` header value.
    pub authority: Cow<'a, str>,
    /// Origin-form target.
    pub path_and_query: Cow<'a, str>,
}

/// Splits `host[:port]` (IPv6 literals in brackets), with `default` when no port.
pub(super) fn split_authority(authority: &str, default: u16) -> Option<(&str, u16)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(port) => port.parse().ok()?,
            None if after.is_empty() => default,
            None => return None,
        };
        return Some((host, port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host, port.parse().ok()?)),
        None => Some((authority, default)),
    }
    .filter(|(host, _)| !host.is_empty())
}

impl<D: Driver> Worker<D> {
    pub(super) fn on_client_data(&mut self, client: &mut Client, buffer: Buffer) -> Step {
        if client.session.phase == Phase::Lingering {
            self.driver.recycle(buffer);
            self.driver.recv(client.session.id);
            return Step::Keep;
        }
        if client.tunnel.is_some() {
            return self.tunnel_from_client(client, buffer);
        }
        let may_complete = self.append_input(client, buffer);
        if client.exchange.is_some() {
            if let BodyStep::Aborted = self.forward_request_body(client) {
                return self.flush_client(client);
            }
            return Step::Keep;
        }
        let session = &client.session;
        if !may_complete && session.phase == Phase::Head {
            let length = session.input.as_ref().map_or(0, Buffer::filled_len);
            if length > self.config.runtime.limits.max_head_bytes {
                return self.reject(client, Status::REQUEST_HEADER_FIELDS_TOO_LARGE);
            }
            self.driver.recv(client.session.id);
            return Step::Keep;
        }
        self.process(client)
    }

    /// Appends received bytes to the client's input; true when they hold a line end (only
    /// then can a head have completed).
    fn append_input(&mut self, client: &mut Client, buffer: Buffer) -> bool {
        append_input(&mut self.driver, &mut client.session.input, buffer)
    }

    /// Handles every complete request in the input until one goes forward, then flushes.
    pub(super) fn process(&mut self, client: &mut Client) -> Step {
        let mut output = Output::new(client.session.id);
        let mut rejected = None;
        while client.exchange.is_none() && client.tunnel.is_none() {
            let Some(input) = client.session.input.take() else {
                break;
            };
            if input.is_empty() {
                self.driver.recycle(input);
                break;
            }
            let parsed = parse_request(input.filled(), &self.config.runtime.limits);
            let routed = match parsed {
                Ok(Parsed::Complete { head, head_len }) => {
                    let routed = self.route(client, &head, &mut output);
                    let mut input = input;
                    if !matches!(routed, Ok(Routed::Parked)) {
                        input.consume(head_len);
                    }
                    client.session.input = Some(input);
                    routed
                }
                Ok(Parsed::Partial) => {
                    client.session.input = Some(input);
                    if client.session.phase != Phase::Head {
                        client.session.enter(&mut self.driver, Phase::Head);
                        let due = self.driver.now() + self.config.runtime.header_timeout;
                        client.session.set_deadline(&mut self.driver, due);
                    }
                    break;
                }
                Err(error) => {
                    client.session.input = Some(input);
                    rejected = Some(error.status());
                    break;
                }
            };
            match routed {
                Ok(Routed::Answered) => {}
                Ok(Routed::AnsweredThenClose) => {
                    client.session.close_after_write = true;
                    client.session.linger = true;
                    break;
                }
                Ok(Routed::Parked) => break,
                Ok(Routed::InFlight) => {
                    // Body bytes that came with the head go now that the input is back.
                    self.forward_request_body(client);
                    break;
                }
                Err(status) => {
                    rejected = Some(status);
                    break;
                }
            }
        }
        if client.session.input.as_ref().is_some_and(Buffer::is_empty)
            && let Some(input) = client.session.input.take()
        {
            self.driver.recycle(input);
        }
        output.finish(&mut self.driver);
        if let Some(status) = rejected {
            return self.reject(client, status);
        }
        if client.exchange.is_some() {
            // Whatever hits preceded the forwarded request go out now; the exchange's
            // response follows them in order.
            return match self.driver.flush(client.session.id) {
                Flush::Failed(_) => Step::Close,
                _ => Step::Keep,
            };
        }
        self.flush_client(client)
    }

    /// Routes one parsed request. `rest` is what follows its head in the input.
    fn route(
        &mut self,
        client: &mut Client,
        head: &RequestHead<'_>,
        output: &mut Output,
    ) -> Result<Routed, Status> {
        if client.collapsed_wait.is_none() {
            // A parked request is routed again on every poll: count it once.
            self.http.requests += 1;
        }
        self.remember_request_line(client, head);
        if client.denied {
            return Ok(self.answer_error(client, head.version(), Status::FORBIDDEN, false, output));
        }
        if via_hops(head, &self.config.name) > 0 {
            // This request came through this proxy before: a forwarding loop.
            return Ok(self.answer_error(client, head.version(), Status::FORBIDDEN, false, output));
        }
        if connection_names_framing(head) {
            // Forwarding without the named field would leave the body unframed upstream.
            return Err(Status::BAD_REQUEST);
        }
        let target = parse_target(head.method(), head.target()).map_err(status_of)?;
        // The configuration outlives the request; a clone of the Arc frees `self`.
        let config = self.config.clone();
        let destination = match (&target, &config.mode) {
            (Target::Authority(authority), Mode::Forward) => {
                let (host, port) = split_authority(authority, 443).ok_or(Status::BAD_REQUEST)?;
                if !config.connect_ports.allows(port) {
                    let text = Self::connect_port_refusal(port);
                    let answer = TextAnswer {
                        version: head.version(),
                        status: Status::FORBIDDEN,
                        keep_alive: false,
                        text: &text,
                        cache: None,
                    };
                    return Ok(self.answer_text(client, &answer, output));
                }
                let host = host.to_owned();
                self.queue_pending(client, output);
                self.start_tunnel(client, host, port);
                return Ok(Routed::InFlight);
            }
            (
                Target::Absolute {
                    scheme, authority, ..
                },
                Mode::Forward,
            ) => {
                if !scheme.eq_ignore_ascii_case("http") {
                    return Err(Status::BAD_REQUEST);
                }
                let (host, port) = split_authority(authority, 80).ok_or(Status::BAD_REQUEST)?;
                Destination {
                    host,
                    port,
                    authority: Cow::Borrowed(authority),
                    path_and_query: path_and_query(head.target(), authority),
                }
            }
            (Target::Origin { .. } | Target::Asterisk, Mode::Reverse { host, port }) => {
                let authority = match head
                    .host()
                    .and_then(|value| std::str::from_utf8(value).ok())
                    .filter(|value| !value.is_empty())
                {
                    Some(received) => Cow::Borrowed(received),
                    // An HTTP/1.0 request without Host: the origin's own authority.
                    None if *port == 80 => Cow::Borrowed(host.as_str()),
                    None => Cow::Owned(format!("{host}:{port}")),
                };
                Destination {
                    host,
                    port: *port,
                    authority,
                    path_and_query: Cow::Borrowed(head.target()),
                }
            }
            (Target::Absolute { authority, .. }, Mode::Reverse { host, port }) => Destination {
                host,
                port: *port,
                authority: Cow::Borrowed(authority),
                path_and_query: path_and_query(head.target(), authority),
            },
            (Target::Authority(_), Mode::Reverse { .. }) => return Err(Status::METHOD_NOT_ALLOWED),
            // An origin-form request to a forward proxy: it is not a web server.
            (Target::Origin { .. } | Target::Asterisk, Mode::Forward) => {
                return Err(Status::BAD_REQUEST);
            }
        };
        let body = match head.body_framing() {
            BodyFraming::None | BodyFraming::Length(0) => RequestBody::Done,
            BodyFraming::Length(length) => RequestBody::Length(length),
            BodyFraming::Chunked => RequestBody::Chunked(Box::default()),
        };
        if is_purge(head) {
            return Ok(self.purge(client, head, &destination, output));
        }
        let cache = match self.try_cache(client, head, &destination, output) {
            CacheDecision::Wait => return Ok(Routed::Parked),
            CacheDecision::Answered(answered) => {
                client.collapsed_wait = None;
                return Ok(answered);
            }
            CacheDecision::Forward(cache) => {
                client.collapsed_wait = None;
                cache
            }
        };
        if head.expects_continue() {
            // Say continue at once: Expect is not forwarded.
            output
                .bytes(&mut self.driver)
                .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        self.queue_pending(client, output);
        self.start_exchange(client, head, &destination, body, cache);
        Ok(Routed::InFlight)
    }

    /// Queues the answers assembled so far, so that what a forwarded request produces
    /// (its response or an error) follows them in order.
    fn queue_pending(&mut self, client: &Client, output: &mut Output) {
        let pending = std::mem::replace(output, Output::new(client.session.id));
        pending.finish(&mut self.driver);
    }

    /// Queues an error answer for the current request.
    pub(super) fn answer_error(
        &mut self,
        client: &mut Client,
        version: Version,
        status: Status,
        keep_alive: bool,
        output: &mut Output,
    ) -> Routed {
        let answer = error_response(
            status,
            version,
            keep_alive,
            false,
            self.date.bytes(),
            &mut self.driver,
            output,
        );
        self.http.count_response(answer.status);
        self.http.body_bytes += answer.body_bytes;
        self.log_answer(client, answer.status, answer.body_bytes, None);
        if keep_alive {
            Routed::Answered
        } else {
            Routed::AnsweredThenClose
        }
    }

    /// Answers a request that could not be handled, then closes (lingering).
    pub(super) fn reject(&mut self, client: &mut Client, status: Status) -> Step {
        let mut output = Output::new(client.session.id);
        self.answer_error(client, Version::Http11, status, false, &mut output);
        output.finish(&mut self.driver);
        self.http.rejected += 1;
        client.session.close_after_write = true;
        client.session.linger = true;
        self.flush_client(client)
    }

    /// Flushes the client's output and decides what comes next.
    pub(super) fn flush_client(&mut self, client: &mut Client) -> Step {
        match self.driver.flush(client.session.id) {
            Flush::Done => self.after_output(client),
            Flush::Pending => {
                self.wait_for_client(client);
                Step::Keep
            }
            Flush::Failed(_) => Step::Close,
        }
    }

    /// Output waits for the client: the stalled-write deadline applies (progress measured
    /// as bytes the client has not received yet).
    pub(super) fn wait_for_client(&mut self, client: &mut Client) {
        client.session.enter(&mut self.driver, Phase::Writing);
        client.session.progress_mark = self.driver.unsent_bytes(client.session.id);
        let due = self.driver.now() + self.write_timeout();
        client.session.set_deadline(&mut self.driver, due);
    }

    /// Everything queued for the client is written.
    pub(super) fn after_output(&mut self, client: &mut Client) -> Step {
        if client.session.close_after_write {
            if !client.session.linger {
                return Step::Close;
            }
            if let Some(input) = client.session.input.take() {
                self.driver.recycle(input);
            }
            self.driver.shutdown_write(client.session.id);
            client.session.enter(&mut self.driver, Phase::Lingering);
            let due = self.driver.now() + self.config.runtime.linger_timeout;
            client.session.set_deadline(&mut self.driver, due);
            self.driver.recv(client.session.id);
            return Step::Keep;
        }
        if client.exchange.is_some() || client.tunnel.is_some() {
            return Step::Keep;
        }
        if client.collapsed_wait.is_some() {
            // Earlier answers are out; the waiting request polls again (a write deadline
            // may have replaced its poll while they were being written).
            client.session.enter(&mut self.driver, Phase::Idle);
            let due = self.driver.now() + POLL;
            client.session.set_deadline(&mut self.driver, due);
            return Step::Keep;
        }
        let complete = client.session.input.as_ref().is_some_and(|input| {
            matches!(
                parse_request(input.filled(), &self.config.runtime.limits),
                Ok(Parsed::Complete { .. }) | Err(_)
            )
        });
        if complete {
            return self.process(client);
        }
        if client.session.input.is_none() {
            if self.drain_deadline.is_some() {
                return Step::Close;
            }
            client.session.enter(&mut self.driver, Phase::Idle);
            let due = self.idle_deadline();
            client.session.set_deadline(&mut self.driver, due);
        }
        self.driver.recv(client.session.id);
        Step::Keep
    }

    pub(super) fn on_client_sent(&mut self, client: &mut Client) -> Step {
        if client.tunnel.is_some() {
            return self.tunnel_client_drained(client);
        }
        if client.exchange.is_some() {
            return self.client_drained(client);
        }
        self.after_output(client)
    }
}

/// The origin-form target of an absolute-form request: what follows the authority, without
/// a fragment; an empty path becomes `/` and keeps its query (`http://h?q` → `/?q`, RFC
/// 9112 §3.2.1), the only case that needs a new string.
fn path_and_query<'a>(target: &'a str, authority: &str) -> Cow<'a, str> {
    let after_scheme = target.find("//").map_or(0, |at| at + 2);
    let start = after_scheme + authority.len();
    let rest = target.get(start..).unwrap_or("/");
    let rest = rest.split('#').next().unwrap_or("");
    if rest.starts_with('/') {
        Cow::Borrowed(rest)
    } else if rest.starts_with('?') {
        Cow::Owned(format!("/{rest}"))
    } else {
        Cow::Borrowed("/")
    }
}

/// True for methods a retry may repeat (RFC 9110 §9.2.2).
pub(super) fn is_idempotent(method: Method) -> bool {
    matches!(
        method,
        Method::Get | Method::Head | Method::Options | Method::Trace | Method::Put | Method::Delete
    )
}

/// Maps codec errors from a request to the answer (always 4xx/5xx).
pub(super) fn status_of(error: HttpError) -> Status {
    error.status()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc9112_section_3_2_1_absolute_form_to_origin_form() {
        assert_eq!(path_and_query("http://h:1/a/b?c#f", "h:1"), "/a/b?c");
        assert_eq!(path_and_query("http://h:1?q=1", "h:1"), "/?q=1");
        assert_eq!(path_and_query("http://h:1", "h:1"), "/");
        assert_eq!(path_and_query("http://h:1#frag", "h:1"), "/");
    }

    #[test]
    fn authorities_split_with_defaults() {
        assert_eq!(
            split_authority("example.com", 80),
            Some(("example.com", 80))
        );
        assert_eq!(
            split_authority("example.com:8080", 80),
            Some(("example.com", 8080))
        );
        assert_eq!(split_authority("[::1]:99", 80), Some(("::1", 99)));
        assert_eq!(split_authority("[::1]", 80), Some(("::1", 80)));
        assert_eq!(split_authority(":80", 80), None);
        assert_eq!(split_authority("host:99999", 80), None);
    }
}
