//! `Resolver`: host names to addresses without ever blocking the event loop. IP literals
//! are answered at once; names are looked up by one helper thread per worker (the system
//! resolver, `getaddrinfo`, blocks) which hands results back through a queue and wakes
//! the loop; answers are kept for a short time in a small cache.
//!
//! Invariants: at most one lookup per name is in flight (later askers wait for it); the
//! cache holds at most [`CACHE_ENTRIES`] names; the helper thread ends when the resolver
//! is dropped (its request channel closes).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use coldwire_io::Waker;

/// Names kept in the cache; when full, it is cleared (simple and bounded).
pub const CACHE_ENTRIES: usize = 1024;

/// The answer for one name.
pub type Answer = Result<IpAddr, String>;

/// What [`Resolver::resolve`] could say at once.
#[derive(Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The address is known.
    Ready(IpAddr),
    /// A lookup is under way; the name comes back from [`Resolver::take_answers`].
    Pending,
}

type Finished = Arc<Mutex<Vec<(String, Answer)>>>;

/// A per-worker resolver.
pub struct Resolver {
    requests: Sender<String>,
    finished: Finished,
    cache: HashMap<String, (IpAddr, Instant)>,
    in_flight: HashMap<String, ()>,
    ttl: Duration,
}

impl Resolver {
    /// Starts the helper thread; `waker` wakes the worker's loop when answers are ready.
    pub fn new(waker: Waker, ttl: Duration) -> io::Result<Resolver> {
        let (requests, incoming) = channel::<String>();
        let finished: Finished = Arc::default();
        let results = finished.clone();
        std::thread::Builder::new()
            .name("coldwire-resolver".into())
            .spawn(move || {
                for name in incoming {
                    let answer = lookup(&name);
                    results
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .push((name, answer));
                    let _ = waker.wake();
                }
            })?;
        Ok(Resolver {
            requests,
            finished,
            cache: HashMap::new(),
            in_flight: HashMap::new(),
            ttl,
        })
    }

    /// The address of `host` (a name, an IPv4 literal or a bracketed IPv6 literal).
    pub fn resolve(&mut self, host: &str, now: Instant) -> Result<Resolution, String> {
        if let Some(address) = literal(host) {
            return Ok(Resolution::Ready(address));
        }
        if let Some(&(address, expires)) = self.cache.get(host)
            && now < expires
        {
            return Ok(Resolution::Ready(address));
        }
        if !self.in_flight.contains_key(host) {
            self.requests
                .send(host.to_owned())
                .map_err(|_| "the resolver thread has stopped".to_owned())?;
            self.in_flight.insert(host.to_owned(), ());
        }
        Ok(Resolution::Pending)
    }

    /// Answers that arrived since the last call (cached as they are taken).
    pub fn take_answers(&mut self, now: Instant) -> Vec<(String, Answer)> {
        let answers = std::mem::take(
            &mut *self
                .finished
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        for (name, answer) in &answers {
            self.in_flight.remove(name);
            if let Ok(address) = answer {
                if self.cache.len() >= CACHE_ENTRIES {
                    self.cache.clear();
                }
                self.cache.insert(name.clone(), (*address, now + self.ttl));
            }
        }
        answers
    }
}

/// An IP literal, bracketed or not.
pub fn literal(host: &str) -> Option<IpAddr> {
    let bare = host
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse().ok()
}

fn lookup(name: &str) -> Answer {
    let addresses: Vec<SocketAddr> = (name, 0)
        .to_socket_addrs()
        .map_err(|error| format!("cannot resolve {name}: {error}"))?
        .collect();
    addresses
        .iter()
        .find(|address| address.is_ipv4())
        .or(addresses.first())
        .map(SocketAddr::ip)
        .ok_or_else(|| format!("{name} has no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_need_no_lookup() {
        let waker = Waker::new().unwrap();
        let mut resolver = Resolver::new(waker, Duration::from_secs(1)).unwrap();
        let now = Instant::now();
        assert_eq!(
            resolver.resolve("127.0.0.1", now),
            Ok(Resolution::Ready(IpAddr::from([127, 0, 0, 1])))
        );
        assert_eq!(
            resolver.resolve("[::1]", now),
            Ok(Resolution::Ready("::1".parse().unwrap()))
        );
    }

    #[test]
    fn names_resolve_on_the_helper_thread() {
        let waker = Waker::new().unwrap();
        let mut resolver = Resolver::new(waker, Duration::from_secs(60)).unwrap();
        let now = Instant::now();
        assert_eq!(resolver.resolve("localhost", now), Ok(Resolution::Pending));
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut answers = Vec::new();
        while answers.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            answers = resolver.take_answers(now);
        }
        assert_eq!(answers.len(), 1);
        assert!(answers[0].1.as_ref().unwrap().is_loopback());
        assert!(matches!(
            resolver.resolve("localhost", now),
            Ok(Resolution::Ready(_))
        ));
    }
}
