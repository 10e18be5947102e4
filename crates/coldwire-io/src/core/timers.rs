//! Each connection's single timer, kept the same way by both driver families: armed and
//! re-armed on the loop's [`TimerWheel`] (re-arming moves the entry, O(1)), cancelled with
//! the connection, and expired once per loop turn — a timer that fires for a connection
//! closed since (its slot now holds another generation) is dropped, so it never reaches the
//! newcomer.
//!
//! Invariant: a connection's `timer` handle is `Some` exactly while its entry is on the
//! wheel; the entry carries the connection's id, generation included.

use std::time::Instant;

use super::generations::{Occupant, current};
use super::slot_table::SlotTable;
use super::timer_wheel::{TimerHandle, TimerWheel};
use crate::driver::{ConnectionId, DriverConfig};

/// The timers of one loop's connections.
pub(crate) struct ConnectionTimers {
    wheel: TimerWheel<ConnectionId>,
    /// The connections found due by the last expiry (kept for its allocation).
    due: Vec<ConnectionId>,
}

impl ConnectionTimers {
    /// A wheel of `config.timer_slots` slots of `config.timer_tick`, starting at `now`.
    pub(crate) fn new(config: &DriverConfig, now: Instant) -> Self {
        ConnectionTimers {
            wheel: TimerWheel::new(config.timer_tick, config.timer_slots, now),
            due: Vec::new(),
        }
    }

    /// Arms the timer `timer` of connection `id` for `deadline`, or moves it there if it
    /// is armed already.
    pub(crate) fn set(
        &mut self,
        timer: &mut Option<TimerHandle>,
        id: ConnectionId,
        deadline: Instant,
    ) {
        if let Some(handle) = *timer
            && self.wheel.rearm(handle, deadline)
        {
            return;
        }
        *timer = Some(self.wheel.insert(deadline, id));
    }

    /// Disarms `timer`, if armed.
    pub(crate) fn cancel(&mut self, timer: &mut Option<TimerHandle>) {
        if let Some(handle) = timer.take() {
            self.wheel.cancel(handle);
        }
    }

    /// The earliest instant a timer may fire (a deadline for the loop's wait).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.wheel.next_deadline_hint()
    }

    /// Fires the timers due at `now`: each connection still in `connections` under the
    /// same generation has its handle cleared and is passed to `fire`; the others are
    /// forgotten.
    pub(crate) fn expire<C: Occupant>(
        &mut self,
        now: Instant,
        connections: &mut SlotTable<C>,
        mut fire: impl FnMut(ConnectionId, &mut C),
    ) {
        let due = &mut self.due;
        self.wheel.expire(now, |id| due.push(id));
        for id in self.due.drain(..) {
            if let Some(connection) = current(connections, id) {
                *connection.timer() = None;
                fire(id, connection);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::core::generations::Generations;

    struct Occupied {
        generation: u32,
        timer: Option<TimerHandle>,
    }

    impl Occupant for Occupied {
        fn generation(&self) -> u32 {
            self.generation
        }
        fn set_generation(&mut self, generation: u32) {
            self.generation = generation;
        }
        fn timer(&mut self) -> &mut Option<TimerHandle> {
            &mut self.timer
        }
    }

    fn occupy(
        connections: &mut SlotTable<Occupied>,
        generations: &mut Generations,
    ) -> ConnectionId {
        let slot = connections.insert(Occupied {
            generation: 0,
            timer: None,
        });
        generations.stamp(connections, slot)
    }

    #[test]
    fn a_timer_fires_once_for_its_own_connection_only() {
        let start = Instant::now();
        let mut timers = ConnectionTimers::new(&DriverConfig::default(), start);
        let mut connections = SlotTable::new();
        let mut generations = Generations::default();
        let first = occupy(&mut connections, &mut generations);
        let deadline = start + Duration::from_millis(100);
        let timer = &mut connections.get_mut(first.index()).unwrap().timer;
        timers.set(timer, first, deadline);
        // Closed and its slot reused: the old timer must not reach the newcomer.
        connections.remove(first.index());
        let second = occupy(&mut connections, &mut generations);
        assert_eq!(second.slot, first.slot);
        let later = start + Duration::from_secs(1);
        let timer = &mut connections.get_mut(second.index()).unwrap().timer;
        timers.set(timer, second, later);
        let mut fired = Vec::new();
        timers.expire(later, &mut connections, |id, _| fired.push(id));
        assert_eq!(fired, [second]);
        assert!(connections.get_mut(second.index()).unwrap().timer.is_none());
        timers.expire(later, &mut connections, |id, _| fired.push(id));
        assert_eq!(fired.len(), 1, "once");
    }

    #[test]
    fn a_cancelled_timer_does_not_fire() {
        let start = Instant::now();
        let mut timers = ConnectionTimers::new(&DriverConfig::default(), start);
        let mut connections = SlotTable::new();
        let mut generations = Generations::default();
        let id = occupy(&mut connections, &mut generations);
        let timer = &mut connections.get_mut(id.index()).unwrap().timer;
        timers.set(timer, id, start);
        assert!(timers.next_deadline().is_some());
        timers.cancel(timer);
        assert!(timer.is_none());
        let mut fired = 0;
        timers.expire(start + Duration::from_secs(1), &mut connections, |_, _| {
            fired += 1
        });
        assert_eq!(fired, 0);
    }
}
