//! Content types by file extension ([`content_type_for`]).
//!
//! Invariants: lookup is by the extension of the last path segment only, ASCII
//! case-insensitive, allocation-free; text types carry `; charset=utf-8`; anything unknown
//! (including no extension or a dot-file like `.bashrc`) is `application/octet-stream`.

/// The type served for unknown extensions.
pub const DEFAULT_CONTENT_TYPE: &str = "application/octet-stream";

/// Longest extension in the table (`webmanifest`); longer ones are unknown.
const MAX_EXTENSION_LEN: usize = 11;

/// The `Content-Type` value for a file path (any bytes; only the extension is looked at).
pub fn content_type_for(path: &[u8]) -> &'static str {
    let file_name = match path.iter().rposition(|&byte| byte == b'/') {
        Some(slash) => path.get(slash + 1..).unwrap_or(&[]),
        None => path,
    };
    let Some(dot) = file_name.iter().rposition(|&byte| byte == b'.') else {
        return DEFAULT_CONTENT_TYPE;
    };
    if dot == 0 {
        return DEFAULT_CONTENT_TYPE;
    }
    let extension = file_name.get(dot + 1..).unwrap_or(&[]);
    if extension.is_empty() || extension.len() > MAX_EXTENSION_LEN {
        return DEFAULT_CONTENT_TYPE;
    }
    let mut lower = [0u8; MAX_EXTENSION_LEN];
    for (slot, byte) in lower.iter_mut().zip(extension) {
        *slot = byte.to_ascii_lowercase();
    }
    by_lowercase_extension(lower.get(..extension.len()).unwrap_or(&[]))
}

fn by_lowercase_extension(extension: &[u8]) -> &'static str {
    match extension {
        b"html" | b"htm" => "text/html; charset=utf-8",
        b"css" => "text/css; charset=utf-8",
        b"js" | b"mjs" => "text/javascript; charset=utf-8",
        b"json" => "application/json",
        b"txt" => "text/plain; charset=utf-8",
        b"xml" => "text/xml; charset=utf-8",
        b"csv" => "text/csv; charset=utf-8",
        b"md" => "text/markdown; charset=utf-8",
        b"log" => "text/plain; charset=utf-8",
        b"xhtml" => "application/xhtml+xml",
        b"atom" => "application/atom+xml",
        b"rss" => "application/rss+xml",
        b"map" => "application/json",
        b"webmanifest" => "application/manifest+json",
        b"yaml" | b"yml" => "application/yaml",
        b"toml" => "application/toml",
        b"svg" => "image/svg+xml",
        b"png" => "image/png",
        b"jpg" | b"jpeg" => "image/jpeg",
        b"gif" => "image/gif",
        b"webp" => "image/webp",
        b"avif" => "image/avif",
        b"ico" => "image/x-icon",
        b"bmp" => "image/bmp",
        b"pdf" => "application/pdf",
        b"wasm" => "application/wasm",
        b"woff" => "font/woff",
        b"woff2" => "font/woff2",
        b"ttf" => "font/ttf",
        b"otf" => "font/otf",
        b"mp4" => "video/mp4",
        b"webm" => "video/webm",
        b"mov" => "video/quicktime",
        b"mp3" => "audio/mpeg",
        b"ogg" => "audio/ogg",
        b"wav" => "audio/wav",
        b"m4a" => "audio/mp4",
        b"flac" => "audio/flac",
        b"opus" => "audio/opus",
        b"epub" => "application/epub+zip",
        b"zip" => "application/zip",
        b"gz" => "application/gzip",
        b"tar" => "application/x-tar",
        b"xz" => "application/x-xz",
        b"bz2" => "application/x-bzip2",
        b"zst" => "application/zstd",
        b"7z" => "application/x-7z-compressed",
        _ => DEFAULT_CONTENT_TYPE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_types() {
        assert_eq!(content_type_for(b"index.html"), "text/html; charset=utf-8");
        assert_eq!(
            content_type_for(b"a/b/STYLE.CSS"),
            "text/css; charset=utf-8"
        );
        assert_eq!(
            content_type_for(b"app.mjs"),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(content_type_for(b"data.json"), "application/json");
        assert_eq!(content_type_for(b"photo.JPeG"), "image/jpeg");
        assert_eq!(content_type_for(b"font.woff2"), "font/woff2");
        assert_eq!(content_type_for(b"archive.tar.gz"), "application/gzip");
        assert_eq!(
            content_type_for(b"README.md"),
            "text/markdown; charset=utf-8"
        );
        assert_eq!(
            content_type_for(b"site.webmanifest"),
            "application/manifest+json"
        );
        assert_eq!(content_type_for(b"app.js.map"), "application/json");
        assert_eq!(content_type_for(b"conf.YML"), "application/yaml");
        assert_eq!(content_type_for(b"x.log"), "text/plain; charset=utf-8");
    }

    #[test]
    fn unknown_or_missing_extensions() {
        for path in [
            &b""[..],
            b"Makefile",
            b".bashrc",
            b"dir.d/file",
            b"file.",
            b"file.muchtoolongext",
            b"file.\xff",
        ] {
            assert_eq!(content_type_for(path), DEFAULT_CONTENT_TYPE, "{path:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..32)) {
            let _ = content_type_for(&bytes);
        }
    }
}
