//! The generation counter of every slot, kept the same way by both completion drivers
//! (`ReadinessDriver` and `UringDriver`): a [`ConnectionId`](crate::ConnectionId) names one
//! occupant of a slot, so a completion or call meant for a closed connection never reaches
//! the next one in the same slot.
//!
//! Invariant: each new occupant of a slot gets the slot's next generation (wrapping after
//! 2³² occupants); there is one counter per slot ever used, none is ever dropped.

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
