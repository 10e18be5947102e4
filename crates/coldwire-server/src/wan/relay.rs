//! One WAN relay worker: an event loop over a [`Driver`] that accepts connections, opens
//! each one's upstream connection after the one-way delay (as the SYN would arrive), and
//! moves bytes both ways through the path model ([`super::path`]), holding them in
//! per-direction queues until they are due.
//!
//! Invariants:
//! - Bytes leave in the order they arrived, each direction on its own; an end of stream
//!   (FIN) leaves after the last byte before it; a reset closes both sides at once.
//! - Timers: a connection's single driver timer is armed only while bytes (or a FIN, or the
//!   delayed connect) are due *to* it, so an idle relayed connection costs no timer work.
//! - A reload (SIGHUP) replaces the configuration between two loop turns: bytes received
//!   from then on are scheduled on the new path model, on every connection; bytes already
//!   held keep their due time, and later bytes never leave before them.
//! - Back-pressure instead of loss: a direction holding more than `--queue` bytes (its
//!   queue plus what the driver has not written) stops reading its source until it drains.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::Instant;

use coldwire_io::{Chunk, Completion, ConnectionId, Driver};

use super::WanConfig;
use super::path::{Draws, PathState, SharedLink};
use crate::runtime::{Draining, LiveView, Seated};
use crate::stats::{RequestCounters, Stats, WorkerSnapshot};

/// What a relay worker starts from: its seat and the relay's configuration.
pub type RelayWorkerContext = Seated<WanConfig>;

/// Bytes (or the end of the stream) waiting for their time.
struct Piece {
    due: Instant,
    bytes: Option<Vec<u8>>,
}

/// One direction of a relayed connection.
#[derive(Default)]
struct Direction {
    path: PathState,
    queue: VecDeque<Piece>,
    queued_bytes: usize,
    /// The source's end of stream has been received.
    source_done: bool,
    /// The FIN went out to the destination.
    fin_sent: bool,
    /// A receive is armed on the source.
    reading: bool,
}

/// A relayed connection: the accepted side and the upstream side.
struct Pair {
    client: ConnectionId,
    server: Option<ConnectionId>,
    connected: bool,
    /// When the upstream connect is due (the one-way delay after the accept).
    connect_due: Option<Instant>,
    /// client → server.
    up: Direction,
    /// server → client.
    down: Direction,
}

enum Slot {
    Client(Box<Pair>),
    /// The upstream side of the pair kept in this client's slot.
    Server(ConnectionId),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Client,
    Server,
}

struct Relay<D: Driver> {
    driver: D,
    config: Arc<WanConfig>,
    live: LiveView<WanConfig>,
    slots: Vec<Option<Slot>>,
    up_link: SharedLink,
    down_link: SharedLink,
    draws: Draws,
    counters: RequestCounters,
    stats: Arc<Stats>,
    index: usize,
    draining: Draining,
    open: usize,
}

/// Runs a relay worker until it is stopped (open connections are cut after the grace).
pub fn run_relay_worker<D: Driver>(mut driver: D, context: RelayWorkerContext) -> io::Result<()> {
    let seat = context.seat;
    let listener = driver.listen(seat.listener)?;
    let config = context.config;
    let mut relay = Relay {
        driver,
        up_link: SharedLink::new(config.aggregate_bits_per_second),
        down_link: SharedLink::new(config.aggregate_bits_per_second),
        draws: Draws::new(config.seed ^ (seat.index as u64 + 1).wrapping_mul(0x9e37)),
        slots: Vec::new(),
        counters: RequestCounters::default(),
        stats: seat.stats,
        index: seat.index,
        draining: Draining::new(seat.stop, config.runtime.shutdown_grace, listener),
        open: 0,
        config,
        live: context.live,
    };
    relay.run()
}

impl<D: Driver> Relay<D> {
    fn run(&mut self) -> io::Result<()> {
        loop {
            let timeout = self.draining.timeout(self.driver.now());
            self.driver.wait(timeout)?;
            if let Some(config) = self.live.changed() {
                // A reload: what is received from now is scheduled on the new paths.
                self.up_link.bits_per_second = config.aggregate_bits_per_second;
                self.down_link.bits_per_second = config.aggregate_bits_per_second;
                self.draining.set_grace(config.runtime.shutdown_grace);
                self.config = config;
            }
            while let Some(completion) = self.driver.next_completion() {
                self.handle(completion);
            }
            let done = self.draining.after_turn(&mut self.driver, self.open);
            self.publish();
            if done {
                for index in 0..self.slots.len() {
                    if let Some(Some(Slot::Client(pair))) =
                        self.slots.get_mut(index).map(Option::take)
                    {
                        self.close_pair(*pair);
                    }
                }
                self.publish();
                return Ok(());
            }
        }
    }

