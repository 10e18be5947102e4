//! A [`Driver`] without sockets, for unit tests of the proxy's state machine: it records
//! what the worker asks for (connects, receives armed, bytes queued, flushes, shutdowns,
//! closes, timers, splices) and hands back the completions a test injects. Every flush
//! completes at once unless the test made the connection slow ([`MockDriver::hold`]), in
//! which case it is `Pending` until the test injects `Sent`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use coldwire_io::{
    Buffer, Chunk, Completion, ConnectionId, Driver, Flush, ListenerId, LoopCounters, Splice, Waker,
};

/// One connection as the mock sees it.
#[derive(Default)]
pub struct MockConnection {
    /// Bytes queued by `send` and not yet taken by the test.
    pub output: Vec<u8>,
    /// A receive is armed.
    pub receiving: bool,
    /// The timer's deadline, if armed.
    pub timer: Option<Instant>,
    /// `shutdown_write` was called.
    pub write_shut: bool,
    /// `close` was called.
    pub closed: bool,
    /// Flushes report `Pending` (a slow peer) until the test releases it.
    pub held: bool,
    /// Flushes asked for.
    pub flushes: usize,
}

/// The mock driver.
pub struct MockDriver {
    now: Instant,
    next_slot: u32,
    completions: VecDeque<Completion>,
    connections: HashMap<ConnectionId, MockConnection>,
    /// Outgoing connections, in the order they were opened.
    pub connects: Vec<(ConnectionId, SocketAddr)>,
    /// Splices started: (source, destination, length, keep_copy).
    pub splices: Vec<(ConnectionId, ConnectionId, u64, bool)>,
    /// Whether `supports_splice` says yes.
    pub splicing: bool,
    /// The active-connections gauge as the worker moved it.
    pub active: i64,
    waker: Waker,
    closed_ids: HashSet<ConnectionId>,
}

impl MockDriver {
    /// A driver with no connections, its clock at a fixed start.
    pub fn new() -> MockDriver {
        MockDriver {
            now: Instant::now(),
            next_slot: 1,
            completions: VecDeque::new(),
            connections: HashMap::new(),
            connects: Vec::new(),
            splices: Vec::new(),
            splicing: false,
            active: 0,
            waker: Waker::new().expect("eventfd"),
            closed_ids: HashSet::new(),
        }
    }

    fn new_id(&mut self) -> ConnectionId {
        let id = ConnectionId {
            slot: self.next_slot,
            generation: 0,
        };
        self.next_slot += 1;
        self.connections.insert(id, MockConnection::default());
        id
    }

    /// Queues the acceptance of a new client connection and returns its id.
    pub fn accept(&mut self) -> ConnectionId {
        let id = self.new_id();
        self.completions.push_back(Completion::Accepted {
            listener: ListenerId(0),
            connection: id,
            peer: SocketAddr::from(([127, 0, 0, 1], 40000 + id.slot as u16)),
        });
        id
    }

    /// Queues bytes arriving on `id`.
    pub fn receive(&mut self, id: ConnectionId, bytes: &[u8]) {
        let mut buffer = Buffer::new(bytes.len().max(16 * 1024));
        buffer.spare_mut()[..bytes.len()].copy_from_slice(bytes);
        buffer.advance_filled(bytes.len());
        self.connection(id).receiving = false;
        self.completions.push_back(Completion::Received {
            connection: id,
            buffer,
        });
    }

    /// Queues any other completion.
    pub fn complete(&mut self, completion: Completion) {
        self.completions.push_back(completion);
    }

    /// Moves the loop's clock on.
    pub fn advance(&mut self, by: Duration) {
        self.now += by;
    }

    /// The state of connection `id`.
    pub fn connection(&mut self, id: ConnectionId) -> &mut MockConnection {
        self.connections.entry(id).or_default()
    }

    /// Takes the bytes queued on `id` so far, as text.
    pub fn take_output(&mut self, id: ConnectionId) -> String {
        let output = std::mem::take(&mut self.connection(id).output);
        String::from_utf8_lossy(&output).into_owned()
    }

    /// Makes flushes on `id` report `Pending` until [`MockDriver::release`].
    pub fn hold(&mut self, id: ConnectionId) {
        self.connection(id).held = true;
    }

    /// The peer of `id` took everything: flushes complete again, and `Sent` is queued.
    pub fn release(&mut self, id: ConnectionId) {
        self.connection(id).held = false;
        self.completions
            .push_back(Completion::Sent { connection: id });
    }

