//! Helpers for the `coldwire serve` end-to-end tests: a document root with known files, the
//! real server binary in a child process (killed on drop), a small raw HTTP/1.1 client, the
//! real `curl`, and the stats endpoint.

use std::fs;
use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long any single network read in these tests may block.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A string only the file outside the document root contains.
pub const SECRET: &str = "coldwire-test-secret-5f0c1e";

/// The files of the test document root, as served at `url_path`.
pub struct Served {
    /// Path in the URL, with its leading slash.
    pub url_path: &'static str,
    /// Exact contents.
    pub contents: Vec<u8>,
}

/// A document root in a temporary directory:
///
/// ```text
/// base/secret.txt               SECRET (outside the root)
/// base/root/index.html          small HTML page
/// base/root/small.txt           1,259 bytes of text
/// base/root/medium.bin          8 KiB, pseudo-random
/// base/root/large.bin           1 MiB, pseudo-random (no repeating windows)
/// base/root/sub/index.html      the subdirectory's index
/// base/root/link.txt            symlink -> small.txt (inside: served)
/// base/root/escape.txt          symlink -> base/secret.txt (outside: refused)
/// ```
pub struct DocumentRoot {
    base: tempfile::TempDir,
    /// `index.html`.
    pub index: Vec<u8>,
    /// `small.txt` (1,259 bytes).
    pub small: Vec<u8>,
    /// `medium.bin` (8 KiB).
    pub medium: Vec<u8>,
    /// `large.bin` (1 MiB).
    pub large: Vec<u8>,
    /// `sub/index.html`.
    pub sub_index: Vec<u8>,
}

/// Deterministic, non-repeating bytes (xorshift64*), so a misplaced slice never matches.
pub fn pseudo_random_bytes(length: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut out = Vec::with_capacity(length + 8);
    while out.len() < length {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(length);
    out
}

impl DocumentRoot {
    /// Creates the tree described on the type.
    pub fn new() -> DocumentRoot {
        let base = tempfile::Builder::new()
            .prefix("coldwire-serve-test-")
            .tempdir()
            .expect("creating a temporary directory");
        let root = base.path().join("root");
        fs::create_dir_all(root.join("sub")).expect("creating the document root");
        let index =
            b"<!doctype html>\n<title>coldwire test</title>\n<p>index of the root</p>\n".to_vec();
        let line = b"The quick brown fox jumps over the lazy dog; coldwire serves it.\n";
        let small: Vec<u8> = line.iter().copied().cycle().take(1259).collect();
        let medium = pseudo_random_bytes(8 * 1024, 0x5eed_0008);
        let large = pseudo_random_bytes(1024 * 1024, 0x5eed_1024);
        let sub_index = b"<!doctype html>\n<p>index of sub/</p>\n".to_vec();
        let write = |name: &str, contents: &[u8]| {
            fs::write(root.join(name), contents).expect("writing a test file");
        };
        write("index.html", &index);
        write("small.txt", &small);
        write("medium.bin", &medium);
        write("large.bin", &large);
        write("sub/index.html", &sub_index);
        let secret = base.path().join("secret.txt");
        fs::write(&secret, SECRET).expect("writing the secret");
        std::os::unix::fs::symlink("small.txt", root.join("link.txt"))
            .expect("creating the inner symlink");
        std::os::unix::fs::symlink(&secret, root.join("escape.txt"))
            .expect("creating the outward symlink");
        DocumentRoot {
            base,
            index,
            small,
            medium,
            large,
            sub_index,
        }
    }

    /// The directory to pass as `--root`.
    pub fn root(&self) -> PathBuf {
        self.base.path().join("root")
    }

    /// A path for scratch files next to (not inside) the root.
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.base.path().join(name)
    }

    /// Every regular file (and the inner symlink) with the URL it is served at.
    pub fn served_files(&self) -> Vec<Served> {
        vec![
            Served {
                url_path: "/index.html",
                contents: self.index.clone(),
            },
            Served {
                url_path: "/",
                contents: self.index.clone(),
            },
            Served {
                url_path: "/small.txt",
                contents: self.small.clone(),
            },
            Served {
                url_path: "/medium.bin",
                contents: self.medium.clone(),
            },
            Served {
                url_path: "/large.bin",
                contents: self.large.clone(),
            },
            Served {
                url_path: "/sub/",
                contents: self.sub_index.clone(),
            },
            Served {
                url_path: "/sub/index.html",
                contents: self.sub_index.clone(),
            },
            Served {
                url_path: "/link.txt",
                contents: self.small.clone(),
            },
        ]
    }
}

