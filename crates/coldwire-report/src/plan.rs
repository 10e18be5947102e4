//! What a figure will look like before anything is drawn: the points that can be drawn
//! (non-finite ones left out), each axis's effective scale and range (a logarithmic axis
//! holding a value ≤ 0 falls back to linear), the legend's corner, and the warnings that
//! explain every such decision. Pure arithmetic, so it is tested without a backend.

use std::ops::Range;

use crate::model::{Axis, Figure, Scale};

/// One axis as it will be drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct AxisPlan {
    /// The scale actually used (may differ from the record's, see the warnings).
    pub scale: Scale,
    /// Value range shown.
    pub range: Range<f64>,
    /// `label (unit)`, or `label` alone for a unitless count.
    pub description: String,
}

/// Which corner of the plot area the legend goes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LegendCorner {
    /// Top left.
    UpperLeft,
    /// Top right.
    UpperRight,
    /// Bottom left.
    LowerLeft,
    /// Bottom right.
    LowerRight,
}

/// A figure ready to draw.
#[derive(Clone, Debug)]
pub struct PlotPlan {
    /// Each series' name and drawable points, in the record's order.
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    /// Horizontal axis.
    pub x: AxisPlan,
    /// Vertical axis.
    pub y: AxisPlan,
    /// Where the legend covers the fewest points.
    pub legend: LegendCorner,
    /// Why the drawing differs from the record (fallbacks, dropped points).
    pub warnings: Vec<String>,
}

/// Largest magnitude drawn: no measurement comes near it, and plotters' tick arithmetic
/// overflows (or never ends) on ranges near `f64::MAX`.
const LARGEST_PLOTTED: f64 = 1e100;

/// Most decades a log axis spans; wider data are drawn linear (plotters' log ticks never
/// finish on a range of some hundreds of decades, and no plot is readable at that width).
const MAX_LOG_DECADES: f64 = 60.0;

fn plottable(value: f64) -> bool {
    value.is_finite() && value.abs() <= LARGEST_PLOTTED
}

/// `label (unit)`, or just `label` when the unit is empty.
pub fn axis_description(axis: &Axis) -> String {
    if axis.unit.trim().is_empty() {
        axis.label.clone()
    } else {
        format!("{} ({})", axis.label, axis.unit)
    }
}

/// Plans `figure`: see the module documentation.
pub fn plan(figure: &Figure) -> PlotPlan {
    let mut warnings = Vec::new();
    let series: Vec<(String, Vec<(f64, f64)>)> = figure
        .series
        .iter()
        .map(|series| {
            let finite: Vec<(f64, f64)> = series
                .points
                .iter()
                .filter(|point| plottable(point.x) && plottable(point.y))
                .map(|point| (point.x, point.y))
                .collect();
            let dropped = series.points.len() - finite.len();
            if dropped > 0 {
                warnings.push(format!(
                    "figure `{}`, series `{}`: {dropped} point(s) with a non-finite value (NaN or infinity) or one beyond ±1e100 were left out of the plot",
                    figure.id, series.name
                ));
            }
            (series.name.clone(), finite)
        })
        .collect();
    if series.iter().all(|(_, points)| points.is_empty()) {
        warnings.push(format!(
            "figure `{}` has no points to draw: the plot shows empty axes",
            figure.id
        ));
    }
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.1))
        .collect();
    let x = plan_axis(
        &figure.id,
        "horizontal",
        &figure.x,
        &xs,
        false,
        &mut warnings,
    );
    let y = plan_axis(&figure.id, "vertical", &figure.y, &ys, true, &mut warnings);
    let legend = emptiest_corner(&series, &x, &y);
    PlotPlan {
        series,
        x,
        y,
        legend,
        warnings,
    }
}

