//! What `coldwire serve` writes back that an attacker chooses: the `Location` of its
//! directory redirects.

use coldwire_testkit::{DocumentRoot, ServerOptions, exchange};

/// A directory named like a host (`evil.test`) asked for as `//evil.test` was redirected
/// to `Location: //evil.test/` — a network-path reference, which browsers follow to
/// another host (an open redirect). The location now always starts with exactly one `/`.
pub fn a_directory_redirect_never_points_at_another_host(backend: &str) {
    let root = DocumentRoot::new();
    std::fs::create_dir_all(root.root().join("evil.test")).expect("a directory");
    let server = ServerOptions::new(backend, &root).start();
    for (target, location) in [
        ("/sub", "/sub/"),
        ("//evil.test", "/evil.test/"),
        ("///evil.test?x=1", "/evil.test/?x=1"),
        ("//sub", "/sub/"),
    ] {
        let request = format!("GET {target} HTTP/1.1\r\nHost: x\r\n\r\n");
        let response = exchange(&server, request.as_bytes());
        assert_eq!(response.status, 301, "{target}: {}", response.status_line);
        assert_eq!(response.header("location"), Some(location), "{target}");
    }
}