/// A running `coldwire serve` child process; killed (if still running) on drop.
pub struct Server {
    child: Child,
    /// Where it serves files.
    pub addr: SocketAddr,
    /// Where it serves stats, when started with `--admin`.
    pub admin: Option<SocketAddr>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Lines the server prints on stdout (its addresses), read by a helper thread.
    stdout_lines: mpsc::Receiver<String>,
}

/// Builder for [`Server`]: backend plus extra flags.
pub struct ServerOptions<'a> {
    backend: &'a str,
    root: PathBuf,
    admin: bool,
    extra: Vec<String>,
    open_files: Option<u64>,
}

impl<'a> ServerOptions<'a> {
    /// `serve --root ROOT --listen 127.0.0.1:0 --io BACKEND --workers 1`.
    pub fn new(backend: &'a str, root: &DocumentRoot) -> ServerOptions<'a> {
        ServerOptions {
            backend,
            root: root.root(),
            admin: false,
            extra: Vec::new(),
            open_files: None,
        }
    }

    /// Runs the server under `prlimit --nofile=N:N` (soft and hard), so it runs out of
    /// descriptors early.
    pub fn open_files_limit(mut self, limit: u64) -> Self {
        self.open_files = Some(limit);
        self
    }

    /// Also `--admin 127.0.0.1:0`.
    pub fn admin(mut self) -> Self {
        self.admin = true;
        self
    }

    /// Appends `flag value`.
    pub fn flag(mut self, flag: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        self.extra.push(flag.to_owned());
        self.extra
            .push(value.as_ref().to_string_lossy().into_owned());
        self
    }

    /// Starts the binary and waits for the address lines it prints.
    pub fn start(self) -> Server {
        let binary = env!("CARGO_BIN_EXE_coldwire");
        let mut command = match self.open_files {
            // prlimit execs the binary, so the child's pid is the server's.
            Some(limit) => {
                let mut command = Command::new("prlimit");
                command
                    .arg(format!("--nofile={limit}:{limit}"))
                    .arg("--")
                    .arg(binary);
                command
            }
            None => Command::new(binary),
        };
        command
            .arg("serve")
            .arg("--root")
            .arg(&self.root)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--io",
                self.backend,
                "--workers",
                "1",
            ])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if self.admin {
            command.args(["--admin", "127.0.0.1:0"]);
        }
        let mut child = command.spawn().expect("spawning the coldwire binary");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut stderr_pipe = child.stderr.take().expect("stderr is piped");
        let sink = stderr.clone();
        thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(count) = stderr_pipe.read(&mut chunk) {
                if count == 0 {
                    break;
                }
                sink.lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .extend_from_slice(&chunk[..count]);
            }
        });
        let stdout_lines = spawn_line_reader(child.stdout.take().expect("stdout is piped"));
        // The guard exists from here on, so a server that fails to start is still killed.
        let mut server = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin: None,
            stderr,
            stdout_lines,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let wanted = if self.admin { 2 } else { 1 };
        let mut seen = 0;
        while seen < wanted {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match server.stdout_lines.recv_timeout(left) {
                Ok(line) if !left.is_zero() => line,
                _ => {
                    // Let the stderr reader catch up with a server that exited at once.
                    thread::sleep(Duration::from_millis(100));
                    panic!(
                        "coldwire serve --io {} printed no address within 10 s; stderr:\n{}",
                        self.backend,
                        server.stderr_text()
                    )
                }
            };
            if let Some(address) = line.strip_prefix("listening on http://") {
                server.addr = address.trim().parse().expect("a socket address");
                seen += 1;
            } else if let Some(rest) = line.strip_prefix("stats on http://") {
                let address = rest.trim().trim_end_matches("/stats");
                server.admin = Some(address.parse().expect("a socket address"));
                seen += 1;
            }
        }
        server
    }
}

fn spawn_line_reader(stdout: ChildStdout) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

impl Server {
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the server wrote to stderr so far (for failure messages).
    pub fn stderr_text(&self) -> String {
        let bytes = self
            .stderr
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Sends SIGTERM through kill(1) (no unsafe `libc::kill` in tests).
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("running kill(1)");
        assert!(status.success(), "kill -TERM {} failed", self.pid());
    }

