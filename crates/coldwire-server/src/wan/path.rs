//! The emulated wide-area path of one direction ([`PathModel`] and its per-connection state
//! [`PathState`]): when bytes received now may leave the relay on the other side.
//!
//! The model, for `len` bytes arriving at `now`:
//! 1. **Bottleneck** (`--bandwidth`, per connection, and `--aggregate-bandwidth`, shared by
//!    the worker's connections): the bytes are serialised behind what is already on the
//!    link — they start when the link is free and take `len × 8 / rate` — a token bucket
//!    with no burst, i.e. a link of that rate with a queue in front of it.
//! 2. **Propagation**: the one-way delay (half `--rtt` unless set per direction), plus a
//!    uniform `--jitter` sample in `[0, jitter]`.
//! 3. **Loss** (`--loss`): user space cannot drop bytes of a TCP stream, so the *effect* of
//!    a lost segment is modelled. The bytes count as `ceil(len / 1460)` segments; each is
//!    lost with the given probability and then delivered one retransmission timeout later
//!    (RTO = RTT + 200 ms as Linux computes it from a steady RTT, at least 200 ms), doubling
//!    on each repeated loss of the same segment. Like TCP's in-order delivery, a held
//!    segment stalls everything behind it: no byte leaves before the bytes received
//!    earlier.
//!
//! Connection set-up: the client's handshake completes at once on loopback, so the relay
//! connects upstream one one-way delay after the accept (when the SYN would arrive) and
//! holds the client's first bytes until one round trip plus one one-way delay after the
//! accept (when they would arrive had the client waited for the SYN-ACK): the server sees
//! the connection and the first request as late as over the WAN.
//!
//! Limits of the model: the endpoints' own TCP sees a clean loopback (no congestion window
//! reaction to loss: a real sender would also slow down after a loss); bandwidth is shaped per direction, not shared between
//! the two directions of a connection.

use std::time::{Duration, Instant};

/// TCP maximum segment size used to count segments for the loss model.
pub const SEGMENT_BYTES: usize = 1460;

/// Linux's minimum retransmission timeout.
pub const MIN_RTO: Duration = Duration::from_millis(200);

/// One direction's parameters (shared by every connection of a relay).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathModel {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Largest extra delay, drawn uniformly per piece (order is kept).
    pub jitter: Duration,
    /// Per-connection bottleneck in bits per second (`None`: unlimited).
    pub bits_per_second: Option<u64>,
    /// Probability that one segment is lost (0 to 1).
    pub loss: f64,
    /// Retransmission timeout of a lost segment (doubles on each repeated loss).
    pub rto: Duration,
}

impl PathModel {
    /// A path with `delay` one way and a round trip of `rtt` (which sets the RTO).
    pub fn new(delay: Duration, rtt: Duration) -> PathModel {
        PathModel {
            delay,
            jitter: Duration::ZERO,
            bits_per_second: None,
            loss: 0.0,
            rto: (rtt + MIN_RTO).max(MIN_RTO),
        }
    }
}

/// A link shared by several connections (the aggregate bandwidth limit).
#[derive(Clone, Copy, Debug, Default)]
pub struct SharedLink {
    /// Bits per second (`None`: unlimited).
    pub bits_per_second: Option<u64>,
    /// When the link is free again.
    free_at: Option<Instant>,
}

impl SharedLink {
    /// A shared link of `bits_per_second` (`None`: unlimited).
    pub fn new(bits_per_second: Option<u64>) -> SharedLink {
        SharedLink {
            bits_per_second,
            free_at: None,
        }
    }
}

/// One connection's state in one direction.
#[derive(Clone, Copy, Debug, Default)]
pub struct PathState {
    /// When this connection's own bottleneck is free again.
    free_at: Option<Instant>,
    /// When the last bytes are due (later bytes never leave before).
    last_due: Option<Instant>,
}

/// A small, fast, seeded generator (xorshift64*): the loss and jitter draws.
#[derive(Clone, Debug)]
pub struct Draws(u64);

