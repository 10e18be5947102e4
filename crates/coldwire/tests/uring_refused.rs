//! `coldwire serve` where a seccomp filter refuses `io_uring_setup` (as container runtimes'
//! default profiles do): an explicit `--io uring` exits at once with a message that says
//! why and what to use instead, and without `--io` the server falls back to epoll and
//! serves. The filter applies to the child process only (`coldwire-io`'s test helper).

#[path = "../../coldwire-io/tests/seccomp/mod.rs"]
mod seccomp;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn serve(root: &std::path::Path, extra: &[&str], errno: i32) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_coldwire"));
    command
        .args(["serve", "--root"])
        .arg(root)
        .args(["--listen", "127.0.0.1:0", "--workers", "1"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    seccomp::refuse_io_uring(&mut command, errno)
        .spawn()
        .expect("starting coldwire serve")
}

/// Waits (at most 20 s) for the child to exit; kills it and fails otherwise.
fn exit_status(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("coldwire serve did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn explicit_uring_fails_with_the_reason_where_seccomp_refuses_it() {
    let root = tempfile::tempdir().unwrap();
    for (errno, reason) in [
        (libc::EPERM, "io_uring_setup was refused (EPERM)"),
        (libc::ENOSYS, "no io_uring (io_uring_setup: ENOSYS)"),
    ] {
        for backend in ["uring", "uring-poll"] {
            let mut child = serve(root.path(), &["--io", backend], errno);
            let status = exit_status(&mut child);
            let mut stderr = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut stderr)
                .unwrap();
            assert!(!status.success(), "--io {backend} must not start: {stderr}");
            assert!(
                stderr.contains(reason) && stderr.contains("--io"),
                "--io {backend}, errno {errno}: the message names the cause and the way out: {stderr}"
            );
        }
    }
}

#[test]
fn without_io_the_server_falls_back_and_serves_where_seccomp_refuses_io_uring() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("hello.txt"), b"hello from epoll\n").unwrap();
    let mut child = serve(root.path(), &[], libc::EPERM);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let address = loop {
        line.clear();
        if stdout.read_line(&mut line).unwrap() == 0 {
            let _ = child.kill();
            let _ = child.wait();
            panic!("coldwire serve exited before listening");
        }
        if let Some(address) = line.trim().strip_prefix("listening on http://") {
            break address.to_owned();
        }
    };
    let mut client = TcpStream::connect(&address).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    client
        .write_all(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    let read = client.read_to_string(&mut response);
    let _ = child.kill();
    let _ = child.wait();
    let mut stderr = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut stderr);
    read.unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("hello from epoll\n"), "{response}");
    let banner = format!("{line}{stderr}");
    assert!(
        stderr.contains("backend epoll"),
        "the fallback is epoll: {banner}"
    );
}