    /// Whether `close` was called for `id`.
    pub fn is_closed(&self, id: ConnectionId) -> bool {
        self.closed_ids.contains(&id)
    }
}

impl Splice for MockDriver {
    const HONOURS_RECEIVE_BOUND: bool = true;

    fn recv_at_most(&mut self, connection: ConnectionId, _max_bytes: usize) {
        self.recv(connection);
    }

    fn splice(
        &mut self,
        source: ConnectionId,
        destination: ConnectionId,
        length: u64,
        keep_copy: bool,
    ) -> io::Result<()> {
        if !self.splicing {
            return Err(io::Error::from(io::ErrorKind::Unsupported));
        }
        self.splices.push((source, destination, length, keep_copy));
        Ok(())
    }

    fn splice_delivered(&self, _destination: ConnectionId) -> u64 {
        0
    }

    fn take_splice_copy(&mut self, _destination: ConnectionId) -> Option<Vec<u8>> {
        None
    }

    fn lend_socket(&mut self, _connection: ConnectionId) -> io::Result<std::os::fd::RawFd> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

impl Driver for MockDriver {
    fn backend_name(&self) -> &'static str {
        "mock"
    }

    fn listen(&mut self, _listener: TcpListener) -> io::Result<ListenerId> {
        Ok(ListenerId(0))
    }

    fn connect(&mut self, address: SocketAddr) -> io::Result<ConnectionId> {
        let id = self.new_id();
        self.connects.push((id, address));
        Ok(id)
    }

    fn connect_from(&mut self, address: SocketAddr, _source: IpAddr) -> io::Result<ConnectionId> {
        self.connect(address)
    }

    fn close_listener(&mut self, _listener: ListenerId) {}

    fn recv(&mut self, connection: ConnectionId) {
        self.connection(connection).receiving = true;
    }

    fn recv_eager(&mut self, connection: ConnectionId) {
        self.recv(connection);
    }

    fn flush_more(&mut self, connection: ConnectionId) -> Flush {
        self.flush(connection)
    }

    type Splicer = Self;

    fn splicer(&mut self) -> io::Result<&mut Self> {
        if self.splicing {
            Ok(self)
        } else {
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
    }

    fn send(&mut self, connection: ConnectionId, chunk: Chunk) {
        let output = &mut self.connection(connection).output;
        match chunk {
            Chunk::Owned(bytes) => output.extend_from_slice(&bytes),
            Chunk::Shared(bytes) => output.extend_from_slice(&bytes),
            Chunk::File { length, .. } => output.extend(std::iter::repeat_n(b'F', length as usize)),
        }
    }

    fn flush(&mut self, connection: ConnectionId) -> Flush {
        let state = self.connection(connection);
        state.flushes += 1;
        if state.held {
            Flush::Pending
        } else {
            Flush::Done
        }
    }

    fn queued_bytes(&self, _connection: ConnectionId) -> u64 {
        0
    }

    fn unsent_bytes(&self, _connection: ConnectionId) -> u64 {
        0
    }

    fn shutdown_write(&mut self, connection: ConnectionId) {
        self.connection(connection).write_shut = true;
    }

    fn close(&mut self, connection: ConnectionId) {
        let state = self.connection(connection);
        state.closed = true;
        state.timer = None;
        state.receiving = false;
        self.closed_ids.insert(connection);
    }

    fn set_timer(&mut self, connection: ConnectionId, deadline: Instant) {
        self.connection(connection).timer = Some(deadline);
    }

    fn cancel_timer(&mut self, connection: ConnectionId) {
        self.connection(connection).timer = None;
    }

    fn wait(&mut self, _timeout: Option<Duration>) -> io::Result<()> {
        Ok(())
    }

    fn next_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    fn now(&self) -> Instant {
        self.now
    }

    fn recycle(&mut self, _buffer: Buffer) {}

    fn take_vec(&mut self) -> Vec<u8> {
        Vec::new()
    }

    fn counters(&self) -> LoopCounters {
        LoopCounters::default()
    }

    fn adjust_active(&mut self, delta: i64) {
        self.active += delta;
    }

    fn waker(&self) -> Waker {
        self.waker.clone()
    }

    fn has_file_ring(&self) -> bool {
        false
    }

    fn submit_file(
        &mut self,
        work: Box<dyn coldwire_io::FileWork>,
    ) -> Result<(), Box<dyn coldwire_io::FileWork>> {
        Err(work)
    }
}
