//! Plots as a reader sees them: the SVG names every series and both axes, log axes get
//! readable ticks, the PNG has the promised size and really has a drawing (and text, drawn
//! with the embedded font), and a log axis that cannot be log falls back with a warning.

mod common;

use coldwire_report::render::{PLOT_HEIGHT, PLOT_WIDTH};
use coldwire_report::{Point, Scale, render_png, render_svg};

/// The text content of every `<text>` element, trimmed.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|rest| {
            let start = rest.find('>')? + 1;
            let end = rest.find("</text>")?;
            Some(rest[start..end].trim().to_string())
        })
        .collect()
}

#[test]
fn svg_names_every_series_axis_and_the_title() {
    let record = common::record("cold-scaling");
    let figure = &record.figures[0];
    let (svg, warnings) = render_svg(figure).expect("renders");
    assert!(warnings.is_empty(), "unexpected warnings: {warnings:?}");
    assert!(
        svg.starts_with("<svg"),
        "not an SVG document: {}",
        &svg[..80.min(svg.len())]
    );
    let texts = svg_texts(&svg);
    for series in &figure.series {
        assert!(
            texts.contains(&series.name),
            "legend lacks {}: {texts:?}",
            series.name
        );
    }
    assert!(texts.contains(&"cold connections".to_string()), "{texts:?}");
    assert!(
        texts.contains(&"saturation throughput (requests/s)".to_string()),
        "{texts:?}"
    );
    assert!(texts.contains(&figure.title), "{texts:?}");
}

#[test]
fn log_axis_ticks_read_as_1k_and_10k() {
    let record = common::record("cold-scaling");
    let (svg, _) = render_svg(&record.figures[0]).expect("renders");
    let texts = svg_texts(&svg);
    for tick in ["1k", "10k"] {
        assert!(
            texts.contains(&tick.to_string()),
            "no `{tick}` tick: {texts:?}"
        );
    }
    assert!(
        !texts
            .iter()
            .any(|text| text.contains("e+") || text.contains("000.0")),
        "unreadable tick: {texts:?}"
    );
}

#[test]
fn log_axis_with_a_zero_is_drawn_linear_with_a_warning() {
    let mut record = common::record("cold-scaling");
    let figure = &mut record.figures[0];
    figure.series[0].points.insert(
        0,
        Point {
            x: 0.0,
            y: 10_000.0,
        },
    );
    let (svg, warnings) = render_svg(figure).expect("still renders");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("cold connections"), "{warnings:?}");
    assert!(warnings[0].contains("linear"), "{warnings:?}");
    assert!(svg_texts(&svg).contains(&"select".to_string()));

    let mut positive = common::record("cold-scaling");
    positive.figures[0].y.scale = Scale::Log;
    let (_, warnings) = render_svg(&positive.figures[0]).expect("renders");
    assert!(
        warnings.is_empty(),
        "positive data needs no fallback: {warnings:?}"
    );
}

#[test]
fn png_has_the_right_size_a_drawing_and_text() {
    let record = common::record("cold-scaling");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plot.png");
    render_png(&record.figures[0], &path).expect("renders");

    let decoder = png::Decoder::new(std::fs::File::open(&path).expect("png written"));
    let mut reader = decoder.read_info().expect("a valid PNG");
    let mut pixels = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut pixels).expect("decodes");
    assert_eq!((frame.width, frame.height), (PLOT_WIDTH, PLOT_HEIGHT));
    assert_eq!(frame.color_type, png::ColorType::Rgb, "plotters writes RGB");
    let width = frame.width as usize;
    let pixel = |x: usize, y: usize| {
        let at = (y * width + x) * 3;
        (pixels[at], pixels[at + 1], pixels[at + 2])
    };

    let total = width * frame.height as usize;
    let mut non_white = 0;
    let mut saturated = std::collections::HashSet::new();
    for y in 0..frame.height as usize {
        for x in 0..width {
            let (r, g, b) = pixel(x, y);
            if (r, g, b) != (255, 255, 255) {
                non_white += 1;
            }
            // Strongly coloured pixels: the series, never the grey grid or black text.
            if r.max(g).max(b) - r.min(g).min(b) > 100 {
                saturated.insert((r / 32, g / 32, b / 32));
            }
        }
    }
    assert!(
        non_white > total / 100,
        "almost blank: {non_white} of {total} pixels drawn"
    );
    assert!(
        non_white < total / 2,
        "mostly filled: {non_white} of {total} pixels drawn"
    );
    assert!(
        saturated.len() >= 4,
        "fewer colours than series: {saturated:?}"
    );

    // The title is text drawn with the embedded font: dark pixels in the top band.
    let dark_in_title = (0..30)
        .flat_map(|y| (200..600).map(move |x| (x, y)))
        .filter(|&(x, y)| {
            let (r, g, b) = pixel(x, y);
            u32::from(r) + u32::from(g) + u32::from(b) < 200
        })
        .count();
    assert!(
        dark_in_title > 50,
        "no title text drawn ({dark_in_title} dark pixels)"
    );
}

/// Values from the subnormal to `f64::MAX`, NaN and infinities, paired every way, on linear
/// and on log axes: each renders (plotters never sees a range it cannot tick), and what was
/// left out or drawn differently is warned about.
#[test]
fn extreme_values_render_with_warnings_never_hang_or_panic() {
    let values = [
        0.0,
        1e-320,
        -1e-300,
        1e-10,
        1.0,
        -1.0,
        1e10,
        1e100,
        -1e300,
        f64::MAX,
        f64::NAN,
        f64::NEG_INFINITY,
    ];
    let mut renders = 0;
    for &a in &values {
        for &b in &values {
            for scale in [Scale::Linear, Scale::Log] {
                let mut record = common::record("extreme");
                let figure = &mut record.figures[0];
                figure.x.scale = scale;
                figure.y.scale = scale;
                figure.series.truncate(1);
                figure.series[0].points = vec![
                    Point { x: a, y: b },
                    Point { x: b, y: a },
                    Point { x: 1.0, y: 1.0 },
                ];
                let (svg, warnings) = render_svg(figure).expect("renders");
                assert!(svg.contains("select"), "legend missing for ({a}, {b})");
                let odd = |v: f64| !v.is_finite() || v.abs() > 1e100;
                if odd(a) || odd(b) {
                    assert!(
                        warnings.iter().any(|w| w.contains("left out")),
                        "({a}, {b}) dropped silently: {warnings:?}"
                    );
                }
                if scale == Scale::Log && (a <= 0.0 || b <= 0.0) && !odd(a) && !odd(b) {
                    assert!(
                        warnings.iter().any(|w| w.contains("drawn linear")),
                        "({a}, {b}) on log axes without a warning: {warnings:?}"
                    );
                }
                renders += 1;
            }
        }
    }
    assert_eq!(renders, values.len() * values.len() * 2);
}

#[test]
fn empty_and_flat_figures_render() {
    let mut record = common::record("empty");
    let figure = &mut record.figures[0];
    figure.series.clear();
    let (_, warnings) = render_svg(figure).expect("renders empty axes");
    assert!(
        warnings.iter().any(|w| w.contains("no points")),
        "{warnings:?}"
    );

    figure.series = vec![common::series("flat", &[5.0, 5.0], 0.0, 0.0)];
    figure.x.scale = Scale::Linear;
    let (svg, warnings) = render_svg(figure).expect("a single repeated value renders");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(svg.contains("flat"));
}