    /// Waits up to `limit` for the process to exit; panics (with its stderr) if it does not.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting for the server") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit within {limit:?}; stderr:\n{}",
                self.stderr_text()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// A connection to the server with read and write timeouts set.
    pub fn connect(&self) -> TcpStream {
        connect(self.addr)
    }

    /// The stats document (GET /stats on the admin address), parsed.
    pub fn stats(&self) -> serde_json::Value {
        let admin = self.admin.expect("the server was started without --admin");
        let mut stream = connect(admin);
        stream
            .write_all(b"GET /stats HTTP/1.1\r\nHost: stats\r\n\r\n")
            .expect("sending the stats request");
        let mut reader = BufReader::new(stream);
        let response = read_response(&mut reader, false).expect("reading the stats response");
        assert_eq!(response.status, 200, "stats endpoint status");
        serde_json::from_slice(&response.body).unwrap_or_else(|error| {
            panic!(
                "stats are not JSON ({error}): {}",
                String::from_utf8_lossy(&response.body)
            )
        })
    }

    /// A `total.<section>.<field>` counter from the stats.
    pub fn total(&self, section: &str, field: &str) -> u64 {
        counter(&self.stats(), section, field)
    }

    /// Polls the stats (every 20 ms, at most `limit`) until `done` holds for the counter;
    /// returns the last value seen either way.
    pub fn wait_for_total(
        &self,
        section: &str,
        field: &str,
        limit: Duration,
        done: impl Fn(u64) -> bool,
    ) -> u64 {
        let deadline = Instant::now() + limit;
        loop {
            let value = self.total(section, field);
            if done(value) || Instant::now() >= deadline {
                return value;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `stats["total"][section][field]` as a number (panics with the document if absent).
pub fn counter(stats: &serde_json::Value, section: &str, field: &str) -> u64 {
    stats["total"][section][field]
        .as_u64()
        .unwrap_or_else(|| panic!("no total.{section}.{field} in the stats: {stats}"))
}

/// A TCP connection with [`READ_TIMEOUT`] on reads and writes.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap_or_else(|error| panic!("connect {addr}: {error}"));
    stream
        .set_read_timeout(Some(READ_TIMEOUT))
        .expect("setting a read timeout");
    stream
        .set_write_timeout(Some(READ_TIMEOUT))
        .expect("setting a write timeout");
    stream
}

/// One parsed HTTP response.
#[derive(Debug)]
pub struct Response {
    /// The status line, e.g. `HTTP/1.1 200 OK`.
    pub status_line: String,
    /// The status code.
    pub status: u16,
    /// Header fields, names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    /// The body (by Content-Length; empty for HEAD, 1xx, 204 and 304).
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(field, _)| *field == name)
            .map(|(_, value)| value.as_str())
    }

    /// Content-Length as a number (panics when absent or malformed).
    pub fn content_length(&self) -> u64 {
        self.header("content-length")
            .unwrap_or_else(|| panic!("no Content-Length in {:?}", self.headers))
            .parse()
            .expect("a numeric Content-Length")
    }

    /// The body as text (lossy), for messages and contains-checks.
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Parses a response head (status line and fields, without the blank line).
pub fn parse_head(head: &str) -> (String, u16, Vec<(String, String)>) {
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default().to_owned();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers = lines
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (name, value) = line
                .split_once(':')
                .unwrap_or_else(|| panic!("bad header line {line:?}"));
            (name.trim().to_ascii_lowercase(), value.trim().to_owned())
        })
        .collect();
    (status_line, status, headers)
}

/// Reads one response from `reader`; `head_request` says the request was HEAD (no body).
/// Errors when the connection closes or times out before the response is complete.
pub fn read_response<R: BufRead>(reader: &mut R, head_request: bool) -> io::Result<Response> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let count = reader.read_line(&mut line)?;
        if count == 0 {
            return Err(io::Error::new(
                ErrorKind::UnexpectedEof,
                format!("connection closed inside a response head: {head:?}"),
            ));
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
        if head.len() > 64 * 1024 {
            return Err(io::Error::other("response head over 64 KiB"));
        }
    }
    let (status_line, status, headers) = parse_head(head.trim_end());
    let mut response = Response {
        status_line,
        status,
        headers,
        body: Vec::new(),
    };
    let bodyless = head_request || status / 100 == 1 || status == 204 || status == 304;
    if !bodyless {
        let length = response.content_length();
        let mut body = vec![0u8; usize::try_from(length).expect("a small body")];
        reader.read_exact(&mut body)?;
        response.body = body;
    }
    Ok(response)
}

