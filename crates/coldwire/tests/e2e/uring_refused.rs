//! `coldwire serve` where a seccomp filter refuses `io_uring_setup` (as container runtimes'
//! default profiles do): an explicit `--io uring` exits at once with a message that says
//! why and what to use instead, and without `--io` the server falls back to epoll and
//! serves. The filter applies to the child process only (`coldwire-io`'s test helper,
//! installed between `fork` and `exec` through the runner's `configure`), never to the
//! test process, so these tests share the e2e binary with the others.

#[path = "../../../coldwire-io/tests/seccomp/mod.rs"]
mod seccomp;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use coldwire_process::{Process, Stderr};
use coldwire_testkit::coldwire;

/// How long the child gets to exit, or to print its address.
const LIMIT: Duration = Duration::from_secs(20);

fn serve(root: &std::path::Path, extra: &[&str], errno: i32) -> Process {
    coldwire(["serve", "--root"])
        .arg(root)
        .args(["--listen", "127.0.0.1:0", "--workers", "1"])
        .args(extra)
        .stderr(Stderr::Pipe)
        .configure(move |command| {
            seccomp::refuse_io_uring(command, errno);
        })
        .spawn()
        .expect("starting coldwire serve")
}

/// All the child wrote to stderr (it has exited or been stopped).
fn stderr_of(child: &mut Process) -> String {
    let mut stderr = String::new();
    if let Some(mut pipe) = child.take_stderr() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    stderr
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
            let status = child
                .wait_exit(LIMIT)
                .unwrap_or_else(|| panic!("coldwire serve did not exit"));
            let stderr = stderr_of(&mut child);
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
    let address = child
        .wait_for_line("listening on http://", LIMIT)
        .unwrap_or_else(|error| panic!("coldwire serve exited before listening: {error}"));
    let mut client = TcpStream::connect(&address).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    client
        .write_all(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    let read = client.read_to_string(&mut response);
    child.stop();
    let stderr = stderr_of(&mut child);
    read.unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("hello from epoll\n"), "{response}");
    let banner = format!("listening on http://{address}\n{stderr}");
    assert!(
        stderr.contains("backend epoll"),
        "the fallback is epoll: {banner}"
    );
}
