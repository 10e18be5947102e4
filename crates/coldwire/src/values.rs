//! Values as people write them, for every subcommand's flags (one place, so `serve`,
//! `proxy`, `wan`, `origin`, `experiment` and `bench` read them alike):
//!
//! - durations: `30s`, `500ms`, `2m`, `1h 30m` (humantime); a plain number is seconds
//!   (`10`, `2.5`);
//! - sizes: `256M`, `1G`, `16K` (one letter: binary, as nginx: 1M = 1 MiB), `16KiB`,
//!   `1MiB` (binary), `1MB`, `16kB` (decimal; bytesize), or bytes (`65536`);
//! - bit rates: `10Mbit`, `512kbit`, `1Gbit`, or bits per second;
//! - probabilities: `0.05%` or `0.0005`;
//! - addresses to listen on: `HOST:PORT` (`127.0.0.1:8080`, `[::1]:8080`), or a bare port
//!   (`8080` or `:8080`) meaning every IPv4 interface (`0.0.0.0`), as nginx's `listen
//!   8080` does.
//!
//! Every error names the value and shows the accepted forms.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// `30s`, `500ms`, `2m`, `1h 30m` (humantime), or a plain number of seconds (`10`, `2.5`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).map_err(|_| {
            format!("{text:?} is not a duration: a number of seconds must be 0 or more")
        });
    }
    humantime::parse_duration(text).map_err(|error| {
        format!("{text:?} is not a duration ({error}); write e.g. 30s, 500ms, 2m or 10")
    })
}

/// `HOST:PORT` (IPv6 as `[::1]:8080`), or `PORT` / `:PORT` / `*:PORT` for every IPv4
/// interface (as nginx's `listen`); `localhost:PORT` is `127.0.0.1:PORT`.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    let port_only = text
        .strip_prefix(':')
        .or_else(|| text.strip_prefix("*:"))
        .unwrap_or(text);
    if let Ok(port) = port_only.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
    }
    if let Some((host, port)) = text.rsplit_once(':')
        && host.eq_ignore_ascii_case("localhost")
        && let Ok(port) = port.parse::<u16>()
    {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse().map_err(|_| {
        format!(
            "{text:?} is not an address; write HOST:PORT (127.0.0.1:8080, [::1]:8080) or a \
             port (8080 or :8080, every interface)"
        )
    })
}

/// Where to connect: `HOST:PORT` with an IP address (`127.0.0.1:8080`, `[::1]:8080`) or a
/// name resolved now (`localhost:8080`, `origin.test:80`; its first address).
pub fn parse_connect_to(text: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let text = text.trim();
    if let Ok(address) = text.parse() {
        return Ok(address);
    }
    let wrong = |why: String| {
        format!(
            "{text:?} {why}; write HOST:PORT, e.g. 127.0.0.1:8080, [::1]:8080 or localhost:8080"
        )
    };
    match text.rsplit_once(':') {
        Some((_, port)) if port.parse::<u16>().is_ok() => text
            .to_socket_addrs()
            .map_err(|error| wrong(format!("does not resolve ({error})")))?
            .next()
            .ok_or_else(|| wrong("resolves to no address".to_owned())),
        _ => Err(wrong("is not HOST:PORT".to_owned())),
    }
}

/// A proxy's address as `--proxy` takes it: `HOST:PORT`, or as curl's `-x` writes it,
/// `http://HOST:PORT[/]`.
pub fn parse_proxy(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    if text.starts_with("https://") {
        return Err(format!(
            "{text:?}: the proxy is spoken to in plain HTTP; write http://HOST:PORT or HOST:PORT"
        ));
    }
    let bare = text.strip_prefix("http://").unwrap_or(text);
    parse_connect_to(bare.strip_suffix('/').unwrap_or(bare))
}

/// A coldwire stats endpoint: `http://ADDR/stats` as given, or the admin address alone
/// (`ADDR`, `http://ADDR`, `http://ADDR/`), to which `/stats` is added.
pub fn parse_stats_url(text: &str) -> Result<String, String> {
    let text = text.trim();
    let url = if text.contains("://") {
        text.to_owned()
    } else {
        format!("http://{text}")
    };
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(format!(
            "{text:?}: the stats endpoint is plain HTTP; write http://ADDR/stats or ADDR (the server's --admin address)"
        ));
    };
    Ok(match rest.find('/') {
        None => format!("{url}/stats"),
        Some(slash) if slash + 1 == rest.len() => format!("{url}stats"),
        Some(_) => url,
    })
}

/// `10Mbit`, `512kbit`, `1Gbit`, `100mbps`, or a number of bits per second.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (number, unit) = lower
        .find(|c: char| c.is_ascii_alphabetic())
        .map_or((lower.as_str(), ""), |at| lower.split_at(at));
    let factor: f64 = match unit.trim_end_matches("/s").trim_end_matches("ps") {
        "" | "bit" | "b" => 1.0,
        "kbit" | "k" | "kb" => 1e3,
        "mbit" | "m" | "mb" => 1e6,
        "gbit" | "g" | "gb" => 1e9,
        _ => {
            return Err(format!(
                "{text:?}: write a rate such as 10Mbit, 512kbit or 1Gbit"
            ));
        }
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?}: write a rate such as 10Mbit, 512kbit or 1Gbit"))?;
    let bits = value * factor;
    if !(bits.is_finite() && bits >= 1.0) {
        return Err(format!("{text:?}: a rate must be at least 1 bit/s"));
    }
    Ok(bits as u64)
}

