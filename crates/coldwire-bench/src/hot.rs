//! Hot connections: issuing a request on an idle connection (or a new one), reading its
//! response, recording it, and deciding what the connection does next — carry the next
//! request, wait idle, or close (per `--requests-per-connection`, `Connection: close`, or an
//! error). Every request ends exactly once: as a recorded response or a counted error.

use std::time::Instant;

use coldwire_io::{Chunk, Completion, ConnectionId, Driver, Flush};

use crate::engine::{Engine, Hot, Pending, Request, Slot};
use crate::recorder::ErrorKind;
use crate::response::{ReadOutcome, ResponseReader};

impl<D: Driver> Engine<D> {
    fn hot_mut(&mut self, id: ConnectionId) -> Option<&mut Hot> {
        match self.slots.get_mut(id.index()) {
            Some(Slot::Hot(hot)) if hot.id == id => Some(hot),
            _ => None,
        }
    }

    /// Issues one request intended at `intended`: on an idle connection to its endpoint, a
    /// new connection, or (all `--connections` busy) the backlog.
    pub(crate) fn issue(&mut self, intended: Instant, measured: bool) {
        let request = self.workload.next_request(intended, &mut self.random);
        let pending = Pending {
            intended,
            request,
            measured,
            retried: false,
        };
        let endpoint = request.endpoint;
        while let Some(id) = self.idle[endpoint].pop() {
            if self.hot_mut(id).is_some_and(|hot| hot.idle) {
                self.send_request(id, pending);
                return;
            }
        }
        if self.hot_open >= self.config.connections && !self.close_one_idle_elsewhere(endpoint) {
            self.backlog.push_back(pending);
            return;
        }
        self.open_and_send(pending);
    }

    /// With several endpoints, an idle connection to another one may give its place.
    fn close_one_idle_elsewhere(&mut self, endpoint: usize) -> bool {
        for other in 0..self.idle.len() {
            if other == endpoint {
                continue;
            }
            while let Some(id) = self.idle[other].pop() {
                if self.hot_mut(id).is_some_and(|hot| hot.idle) {
                    self.close_hot(id);
                    return true;
                }
            }
        }
        false
    }

    fn open_and_send(&mut self, pending: Pending) {
        let measured = pending.measured;
        let endpoint = pending.request.endpoint;
        let address = self.workload.endpoints()[endpoint];
        let tls = match self.tls.as_ref().and_then(|tls| tls.connection(address)) {
            Some(Ok(connection)) => Some(Box::new(connection)),
            Some(Err(error)) => {
                if measured {
                    self.count_error_with(ErrorKind::Tls, None, Some(&error.to_string()));
                }
                return;
            }
            None => None,
        };
        match self.driver.connect(address) {
            Ok(id) => {
                self.hot_open += 1;
                if measured {
                    self.recorder.connections_opened += 1;
                }
                let now = Instant::now();
                *self.slot_mut(id) = Slot::Hot(Box::new(Hot {
                    id,
                    endpoint,
                    connected: false,
                    opened_at: now,
                    served: 0,
                    request: None,
                    reader: ResponseReader::new(),
                    timer_armed: false,
                    idle: false,
                    resting: false,
                    tls,
                }));
                self.send_request(id, pending);
            }
            Err(error) => {
                if measured {
                    let kind = match error.raw_os_error() {
                        Some(libc::EMFILE | libc::ENFILE) => ErrorKind::NoDescriptor,
                        None => ErrorKind::NoDescriptor,
                        _ => ErrorKind::Connect,
                    };
                    self.count_error_with(kind, error.raw_os_error(), None);
                }
            }
        }
    }

    fn send_request(&mut self, id: ConnectionId, pending: Pending) {
        let Pending {
            intended,
            request,
            measured,
            retried,
        } = pending;
        let limit = self.config.requests_per_connection;
        let timeout = self.config.timeout;
        let Some(Slot::Hot(hot)) = self.slots.get_mut(id.index()) else {
            return;
        };
        let last = limit != 0 && hot.served + 1 >= limit;
        let bytes = self.workload.request_bytes(request, last);
        let sent = Instant::now();
        hot.request = Some(Request {
            intended,
            sent,
            measured,
            last,
            request,
            retried,
        });
        hot.idle = false;
        hot.reader.reset_for(self.head_requests);
        let arm_timer = !hot.timer_armed;
        hot.timer_armed = true;
        self.in_flight += 1;
        if measured {
            self.recorder.sent += 1;
        }
        let is_tls = hot.tls.is_some();
        if is_tls {
            if let Err(failure) = self.tls_send(id, &bytes) {
                self.fail_tls(id, failure);
                return;
            }
        } else {
            self.driver.send(id, Chunk::Shared(bytes));
            if let Flush::Failed(error) = self.driver.flush(id) {
                let kind = self.socket_error_kind(id, &error);
                self.fail_hot_with(id, kind, error.raw_os_error());
                return;
            }
        }
        self.driver.recv(id);
        if arm_timer {
            self.driver.set_timer(id, sent + timeout);
        }
    }

