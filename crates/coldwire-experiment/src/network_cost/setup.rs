//! The pieces of one `network-cost` point: a document root holding every object a trace
//! names at its logged size (so `coldwire serve` and nginx serve the same bytes), the
//! server under test started inside the experiment's network namespace (or on loopback
//! without one), and the `coldwire wan` relay between the generator and the server.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use coldwire_process::Process;
use coldwire_workload::trace::{Catalogue, parse_trace};

use super::namespace::Namespace;
use crate::peers::config::render;
use crate::process::{server_error, start_server};

/// How long a starting server or relay gets to be ready.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// nginx as the static origin of this experiment (`experiments/peers/nginx-netcost.conf.in`).
const NGINX_NETCOST: &str = include_str!("../../../../experiments/peers/nginx-netcost.conf.in");

/// A temporary directory (removed on drop).
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new one under TMPDIR, readable by nginx's unprivileged worker.
    pub fn create(prefix: &str) -> anyhow::Result<Scratch> {
        use std::os::unix::fs::PermissionsExt;
        let path = crate::output::scratch_dir(prefix)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        Ok(Scratch(path))
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes every object `trace` names (paths logged with a status below 400, at the size
/// `coldwire origin --trace` would serve) under `root`; paths that cannot be files (a
/// query, `..`, a directory's own name) are left out and answered 404 by both servers.
/// Returns (objects written, bytes written).
pub fn write_document_root(trace: &Path, root: &Path) -> anyhow::Result<(usize, u64)> {
    let text = std::fs::read_to_string(trace)
        .with_context(|| format!("cannot read the trace {}", trace.display()))?;
    let records = parse_trace(&text, None).records;
    let catalogue = Catalogue::from_records(&records);
    let mut paths: Vec<&str> = records.iter().map(|record| record.path()).collect();
    paths.sort_unstable();
    paths.dedup();
    let filler: Vec<u8> = (0..65_536u32)
        .map(|index| b"coldwire "[(index % 9) as usize])
        .collect();
    let (mut objects, mut bytes) = (0, 0);
    for path in paths {
        let Some(object) = catalogue.get(path) else {
            continue;
        };
        let relative = path.trim_start_matches('/');
        if relative.is_empty()
            || relative.ends_with('/')
            || path.contains(['?', '#', '%'])
            || relative
                .split('/')
                .any(|part| part.is_empty() || part == "." || part == "..")
        {
            continue;
        }
        let file = root.join(relative);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let mut contents = Vec::with_capacity(object.size as usize);
        while (contents.len() as u64) < object.size {
            let take = (object.size as usize - contents.len()).min(filler.len());
            contents.extend_from_slice(&filler[..take]);
        }
        if std::fs::write(&file, &contents).is_ok() {
            objects += 1;
            bytes += object.size;
        }
    }
    anyhow::ensure!(
        objects > 0,
        "the trace {} names no object that can be a file",
        trace.display()
    );
    Ok((objects, bytes))
}

/// A server under test: `coldwire` (serve, epoll, one worker) or `nginx` (one worker).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerKind {
    /// `coldwire serve`.
    Coldwire,
    /// nginx, configured from `experiments/peers/nginx-netcost.conf.in`.
    Nginx,
}

impl ServerKind {
    /// Its name in the scenario and the figures.
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Coldwire => "coldwire",
            ServerKind::Nginx => "nginx",
        }
    }
}

/// A started server (stopped on drop, with its working directory).
pub struct Server {
    /// The process (its pid is the server's: `ip netns exec` execs in place).
    pub process: Process,
    /// Where it listens.
    pub address: SocketAddr,
    _work: Option<Scratch>,
}

/// Where servers run: inside `namespace` (listening on its inner address), or on
/// loopback.
pub struct Site<'a> {
    /// The coldwire binary.
    pub coldwire: &'a Path,
    /// The experiment's namespace, if it has one.
    pub namespace: Option<&'a Namespace>,
    /// nginx's executable, when installed.
    pub nginx: Option<&'a Path>,
    /// The server CPU.
    pub cpu: Option<usize>,
}

