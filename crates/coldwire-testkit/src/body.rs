//! Deterministic bodies and their SHA-256: what a test origin sends and what a client must
//! receive, compared by hash for large bodies rather than held in memory twice.

use std::path::Path;
use std::process::Command;

/// Deterministic, non-repeating bytes (xorshift64*), so a misplaced slice never matches.
pub fn pseudo_random_bytes(length: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut out = Vec::with_capacity(length + 8);
    while out.len() < length {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(length);
    out
}

/// The test origins' body of `length` bytes: [`pseudo_random_bytes`] with one fixed seed,
/// so a body of a given length is the same wherever it is made.
pub fn body_of(length: usize) -> Vec<u8> {
    pseudo_random_bytes(length, 0x9e37_79b9_7f4a_7c15)
}

/// The SHA-256 (hex) of the file at `path`, from `sha256sum`.
pub fn sha256_of_file(path: &Path) -> String {
    let output = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum (coreutils)");
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Writes [`body_of`] each of `sizes` into `directory`; their SHA-256s, in order: what such
/// a body must hash to after the proxy.
pub fn expected_sha256s(directory: &Path, sizes: &[usize]) -> Vec<String> {
    sizes
        .iter()
        .map(|size| {
            let path = directory.join(format!("expected-{size}"));
            std::fs::write(&path, body_of(*size)).expect("writing an expected body");
            sha256_of_file(&path)
        })
        .collect()
}
