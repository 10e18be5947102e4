//! The real `curl`, as users run it: [`curl_output`] (exit code and output),
//! [`curl`] (must succeed), [`curl_response`] (one parsed response), [`via_proxy`]
//! (through a proxy), [`curl_sha256`] (a large body by its hash). Every call adds
//! `-sS --max-time 20`.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::body::sha256_of_file;
use crate::proxy::Proxy;
use crate::response::{Response, split_response};

/// What a curl run gave.
pub struct CurlOutput {
    /// Exit code.
    pub code: i32,
    /// Head and body (with -i) or body.
    pub stdout: Vec<u8>,
    /// Its messages.
    pub stderr: Vec<u8>,
}

/// Runs curl (`-sS --max-time 20`) with `args`, failing clearly when curl is missing.
pub fn curl_output(args: &[&str]) -> CurlOutput {
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
    CurlOutput {
        code: output.status.code().unwrap_or(-1),
        stdout: output.stdout,
        stderr: output.stderr,
    }
}

/// Runs curl with `args`; checks it exited 0 and returns its stdout.
pub fn curl(args: &[&str]) -> Vec<u8> {
    let output = curl_output(args);
    assert!(
        output.code == 0,
        "curl {args:?} failed (exit code {}): {}",
        output.code,
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

/// `curl -i -x PROXY ARGS URL` → (status, head text as received, body). The head is the
/// first one curl printed (an interim `1xx` one, if any came).
pub fn via_proxy(proxy: &Proxy, args: &[&str], url: &str) -> (u16, String, Vec<u8>) {
    let proxy_url = proxy.url();
    let mut all = vec!["-i", "-x", &proxy_url[..]];
    all.extend_from_slice(args);
    all.push(url);
    let raw = curl(&all);
    let end = raw
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .expect("a head");
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, head, raw[end + 4..].to_vec())
}

/// Runs curl with `args`, the body written to `directory/received`: its exit code and the
/// SHA-256 of what it received.
pub fn curl_sha256(directory: &Path, args: &[&str]) -> (i32, String) {
    let received = directory.join("received");
    let mut all = vec!["-o", received.to_str().expect("a UTF-8 path")];
    all.extend_from_slice(args);
    let output = curl_output(&all);
    (output.code, sha256_of_file(&received))
}
