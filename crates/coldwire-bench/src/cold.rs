//! Cold connections (Banga & Mogul's load-adding client): opened before measurement at a
//! paced rate, then held for the whole run — idle (send nothing) or trickling a request
//! head one byte per interval, as a slow WAN client would. A receive stays armed on each,
//! so a close or reset by the server is seen at once and counted; closed ones are not
//! reopened (the count is the finding).

use std::time::{Duration, Instant};

use coldwire_io::{Chunk, Completion, ConnectionId, Driver};

use crate::config::ColdMode;
use crate::engine::{Cold, Engine, PhaseObserver, Progress, Slot};
use crate::error::BenchError;
use crate::schedule::{Arrivals, Schedule};

/// Most cold connects outstanding at once (keeps the server's accept queue from
/// overflowing, which would turn into slow SYN retransmissions).
const MAX_CONNECTING: u64 = 256;

impl<D: Driver> Engine<D> {
    fn cold_mut(&mut self, id: ConnectionId) -> Option<&mut Cold> {
        match self.slots.get_mut(id.index()) {
            Some(Slot::Cold(cold)) if cold.id == id => Some(cold),
            _ => None,
        }
    }

    /// Opens the configured cold connections, paced at `cold_connect_rate`, and waits until
    /// each is established or has failed (bounded: twice the pacing time plus `--timeout`).
    pub fn open_cold(&mut self, observer: &mut dyn PhaseObserver) -> Result<(), BenchError> {
        let wanted = self.config.cold as u64;
        if wanted == 0 {
            return Ok(());
        }
        let start = Instant::now();
        let pacing = Duration::from_secs_f64(wanted as f64 / self.config.cold_connect_rate);
        let deadline = start + pacing * 2 + self.config.timeout;
        let mut schedule =
            Schedule::new(start, self.config.cold_connect_rate, Arrivals::Constant, 0);
        let mut next_progress = start;
        loop {
            let now = Instant::now();
            self.now = now;
            if self.stopped() || now >= deadline {
                break;
            }
            let settled = self.cold.established + self.cold.failed;
            while self.cold.attempted < wanted
                && schedule.peek() <= now
                && self.cold.attempted - settled < MAX_CONNECTING
            {
                schedule.advance();
                self.connect_cold();
            }
            if self.cold.established + self.cold.failed >= wanted {
                break;
            }
            if now >= next_progress {
                next_progress = now + Duration::from_millis(250);
                observer.progress(&Progress {
                    label: "opening cold connections".into(),
                    elapsed: now - start,
                    planned: pacing,
                    measuring: false,
                    completed: self.cold.established,
                    errors: self.cold.failed,
                    cold_held: self.cold.held,
                    requests_planned: None,
                    opening_cold: true,
                });
            }
            let wake = schedule.peek().min(next_progress).min(deadline);
            self.turn(wake.saturating_duration_since(now))?;
        }
        Ok(())
    }

    fn connect_cold(&mut self) {
        let targets = &self.config.cold_addresses;
        let endpoint = if targets.is_empty() {
            self.workload.endpoints()[0]
        } else {
            targets[self.cold.attempted as usize % targets.len()]
        };
        self.cold.attempted += 1;
        match self.driver.connect(endpoint) {
            Ok(id) => {
                *self.slot_mut(id) = Slot::Cold(Cold {
                    id,
                    connected: false,
                    position: 0,
                });
                let deadline = self.now + self.config.timeout;
                self.driver.set_timer(id, deadline);
            }
            Err(_) => self.cold.failed += 1,
        }
    }

    pub(crate) fn handle_cold(&mut self, id: ConnectionId, completion: Completion) {
        match completion {
            Completion::Connected { .. } => {
                if let Some(cold) = self.cold_mut(id) {
                    cold.connected = true;
                }
                self.cold.established += 1;
                self.cold.held += 1;
                self.driver.recv(id);
                match self.config.cold_mode {
                    ColdMode::Idle => self.driver.cancel_timer(id),
                    ColdMode::Trickle => {
                        // Spread the first bytes over one interval.
                        let interval = self.config.trickle_interval;
                        let offset = interval.mul_f64(self.random.next_unit());
                        self.driver.set_timer(id, self.now + offset);
                    }
                }
            }
            Completion::Received { buffer, .. } => {
                // A response to a trickled head (or anything else): read and dropped.
                self.driver.recycle(buffer);
                self.driver.recv(id);
            }
            Completion::PeerClosed { .. } | Completion::Failed { .. } => self.lose_cold(id),
            Completion::TimerExpired { .. } => {
                let connected = self.cold_mut(id).is_some_and(|cold| cold.connected);
                if !connected {
                    self.lose_cold(id);
                    return;
                }
                self.trickle(id);
            }
            Completion::Sent { .. } | Completion::Accepted { .. } | Completion::Woken => {}
        }
    }

    fn trickle(&mut self, id: ConnectionId) {
        let head = self.trickle_head.clone();
        let Some(cold) = self.cold_mut(id) else {
            return;
        };
        if head.is_empty() {
            return;
        }
        let position = cold.position;
        cold.position = (position + 1) % head.len();
        self.driver
            .send(id, Chunk::Shared(head.slice(position..position + 1)));
        if let coldwire_io::Flush::Failed(_) = self.driver.flush(id) {
            self.lose_cold(id);
            return;
        }
        let next = self.now + self.config.trickle_interval;
        self.driver.set_timer(id, next);
    }

    /// A cold connection ended: never established (a failed connect), or closed by the
    /// server.
    fn lose_cold(&mut self, id: ConnectionId) {
        let Some(cold) = self.cold_mut(id) else {
            return;
        };
        if cold.connected {
            self.cold.closed_by_server += 1;
            self.cold.held -= 1;
            self.recorder.cold_closed_by_server += 1;
        } else {
            self.cold.failed += 1;
        }
        self.driver.close(id);
        *self.slot_mut(id) = Slot::Free;
    }
}
