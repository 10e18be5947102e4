//! End-to-end tests of `coldwire bench` against a real `coldwire serve`: cold connections
//! are really open (the server's own gauge counts them), a server that closes trickling
//! connections is reported, `--saturate` reports its curve, and the JSON parses and carries
//! its schema version. Servers listen on port 0 and are stopped by their handles.

use std::process::Command;
use std::time::Duration;

use coldwire_process::{Process, Stderr};
use coldwire_testkit::coldwire;

const COLDWIRE: &str = env!("CARGO_BIN_EXE_coldwire");

struct Origin {
    server: Process,
    listen: String,
    stats: String,
    _root: tempfile::TempDir,
}

fn start_origin(extra: &[&str]) -> Origin {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("page.html"), vec![b'x'; 1259]).unwrap();
    let mut arguments: Vec<String> = [
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--admin",
        "127.0.0.1:0",
        "--workers",
        "1",
    ]
    .iter()
    .map(|argument| (*argument).to_owned())
    .collect();
    arguments.push("--root".into());
    arguments.push(root.path().display().to_string());
    arguments.extend(extra.iter().map(|argument| (*argument).to_owned()));
    let mut server = coldwire(&arguments)
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
        listen,
        stats,
        _root: root,
    }
}

/// Runs `coldwire bench ARGS --json FILE -q` and returns the parsed JSON and stdout.
fn bench(arguments: &[String]) -> (serde_json::Value, String) {
    let directory = tempfile::tempdir().unwrap();
    let json = directory.path().join("result.json");
    let output = Command::new(COLDWIRE)
        .arg("bench")
        .args(arguments)
        .arg("--json")
        .arg(&json)
        .arg("-q")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "coldwire bench failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(&json).unwrap();
    (serde_json::from_str(&text).unwrap(), stdout)
}

fn strings(arguments: &[&str]) -> Vec<String> {
    arguments
        .iter()
        .map(|argument| (*argument).to_owned())
        .collect()
}

#[test]
fn cold_connections_are_really_open_and_the_json_carries_its_schema() {
    let mut origin = start_origin(&["--idle-timeout", "600"]);
    let url = format!("http://{}/page.html", origin.listen);
    let pid = origin.server.pid().to_string();
    let (json, stdout) = bench(&strings(&[
        "--url",
        &url,
        "--rate",
        "200",
        "--warmup",
        "0.5",
        "--duration",
        "1",
        "--cold",
        "300",
        "--cold-rate",
        "3000",
        "--server-stats",
        &origin.stats,
        "--server-pid",
        &pid,
        // Exact counts below: a busy test machine may deschedule the generator for a few
        // milliseconds, which must not turn slots into missed ones.
        "--late-limit",
        "1000",
    ]));
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["tool"], "coldwire-bench");
    let run = &json["runs"][0];
    assert_eq!(run["cold"]["established"], 300, "{}", run["cold"]);
    assert_eq!(run["cold"]["closed_by_server"], 0);
    let phase = &run["phases"][0];
    // The server's own gauge: every cold connection is open on its side (plus the hot ones).
    let open_at_start = phase["server_counters"]["open_connections"][0]
        .as_u64()
        .unwrap();
    assert!(
        open_at_start >= 300,
        "server saw {open_at_start} open connections"
    );
    assert_eq!(phase["offered_requests"], 200);
    assert_eq!(phase["succeeded_requests"], 200, "{}", phase["errors"]);
    assert_eq!(phase["errors_total"], 0);
    assert_eq!(phase["latency"]["corrected"]["count"], 200);
    assert!(phase["latency"]["raw"]["p99_us"].as_f64().unwrap() > 0.0);
    assert!(phase["server"]["cpu_seconds"].as_f64().unwrap() > 0.0);
    assert!(phase["server"]["open_descriptors"][0].as_u64().unwrap() >= 300);
    assert!(
        phase["server_counters"]["syscalls_per_request"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(stdout.contains("Server cost per request"), "{stdout}");
    // Every column measured (server, machine, counters, cold): still 80 columns at most.
    crate::bench_habits::assert_narrow(&stdout);
    origin.server.stop_within(Duration::from_secs(10));
}

#[test]
fn trickling_connections_closed_by_the_server_are_counted() {
    let mut origin = start_origin(&["--header-timeout", "1"]);
    let url = format!("http://{}/page.html", origin.listen);
    let (json, stdout) = bench(&strings(&[
        "--url",
        &url,
        "--rate",
        "50",
        "--warmup",
        "0",
        "--duration",
        "2.5",
        "--cold",
        "40",
        "--cold-mode",
        "trickle",
        "--trickle-interval",
        "0.2",
    ]));
    let run = &json["runs"][0];
    assert_eq!(run["cold"]["established"], 40);
    assert_eq!(
        run["cold"]["closed_by_server"], 40,
        "the server's 1 s header timeout closes every trickling connection: {}",
        run["cold"]
    );
    assert_eq!(run["phases"][0]["cold_held"][1], 0);
    // Notes are wrapped at 80 columns: read them as words.
    let words = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("40 closed by the server"), "{stdout}");
    crate::bench_habits::assert_narrow(&stdout);
    origin.server.stop_within(Duration::from_secs(10));
}