/// `0.05%` or `0.0005`: a probability.
pub fn parse_loss(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let value = match text.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().map(|p| p / 100.0),
        None => text.parse::<f64>(),
    }
    .map_err(|_| format!("{text:?}: write a loss rate such as 0.05% or 0.0005"))?;
    if !(0.0..1.0).contains(&value) {
        return Err(format!(
            "{text:?}: a loss rate is at least 0 and below 100%"
        ));
    }
    Ok(value)
}

/// A size: `256M`, `1G`, `16K` (one letter: binary units, as nginx reads them: 256M is
/// 256 MiB), `16KiB`, `1MiB`, `1GiB` (binary), `1MB`, `16kB` (decimal, as bytesize reads
/// them), or a number of bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let error = || {
        format!(
            "{text:?} is not a size: write e.g. 256M, 1G, 16KiB, 1MB or 65536 \
             (K, M, G alone are binary: 1M = 1048576 bytes)"
        )
    };
    let single = trimmed
        .char_indices()
        .last()
        .filter(|(_, unit)| "kKmMgGtT".contains(*unit))
        .map(|(at, unit)| (trimmed[..at].trim(), unit.to_ascii_uppercase()));
    if let Some((number, unit)) = single {
        let shift = match unit {
            'K' => 10,
            'M' => 20,
            'G' => 30,
            _ => 40,
        };
        let value: f64 = number.parse().map_err(|_| error())?;
        let bytes = value * f64::from(1u32 << (shift / 2)) * f64::from(1u32 << (shift - shift / 2));
        if !(bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64) {
            return Err(error());
        }
        return Ok(bytes as u64);
    }
    trimmed
        .parse::<bytesize::ByteSize>()
        .map(|size| size.as_u64())
        .map_err(|_| error())
}

/// [`parse_size`] for a count held in a `usize`.
pub fn parse_size_usize(text: &str) -> Result<usize, String> {
    parse_size(text)
        .and_then(|bytes| usize::try_from(bytes).map_err(|_| format!("{text:?} is too large")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_plain_seconds() {
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2.5"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("soon").unwrap_err().contains("30s"));
    }

    #[test]
    fn listen_takes_addresses_and_bare_ports() {
        assert_eq!(
            parse_listen("127.0.0.1:8080"),
            Ok(SocketAddr::from(([127, 0, 0, 1], 8080)))
        );
        assert_eq!(
            parse_listen("8080"),
            Ok(SocketAddr::from(([0, 0, 0, 0], 8080)))
        );
        assert_eq!(
            parse_listen(":3128"),
            Ok(SocketAddr::from(([0, 0, 0, 0], 3128)))
        );
        assert_eq!(
            parse_listen("[::1]:80"),
            "[::1]:80".parse().map_err(|_| String::new())
        );
        assert_eq!(
            parse_listen("*:80"),
            Ok(SocketAddr::from(([0, 0, 0, 0], 80)))
        );
        assert_eq!(
            parse_listen("localhost:8080"),
            Ok(SocketAddr::from(([127, 0, 0, 1], 8080)))
        );
        assert!(parse_listen("localhost").unwrap_err().contains("HOST:PORT"));
        assert!(parse_listen("example.com:80").is_err());
    }

    #[test]
    fn a_proxy_is_written_as_curl_writes_it_or_bare() {
        let expected = Ok(SocketAddr::from(([127, 0, 0, 1], 3128)));
        for text in [
            "127.0.0.1:3128",
            "http://127.0.0.1:3128",
            "http://127.0.0.1:3128/",
        ] {
            assert_eq!(parse_proxy(text), expected, "{text}");
        }
        assert!(parse_proxy("https://127.0.0.1:3128").is_err());
    }

    #[test]
    fn a_stats_url_may_be_the_admin_address_alone() {
        for text in [
            "127.0.0.1:9090",
            "http://127.0.0.1:9090",
            "http://127.0.0.1:9090/",
            "http://127.0.0.1:9090/stats",
        ] {
            assert_eq!(
                parse_stats_url(text).as_deref(),
                Ok("http://127.0.0.1:9090/stats"),
                "{text}"
            );
        }
        assert!(parse_stats_url("https://127.0.0.1:9090/stats").is_err());
    }

    #[test]
    fn connect_to_takes_addresses_and_names() {
        assert_eq!(
            parse_connect_to("127.0.0.1:8080"),
            Ok(SocketAddr::from(([127, 0, 0, 1], 8080)))
        );
        let local = parse_connect_to("localhost:8080").unwrap();
        assert!(local.ip().is_loopback() && local.port() == 8080, "{local}");
        for bad in ["localhost", "127.0.0.1", "host:port"] {
            assert!(
                parse_connect_to(bad).unwrap_err().contains("HOST:PORT"),
                "{bad}"
            );
        }
    }

    #[test]
    fn rates_losses_and_sizes_read_as_people_write_them() {
        assert_eq!(parse_rate("10Mbit"), Ok(10_000_000));
        assert_eq!(parse_rate("512kbit"), Ok(512_000));
        assert_eq!(parse_rate("1Gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("2.5mbps"), Ok(2_500_000));
        assert_eq!(parse_rate("9600"), Ok(9600));
        assert!(parse_rate("fast").is_err());
        assert_eq!(parse_loss("0.05%"), Ok(0.0005));
        assert_eq!(parse_loss("0.01"), Ok(0.01));
        assert!(parse_loss("100%").is_err());
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("65536"), Ok(65536));
    }

    #[test]
    fn sizes_take_nginx_letters_and_bytesize_units() {
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("16k"), Ok(16 << 10));
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_size("16KiB"), Ok(16 << 10));
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size_usize("16KiB"), Ok(16 << 10));
        let error = parse_size("lots").unwrap_err();
        assert!(
            error.contains("256M") && error.contains("\"lots\""),
            "{error}"
        );
        assert!(parse_size("-1M").is_err());
    }
}
