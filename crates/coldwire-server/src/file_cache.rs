//! `FileCache`: each worker's cache of open files, their metadata, their prebuilt response
//! heads and — for small files — their contents, so a request for a known file costs no
//! `open`, no `stat` and no header formatting (the peers' open-file caches do the same).
//!
//! Files are opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` relative to the
//! root directory, so the kernel itself refuses `..` escapes and symlinks leading out of the
//! root; the request path has already been decoded and normalised by `coldwire-http`.
//! An entry is trusted for `validity` (1 s by default), then re-opened and compared by
//! device, inode, size and mtime; a changed file gets a new entry.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use coldwire_http::{PrebuiltHead, Status, Validators, Version, content_type_for};
use rustix::fs::{Mode, OFlags, ResolveFlags};

/// Name of the file served for a directory.
pub const INDEX_FILE: &[u8] = b"index.html";

/// A cached regular file.
#[derive(Debug)]
pub struct CachedFile {
    /// The open file, shared with queued `sendfile` chunks.
    pub file: Arc<File>,
    /// Size in bytes.
    pub length: u64,
    /// Validators for conditional requests.
    pub validators: Validators,
    /// Whole `200 OK` head (without `Connection` and the blank line).
    pub head_ok: PrebuiltHead,
    /// Representation fields without status line and length, for 206 responses.
    pub head_fields: PrebuiltHead,
    /// Whole `304 Not Modified` head (without `Connection` and the blank line).
    pub head_not_modified: PrebuiltHead,
    /// The contents, for files up to the memory limit.
    pub body: Option<Bytes>,
    identity: (u64, u64, u64, i64, i64),
    checked_at: Instant,
}

/// Why a path has no file to serve.
#[derive(Debug, PartialEq, Eq)]
pub enum LookupError {
    /// Nothing there.
    NotFound,
    /// Exists but may not be served (permissions, escape attempt, not a regular file).
    Forbidden,
    /// A directory named without its trailing slash: redirect to `path/`.
    Directory,
    /// Some other failure (e.g. out of descriptors).
    Internal,
}

/// The per-worker open-file cache.
pub struct FileCache {
    root: OwnedFd,
    entries: HashMap<Box<[u8]>, CachedFile>,
    validity: Duration,
    max_entries: usize,
    memory_file_limit: u64,
    /// Files opened (misses and revalidations), for the stats.
    pub opens: u64,
}

fn identity(metadata: &std::fs::Metadata) -> (u64, u64, u64, i64, i64) {
    (
        metadata.dev(),
        metadata.ino(),
        metadata.size(),
        metadata.mtime(),
        metadata.mtime_nsec(),
    )
}

fn classify(error: &io::Error) -> LookupError {
    match error.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG) => LookupError::NotFound,
        Some(libc::EACCES | libc::EPERM | libc::EXDEV | libc::ELOOP) => LookupError::Forbidden,
        _ => LookupError::Internal,
    }
}

