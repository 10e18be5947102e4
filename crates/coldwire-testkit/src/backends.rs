//! Which I/O backends the end-to-end tests run on, and the macro that runs a test on each.
//!
//! [`backend_tests!`](crate::backend_tests) is the one per-backend test generator of the
//! e2e tests; the list of backends is the I/O layer's (`coldwire_io::for_each_backend!`,
//! checked against `Backend::ALL`).

use std::thread;

/// Whether `coldwire serve|proxy --io NAME` can run here. io_uring may be switched off or
/// filtered (sysctl, seccomp): then this prints `skipped: <reason>` and the test returns;
/// every other backend must work, so its probe failing is a test failure.
pub fn backend_available(name: &str) -> bool {
    let backend: coldwire_io::Backend = name.parse().expect("a backend name");
    // Probe on a helper thread: tearing down the probe's io_uring can post task work to the
    // thread that created the ring, which makes that thread's next socket read with a
    // timeout fail with EINTR (seen in the connection-limit test).
    let probe = thread::spawn(move || backend.probe())
        .join()
        .expect("the probe thread");
    match probe {
        Ok(()) => true,
        Err(reason) if name.starts_with("uring") => {
            println!("skipped: {name} is unavailable here: {reason}");
            false
        }
        Err(reason) => panic!("backend {name} does not work here: {reason}"),
    }
}

/// Raises this process's open-files soft limit to its hard limit; returns the new soft limit.
pub fn raise_open_files_limit() -> u64 {
    coldwire_io::sys::raise_open_files_limit().expect("raising RLIMIT_NOFILE")
}

/// Generates one module per I/O backend (`epoll`, `uring`, `uring_poll`, `poll`,
/// `select`: the list is `coldwire_io::Backend::ALL`, through the I/O layer's
/// `for_each_backend!`), each with one `#[test]` per listed function of the calling
/// module; a test calls `super::NAME(backend)` with the backend's `--io` name
/// (`uring-poll`), or returns after `skipped: <reason>` where the kernel refuses io_uring.
///
/// ```ignore
/// coldwire_testkit::backend_tests! { miss_then_hit_is_served_from_the_cache, vary_keeps_variants_apart }
/// fn miss_then_hit_is_served_from_the_cache(backend: &str) { /* … */ }
/// ```
#[macro_export]
macro_rules! backend_tests {
    ($($test:ident),+ $(,)?) => {
        ::coldwire_io::for_each_backend!(by_name: $($test),+);
    };
}
