//! A document root in a temporary directory with known files (text, pseudo-random binary
//! files of 8 KiB and 1 MiB, a subdirectory, a symlink inside and one pointing out), for
//! the `coldwire serve` tests.

use std::fs;
use std::path::PathBuf;

use crate::body::pseudo_random_bytes;

/// A string only the file outside the document root contains.
pub const SECRET: &str = "coldwire-test-secret-5f0c1e";

/// The files of the test document root, as served at `url_path`.
pub struct Served {
    /// Path in the URL, with its leading slash.
    pub url_path: &'static str,
    /// Exact contents.
    pub contents: Vec<u8>,
}

/// A document root in a temporary directory:
///
/// ```text
/// base/secret.txt               SECRET (outside the root)
/// base/root/index.html          small HTML page
/// base/root/small.txt           1,259 bytes of text
/// base/root/medium.bin          8 KiB, pseudo-random
/// base/root/large.bin           1 MiB, pseudo-random (no repeating windows)
/// base/root/sub/index.html      the subdirectory's index
/// base/root/link.txt            symlink -> small.txt (inside: served)
/// base/root/escape.txt          symlink -> base/secret.txt (outside: refused)
/// ```
pub struct DocumentRoot {
    base: tempfile::TempDir,
    /// `index.html`.
    pub index: Vec<u8>,
    /// `small.txt` (1,259 bytes).
    pub small: Vec<u8>,
    /// `medium.bin` (8 KiB).
    pub medium: Vec<u8>,
    /// `large.bin` (1 MiB).
    pub large: Vec<u8>,
    /// `sub/index.html`.
    pub sub_index: Vec<u8>,
}

impl Default for DocumentRoot {
    fn default() -> DocumentRoot {
        DocumentRoot::new()
    }
}

impl DocumentRoot {
    /// Creates the tree described on the type.
    pub fn new() -> DocumentRoot {
        let base = tempfile::Builder::new()
            .prefix("coldwire-serve-test-")
            .tempdir()
            .expect("creating a temporary directory");
        let root = base.path().join("root");
        fs::create_dir_all(root.join("sub")).expect("creating the document root");
        let index =
            b"<!doctype html>\n<title>coldwire test</title>\n<p>index of the root</p>\n".to_vec();
        let line = b"The quick brown fox jumps over the lazy dog; coldwire serves it.\n";
        let small: Vec<u8> = line.iter().copied().cycle().take(1259).collect();
        let medium = pseudo_random_bytes(8 * 1024, 0x5eed_0008);
        let large = pseudo_random_bytes(1024 * 1024, 0x5eed_1024);
        let sub_index = b"<!doctype html>\n<p>index of sub/</p>\n".to_vec();
        let write = |name: &str, contents: &[u8]| {
            fs::write(root.join(name), contents).expect("writing a test file");
        };
        write("index.html", &index);
        write("small.txt", &small);
        write("medium.bin", &medium);
        write("large.bin", &large);
        write("sub/index.html", &sub_index);
        let secret = base.path().join("secret.txt");
        fs::write(&secret, SECRET).expect("writing the secret");
        std::os::unix::fs::symlink("small.txt", root.join("link.txt"))
            .expect("creating the inner symlink");
        std::os::unix::fs::symlink(&secret, root.join("escape.txt"))
            .expect("creating the outward symlink");
        DocumentRoot {
            base,
            index,
            small,
            medium,
            large,
            sub_index,
        }
    }

    /// The directory to pass as `--root`.
    pub fn root(&self) -> PathBuf {
        self.base.path().join("root")
    }

    /// A path for scratch files next to (not inside) the root.
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.base.path().join(name)
    }

    /// Every regular file (and the inner symlink) with the URL it is served at.
    pub fn served_files(&self) -> Vec<Served> {
        vec![
            Served {
                url_path: "/index.html",
                contents: self.index.clone(),
            },
            Served {
                url_path: "/",
                contents: self.index.clone(),
            },
            Served {
                url_path: "/small.txt",
                contents: self.small.clone(),
            },
            Served {
                url_path: "/medium.bin",
                contents: self.medium.clone(),
            },
            Served {
                url_path: "/large.bin",
                contents: self.large.clone(),
            },
            Served {
                url_path: "/sub/",
                contents: self.sub_index.clone(),
            },
            Served {
                url_path: "/sub/index.html",
                contents: self.sub_index.clone(),
            },
            Served {
                url_path: "/link.txt",
                contents: self.small.clone(),
            },
        ]
    }
}

/// The repository's `docs/` directory: a ready document root of real files for tests that
/// only need something to serve.
pub fn docs_directory() -> String {
    format!("{}/../../docs", env!("CARGO_MANIFEST_DIR"))
}
