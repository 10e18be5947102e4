//! The peers' configuration templates (committed under `experiments/peers/`, compiled in so
//! that the binary always runs the reviewed files) and their rendering: every `@NAME@`
//! placeholder is replaced, and a placeholder left over is an error rather than a broken
//! configuration.

use anyhow::bail;

/// nginx as a static file server (`experiments/peers/nginx-static.conf.in`).
pub(crate) const NGINX_STATIC: &str =
    include_str!("../../../../experiments/peers/nginx-static.conf.in");
/// nginx as a reverse proxy, with or without its cache.
pub(crate) const NGINX_PROXY: &str =
    include_str!("../../../../experiments/peers/nginx-proxy.conf.in");
/// Squid as a memory-only accelerator.
pub(crate) const SQUID: &str = include_str!("../../../../experiments/peers/squid.conf.in");
/// Squid as a forward proxy (`coldwire experiment polymix`), memory or rock store.
pub(crate) const SQUID_FORWARD: &str =
    include_str!("../../../../experiments/peers/squid-forward.conf.in");
/// Varnish's VCL.
pub(crate) const VARNISH: &str = include_str!("../../../../experiments/peers/varnish.vcl.in");
/// HAProxy, with its cache or without (optionally splicing).
pub(crate) const HAPROXY: &str = include_str!("../../../../experiments/peers/haproxy.cfg.in");

/// `template` with each `@NAME@` of `values` replaced; fails if a placeholder remains.
pub(crate) fn render(template: &str, values: &[(&str, String)]) -> anyhow::Result<String> {
    let mut text = template.to_owned();
    for (name, value) in values {
        text = text.replace(&format!("@{name}@"), value);
    }
    if let Some(left) = leftover_placeholder(&text) {
        bail!("the configuration template still has the placeholder {left} after rendering");
    }
    Ok(text)
}

/// The first `@NAME@` (upper case, digits, `_`) in `text`.
fn leftover_placeholder(text: &str) -> Option<String> {
    let mut rest = text;
    while let Some(start) = rest.find('@') {
        let after = &rest[start + 1..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(after.len());
        if name_len > 0 && after[name_len..].starts_with('@') {
            return Some(format!("@{}@", &after[..name_len]));
        }
        rest = after;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(cache: &str, options: &str) -> Vec<(&'static str, String)> {
        vec![
            ("PORT", "18001".into()),
            ("ORIGIN_PORT", "18002".into()),
            ("DIR", "/tmp/work".into()),
            ("ROOT", "/tmp/root".into()),
            ("CACHE", cache.into()),
            ("BACKEND_OPTIONS", options.into()),
        ]
    }

    #[test]
    fn every_template_renders_with_its_ports() {
        for (name, template) in [
            ("nginx-static", NGINX_STATIC),
            ("nginx-proxy", NGINX_PROXY),
            ("squid", SQUID),
            ("varnish", VARNISH),
            ("haproxy", HAPROXY),
        ] {
            let text = render(template, &values("bench", "    option splice-response")).unwrap();
            assert!(!text.contains('@'), "{name}: {text}");
            if name != "varnish" {
                assert!(
                    text.contains("127.0.0.1:18001"),
                    "{name} listens on loopback: {text}"
                );
            }
            if name != "nginx-static" {
                assert!(
                    text.contains("18002"),
                    "{name} points at the origin: {text}"
                );
            }
        }
        let nginx = render(NGINX_STATIC, &values("", "")).unwrap();
        assert!(nginx.contains("root /tmp/root;"), "{nginx}");
        assert!(nginx.contains("worker_processes 1;"), "{nginx}");
        assert!(nginx.contains("access_log off;"), "{nginx}");
        let haproxy = render(HAPROXY, &values("", "    option splice-response")).unwrap();
        assert!(
            haproxy.contains("\n    option splice-response\n"),
            "{haproxy}"
        );
        assert!(haproxy.contains("nbthread 1"), "{haproxy}");
        let mut forward = values("", "");
        forward.extend([
            ("CACHE_MEM", "268435456 bytes".to_owned()),
            ("MAX_OBJECT", "8388608 bytes".to_owned()),
            (
                "CACHE_DIR",
                "cache_dir rock /tmp/work/rock 1024 max-size=8388608".to_owned(),
            ),
        ]);
        let squid = render(SQUID_FORWARD, &forward).unwrap();
        assert!(squid.contains("http_port 127.0.0.1:18001\n"), "{squid}");
        assert!(squid.contains("cache_mem 268435456 bytes"), "{squid}");
        assert!(
            squid.contains("\ncache_dir rock /tmp/work/rock 1024"),
            "{squid}"
        );
        let uncached = render(NGINX_PROXY, &values("off", "")).unwrap();
        assert!(uncached.contains("proxy_cache off;"), "{uncached}");
    }

    #[test]
    fn a_missing_value_is_an_error() {
        let error = render(HAPROXY, &[("PORT", "1".into())])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("@ORIGIN_PORT@") || error.contains("@BACKEND_OPTIONS@"),
            "{error}"
        );
        assert_eq!(leftover_placeholder("a@b.c and x@y"), None);
        assert_eq!(leftover_placeholder("a @X_1@ b").as_deref(), Some("@X_1@"));
    }
}
