//! The HTML of the report page: a table of contents, then one `<section>` per experiment
//! with its findings, the comparison with the seed, every figure (an `<img>` whose source
//! is the SVG as a `data:` URI, the seed figure it reproduces named underneath), the
//! tables, the parameters, the machine, links to the raw files and the warnings.

use std::fmt::Write as _;

use base64::Engine as _;

use super::LoadedExperiment;
use super::escape::{escape_href, escape_html as esc};
use crate::model::{ExperimentRecord, Figure, Table};
use crate::render::{PLOT_HEIGHT, PLOT_WIDTH, render_svg};
use crate::summary::{figure_stem, machine_table, shell_words};
use crate::time::utc_time;

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222;line-height:1.45}\
h1{font-size:1.8rem}h2{border-bottom:2px solid #ddd;padding-bottom:.2rem;margin-top:3rem}h3{margin-top:1.6rem}\
nav ol{padding-left:1.4rem}.meta{color:#555}.quick{background:#fff4d6;padding:.1rem .4rem;border-radius:.3rem}\
figure{margin:1.5rem 0}figure img{max-width:100%;height:auto;border:1px solid #ddd}\
figcaption{font-size:.95rem;color:#333}.seed{font-weight:600}\
table{border-collapse:collapse;margin:.6rem 0}th,td{border:1px solid #ccc;padding:.25rem .6rem;text-align:left;vertical-align:top}th{background:#f3f3f3}\
pre{background:#f6f6f6;padding:.6rem;overflow-x:auto}code{font-family:ui-monospace,monospace}\
.warnings li{color:#8a4b00}";

/// The page for `experiments`, and the renderer's warnings.
pub fn render_page(experiments: &[LoadedExperiment]) -> anyhow::Result<(String, Vec<String>)> {
    let mut html = String::new();
    let mut all_warnings = Vec::new();
    html.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    html.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    html.push_str("<title>coldwire experiments</title>\n");
    let _ = writeln!(html, "<style>{STYLE}</style>\n</head>\n<body>");
    html.push_str("<h1>coldwire experiments</h1>\n");
    let _ = writeln!(
        html,
        "<p class=\"meta\">{} experiment(s), built by <code>coldwire report</code>. Each plot is \
         drawn from the experiment's <code>experiment.json</code>; the raw files are linked from \
         each section.</p>",
        experiments.len()
    );
    html.push_str("<nav>\n<h2>Contents</h2>\n<ol>\n");
    for (index, experiment) in experiments.iter().enumerate() {
        let record = &experiment.record;
        let _ = writeln!(
            html,
            "<li><a href=\"#{}\">{}</a> <span class=\"meta\">({}{})</span></li>",
            section_id(index, record),
            esc(&record.title),
            esc(&record.experiment),
            if record.quick { ", quick run" } else { "" }
        );
    }
    html.push_str("</ol>\n</nav>\n");
    for (index, experiment) in experiments.iter().enumerate() {
        let warnings = write_section(&mut html, index, experiment)?;
        all_warnings.extend(warnings);
    }
    html.push_str("</body>\n</html>\n");
    Ok((html, all_warnings))
}

/// A fragment id unique on the page even when two directories hold the same experiment.
fn section_id(index: usize, record: &ExperimentRecord) -> String {
    let slug: String = record
        .experiment
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("experiment-{}-{slug}", index + 1)
}

fn write_section(
    html: &mut String,
    index: usize,
    experiment: &LoadedExperiment,
) -> anyhow::Result<Vec<String>> {
    let record = &experiment.record;
    let base = &experiment.link_base;
    let _ = writeln!(html, "<section id=\"{}\">", section_id(index, record));
    let _ = writeln!(html, "<h2>{}</h2>", esc(&record.title));
    let _ = writeln!(
        html,
        "<p class=\"meta\"><code>{}</code> · started {} · took {:.1} s · directory <a href=\"{}\">{}</a>{}</p>",
        esc(&record.experiment),
        esc(&utc_time(record.started_unix_seconds)),
        record.duration_seconds,
        escape_href(if base.is_empty() { "./" } else { base }),
        esc(&experiment.dir.display().to_string()),
        if record.quick {
            " · <span class=\"quick\">quick run: proves the pipeline, not a measurement</span>"
        } else {
            ""
        }
    );
    if !record.reproduces.is_empty() {
        let _ = writeln!(
            html,
            "<p>Reproduces {}.</p>",
            esc(&record.reproduces.join("; "))
        );
    }
    if !record.description.trim().is_empty() {
        let _ = writeln!(html, "<p>{}</p>", esc(record.description.trim()));
    }
    let _ = writeln!(
        html,
        "<h3>How to reproduce</h3>\n<pre><code>{}</code></pre>",
        esc(&shell_words(&record.command))
    );
    bullet_list(html, "Findings", &record.findings, "");
    bullet_list(html, "Compared with the seed", &record.seed_comparison, "");
    let mut render_warnings = Vec::new();
    if !record.figures.is_empty() {
        html.push_str("<h3>Figures</h3>\n");
        for figure in &record.figures {
            render_warnings.extend(write_figure(html, record, figure, base)?);
        }
    }
    for table in &record.tables {
        write_table(html, table, true);
    }
    html.push_str("<h3>Parameters</h3>\n");
    write_parameters(html, &record.parameters);
    html.push_str("<h3>Machine</h3>\n");
    write_table(html, &machine_table(&record.machine), false);
    html.push_str("<h3>Raw files</h3>\n<ul>\n");
    let standard = ["experiment.json", "series.csv", "summary.md"].map(String::from);
    for file in standard.iter().chain(&record.raw_files) {
        let _ = writeln!(
            html,
            "<li><a href=\"{}\">{}</a></li>",
            escape_href(&format!("{base}{file}")),
            esc(file)
        );
    }
    html.push_str("</ul>\n");
    let warnings: Vec<String> = record
        .warnings
        .iter()
        .chain(&render_warnings)
        .cloned()
        .collect();
    bullet_list(html, "Warnings", &warnings, " class=\"warnings\"");
    html.push_str("</section>\n");
    Ok(render_warnings)
}

fn write_figure(
    html: &mut String,
    record: &ExperimentRecord,
    figure: &Figure,
    base: &str,
) -> anyhow::Result<Vec<String>> {
    let (svg, warnings) = render_svg(figure)?;
    let data = base64::engine::general_purpose::STANDARD.encode(svg.as_bytes());
    let _ = writeln!(
        html,
        "<figure>\n<img src=\"data:image/svg+xml;base64,{data}\" width=\"{PLOT_WIDTH}\" height=\"{PLOT_HEIGHT}\" alt=\"{}\">",
        esc(&figure.title)
    );
    html.push_str("<figcaption>");
    match &figure.reproduces {
        Some(seed) => {
            let _ = write!(
                html,
                "<span class=\"seed\">Reproduces {}.</span> ",
                esc(seed)
            );
        }
        None if !record.reproduces.is_empty() => {
            let _ = write!(
                html,
                "<span class=\"seed\">Part of the reproduction of {}.</span> ",
                esc(&record.reproduces.join("; "))
            );
        }
        None => {}
    }
    if let Some(caption) = &figure.caption {
        let _ = write!(html, "{} ", esc(caption));
    }
    let stem = format!("{base}{}", figure_stem(&figure.id));
    let _ = writeln!(
        html,
        "(<a href=\"{}\">SVG</a>, <a href=\"{}\">PNG</a>)</figcaption>\n</figure>",
        escape_href(&format!("{stem}.svg")),
        escape_href(&format!("{stem}.png"))
    );
    Ok(warnings)
}

fn bullet_list(html: &mut String, heading: &str, items: &[String], list_attributes: &str) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(html, "<h3>{}</h3>\n<ul{list_attributes}>", esc(heading));
    for item in items {
        let _ = writeln!(html, "<li>{}</li>", esc(item));
    }
    html.push_str("</ul>\n");
}

fn write_table(html: &mut String, table: &Table, with_heading: bool) {
    if with_heading {
        let _ = writeln!(html, "<h3>{}</h3>", esc(&table.title));
    }
    html.push_str("<table>\n");
    html.push_str("<thead><tr>");
    for column in &table.columns {
        let _ = write!(html, "<th>{}</th>", esc(column));
    }
    html.push_str("</tr></thead>\n<tbody>\n");
    for row in &table.rows {
        html.push_str("<tr>");
        for cell in row {
            let _ = write!(html, "<td>{}</td>", esc(cell));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody>\n</table>\n");
}

/// An object's top-level keys as a table (strings bare, other values as compact JSON);
/// anything else as pretty JSON.
fn write_parameters(html: &mut String, parameters: &serde_json::Value) {
    match parameters {
        serde_json::Value::Object(map) if !map.is_empty() => {
            let rows = map
                .iter()
                .map(|(key, value)| {
                    let text = match value {
                        serde_json::Value::String(text) => text.clone(),
                        other => other.to_string(),
                    };
                    vec![key.clone(), text]
                })
                .collect();
            let table = Table {
                title: "Parameters".to_string(),
                columns: vec!["parameter".to_string(), "value".to_string()],
                rows,
            };
            write_table(html, &table, false);
        }
        other => {
            let text = serde_json::to_string_pretty(other).unwrap_or_else(|_| "null".into());
            let _ = writeln!(html, "<pre><code>{}</code></pre>", esc(&text));
        }
    }
}
