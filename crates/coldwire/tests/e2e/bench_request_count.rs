//! `coldwire bench -n N` (ab's, hey's and oha's request count) against a real `coldwire
//! serve` on port 0: exactly N requests reach the server (its own stats count them), with
//! keep-alive and with a connection per request; at a rate the window lasts about N/rate;
//! fewer requests than connections open only as many connections; a server that is gone
//! gives N counted errors; with -d as well, whichever ends first is named.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use coldwire_process::{Process, Stderr};
use coldwire_testkit::coldwire;

const COLDWIRE: &str = env!("CARGO_BIN_EXE_coldwire");

struct Origin {
    server: Process,
    url: String,
    stats: String,
    _root: tempfile::TempDir,
}

fn start_origin() -> Origin {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("page.html"), vec![b'x'; 1259]).unwrap();
    let root_path = root.path().display().to_string();
    let mut server = coldwire([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--admin",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--root",
        root_path.as_str(),
    ])
    .stderr(Stderr::Inherit)
    .spawn()
    .unwrap();
    let listen = server
        .wait_for_line("listening on http://", Duration::from_secs(10))
        .unwrap();
    let stats = server
        .wait_for_line("stats on ", Duration::from_secs(10))
        .unwrap();
    Origin {
        server,
        url: format!("http://{listen}/page.html"),
        stats,
        _root: root,
    }
}

/// A counter of the server's stats (`total.SECTION.NAME`).
fn server_total(origin: &Origin, section: &str, name: &str) -> u64 {
    let body = coldwire_testkit::curl(&[origin.stats.as_str()]);
    let stats: serde_json::Value = serde_json::from_slice(&body).unwrap();
    stats["total"][section][name].as_u64().unwrap()
}

