//! Cache poisoning and deception through the proxy: what one client sends, or what an
//! origin says to one client, must not become what every client gets.

use coldwire_testkit::Proxy;
use coldwire_testkit::scripted::{Reply, ScriptedOrigin, ScriptedRequest as Request, raw_exchange};

/// Answers every request with a fresh, storable response; `/cookie` sets a session
/// cookie, `/echo` reflects the request's body (an origin that reads a GET's body).
fn poison_script(request: &Request) -> Reply {
    match request.path.as_str() {
        "/mobile" => {
            let page: &[u8] = if request.header("x-mobile") == Some("1") {
                b"mobile page"
            } else {
                b"desktop page"
            };
            Reply::new(
                "200 OK",
                &[("Cache-Control", "max-age=600"), ("Vary", "X-Mobile")],
                page,
            )
        }
        "/cookie" => Reply::new(
            "200 OK",
            &[
                ("Cache-Control", "public, max-age=600"),
                ("Set-Cookie", "session=victim"),
            ],
            b"welcome",
        ),
        _ => {
            let body = format!("count={}", request.count);
            Reply::new(
                "200 OK",
                &[("Cache-Control", "max-age=600")],
                body.as_bytes(),
            )
        }
    }
}

/// A shared cache that stored a `Set-Cookie` response would hand one client's session to
/// every later client (nginx and Varnish never store them): not stored, and the second
/// client's answer comes from the origin.
pub fn a_response_with_set_cookie_is_never_stored_nor_handed_to_another_client(backend: &str) {
    let origin = ScriptedOrigin::start(poison_script);
    for mode in [Mode::Forward, Mode::Reverse] {
        let proxy = mode.start(backend, &origin);
        let request = mode.get(&origin, "/cookie");
        let first = raw_exchange(proxy.address, request.as_bytes());
        assert!(first.contains("Set-Cookie: session=victim"), "{first}");
        assert!(first.contains("detail=set-cookie"), "{first}");
        let second = raw_exchange(proxy.address, request.as_bytes());
        assert!(!second.contains("; hit"), "{mode:?}: {second}");
        assert!(second.contains("fwd=uri-miss"), "{mode:?}: {second}");
    }
    assert_eq!(origin.requests("GET", "/cookie"), 4);
}

/// A "fat GET": the body is not part of the cache key, yet an origin may read it. Storing
/// its answer would let one client poison the entry; answering it from the store is
/// skipped too (the cache bypasses such requests, `Cache-Status: fwd=bypass`).
pub fn a_get_with_a_body_is_neither_stored_nor_answered_from_the_store(backend: &str) {
    let origin = ScriptedOrigin::start(poison_script);
    for mode in [Mode::Forward, Mode::Reverse] {
        let proxy = mode.start(backend, &origin);
        let path = format!("/fat-{mode:?}");
        let plain = mode.get(&origin, &path);
        let fat = plain.replace(
            "Connection: close\r\n\r\n",
            "Content-Length: 6\r\nConnection: close\r\n\r\nPOISON",
        );
        let poisoned = raw_exchange(proxy.address, fat.as_bytes());
        assert!(poisoned.contains("fwd=bypass"), "{poisoned}");
        let clean = raw_exchange(proxy.address, plain.as_bytes());
        assert!(clean.ends_with("count=2"), "{mode:?}: {clean}");
        assert!(clean.contains("stored"), "{clean}");
        // Stored now by a plain GET: a fat GET does not get the stored answer either.
        let fat_again = raw_exchange(proxy.address, fat.as_bytes());
        assert!(fat_again.ends_with("count=3"), "{mode:?}: {fat_again}");
        let hit = raw_exchange(proxy.address, plain.as_bytes());
        assert!(hit.contains("; hit") && hit.ends_with("count=2"), "{hit}");
    }
}

/// Hop-by-hop cache poisoning: `Connection: X-Mobile` makes the proxy drop `X-Mobile`
/// before forwarding, so the origin answers its desktop page (`Vary: X-Mobile`) — which
/// was stored under the client's `X-Mobile: 1` and handed to every mobile client. The
/// stored answer is now keyed on the fields the origin saw (none: the desktop variant), so
/// a mobile client misses and gets its own page.
pub fn a_field_stripped_as_hop_by_hop_does_not_key_the_stored_answer(backend: &str) {
    let origin = ScriptedOrigin::start(poison_script);
    for mode in [Mode::Forward, Mode::Reverse] {
        let proxy = mode.start(backend, &origin);
        let plain = mode.get(&origin, "/mobile");
        let mobile = plain.replace(
            "Connection: close\r\n",
            "X-Mobile: 1\r\nConnection: close\r\n",
        );
        let attack = plain.replace(
            "Connection: close\r\n",
            "X-Mobile: 1\r\nConnection: X-Mobile, close\r\n",
        );
        let poisoned = raw_exchange(proxy.address, attack.as_bytes());
        assert!(poisoned.ends_with("desktop page"), "{mode:?}: {poisoned}");
        let victim = raw_exchange(proxy.address, mobile.as_bytes());
        assert!(victim.ends_with("mobile page"), "{mode:?}: {victim}");
        let desktop = raw_exchange(proxy.address, plain.as_bytes());
        assert!(desktop.ends_with("desktop page"), "{mode:?}: {desktop}");
        assert!(desktop.contains("; hit"), "{mode:?}: {desktop}");
    }
}

