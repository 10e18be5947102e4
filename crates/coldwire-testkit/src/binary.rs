//! The `coldwire` executable under test: the binary Cargo built next to the test binary
//! (`target/<profile>/coldwire`, the test itself being in `target/<profile>/deps/`), or
//! `$COLDWIRE_BIN` when set.

use std::path::PathBuf;
use std::sync::OnceLock;

use coldwire_process::Launch;

/// The path of the `coldwire` binary the tests run.
pub fn coldwire_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("COLDWIRE_BIN") {
                return PathBuf::from(path);
            }
            let test = std::env::current_exe().expect("the test binary's path");
            let profile = test
                .parent()
                .and_then(|deps| deps.parent())
                .expect("the test binary is in target/<profile>/deps");
            let binary = profile.join("coldwire");
            assert!(
                binary.exists(),
                "no coldwire binary at {} (run the tests with cargo test -p coldwire, or set COLDWIRE_BIN)",
                binary.display()
            );
            binary
        })
        .clone()
}

/// `coldwire ARGS` as a [`Launch`]: stdout captured as lines, stderr kept, and killed at
/// once when stopped or dropped (a test waits for no graceful exit unless it asks).
pub fn coldwire<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> Launch {
    Launch::new(coldwire_binary())
        .args(args)
        .stop_grace(std::time::Duration::ZERO)
}
