//! Log files that SIGUSR1 reopens (logrotate's `postrotate`, as nginx's USR1): the access
//! log, and any other log a server writes (error log, stats log) — each opened through
//! [`open`], which registers it. Nothing else is needed from the code that writes them.
//!
//! How: [`reopen_all`] opens each file's path anew (created if the rotation moved it
//! away) and puts the new file on the old one's descriptor with `dup2`, atomically. Every
//! `Arc<File>` handed out stays valid and writes to the new file from then on; a write in
//! flight goes wholly to the old file or wholly to the new one, and lines still buffered
//! by a worker are written to the new one. No line is lost and no writer is told.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

/// One registered log: where it is to be (re)opened, and the file its writers share.
struct LogFile {
    path: PathBuf,
    file: Weak<File>,
}

/// Every log opened through [`open`] and still in use.
static LOGS: Mutex<Vec<LogFile>> = Mutex::new(Vec::new());

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// Opens `path` for appending (created if missing) and registers it to be reopened by
/// [`reopen_all`].
pub fn open(path: &Path) -> io::Result<Arc<File>> {
    let file = Arc::new(open_append(path)?);
    let mut logs = LOGS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    logs.retain(|log| log.file.strong_count() > 0);
    logs.push(LogFile {
        path: path.to_path_buf(),
        file: Arc::downgrade(&file),
    });
    Ok(file)
}

/// Puts a newly opened `path` on `file`'s descriptor.
fn replace(file: &File, path: &Path) -> io::Result<()> {
    let new = open_append(path)?;
    // SAFETY: both descriptors are open for the whole call (`new` is owned here, `file` is
    // borrowed from a live `Arc`); dup2 atomically closes `file`'s old description and
    // makes its number refer to `new`'s, which `new`'s drop then leaves open there.
    let result = unsafe { libc::dup2(new.as_raw_fd(), file.as_raw_fd()) };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reopens every registered log at its path; returns the paths reopened, and those that
/// could not be (with why: those keep writing to the file they had).
pub fn reopen_all() -> (Vec<PathBuf>, Vec<(PathBuf, io::Error)>) {
    let mut logs = LOGS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    logs.retain(|log| log.file.strong_count() > 0);
    let mut reopened = Vec::new();
    let mut failed = Vec::new();
    for log in logs.iter() {
        let Some(file) = log.file.upgrade() else {
            continue;
        };
        match replace(&file, &log.path) {
            Ok(()) => reopened.push(log.path.clone()),
            Err(error) => failed.push((log.path.clone(), error)),
        }
    }
    (reopened, failed)
}

/// Moves the registered log `file` to `path` (a reload that names another file): opens
/// `path` on its descriptor, and reopens it there from then on.
pub fn move_to(file: &Arc<File>, path: &Path) -> io::Result<()> {
    replace(file, path)?;
    let mut logs = LOGS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for log in logs.iter_mut() {
        if log
            .file
            .upgrade()
            .is_some_and(|live| Arc::ptr_eq(&live, file))
        {
            log.path = path.to_path_buf();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn a_rotated_log_is_written_anew_at_its_path_after_reopening() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("access.log");
        let file = open(&path).unwrap();
        (&*file).write_all(b"one\n").unwrap();
        let rotated = directory.path().join("access.log.1");
        std::fs::rename(&path, &rotated).unwrap();
        (&*file).write_all(b"two\n").unwrap();
        let (reopened, failed) = reopen_all();
        assert!(reopened.contains(&path), "{reopened:?}");
        assert!(failed.is_empty(), "{failed:?}");
        (&*file).write_all(b"three\n").unwrap();
        assert_eq!(std::fs::read_to_string(&rotated).unwrap(), "one\ntwo\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three\n");
        let moved = directory.path().join("other.log");
        move_to(&file, &moved).unwrap();
        (&*file).write_all(b"four\n").unwrap();
        assert_eq!(std::fs::read_to_string(&moved).unwrap(), "four\n");
        drop(file);
        let (reopened, _) = reopen_all();
        assert!(!reopened.contains(&moved), "a dropped log is forgotten");
    }
}
