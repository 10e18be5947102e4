//! Running coldwire as an operator does (docs/operations.md): the configuration file
//! (`--config`, `check-config`), SIGHUP reloading it while connections carry on, SIGUSR1
//! reopening the access log after logrotate moved it, systemd's readiness notifications,
//! and one exit status per class of start-up failure.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use coldwire_process::{Process, Stderr};
use coldwire_testkit::coldwire;
use coldwire_testkit::response::{Response, read_response};

/// A started `coldwire` and the address of its first `http://` stdout line.
pub(super) fn start(args: &[&str], environment: &[(&str, &Path)]) -> (Process, SocketAddr) {
    let mut launch = coldwire(args).stderr(Stderr::Keep(200));
    for (key, value) in environment {
        launch = launch.env(key, value);
    }
    let mut process = launch.spawn().expect("starting coldwire");
    let line = process
        .wait_for_line("", Duration::from_secs(10))
        .unwrap_or_else(|error| panic!("no address line: {error}"));
    let address = line
        .rsplit("http://")
        .next()
        .and_then(|address| address.parse().ok())
        .unwrap_or_else(|| panic!("no address line: {line:?}"));
    (process, address)
}

/// Waits until stderr holds `text` (the server's report of a signal).
fn wait_for_stderr(process: &Process, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let tail = process.stderr_tail();
        if tail.contains(text) {
            return tail;
        }
        assert!(Instant::now() < deadline, "no {text:?} on stderr: {tail}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One request on a keep-alive connection; the status.
fn request(stream: &mut BufReader<TcpStream>, request: &str) -> u16 {
    exchange(stream, request).status
}

/// One request on a keep-alive connection; the response.
fn exchange(stream: &mut BufReader<TcpStream>, request: &str) -> Response {
    stream.get_mut().write_all(request.as_bytes()).unwrap();
    read_response(stream, false).expect("a response")
}

pub(super) fn stop(mut process: Process) {
    process.signal(libc::SIGTERM).unwrap();
    let status = process.wait_exit(Duration::from_secs(15));
    assert!(status.is_some_and(|status| status.success()), "{status:?}");
}

coldwire_testkit::backend_tests! {
    sighup_applies_a_changed_acl_while_a_keep_alive_connection_carries_on,
    sigusr1_reopens_the_access_log_after_rotation_losing_no_line,
}

/// The CONNECT port ACL (`connect-port`) and the cache's object limit change in the file;
/// after SIGHUP a CONNECT the proxy refused is let through and a response it would have
/// stored is too large, and a keep-alive connection opened before the reload keeps being
/// served.
fn sighup_applies_a_changed_acl_while_a_keep_alive_connection_carries_on(backend: &str) {
    let directory = tempfile::tempdir().unwrap();
    let (origin, origin_address) = start(
        &[
            "serve",
            "--root",
            &coldwire_testkit::docs_directory(),
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "1",
        ],
        &[],
    );
    // A CONNECT target that only needs to accept.
    let target = TcpListener::bind("127.0.0.1:0").unwrap();
    let target_port = target.local_addr().unwrap().port();
    let config = directory.path().join("proxy.toml");
    let write_config = |ports: &str, max_object: u32| {
        std::fs::write(
            &config,
            format!(
                "[proxy]\nlisten = \"127.0.0.1:0\"\nworkers = 1\nio = \"{backend}\"\n\
                 connect-port = [{ports}]\nidle-timeout = \"30s\"\n\
                 max-object-bytes = {max_object}\n"
            ),
        )
        .unwrap();
    };
    write_config("8443", 1_000_000);
    let config_text = config.to_string_lossy().into_owned();
    let (proxy, proxy_address) = start(&["proxy", "--config", &config_text], &[]);
    let get =
        format!("GET http://{origin_address}/bench.md HTTP/1.1\r\nHost: {origin_address}\r\n\r\n");
    let connect = format!(
        "CONNECT 127.0.0.1:{target_port} HTTP/1.1\r\nHost: 127.0.0.1:{target_port}\r\n\r\n"
    );
    let mut kept = BufReader::new(TcpStream::connect(proxy_address).unwrap());
    kept.get_mut()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(request(&mut kept, &get), 200);
    let mut refused = BufReader::new(TcpStream::connect(proxy_address).unwrap());
    assert_eq!(
        request(&mut refused, &connect),
        403,
        "port not in the ACL yet"
    );

    write_config(&format!("8443, {target_port}"), 1_000);
    let mut proxy = proxy;
    proxy.signal(libc::SIGHUP).unwrap();
    wait_for_stderr(&proxy, "SIGHUP, configuration reloaded");

    assert_eq!(
        request(&mut kept, &get),
        200,
        "the keep-alive connection carries on"
    );
    let other = get.replace("/bench.md", "/proxy.md");
    let response = exchange(&mut kept, &other);
    let cache_status = response
        .header("cache-status")
        .unwrap_or_default()
        .to_owned();
    assert!(cache_status.contains("too-large"), "{cache_status}");
    let mut allowed = BufReader::new(TcpStream::connect(proxy_address).unwrap());
    allowed
        .get_mut()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    allowed.get_mut().write_all(connect.as_bytes()).unwrap();
    let mut status_line = String::new();
    allowed.read_line(&mut status_line).unwrap();
    assert!(status_line.starts_with("HTTP/1.1 200"), "{status_line:?}");

    // What cannot change live is named and left as it was.
    std::fs::write(
        &config,
        format!(
            "[proxy]\nlisten = \"127.0.0.1:1\"\nworkers = 2\nio = \"{backend}\"\ncache-dir = \"{}\"\n",
            directory.path().join("disk-cache").display()
        ),
    )
    .unwrap();
    proxy.signal(libc::SIGHUP).unwrap();
    let tail = wait_for_stderr(&proxy, "not changed while running");
    assert!(
        tail.contains("--listen") && tail.contains("--workers") && tail.contains("--cache-dir"),
        "{tail}"
    );
    assert_eq!(request(&mut kept, &get), 200);
    // A broken file changes nothing, and says so.
    std::fs::write(&config, "[proxy]\nlisten = 3\nnonsense = 1\n").unwrap();
    proxy.signal(libc::SIGHUP).unwrap();
    let tail = wait_for_stderr(&proxy, "NOT reloaded");
    assert!(tail.contains("unknown key \"nonsense\""), "{tail}");
    assert_eq!(request(&mut kept, &get), 200);
    drop(kept);
    stop(proxy);
    stop(origin);
}

/// logrotate's way: the log is renamed, then SIGUSR1; the lines of requests before the
/// signal are in the renamed file or the new one, those after it in the new one, and none
/// is lost or doubled.
fn sigusr1_reopens_the_access_log_after_rotation_losing_no_line(backend: &str) {
    let directory = tempfile::tempdir().unwrap();
    let log = directory.path().join("access.log");
    let log_text = log.to_string_lossy().into_owned();
    let root = coldwire_testkit::docs_directory();
    let (mut server, address) = start(
        &[
            "serve",
            "--root",
            &root,
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "2",
            "--io",
            backend,
            "--access-log",
            &log_text,
        ],
        &[],
    );
    let get = |number: usize| {
        let mut stream = BufReader::new(TcpStream::connect(address).unwrap());
        let status = request(
            &mut stream,
            &format!("GET /bench.md?n={number} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        );
        assert_eq!(status, 200);
    };
    for number in 0..20 {
        get(number);
    }
    let rotated = directory.path().join("access.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    server.signal(libc::SIGUSR1).unwrap();
    wait_for_stderr(&server, "SIGUSR1, reopened 1 log file(s)");
    for number in 20..40 {
        get(number);
    }
    stop(server);
    let old = std::fs::read_to_string(&rotated).unwrap();
    let new = std::fs::read_to_string(&log).expect("a new access.log after SIGUSR1");
    for number in 0..40 {
        let field = format!("/bench.md?n={number} ");
        let count = old.matches(&field).count() + new.matches(&field).count();
        assert_eq!(
            count, 1,
            "request {number}: {count} lines\nold:\n{old}\nnew:\n{new}"
        );
        if number >= 20 {
            assert!(
                new.contains(&field),
                "request {number} after SIGUSR1 not in the new file"
            );
        }
    }
}

/// Under systemd (`Type=notify`), the server says READY=1 once it listens and
/// STOPPING=1 when asked to stop.
#[test]
fn systemd_is_told_ready_and_stopping() {
    let directory = tempfile::tempdir().unwrap();
    let socket_path = directory.path().join("notify");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (server, _) = start(
        &[
            "serve",
            "--root",
            &coldwire_testkit::docs_directory(),
            "--listen",
            "127.0.0.1:0",
            "--workers",
            "1",
        ],
        &[("NOTIFY_SOCKET", &socket_path)],
    );
    let mut buffer = [0u8; 256];
    let length = socket.recv(&mut buffer).expect("READY=1");
    assert_eq!(&buffer[..length], b"READY=1");
    stop(server);
    let length = socket.recv(&mut buffer).expect("STOPPING=1");
    assert_eq!(&buffer[..length], b"STOPPING=1");
}

/// `coldwire ARGS` run to its end: exit status and stderr.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_coldwire"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running coldwire");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Flags other servers have and coldwire spells another way are a usage error with a tip
/// naming coldwire's flag (`--port` → `--listen`, `--threads` → `--workers`).
#[test]
fn other_servers_flags_get_a_tip() {
    let root = coldwire_testkit::docs_directory();
    for (flag, value, tip) in [
        ("--port", "8080", "--listen PORT"),
        ("-p", "8080", "--listen PORT"),
        ("--bind", "0.0.0.0", "--listen"),
        ("--threads", "4", "--workers N"),
    ] {
        let (code, stderr) = run(&["serve", "--root", &root, flag, value]);
        assert_eq!(code, Some(64), "{flag}: {stderr}");
        assert!(
            stderr.contains("tip: ") && stderr.contains(tip),
            "{flag}: {stderr}"
        );
    }
    let (code, stderr) = run(&["serve", "--root", &root, "--nonsense"]);
    assert_eq!(code, Some(64), "{stderr}");
    assert!(!stderr.contains("tip: address"), "{stderr}");
}

/// Each class of start-up failure has its exit status (docs/operations.md), and its
/// message is one line naming the problem and the fix.
#[test]
fn start_up_failures_have_one_line_and_a_status_per_class() {
    let directory = tempfile::tempdir().unwrap();
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy_address = busy.local_addr().unwrap().to_string();
    let bad_config = directory.path().join("bad.toml");
    std::fs::write(&bad_config, "[serve]\nroot = \"/srv\"\nworkres = 2\n").unwrap();
    let bad_config = bad_config.to_string_lossy().into_owned();
    let missing = directory
        .path()
        .join("missing")
        .to_string_lossy()
        .into_owned();
    let no_directory_log = directory
        .path()
        .join("no/such/access.log")
        .to_string_lossy()
        .into_owned();
    let root = coldwire_testkit::docs_directory();
    let cases: [(&[&str], i32, &[&str]); 9] = [
        (
            &["serve", "--root", &root, "--listen", &busy_address],
            69,
            &["Address already in use", "ss -ltnp", "--listen"],
        ),
        (
            &["proxy", "--listen", &busy_address],
            69,
            &["Address already in use"],
        ),
        (
            &["serve", "--root", &missing, "--listen", "127.0.0.1:0"],
            66,
            &["document root", "no such directory", "--root"],
        ),
        (
            &["serve", "--config", &bad_config],
            78,
            &["bad.toml:3:1", "unknown key \"workres\""],
        ),
        (
            &["serve", "--root", &root, "--idle-timeout", "soon"],
            64,
            &["--idle-timeout", "30s"],
        ),
        (
            &[
                "serve",
                "--root",
                &root,
                "--listen",
                "127.0.0.1:0",
                "--access-log",
                &no_directory_log,
            ],
            73,
            &["access log", "writable"],
        ),
        // Zero limits refused every connection or request: now refused at start.
        (
            &["serve", "--root", &root, "--max-connections", "0"],
            64,
            &["--max-connections must be at least 1"],
        ),
        (
            &["proxy", "--max-headers", "0"],
            64,
            &["--max-headers must be at least 1"],
        ),
        (
            &["proxy", "--max-head-bytes", "0"],
            64,
            &["--max-head-bytes must be at least 1"],
        ),
    ];
    for (args, status, words) in cases {
        let (code, stderr) = run(args);
        assert_eq!(code, Some(status), "{args:?}: {stderr}");
        for word in words {
            assert!(stderr.contains(word), "{args:?}: {word:?} not in {stderr}");
        }
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|line| !line.trim().is_empty() && !line.starts_with("For more information"))
            .collect();
        assert_eq!(lines.len(), 1, "{args:?}: one line expected: {stderr}");
    }
    let (code, stderr) = run(&["check-config", &bad_config]);
    assert_eq!(code, Some(78), "{stderr}");
    drop(busy);
}

/// A port below 1024 without the privilege: exit status 77 and the capability to grant.
/// Run as `nobody` through setpriv (util-linux); skipped where that cannot be done.
#[test]
fn a_privileged_port_without_the_privilege_is_status_77() {
    let binary = env!("CARGO_BIN_EXE_coldwire");
    let output = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .args([binary, "proxy", "--listen", "127.0.0.1:81"])
        .stdin(Stdio::null())
        .output();
    let Ok(output) = output else {
        println!("skipped: no setpriv here");
        return;
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    if stderr.contains("setpriv:") {
        println!("skipped: setpriv cannot drop to nobody here: {stderr}");
        return;
    }
    assert_eq!(output.status.code(), Some(77), "{stderr}");
    assert!(stderr.contains("CAP_NET_BIND_SERVICE"), "{stderr}");
}

/// Every example under examples/ passes check-config, through the binary.
#[test]
fn every_example_configuration_is_valid() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut checked = 0;
    for entry in std::fs::read_dir(examples).unwrap() {
        let path = entry.unwrap().path();
        if path
            .extension()
            .is_some_and(|extension| extension == "toml")
        {
            let (code, stderr) = run(&["check-config", &path.to_string_lossy()]);
            assert_eq!(code, Some(0), "{}: {stderr}", path.display());
            checked += 1;
        }
    }
    assert!(checked >= 4);
}
