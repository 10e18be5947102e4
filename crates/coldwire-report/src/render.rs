//! Draws a [`Figure`] as SVG (a string) and PNG (a file) with plotters: one line with
//! markers per series, each series its own colour and marker shape, a legend in the
//! emptiest corner, the title above, axes described as `label (unit)`, logarithmic axes
//! where the record asks for them and the data allow (see [`crate::plan`]), tick labels
//! such as `1k` and `10k`. Text uses the embedded font ([`crate::font`]).

use std::path::Path;

use anyhow::Context;
use plotters::coord::combinators::{BindKeyPoints, LogCoord, WithKeyPoints};
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::font::{FONT_FAMILY, ensure_registered};
use crate::model::{Figure, Scale};
use crate::plan::{LegendCorner, PlotPlan, plan};
use crate::ticks::{format_tick, log_ticks};

/// Width of every plot, in pixels (PNG) or user units (SVG).
pub const PLOT_WIDTH: u32 = 800;
/// Height of every plot.
pub const PLOT_HEIGHT: u32 = 500;

/// Line colours: the Okabe–Ito palette (distinguishable with common colour-blindness),
/// yellow left out (unreadable on white), then a few darker extras.
const COLOURS: [RGBColor; 9] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(136, 34, 85),
    RGBColor(102, 102, 51),
];

/// Marker outlines around (0, 0), in pixels. Six shapes against nine colours: the first
/// 18 series all differ in both.
fn marker_outline(index: usize) -> Vec<(i32, i32)> {
    match index % 6 {
        0 => (0..12)
            .map(|step| {
                let angle = f64::from(step) * std::f64::consts::PI / 6.0;
                (
                    (5.0 * angle.cos()).round() as i32,
                    (5.0 * angle.sin()).round() as i32,
                )
            })
            .collect(),
        1 => vec![(-4, -4), (4, -4), (4, 4), (-4, 4)],
        2 => vec![(0, -6), (5, 4), (-5, 4)],
        3 => vec![(0, -6), (6, 0), (0, 6), (-6, 0)],
        4 => vec![(0, 6), (5, -4), (-5, -4)],
        _ => vec![
            (-1, -6),
            (1, -6),
            (1, -1),
            (6, -1),
            (6, 1),
            (1, 1),
            (1, 6),
            (-1, 6),
            (-1, 1),
            (-6, 1),
            (-6, -1),
            (-1, -1),
        ],
    }
}

fn shifted(outline: Vec<(i32, i32)>, dx: i32) -> Vec<(i32, i32)> {
    outline.into_iter().map(|(x, y)| (x + dx, y)).collect()
}

/// Renders `figure` as an SVG document. Returns it with the warnings of [`plan`].
pub fn render_svg(figure: &Figure) -> anyhow::Result<(String, Vec<String>)> {
    ensure_registered()?;
    let plan = plan(figure);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH, PLOT_HEIGHT)).into_drawing_area();
        draw_plan(&root, figure, &plan)
            .with_context(|| format!("cannot draw figure `{}` as SVG", figure.id))?;
        root.present().map_err(plot_error)?;
    }
    Ok((svg, plan.warnings))
}

/// Renders `figure` as a PNG file at `path`. Returns the warnings of [`plan`].
pub fn render_png(figure: &Figure, path: &Path) -> anyhow::Result<Vec<String>> {
    ensure_registered()?;
    let plan = plan(figure);
    let root = BitMapBackend::new(path, (PLOT_WIDTH, PLOT_HEIGHT)).into_drawing_area();
    draw_plan(&root, figure, &plan)
        .with_context(|| format!("cannot draw figure `{}` as PNG", figure.id))?;
    root.present()
        .map_err(plot_error)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(plan.warnings)
}

fn plot_error<E: std::fmt::Display>(error: E) -> anyhow::Error {
    anyhow::anyhow!("plotting failed: {error}")
}

/// Picks the concrete coordinate types (linear or log, per axis) and draws.
fn draw_plan<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    figure: &Figure,
    plan: &PlotPlan,
) -> anyhow::Result<()> {
    let (x, y) = (plan.x.range.clone(), plan.y.range.clone());
    match (plan.x.scale, plan.y.scale) {
        (Scale::Linear, Scale::Linear) => draw(root, figure, plan, linear(x), linear(y)),
        (Scale::Linear, Scale::Log) => draw(root, figure, plan, linear(x), log(y)),
        (Scale::Log, Scale::Linear) => draw(root, figure, plan, log(x), linear(y)),
        (Scale::Log, Scale::Log) => draw(root, figure, plan, log(x), log(y)),
    }
}

fn linear(range: std::ops::Range<f64>) -> RangedCoordf64 {
    range.into()
}

/// A log axis with our own ticks: plotters labels only powers of ten, which leaves an
/// axis spanning less than two decades with one or two labels.
fn log(range: std::ops::Range<f64>) -> WithKeyPoints<LogCoord<f64>> {
    let (labelled, grid) = log_ticks(range.start, range.end);
    range
        .log_scale()
        .with_key_points(labelled)
        .with_light_points(grid)
}

fn draw<DB, X, Y>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    figure: &Figure,
    plan: &PlotPlan,
    x_spec: X,
    y_spec: Y,
) -> anyhow::Result<()>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    root.fill(&WHITE).map_err(plot_error)?;
    let mut chart = ChartBuilder::on(root)
        .caption(&figure.title, (FONT_FAMILY, 22))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x_spec, y_spec)
        .map_err(plot_error)?;
    let tick = |value: &f64| format_tick(*value);
    chart
        .configure_mesh()
        .x_desc(plan.x.description.as_str())
        .y_desc(plan.y.description.as_str())
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .label_style((FONT_FAMILY, 14))
        .axis_desc_style((FONT_FAMILY, 16))
        .max_light_lines(4)
        .light_line_style(RGBColor(238, 238, 238))
        .bold_line_style(RGBColor(210, 210, 210))
        .draw()
        .map_err(plot_error)?;
    for (index, (name, points)) in plan.series.iter().enumerate() {
        let colour = COLOURS[index % COLOURS.len()];
        let line_style = colour.stroke_width(2);
        chart
            .draw_series(LineSeries::new(points.iter().copied(), line_style))
            .map_err(plot_error)?
            .label(name.as_str())
            .legend(move |(x, y)| {
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(0, 0), (24, 0)], line_style)
                    + Polygon::new(shifted(marker_outline(index), 12), colour.filled())
            });
        chart
            .draw_series(points.iter().map(|&point| {
                EmptyElement::at(point) + Polygon::new(marker_outline(index), colour.filled())
            }))
            .map_err(plot_error)?;
    }
    if !plan.series.is_empty() {
        chart
            .configure_series_labels()
            .position(match plan.legend {
                LegendCorner::UpperLeft => SeriesLabelPosition::UpperLeft,
                LegendCorner::UpperRight => SeriesLabelPosition::UpperRight,
                LegendCorner::LowerLeft => SeriesLabelPosition::LowerLeft,
                LegendCorner::LowerRight => SeriesLabelPosition::LowerRight,
            })
            .label_font((FONT_FAMILY, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(160, 160, 160))
            .margin(10)
            .legend_area_size(30)
            .draw()
            .map_err(plot_error)?;
    }
    Ok(())
}
