//! Headless Chromium for the tests that open a page as a person would (the report, the
//! live page): whether it is installed, and running one of the repository's
//! `scripts/check-*-in-browser.sh` on a page.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

/// Whether Debian's Chromium is on the PATH (CI installs it; the tests skip without it).
pub(crate) fn chromium_installed() -> bool {
    ["chromium", "chromium-browser"].iter().any(|name| {
        Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
            .is_ok_and(|output| output.status.success())
    })
}

/// Runs `scripts/SCRIPT ARGUMENT` with bash: whether it passed, and its stdout and stderr.
pub(crate) fn check_script(script: &str, argument: impl AsRef<OsStr>) -> (bool, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts")
        .join(script);
    let output = Command::new("bash")
        .arg(path)
        .arg(argument)
        .output()
        .expect("the script runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}
