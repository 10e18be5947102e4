//! The generation counter of every slot, kept the same way by both completion drivers
//! (`ReadinessDriver` and `UringDriver`): a [`ConnectionId`] names one occupant of a slot,
//! so a completion or call meant for a closed connection never reaches the next one in the
//! same slot.
//!
//! Invariant: each new occupant of a slot gets the slot's next generation (wrapping after
//! 2³² occupants); there is one counter per slot ever used, none is ever dropped.

use super::slot_table::SlotTable;
use super::timer_wheel::TimerHandle;
use crate::driver::ConnectionId;

/// What the shared mechanism reads of a driver's per-connection state: the generation of
/// the slot's occupant and its one timer.
pub(crate) trait Occupant {
    /// The occupant's generation.
    fn generation(&self) -> u32;
    /// Gives the occupant its generation (once, as it moves in).
    fn set_generation(&mut self, generation: u32);
    /// The occupant's timer handle, while armed.
    fn timer(&mut self) -> &mut Option<TimerHandle>;
}

/// The connection `id` names, if it is still the slot's occupant.
pub(crate) fn current<C: Occupant>(
    connections: &mut SlotTable<C>,
    id: ConnectionId,
) -> Option<&mut C> {
    connections
        .get_mut(id.index())
        .filter(|connection| connection.generation() == id.generation)
}

/// Generation counters by slot.
#[derive(Default)]
pub(crate) struct Generations {
    next: Vec<u32>,
}

impl Generations {
    /// The generation of a new occupant of `slot` (the slot's counter moves on).
    pub(crate) fn next(&mut self, slot: usize) -> u32 {
        if slot >= self.next.len() {
            self.next.resize(slot + 1, 0);
        }
        let generation = self.next[slot];
        self.next[slot] = generation.wrapping_add(1);
        generation
    }

    /// Gives the new occupant of `slot` its generation; returns its id.
    pub(crate) fn stamp<C: Occupant>(
        &mut self,
        connections: &mut SlotTable<C>,
        slot: usize,
    ) -> ConnectionId {
        let generation = self.next(slot);
        if let Some(connection) = connections.get_mut(slot) {
            connection.set_generation(generation);
        }
        ConnectionId {
            slot: slot as u32,
            generation,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_occupant_of_a_slot_gets_a_new_generation() {
        let mut generations = Generations::default();
        assert_eq!(generations.next(3), 0);
        assert_eq!(generations.next(3), 1);
        assert_eq!(generations.next(0), 0, "slots count apart");
        assert_eq!(generations.next(3), 2);
    }
}