/// The server's counter once it reached `expected` (counters are published as the worker
/// goes; bounded wait), to compare exactly.
fn settled_total(origin: &Origin, section: &str, name: &str, expected: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let total = server_total(origin, section, name);
        if total >= expected || Instant::now() >= deadline {
            // A moment more: a count beyond `expected` would show up now.
            std::thread::sleep(Duration::from_millis(100));
            return server_total(origin, section, name);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `coldwire bench ARGS --json FILE` (with `-q` when `quiet`).
fn run(arguments: &[&str], quiet: bool) -> (Output, Option<serde_json::Value>) {
    let directory = tempfile::tempdir().unwrap();
    let json = directory.path().join("result.json");
    let mut command = Command::new(COLDWIRE);
    command
        .arg("bench")
        .args(arguments)
        .arg("--json")
        .arg(&json);
    if quiet {
        command.arg("-q");
    }
    let output = command.output().unwrap();
    let report = std::fs::read_to_string(&json)
        .ok()
        .map(|text| serde_json::from_str(&text).unwrap());
    (output, report)
}

fn explain(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The only phase of a successful run's report.
fn only_phase(arguments: &[&str]) -> (serde_json::Value, String) {
    let (output, report) = run(arguments, true);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let report = report.expect("the JSON report");
    let phase = report["runs"][0]["phases"][0].clone();
    (phase, String::from_utf8_lossy(&output.stdout).into_owned())
}

#[test]
fn a_request_count_sends_exactly_that_many_with_and_without_keep_alive() {
    let mut origin = start_origin();
    for extra in [&[][..], &["-H", "Connection: close"][..]] {
        let before = server_total(&origin, "http", "requests");
        let mut arguments = vec!["-n", "500", "-c", "10", "-R", "max"];
        arguments.extend_from_slice(extra);
        arguments.push(&origin.url);
        let (phase, stdout) = only_phase(&arguments);
        assert_eq!(phase["requests_planned"], 500, "{phase}");
        assert_eq!(phase["ended_by"], "requests", "{phase}");
        assert_eq!(phase["sent_requests"], 500, "{phase}");
        assert_eq!(phase["completed_in_window"], 500, "{phase}");
        assert_eq!(phase["errors_total"], 0, "{phase}");
        assert_eq!(phase["status_classes"][1], 500, "{phase}");
        assert!(
            stdout.contains("the request count (-n 500) ended the run"),
            "{stdout}"
        );
        let served = settled_total(&origin, "http", "requests", before + 500) - before;
        assert_eq!(served, 500, "the server's own count with {extra:?}");
        if extra.is_empty() {
            assert_eq!(phase["connections_opened"], 10, "{phase}");
        } else {
            assert_eq!(phase["connections_opened"], 500, "{phase}");
        }
    }
    origin.server.stop_within(Duration::from_secs(10));
}

#[test]
fn a_request_count_at_a_rate_is_offered_at_that_rate() {
    let mut origin = start_origin();
    let (phase, _) = only_phase(&["-n", "100", "-R", "200", &origin.url]);
    assert_eq!(phase["requests_planned"], 100, "{phase}");
    // A slot the generator missed (it was descheduled) passes the request to the next one.
    assert_eq!(phase["sent_requests"], 100, "{phase}");
    assert_eq!(phase["ended_by"], "requests", "{phase}");
    assert_eq!(
        phase["completed_in_window"].as_u64().unwrap() + phase["errors_total"].as_u64().unwrap(),
        100,
        "{phase}"
    );
    // 100 slots 5 ms apart: the last one goes out 0.495 s after the first (loosely: not a
    // speed test).
    let window = phase["window_seconds"].as_f64().unwrap();
    assert!(window >= 0.4, "the 100 requests took {window} s: {phase}");
    // With -d as well, whichever comes first ends the window, and says so.
    let (phase, stdout) = only_phase(&["-n", "100000", "-R", "200", "-d", "0.3s", &origin.url]);
    assert_eq!(phase["ended_by"], "duration", "{phase}");
    assert!(phase["offered_requests"].as_u64().unwrap() < 100_000);
    assert!(
        stdout.contains("the duration (-d) ended the run before the request count"),
        "{stdout}"
    );
    origin.server.stop_within(Duration::from_secs(10));
}

#[test]
fn fewer_requests_than_connections_open_only_as_many_connections() {
    let mut origin = start_origin();
    let before = server_total(&origin, "loop", "accepted");
    // No -R: the closed loop, and the first line says so.
    let (output, report) = run(&["-n", "3", "-c", "10", &origin.url], false);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("up to 3 connections"), "{stderr}");
    assert!(
        stderr.contains("as fast as the connections allow"),
        "{stderr}"
    );
    let phase = &report.unwrap()["runs"][0]["phases"][0];
    assert_eq!(phase["completed_in_window"], 3, "{phase}");
    assert_eq!(phase["connections_opened"], 3, "{phase}");
    assert_eq!(phase["warmup_seconds"], 0.0, "{phase}");
    let accepted = settled_total(&origin, "loop", "accepted", before + 3) - before;
    assert_eq!(accepted, 3, "connections the server accepted");
    origin.server.stop_within(Duration::from_secs(10));
}

#[test]
fn a_request_count_against_a_server_that_is_gone_counts_every_failure() {
    let mut origin = start_origin();
    origin.server.stop_within(Duration::from_secs(10));
    for rate in ["max", "100"] {
        let (phase, stdout) = only_phase(&[
            "-n",
            "50",
            "-c",
            "5",
            "-R",
            rate,
            "--max-error-rate",
            "100%",
            &origin.url,
        ]);
        assert_eq!(phase["ended_by"], "requests", "{phase}");
        assert_eq!(phase["errors_total"], 50, "{phase}");
        assert_eq!(phase["errors"]["connect"], 50, "{phase}");
        assert_eq!(phase["completed_in_window"], 0, "{phase}");
        assert!(stdout.contains("0 responses and 50 errors"), "{stdout}");
    }
}
