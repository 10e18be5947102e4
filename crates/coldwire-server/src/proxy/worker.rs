//! One proxy worker: an event loop over a [`Driver`] with its own `SO_REUSEPORT` listener,
//! its own upstream pool and resolver, and the cache shared by all workers. Generic over
//! the driver, so every backend runs the same logic, monomorphised.
//!
//! This file owns the loop, the slot table of [`Peer`]s and the dispatch of each
//! completion to its connection's side: `client.rs` (the client connection's state
//! machine) or `origin.rs` (the origin connection's). Neither side's logic is here.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use coldwire_cache::Store;
use coldwire_http::DateCache;
use coldwire_io::{Completion, ConnectionId, Driver, ListenerId};

use super::config::ProxyConfig;
use super::pool::Pool;
use super::resolver::Resolver;
use super::state::{Client, ClientState, Origin, OriginState, Peer};
use crate::access_log::AccessLog;
use crate::error_log::ErrorLog;
use crate::runtime::LiveView;
use crate::session::Phase;
use crate::stats::{RequestCounters, Stats, WorkerSnapshot};
use crate::worker::loop_timeout;

/// What a proxy worker needs from the server that starts it.
pub struct ProxyWorkerContext {
    /// Worker index (stats slot, CPU to pin to).
    pub index: usize,
    /// Shared configuration.
    pub config: Arc<ProxyConfig>,
    /// This worker's listening socket.
    pub listener: TcpListener,
    /// The proxy's listening and admin addresses as bound: never a destination
    /// (`own_address.rs`).
    pub own_addresses: Vec<SocketAddr>,
    /// Shared statistics.
    pub stats: Arc<Stats>,
    /// Set when the proxy should shut down (then the worker is woken).
    pub stop: Arc<AtomicBool>,
    /// The cache shared by all workers (`None`: caching off).
    pub store: Option<Arc<Store>>,
    /// The access log file, when logging.
    pub access_log: Option<Arc<File>>,
    /// The error log.
    pub error_log: ErrorLog,
    /// Where a reloaded configuration comes from (taken at the next loop turn).
    pub live: Option<LiveView<ProxyConfig>>,
}

/// Whether a connection stays after a step.
pub(super) enum Step {
    Keep,
    Close,
}

pub(super) struct Worker<D: Driver> {
    pub(super) driver: D,
    pub(super) peers: Vec<Option<Peer>>,
    pub(super) config: Arc<ProxyConfig>,
    live: Option<LiveView<ProxyConfig>>,
    pub(super) store: Option<Arc<Store>>,
    pub(super) pool: Pool,
    pub(super) resolver: Resolver,
    /// Clients (and tunnels) waiting for a host name, by name.
    pub(super) resolving: HashMap<String, Vec<ConnectionId>>,
    pub(super) date: DateCache,
    pub(super) wall_clock: SystemTime,
    pub(super) http: RequestCounters,
    stats: Arc<Stats>,
    pub(super) index: usize,
    stop: Arc<AtomicBool>,
    listener: Option<ListenerId>,
    pub(super) drain_deadline: Option<Instant>,
    pub(super) clients: usize,
    pub(super) log: Option<AccessLog>,
    pub(super) error_log: ErrorLog,
    /// Background revalidations (`stale-while-revalidate`), started on first use.
    pub(super) revalidator: Option<super::revalidator::Revalidator>,
    /// Requests waiting for other fetches of their keys (collapsed forwarding).
    pub(super) followers: super::collapse::Followers,
    /// What was said about running out of connections (`limit.rs`).
    pub(super) limits: super::limit::LimitNotices,
    /// Tunnels spliced in the kernel (`--data-path sockmap`, `sockmap_tunnel.rs`).
    pub(super) kernel: super::sockmap_tunnel::KernelTunnels,
    /// The disk store's writes on this worker's ring (`--io uring`, `disk_ring.rs`).
    disk_ring: Option<super::disk_ring::DiskRing>,
    /// The proxy's own listening and admin addresses (`own_address.rs`).
    pub(super) own_addresses: Vec<SocketAddr>,
}

/// Runs a proxy worker until shutdown completes.
pub fn run_proxy_worker<D: Driver>(mut driver: D, context: ProxyWorkerContext) -> io::Result<()> {
    let listener = driver.listen(context.listener)?;
    let parts = WorkerParts {
        index: context.index,
        config: context.config,
        stats: context.stats,
        stop: context.stop,
        store: context.store,
        access_log: context.access_log,
        error_log: context.error_log,
        live: context.live,
        own_addresses: context.own_addresses,
    };
    let mut worker = Worker::new(driver, parts)?;
    worker.listener = Some(listener);
    worker.run()
}

/// What a worker is built from, apart from its driver and listener (tests build one
/// without a listener).
pub(super) struct WorkerParts {
    pub(super) index: usize,
    pub(super) config: Arc<ProxyConfig>,
    pub(super) stats: Arc<Stats>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) store: Option<Arc<Store>>,
    pub(super) access_log: Option<Arc<File>>,
    pub(super) error_log: ErrorLog,
    pub(super) live: Option<LiveView<ProxyConfig>>,
    pub(super) own_addresses: Vec<SocketAddr>,
}