    fn publish(&mut self) {
        let snapshot = WorkerSnapshot {
            loop_counters: self.driver.counters(),
            http: self.counters,
        };
        self.stats.publish(self.index, snapshot);
    }

    fn slot(&mut self, id: ConnectionId) -> &mut Option<Slot> {
        let index = id.index();
        if index >= self.slots.len() {
            self.slots.resize_with(index + 1, || None);
        }
        &mut self.slots[index]
    }

    /// The pair a connection belongs to, taken out of its slot, and which side it is.
    fn take_pair(&mut self, id: ConnectionId) -> Option<(Box<Pair>, Side)> {
        let client = match self.slot(id) {
            Some(Slot::Client(pair)) if pair.client == id => id,
            Some(Slot::Server(client)) => *client,
            _ => return None,
        };
        match self.slot(client).take() {
            Some(Slot::Client(pair)) if pair.server == Some(id) => Some((pair, Side::Server)),
            Some(Slot::Client(pair)) if pair.client == id => Some((pair, Side::Client)),
            other => {
                *self.slot(client) = other;
                None
            }
        }
    }

    fn put_pair(&mut self, pair: Box<Pair>) {
        let client = pair.client;
        *self.slot(client) = Some(Slot::Client(pair));
    }

    fn handle(&mut self, completion: Completion) {
        match completion {
            Completion::Accepted { connection, .. } => self.accepted(connection),
            Completion::Connected { connection } => {
                if let Some((mut pair, _)) = self.take_pair(connection) {
                    pair.connected = true;
                    self.read(&mut pair, Side::Server);
                    self.send_due(&mut pair, Side::Server);
                    self.settle(pair);
                }
            }
            Completion::Received { connection, buffer } => {
                let Some((mut pair, side)) = self.take_pair(connection) else {
                    self.driver.recycle(buffer);
                    return;
                };
                let now = self.driver.now();
                let mut bytes = self.driver.take_vec();
                bytes.extend_from_slice(buffer.filled());
                self.driver.recycle(buffer);
                self.counters.body_bytes += bytes.len() as u64;
                let config = self.config.clone();
                let (direction, model, link) = match side {
                    Side::Client => (&mut pair.up, &config.up, &mut self.up_link),
                    Side::Server => (&mut pair.down, &config.down, &mut self.down_link),
                };
                direction.reading = false;
                let due = direction
                    .path
                    .schedule(model, link, &mut self.draws, now, bytes.len());
                direction.queued_bytes += bytes.len();
                direction.queue.push_back(Piece {
                    due,
                    bytes: Some(bytes),
                });
                self.read(&mut pair, side);
                self.arm(&mut pair, opposite(side));
                self.settle(pair);
            }
            Completion::PeerClosed { connection } => {
                let Some((mut pair, side)) = self.take_pair(connection) else {
                    return;
                };
                let now = self.driver.now();
                let config = self.config.clone();
                let (direction, model) = match side {
                    Side::Client => (&mut pair.up, &config.up),
                    Side::Server => (&mut pair.down, &config.down),
                };
                direction.reading = false;
                direction.source_done = true;
                let due = direction.path.end_of_stream(model, now);
                direction.queue.push_back(Piece { due, bytes: None });
                self.arm(&mut pair, opposite(side));
                self.settle(pair);
            }
            Completion::Sent { connection } => {
                if let Some((mut pair, side)) = self.take_pair(connection) {
                    // The destination drained: what is due goes, its source is read again.
                    self.send_due(&mut pair, side);
                    self.settle(pair);
                }
            }
            Completion::Failed { connection, .. } => {
                if let Some((pair, _)) = self.take_pair(connection) {
                    self.close_pair(*pair);
                }
            }
            Completion::TimerExpired { connection } => {
                let Some((mut pair, side)) = self.take_pair(connection) else {
                    return;
                };
                if side == Side::Client && pair.server.is_none() {
                    if pair.connect_due.is_some_and(|due| due <= self.driver.now()) {
                        pair.connect_due = None;
                        match self.driver.connect(self.config.to) {
                            Ok(server) => {
                                pair.server = Some(server);
                                *self.slot(server) = Some(Slot::Server(pair.client));
                                self.open += 1;
                            }
                            Err(_) => {
                                self.close_pair(*pair);
                                return;
                            }
                        }
                    }
                    self.arm(&mut pair, Side::Client);
                    self.settle(pair);
                    return;
                }
                self.send_due(&mut pair, side);
                self.settle(pair);
            }
            Completion::Woken => {}
        }
    }

