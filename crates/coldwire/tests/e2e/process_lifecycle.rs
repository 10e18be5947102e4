//! The server processes as an operator runs them: a port that another process listens on
//! is an "address in use" error at start (never silently shared through `SO_REUSEPORT`),
//! SIGTERM still stops a server whose stderr is a closed pipe (`coldwire serve 2>&1 |
//! head -2`), SIGQUIT is a graceful stop as nginx's (`nginx -s quit`), not a core dump,
//! and SIGHUP / SIGUSR1 neither kill a server nor lose its buffered access-log lines
//! (what they do is tested in operations.rs; SIGUSR2, the upgrade, in upgrade.rs).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use coldwire_process::{Process, Stderr};
use coldwire_testkit::coldwire;

/// A `coldwire` server started with `args`, the address of its first stdout line read.
struct Running {
    process: Process,
    address: SocketAddr,
}

fn start(args: &[&str], stderr: Stderr) -> Running {
    let mut process = coldwire(args)
        .stderr(stderr)
        .spawn()
        .expect("starting coldwire");
    let line = process
        .wait_for_line("", Duration::from_secs(10))
        .expect("an address line");
    let address = line
        .rsplit("http://")
        .next()
        .and_then(|address| address.parse().ok())
        .unwrap_or_else(|| panic!("no address line: {line:?}"));
    Running { process, address }
}

fn serve_args<'a>(root: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["serve", "--root", root, "--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    args
}

#[test]
fn a_port_another_process_listens_on_is_address_in_use() {
    let root = coldwire_testkit::docs_directory();
    let first = start(&serve_args(&root, &["--workers", "2"]), Stderr::Null);
    let taken = first.address.to_string();
    for subcommand in [
        vec!["serve", "--root", root.as_str(), "--listen", taken.as_str()],
        vec!["proxy", "--listen", taken.as_str()],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_coldwire"))
            .args(&subcommand)
            .stdin(Stdio::null())
            .output()
            .expect("running coldwire");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success(),
            "{subcommand:?} started on a port in use; stdout: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        assert!(
            stderr.contains("Address already in use") && stderr.contains(&taken),
            "{subcommand:?}: {stderr}"
        );
    }
    // The first server, with its two workers, still answers every connection.
    for _ in 0..8 {
        assert!(
            coldwire_testkit::get_until_closed(first.address, "/bench.md")
                .starts_with("HTTP/1.1 200")
        );
    }
}

#[test]
fn sigterm_stops_a_server_whose_stderr_is_a_closed_pipe() {
    for args in [
        serve_args(&coldwire_testkit::docs_directory(), &[]),
        vec!["proxy", "--listen", "127.0.0.1:0"],
    ] {
        let mut running = start(&args, Stderr::Pipe);
        // What `| head -2` does once it has its lines: the read end goes away.
        drop(running.process.take_stderr());
        running.process.signal(libc::SIGHUP).unwrap();
        running.process.signal(libc::SIGTERM).unwrap();
        let status = running.process.wait_exit(Duration::from_secs(15));
        assert!(
            status.is_some_and(|status| status.success()),
            "{args:?}: SIGTERM with a closed stderr: {status:?}"
        );
    }
}

/// A one-worker `serve` writing its access log into a fresh scratch directory named after
/// `tag`, after one request answered 200: the server, the scratch directory and the log.
fn serve_with_access_log(tag: &str) -> (Running, std::path::PathBuf, std::path::PathBuf) {
    let scratch = std::env::temp_dir().join(format!("coldwire-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let log = scratch.join("access.log");
    let log_text = log.to_string_lossy().into_owned();
    let root = coldwire_testkit::docs_directory();
    let running = start(
        &serve_args(&root, &["--workers", "1", "--access-log", &log_text]),
        Stderr::Null,
    );
    assert!(
        coldwire_testkit::get_until_closed(running.address, "/bench.md")
            .starts_with("HTTP/1.1 200")
    );
    (running, scratch, log)
}

#[test]
fn sighup_and_sigusr_neither_kill_nor_lose_access_log_lines() {
    let (mut running, scratch, log) = serve_with_access_log("lifecycle");
    // SIGUSR2 is the binary upgrade (the process hands over and exits): upgrade.rs.
    for (name, signal) in [("HUP", libc::SIGHUP), ("USR1", libc::SIGUSR1)] {
        running.process.signal(signal).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            running.process.try_wait().is_none(),
            "SIG{name} killed the server"
        );
        assert!(
            coldwire_testkit::get_until_closed(running.address, "/bench.md")
                .starts_with("HTTP/1.1 200")
        );
    }
    running.process.signal(libc::SIGTERM).unwrap();
    let status = running.process.wait_exit(Duration::from_secs(15));
    assert!(status.is_some_and(|status| status.success()), "{status:?}");
    let lines = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(lines.lines().count(), 3, "access log:\n{lines}");
    let _ = std::fs::remove_dir_all(&scratch);
}

/// An nginx operator's graceful stop, `kill -QUIT` (`nginx -s quit`): exit 0 with the
/// access log flushed, as SIGTERM; its default action would dump core and lose the lines.
#[test]
fn sigquit_stops_gracefully_as_nginx_quit() {
    let (mut running, scratch, log) = serve_with_access_log("sigquit");
    running.process.signal(libc::SIGQUIT).unwrap();
    let status = running.process.wait_exit(Duration::from_secs(15));
    assert!(status.is_some_and(|status| status.success()), "{status:?}");
    let lines = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(lines.lines().count(), 1, "access log:\n{lines}");
    let _ = std::fs::remove_dir_all(&scratch);
}

/// `coldwire serve ... 2>&1 | head -2` exactly: stdout and stderr are one pipe whose reader
/// leaves after two lines. The access log (`--access-log -`) and the error log (stderr)
/// then write into the closed pipe; the server keeps answering and SIGTERM still stops it
/// with status 0.
#[test]
fn sigterm_stops_a_server_after_head_2_closed_its_only_pipe() {
    use std::io::BufRead;
    let (reader, writer) = std::io::pipe().unwrap();
    let root = coldwire_testkit::docs_directory();
    let mut child = Command::new(env!("CARGO_BIN_EXE_coldwire"))
        .args(serve_args(
            &root,
            &[
                "--workers",
                "1",
                "--access-log",
                "-",
                "--error-log-level",
                "info",
            ],
        ))
        .stdin(Stdio::null())
        .stdout(writer.try_clone().unwrap())
        .stderr(writer)
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(reader).lines();
    let mut address = None;
    for _ in 0..2 {
        let line = lines.next().unwrap().unwrap();
        if let Some(found) = line.rsplit("http://").next().and_then(|a| a.parse().ok()) {
            address = Some(found);
        }
    }
    let address: SocketAddr = address.expect("the address line among the first two");
    // `head` exits: the pipe's only reader is gone.
    drop(lines);
    for _ in 0..3 {
        // An access-log line to stdout, and an error-log line to stderr, both EPIPE.
        assert!(
            coldwire_testkit::get_until_closed(address, "/bench.md").starts_with("HTTP/1.1 200")
        );
        let mut stream = TcpStream::connect(address).unwrap();
        stream.write_all(b"NOT HTTP\r\n\r\n").unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    }
    // Lines are flushed at least once a second: let them meet the closed pipe.
    std::thread::sleep(Duration::from_millis(1200));
    assert!(coldwire_testkit::get_until_closed(address, "/bench.md").starts_with("HTTP/1.1 200"));
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on our own child's pid, which has not been reaped yet.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.is_some_and(|status| status.success()),
        "SIGTERM after head -2: {status:?}"
    );
}
