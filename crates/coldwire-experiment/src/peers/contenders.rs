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
use crate::process::{ProxyMode, ProxyUnderTest, run_bench, server_error, start_server};

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
    /// `coldwire proxy --reverse ORIGIN --workers 1` with more flags (a forward proxy when
    /// the target has no origin).
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
    /// Squid as a forward proxy (`experiments/peers/squid-forward.conf.in`), memory store
    /// only or with a rock store.
    SquidForward(SquidStore),
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
    /// A cache peer named in a scenario (`squid`, `varnish`, `nginx`, `haproxy`) as the
    /// reverse caching proxy it means; an unknown name fails with `unknown {what} "NAME" in
    /// {place}` and the names that exist.
    pub fn cache_peer(name: &str, what: &str, place: &str) -> anyhow::Result<Contender> {
        Ok(match name {
            "squid" => Contender::Squid,
            "varnish" => Contender::Varnish,
            "nginx" => Contender::NginxProxy { cache: true },
            "haproxy" => Contender::Haproxy {
                cache: true,
                splice: false,
            },
            other => anyhow::bail!(
                "unknown {what} {other:?} in {place}: use squid, varnish, nginx or haproxy"
            ),
        })
    }

    /// The name in legends and tables.
    pub fn name(&self) -> String {
        match self {
            Contender::ColdwireServe => "coldwire (epoll)".into(),
            Contender::NginxStatic => "nginx".into(),
            Contender::ColdwireProxy { label, .. } => label.clone(),
            Contender::NginxProxy { cache: true } => "nginx proxy_cache".into(),
            Contender::NginxProxy { cache: false } => "nginx".into(),
            Contender::Squid => "squid".into(),
            Contender::SquidForward(SquidStore {
                rock_bytes: None, ..
            }) => "squid".into(),
            Contender::SquidForward(_) => "squid (rock)".into(),
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
            Contender::Squid | Contender::SquidForward(_) => Some(SQUID),
            Contender::Varnish => Some(VARNISH),
            Contender::Haproxy { .. } => Some(HAPROXY),
        }
    }
}

/// The store of a forward Squid, sized like the `coldwire proxy` beside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SquidStore {
    /// `cache_mem` (coldwire's `--cache-bytes`).
    pub memory_bytes: u64,
    /// `maximum_object_size[_in_memory]` (coldwire's `--max-object-bytes`).
    pub max_object_bytes: u64,
    /// A rock `cache_dir` of this size (coldwire's `--cache-dir-size`), or memory only.
    pub rock_bytes: Option<u64>,
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
    /// The origin (reverse proxies; `None`: coldwire proxy runs as a forward proxy).
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

/// The `@CACHE_MEM@`, `@MAX_OBJECT@` and `@CACHE_DIR@` values of the forward Squid.
fn squid_store_values(store: &SquidStore, dir: &str) -> Vec<(&'static str, String)> {
    let cache_dir = match store.rock_bytes {
        None => "# memory store only: no cache_dir".to_owned(),
        Some(bytes) => format!(
            "cache_dir rock {dir}/rock {} max-size={}",
            (bytes / (1 << 20)).max(1),
            store.max_object_bytes
        ),
    };
    vec![
        ("CACHE_MEM", format!("{} bytes", store.memory_bytes)),
        ("MAX_OBJECT", format!("{} bytes", store.max_object_bytes)),
        ("CACHE_DIR", cache_dir),
    ]
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
            // With an origin a reverse proxy in front of it, without one a forward proxy.
            let mode = target.origin.map_or(ProxyMode::Forward, ProxyMode::Reverse);
            let proxy = ProxyUnderTest::start(target.coldwire, mode, flags, target.cpu)?;
            (proxy.process, proxy.address, Some(proxy.stats_url))
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
                Contender::SquidForward(store) => {
                    values.extend(squid_store_values(store, &dir));
                    let conf =
                        work.write("squid.conf", &render(config::SQUID_FORWARD, &values)?)?;
                    let conf = conf.display().to_string();
                    if store.rock_bytes.is_some() {
                        // The rock database is created before Squid serves from it.
                        start_server(&program, &["-N", "-z", "-f", conf.as_str()], None)?
                            .finish(START_TIMEOUT)
                            .context("squid -z could not create the rock store")?;
                    }
                    vec!["-N".into(), "-f".into(), conf]
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
                        // Idle client connections kept like coldwire proxy's
                        // (--idle-timeout 600), not closed after Varnish's default 5 s:
                        // the robots experiment holds thousands of them.
                        "-p".into(),
                        "timeout_idle=600".into(),
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