    pub(crate) fn handle_hot(&mut self, id: ConnectionId, completion: Completion) {
        match completion {
            Completion::Connected { .. } => {
                if let Some(hot) = self.hot_mut(id) {
                    hot.connected = true;
                }
            }
            Completion::Received { buffer, .. }
                if self.hot_mut(id).is_some_and(|hot| hot.tls.is_some()) =>
            {
                let plain = self.tls_receive(id, buffer.filled());
                self.driver.recycle(buffer);
                match plain {
                    Err(failure) => self.fail_tls(id, failure),
                    Ok(plain) => {
                        let outcome = match self.hot_mut(id) {
                            Some(hot) if hot.request.is_some() => hot.reader.feed(&plain),
                            // Session tickets and other TLS housekeeping on an idle
                            // (or resting) connection: keep listening.
                            Some(_) if plain.is_empty() => ReadOutcome::NeedMore,
                            _ => ReadOutcome::Malformed("unsolicited bytes"),
                        };
                        self.on_read(id, outcome);
                    }
                }
            }
            Completion::Received { buffer, .. } => {
                let outcome = match self.hot_mut(id) {
                    Some(hot) if hot.request.is_some() => hot.reader.feed(buffer.filled()),
                    // Bytes nobody asked for on an idle connection: it cannot be trusted.
                    _ => ReadOutcome::Malformed("unsolicited bytes"),
                };
                self.driver.recycle(buffer);
                self.on_read(id, outcome);
            }
            Completion::PeerClosed { .. } => {
                let outcome = match self.hot_mut(id) {
                    Some(hot) if hot.request.is_some() => hot.reader.end_of_stream(),
                    _ => None,
                };
                match outcome {
                    Some(outcome) => self.on_read(id, outcome),
                    None => self.fail_hot(id, ErrorKind::Closed),
                }
            }
            Completion::Failed { error, .. } => {
                let kind = self.socket_error_kind(id, &error);
                self.fail_hot_with(id, kind, error.raw_os_error());
            }
            Completion::TimerExpired { .. } => self.hot_timer(id),
            Completion::Sent { .. } | Completion::Accepted { .. } | Completion::Woken => {}
        }
    }

    /// A socket error's kind: `connect` before the connection was established (a send
    /// queued on a connecting socket fails with the connect's errno), else by its errno.
    pub(crate) fn socket_error_kind(
        &mut self,
        id: ConnectionId,
        error: &std::io::Error,
    ) -> ErrorKind {
        if self.hot_mut(id).is_some_and(|hot| hot.connected) {
            ErrorKind::of_io_error(error)
        } else {
            ErrorKind::Connect
        }
    }

    fn on_read(&mut self, id: ConnectionId, outcome: ReadOutcome) {
        match outcome {
            ReadOutcome::NeedMore => self.driver.recv(id),
            ReadOutcome::Malformed(_) => self.fail_hot(id, ErrorKind::BadResponse),
            ReadOutcome::Complete { status, keep_alive } => {
                let now = self.now;
                let in_window = self.in_window(now);
                let Some(hot) = self.hot_mut(id) else {
                    return;
                };
                let Some(request) = hot.request.take() else {
                    return;
                };
                hot.served += 1;
                let bytes = hot.reader.received();
                let reusable = keep_alive && !request.last;
                self.in_flight -= 1;
                if in_window {
                    self.recorder.completed_in_window += 1;
                    if status < 400 {
                        self.recorder.succeeded_in_window += 1;
                    }
                    if let Some(second) = self.second_of(now)
                        && let Some(interval) = self.recorder.interval(second)
                    {
                        interval.completed += 1;
                        if status < 400 {
                            interval.succeeded += 1;
                        } else if request.measured {
                            interval.errors += 1;
                        }
                    }
                    self.recorder.bytes_in_window += bytes;
                }
                if request.measured {
                    let corrected = now.saturating_duration_since(request.intended);
                    let raw = now.saturating_duration_since(request.sent);
                    self.recorder.response(
                        status,
                        corrected.as_nanos() as u64,
                        raw.as_nanos() as u64,
                    );
                }
                if reusable && !self.config.rtt.is_zero() {
                    self.rest(id);
                } else if reusable {
                    self.reuse(id);
                } else {
                    self.close_hot(id);
                }
            }
        }
    }