#[test]
fn saturate_reports_a_curve() {
    let mut origin = start_origin(&[]);
    let url = format!("http://{}/page.html", origin.listen);
    let (json, stdout) = bench(&strings(&[
        "--url",
        &url,
        "--saturate",
        "--rate",
        "100",
        "--saturate-factor",
        "4",
        "--saturate-steps",
        "2",
        "--warmup",
        "0.2",
        "--duration",
        "0.5",
    ]));
    let run = &json["runs"][0];
    let curve = run["saturation"]["curve"].as_array().unwrap();
    assert!(!curve.is_empty() && curve.len() <= 2, "{curve:?}");
    assert_eq!(curve[0]["offered_rate"], 100.0);
    assert_eq!(run["phases"].as_array().unwrap().len(), curve.len());
    assert!(stdout.contains("saturation throughput"), "{stdout}");
    crate::bench_habits::assert_narrow(&stdout);
    origin.server.stop_within(Duration::from_secs(10));
}

#[test]
fn bad_arguments_say_what_to_do() {
    let output = Command::new(COLDWIRE)
        .args(["bench", "--url", "gopher://example.com/"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("only http:// and https:// URLs"),
        "{stderr}"
    );
    let output = Command::new(COLDWIRE)
        .args(["bench", "--spawn", "true"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("give the target URL"));
    let output = Command::new(COLDWIRE)
        .args(["bench", "--url", "http://127.0.0.1:9/", "--spawn", "exit 3"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("exited before accepting"), "{stderr}");
}

#[test]
fn spawn_starts_measures_and_stops_the_server() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("page.html"), b"hello").unwrap();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let command = format!(
        "{COLDWIRE} serve --root {} --listen 127.0.0.1:{port} --workers 1",
        root.path().display()
    );
    let url = format!("http://127.0.0.1:{port}/page.html");
    let (json, _) = bench(&strings(&[
        "--url",
        &url,
        "--spawn",
        &command,
        "--rate",
        "100",
        "--warmup",
        "0",
        "--duration",
        "0.5",
        "--late-limit",
        "1000",
    ]));
    assert_eq!(json["server"]["command"], command.as_str());
    let phase = &json["runs"][0]["phases"][0];
    assert_eq!(phase["succeeded_requests"], 50, "{}", phase["errors"]);
    assert!(phase["server"]["cpu_seconds"].as_f64().unwrap() > 0.0);
    // Stopped: nothing listens there any more.
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn requests_go_through_a_proxy_in_absolute_form() {
    let mut origin = start_origin(&[]);
    let mut proxy = coldwire(["proxy", "--listen", "127.0.0.1:0", "--workers", "1"])
        .stderr(Stderr::Inherit)
        .spawn()
        .unwrap();
    let proxy_address = proxy
        .wait_for_line("proxy listening on http://", Duration::from_secs(10))
        .unwrap();
    let url = format!("http://{}/page.html", origin.listen);
    let (json, _) = bench(&strings(&[
        "--url",
        &url,
        "--proxy",
        &proxy_address,
        "--rate",
        "100",
        "--warmup",
        "0",
        "--duration",
        "0.5",
        "--late-limit",
        "1000",
    ]));
    let run = &json["runs"][0];
    assert_eq!(run["parameters"]["proxy"], proxy_address.as_str());
    let phase = &run["phases"][0];
    // Every slot of the half second is offered; one the generator reached too late on a
    // busy machine is counted missed, never sent: every request sent must succeed.
    assert_eq!(phase["offered_requests"], 50);
    let sent = phase["sent_requests"].as_u64().unwrap();
    let missed = phase["missed_slots"].as_u64().unwrap();
    assert!(sent >= 1 && sent + missed == 50, "{phase}");
    assert_eq!(phase["succeeded_requests"], sent, "{}", phase["errors"]);
    assert_eq!(phase["status_classes"][1], sent);
    proxy.stop_within(Duration::from_secs(10));
    origin.server.stop_within(Duration::from_secs(10));
}
