//! The timer wheel's tests: unit cases, and a property test against a naive model.

use super::*;
use proptest::prelude::*;

const MILLI: Duration = Duration::from_millis(1);

fn collect(wheel: &mut TimerWheel<u32>, now: Instant) -> Vec<u32> {
    let mut fired = Vec::new();
    let count = wheel.expire(now, |payload| fired.push(payload));
    assert_eq!(count, fired.len());
    fired.sort_unstable();
    fired
}

#[test]
fn fires_at_rounded_up_deadline_never_early() {
    let start = Instant::now();
    let mut wheel = TimerWheel::new(Duration::from_millis(10), 8, start);
    wheel.insert(start + Duration::from_millis(15), 1);
    wheel.insert(start + Duration::from_millis(20), 2);
    wheel.insert(start, 3);
    assert_eq!(wheel.len(), 3);
    assert_eq!(wheel.next_deadline_hint(), Some(start));
    assert_eq!(collect(&mut wheel, start), vec![3]);
    assert_eq!(
        wheel.next_deadline_hint(),
        Some(start + Duration::from_millis(20))
    );
    assert_eq!(collect(&mut wheel, start + 19 * MILLI), vec![]);
    assert_eq!(collect(&mut wheel, start + 20 * MILLI), vec![1, 2]);
    assert!(wheel.is_empty());
    assert_eq!(wheel.next_deadline_hint(), None);
}

#[test]
fn later_rounds_stay_until_due() {
    let start = Instant::now();
    let mut wheel = TimerWheel::new(MILLI, 4, start);
    // Ticks 1, 5 and 9 share slot 1.
    for (tick, payload) in [(1, 1), (5, 5), (9, 9)] {
        wheel.insert(start + tick * MILLI, payload);
    }
    assert_eq!(collect(&mut wheel, start + 4 * MILLI), vec![1]);
    assert_eq!(wheel.next_deadline_hint(), Some(start + 5 * MILLI));
    assert_eq!(collect(&mut wheel, start + 8 * MILLI), vec![5]);
    assert_eq!(wheel.len(), 1);
    assert_eq!(collect(&mut wheel, start + 9 * MILLI), vec![9]);
}

#[test]
fn overdue_insert_fires_on_next_expire() {
    let start = Instant::now();
    let mut wheel = TimerWheel::new(MILLI, 16, start);
    assert_eq!(collect(&mut wheel, start + 100 * MILLI), vec![]);
    let handle = wheel.insert(start + 50 * MILLI, 7);
    assert_eq!(wheel.next_deadline_hint(), Some(start + 50 * MILLI));
    assert!(wheel.rearm(handle, start + 40 * MILLI));
    assert_eq!(wheel.fire_instant(handle), Some(start + 40 * MILLI));
    assert_eq!(collect(&mut wheel, start + 100 * MILLI), vec![7]);
    assert!(!wheel.contains(handle));
}

#[test]
fn stale_handles_never_touch_other_timers() {
    let start = Instant::now();
    let mut wheel = TimerWheel::new(MILLI, 16, start);
    let first = wheel.insert(start + 5 * MILLI, 1);
    assert_eq!(wheel.cancel(first), Some(1));
    assert_eq!(wheel.cancel(first), None);
    let second = wheel.insert(start + 5 * MILLI, 2);
    assert_ne!(first, second, "reused storage gets a new generation");
    assert_eq!(wheel.cancel(first), None);
    assert!(!wheel.rearm(first, start));
    assert!(wheel.contains(second));
    assert_eq!(collect(&mut wheel, start + 5 * MILLI), vec![2]);
    assert_eq!(wheel.cancel(second), None);
}

#[test]
fn huge_jump_visits_each_slot_once() {
    let start = Instant::now();
    let mut wheel = TimerWheel::new(Duration::from_nanos(1), DEFAULT_SLOTS, start);
    for payload in 0..5000u32 {
        wheel.insert(
            start + Duration::from_nanos(u64::from(payload) * 997),
            payload,
        );
    }
    let far = start + Duration::from_secs(3600 * 24 * 365);
    wheel.insert(far + Duration::from_secs(1), u32::MAX);
    let fired = collect(&mut wheel, far);
    assert_eq!(fired, (0..5000).collect::<Vec<_>>());
    assert_eq!(wheel.len(), 1);
    let hint = wheel.next_deadline_hint().expect("one timer left");
    assert!(hint > far && hint <= far + Duration::from_secs(1));
}