    fn accepted(&mut self, client: ConnectionId) {
        if !self.draining.accepting() {
            self.driver.close(client);
            return;
        }
        self.open += 1;
        self.counters.requests += 1;
        let now = self.driver.now();
        let mut pair = Box::new(Pair {
            client,
            server: None,
            connected: false,
            connect_due: Some(now + self.config.up.delay),
            up: Direction::default(),
            down: Direction::default(),
        });
        // Over a WAN the client could send only once the handshake's SYN-ACK was back (one
        // round trip after it began); here its connect returned at once, so its first bytes
        // count as sent then: they reach the server one round trip and a one-way delay
        // after the accept.
        let round_trip = self.config.up.delay + self.config.down.delay;
        pair.up
            .path
            .hold_until(now + round_trip + self.config.up.delay);
        self.driver.set_timer(client, now + self.config.up.delay);
        self.read(&mut pair, Side::Client);
        self.put_pair(pair);
    }

    /// Arms a receive on `side` unless its direction holds its fill or it has ended.
    fn read(&mut self, pair: &mut Pair, side: Side) {
        let (connection, direction, destination) = match side {
            Side::Client => (Some(pair.client), &mut pair.up, pair.server),
            Side::Server => (pair.server, &mut pair.down, Some(pair.client)),
        };
        let Some(connection) = connection else {
            return;
        };
        if side == Side::Server && !pair.connected {
            return;
        }
        let unwritten = destination.map_or(0, |id| self.driver.queued_bytes(id)) as usize;
        if direction.reading || direction.source_done {
            return;
        }
        if direction.queued_bytes + unwritten >= self.config.queue_bytes {
            // Back-pressure: read again once what is held drains (`send_due`).
            return;
        }
        direction.reading = true;
        // Eager: an end of stream that came with the last bytes (an edge-triggered poller
        // reports it once, with them), or data that waited while reading was paused, is
        // found at once.
        self.driver.recv_eager(connection);
    }

    /// Arms the timer of `destination` for its direction's first piece.
    fn arm(&mut self, pair: &mut Pair, destination: Side) {
        let (connection, direction) = match destination {
            Side::Server => (pair.server, &pair.up),
            Side::Client => (Some(pair.client), &pair.down),
        };
        let Some(connection) = connection else {
            return;
        };
        if destination == Side::Server && !pair.connected {
            return;
        }
        let setup = if destination == Side::Client {
            pair.connect_due
        } else {
            None
        };
        let next = direction.queue.front().map(|piece| piece.due);
        match (next, setup) {
            (Some(due), Some(setup)) => self.driver.set_timer(connection, due.min(setup)),
            (Some(due), None) | (None, Some(due)) => self.driver.set_timer(connection, due),
            (None, None) => self.driver.cancel_timer(connection),
        }
    }

    /// Sends what is due to `destination`, then re-arms its timer for the rest.
    fn send_due(&mut self, pair: &mut Pair, destination: Side) {
        let now = self.driver.now();
        let (connection, direction) = match destination {
            Side::Server => (pair.server, &mut pair.up),
            Side::Client => (Some(pair.client), &mut pair.down),
        };
        let Some(connection) = connection else {
            return;
        };
        if destination == Side::Server && !pair.connected {
            return;
        }
        let mut sent_any = false;
        while direction
            .queue
            .front()
            .is_some_and(|piece| piece.due <= now)
        {
            let Some(piece) = direction.queue.pop_front() else {
                break;
            };
            match piece.bytes {
                Some(bytes) => {
                    direction.queued_bytes -= bytes.len();
                    self.driver.send(connection, Chunk::Owned(bytes));
                    sent_any = true;
                }
                None => {
                    if sent_any {
                        let _ = self.driver.flush(connection);
                        sent_any = false;
                    }
                    self.driver.shutdown_write(connection);
                    direction.fin_sent = true;
                }
            }
        }
        if sent_any {
            // A failed write is reported as `Failed` by the driver; the pair closes then.
            let _ = self.driver.flush(connection);
        }
        self.arm(pair, destination);
        // What left may have taken the direction below its fill: read its source again.
        self.read(pair, opposite(destination));
    }

    /// Puts the pair back, or closes it once both directions have ended and drained.
    fn settle(&mut self, pair: Box<Pair>) {
        let drained =
            |id: Option<ConnectionId>, driver: &D| id.is_none_or(|id| driver.queued_bytes(id) == 0);
        let finished = pair.up.fin_sent
            && pair.down.fin_sent
            && drained(pair.server, &self.driver)
            && drained(Some(pair.client), &self.driver);
        if finished {
            self.close_pair(*pair);
        } else {
            self.put_pair(pair);
        }
    }

    fn close_pair(&mut self, pair: Pair) {
        for connection in [Some(pair.client), pair.server].into_iter().flatten() {
            *self.slot(connection) = None;
            self.driver.close(connection);
            self.open = self.open.saturating_sub(1);
        }
        self.counters.count_response(200);
    }
}

fn opposite(side: Side) -> Side {
    match side {
        Side::Client => Side::Server,
        Side::Server => Side::Client,
    }
}
