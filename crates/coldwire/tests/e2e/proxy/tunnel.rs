//! `coldwire proxy`'s CONNECT tunnels: to a TLS server (copied and spliced), the allowed
//! ports, and idle tunnels closed while active ones are kept.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use coldwire_testkit::{
    Proxy, connect_through, curl_output, read_once, read_rest, start_echo_server,
};

/// A child process killed and reaped when dropped (also when the test panics).
struct StopOnDrop(std::process::Child);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(super) fn connect_tunnel_reaches_a_tls_server(backend: &str) {
    tunnel_to_tls_server(backend, &[]);
}

pub(super) fn spliced_connect_tunnel_reaches_a_tls_server(backend: &str) {
    tunnel_to_tls_server(backend, &["--data-path", "splice"]);
}

pub(super) fn tunnel_to_tls_server(backend: &str, proxy_args: &[&str]) {
    if Command::new("openssl").arg("version").output().is_err() {
        println!("skipped: openssl is not installed (the CI script installs it)");
        return;
    }
    let directory = tempfile::tempdir().unwrap();
    let key = directory.path().join("key.pem");
    let certificate = directory.path().join("certificate.pem");
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&certificate)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(made.success());
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let server = Command::new("openssl")
        .args(["s_server", "-www", "-quiet", "-accept", &port.to_string()])
        .arg("-key")
        .arg(&key)
        .arg("-cert")
        .arg(&certificate)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Stopped however the test ends: a failing assertion must not leave it running.
    let server = StopOnDrop(server);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "openssl s_server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let port_text = port.to_string();
    let mut args = vec!["--connect-port", &port_text];
    args.extend_from_slice(proxy_args);
    let proxy = Proxy::start(backend, &args);
    let output = curl_output(&[
        "-k",
        "-x",
        &proxy.url(),
        &format!("https://localhost:{port}/"),
    ]);
    drop(server);
    assert_eq!(output.code, 0);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("s_server"), "{text}");
}

/// CONNECT reaches port 443 only by default: another port gets a 403 that says which flag
/// allows it; `--connect-port N` and `--connect-any-port` open it.
pub(super) fn connect_is_limited_to_allowed_ports(backend: &str) {
    let echo = start_echo_server();
    let target = echo.to_string();
    let proxy = Proxy::start(backend, &[]);
    let (mut stream, head) = connect_through(&proxy, &target);
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    // curl hides a refused CONNECT's body: the Proxy-Status field (curl -v) names the flag.
    assert!(
        head.contains(&format!(
            "Proxy-Status: coldwire; error=http_request_denied; details=\"CONNECT to port {} \
             refused: 443 only; allow it with --connect-port {} or --connect-any-port\"",
            echo.port(),
            echo.port()
        )),
        "{head}"
    );
    let body = String::from_utf8_lossy(&read_rest(&mut stream)).into_owned();
    assert!(
        body.contains(&format!("--connect-port {}", echo.port())),
        "{body}"
    );
    // Port 443 passes the policy (nothing listens there: the answer is 502, not 403).
    let (_, head) = connect_through(&proxy, "127.0.0.1:443");
    assert!(head.starts_with("HTTP/1.1 502"), "{head}");
    let port = echo.port().to_string();
    for args in [
        &["--connect-port", &port[..]][..],
        &["--connect-any-port"][..],
    ] {
        let proxy = Proxy::start(backend, args);
        let (mut stream, head) = connect_through(&proxy, &target);
        assert!(head.starts_with("HTTP/1.1 200"), "{args:?}: {head}");
        stream.write_all(b"ping").unwrap();
        let mut echoed = [0u8; 4];
        stream.read_exact(&mut echoed).unwrap();
        assert_eq!(&echoed, b"ping");
    }
}

/// `--idle-timeout` on CONNECT tunnels, copied, spliced and spliced in the kernel
/// (sockmap: the program's byte counters say whether it moved): a tunnel with traffic
/// every 300 ms outlives several 1 s timeouts; one silent both ways is closed by the proxy.
pub(super) fn silent_tunnels_are_closed_and_active_ones_kept(backend: &str) {
    let echo = start_echo_server();
    let port = echo.port().to_string();
    for data_path in ["copy", "splice", "sockmap"] {
        let proxy = Proxy::start(
            backend,
            &[
                "--connect-port",
                &port,
                "--idle-timeout",
                "1",
                "--data-path",
                data_path,
            ],
        );
        let (mut active, head) = connect_through(&proxy, &echo.to_string());
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let (mut silent, head) = connect_through(&proxy, &echo.to_string());
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        silent.write_all(b"once").unwrap();
        let mut echoed = [0u8; 4];
        silent.read_exact(&mut echoed).unwrap();
        for round in 0..10 {
            active.write_all(b"ping").unwrap();
            active
                .read_exact(&mut echoed)
                .unwrap_or_else(|error| panic!("{data_path}: round {round}: {error}"));
            assert_eq!(&echoed, b"ping");
            std::thread::sleep(Duration::from_millis(300));
        }
        // The proxy closes the silent one: its read ends (the echo server would keep it
        // for 120 s, and the test's 20 s read timeout reports an error instead of an end).
        let mut probe = [0u8; 16];
        let end = read_once(&mut silent, &mut probe);
        assert!(
            matches!(end, Ok(0)),
            "{data_path}: the silent tunnel must be closed by the proxy, got {end:?}"
        );
    }
}
