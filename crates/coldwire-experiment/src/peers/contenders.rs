//! The servers and proxies under test, started fresh for each measurement: `coldwire serve`
//! and `coldwire proxy`, and the peers (nginx, Squid, Varnish, HAProxy) from their rendered
//! templates, each in the foreground (never as a system service), pinned to the server CPU
//! (their children and threads inherit the pinning), on a port picked free at run time, in
//! a working directory of their own that is removed afterwards. [`measure`] runs `coldwire
//! bench` against one with `--server-pid` (the process and its children: nginx's worker,
//! Varnish's cache process) and, for coldwire, `--server-stats`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use coldwire_process::Process;

use super::config::{self, render};
use super::install::{Program, find};
use super::origin::free_port;
use crate::RunContext;
use crate::bench_result::BenchDocument;
use crate::process::{run_bench, server_error, start_server};

/// How long a starting peer gets to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// nginx (Debian's smallest build has the static server and proxy_cache).
pub(crate) const NGINX: Program = Program {
    binary: "nginx",
    package: "nginx-light",
};
/// HAProxy.
pub(crate) const HAPROXY: Program = Program {
    binary: "haproxy",
    package: "haproxy",
};
/// Squid.
pub(crate) const SQUID: Program = Program {
    binary: "squid",
    package: "squid",
};
/// Varnish.
pub(crate) const VARNISH: Program = Program {
    binary: "varnishd",
    package: "varnish",
};

/// One server or proxy under test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Contender {
    /// `coldwire serve --io epoll --workers 1` on the document root.
    ColdwireServe,
    /// nginx serving the document root.
    NginxStatic,
    /// `coldwire proxy --reverse ORIGIN --workers 1` with more flags.
    ColdwireProxy {
        /// Legend name.
        label: String,
        /// Flags (data path, cache).
        flags: Vec<String>,
    },
    /// nginx as a reverse proxy, its cache on or off.
    NginxProxy {
        /// proxy_cache on.
        cache: bool,
    },
    /// Squid as an accelerator.
    Squid,
    /// Varnish.
    Varnish,
    /// HAProxy: with its cache, or without (and optionally splicing).
    Haproxy {
        /// Its cache on.
        cache: bool,
        /// `option splice-response`.
        splice: bool,
    },
}

impl Contender {
    /// The name in legends and tables.
    pub fn name(&self) -> String {
        match self {
            Contender::ColdwireServe => "coldwire (epoll)".into(),
            Contender::NginxStatic => "nginx".into(),
            Contender::ColdwireProxy { label, .. } => label.clone(),
            Contender::NginxProxy { cache: true } => "nginx proxy_cache".into(),
            Contender::NginxProxy { cache: false } => "nginx".into(),
            Contender::Squid => "squid".into(),
            Contender::Varnish => "varnish".into(),
            Contender::Haproxy { cache: true, .. } => "haproxy cache".into(),
            Contender::Haproxy { splice: true, .. } => "haproxy splice".into(),
            Contender::Haproxy { .. } => "haproxy".into(),
        }
    }

    /// The peer program it needs (`None` for coldwire).
    pub fn program(&self) -> Option<Program> {
        match self {
            Contender::ColdwireServe | Contender::ColdwireProxy { .. } => None,
            Contender::NginxStatic | Contender::NginxProxy { .. } => Some(NGINX),
            Contender::Squid => Some(SQUID),
            Contender::Varnish => Some(VARNISH),
            Contender::Haproxy { .. } => Some(HAPROXY),
        }
    }
}

/// A temporary working directory (mode 777: Squid and nginx's workers drop root), removed
/// on drop.
pub(crate) struct WorkDir(PathBuf);

