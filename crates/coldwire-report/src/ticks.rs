//! Tick labels people can read at a glance: `1k`, `10k`, `1.5M`, `0.25`, never
//! `10000.000` or `1e4`.

/// Formats an axis value compactly: thousands as `k`, millions as `M`, billions as `G`,
/// small values with at most three significant decimals, trailing zeros dropped.
pub fn format_tick(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    let magnitude = value.abs();
    let (scaled, suffix) = if magnitude >= 1e9 {
        (value / 1e9, "G")
    } else if magnitude >= 1e6 {
        (value / 1e6, "M")
    } else if magnitude >= 1e3 {
        (value / 1e3, "k")
    } else {
        (value, "")
    };
    format!("{}{suffix}", trim_decimal(scaled))
}

/// `value` with as few decimals as needed (at most 3 significant after the point for
/// values under 1, at most 2 otherwise).
fn trim_decimal(value: f64) -> String {
    let decimals = if value.abs() >= 1.0 || value == 0.0 {
        2
    } else {
        // Enough decimals to show three significant digits of 0.00123.
        (3.0 - value.abs().log10().floor()).clamp(1.0, 12.0) as usize - 1
    };
    let text = format!("{value:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    if text == "-0" { "0".to_string() } else { text }
}

/// Tick values for a logarithmic axis over `range` (positive, finite): labelled ticks on
/// the 1-2-5 steps (`10, 20, 50, 100, …`), thinned to powers of ten when that gives more
/// than [`MOST_LOG_LABELS`], and to every n-th power when even those are too many; on a
/// range inside one decade, every integer multiple (`200, 300, 400, 500`) so at least a few
/// values are labelled. Also the unlabelled grid lines: every integer multiple of each
/// power of ten, unless the axis spans more than ten decades.
pub fn log_ticks(start: f64, end: f64) -> (Vec<f64>, Vec<f64>) {
    let in_range = |value: &f64| *value >= start * (1.0 - 1e-9) && *value <= end * (1.0 + 1e-9);
    let first = start.log10().floor() as i32;
    let last = end.log10().ceil() as i32;
    let with_multiples = |multiples: &[f64]| -> Vec<f64> {
        (first..=last)
            .flat_map(|exponent| {
                let decade = 10f64.powi(exponent);
                multiples.iter().map(move |m| m * decade)
            })
            .filter(in_range)
            .collect()
    };
    let mut labelled = with_multiples(&[1.0, 2.0, 5.0]);
    if labelled.len() > MOST_LOG_LABELS {
        labelled = with_multiples(&[1.0]);
        let step = labelled.len().div_ceil(MOST_LOG_LABELS);
        if step > 1 {
            labelled = labelled.into_iter().step_by(step).collect();
        }
    } else if labelled.len() < 3 {
        labelled = with_multiples(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    }
    let grid = if last - first <= 10 {
        with_multiples(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    } else {
        Vec::new()
    };
    (labelled, grid)
}

/// Most labelled ticks on a log axis.
pub const MOST_LOG_LABELS: usize = 10;

#[cfg(test)]
mod tests {
    use super::{format_tick, log_ticks};

    #[test]
    fn thousands_and_millions_use_suffixes() {
        assert_eq!(format_tick(1000.0), "1k");
        assert_eq!(format_tick(10_000.0), "10k");
        assert_eq!(format_tick(15_000.0), "15k");
        assert_eq!(format_tick(2_500.0), "2.5k");
        assert_eq!(format_tick(1_000_000.0), "1M");
        assert_eq!(format_tick(3e9), "3G");
    }

    #[test]
    fn log_ticks_use_1_2_5_steps_then_powers_of_ten() {
        let (labels, grid) = log_ticks(100.0, 20_000.0);
        assert_eq!(labels, [100.0, 200.0, 500.0, 1e3, 2e3, 5e3, 1e4, 2e4]);
        assert!(grid.contains(&300.0) && grid.contains(&9e3));
        let (labels, _) = log_ticks(1.0, 1e9);
        assert_eq!(labels.len(), 10, "{labels:?}");
        assert_eq!(labels[0], 1.0);
        let (labels, grid) = log_ticks(1e-50, 1e50);
        assert!(labels.len() <= super::MOST_LOG_LABELS, "{labels:?}");
        assert!(grid.is_empty());
    }

    #[test]
    fn log_ticks_inside_one_decade_label_every_multiple() {
        let (labels, _) = log_ticks(20.0, 500.0);
        assert_eq!(labels, [20.0, 50.0, 100.0, 200.0, 500.0]);
        let (labels, _) = log_ticks(200.0, 500.0);
        assert_eq!(labels, [200.0, 300.0, 400.0, 500.0]);
    }

    #[test]
    fn small_values_keep_their_significant_digits() {
        assert_eq!(format_tick(0.0), "0");
        assert_eq!(format_tick(1.0), "1");
        assert_eq!(format_tick(0.5), "0.5");
        assert_eq!(format_tick(0.25), "0.25");
        assert_eq!(format_tick(0.001), "0.001");
        assert_eq!(format_tick(0.00123), "0.00123");
        assert_eq!(format_tick(12.5), "12.5");
        assert_eq!(format_tick(-200.0), "-200");
    }
}
