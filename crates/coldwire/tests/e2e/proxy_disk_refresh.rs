//! `coldwire proxy --cache-dir`: a `304` that freshens a stored object survives a restart
//! (docs/disk-store.md, "Freshening is persisted"): after it, the restarted proxy serves
//! the object as a hit with the `304`'s fields and freshness, without asking the origin —
//! for an object kept in memory and on disk, and for one on disk only. Every backend.

use coldwire_testkit::scripted::{Reply, ScriptedOrigin, ScriptedRequest};
use coldwire_testkit::{pseudo_random_bytes, via_proxy};

use crate::proxy_disk::{disk_proxy, settle};

coldwire_testkit::backend_tests! {
    a_304_freshening_survives_a_restart,
}

/// 8 KiB (memory and disk) or 200 KiB (over --max-object-bytes: disk only).
fn body(path: &str) -> Vec<u8> {
    let length = if path == "/small" { 8 << 10 } else { 200 << 10 };
    pseudo_random_bytes(length, length as u64)
}

/// Stale at once with a validator; a `304` for it makes it fresh for an hour, with a new
/// field.
fn script(request: &ScriptedRequest) -> Reply {
    if request.header("if-none-match") == Some("\"v1\"") {
        return Reply::head(
            "304 Not Modified",
            &[
                ("ETag", "\"v1\""),
                ("Cache-Control", "max-age=3600"),
                ("X-Refreshed", "yes"),
            ],
        );
    }
    Reply::new(
        "200 OK",
        &[("ETag", "\"v1\""), ("Cache-Control", "max-age=0")],
        &body(&request.path),
    )
}

fn a_304_freshening_survives_a_restart(backend: &str) {
    let origin = ScriptedOrigin::start(script);
    let dir = tempfile::tempdir().expect("a directory");
    let paths = ["/small", "/large"];
    {
        let proxy = disk_proxy(backend, dir.path(), &[]);
        for path in paths {
            let (status, head, received) = via_proxy(&proxy, &[], &origin.url(path));
            assert_eq!(status, 200, "{path}: {head}");
            assert!(received == body(path), "{path}");
        }
        settle(&proxy);
        for path in paths {
            let (status, head, received) = via_proxy(&proxy, &[], &origin.url(path));
            assert_eq!(status, 200, "{path}: {head}");
            assert!(head.contains("X-Refreshed: yes"), "{path}: {head}");
            assert!(received == body(path), "{path}");
            assert_eq!(origin.requests("GET", path), 2, "{path}: revalidated");
        }
        let stats = settle(&proxy);
        assert_eq!(stats["cache"]["disk"]["heads_written"], 2, "{stats}");
    }
    let proxy = disk_proxy(backend, dir.path(), &[]);
    for path in paths {
        let (status, head, received) = via_proxy(&proxy, &[], &origin.url(path));
        assert_eq!(status, 200, "{path}: {head}");
        let lower = head.to_ascii_lowercase();
        assert!(lower.contains("x-refreshed: yes"), "{path}: {head}");
        assert!(
            lower.contains("cache-control: max-age=3600"),
            "{path}: {head}"
        );
        assert!(
            lower.contains("hit"),
            "{path}: fresh after the restart: {head}"
        );
        assert!(received == body(path), "{path}");
        assert_eq!(origin.requests("GET", path), 2, "{path}: not asked again");
    }
}
