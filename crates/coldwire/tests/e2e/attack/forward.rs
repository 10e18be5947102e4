//! Forward-proxy abuse: the proxy as a way into what only the proxy's host should reach.

use coldwire_testkit::Proxy;
use coldwire_testkit::scripted::raw_exchange;

/// Through a forward proxy, any client the ACL admits (remote ones with `--allow`) could
/// read the admin endpoint as if local: `GET http://127.0.0.1:ADMIN/stats` was answered
/// 200 with the statistics. Every spelling of the proxy's admin or own listening address
/// (checked on the resolved address) is now refused `403` `destination_ip_prohibited`
/// before a connection is opened, CONNECT included.
pub fn the_admin_endpoint_and_the_proxy_itself_are_not_destinations(backend: &str) {
    let proxy = Proxy::start(backend, &["--admin", "127.0.0.1:0", "--connect-any-port"]);
    let stats_url = proxy.stats_url.clone().expect("the stats URL");
    let admin_port = stats_url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/stats");
    let listen_port = proxy.address.port();
    for target in [
        format!("http://127.0.0.1:{admin_port}/stats"),
        format!("http://0.0.0.0:{admin_port}/stats"),
        format!("http://[::ffff:127.0.0.1]:{admin_port}/metrics"),
        format!("http://2130706433:{admin_port}/stats"),
        format!("http://localhost:{listen_port}/anything"),
    ] {
        let request = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let answer = raw_exchange(proxy.address, request.as_bytes());
        assert!(answer.starts_with("HTTP/1.1 403 "), "{target}: {answer}");
        assert!(
            answer.contains("error=destination_ip_prohibited"),
            "{target}: {answer}"
        );
        assert!(!answer.contains("\"requests\""), "{target}: {answer}");
    }
    let connect = format!("CONNECT 127.0.0.1:{admin_port} HTTP/1.1\r\nHost: x\r\n\r\n");
    let answer = raw_exchange(proxy.address, connect.as_bytes());
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    assert!(answer.contains("destination_ip_prohibited"), "{answer}");
    // The admin endpoint itself still answers directly.
    let direct = "GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let port: u16 = admin_port.parse().expect("a port");
    let answer = raw_exchange(([127, 0, 0, 1], port).into(), direct.as_bytes());
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
}
