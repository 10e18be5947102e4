//! `ProxyConfig`: everything `coldwire proxy` can be told, with the defaults a serious
//! proxy on this machine wants. Every limit is explicit here.

use std::net::SocketAddr;
use std::time::Duration;

use coldwire_cache::{StorageChoice, StoreConfig, Targets};

use super::acl::Acl;
use super::policy::ConnectPorts;
use crate::runtime::RuntimeConfig;

/// Where requests go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A forward proxy: clients send absolute-form targets (`GET http://host/path`) and
    /// `CONNECT host:port`.
    Forward,
    /// A reverse proxy in front of one origin: origin-form targets go to `host:port`.
    Reverse {
        /// The origin's host (name or IP literal), also sent as `Host`.
        host: String,
        /// The origin's port.
        port: u16,
    },
}

/// How response bodies move from the origin to the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataPath {
    /// Read into user space, write from there (a copy kept for the cache on the way).
    Copy,
    /// splice(2) through pooled pipes for `Content-Length` bodies and chunks of at least
    /// the threshold, close-delimited bodies to clients that close too, and CONNECT
    /// tunnels; a cacheable body keeps its copy with tee(2). Falls back to copying on
    /// drivers without splice.
    Splice,
    /// CONNECT tunnels spliced inside the kernel by a BPF sockmap after the `200` (no
    /// system call per chunk; docs/sockmap.md); response bodies as with `Splice`, except
    /// that the rest of a `Content-Length` body that is not being stored (its
    /// `Content-Length` at least 64 KiB) is handed to the kernel whole, on drivers that offer it (readiness
    /// backends; `sockmap_body.rs`). Falls back to `Splice` (see
    /// [`ProxyConfig::sockmap_refused`]).
    Sockmap,
}

impl DataPath {
    /// Whether response bodies (and, without the sockmap, tunnels) take the splice path.
    pub fn splices(self) -> bool {
        matches!(self, DataPath::Splice | DataPath::Sockmap)
    }
}

/// Configuration of the caching proxy.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// Address, backend, workers, limits, client timeouts, logs: what every server shares
    /// (the proxy's access log adds the cache status and upstream time to each line).
    pub runtime: RuntimeConfig,
    /// Forward or reverse.
    pub mode: Mode,
    /// Clients allowed to use the proxy (loopback only by default).
    pub acl: Acl,
    /// Clients that may `PURGE` (loopback only by default): an ACL that admits the public
    /// to a reverse proxy must not let it empty the cache.
    pub purge_acl: Acl,
    /// Largest response head accepted from an origin (502 beyond).
    pub max_response_head_bytes: usize,
    /// Connecting to an origin and each wait for its bytes (504 when it passes before the
    /// response has started).
    pub upstream_timeout: Duration,
    /// Idle upstream connections kept per origin address.
    pub pool_per_origin: usize,
    /// How long an idle upstream connection is kept.
    pub pool_idle_timeout: Duration,
    /// How long a resolved host name is reused.
    pub resolver_ttl: Duration,
    /// The cache; `None` turns caching off.
    pub cache: Option<StoreConfig>,
    /// Where the cache keeps bodies: memory (the default), or a disk store with memory as
    /// its hot tier (`--cache-dir`; docs/disk-store.md).
    pub storage: StorageChoice,
    /// Revalidate every hit with the origin (seed 000 §5.1: an IMS per request, the body
    /// served from the cache when the origin answers 304).
    pub revalidate_always: bool,
    /// Data path for response bodies.
    pub data_path: DataPath,
    /// Bodies (and chunks) at least this long take the splice path when `data_path` is
    /// `Splice`. Default 16 KiB, where splice measured cheaper than copy.
    pub splice_threshold: u64,
    /// Set at start-up when `data_path` is `Sockmap` but the kernel, the privileges or
    /// the backend refused it (one warning said why): tunnels take the splice path, each
    /// counted as a fallback.
    pub sockmap_refused: bool,
    /// The name in `Via` and `Cache-Status` (a token).
    pub name: String,
    /// How long a miss waits for another request's fetch of the same key (collapsed
    /// forwarding); zero turns collapsing off.
    pub collapse_wait: Duration,
    /// Ports CONNECT may reach (443 only by default).
    pub connect_ports: ConnectPorts,
    /// The coldwire-targeted cache-control field (RFC 9213), obeyed before
    /// `CDN-Cache-Control` and `Cache-Control` by a reverse proxy (see
    /// [`ProxyConfig::targets`]).
    pub targeted_cache_control: String,
    /// How long past its freshness a stored response may be served when the origin cannot
    /// be reached (connect or resolution failure, timeout; not an origin's 5xx); zero (the
    /// default) serves stale content on errors only where `stale-if-error` allows it.
    pub serve_stale_on_error: Duration,
}

impl ProxyConfig {
    /// The defaults: a forward proxy on 127.0.0.1:3128 with a 256 MiB cache.
    pub fn new(mode: Mode) -> ProxyConfig {
        ProxyConfig {
            runtime: RuntimeConfig::new(SocketAddr::from(([127, 0, 0, 1], 3128))),
            mode,
            acl: Acl::loopback(),
            purge_acl: Acl::loopback(),
            max_response_head_bytes: 64 * 1024,
            upstream_timeout: Duration::from_secs(30),
            pool_per_origin: 32,
            pool_idle_timeout: Duration::from_secs(30),
            resolver_ttl: Duration::from_secs(30),
            cache: Some(StoreConfig::default()),
            storage: StorageChoice::Memory,
            revalidate_always: false,
            data_path: DataPath::Copy,
            splice_threshold: 16 * 1024,
            sockmap_refused: false,
            name: "coldwire".to_owned(),
            collapse_wait: Duration::from_secs(10),
            connect_ports: ConnectPorts::default(),
            targeted_cache_control: DEFAULT_TARGETED_CACHE_CONTROL.to_owned(),
            serve_stale_on_error: Duration::ZERO,
        }
    }

    /// The targeted cache-control fields (RFC 9213) this proxy obeys, highest precedence
    /// first: as a reverse proxy (a gateway on the origin's behalf, i.e. a CDN node) the
    /// coldwire-targeted field, then `CDN-Cache-Control`; as a forward proxy none — it
    /// caches on the clients' behalf, is not a CDN, and passes both fields on untouched.
    pub fn targets(&self) -> Targets {
        match self.mode {
            Mode::Reverse { .. } => {
                Targets::new([self.targeted_cache_control.as_str(), "CDN-Cache-Control"])
            }
            Mode::Forward => Targets::default(),
        }
    }
}

/// The default name of the coldwire-targeted cache-control field (`--targeted-cache-control`).
pub const DEFAULT_TARGETED_CACHE_CONTROL: &str = "Coldwire-Cache-Control";