    /// Emulated round-trip time: the connection carries nothing until its timer (re-armed
    /// to the end of the rest) fires; a receive stays armed so a close by the server is seen.
    fn rest(&mut self, id: ConnectionId) {
        let until = self.now + self.config.rtt;
        let Some(hot) = self.hot_mut(id) else {
            return;
        };
        hot.resting = true;
        hot.timer_armed = true;
        self.driver.set_timer(id, until);
        self.driver.recv(id);
    }

    /// A connection free for another request: the oldest waiting one, or idle.
    fn reuse(&mut self, id: ConnectionId) {
        if self.closed_loop && self.issuing && self.backlog.is_empty() {
            let endpoint = self.hot_mut(id).map_or(0, |hot| hot.endpoint);
            if let Some(hot) = self.hot_mut(id) {
                hot.idle = true;
            }
            self.idle[endpoint].push(id);
            let now = self.now;
            let measured = self.in_window(now);
            self.issue_closed(now, measured);
            return;
        }
        let Some(pending) = self.backlog.pop_front() else {
            let Some(hot) = self.hot_mut(id) else {
                return;
            };
            hot.idle = true;
            let endpoint = hot.endpoint;
            self.idle[endpoint].push(id);
            // Armed while idle, so a server closing it (keep-alive timeout) is noticed at
            // once and the connection is not picked for the next request.
            self.driver.recv(id);
            return;
        };
        let endpoint = pending.request.endpoint;
        if self.hot_mut(id).is_some_and(|hot| hot.endpoint == endpoint) {
            self.send_request(id, pending);
        } else {
            self.backlog.push_front(pending);
            self.close_hot(id);
        }
    }

    fn hot_timer(&mut self, id: ConnectionId) {
        let now = self.now;
        let timeout = self.config.timeout;
        let Some(hot) = self.hot_mut(id) else {
            return;
        };
        hot.timer_armed = false;
        if hot.resting {
            hot.resting = false;
            self.reuse(id);
            return;
        }
        let deadline = match (hot.connected, hot.request) {
            (false, _) => Some((hot.opened_at + timeout, ErrorKind::Connect)),
            (true, Some(request)) => Some((request.sent + timeout, ErrorKind::Timeout)),
            (true, None) => None,
        };
        if let Some((deadline, kind)) = deadline {
            if deadline <= now {
                // A connect that did not complete says so in its cause.
                let detail = (kind == ErrorKind::Connect).then_some("timed out");
                self.fail_cause(id, kind, None, detail);
            } else {
                if let Some(hot) = self.hot_mut(id) {
                    hot.timer_armed = true;
                }
                self.driver.set_timer(id, deadline);
            }
        }
    }

    /// Ends the outstanding request (if any) with an error of `kind`, closes the connection.
    ///
    /// A request that failed with a close or reset on a connection that had already
    /// carried responses, before any byte of its own response, is sent once more on a new
    /// connection (as browsers do: the server closed the idle connection as the request
    /// went out); its intended start stays, so the retry's cost shows in corrected latency.
    pub(crate) fn fail_hot(&mut self, id: ConnectionId, kind: ErrorKind) {
        self.fail_cause(id, kind, None, None);
    }

    /// [`Engine::fail_hot`] with the errno of the socket error, for the error's cause.
    pub(crate) fn fail_hot_with(&mut self, id: ConnectionId, kind: ErrorKind, errno: Option<i32>) {
        self.fail_cause(id, kind, errno, None);
    }

    /// [`Engine::fail_hot`] with the cause's errno or text.
    pub(crate) fn fail_cause(
        &mut self,
        id: ConnectionId,
        kind: ErrorKind,
        errno: Option<i32>,
        detail: Option<&str>,
    ) {
        if let Some(hot) = self.hot_mut(id)
            && let Some(request) = hot.request
        {
            let retry = matches!(kind, ErrorKind::Closed | ErrorKind::Reset)
                && hot.served > 0
                && hot.reader.nothing_received()
                && !request.retried;
            if retry {
                self.backlog.push_front(Pending {
                    intended: request.intended,
                    request: request.request,
                    measured: request.measured,
                    retried: true,
                });
            } else if request.measured {
                self.count_error_with(kind, errno, detail);
            }
        }
        self.close_hot(id);
    }

    /// Closes a hot connection; a waiting request then gets a new connection.
    pub(crate) fn close_hot(&mut self, id: ConnectionId) {
        let Some(hot) = self.hot_mut(id) else {
            return;
        };
        if hot.request.is_some() {
            self.in_flight -= 1;
        }
        self.driver.close(id);
        *self.slot_mut(id) = Slot::Free;
        self.hot_open -= 1;
        if let Some(pending) = self.backlog.pop_front() {
            self.open_and_send(pending);
        } else if self.closed_loop && self.issuing {
            let now = self.now;
            let measured = self.in_window(now);
            self.issue_closed(now, measured);
        }
    }
}
