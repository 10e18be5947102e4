//! Background revalidation for `stale-while-revalidate` (RFC 5861 §3): the client got the
//! stale response at once; this helper thread (one per worker, like the resolver's) asks
//! the origin with the stored validators and refreshes the store — a `304` merges its
//! fields and restarts the clock, a new storable answer replaces the entry, anything else
//! (an error, a timeout, an uncacheable answer) leaves the entry as it was.
//!
//! Invariants: at most one revalidation per key at a time (each job holds the store's
//! [`Claim`] on its key until it ends); the queue is bounded ([`QUEUE`]; a job that does
//! not fit is dropped, and a later stale hit tries again); every socket operation has the
//! upstream timeout, so a job always ends; the thread never touches the event loop, and it
//! ends when its worker drops the sender.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, SystemTime};

use coldwire_cache::{
    CacheControl, Claim, Storability, Store, StoredResponse, VaryKey, storability_targeted,
};
use coldwire_http::owned_fields::Fields;
use coldwire_http::{ChunkedDecoder, ResponseFraming};

use super::head::{UpstreamResponse, end_to_end, parse_upstream_response};

/// Jobs waiting at most.
const QUEUE: usize = 64;

/// One background revalidation.
pub struct Revalidation {
    /// The key's claim (released when the job ends).
    pub claim: Claim,
    /// Origin host and port.
    pub host: String,
    /// Origin port.
    pub port: u16,
    /// The request head to send (with the stored validators).
    pub request: Vec<u8>,
    /// The stale stored response.
    pub stored: Arc<StoredResponse>,
    /// The request's fields (for `Vary`).
    pub request_fields: Fields,
    /// The request's `Cache-Control`.
    pub request_directives: CacheControl,
}

/// A worker's revalidation thread.
pub struct Revalidator {
    jobs: SyncSender<Revalidation>,
}

/// Limits the thread works within.
#[derive(Clone, Copy)]
pub struct RevalidatorLimits {
    /// Connect and each read or write.
    pub timeout: Duration,
    /// Largest response head.
    pub max_head_bytes: usize,
}

impl Revalidator {
    /// Starts the thread.
    pub fn start(store: Arc<Store>, limits: RevalidatorLimits) -> std::io::Result<Revalidator> {
        let (jobs, queue) = sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("coldwire-revalidate".to_owned())
            .spawn(move || run(&queue, &store, limits))?;
        Ok(Revalidator { jobs })
    }

    /// Queues a job; false when the queue is full (the job, and its claim, are dropped).
    pub fn submit(&self, job: Revalidation) -> bool {
        match self.jobs.try_send(job) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        }
    }
}

fn run(queue: &Receiver<Revalidation>, store: &Store, limits: RevalidatorLimits) {
    while let Ok(job) = queue.recv() {
        let _ = revalidate(&job, store, limits);
        drop(job.claim);
    }
}

/// Why a revalidation stored nothing (only for the caller's `let _`).
#[derive(Debug)]
enum Failed {
    Io,
    Response,
}

impl From<std::io::Error> for Failed {
    fn from(_: std::io::Error) -> Failed {
        Failed::Io
    }
}

fn revalidate(job: &Revalidation, store: &Store, limits: RevalidatorLimits) -> Result<(), Failed> {
    let address = (job.host.as_str(), job.port)
        .to_socket_addrs()?
        .next()
        .ok_or(Failed::Io)?;
    let request_time = SystemTime::now();
    let mut stream = TcpStream::connect_timeout(&address, limits.timeout)?;
    stream.set_read_timeout(Some(limits.timeout))?;
    stream.set_write_timeout(Some(limits.timeout))?;
    stream.write_all(&job.request)?;
    let max_body = store.config().max_object;
    let (response, body) = read_response(&mut stream, limits.max_head_bytes, max_body)?;
    let response_time = SystemTime::now();
    let fields = end_to_end(&response.fields);
    let times = (request_time, response_time);
    if response.status == 304 {
        // RFC 9111 §4.3.4: a 304 that does not select the stale response (another strong
        // validator) leaves it stale; the next request revalidates in the foreground.
        store.freshen_with_304(job.claim.key(), Some(&job.stored), &fields, times);
        return Ok(());
    }
    let authorization = job.request_fields.get("authorization").is_some();
    let verdict = storability_targeted(
        "GET",
        &job.request_directives,
        authorization,
        response.status,
        &response.fields,
        store.targets(),
    );
    if response.status == 206 {
        return Err(Failed::Response);
    }
    if verdict != Storability::Store {
        return Err(Failed::Response);
    }
    let vary = VaryKey::new(&fields, |name: &str| {
        job.request_fields.values(name).collect::<Vec<_>>()
    });
    let fresh = StoredResponse::new_targeted(
        response.status,
        fields,
        vec![body.into()],
        vary,
        times,
        store.targets(),
    );
    store.insert(job.claim.key(), fresh);
    Ok(())
}

/// Reads one response: the head (interim 1xx skipped), then its body by its framing, at
/// most `max_body` bytes.
fn read_response(
    stream: &mut TcpStream,
    max_head: usize,
    max_body: u64,
) -> Result<(UpstreamResponse, Vec<u8>), Failed> {
    let mut input = Vec::new();
    let mut buffer = vec![0u8; 16 * 1024];
    let response = loop {
        match parse_upstream_response(&input, false, max_head) {
            Err(_) => return Err(Failed::Response),
            Ok(Some(response)) if (100..200).contains(&response.status) => {
                input.drain(..response.head_len);
            }
            Ok(Some(response)) => break response,
            Ok(None) => {
                let read = stream.read(&mut buffer)?;
                if read == 0 {
                    return Err(Failed::Response);
                }
                input.extend_from_slice(&buffer[..read]);
            }
        }
    };
    input.drain(..response.head_len);
    let max_body = usize::try_from(max_body).unwrap_or(usize::MAX);
    let mut body = Vec::new();
    match response.framing {
        ResponseFraming::Empty => {}
        ResponseFraming::Length(length) => {
            let length = usize::try_from(length).map_err(|_| Failed::Response)?;
            if length > max_body {
                return Err(Failed::Response);
            }
            body = input;
            while body.len() < length {
                let read = stream.read(&mut buffer)?;
                if read == 0 {
                    return Err(Failed::Response);
                }
                body.extend_from_slice(&buffer[..read]);
            }
            body.truncate(length);
        }
        ResponseFraming::Chunked => {
            let mut decoder = ChunkedDecoder::new();
            let mut pending = input;
            loop {
                let progress = decoder
                    .decode(&pending, |data| body.extend_from_slice(data))
                    .map_err(|_| Failed::Response)?;
                if progress.done {
                    break;
                }
                if body.len() > max_body {
                    return Err(Failed::Response);
                }
                let read = stream.read(&mut buffer)?;
                if read == 0 {
                    return Err(Failed::Response);
                }
                pending = buffer[..read].to_vec();
            }
        }
        ResponseFraming::UntilClose => {
            body = input;
            loop {
                let read = stream.read(&mut buffer)?;
                if read == 0 {
                    break;
                }
                body.extend_from_slice(&buffer[..read]);
                if body.len() > max_body {
                    return Err(Failed::Response);
                }
            }
        }
    }
    Ok((response, body))
}
