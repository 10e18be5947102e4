//! The origin behind every proxy under test: `coldwire serve` (one worker, pinned to the
//! generator's CPU) on a temporary document root of objects named by their size, all kept
//! in memory, with a Last-Modified years in the past so that every cache (coldwire's 10%
//! heuristic, Squid's refresh_pattern, Varnish's default TTL, nginx's proxy_cache_valid,
//! HAProxy's max-age) holds them fresh for the whole run. Also: free loopback ports picked
//! at run time, and a tiny blocking HTTP client to fill caches and read the origin's
//! request counter.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::Context;

use crate::serve::{ColdwireServe, DocumentRoot};

/// Last-Modified of every object: 2020-01-01 00:00:00 UTC.
const OLD_MTIME_UNIX: u64 = 1_577_836_800;
/// How long one helper request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A document root whose files look years old.
pub(crate) fn old_document_root(sizes: &[u64]) -> anyhow::Result<DocumentRoot> {
    let root = DocumentRoot::create(sizes)?;
    let old = SystemTime::UNIX_EPOCH + Duration::from_secs(OLD_MTIME_UNIX);
    for &size in sizes {
        let path = root.path().join(DocumentRoot::file_name(size));
        std::fs::File::options()
            .write(true)
            .open(&path)
            .and_then(|file| file.set_modified(old))
            .with_context(|| format!("cannot set the modification time of {}", path.display()))?;
    }
    Ok(root)
}

/// The origin server and its objects.
pub(crate) struct Origin {
    /// The running `coldwire serve` (stopped on drop).
    pub serve: ColdwireServe,
    root: DocumentRoot,
}

impl Origin {
    /// Starts `coldwire serve` on objects of `sizes` bytes, pinned to `cpu`.
    pub fn start(coldwire: &Path, sizes: &[u64], cpu: Option<usize>) -> anyhow::Result<Origin> {
        let root = old_document_root(sizes)?;
        let largest = sizes.iter().copied().max().unwrap_or(0).max(65536);
        let extra = vec!["--memory-file-limit".to_owned(), largest.to_string()];
        let serve = ColdwireServe::start(coldwire, root.path(), "epoll", cpu, &extra)
            .context("cannot start the origin (coldwire serve)")?;
        Ok(Origin { serve, root })
    }

    /// Its address.
    pub fn address(&self) -> SocketAddr {
        self.serve.address
    }

    /// The document root (for a static server serving the same files).
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// Requests the origin has answered so far (its stats endpoint's `total.http.requests`).
    pub fn requests(&self) -> anyhow::Result<u64> {
        let value = crate::slow_clients::stats(&self.serve.stats_url)?;
        value["total"]["http"]["requests"]
            .as_u64()
            .context("the origin's stats have no total.http.requests")
    }
}

/// A free TCP port on 127.0.0.1, picked by the kernel (bound and released at once), for
/// servers that cannot listen on port 0 and report it. A daemon left running by a package
/// install holds its own fixed port, never this one.
pub(crate) fn free_port() -> anyhow::Result<u16> {
    let listener =
        TcpListener::bind("127.0.0.1:0").context("cannot bind 127.0.0.1:0 to pick a free port")?;
    Ok(listener.local_addr()?.port())
}

/// `GET path` on `address` with `Connection: close`: the status code and the body (the
/// whole response after the head).
pub(crate) fn get(address: SocketAddr, path: &str) -> anyhow::Result<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect_timeout(&address, REQUEST_TIMEOUT)
        .with_context(|| format!("cannot connect to {address}"))?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    stream.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .with_context(|| format!("reading the response to GET {path} from {address}"))?;
    let head_end = response
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .with_context(|| format!("no complete response head from {address}"))?;
    let status = std::str::from_utf8(&response[..head_end])
        .ok()
        .and_then(|head| head.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("no status line from {address}"))?;
    Ok((status, response[head_end + 4..].to_vec()))
}
