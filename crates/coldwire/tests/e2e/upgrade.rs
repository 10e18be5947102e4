//! Listening sockets handed between processes (docs/operations.md): the zero-downtime
//! binary upgrade (SIGUSR2: a new process takes the sockets, the old one drains and exits)
//! under a `coldwire bench` load with no failed request, and systemd socket activation
//! (`LISTEN_FDS`) with a socket the test makes. Every process a test starts is stopped on
//! every way out of it, a failure included: the upgraded server leads a process group of
//! its own, which its successor inherits, and the group is stopped on drop.

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use coldwire_process::{Launch, Process, Stderr};
use coldwire_testkit::coldwire;

/// The address on the first `http://` line of stdout.
fn address_line(process: &mut Process) -> SocketAddr {
    let line = process
        .wait_for_line("", Duration::from_secs(10))
        .unwrap_or_else(|error| panic!("no address line: {error}"));
    line.rsplit("http://")
        .next()
        .and_then(|address| address.parse().ok())
        .unwrap_or_else(|| panic!("no address line: {line:?}"))
}

/// The state letter and process group of process `pid`, from `/proc/PID/stat` (`None`
/// once it is gone).
fn state_and_group(pid: u32) -> Option<(char, libc::pid_t)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's closing parenthesis: state, parent, process group, ...
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let group = fields.nth(1)?.parse().ok()?;
    Some((state, group))
}

/// Whether process `pid` is gone (or a zombie: the new process of an upgrade is not this
/// test's child, so it is reaped by whoever adopted it).
fn gone(pid: u32) -> bool {
    state_and_group(pid).is_none_or(|(state, _)| state == 'Z')
}

/// The live (not zombie) processes of process group `group`.
fn members(group: libc::pid_t) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| state_and_group(pid).is_some_and(|(state, of)| of == group && state != 'Z'))
        .collect()
}

/// The process group of a server this test started (the server leads a group of its own,
/// and the new process of an upgrade inherits it): on drop, whether the test passed or
/// failed (even before it learnt the new process's id, or when the old process died
/// waiting for it), every process still in it gets SIGTERM, then SIGKILL after 15 s.
struct Group(libc::pid_t);