impl Draws {
    /// A generator from `seed` (any value; 0 is mapped to a fixed non-zero state).
    pub fn new(seed: u64) -> Draws {
        Draws(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    /// A uniform draw in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let value = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        (value >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn transmission(len: usize, bits_per_second: Option<u64>) -> Duration {
    match bits_per_second {
        Some(rate) if rate > 0 => {
            Duration::from_nanos(((len as u128 * 8 * 1_000_000_000) / u128::from(rate)) as u64)
        }
        _ => Duration::ZERO,
    }
}

impl PathState {
    /// When `len` bytes that arrived at `now` may be sent on (see the module doc).
    pub fn schedule(
        &mut self,
        model: &PathModel,
        shared: &mut SharedLink,
        draws: &mut Draws,
        now: Instant,
        len: usize,
    ) -> Instant {
        let own_free = self.free_at.unwrap_or(now).max(now);
        let shared_free = shared.free_at.unwrap_or(now).max(now);
        let start = own_free.max(shared_free);
        let own_done = start + transmission(len, model.bits_per_second);
        let shared_done = start + transmission(len, shared.bits_per_second);
        if model.bits_per_second.is_some() {
            self.free_at = Some(own_done);
        }
        if shared.bits_per_second.is_some() {
            shared.free_at = Some(shared_done);
        }
        let mut due = own_done.max(shared_done) + model.delay;
        if !model.jitter.is_zero() {
            due += model.jitter.mul_f64(draws.unit());
        }
        if model.loss > 0.0 {
            for _ in 0..len.div_ceil(SEGMENT_BYTES) {
                let mut rto = model.rto;
                // Bounded: a segment lost 16 times in a row is delivered anyway.
                for _ in 0..16 {
                    if draws.unit() >= model.loss {
                        break;
                    }
                    due += rto;
                    rto *= 2;
                }
            }
        }
        let due = self.last_due.map_or(due, |last| due.max(last));
        self.last_due = Some(due);
        due
    }

    /// No bytes of this direction are due before `instant` (the emulated handshake).
    pub fn hold_until(&mut self, instant: Instant) {
        self.last_due = Some(self.last_due.map_or(instant, |last| last.max(instant)));
    }

    /// When the last scheduled bytes are due (an end of stream goes then, or now + the
    /// delay when nothing is in flight).
    pub fn end_of_stream(&mut self, model: &PathModel, now: Instant) -> Instant {
        let due = self
            .last_due
            .map_or(now + model.delay, |last| last.max(now + model.delay));
        self.last_due = Some(due);
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(delay_ms: u64) -> PathModel {
        PathModel::new(
            Duration::from_millis(delay_ms),
            Duration::from_millis(2 * delay_ms),
        )
    }

    #[test]
    fn delay_alone_adds_the_one_way_delay() {
        let model = path(40);
        let mut state = PathState::default();
        let mut shared = SharedLink::default();
        let mut draws = Draws::new(1);
        let now = Instant::now();
        let due = state.schedule(&model, &mut shared, &mut draws, now, 1000);
        assert_eq!(due - now, Duration::from_millis(40));
        let later = now + Duration::from_millis(5);
        let due = state.schedule(&model, &mut shared, &mut draws, later, 1000);
        assert_eq!(due - later, Duration::from_millis(40));
    }

    #[test]
    fn bandwidth_serialises_bytes_behind_each_other() {
        let mut model = path(0);
        model.bits_per_second = Some(8_000_000); // 1 MB/s
        let mut state = PathState::default();
        let mut shared = SharedLink::default();
        let mut draws = Draws::new(1);
        let now = Instant::now();
        let mut due = now;
        for _ in 0..10 {
            due = state.schedule(&model, &mut shared, &mut draws, now, 100_000);
        }
        assert_eq!(due - now, Duration::from_secs(1), "1 MB at 1 MB/s");
    }

    #[test]
    fn the_shared_link_is_shared_by_connections() {
        let model = path(0);
        let mut first = PathState::default();
        let mut second = PathState::default();
        let mut shared = SharedLink::new(Some(8_000_000));
        let mut draws = Draws::new(1);
        let now = Instant::now();
        first.schedule(&model, &mut shared, &mut draws, now, 500_000);
        let due = second.schedule(&model, &mut shared, &mut draws, now, 500_000);
        assert_eq!(due - now, Duration::from_secs(1));
    }

    #[test]
    fn loss_holds_a_segment_for_the_rto_and_keeps_order() {
        let mut model = path(40);
        model.loss = 1.0 - f64::EPSILON; // every draw below: lost 16 times, bounded
        let mut state = PathState::default();
        let mut shared = SharedLink::default();
        let mut draws = Draws::new(7);
        let now = Instant::now();
        let lossy = state.schedule(&model, &mut shared, &mut draws, now, 100);
        assert!(lossy - now > Duration::from_secs(60), "{:?}", lossy - now);
        model.loss = 0.0;
        let after = state.schedule(&model, &mut shared, &mut draws, now, 100);
        assert_eq!(after, lossy, "later bytes never overtake a held segment");
    }

    #[test]
    fn loss_rate_matches_its_probability() {
        let mut model = path(40);
        model.loss = 0.05;
        let mut shared = SharedLink::default();
        let mut draws = Draws::new(42);
        let now = Instant::now();
        let trials = 20_000;
        let delayed = (0..trials)
            .filter(|_| {
                let mut state = PathState::default();
                state.schedule(&model, &mut shared, &mut draws, now, SEGMENT_BYTES) - now
                    > model.delay
            })
            .count();
        let rate = delayed as f64 / f64::from(trials);
        assert!((0.04..0.06).contains(&rate), "{rate}");
    }

    #[test]
    fn jitter_stays_within_its_bound_and_keeps_order() {
        let mut model = path(40);
        model.jitter = Duration::from_millis(10);
        let mut state = PathState::default();
        let mut shared = SharedLink::default();
        let mut draws = Draws::new(3);
        let now = Instant::now();
        let mut last = now;
        for step in 0..1000u64 {
            let at = now + Duration::from_micros(step * 10);
            let due = state.schedule(&model, &mut shared, &mut draws, at, 10);
            assert!(due >= last);
            assert!(due - at <= Duration::from_millis(50));
            last = due;
        }
    }
}