/// Forward (absolute-form targets) or reverse proxy (origin-form) in front of the origin.
#[derive(Clone, Copy, Debug)]
pub enum Mode {
    Forward,
    Reverse,
}

impl Mode {
    /// A proxy in this mode for `origin`.
    pub fn start(self, backend: &str, origin: &ScriptedOrigin) -> Proxy {
        self.start_with(backend, origin, &[])
    }

    /// A proxy in this mode for `origin`, with `args`.
    pub fn start_with(self, backend: &str, origin: &ScriptedOrigin, args: &[&str]) -> Proxy {
        let reverse = origin.url("");
        let mut all = args.to_vec();
        if let Mode::Reverse = self {
            all.extend(["--reverse", &reverse]);
        }
        Proxy::start(backend, &all)
    }

    /// A GET for `path` that closes the connection after its answer.
    pub fn get(self, origin: &ScriptedOrigin, path: &str) -> String {
        let target = match self {
            Mode::Forward => origin.url(path),
            Mode::Reverse => path.to_owned(),
        };
        format!(
            "GET {target} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            origin.address
        )
    }
}

/// An address of this machine that is not loopback (`hostname -I`), if any.
fn non_loopback_address() -> Option<String> {
    let output = std::process::Command::new("hostname")
        .arg("-I")
        .output()
        .ok()?;
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .find(|address| address.contains('.') && !address.starts_with("127."))
        .map(str::to_owned)
}

/// A reverse proxy open to the public (`--allow`) let any client `PURGE` any entry: one
/// request per object empties the cache and sends every client to the origin. `PURGE` is
/// now for loopback clients and `--purge-allow` networks only; others get `403` and the
/// entry stays.
pub fn purge_is_refused_to_clients_outside_the_purge_acl(backend: &str) {
    let Some(address) = non_loopback_address() else {
        println!("skipped: this machine has no non-loopback IPv4 address");
        return;
    };
    let origin = ScriptedOrigin::start(poison_script);
    let public = format!("{address}/32");
    let reverse = origin.url("");
    let request = |target: &str, method: &str| {
        format!(
            "{method} {target} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            origin.address
        )
    };
    let proxy = Proxy::start_on(
        "0.0.0.0:0",
        backend,
        &["--allow", &public, "--reverse", &reverse],
    );
    let outside: std::net::SocketAddr = format!("{address}:{}", proxy.address.port())
        .parse()
        .expect("an address");
    let loopback: std::net::SocketAddr = ([127, 0, 0, 1], proxy.address.port()).into();
    let stored = raw_exchange(outside, request("/purge-me", "GET").as_bytes());
    assert!(stored.contains("stored"), "{stored}");
    let refused = raw_exchange(outside, request("/purge-me", "PURGE").as_bytes());
    assert!(refused.starts_with("HTTP/1.1 403 "), "{refused}");
    let hit = raw_exchange(outside, request("/purge-me", "GET").as_bytes());
    assert!(hit.contains("; hit"), "{hit}");
    let purged = raw_exchange(loopback, request("/purge-me", "PURGE").as_bytes());
    assert!(purged.starts_with("HTTP/1.1 200 "), "{purged}");
    // With --purge-allow, that network may purge too.
    let proxy = Proxy::start_on(
        "0.0.0.0:0",
        backend,
        &[
            "--allow",
            &public,
            "--purge-allow",
            &public,
            "--reverse",
            &reverse,
        ],
    );
    let outside: std::net::SocketAddr = format!("{address}:{}", proxy.address.port())
        .parse()
        .expect("an address");
    raw_exchange(outside, request("/purge-me-too", "GET").as_bytes());
    let purged = raw_exchange(outside, request("/purge-me-too", "PURGE").as_bytes());
    assert!(purged.starts_with("HTTP/1.1 200 "), "{purged}");
}
