//! `coldwire proxy` under test: started through the process runner on 127.0.0.1 port 0
//! (or a given address) with a chosen number of workers, its address and stats URL read
//! from the lines it prints; killed on drop. One may run under a low open-files limit with
//! its stderr kept, to see what it says when descriptors run out.

use std::time::Duration;

use coldwire_process::{Launch, Process, STDERR_LINES, Stderr};

use crate::binary::{coldwire, coldwire_binary};

/// How long a proxy gets to print its addresses.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A running `coldwire proxy`.
pub struct Proxy {
    process: Process,
    /// Its address.
    pub address: std::net::SocketAddr,
    /// The stats URL, when started with `--admin`.
    pub stats_url: Option<String>,
}

impl Proxy {
    /// One worker on 127.0.0.1:0 with the backend and `args`.
    pub fn start(backend: &str, args: &[&str]) -> Proxy {
        Proxy::start_on("127.0.0.1:0", backend, args)
    }

    /// One worker listening on `listen`.
    pub fn start_on(listen: &str, backend: &str, args: &[&str]) -> Proxy {
        Proxy::start_with(listen, backend, 1, args)
    }

    /// `workers` workers listening on `listen`.
    pub fn start_with(listen: &str, backend: &str, workers: usize, args: &[&str]) -> Proxy {
        Proxy::launch(listen, backend, workers, args, None)
    }

    /// One worker on 127.0.0.1:0 with its stderr kept ([`Proxy::stderr_tail`]), to see
    /// the warnings it logs.
    pub fn start_keeping_stderr(backend: &str, args: &[&str]) -> Proxy {
        Proxy::launch("127.0.0.1:0", backend, 1, args, Some(0))
    }

    /// One worker on 127.0.0.1:0 run under `prlimit --nofile=N:N` (soft and hard), so it
    /// runs out of descriptors early; its stderr is kept ([`Proxy::stderr_tail`]).
    pub fn start_with_open_files(backend: &str, args: &[&str], open_files: u64) -> Proxy {
        Proxy::launch("127.0.0.1:0", backend, 1, args, Some(open_files))
    }

    fn launch(
        listen: &str,
        backend: &str,
        workers: usize,
        args: &[&str],
        open_files: Option<u64>,
    ) -> Proxy {
        let workers = workers.to_string();
        let proxy_args = [
            "proxy",
            "--listen",
            listen,
            "--io",
            backend,
            "--workers",
            &workers,
        ];
        let launch = match open_files {
            // 0: no limit, only the stderr kept.
            Some(0) => coldwire(proxy_args).stderr(Stderr::Keep(STDERR_LINES)),
            // prlimit execs the binary, so the child's pid is the proxy's.
            Some(limit) => Launch::new("prlimit")
                .arg(format!("--nofile={limit}:{limit}"))
                .arg("--")
                .arg(coldwire_binary())
                .args(proxy_args)
                .stop_grace(Duration::ZERO)
                .stderr(Stderr::Keep(STDERR_LINES)),
            None => coldwire(proxy_args).stderr(Stderr::Null),
        };
        let mut process = launch
            .args(args)
            .spawn()
            .unwrap_or_else(|error| panic!("{error}"));
        let address = process
            .wait_for_line("proxy listening on http://", START_TIMEOUT)
            .unwrap_or_else(|error| panic!("{error}"))
            .parse()
            .expect("a socket address");
        let stats_url = args.contains(&"--admin").then(|| {
            process
                .wait_for_line("stats on ", START_TIMEOUT)
                .unwrap_or_else(|error| panic!("{error}"))
        });
        Proxy {
            process,
            address,
            stats_url,
        }
    }

    /// The last lines the proxy wrote to stderr (kept only for
    /// [`Proxy::start_with_open_files`] and [`Proxy::start_keeping_stderr`]).
    pub fn stderr_tail(&self) -> String {
        self.process.stderr_tail()
    }

    /// Waits up to `timeout` until the kept stderr contains `text`.
    pub fn wait_for_stderr(&self, text: &str, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if self.stderr_tail().contains(text) {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `http://ADDRESS` for `curl -x`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The proxy's process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The stats document (`GET` on the stats URL with curl), parsed; panics when started
    /// without `--admin`.
    pub fn stats(&self) -> serde_json::Value {
        let url = self.stats_url.as_deref().expect("a stats line (--admin)");
        serde_json::from_slice(&crate::curl::curl(&[url])).expect("stats JSON")
    }
}
