//! A proxy worker over the [`MockDriver`], with helpers that inject a completion and run
//! the worker's dispatch, so a test reads as the conversation on the wire.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use coldwire_cache::{Store, StoreConfig};
use coldwire_io::{Completion, ConnectionId};

use super::super::config::{Mode, ProxyConfig};
use super::super::state::Peer;
use super::super::worker::{Worker, WorkerParts};
use super::mock_driver::MockDriver;
use crate::stats::Stats;

/// The origin every test talks to (an IP literal: no resolver thread needed).
pub const ORIGIN: &str = "127.0.0.1:8080";

/// A worker, its mock driver and its store.
pub struct Harness {
    pub worker: Worker<MockDriver>,
    pub store: Option<Arc<Store>>,
}

impl Harness {
    /// A forward proxy with a cache, changed by `configure`.
    pub fn new(configure: impl FnOnce(&mut ProxyConfig)) -> Harness {
        let mut config = ProxyConfig::new(Mode::Forward);
        config.cache = Some(StoreConfig::default());
        configure(&mut config);
        let store = config.cache.map(|cache| Arc::new(Store::new(cache)));
        let parts = WorkerParts {
            index: 0,
            config: Arc::new(config),
            stats: Arc::new(Stats::new("mock", 1)),
            stop: Arc::new(AtomicBool::new(false)),
            store: store.clone(),
            access_log: None,
            error_log: crate::error_log::ErrorLog::disabled(),
            live: None,
            own_addresses: Vec::new(),
        };
        let worker = Worker::new(MockDriver::new(), parts).expect("worker");
        Harness { worker, store }
    }

    /// The mock driver.
    pub fn driver(&mut self) -> &mut MockDriver {
        &mut self.worker.driver
    }

    /// Runs the worker over every queued completion.
    pub fn run(&mut self) {
        self.worker.handle_completions();
    }

    /// A new client connection.
    pub fn accept(&mut self) -> ConnectionId {
        let id = self.driver().accept();
        self.run();
        id
    }

    /// Bytes arrive on `id` (a client or an origin connection).
    pub fn receive(&mut self, id: ConnectionId, bytes: &[u8]) {
        self.driver().receive(id, bytes);
        self.run();
    }

    /// Any other completion.
    pub fn complete(&mut self, completion: Completion) {
        self.driver().complete(completion);
        self.run();
    }

    /// What was queued on `id` since the last look.
    pub fn output(&mut self, id: ConnectionId) -> String {
        self.driver().take_output(id)
    }

    /// The `n`th outgoing connection (0: the first) and where it goes.
    pub fn upstream(&mut self, n: usize) -> ConnectionId {
        let (id, address) = self.driver().connects[n];
        assert_eq!(address.to_string(), ORIGIN);
        id
    }

    /// A new client whose request for `path` went to a new origin connection and was
    /// answered with `response`; what both were sent is taken. Returns (client, origin).
    pub fn fetched(&mut self, path: &str, response: &[u8]) -> (ConnectionId, ConnectionId) {
        let client = self.accept();
        self.receive(client, &get(path, ""));
        let last = self.connects() - 1;
        let origin = self.upstream(last);
        self.complete(Completion::Connected { connection: origin });
        self.receive(origin, response);
        self.output(client);
        self.output(origin);
        (client, origin)
    }

    /// The shared store's counters.
    pub fn store_counters(&self) -> coldwire_cache::StoreCounters {
        self.store.as_ref().expect("a store").counters()
    }

    /// Outgoing connections opened so far.
    pub fn connects(&mut self) -> usize {
        self.driver().connects.len()
    }

    /// The client connection's state, by name; `None` once it is closed.
    pub fn state(&self, id: ConnectionId) -> Option<&'static str> {
        match self.worker.peers.get(id.index())? {
            Some(Peer::Client(client)) if client.session.id == id => Some(client.state.name()),
            _ => None,
        }
    }
}

/// A request for `path` on [`ORIGIN`], in absolute form, with `extra` header lines.
pub fn get(path: &str, extra: &str) -> Vec<u8> {
    format!("GET http://{ORIGIN}{path} HTTP/1.1\r\nHost: {ORIGIN}\r\n{extra}\r\n").into_bytes()
}