fn plan_axis(
    figure_id: &str,
    which: &str,
    axis: &Axis,
    values: &[f64],
    include_zero: bool,
    warnings: &mut Vec<String>,
) -> AxisPlan {
    let description = axis_description(axis);
    let mut scale = axis.scale;
    if scale == Scale::Log
        && let Some(bad) = values.iter().find(|value| **value <= 0.0)
    {
        warnings.push(format!(
            "figure `{figure_id}`: the {which} axis ({description}) is logarithmic but holds the value {bad}, which a log scale cannot show: drawn linear instead"
        ));
        scale = Scale::Linear;
    }
    if scale == Scale::Log
        && let Some((low, high)) = extent(values)
        && (high / low).log10() > MAX_LOG_DECADES
    {
        warnings.push(format!(
            "figure `{figure_id}`: the {which} axis ({description}) is logarithmic but its values span {:.0} decades, more than {MAX_LOG_DECADES}: drawn linear instead",
            (high / low).log10()
        ));
        scale = Scale::Linear;
    }
    let range = match scale {
        Scale::Log => log_range(values),
        Scale::Linear => linear_range(values, include_zero),
    };
    AxisPlan {
        scale,
        range,
        description,
    }
}

/// The data between the nearest 1-2-5 steps (…, 50, 100, 200, 500, 1000, …) below the
/// smallest value and above the largest, so the ends are round and no decade is wasted.
fn log_range(values: &[f64]) -> Range<f64> {
    let Some((low, high)) = extent(values) else {
        return 1.0..10.0;
    };
    let step_at_or_below = |value: f64| {
        let decade = 10f64.powf(value.log10().floor());
        [5.0, 2.0, 1.0]
            .into_iter()
            .map(|m| m * decade)
            .find(|step| *step <= value * (1.0 + 1e-9))
            .unwrap_or(decade)
    };
    let step_above = |value: f64| {
        let decade = 10f64.powf(value.log10().floor());
        [1.0, 2.0, 5.0, 10.0]
            .into_iter()
            .map(|m| m * decade)
            .find(|step| *step > value * 1.05)
            .unwrap_or(decade * 20.0)
    };
    step_at_or_below(low / 1.05)..step_above(high)
}

/// The data with a little room on both sides; from zero when asked and the data are
/// non-negative (a throughput that drops from 10k to 9k should not look like a collapse).
fn linear_range(values: &[f64], include_zero: bool) -> Range<f64> {
    let Some((mut low, high)) = extent(values) else {
        return 0.0..1.0;
    };
    if include_zero && low >= 0.0 {
        low = 0.0;
    }
    if high == low {
        let room = if low == 0.0 { 1.0 } else { low.abs() * 0.1 };
        let start = if low >= 0.0 {
            (low - room).max(0.0)
        } else {
            low - room
        };
        return start..high + room;
    }
    let room = (high - low) * 0.05;
    let start = if low >= 0.0 && (low == 0.0 || low - room < 0.0) {
        0.0
    } else {
        low - room
    };
    start..high + room
}

fn extent(values: &[f64]) -> Option<(f64, f64)> {
    values.iter().fold(None, |extent, &value| match extent {
        None => Some((value, value)),
        Some((low, high)) => Some((low.min(value), high.max(value))),
    })
}

/// Position of `value` along `axis`, 0 at the start and 1 at the end.
fn fraction(axis: &AxisPlan, value: f64) -> f64 {
    let (start, end, value) = match axis.scale {
        Scale::Log => (
            axis.range.start.log10(),
            axis.range.end.log10(),
            value.log10(),
        ),
        Scale::Linear => (axis.range.start, axis.range.end, value),
    };
    if end > start {
        (value - start) / (end - start)
    } else {
        0.5
    }
}

