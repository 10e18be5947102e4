//! `coldwire proxy` under test: started through the process runner on 127.0.0.1 port 0
//! (or a given address) with a chosen number of workers, its address and stats URL read
//! from the lines it prints; killed on drop.

use std::time::Duration;

use coldwire_process::{Process, Stderr};

use crate::binary::coldwire;

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
        let workers = workers.to_string();
        let mut process = coldwire([
            "proxy",
            "--listen",
            listen,
            "--io",
            backend,
            "--workers",
            &workers,
        ])
        .args(args)
        .stderr(Stderr::Null)
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