impl Site<'_> {
    fn listen_ip(&self) -> IpAddr {
        self.namespace
            .map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |namespace| {
                IpAddr::V4(namespace.inside)
            })
    }

    /// Starts `program args` inside the namespace (through `ip netns exec`) or directly.
    fn spawn(&self, program: &Path, args: &[String]) -> anyhow::Result<Process> {
        match self.namespace {
            Some(namespace) => {
                let mut full = namespace.exec_prefix();
                full.push(program.display().to_string());
                full.extend(args.iter().cloned());
                start_server(Path::new("ip"), &full, self.cpu)
            }
            None => start_server(program, args, self.cpu),
        }
    }

    /// Starts `kind` serving `root`; `port` is used by nginx (coldwire picks its own).
    pub fn start(&self, kind: ServerKind, root: &Path, port: u16) -> anyhow::Result<Server> {
        let ip = self.listen_ip();
        match kind {
            ServerKind::Coldwire => {
                let args: Vec<String> = [
                    "serve",
                    "--listen",
                    &SocketAddr::new(ip, 0).to_string(),
                    "--workers",
                    "1",
                    "--io",
                    "epoll",
                    "--idle-timeout",
                    "600",
                    "--header-timeout",
                    "600",
                    "--max-connections",
                    "19000",
                    "--root",
                    &root.display().to_string(),
                ]
                .iter()
                .map(|arg| (*arg).to_owned())
                .collect();
                let mut process = self.spawn(self.coldwire, &args)?;
                let listen = process
                    .wait_for_line("listening on http://", START_TIMEOUT)
                    .map_err(server_error)?;
                let address = listen.parse().with_context(|| {
                    format!("coldwire serve printed an unexpected address `{listen}`")
                })?;
                Ok(Server {
                    process,
                    address,
                    _work: None,
                })
            }
            ServerKind::Nginx => {
                let nginx = self.nginx.context("nginx is not installed")?;
                let work = Scratch::create("coldwire-netcost-nginx")?;
                {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o777))?;
                }
                let address = SocketAddr::new(ip, port);
                let dir = work.path().display().to_string();
                let conf = render(
                    NGINX_NETCOST,
                    &[
                        ("LISTEN", address.to_string()),
                        ("ROOT", root.display().to_string()),
                        ("DIR", dir.clone()),
                    ],
                )?;
                let conf_path = work.path().join("nginx.conf");
                std::fs::write(&conf_path, conf)
                    .with_context(|| format!("cannot write {}", conf_path.display()))?;
                let args = vec![
                    "-p".to_owned(),
                    dir.clone(),
                    "-c".to_owned(),
                    conf_path.display().to_string(),
                    "-e".to_owned(),
                    format!("{dir}/error.log"),
                ];
                let mut process = self.spawn(nginx, &args)?;
                process
                    .wait_for_port(address, START_TIMEOUT)
                    .map_err(server_error)?;
                Ok(Server {
                    process,
                    address,
                    _work: Some(work),
                })
            }
        }
    }
}

/// Starts `coldwire wan --to TO --rtt RTT` on loopback, pinned to `cpu`: the relay between
/// the generator and the server.
pub fn start_relay(
    coldwire: &Path,
    to: SocketAddr,
    rtt_ms: f64,
    cpu: Option<usize>,
) -> anyhow::Result<(Process, SocketAddr)> {
    let args: Vec<String> = vec![
        "wan".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--to".into(),
        to.to_string(),
        "--rtt".into(),
        format!("{rtt_ms}ms"),
        "--workers".into(),
        "1".into(),
        "--max-connections".into(),
        "19000".into(),
        "--idle-timeout".into(),
        "600".into(),
    ];
    let mut process = start_server(coldwire, &args, cpu)?;
    let line = process
        .wait_for_line("wan listening on http://", START_TIMEOUT)
        .map_err(server_error)?;
    let address = line
        .parse()
        .with_context(|| format!("coldwire wan printed an unexpected address `{line}`"))?;
    Ok((process, address))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_root_holds_each_logged_path_at_its_size_and_nothing_unsafe() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("trace.log");
        std::fs::write(
            &trace,
            "a - - [01/Jul/1995:00:00:01 -0400] \"GET /images/logo.gif HTTP/1.0\" 200 1713\n\
             a - - [01/Jul/1995:00:00:02 -0400] \"GET /index.html HTTP/1.0\" 200 100000\n\
             b - - [01/Jul/1995:00:00:03 -0400] \"GET /index.html HTTP/1.0\" 304 -\n\
             b - - [01/Jul/1995:00:00:04 -0400] \"GET /../etc/passwd HTTP/1.0\" 200 5\n\
             b - - [01/Jul/1995:00:00:05 -0400] \"GET /search?q=x HTTP/1.0\" 200 7\n\
             b - - [01/Jul/1995:00:00:06 -0400] \"GET /missing HTTP/1.0\" 404 -\n",
        )
        .unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let (objects, bytes) = write_document_root(&trace, &root).unwrap();
        assert_eq!((objects, bytes), (2, 101_713));
        let size = |path: &str| std::fs::metadata(root.join(path)).map(|meta| meta.len());
        assert_eq!(size("images/logo.gif").unwrap(), 1713);
        assert_eq!(size("index.html").unwrap(), 100_000);
        assert!(size("missing").is_err());
        assert!(!dir.path().join("etc/passwd").exists());
    }
}