/// The corner whose 40 % × 40 % box holds the fewest points; top right on a tie.
fn emptiest_corner(
    series: &[(String, Vec<(f64, f64)>)],
    x: &AxisPlan,
    y: &AxisPlan,
) -> LegendCorner {
    let corners = [
        LegendCorner::UpperRight,
        LegendCorner::UpperLeft,
        LegendCorner::LowerRight,
        LegendCorner::LowerLeft,
    ];
    let mut counts = [0usize; 4];
    for &(px, py) in series.iter().flat_map(|(_, points)| points) {
        let (fx, fy) = (fraction(x, px), fraction(y, py));
        let (right, left, top, bottom) = (fx >= 0.6, fx <= 0.4, fy >= 0.6, fy <= 0.4);
        for (index, inside) in [right && top, left && top, right && bottom, left && bottom]
            .into_iter()
            .enumerate()
        {
            counts[index] += usize::from(inside);
        }
    }
    let best = (0..4).min_by_key(|&index| counts[index]).unwrap_or(0);
    corners[best]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Point, Series};

    fn figure(x_scale: Scale, y_scale: Scale, points: &[(f64, f64)]) -> Figure {
        Figure {
            id: "f".into(),
            title: "t".into(),
            reproduces: None,
            x: Axis {
                label: "cold connections".into(),
                unit: String::new(),
                scale: x_scale,
            },
            y: Axis {
                label: "throughput".into(),
                unit: "requests/s".into(),
                scale: y_scale,
            },
            series: vec![Series {
                name: "epoll".into(),
                points: points.iter().map(|&(x, y)| Point { x, y }).collect(),
            }],
            caption: None,
        }
    }

    #[test]
    fn log_axis_spans_whole_decades() {
        let plan = plan(&figure(
            Scale::Log,
            Scale::Linear,
            &[(1.0, 5.0), (15_000.0, 3.0)],
        ));
        assert_eq!(plan.x.scale, Scale::Log);
        assert_eq!(plan.x.range, 0.5..20_000.0);
        assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
    }

    #[test]
    fn log_axis_with_zero_falls_back_to_linear_and_says_so() {
        let plan = plan(&figure(Scale::Log, Scale::Log, &[(0.0, 5.0), (100.0, 3.0)]));
        assert_eq!(plan.x.scale, Scale::Linear);
        assert_eq!(plan.y.scale, Scale::Log);
        assert_eq!(plan.warnings.len(), 1, "{:?}", plan.warnings);
        assert!(plan.warnings[0].contains("cold connections"));
        assert!(plan.warnings[0].contains("linear"));
    }

    #[test]
    fn non_finite_points_are_dropped_with_a_warning() {
        let plan = plan(&figure(
            Scale::Linear,
            Scale::Linear,
            &[(1.0, f64::NAN), (2.0, 3.0)],
        ));
        assert_eq!(plan.series[0].1, vec![(2.0, 3.0)]);
        assert!(
            plan.warnings[0].contains("non-finite"),
            "{:?}",
            plan.warnings
        );
    }

    #[test]
    fn linear_vertical_axis_starts_at_zero_for_positive_data() {
        let plan = plan(&figure(
            Scale::Linear,
            Scale::Linear,
            &[(1.0, 9_000.0), (2.0, 10_000.0)],
        ));
        assert_eq!(plan.y.range.start, 0.0);
        assert!(plan.y.range.end >= 10_000.0);
        assert_eq!(plan.y.description, "throughput (requests/s)");
        assert_eq!(plan.x.description, "cold connections");
    }

    #[test]
    fn legend_avoids_the_data() {
        // A falling line fills the top left and bottom right; the top right is empty.
        let points: Vec<(f64, f64)> = (0..10).map(|i| (f64::from(i), f64::from(10 - i))).collect();
        assert_eq!(
            plan(&figure(Scale::Linear, Scale::Linear, &points)).legend,
            LegendCorner::UpperRight
        );
        let rising: Vec<(f64, f64)> = (0..10).map(|i| (f64::from(i), f64::from(i))).collect();
        assert_eq!(
            plan(&figure(Scale::Linear, Scale::Linear, &rising)).legend,
            LegendCorner::UpperLeft
        );
    }
}