impl Group {
    /// The group led by `server`, started with [`own_group`].
    fn of(server: &Process) -> Group {
        Group(server.pid() as libc::pid_t)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if members(self.0).is_empty() {
            return;
        }
        // SAFETY: kill has no memory effects; the group is the one this test's server
        // made, and it still has members, so its id has not been reused.
        unsafe { libc::kill(-self.0, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(15);
        while !members(self.0).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !members(self.0).is_empty() {
            // SAFETY: as above.
            unsafe { libc::kill(-self.0, libc::SIGKILL) };
        }
    }
}

/// `launch` in a process group of its own, so that [`Group`] reaches its successors.
fn own_group(launch: Launch) -> Launch {
    launch.configure(|command| {
        command.process_group(0);
    })
}

/// A child of this test that is killed (and reaped) if the test ends before it exits.
struct KillOnDrop(Option<Child>);

impl KillOnDrop {
    /// Waits for the child's exit and takes its output.
    fn wait_with_output(mut self) -> std::io::Result<Output> {
        self.0
            .take()
            .expect("not waited for yet")
            .wait_with_output()
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Stops process `pid` (not a child of this test) with SIGTERM and waits for it; fails
/// the test if it does not stop within 15 s (then kills it).
fn terminate(pid: u32) {
    // SAFETY: kill has no memory effects; `pid` is the server this test started.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(15);
    while !gone(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if !gone(pid) {
        // SAFETY: as above.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        panic!("process {pid} did not stop on SIGTERM");
    }
}

coldwire_testkit::backend_tests! {
    a_binary_upgrade_under_load_fails_no_request,
}

/// `coldwire bench` sends 5,000 requests/s over keep-alive connections for 3 s; one second
/// in, SIGUSR2: a new process takes over the sockets and the old one drains and exits.
/// Every request is answered; the address serves on from the new process.
fn a_binary_upgrade_under_load_fails_no_request(backend: &str) {
    let old = coldwire([
        "serve",
        "--root",
        &coldwire_testkit::docs_directory(),
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--io",
        backend,
    ]);
    upgrade_under_load(backend, old, None);
}

/// The same through the caching proxy (one backend: the upgrade is the runtime's, the
/// same for every server), the bench sending absolute-form requests to it.
#[test]
fn a_proxy_binary_upgrade_under_load_fails_no_request() {
    let mut origin = coldwire([
        "serve",
        "--root",
        &coldwire_testkit::docs_directory(),
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "1",
    ])
    .spawn()
    .expect("starting the origin");
    let origin_address = address_line(&mut origin);
    let proxy = coldwire([
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--admin",
        "127.0.0.1:0",
    ]);
    upgrade_under_load("epoll", proxy, Some(origin_address));
}

/// Starts `old`, runs the bench against it (through it to `origin` when it is a proxy),
/// upgrades it one second in, and checks that no request failed.
fn upgrade_under_load(label: &str, old: Launch, origin: Option<SocketAddr>) {
    let mut old = own_group(old.stderr(Stderr::Keep(100)))
        .spawn()
        .expect("starting the server");
    // Declared after `old`, so dropped before it: the whole group, successor included,
    // is stopped on every way out of this function.
    let _group = Group::of(&old);
    let address = address_line(&mut old);
    let (url, proxy) = match origin {
        Some(origin) => (
            format!("http://{origin}/bench.md"),
            Some(address.to_string()),
        ),
        None => (format!("http://{address}/bench.md"), None),
    };
    let directory = tempfile::tempdir().unwrap();
    let json = directory.path().join("bench.json");
    let bench = Command::new(env!("CARGO_BIN_EXE_coldwire"))
        .args(["bench", "--url", &url])
        .args(proxy.iter().flat_map(|proxy| ["--proxy", proxy.as_str()]))
        .args([
            "--rate",
            "5000",
            "--duration",
            "3",
            "--warmup",
            "0",
            "--connections",
            "50",
        ])
        .args(["--timeout", "5", "--late-limit", "1000", "-q", "--json"])
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map(|child| KillOnDrop(Some(child)))
        .expect("starting coldwire bench");
    std::thread::sleep(Duration::from_secs(1));
    old.signal(libc::SIGUSR2).unwrap();
    // Longer than the old process's own wait for its successor (30 s): on a loaded machine
    // a slow start then ends in the old process's "upgrade failed" line, which says why,
    // rather than in this test's timeout.
    let deadline = Instant::now() + Duration::from_secs(40);
    let successor = loop {
        let tail = old.stderr_tail();
        if let Some(pid) = tail
            .split("new process ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|pid| pid.parse().ok())
        {
            break pid;
        }
        assert!(
            !tail.contains("upgrade failed") && Instant::now() < deadline,
            "no upgrade: {tail}"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let status = old.wait_exit(Duration::from_secs(20));
    assert!(
        status.is_some_and(|status| status.success()),
        "the old process: {status:?}\n{}",
        old.stderr_tail()
    );
    let output = bench.wait_with_output().expect("coldwire bench");
    let text = std::fs::read_to_string(&json).unwrap_or_else(|_| {
        panic!(
            "no bench result: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let result: serde_json::Value = serde_json::from_str(&text).unwrap();
    let run = &result["runs"][0]["phases"][0];
    assert_eq!(
        run["errors_total"], 0,
        "failed requests during the upgrade: {}",
        run["errors"]
    );
    let completed = run["completed_in_window"].as_u64().unwrap();
    println!(
        "{label}: {completed} responses, {} requests/s achieved, {} slots missed by the generator",
        run["achieved_rate"], run["missed_slots"]
    );
    assert!(completed > 1000, "only {completed} responses");
    let intervals = run["intervals"].as_array().unwrap();
    assert!(
        intervals
            .last()
            .is_some_and(|last| last["succeeded"].as_u64() > Some(0)),
        "nothing served after the upgrade: {intervals:?}"
    );
    let target = if origin.is_some() {
        url.as_str()
    } else {
        "/bench.md"
    };
    assert!(
        coldwire_testkit::get_until_closed(address, target).starts_with("HTTP/1.1 200"),
        "the new process serves"
    );
    terminate(successor);
}

/// systemd socket activation: the socket is made by the "manager" (this test), passed as
/// descriptor 3 with `LISTEN_FDS=1` and `LISTEN_PID` of the server; the server serves on
/// it, whatever --listen says, and binds nothing itself.
#[test]
fn systemd_socket_activation_serves_on_the_passed_socket() {
    let socket = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = socket.local_addr().unwrap();
    let fd = socket.as_raw_fd();
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "LISTEN_PID=$$ LISTEN_FDS=1 exec {} serve --root {} --listen 127.0.0.1:0 --workers 2",
            env!("CARGO_BIN_EXE_coldwire"),
            coldwire_testkit::docs_directory()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec only dup2 (async-signal-safe) runs, on a descriptor
    // open in this process; descriptor 3 of the child becomes the socket, without
    // close-on-exec, as systemd passes it.
    unsafe {
        command.pre_exec(move || {
            // dup2 onto itself keeps close-on-exec: clear it on 3 in every case.
            if libc::dup2(fd, 3) < 0 || libc::fcntl(3, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = KillOnDrop(Some(command.spawn().expect("starting sh")));
    let process = child.0.as_mut().expect("just started");
    let pid = process.id();
    let mut stdout = process.stdout.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\n") && stdout.read(&mut byte).unwrap_or(0) == 1 {
        line.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&line).into_owned();
    let served = coldwire_testkit::get_until_closed(address, "/bench.md");
    // SAFETY: signalling our own child, not yet waited for.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    let output = child.wait_with_output().unwrap();
    assert!(
        line.contains(&format!("http://{address}")),
        "listens on {line:?}, not the passed socket {address}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(served.starts_with("HTTP/1.1 200"), "{served}");
    assert!(output.status.success(), "{:?}", output.status);
    drop(socket);
}
