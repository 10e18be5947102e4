//! Small helpers shared by the experiments to build figures and sentences from measured
//! points: axes, series, relative changes, medians, number formatting, and a warning about
//! other load on the machine.

use coldwire_report::{Axis, Figure, Point, Scale, Series};

/// An axis.
pub fn axis(label: &str, unit: &str, scale: Scale) -> Axis {
    Axis {
        label: label.to_owned(),
        unit: unit.to_owned(),
        scale,
    }
}

/// A figure with its series (points sorted by x).
pub fn figure(
    id: &str,
    title: &str,
    reproduces: Option<&str>,
    x: Axis,
    y: Axis,
    series: Vec<Series>,
    caption: &str,
) -> Figure {
    Figure {
        id: id.to_owned(),
        title: title.to_owned(),
        reproduces: reproduces.map(str::to_owned),
        x,
        y,
        series: series
            .into_iter()
            .map(|mut series| {
                series.points.sort_by(|a, b| a.x.total_cmp(&b.x));
                series
            })
            .collect(),
        caption: (!caption.is_empty()).then(|| caption.to_owned()),
    }
}

/// A series from `(x, y)` pairs, leaving out non-finite values.
pub fn series(name: &str, points: impl IntoIterator<Item = (f64, f64)>) -> Series {
    Series {
        name: name.to_owned(),
        points: points
            .into_iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|(x, y)| Point { x, y })
            .collect(),
    }
}

/// Relative change from `from` to `to` in percent (`None` when `from` is not positive).
pub fn percent_change(from: f64, to: f64) -> Option<f64> {
    (from > 0.0 && to.is_finite()).then(|| (to - from) / from * 100.0)
}

/// `+12%` / `−44%`.
pub fn format_percent(percent: Option<f64>) -> String {
    match percent {
        Some(value) if value < 0.0 => format!("−{:.0}%", -value),
        Some(value) => format!("+{value:.0}%"),
        None => "n/a".to_owned(),
    }
}

/// A number with thousands separators and no decimals (`48,213`).
pub fn thousands(value: f64) -> String {
    if !value.is_finite() {
        return "n/a".to_owned();
    }
    let rounded = value.round() as i64;
    let digits = rounded.unsigned_abs().to_string();
    let mut grouped = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    if rounded < 0 {
        format!("−{grouped}")
    } else {
        grouped
    }
}

/// Two significant decimals for small values, fewer for large ones.
pub fn short(value: f64) -> String {
    if !value.is_finite() {
        "n/a".to_owned()
    } else if value.abs() >= 100.0 {
        format!("{value:.0}")
    } else if value.abs() >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// Median of finite values (`NaN` for none).
pub fn median(values: &[f64]) -> f64 {
    let mut finite: Vec<f64> = values
        .iter()
        .copied()
        .filter(|value| value.is_finite())
        .collect();
    if finite.is_empty() {
        return f64::NAN;
    }
    finite.sort_by(f64::total_cmp);
    let middle = finite.len() / 2;
    if !finite.len().is_multiple_of(2) {
        finite[middle]
    } else {
        (finite[middle - 1] + finite[middle]) / 2.0
    }
}

/// A warning when other work kept the machine busy as the experiment started (its
/// one-minute load average from `/proc/loadavg` is above half the CPU count).
pub fn machine_load_warning() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let load: f64 = text.split_whitespace().next()?.parse().ok()?;
    let cpus = std::thread::available_parallelism().map_or(1, |cpus| cpus.get()) as f64;
    (load > cpus / 2.0).then(|| {
        format!(
            "the machine was busy with other work when this started (load average {load:.1} on {cpus:.0} CPUs): \
             absolute numbers are noisy; compare the series measured side by side in this run"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_and_formats() {
        assert_eq!(percent_change(100.0, 56.0).map(f64::round), Some(-44.0));
        assert_eq!(percent_change(0.0, 5.0), None);
        assert_eq!(format_percent(Some(-44.2)), "−44%");
        assert_eq!(format_percent(Some(3.6)), "+4%");
        assert_eq!(thousands(48_213.4), "48,213");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1_000_000.0), "1,000,000");
        assert_eq!(short(1.23456), "1.23");
        assert_eq!(median(&[3.0, 1.0, f64::NAN, 2.0]), 2.0);
        assert_eq!(median(&[1.0, 2.0]), 1.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn figures_sort_points_and_drop_non_finite_ones() {
        let figure = figure(
            "f",
            "t",
            None,
            axis("x", "", Scale::Linear),
            axis("y", "", Scale::Log),
            vec![series("a", [(2.0, 1.0), (1.0, f64::NAN), (0.0, 3.0)])],
            "",
        );
        let xs: Vec<f64> = figure.series[0]
            .points
            .iter()
            .map(|point| point.x)
            .collect();
        assert_eq!(xs, [0.0, 2.0]);
        assert_eq!(figure.caption, None);
    }
}
