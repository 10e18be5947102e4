//! The report page: every experiment gets a section reachable from the table of contents,
//! every figure is embedded (no external resource), the seed figure is named under each
//! plot, raw files are linked relative to the page, and record text cannot inject markup.

mod common;

use std::path::{Path, PathBuf};

use base64::Engine as _;
use coldwire_report::{build_report, write_experiment};

fn results_with(dir: &Path, records: &[coldwire_report::ExperimentRecord]) {
    for record in records {
        write_experiment(&dir.join(&record.experiment), record).expect("writes");
    }
}

/// Every `src="…"` attribute value on the page.
fn sources(html: &str) -> Vec<String> {
    html.split("src=\"")
        .skip(1)
        .map(|rest| rest[..rest.find('"').expect("closed attribute")].to_string())
        .collect()
}

#[test]
fn two_experiments_get_two_sections_with_every_plot_embedded() {
    let results = tempfile::tempdir().expect("tempdir");
    let mut splice = common::record("splice");
    splice.title = "Splice vs copy".to_string();
    splice.figures.push(common::figure(
        "cpu",
        coldwire_report::Scale::Linear,
        coldwire_report::Scale::Linear,
        vec![common::series("copy", &[4.0, 8.0, 16.0], 50.0, 0.1)],
    ));
    results_with(results.path(), &[common::record("cold-scaling"), splice]);
    let out = results.path().join("index.html");
    let outcome = build_report(&[results.path().to_path_buf()], &out).expect("builds");
    assert_eq!(outcome.experiments, ["cold-scaling", "splice"]);
    let html = std::fs::read_to_string(&out).expect("page written");

    for (id, title) in [
        ("experiment-1-cold-scaling", "Cold scaling (cold-scaling)"),
        ("experiment-2-splice", "Splice vs copy"),
    ] {
        assert!(
            html.contains(&format!("<section id=\"{id}\">")),
            "no section {id}"
        );
        assert!(
            html.contains(&format!("<a href=\"#{id}\">{title}</a>")),
            "no TOC entry {id}"
        );
    }
    let images = sources(&html);
    assert_eq!(images.len(), 3, "one image per figure: {}", images.len());
    for image in &images {
        let data = image
            .strip_prefix("data:image/svg+xml;base64,")
            .unwrap_or_else(|| panic!("not embedded: {}", &image[..60.min(image.len())]));
        let svg = base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("base64");
        let svg = String::from_utf8(svg).expect("utf-8");
        assert!(svg.starts_with("<svg") && svg.contains("cold connections"));
    }
    assert!(
        html.contains("Reproduces seed 000, Fig. 1."),
        "seed figure not named"
    );
    assert!(
        !html.contains("<link") && !html.contains("<script"),
        "external or script"
    );
    assert!(html.contains("href=\"cold-scaling/experiment.json\""));
    assert!(html.contains("href=\"splice/raw/select-15000.json\""));
    assert!(html.contains("href=\"splice/figures/cpu.png\""));
    for text in [
        "select loses 88%",
        "The seed measured",
        "test-host",
        "duration_seconds",
        "1,176",
    ] {
        assert!(html.contains(text), "page lacks {text}");
    }
}

#[test]
fn record_text_is_escaped_everywhere() {
    let results = tempfile::tempdir().expect("tempdir");
    let mut record = common::record("evil");
    record.title = "<script>alert(1)</script>".to_string();
    record.findings = vec!["a & b < c".to_string()];
    record.figures[0].reproduces = Some("seed \"000\" <Fig>".to_string());
    record.tables[0].rows[0][0] = "<b>bold</b>".to_string();
    record.raw_files = vec!["raw/a\"b.json".to_string()];
    results_with(results.path(), &[record]);
    let out = results.path().join("index.html");
    build_report(&[results.path().join("evil")], &out).expect("builds");
    let html = std::fs::read_to_string(&out).expect("page");
    assert!(!html.contains("<script>alert"), "title not escaped");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("a &amp; b &lt; c"));
    assert!(html.contains("seed &quot;000&quot; &lt;Fig&gt;"));
    assert!(html.contains("&lt;b&gt;bold&lt;/b&gt;"));
    assert!(
        html.contains("href=\"evil/raw/a%22b.json\""),
        "href not encoded"
    );
}

#[test]
fn links_are_relative_to_where_the_page_is_written() {
    let root = tempfile::tempdir().expect("tempdir");
    let results = root.path().join("results");
    results_with(&results, &[common::record("cold-scaling")]);
    let out = root.path().join("site/report.html");
    build_report(&[results.join("cold-scaling")], &out).expect("builds");
    let html = std::fs::read_to_string(&out).expect("page");
    assert!(
        html.contains("href=\"../results/cold-scaling/summary.md\""),
        "{html}"
    );
}

#[test]
fn directories_without_experiments_are_refused_and_duplicates_shown_once() {
    let empty = tempfile::tempdir().expect("tempdir");
    let error = build_report(
        &[empty.path().to_path_buf()],
        &empty.path().join("index.html"),
    )
    .expect_err("nothing to report");
    assert!(
        format!("{error:#}").contains("holds no experiment.json"),
        "{error:#}"
    );

    let results = tempfile::tempdir().expect("tempdir");
    results_with(results.path(), &[common::record("cold-scaling")]);
    let inputs: Vec<PathBuf> = vec![results.path().into(), results.path().join("cold-scaling")];
    let outcome = build_report(&inputs, &results.path().join("index.html")).expect("builds");
    assert_eq!(outcome.experiments, ["cold-scaling"]);
}
