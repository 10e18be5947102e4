//! `coldwire bench` with the habits of wrk, wrk2, oha and k6: the URL as an argument,
//! `-c/-d/-R`, `-m/-H/--body` reaching the server (a recording server), `https://` with
//! `-k` or `--cacert` (a rustls server with an rcgen certificate), thresholds and their exit
//! status (an origin answering 503, a slow origin), errors by cause with the errno, "–"
//! for percentiles of a run where nothing succeeded, and output no wider than 80 columns.
//! Test servers listen on 127.0.0.1 port 0 on threads of this process.

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coldwire_testkit::{OriginRequest, read_request, spawn_server};

const COLDWIRE: &str = env!("CARGO_BIN_EXE_coldwire");

/// Runs `coldwire bench ARGS -q`.
fn bench(arguments: &[&str]) -> Output {
    Command::new(COLDWIRE)
        .arg("bench")
        .args(arguments)
        .arg("-q")
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn explain(output: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        stdout(output),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Every line of `text` fits in an 80-column terminal.
pub(crate) fn assert_narrow(text: &str) {
    for line in text.lines() {
        assert!(
            line.chars().count() <= 80,
            "a line wider than 80 columns ({}):\n{line}\n\n{text}",
            line.chars().count()
        );
    }
}

/// Answers every request with 200 and keeps what it received.
#[derive(Default)]
struct Recorded {
    requests: Mutex<Vec<OriginRequest>>,
}

fn recording(stream: TcpStream, recorded: &Recorded) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    while let Some(request) = read_request(&mut reader) {
        recorded.requests.lock().unwrap().push(request);
        if writer
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .is_err()
        {
            return;
        }
    }
}

#[derive(Default)]
struct Nothing;

fn unavailable(stream: TcpStream, _: &Nothing) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    while read_request(&mut reader).is_some() {
        let answer = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy";
        if writer.write_all(answer).is_err() {
            return;
        }
    }
}

fn slow(stream: TcpStream, _: &Nothing) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    while read_request(&mut reader).is_some() {
        std::thread::sleep(Duration::from_millis(30));
        if writer
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .is_err()
        {
            return;
        }
    }
}

coldwire_testkit::backend_tests! {
    method_headers_and_body_reach_the_server,
    https_needs_a_trusted_certificate_or_insecure,
}