#[test]
fn rearm_moves_between_slots() {
    let start = Instant::now();
    let mut wheel = TimerWheel::new(MILLI, 8, start);
    let handle = wheel.insert(start + 3 * MILLI, 1);
    let other = wheel.insert(start + 3 * MILLI, 2);
    assert!(wheel.rearm(handle, start + 6 * MILLI));
    assert!(wheel.rearm(other, start + 11 * MILLI)); // same slot, next round
    assert_eq!(collect(&mut wheel, start + 5 * MILLI), vec![]);
    assert_eq!(collect(&mut wheel, start + 6 * MILLI), vec![1]);
    assert_eq!(collect(&mut wheel, start + 11 * MILLI), vec![2]);
}

#[test]
#[should_panic(expected = "power of two")]
fn rejects_non_power_of_two_slots() {
    let _ = TimerWheel::<u32>::new(MILLI, 1000, Instant::now());
}

#[derive(Debug, Clone)]
enum Operation {
    /// Deadline in microseconds after the current time (may be negative).
    Insert(i64),
    Cancel(usize),
    Rearm(usize, i64),
    /// Advance time by this many microseconds, then expire.
    Expire(u64),
}

fn operation() -> impl Strategy<Value = Operation> {
    prop_oneof![
        4 => (-3_000i64..40_000).prop_map(Operation::Insert),
        1 => any::<usize>().prop_map(Operation::Cancel),
        2 => (any::<usize>(), -3_000i64..40_000).prop_map(|(i, d)| Operation::Rearm(i, d)),
        3 => prop_oneof![0u64..5_000, 0u64..100_000, Just(0)].prop_map(Operation::Expire),
    ]
}

struct ModelTimer {
    deadline: Instant,
    handle: TimerHandle,
    live: bool,
}

fn offset(base: Instant, micros: i64) -> Instant {
    let magnitude = Duration::from_micros(micros.unsigned_abs());
    if micros < 0 {
        base - magnitude
    } else {
        base + magnitude
    }
}

proptest! {
    #[test]
    fn wheel_matches_naive_model(
        slots_log2 in 0u32..7,
        tick_micros in prop_oneof![Just(1000u64), 1u64..3000],
        ops in prop::collection::vec(operation(), 0..300),
    ) {
        // Leave room before `start` for negative deadlines.
        let start = Instant::now() + Duration::from_secs(1);
        let tick = Duration::from_micros(tick_micros);
        let mut wheel = TimerWheel::new(tick, 1 << slots_log2, start);
        let mut model: Vec<ModelTimer> = Vec::new();
        let mut now = start;
        let fire_instant = |deadline: Instant| {
            let nanos = deadline.saturating_duration_since(start).as_nanos() as u64;
            let tick_nanos = tick.as_nanos() as u64;
            start + Duration::from_nanos(nanos.div_ceil(tick_nanos) * tick_nanos)
        };
        for op in ops {
            match op {
                Operation::Insert(micros) => {
                    let deadline = offset(now, micros);
                    let payload = model.len() as u32;
                    let handle = wheel.insert(deadline, payload);
                    model.push(ModelTimer { deadline, handle, live: true });
                }
                Operation::Cancel(pick) if !model.is_empty() => {
                    let picked = pick % model.len();
                    let timer = &mut model[picked];
                    let expected = timer.live.then_some(picked as u32);
                    timer.live = false;
                    prop_assert_eq!(wheel.cancel(timer.handle), expected);
                }
                Operation::Rearm(pick, micros) if !model.is_empty() => {
                    let picked = pick % model.len();
                    let timer = &mut model[picked];
                    let deadline = offset(now, micros);
                    if timer.live {
                        timer.deadline = deadline;
                    }
                    prop_assert_eq!(wheel.rearm(timer.handle, deadline), timer.live);
                }
                Operation::Cancel(_) | Operation::Rearm(..) => {}
                Operation::Expire(micros) => {
                    now += Duration::from_micros(micros);
                    let fired = collect(&mut wheel, now);
                    let mut expected = Vec::new();
                    for (payload, timer) in model.iter_mut().enumerate() {
                        if timer.live && fire_instant(timer.deadline) <= now {
                            timer.live = false;
                            expected.push(payload as u32);
                        }
                    }
                    for &payload in &fired {
                        prop_assert!(model[payload as usize].deadline <= now, "fired early");
                    }
                    prop_assert_eq!(fired, expected);
                }
            }
            let live = model.iter().filter(|timer| timer.live);
            prop_assert_eq!(wheel.len(), live.clone().count());
            let earliest = live.clone().map(|timer| fire_instant(timer.deadline)).min();
            match (wheel.next_deadline_hint(), earliest) {
                (None, None) => {}
                (Some(hint), Some(earliest)) => prop_assert!(hint <= earliest),
                (hint, earliest) => prop_assert!(false, "hint {hint:?} vs {earliest:?}"),
            }
            for timer in live {
                prop_assert_eq!(wheel.fire_instant(timer.handle), Some(fire_instant(timer.deadline)));
            }
        }
    }
}