impl FileCache {
    /// Opens the root directory (once per worker).
    pub fn new(
        root: &std::path::Path,
        validity: Duration,
        max_entries: usize,
        memory_file_limit: u64,
    ) -> io::Result<FileCache> {
        let root = rustix::fs::open(
            root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(FileCache {
            root,
            entries: HashMap::new(),
            validity,
            max_entries,
            memory_file_limit,
            opens: 0,
        })
    }

    /// The file at `relative` (decoded, normalised, no leading slash; empty or ending in
    /// `/` means a directory, whose index file is served).
    pub fn lookup(&mut self, relative: &[u8], now: Instant) -> Result<&CachedFile, LookupError> {
        let fresh = self
            .entries
            .get(relative)
            .is_some_and(|entry| now.saturating_duration_since(entry.checked_at) < self.validity);
        if !fresh {
            self.refresh(relative, now)?;
        }
        self.entries.get(relative).ok_or(LookupError::Internal)
    }

    fn refresh(&mut self, relative: &[u8], now: Instant) -> Result<(), LookupError> {
        let wants_index = relative.is_empty() || relative.ends_with(b"/");
        let mut path = Vec::with_capacity(relative.len() + INDEX_FILE.len());
        path.extend_from_slice(relative);
        if wants_index {
            path.extend_from_slice(INDEX_FILE);
        }
        self.opens += 1;
        let opened = rustix::fs::openat2(
            &self.root,
            OsStr::from_bytes(&path),
            // NONBLOCK: opening a FIFO must not block the loop (it is refused below anyway).
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
        );
        let file = match opened {
            Ok(fd) => File::from(fd),
            Err(error) => {
                self.entries.remove(relative);
                return Err(classify(&io::Error::from(error)));
            }
        };
        let metadata = file.metadata().map_err(|error| classify(&error))?;
        if metadata.is_dir() {
            self.entries.remove(relative);
            return Err(if wants_index {
                LookupError::Forbidden
            } else {
                LookupError::Directory
            });
        }
        if !metadata.is_file() {
            self.entries.remove(relative);
            return Err(LookupError::Forbidden);
        }
        let identity = identity(&metadata);
        if let Some(entry) = self.entries.get_mut(relative)
            && entry.identity == identity
        {
            entry.checked_at = now;
            return Ok(());
        }
        let entry = self.build_entry(file, &path, &metadata, identity, now)?;
        if self.entries.len() >= self.max_entries {
            // Simple and bounded: start over rather than keep an LRU on the hot path.
            self.entries.clear();
        }
        self.entries.insert(relative.into(), entry);
        Ok(())
    }

    fn build_entry(
        &self,
        mut file: File,
        path: &[u8],
        metadata: &std::fs::Metadata,
        identity: (u64, u64, u64, i64, i64),
        now: Instant,
    ) -> Result<CachedFile, LookupError> {
        let length = metadata.size();
        let modified = metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let body = if length <= self.memory_file_limit {
            let mut contents = Vec::with_capacity(length as usize);
            file.read_to_end(&mut contents)
                .map_err(|error| classify(&error))?;
            if contents.len() as u64 != length {
                // Changed under us; the next lookup will see the new size.
                return Err(LookupError::Internal);
            }
            Some(Bytes::from(contents))
        } else {
            None
        };
        let validators = Validators::for_file(length, modified);
        let last_modified = coldwire_http::format_http_date(modified);
        let etag = validators
            .etag
            .as_ref()
            .map(|tag| tag.as_bytes().to_vec())
            .unwrap_or_default();
        let content_type = content_type_for(path).as_bytes();
        let fields = |builder: coldwire_http::PrebuiltHeadBuilder| {
            builder
                .header(b"Server", crate::SERVER_NAME.as_bytes())
                .date()
                .header(b"Content-Type", content_type)
                .header(b"Last-Modified", &last_modified)
                .header(b"ETag", &etag)
                .header(b"Accept-Ranges", b"bytes")
        };
        let head_ok = fields(PrebuiltHead::builder().status_line(Version::Http11, Status::OK))
            .content_length(length)
            .build();
        let head_fields = fields(PrebuiltHead::builder()).build();
        let head_not_modified = PrebuiltHead::builder()
            .status_line(Version::Http11, Status::NOT_MODIFIED)
            .header(b"Server", crate::SERVER_NAME.as_bytes())
            .date()
            .header(b"Last-Modified", &last_modified)
            .header(b"ETag", &etag)
            .build();
        Ok(CachedFile {
            file: Arc::new(file),
            length,
            validators,
            head_ok,
            head_fields,
            head_not_modified,
            body,
            identity,
            checked_at: now,
        })
    }

    /// Entries currently cached.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Root(std::path::PathBuf);

    impl Drop for Root {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn root(name: &str) -> Root {
        let path =
            std::env::temp_dir().join(format!("coldwire-file-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(path.join("docs/inner")).unwrap();
        std::fs::write(path.join("docs/index.html"), b"index").unwrap();
        std::fs::write(path.join("small.txt"), b"hello").unwrap();
        std::fs::write(path.join("large.bin"), vec![7u8; 100_000]).unwrap();
        Root(path)
    }

    fn cache(root: &Root) -> FileCache {
        FileCache::new(&root.0, Duration::from_secs(1), 100, 64 * 1024).unwrap()
    }

    #[test]
    fn small_files_are_kept_in_memory_and_large_ones_are_not() {
        let root = root("memory");
        let mut cache = cache(&root);
        let now = Instant::now();
        let small = cache.lookup(b"small.txt", now).unwrap();
        assert_eq!(small.body.as_deref(), Some(&b"hello"[..]));
        assert!(small.head_ok.as_bytes().starts_with(b"HTTP/1.1 200 OK\r\n"));
        assert!(
            String::from_utf8_lossy(small.head_ok.as_bytes()).contains("Content-Length: 5\r\n")
        );
        let large = cache.lookup(b"large.bin", now).unwrap();
        assert_eq!(large.length, 100_000);
        assert!(large.body.is_none());
        assert_eq!(cache.opens, 2);
        cache.lookup(b"small.txt", now).unwrap();
        assert_eq!(cache.opens, 2, "a fresh entry costs no system call");
    }

    #[test]
    fn directories_serve_their_index_or_ask_for_a_slash() {
        let root = root("directories");
        let mut cache = cache(&root);
        let now = Instant::now();
        assert_eq!(
            cache.lookup(b"docs/", now).unwrap().body.as_deref(),
            Some(&b"index"[..])
        );
        assert_eq!(
            cache.lookup(b"docs", now).unwrap_err(),
            LookupError::Directory
        );
        assert_eq!(
            cache.lookup(b"docs/inner/", now).unwrap_err(),
            LookupError::NotFound
        );
        assert_eq!(
            cache.lookup(b"missing", now).unwrap_err(),
            LookupError::NotFound
        );
    }

    #[test]
    fn symlinks_out_of_the_root_are_refused_by_the_kernel_and_inside_ones_work() {
        let root = root("symlinks");
        let outside = std::env::temp_dir().join(format!("coldwire-secret-{}", std::process::id()));
        std::fs::write(&outside, b"secret").unwrap();
        std::os::unix::fs::symlink(&outside, root.0.join("escape")).unwrap();
        std::os::unix::fs::symlink("/etc", root.0.join("etc")).unwrap();
        std::os::unix::fs::symlink("small.txt", root.0.join("alias")).unwrap();
        let mut cache = cache(&root);
        let now = Instant::now();
        assert_eq!(
            cache.lookup(b"escape", now).unwrap_err(),
            LookupError::Forbidden
        );
        assert_eq!(
            cache.lookup(b"etc/passwd", now).unwrap_err(),
            LookupError::Forbidden
        );
        assert_eq!(
            cache.lookup(b"alias", now).unwrap().body.as_deref(),
            Some(&b"hello"[..])
        );
        std::fs::remove_file(outside).unwrap();
    }

    #[test]
    fn changed_files_are_noticed_after_the_validity_period() {
        let root = root("changes");
        let mut cache = cache(&root);
        let start = Instant::now();
        assert_eq!(cache.lookup(b"small.txt", start).unwrap().length, 5);
        std::fs::write(root.0.join("small.txt"), b"hello, world").unwrap();
        assert_eq!(
            cache.lookup(b"small.txt", start).unwrap().length,
            5,
            "trusted within the validity period"
        );
        let later = start + Duration::from_secs(2);
        assert_eq!(
            cache.lookup(b"small.txt", later).unwrap().body.as_deref(),
            Some(&b"hello, world"[..])
        );
        std::fs::remove_file(root.0.join("small.txt")).unwrap();
        let much_later = later + Duration::from_secs(2);
        assert_eq!(
            cache.lookup(b"small.txt", much_later).unwrap_err(),
            LookupError::NotFound
        );
    }

    #[test]
    fn special_files_are_refused_without_blocking() {
        let root = root("fifo");
        let fifo = root.0.join("pipe");
        let path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `path` is a valid NUL-terminated string for the duration of the call.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0);
        let mut cache = cache(&root);
        assert_eq!(
            cache.lookup(b"pipe", Instant::now()).unwrap_err(),
            LookupError::Forbidden
        );
    }
}