fn method_headers_and_body_reach_the_server(backend: &str) {
    let (address, recorded) = spawn_server::<Recorded>(recording);
    let url = format!("http://{address}/submit?x=1");
    let output = bench(&[
        &url,
        "--io",
        backend,
        "-m",
        "post",
        "-H",
        "X-Test: yes",
        "-H",
        "Host: example.test",
        "--body",
        "hello",
        "-c",
        "2",
        "-d",
        "1s",
        "--warmup",
        "0",
        "-R",
        "20",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let requests = recorded.requests.lock().unwrap();
    // How many arrive in one second depends on how busy the machine is (the rate itself
    // is tested elsewhere); what this test checks is what each request carries.
    assert!(!requests.is_empty(), "no request reached the server");
    for request in requests.iter() {
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", "/submit?x=1")
        );
        assert_eq!(request.header("x-test"), Some("yes"));
        assert_eq!(request.header("host"), Some("example.test"));
        assert_eq!(request.header("content-length"), Some("5"));
        assert_eq!(request.body, b"hello");
    }
    drop(requests);

    // --body-file, and the long flags of before (--url, --duration in seconds).
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("body.json");
    std::fs::write(&file, br#"{"a": 1}"#).unwrap();
    recorded.requests.lock().unwrap().clear();
    let output = bench(&[
        "--url",
        &url,
        "--io",
        backend,
        "--method",
        "PUT",
        "--body-file",
        file.to_str().unwrap(),
        "--duration",
        "0.5",
        "--warmup",
        "0",
        "--rate",
        "20",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let requests = recorded.requests.lock().unwrap();
    assert!(!requests.is_empty());
    assert!(requests.iter().all(|request| request.method == "PUT"
        && request.body == br#"{"a": 1}"#
        && request.header("user-agent") == Some("coldwire-bench")));
}

/// A TLS server (rustls, an rcgen certificate for 127.0.0.1) answering 200 on keep-alive
/// connections; its address and the certificate's PEM.
fn start_tls_server() -> (SocketAddr, String) {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let pem = certified.cert.pem();
    let certificate = certified.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![certificate], key)
    .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let config = config.clone();
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
                let session = rustls::ServerConnection::new(config).unwrap();
                let mut reader = BufReader::new(rustls::StreamOwned::new(session, stream));
                while read_request(&mut reader).is_some() {
                    let tls = reader.get_mut();
                    let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
                    if tls.write_all(answer).and_then(|()| tls.flush()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (address, pem)
}

fn https_needs_a_trusted_certificate_or_insecure(backend: &str) {
    let (address, pem) = start_tls_server();
    let url = format!("https://{address}/");
    let run = |extra: &[&str]| {
        let mut arguments = vec![
            url.as_str(),
            "--io",
            backend,
            "-d",
            "0.5",
            "--warmup",
            "0",
            "-R",
            "40",
            "-c",
            "4",
            "--late-limit",
            "1000",
            "--json",
            "-",
        ];
        arguments.extend_from_slice(extra);
        let output = bench(&arguments);
        let json: serde_json::Value =
            serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null);
        (output, json)
    };
    // A self-signed certificate is not trusted: every request fails, by its TLS cause.
    let (output, json) = run(&[]);
    assert_eq!(output.status.code(), Some(99), "{}", explain(&output));
    let phase = &json["runs"][0]["phases"][0];
    assert_eq!(phase["succeeded_requests"], 0, "{phase}");
    assert!(
        phase["errors"]["tls"].as_u64().unwrap() > 0,
        "{}",
        phase["errors"]
    );
    let causes = phase["error_causes"].to_string();
    assert!(causes.contains("tls: invalid peer certificate"), "{causes}");
    // The table went to stderr (the JSON has stdout).
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("tls: invalid peer certificate"), "{stderr}");

    for extra in [vec!["--insecure"], vec!["--cacert", "CA"]] {
        let directory = tempfile::tempdir().unwrap();
        let ca = directory.path().join("ca.pem");
        std::fs::write(&ca, &pem).unwrap();
        let extra: Vec<&str> = extra
            .iter()
            .map(|argument| {
                if *argument == "CA" {
                    ca.to_str().unwrap()
                } else {
                    argument
                }
            })
            .collect();
        let (output, json) = run(&extra);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{extra:?}: {}",
            explain(&output)
        );
        let phase = &json["runs"][0]["phases"][0];
        // 20 slots; a generator descheduled across the window's end may drop its last
        // ones uncounted (an engine trait, not TLS's): most must succeed, none fail.
        let succeeded = phase["succeeded_requests"].as_u64().unwrap();
        assert!((15..=20).contains(&succeeded), "{extra:?}: {phase}");
        assert_eq!(phase["errors_total"], 0);
        assert_eq!(
            phase["bytes"].as_u64().unwrap() % 43,
            0,
            "plaintext bytes counted"
        );
    }
}

#[test]
fn errors_above_the_threshold_exit_99_and_name_the_status() {
    let (address, _) = spawn_server::<Nothing>(unavailable);
    let url = format!("http://{address}/");
    let output = bench(&[
        &url,
        "-d",
        "0.5",
        "--warmup",
        "0",
        "-R",
        "40",
        "--late-limit",
        "1000",
    ]);
    assert_eq!(output.status.code(), Some(99), "{}", explain(&output));
    let text = stdout(&output);
    assert!(text.contains("✗ errors ≤ 1%"), "{text}");
    assert!(text.contains("status 503 × 20"), "{text}");
    assert_narrow(&text);
    // Allowed: the same run passes.
    let output = bench(&[
        &url,
        "-d",
        "0.5",
        "--warmup",
        "0",
        "-R",
        "40",
        "--max-error-rate",
        "100%",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    assert!(stdout(&output).contains("✓ errors ≤ 100%"));
}

#[test]
fn a_latency_objective_fails_against_a_slow_origin() {
    let (address, _) = spawn_server::<Nothing>(slow);
    let url = format!("http://{address}/");
    let output = bench(&[
        &url, "-d", "0.5", "--warmup", "0", "-R", "20", "--p99", "5ms", "--p50", "10s",
    ]);
    assert_eq!(output.status.code(), Some(99), "{}", explain(&output));
    let text = stdout(&output);
    assert!(text.contains("✓ errors ≤ 1%"), "{text}");
    assert!(text.contains("✓ p50 ≤ 10s"), "{text}");
    assert!(text.contains("✗ p99 ≤ 5ms"), "{text}");
    let output = bench(&[
        &url, "-d", "0.5", "--warmup", "0", "-R", "20", "--p99", "10s",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
}

#[test]
fn nothing_succeeded_shows_dashes_and_the_errno() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/");
    let output = bench(&[
        &url, "-d", "0.5", "--warmup", "0", "-R", "20", "--p99", "1s",
    ]);
    assert_eq!(output.status.code(), Some(99), "{}", explain(&output));
    let text = stdout(&output);
    assert!(text.contains("connect: ECONNREFUSED (111) × "), "{text}");
    assert!(!text.contains("0.000"), "no made-up zero latency: {text}");
    let latency_row = text
        .lines()
        .skip_while(|line| !line.starts_with("Latency"))
        .find(|line| line.starts_with("20/s"))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        latency_row.split_whitespace().skip(1).collect::<Vec<_>>(),
        ["–"; 7],
        "{text}"
    );
    assert!(
        text.lines().any(|line| line.contains("✗ p99 ≤ 1s")
            && line.ends_with("– (no successful response)")),
        "{text}"
    );
    assert_narrow(&text);
}

#[test]
fn bad_flags_show_the_accepted_forms() {
    for (arguments, expected) in [
        (vec!["-d", "soon", "http://127.0.0.1:9/"], "30s, 500ms, 2m"),
        (
            vec!["--max-error-rate", "lots", "http://127.0.0.1:9/"],
            "1%, 0.5% or 100%",
        ),
        (vec!["-H", "no colon", "http://127.0.0.1:9/"], "Name: value"),
        (
            vec!["-m", "GE T", "http://127.0.0.1:9/"],
            "not an HTTP method",
        ),
        (vec!["ftp://127.0.0.1/"], "only http:// and https://"),
        (
            vec!["-c", "0", "http://127.0.0.1:9/"],
            "--connections must be at least 1",
        ),
    ] {
        let output = bench(&arguments);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{arguments:?}");
        assert_ne!(output.status.code(), Some(99), "{arguments:?}");
        assert!(stderr.contains(expected), "{arguments:?}: {stderr}");
    }
    // Without -q too, the error is the only output: no line describing a run that will
    // not happen.
    let output = Command::new(COLDWIRE)
        .args(["bench", "-c", "0", "http://127.0.0.1:9/"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.trim(), "error: --connections must be at least 1");
}

#[test]
fn wrk_and_oha_command_lines_run_with_a_note_for_threads() {
    let (address, _) = spawn_server::<Recorded>(recording);
    let url = format!("http://{address}/");
    // wrk: `-t2 -c4 -d… --latency URL`; -R max for its closed loop.
    let output = bench(&[
        "-t2",
        "-c4",
        "-d",
        "0.5s",
        "--latency",
        "--warmup",
        "0",
        "-R",
        "max",
        &url,
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("-t 2 is ignored"), "{stderr}");
    assert!(!stderr.contains("add -R max"), "-R was given: {stderr}");
    assert!(stdout(&output).contains("Latency"), "{}", explain(&output));
    // Without -R, the note says the run is not wrk's closed loop.
    let output = bench(&["-t", "2", "-d", "0.2", "--warmup", "0", "-R", "50", &url]);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let output = bench(&["-t", "4", "-z", "0.2s", "--warmup", "0", &url]);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("add -R max"), "{stderr}");
    // -t 1 is what the generator does: no note.
    let output = bench(&["-t1", "-d", "0.2", "--warmup", "0", "-R", "50", &url]);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    assert!(!String::from_utf8_lossy(&output.stderr).contains("ignored"));
}

#[test]
fn a_request_count_where_it_cannot_apply_says_why() {
    // -n runs (tests/e2e/bench_request_count.rs); not with modes that plan their phases.
    let output = bench(&["-n", "0", "http://127.0.0.1:9/"]);
    assert_eq!(output.status.code(), Some(64), "{}", explain(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("at least one request"));
    let output = bench(&[
        "-n",
        "100",
        "--saturate",
        "-R",
        "100",
        "http://127.0.0.1:9/",
    ]);
    assert_eq!(output.status.code(), Some(64), "{}", explain(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("drop one of them"));
    let output = bench(&["-n", "100"]);
    assert_eq!(output.status.code(), Some(64), "{}", explain(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("give the target URL"));
    // oha's and hey's `-q RATE`: here -q is --quiet, and the number would be read as a URL.
    let output = Command::new(COLDWIRE)
        .args(["bench", "-q", "100", "http://127.0.0.1:9/"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(64), "{}", explain(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("the rate is -R 100"), "{stderr}");
}

#[test]
fn ctrl_c_reports_what_ran_without_counting_requests_in_flight_as_errors() {
    // Every request takes 30 ms: at any moment each of the 4 connections has one in flight.
    let (address, _) = spawn_server::<Nothing>(slow);
    let url = format!("http://{address}/");
    let child = Command::new(COLDWIRE)
        .args([
            "bench", "-q", "-c", "4", "-d", "60s", "--warmup", "0", "-R", "max", &url,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Let it send requests, then press Ctrl-C.
    std::thread::sleep(Duration::from_secs(1));
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on the pid of the child this test started and has not waited for.
    let sent = unsafe { libc::kill(pid, libc::SIGINT) };
    assert_eq!(sent, 0);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    let text = stdout(&output);
    assert!(text.contains("interrupted"), "{text}");
    assert!(!text.contains("timeout ×"), "{text}");
    assert!(text.contains("✓ errors ≤ 1%  0.00% (0 of "), "{text}");
}

#[test]
fn connection_close_as_a_header_opens_a_connection_per_request() {
    let (address, recorded) = spawn_server::<Recorded>(recording);
    let url = format!("http://{address}/");
    // wrk's and ab's habit for "no keep-alive".
    let output = bench(&[
        "-H",
        "Connection: close",
        "-d",
        "0.5",
        "--warmup",
        "0",
        "-R",
        "20",
        &url,
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", explain(&output));
    // The line describing the run says so.
    let output = Command::new(COLDWIRE)
        .args([
            "bench",
            "-H",
            "Connection: close",
            "-d",
            "0.2",
            "--warmup",
            "0",
        ])
        .args(["-R", "20", &url])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("(a new one per request)"), "{stderr}");
    let requests = recorded.requests.lock().unwrap();
    assert!(!requests.is_empty(), "no request reached the server");
    assert!(
        requests
            .iter()
            .all(|request| request.header("connection") == Some("close")),
        "every request is its connection's last"
    );
    drop(requests);
    let output = bench(&["-H", "Connection: upgrade", &url]);
    assert_eq!(output.status.code(), Some(64), "{}", explain(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("-H 'Connection: close'"), "{stderr}");
}