impl WorkDir {
    fn create(name: &str) -> anyhow::Result<WorkDir> {
        use std::os::unix::fs::PermissionsExt;
        let path = crate::output::scratch_dir(&format!("coldwire-peer-{name}"))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))?;
        Ok(WorkDir(path))
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.0
    }

    fn write(&self, name: &str, text: &str) -> anyhow::Result<PathBuf> {
        let path = self.0.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A started contender.
pub(crate) struct Running {
    /// Its name.
    pub name: String,
    /// The process we started (stopped on drop).
    pub process: Process,
    /// Where it listens.
    pub address: SocketAddr,
    /// coldwire's stats endpoint.
    pub stats_url: Option<String>,
    work: WorkDir,
}

impl Running {
    /// Stops it, and anything it left behind that wrote its pid into its working directory
    /// (a Squid kid).
    pub fn stop(&mut self) {
        self.process.stop();
        for pid_file in ["squid.pid", "nginx.pid"] {
            let Ok(text) = std::fs::read_to_string(self.work.path().join(pid_file)) else {
                continue;
            };
            if let Ok(pid) = text.trim().parse::<libc::pid_t>()
                && pid > 1
                && pid as u32 != self.process.pid()
            {
                // SAFETY: kill(2) with a constant signal on a pid our own peer wrote into
                // our own working directory; no memory is involved.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a contender is started against.
pub(crate) struct Target<'a> {
    /// The coldwire binary.
    pub coldwire: &'a Path,
    /// Document root (static servers).
    pub root: &'a Path,
    /// The origin (proxies).
    pub origin: Option<SocketAddr>,
    /// The server CPU.
    pub cpu: Option<usize>,
}

fn program_path(program: Program) -> anyhow::Result<PathBuf> {
    find(program.binary).with_context(|| {
        format!(
            "{} is not installed (run with --install-peers, or apt-get install -y {})",
            program.binary, program.package
        )
    })
}

/// Starts `contender` and waits until it accepts connections.
pub(crate) fn start(contender: &Contender, target: &Target<'_>) -> anyhow::Result<Running> {
    let name = contender.name();
    let work = WorkDir::create(&name.replace([' ', '(', ')'], "-"))?;
    let origin_port = target
        .origin
        .map(|origin| origin.port().to_string())
        .unwrap_or_default();
    let dir = work.path().display().to_string();
    let coldwire_common = |command: &str| -> Vec<String> {
        [
            command,
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "--workers",
            "1",
        ]
        .iter()
        .map(|arg| (*arg).to_owned())
        .collect()
    };
    let (process, address, stats_url) = match contender {
        Contender::ColdwireServe => {
            let serve = crate::serve::ColdwireServe::start(
                target.coldwire,
                target.root,
                "epoll",
                target.cpu,
                &[],
            )?;
            let crate::serve::ColdwireServe {
                process,
                address,
                stats_url,
            } = serve;
            (process, address, Some(stats_url))
        }
        Contender::ColdwireProxy { flags, .. } => {
            let origin = target.origin.context("a proxy needs an origin")?;
            let mut args = coldwire_common("proxy");
            args.extend([
                "--reverse".to_owned(),
                format!("http://{origin}"),
                "--idle-timeout".to_owned(),
                "600".to_owned(),
            ]);
            args.extend(flags.iter().cloned());
            let mut process = start_server(target.coldwire, &args, target.cpu)?;
            let listen = process
                .wait_for_line("proxy listening on http://", START_TIMEOUT)
                .map_err(server_error)?;
            let stats = process
                .wait_for_line("stats on ", START_TIMEOUT)
                .map_err(server_error)?;
            let address = listen.parse().with_context(|| {
                format!("coldwire proxy printed an unexpected address `{listen}`")
            })?;
            (process, address, Some(stats))
        }
        peer => {
            let port = free_port()?;
            let address: SocketAddr = ([127, 0, 0, 1], port).into();
            let mut values = vec![
                ("PORT", port.to_string()),
                ("ORIGIN_PORT", origin_port),
                ("DIR", dir.clone()),
                ("ROOT", target.root.display().to_string()),
            ];
            let program = program_path(peer.program().context("a peer has a program")?)?;
            let args: Vec<String> = match peer {
                Contender::NginxStatic | Contender::NginxProxy { .. } => {
                    let template = if *peer == Contender::NginxStatic {
                        config::NGINX_STATIC
                    } else {
                        config::NGINX_PROXY
                    };
                    let cache = matches!(peer, Contender::NginxProxy { cache: true });
                    values.push(("CACHE", if cache { "bench" } else { "off" }.to_owned()));
                    let conf = work.write("nginx.conf", &render(template, &values)?)?;
                    vec![
                        "-p".into(),
                        dir.clone(),
                        "-c".into(),
                        conf.display().to_string(),
                        "-e".into(),
                        format!("{dir}/error.log"),
                    ]
                }
                Contender::Squid => {
                    let conf = work.write("squid.conf", &render(config::SQUID, &values)?)?;
                    vec!["-N".into(), "-f".into(), conf.display().to_string()]
                }
                Contender::Varnish => {
                    let vcl = work.write("default.vcl", &render(config::VARNISH, &values)?)?;
                    vec![
                        "-F".into(),
                        "-j".into(),
                        "none".into(),
                        "-n".into(),
                        format!("{dir}/varnish"),
                        "-f".into(),
                        vcl.display().to_string(),
                        "-a".into(),
                        address.to_string(),
                        "-T".into(),
                        format!("127.0.0.1:{}", free_port()?),
                        "-s".into(),
                        "malloc,256m".into(),
                        "-p".into(),
                        "default_ttl=600".into(),
                        "-p".into(),
                        "thread_pools=1".into(),
                    ]
                }
                Contender::Haproxy { cache, splice } => {
                    let options = if *cache {
                        "    http-request cache-use bench\n    http-response cache-store bench"
                    } else if *splice {
                        "    option splice-response"
                    } else {
                        "    # responses through HAProxy's buffers"
                    };
                    values.push(("BACKEND_OPTIONS", options.to_owned()));
                    let conf = work.write("haproxy.cfg", &render(config::HAPROXY, &values)?)?;
                    vec!["-db".into(), "-f".into(), conf.display().to_string()]
                }
                _ => unreachable!("coldwire contenders are handled above"),
            };
            let mut process = start_server(&program, &args, target.cpu)?;
            process
                .wait_for_port(address, START_TIMEOUT)
                .map_err(server_error)?;
            (process, address, None)
        }
    };
    Ok(Running {
        name,
        process,
        address,
        stats_url,
        work,
    })
}

/// Starts `contender`, runs `coldwire bench ARGS` against it as [`measure`] does (`{}` in
/// an argument becomes its address), and stops it.
pub(crate) fn measure_started(
    context: &RunContext,
    contender: &Contender,
    target: &Target<'_>,
    args: Vec<String>,
    generator_cpu: Option<usize>,
    stem: &str,
    timeout: Duration,
) -> anyhow::Result<(BenchDocument, String)> {
    let mut running = start(contender, target)?;
    let address = running.address.to_string();
    let args = args
        .into_iter()
        .map(|arg| arg.replace("{}", &address))
        .collect();
    let result = measure(context, &mut running, args, generator_cpu, stem, timeout);
    running.stop();
    result
}

/// Runs `coldwire bench ARGS` (pinned to `generator_cpu`, JSON to `raw/<stem>.json`) against
/// `running`, measuring its CPU with `--server-pid` (and its counters, for coldwire); fails
/// with the server's stderr if it died meanwhile.
pub(crate) fn measure(
    context: &RunContext,
    running: &mut Running,
    mut args: Vec<String>,
    generator_cpu: Option<usize>,
    stem: &str,
    timeout: Duration,
) -> anyhow::Result<(BenchDocument, String)> {
    args.push(format!("--server-pid={}", running.process.pid()));
    if let Some(stats) = &running.stats_url {
        args.push(format!("--server-stats={stats}"));
    }
    let relative = format!("raw/{stem}.json");
    let result = run_bench(
        &context.coldwire,
        &args,
        generator_cpu,
        &context.dir.join(&relative),
        timeout,
    );
    match result {
        Ok(document) => Ok((document, relative)),
        Err(error) if !running.process.is_running() => Err(error.context(format!(
            "{} died during the run; its stderr:\n{}",
            running.name,
            running.process.stderr_tail()
        ))),
        Err(error) => Err(error),
    }
}