/// Sends `request` on a new connection and reads one response.
pub fn exchange(server: &Server, request: &[u8]) -> Response {
    let mut stream = server.connect();
    stream.write_all(request).expect("sending the request");
    let mut reader = BufReader::new(stream);
    read_response(&mut reader, request.starts_with(b"HEAD ")).unwrap_or_else(|error| {
        panic!(
            "no response to {:?}: {error}",
            String::from_utf8_lossy(request)
        )
    })
}

/// `GET path HTTP/1.1` with a Host field, keeping the connection open.
pub fn get_request(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").into_bytes()
}

/// Reads until the peer closes; returns what arrived and whether it ended in a clean EOF
/// (false for a reset). A read timeout is an error: the server did not close.
pub fn read_until_closed(stream: &mut TcpStream) -> io::Result<(Vec<u8>, bool)> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return Ok((out, true)),
            Ok(count) => out.extend_from_slice(&chunk[..count]),
            Err(error) if error.kind() == ErrorKind::ConnectionReset => return Ok((out, false)),
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
}

/// Splits raw bytes into a response head and what follows it.
pub fn split_response(raw: &[u8]) -> (Response, Vec<u8>) {
    let end = raw
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no complete head in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let (status_line, status, headers) = parse_head(&head);
    let response = Response {
        status_line,
        status,
        headers,
        body: Vec::new(),
    };
    (response, raw[end + 4..].to_vec())
}

/// Runs the real `curl` with `args` (plus `-sS --max-time 20`), failing clearly when curl is
/// missing; returns its stdout and checks it exited 0.
pub fn curl(args: &[&str]) -> Vec<u8> {
    let output = Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| {
            panic!(
                "these tests need the real curl client on PATH (apt-get install curl): \
                 cannot run curl: {error}"
            )
        });
    assert!(
        output.status.success(),
        "curl {args:?} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// `curl -i ARGS URL`: one response, head and body.
pub fn curl_response(args: &[&str], url: &str) -> Response {
    let mut all: Vec<&str> = vec!["-i"];
    all.extend_from_slice(args);
    all.push(url);
    let raw = curl(&all);
    let (mut response, rest) = split_response(&raw);
    response.body = rest;
    response
}

/// Raises this process's open-files soft limit to its hard limit; returns the new soft limit.
/// Whether `coldwire serve --io NAME` can run here. io_uring may be switched off or
/// filtered (sysctl, seccomp): then this prints `skipped: <reason>` and the test returns;
/// every other backend must work, so its probe failing is a test failure.
pub fn backend_available(name: &str) -> bool {
    let backend: coldwire_io::Backend = name.parse().expect("a backend name");
    // Probe on a helper thread: tearing down the probe's io_uring can post task work to the
    // thread that created the ring, which makes that thread's next socket read with a
    // timeout fail with EINTR (seen in the connection-limit test).
    let probe = thread::spawn(move || backend.probe())
        .join()
        .expect("the probe thread");
    match probe {
        Ok(()) => true,
        Err(reason) if name.starts_with("uring") => {
            println!("skipped: {name} is unavailable here: {reason}");
            false
        }
        Err(reason) => panic!("backend {name} does not work here: {reason}"),
    }
}

pub fn raise_open_files_limit() -> u64 {
    coldwire_io::sys::raise_open_files_limit().expect("raising RLIMIT_NOFILE")
}

/// Checks one Common Log Format line:
/// `127.0.0.1 - - [dd/Mon/yyyy:hh:mm:ss +0000] "REQUEST" STATUS BYTES`.
pub fn is_clf_line(line: &str, request: &str, status: u16, bytes: usize) -> bool {
    let Some(rest) = line.strip_prefix("127.0.0.1 - - [") else {
        return false;
    };
    let Some((date, rest)) = rest.split_once("] ") else {
        return false;
    };
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let date_ok = date.len() == 26
        && date.is_char_boundary(3)
        && date.is_char_boundary(6)
        && months.contains(&&date[3..6])
        && date
            .char_indices()
            .filter(|&(index, _)| !(3..6).contains(&index))
            .all(|(index, character)| match index {
                2 | 6 => character == '/',
                11 | 14 | 17 => character == ':',
                20 => character == ' ',
                21 => character == '+',
                _ => character.is_ascii_digit(),
            });
    date_ok && rest == format!("\"{request}\" {status} {bytes}")
}