impl<D: Driver> Worker<D> {
    /// A worker over `driver`, not listening yet.
    pub(super) fn new(driver: D, parts: WorkerParts) -> io::Result<Worker<D>> {
        let config = parts.config;
        let resolver = Resolver::new(driver.waker(), config.resolver_ttl)?;
        if let Some(store) = &parts.store {
            // Releasing a claim this worker's requests wait for wakes the loop.
            let waker = driver.waker();
            store.register_worker(parts.index, move || {
                let _ = waker.wake();
            });
        }
        let wall_clock = SystemTime::now();
        let disk_ring = parts
            .store
            .as_ref()
            .and_then(|store| super::disk_ring::DiskRing::attach(&driver, store));
        Ok(Worker {
            disk_ring,
            driver,
            peers: Vec::new(),
            pool: Pool::new(config.pool_per_origin),
            resolver,
            resolving: HashMap::new(),
            store: parts.store,
            date: DateCache::new(wall_clock),
            wall_clock,
            http: RequestCounters::default(),
            stats: parts.stats,
            index: parts.index,
            stop: parts.stop,
            listener: None,
            drain_deadline: None,
            clients: 0,
            log: parts
                .access_log
                .map(|file| AccessLog::with_format(file, config.runtime.access_log_format)),
            error_log: parts.error_log,
            revalidator: None,
            followers: super::collapse::Followers::default(),
            limits: super::limit::LimitNotices::default(),
            kernel: super::sockmap_tunnel::KernelTunnels::default(),
            config,
            live: parts.live,
            own_addresses: parts.own_addresses,
        })
    }

    fn run(&mut self) -> io::Result<()> {
        loop {
            let timeout = loop_timeout(self.driver.now(), self.drain_deadline, self.log.as_ref());
            let timeout = self.kernel.wait_timeout(timeout);
            self.driver.wait(timeout)?;
            if let Some(config) = self.live.as_mut().and_then(LiveView::changed) {
                self.config = config;
            }
            self.wall_clock = SystemTime::now();
            self.date.update(self.wall_clock);
            self.handle_completions();
            self.poll_kernel_ends();
            if let Some(ring) = self.disk_ring.as_mut() {
                ring.submit(&mut self.driver);
            }
            if self.drain_deadline.is_none() && self.stop.load(Ordering::Relaxed) {
                self.start_draining();
            }
            self.publish();
            let now = self.driver.now();
            if let Some(log) = self.log.as_mut() {
                log.flush_if_due(now);
            }
            if let Some(deadline) = self.drain_deadline
                && (self.clients == 0 || now >= deadline)
            {
                self.close_everything();
                if let Some(log) = self.log.as_mut() {
                    let _ = log.flush();
                }
                self.publish();
                // The store's thread takes over what this ring has not taken; what is in
                // flight completes when the driver is dropped.
                self.disk_ring = None;
                return Ok(());
            }
        }
    }

    /// Handles every completion the driver has.
    pub(super) fn handle_completions(&mut self) {
        while let Some(completion) = self.driver.next_completion() {
            self.handle(completion);
        }
    }

    fn publish(&mut self) {
        let snapshot = WorkerSnapshot {
            loop_counters: self.driver.counters(),
            http: self.http,
        };
        self.say_limits(snapshot.loop_counters.accept_pauses);
        self.stats.publish(self.index, snapshot);
    }

    fn slot(&mut self, id: ConnectionId) -> &mut Option<Peer> {
        let index = id.index();
        if index >= self.peers.len() {
            self.peers.resize_with(index + 1, || None);
        }
        &mut self.peers[index]
    }

    /// Takes the client with this id out of its slot (put it back with `put_client`).
    pub(super) fn take_client(&mut self, id: ConnectionId) -> Option<Box<Client>> {
        let slot = self.slot(id);
        match slot {
            Some(Peer::Client(client)) if client.session.id == id => match slot.take() {
                Some(Peer::Client(client)) => Some(client),
                _ => None,
            },
            _ => None,
        }
    }

    /// Takes the origin connection with this id out of its slot.
    pub(super) fn take_origin(&mut self, id: ConnectionId) -> Option<Origin> {
        let slot = self.slot(id);
        match slot {
            Some(Peer::Origin(origin)) if origin.id == id => match slot.take() {
                Some(Peer::Origin(origin)) => Some(origin),
                _ => None,
            },
            _ => None,
        }
    }

    /// Puts a client back, or closes it.
    pub(super) fn put_client(&mut self, client: Box<Client>, step: Step) {
        match step {
            Step::Keep => {
                let id = client.session.id;
                *self.slot(id) = Some(Peer::Client(client));
            }
            Step::Close => self.close_client(client),
        }
    }

