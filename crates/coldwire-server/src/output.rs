//! `Output`: gathers the responses to one batch of (possibly pipelined) requests on one
//! connection into as few chunks as possible — heads and error bodies accumulate in one
//! pooled vector, cached bodies and files become their own chunks — so a batch costs one
//! `sendmsg` when it fits the socket.

use coldwire_io::{Chunk, ConnectionId, Driver};

/// Output being assembled for one connection.
pub struct Output {
    connection: ConnectionId,
    bytes: Option<Vec<u8>>,
    /// Bytes queued by this batch (heads and bodies).
    pub queued: u64,
}

impl Output {
    /// Starts a batch for `connection`.
    pub fn new(connection: ConnectionId) -> Output {
        Output {
            connection,
            bytes: None,
            queued: 0,
        }
    }

    /// The vector heads are written into (taken from the driver's pool on first use).
    pub fn bytes<D: Driver>(&mut self, driver: &mut D) -> &mut Vec<u8> {
        self.bytes.get_or_insert_with(|| driver.take_vec())
    }

    /// Queues a body chunk after everything written so far.
    pub fn chunk<D: Driver>(&mut self, driver: &mut D, chunk: Chunk) {
        self.seal(driver);
        self.queued += chunk.len();
        driver.send(self.connection, chunk);
    }

    fn seal<D: Driver>(&mut self, driver: &mut D) {
        if let Some(bytes) = self.bytes.take() {
            self.queued += bytes.len() as u64;
            driver.send(self.connection, Chunk::Owned(bytes));
        }
    }

    /// Queues whatever is still being assembled.
    pub fn finish<D: Driver>(mut self, driver: &mut D) {
        self.seal(driver);
    }
}
