//! Seeded, stateless random draws: every property of an object is a pure function of
//! (seed, object id, which property), so two processes agree without talking; plus the
//! distributions PolyMix uses (exponential, log-normal, normal, uniform).

/// SplitMix64's finaliser: a well-mixed 64-bit hash of `value`.
pub fn mix(value: u64) -> u64 {
    let mut z = value.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform draw in `(0, 1)` for (`seed`, `id`, `property`).
pub fn unit(seed: u64, id: u64, property: u64) -> f64 {
    let bits = mix(seed ^ mix(id ^ mix(property)));
    // 53 bits, shifted away from 0 so that ln() is finite.
    ((bits >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// Exponential with this mean.
pub fn exponential(mean: f64, uniform: f64) -> f64 {
    -mean * uniform.ln()
}

/// Standard normal from two uniforms (Box–Muller).
pub fn standard_normal(first: f64, second: f64) -> f64 {
    (-2.0 * first.ln()).sqrt() * (std::f64::consts::TAU * second).cos()
}

/// Log-normal with this mean and standard deviation (of the variable, not of its log), as
/// Polygraph's `logn(mean, sd)`.
pub fn log_normal(mean: f64, sd: f64, first: f64, second: f64) -> f64 {
    let sigma2 = (1.0 + (sd * sd) / (mean * mean)).ln();
    let mu = mean.ln() - sigma2 / 2.0;
    (mu + sigma2.sqrt() * standard_normal(first, second)).exp()
}

/// A sequential generator for draws that need no agreement (think times, robots' choices).
#[derive(Clone, Debug)]
pub struct Sequence {
    seed: u64,
    counter: u64,
}

impl Sequence {
    /// A sequence from `seed`.
    pub fn new(seed: u64) -> Sequence {
        Sequence { seed, counter: 0 }
    }

    /// The next uniform draw in `(0, 1)`.
    pub fn unit(&mut self) -> f64 {
        self.counter = self.counter.wrapping_add(1);
        unit(self.seed, self.counter, 0x5e9)
    }

    /// A normal draw with this mean and standard deviation, never below zero (think times).
    pub fn normal_at_least_zero(&mut self, mean: f64, sd: f64) -> f64 {
        let (first, second) = (self.unit(), self.unit());
        (mean + sd * standard_normal(first, second)).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_of(values: impl Iterator<Item = f64>) -> (f64, f64) {
        let values: Vec<f64> = values.collect();
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64;
        (mean, variance.sqrt())
    }

    #[test]
    fn distributions_have_their_moments() {
        let n = 200_000u64;
        let (mean, _) = mean_of((0..n).map(|id| exponential(4.5, unit(1, id, 1))));
        assert!((mean - 4.5).abs() < 0.1, "exp mean {mean}");
        let (mean, sd) =
            mean_of((0..n).map(|id| log_normal(25.0, 10.0, unit(1, id, 2), unit(1, id, 3))));
        assert!(
            (mean - 25.0).abs() < 0.3 && (sd - 10.0).abs() < 0.5,
            "{mean} {sd}"
        );
        let mut sequence = Sequence::new(7);
        let (mean, sd) = mean_of((0..n).map(|_| sequence.normal_at_least_zero(2.5, 1.0)));
        assert!(
            (mean - 2.5).abs() < 0.05 && (sd - 1.0).abs() < 0.05,
            "{mean} {sd}"
        );
    }

    #[test]
    fn draws_are_a_function_of_their_inputs() {
        assert_eq!(unit(3, 10, 1), unit(3, 10, 1));
        assert_ne!(unit(3, 10, 1), unit(3, 11, 1));
        assert_ne!(unit(3, 10, 1), unit(3, 10, 2));
        assert!((0..10_000).all(|id| {
            let u = unit(9, id, 0);
            u > 0.0 && u < 1.0
        }));
    }
}