    /// Puts an origin connection back.
    pub(super) fn put_origin(&mut self, origin: Origin) {
        let id = origin.id;
        *self.slot(id) = Some(Peer::Origin(origin));
    }

    /// Closes a client and whatever upstream connection works for it.
    pub(super) fn close_client(&mut self, mut client: Box<Client>) {
        self.release_kernel_tunnel(&mut client);
        if let Some(input) = client.session.input.take() {
            self.driver.recycle(input);
        }
        if let Some(origin) = client.state.origin().and_then(|id| self.take_origin(id)) {
            self.close_origin(origin);
        }
        client.session.enter(&mut self.driver, Phase::Idle);
        self.driver.close(client.session.id);
        self.clients -= 1;
    }

    /// Closes an upstream connection.
    pub(super) fn close_origin(&mut self, origin: Origin) {
        if origin.state == OriginState::Idle {
            self.pool.remove(origin.address, origin.id);
        }
        self.driver.close(origin.id);
    }

    /// Hands one completion to the side of the connection it is about.
    fn handle(&mut self, completion: Completion) {
        match completion {
            Completion::Accepted {
                connection, peer, ..
            } => self.on_accepted(connection, peer),
            Completion::Connected { connection } => self.on_origin_connected(connection),
            Completion::Received { connection, buffer } => {
                if let Some(mut client) = self.take_client(connection) {
                    let step = self.on_client_data(&mut client, buffer);
                    self.put_client(client, step);
                } else if let Some(origin) = self.take_origin(connection) {
                    self.on_origin_data(origin, buffer);
                } else {
                    self.driver.recycle(buffer);
                }
            }
            Completion::Sent { connection } => {
                if let Some(mut client) = self.take_client(connection) {
                    let step = self.on_client_sent(&mut client);
                    self.put_client(client, step);
                } else if let Some(origin) = self.take_origin(connection) {
                    self.on_origin_sent(origin);
                }
            }
            Completion::PeerClosed { connection } => self.on_closed(connection, None),
            Completion::Failed { connection, error } => self.on_closed(connection, Some(error)),
            Completion::TimerExpired { connection } => {
                if let Some(mut client) = self.take_client(connection) {
                    let step = self.on_client_timer(&mut client);
                    self.put_client(client, step);
                } else if let Some(origin) = self.take_origin(connection) {
                    self.on_origin_timer(origin);
                }
            }
            Completion::Woken => {
                self.on_resolved();
                self.wake_followers();
                if self.stop.load(Ordering::Relaxed) && self.drain_deadline.is_none() {
                    self.start_draining();
                }
            }
        }
    }

    fn on_closed(&mut self, connection: ConnectionId, error: Option<io::Error>) {
        if let Some(client) = self.take_client(connection) {
            self.on_client_closed(client, error);
        } else if let Some(origin) = self.take_origin(connection) {
            self.on_origin_closed(origin, error);
        }
    }

    fn start_draining(&mut self) {
        self.drain_deadline = Some(self.driver.now() + self.config.runtime.shutdown_grace);
        if let Some(listener) = self.listener.take() {
            self.driver.close_listener(listener);
        }
        let idle: Vec<ConnectionId> = self
            .peers
            .iter()
            .flatten()
            .filter_map(|peer| match peer {
                Peer::Client(client)
                    if client.session.phase == Phase::Idle
                        && matches!(client.state, ClientState::Requests) =>
                {
                    Some(client.session.id)
                }
                _ => None,
            })
            .collect();
        // Used ones close now; fresh ones get a moment for a first request on its way
        // (`Session::drain_idle`).
        for id in idle {
            if let Some(mut client) = self.take_client(id) {
                let step = if client.session.drain_idle(&mut self.driver) {
                    Step::Close
                } else {
                    Step::Keep
                };
                self.put_client(client, step);
            }
        }
        for id in self.pool.drain() {
            if let Some(origin) = self.take_origin(id) {
                self.driver.close(origin.id);
            }
        }
    }

    fn close_everything(&mut self) {
        self.release_all_kernel_tunnels();
        let open: Vec<(bool, ConnectionId)> = self
            .peers
            .iter()
            .flatten()
            .map(|peer| match peer {
                Peer::Client(client) => (true, client.session.id),
                Peer::Origin(origin) => (false, origin.id),
            })
            .collect();
        for (is_client, id) in open {
            if is_client {
                if let Some(client) = self.take_client(id) {
                    self.close_client(client);
                }
            } else if let Some(origin) = self.take_origin(id) {
                self.driver.close(origin.id);
            }
        }
    }

    /// A client connection's idle deadline after an exchange or tunnel activity.
    pub(super) fn idle_deadline(&self) -> Instant {
        self.driver.now() + self.config.runtime.idle_timeout
    }

    /// The upstream deadline from now.
    pub(super) fn upstream_deadline(&self) -> Instant {
        self.driver.now() + self.config.upstream_timeout
    }

    /// Time allowed for a client to take a response.
    pub(super) fn write_timeout(&self) -> Duration {
        self.config.runtime.write_timeout
    }
}
