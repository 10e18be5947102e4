//! `coldwire serve` under test: started through the process runner on 127.0.0.1 port 0
//! with one worker ([`ServerOptions`]), its addresses read from the lines it prints, its
//! stderr kept for failure messages, its stats endpoint read as JSON; killed on drop.

use std::ffi::OsStr;
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::ExitStatus;
use std::thread;
use std::time::{Duration, Instant};

use coldwire_process::{Launch, Process, Stderr};

use crate::binary::coldwire_binary;
use crate::client::connect;
use crate::docroot::DocumentRoot;
use crate::response::read_response;

/// How long a server gets to print its addresses.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Lines of a server's stderr kept for failure messages (all a test produces).
const STDERR_LINES: usize = 100_000;

/// A running `coldwire serve`.
pub struct Server {
    process: Process,
    /// Where it serves files.
    pub addr: SocketAddr,
    /// Where it serves stats, when started with `--admin`.
    pub admin: Option<SocketAddr>,
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
    pub fn flag(mut self, flag: &str, value: impl AsRef<OsStr>) -> Self {
        self.extra.push(flag.to_owned());
        self.extra
            .push(value.as_ref().to_string_lossy().into_owned());
        self
    }

    /// Starts the binary and waits for the address lines it prints.
    pub fn start(self) -> Server {
        let binary = coldwire_binary();
        let launch = match self.open_files {
            // prlimit execs the binary, so the child's pid is the server's.
            Some(limit) => Launch::new("prlimit")
                .arg(format!("--nofile={limit}:{limit}"))
                .arg("--")
                .arg(&binary),
            None => Launch::new(&binary),
        };
        let mut launch = launch
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
            .args(&self.extra);
        if self.admin {
            launch = launch.args(["--admin", "127.0.0.1:0"]);
        }
        let mut process = launch
            .stderr(Stderr::Keep(STDERR_LINES))
            .stop_grace(Duration::ZERO)
            .spawn()
            .unwrap_or_else(|error| panic!("{error}"));
        let ready = |error| -> ! {
            panic!(
                "coldwire serve --io {} printed no address within 10 s: {error}",
                self.backend
            )
        };
        let addr = process
            .wait_for_line("listening on http://", START_TIMEOUT)
            .unwrap_or_else(|error| ready(error))
            .parse()
            .expect("a socket address");
        let admin = self.admin.then(|| {
            let url = process
                .wait_for_line("stats on http://", START_TIMEOUT)
                .unwrap_or_else(|error| ready(error));
            url.trim_end_matches("/stats")
                .parse()
                .expect("a socket address")
        });
        Server {
            process,
            addr,
            admin,
        }
    }
}

impl Server {
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// What the server wrote to stderr so far (for failure messages).
    pub fn stderr_text(&self) -> String {
        self.process.stderr_tail()
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Sends SIGTERM.
    pub fn terminate(&mut self) {
        self.process
            .signal(libc::SIGTERM)
            .unwrap_or_else(|error| panic!("kill -TERM {} failed: {error}", self.pid()));
    }

    /// Waits up to `limit` for the process to exit; panics (with its stderr) if it does not.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        self.process.wait_exit(limit).unwrap_or_else(|| {
            panic!(
                "the server did not exit within {limit:?}; stderr:\n{}",
                self.stderr_text()
            )
        })
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

/// `stats["total"][section][field]` as a number (panics with the document if absent).
pub fn counter(stats: &serde_json::Value, section: &str, field: &str) -> u64 {
    stats["total"][section][field]
        .as_u64()
        .unwrap_or_else(|| panic!("no total.{section}.{field} in the stats: {stats}"))
}
