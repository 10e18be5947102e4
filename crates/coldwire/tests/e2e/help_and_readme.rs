//! The README and `--help` agree: every long flag of every server, experiment and report
//! subcommand's `--help` is in the README, every server flag is classed in
//! docs/operations.md's reload table (changes live or kept), every flag of `bench`,
//! `experiment`, `report` and `top` is somewhere in docs/, the proxy's synopsis names every
//! I/O backend and `--admin`, and nothing the README or docs cite lives outside the repository (the seed
//! papers are cited by title and venue, under the README's References).

use std::path::{Path, PathBuf};
use std::process::Command;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn readme() -> String {
    std::fs::read_to_string(repository().join("README.md")).unwrap()
}

/// The long flags `coldwire SUBCOMMAND --help` lists.
fn flags(subcommand: &str) -> Vec<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_coldwire"))
        .args([subcommand, "--help"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut found: Vec<String> = help
        .split(|character: char| !(character.is_ascii_alphanumeric() || character == '-'))
        .filter(|word| word.starts_with("--") && word.len() > 2)
        .map(str::to_owned)
        .filter(|flag| flag != "--help" && flag != "--version")
        .collect();
    found.sort();
    found.dedup();
    found
}

/// Whether `text` holds `flag` as a whole flag (`--error-log` is not in `--error-log-rate`).
fn mentions(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(at, _)| {
        !text[at + flag.len()..]
            .chars()
            .next()
            .is_some_and(|next| next.is_ascii_alphanumeric() || next == '-')
    })
}

#[test]
fn every_flag_of_every_help_is_in_the_readme() {
    let readme = readme();
    let mut missing = Vec::new();
    for subcommand in ["serve", "proxy", "origin", "wan", "experiment", "report"] {
        let found = flags(subcommand);
        assert!(!found.is_empty(), "{subcommand}: {found:?}");
        for flag in found {
            if !mentions(&readme, &flag) {
                missing.push(format!("{subcommand} {flag}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "flags in --help but not in README.md: {missing:?}"
    );
}

/// The reload table of docs/operations.md says, for every key of a server's configuration
/// file (its long flags), whether SIGHUP changes it live or keeps it: a flag added to a
/// server must be classed there.
#[test]
fn every_server_flag_is_classed_in_the_reload_table() {
    let operations = std::fs::read_to_string(repository().join("docs/operations.md")).unwrap();
    let start = operations
        .find("### Reload (SIGHUP)")
        .expect("the reload section");
    let section = &operations[start..];
    let section = &section[..section.find("\n### ").unwrap_or(section.len())];
    let mut missing = Vec::new();
    for subcommand in ["serve", "proxy", "origin", "wan"] {
        for flag in flags(subcommand) {
            let key = flag.trim_start_matches("--");
            if key != "config" && !section.contains(&format!("`{key}`")) {
                missing.push(format!("{subcommand} {key}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "server flags not classed (changes live / kept) in docs/operations.md's reload \
         table: {missing:?}"
    );
}

/// Every long flag of the measuring subcommands is documented somewhere in docs/.
#[test]
fn every_flag_of_the_measuring_subcommands_is_in_the_docs() {
    let mut docs = String::new();
    for entry in std::fs::read_dir(repository().join("docs")).unwrap() {
        docs.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default());
    }
    let mut missing = Vec::new();
    for subcommand in ["bench", "experiment", "report", "top"] {
        for flag in flags(subcommand) {
            if !mentions(&docs, &flag) {
                missing.push(format!("{subcommand} {flag}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "flags in --help but not in docs/: {missing:?}"
    );
}

#[test]
fn the_proxy_synopsis_names_every_backend_and_the_admin_listener() {
    let readme = readme();
    let start = readme.find("coldwire proxy [").expect("the proxy synopsis");
    let synopsis = &readme[start..start + readme[start..].find("```").unwrap()];
    for needed in [
        "select|poll|epoll|uring-poll|uring",
        "--admin ADDR",
        "--listen",
    ] {
        assert!(
            synopsis.contains(needed),
            "{needed} missing from:\n{synopsis}"
        );
    }
}

#[test]
fn nothing_cited_lives_outside_the_repository() {
    let mut files = vec![repository().join("README.md")];
    for entry in std::fs::read_dir(repository().join("docs")).unwrap() {
        files.push(entry.unwrap().path());
    }
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for outside in ["../shared", "shared/seeds", "seeds/"] {
            assert!(
                !text.contains(outside),
                "{} cites {outside}: cite papers by title and venue",
                file.display()
            );
        }
    }
}
