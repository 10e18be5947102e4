//! `coldwire report` end to end, as a user runs it: on a results directory (the committed
//! fixture, copied to a temporary directory), the page lands at the documented default
//! place with both experiments' sections and every plot embedded, its path goes to
//! stdout and renderer warnings to stderr; `--out` moves it; a directory without
//! experiments fails with a hint. When Chromium is installed, the page is also opened
//! in it by `scripts/check-report-in-browser.sh`, and that script is shown to fail on the
//! same page with a broken image and with a script error.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::browser::{check_script, chromium_installed};

const COLDWIRE: &str = env!("CARGO_BIN_EXE_coldwire");

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/2026-01-01-fixture")
}

/// Copies the fixture's experiment directories into `into`.
fn copy_fixture(into: &Path) {
    for entry in std::fs::read_dir(fixture()).expect("fixture present") {
        let entry = entry.expect("fixture entry");
        let target = into.join(entry.file_name());
        std::fs::create_dir_all(&target).expect("mkdir");
        std::fs::copy(
            entry.path().join("experiment.json"),
            target.join("experiment.json"),
        )
        .expect("copy record");
    }
}

fn run(arguments: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(COLDWIRE)
        .arg("report")
        .args(arguments)
        .output()
        .expect("coldwire runs")
}

#[test]
fn report_on_a_results_directory_writes_index_html_inside_it() {
    let results = tempfile::tempdir().expect("tempdir");
    copy_fixture(results.path());
    let output = run(&[results.path().as_os_str()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "failed: {stderr}");
    let printed = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let expected = results.path().join("index.html");
    assert_eq!(Path::new(&printed), expected, "stdout names the page");

    let html = std::fs::read_to_string(&expected).expect("page written");
    for title in [
        "Cold connections: throughput by event mechanism",
        "Proxy misses: copy vs splice vs splice+tee",
    ] {
        assert!(
            html.contains(&format!("<h2>{title}</h2>")),
            "no section {title}"
        );
    }
    let figures = 3;
    assert_eq!(
        html.matches("<img src=\"data:image/svg+xml;base64,")
            .count(),
        figures
    );
    assert_eq!(
        html.matches("<img").count(),
        figures,
        "every image embedded"
    );
    for seed in ["seed 000, Fig. 1", "seed 002, Fig. 4", "seed 002, Fig. 7"] {
        assert!(
            html.contains(&format!("Reproduces {seed}.")),
            "{seed} not named"
        );
    }
    // The fixture's syscalls figure asks for a log axis holding 0.
    assert!(stderr.contains("warning: figure `syscalls`"), "{stderr}");
    assert!(
        html.contains("drawn linear instead"),
        "warning not on the page"
    );

    check_in_browser(&expected);
}

#[test]
fn out_puts_the_page_elsewhere_with_links_back() {
    let root = tempfile::tempdir().expect("tempdir");
    let results = root.path().join("results");
    copy_fixture(&results);
    let out = root.path().join("site").join("report.html");
    let output = run(&[
        results.join("splice").as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let html = std::fs::read_to_string(&out).expect("page at --out");
    assert!(html.contains("href=\"../results/splice/series.csv\""));
    assert!(
        !html.contains("Cold connections"),
        "only the experiment asked for"
    );
}

#[test]
fn a_directory_without_experiments_fails_with_a_hint() {
    let empty = tempfile::tempdir().expect("tempdir");
    let output = run(&[empty.path().as_os_str()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("holds no experiment.json"), "{stderr}");
    assert!(stderr.contains("pass an experiment directory"), "{stderr}");
}

/// A mistyped directory is an error that names it, and is not created (the page's
/// default place is inside it).
#[test]
fn a_missing_directory_fails_and_is_not_created() {
    let temp = tempfile::tempdir().expect("tempdir");
    let missing = temp.path().join("results-typo");
    let output = run(&[missing.as_os_str()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no such directory"), "{stderr}");
    assert!(!missing.exists(), "{} was created", missing.display());
}

#[test]
fn the_browser_check_fails_on_a_broken_image_and_on_a_script_error() {
    if !chromium_installed() {
        eprintln!(
            "skipped: browser check (chromium not installed; scripts/check-report-in-browser.sh installs it)"
        );
        return;
    }
    let results = tempfile::tempdir().expect("tempdir");
    copy_fixture(results.path());
    assert!(run(&[results.path().as_os_str()]).status.success());
    let html = std::fs::read_to_string(results.path().join("index.html")).expect("page");

    let broken_image = results.path().join("broken-image.html");
    let marker = "src=\"data:";
    let first_image = html.find(marker).expect("an embedded image");
    let mut broken = html.clone();
    broken.replace_range(
        first_image..first_image + marker.len(),
        "src=\"missing.svg?",
    );
    std::fs::write(&broken_image, broken).expect("write");
    let (passed, output) = browser_check(&broken_image);
    assert!(
        !passed && output.contains("did not render"),
        "broken image passed: {output}"
    );

    let script_error = results.path().join("script-error.html");
    let with_error = html.replace("</body>", "<script>notDefined();</script></body>");
    std::fs::write(&script_error, with_error).expect("write");
    let (passed, output) = browser_check(&script_error);
    assert!(
        !passed && output.contains("notDefined"),
        "script error passed: {output}"
    );
}

/// Runs scripts/check-report-in-browser.sh on `page`: whether it passed, and its output.
fn browser_check(page: &Path) -> (bool, String) {
    check_script("check-report-in-browser.sh", page)
}

/// Opens the page in headless Chromium when it is installed (CI runs the script itself).
fn check_in_browser(page: &Path) {
    if !chromium_installed() {
        eprintln!(
            "skipped: browser check (chromium not installed; scripts/check-report-in-browser.sh installs it)"
        );
        return;
    }
    let (passed, output) = browser_check(page);
    assert!(passed, "browser check failed: {output}");
}
