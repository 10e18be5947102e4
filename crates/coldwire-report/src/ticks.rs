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

#[cfg(test)]
mod tests {
    use super::format_tick;

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
