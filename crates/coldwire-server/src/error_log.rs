//! The error log (`--error-log FILE`, stderr by default; `--error-log-level`): one line
//! per request that failed, saying why — the error word (RFC 9209's type, as in the
//! answer's `Proxy-Status` and the access log's `error` field), the client, the request,
//! the origin, the phase and the system's error:
//!
//! ```text
//! 2026-11-26T13:55:36Z [error] connection_refused: client 127.0.0.1:41234 "GET http://127.0.0.1:9/ HTTP/1.1", origin 127.0.0.1:9, phase connect: Connection refused (os error 111)
//! ```
//!
//! Workers never write it themselves: [`ErrorLog::log`] hands the line to one writer
//! thread through a bounded queue (`try_send`: a full queue drops the line and counts it),
//! so a slow disk or a stderr pipe nobody reads never blocks an event loop, and a write
//! error (`EPIPE`, `ENOSPC`) is ignored, never a panic. The writer writes at most
//! `max_per_second` lines a second (100 by default); past that it counts the lines of
//! each error word and, when the second is over, writes one summary line per word:
//! `[warn] suppressed 4211 similar lines (connection_refused) in the last second`, so a
//! flood cannot fill the disk.
//!
//! A reload (SIGHUP) changes the level, the rate and the file's path of a running log
//! ([`ErrorLog::reconfigure`]); every worker's handle sees the change at its next line.

use std::collections::BTreeMap;
use std::fmt::Arguments;
use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant, SystemTime};

/// Lines waiting for the writer before new ones are dropped.
const QUEUE_LINES: usize = 4096;

/// How much is logged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Failures of the server or its origins (5xx the server made itself).
    Error,
    /// Requests refused by policy (403: ACL, forwarding loop, CONNECT port).
    #[default]
    Warn,
    /// Malformed or over-limit requests (400, 413, 431), `only-if-cached` misses.
    Info,
    /// Everything, including retries.
    Debug,
}

impl Level {
    const ALL: [Level; 4] = [Level::Error, Level::Warn, Level::Info, Level::Debug];

    /// The level's name (`error`, `warn`, `info`, `debug`).
    pub fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
}

impl FromStr for Level {
    type Err = String;

    fn from_str(text: &str) -> Result<Level, String> {
        Level::ALL
            .into_iter()
            .find(|level| level.name() == text)
            .ok_or_else(|| {
                format!("unknown error log level {text:?}: expected error, warn, info or debug")
            })
    }
}

/// Where and how much to log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorLogConfig {
    /// The file (appended to); `None` is stderr.
    pub path: Option<PathBuf>,
    /// Lines below this level are not written.
    pub level: Level,
    /// Lines written per second at most; the rest are counted in a summary line.
    pub max_per_second: u32,
}

impl Default for ErrorLogConfig {
    fn default() -> ErrorLogConfig {
        ErrorLogConfig {
            path: None,
            level: Level::Warn,
            max_per_second: 100,
        }
    }
}

struct Line {
    level: Level,
    subject: &'static str,
    text: String,
}

/// A handle on the error log; cheap to clone (one per worker). Dropping every handle ends
/// the writer thread after it has written what was queued.
#[derive(Clone)]
pub struct ErrorLog {
    sender: Option<SyncSender<Line>>,
    /// The level, as its index in `Level::ALL` (shared: a reload changes it).
    level: Arc<AtomicU8>,
    /// Lines a second at most (shared with the writer).
    max_per_second: Arc<AtomicU32>,
    /// The file written, when not stderr (a reload may move it).
    file: Option<Arc<File>>,
    dropped: Arc<AtomicU64>,
}

impl ErrorLog {
    /// An error log that writes nothing (tests, tools).
    pub fn disabled() -> ErrorLog {
        ErrorLog {
            sender: None,
            level: Arc::new(AtomicU8::new(Level::Error as u8)),
            max_per_second: Arc::new(AtomicU32::new(1)),
            file: None,
            dropped: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Opens the log (the file appended to, created if missing, reopened by SIGUSR1 through
    /// [`crate::log_files`]) and starts its writer.
    pub fn open(config: &ErrorLogConfig) -> io::Result<ErrorLog> {
        let file = match &config.path {
            Some(path) => Some(crate::log_files::open(path)?),
            None => None,
        };
        let output = match &file {
            Some(file) => Output::File(file.clone()),
            None => Output::Stderr,
        };
        let (sender, receiver) = sync_channel(QUEUE_LINES);
        let dropped = Arc::new(AtomicU64::new(0));
        let max_per_second = Arc::new(AtomicU32::new(config.max_per_second.max(1)));
        let writer = Writer {
            output,
            max_per_second: max_per_second.clone(),
            dropped: dropped.clone(),
        };
        std::thread::Builder::new()
            .name("coldwire-error-log".into())
            .spawn(move || writer.run(&receiver))?;
        Ok(ErrorLog {
            sender: Some(sender),
            level: Arc::new(AtomicU8::new(config.level as u8)),
            max_per_second,
            file,
            dropped,
        })
    }

    /// A reload from `old` to `new`: the level and the rate change at once, a new file
    /// path takes the log there ([`crate::log_files::move_to`]). Moving between stderr and
    /// a file is not done here ([`crate::RuntimeConfig::keep_fixed`] keeps it).
    pub fn reconfigure(&self, old: &ErrorLogConfig, new: &ErrorLogConfig) -> io::Result<()> {
        if let (Some(file), Some(path)) = (&self.file, &new.path)
            && old.path.as_ref() != Some(path)
        {
            crate::log_files::move_to(file, path)?;
        }
        self.level.store(new.level as u8, Ordering::Relaxed);
        self.max_per_second
            .store(new.max_per_second.max(1), Ordering::Relaxed);
        Ok(())
    }

    /// A handle that writes nothing but reconfigures this log ([`ErrorLog::reconfigure`]):
    /// holding it does not keep the writer running once the workers' handles are gone.
    pub fn control(&self) -> ErrorLog {
        ErrorLog {
            sender: None,
            ..self.clone()
        }
    }

    /// The level now in force.
    pub fn level(&self) -> Level {
        Level::ALL[usize::from(self.level.load(Ordering::Relaxed)).min(Level::ALL.len() - 1)]
    }

    /// Whether lines of `level` are written (callers skip building them otherwise).
    pub fn enabled(&self, level: Level) -> bool {
        self.sender.is_some() && level <= self.level()
    }

    /// Queues one line about `subject` (an error word); never blocks.
    pub fn log(&self, level: Level, subject: &'static str, text: Arguments<'_>) {
        if !self.enabled(level) {
            return;
        }
        let Some(sender) = &self.sender else {
            return;
        };
        let line = Line {
            level,
            subject,
            text: text.to_string(),
        };
        if let Err(TrySendError::Full(_)) = sender.try_send(line) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

enum Output {
    Stderr,
    File(Arc<File>),
}

impl Output {
    fn write_line(&mut self, line: &str) {
        // Errors (EPIPE on a closed stderr, ENOSPC) lose the line, nothing else.
        let _ = match self {
            Output::Stderr => io::stderr().lock().write_all(line.as_bytes()),
            Output::File(file) => (&**file).write_all(line.as_bytes()),
        };
    }
}

struct Writer {
    output: Output,
    max_per_second: Arc<AtomicU32>,
    dropped: Arc<AtomicU64>,
}

impl Writer {
    fn run(mut self, receiver: &Receiver<Line>) {
        let mut window = Instant::now();
        let mut written = 0u32;
        let mut suppressed: BTreeMap<&'static str, u64> = BTreeMap::new();
        loop {
            let received = receiver.recv_timeout(Duration::from_secs(1));
            if window.elapsed() >= Duration::from_secs(1) {
                self.summarise(&mut suppressed);
                window = Instant::now();
                written = 0;
            }
            match received {
                Ok(line) if written < self.max_per_second.load(Ordering::Relaxed) => {
                    written += 1;
                    let text = format!(
                        "{} [{}] {}: {}\n",
                        iso_time(SystemTime::now()),
                        line.level.name(),
                        line.subject,
                        line.text
                    );
                    self.output.write_line(&text);
                }
                Ok(line) => *suppressed.entry(line.subject).or_default() += 1,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.summarise(&mut suppressed);
                    return;
                }
            }
        }
    }

    /// One line per error word whose lines were held back, and one for a full queue.
    fn summarise(&mut self, suppressed: &mut BTreeMap<&'static str, u64>) {
        let now = iso_time(SystemTime::now());
        for (subject, count) in std::mem::take(suppressed) {
            let text = format!(
                "{now} [warn] suppressed {count} similar lines ({subject}) in the last second \
                 (at most {} lines a second)\n",
                self.max_per_second.load(Ordering::Relaxed)
            );
            self.output.write_line(&text);
        }
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            let text =
                format!("{now} [warn] dropped {dropped} lines: the error log's queue was full\n");
            self.output.write_line(&text);
        }
    }
}

/// `2026-11-26T13:55:36Z`.
pub fn iso_time(now: SystemTime) -> String {
    let seconds = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    let (year, month, day) = coldwire_http::civil_from_days((seconds / 86_400) as i64);
    let second_of_day = seconds % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_when(path: &std::path::Path, done: impl Fn(&str) -> bool) -> String {
        for _ in 0..100 {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            if done(&text) {
                return text;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        std::fs::read_to_string(path).unwrap_or_default()
    }

    #[test]
    fn levels_parse_and_filter() {
        assert_eq!("info".parse::<Level>(), Ok(Level::Info));
        assert!("loud".parse::<Level>().unwrap_err().contains("error, warn"));
        let log = ErrorLog::disabled();
        assert!(!log.enabled(Level::Error));
    }

    #[test]
    fn a_reload_changes_the_level_and_moves_the_file() {
        let directory =
            std::env::temp_dir().join(format!("coldwire-error-log-reload-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let (first, second) = (directory.join("first.log"), directory.join("second.log"));
        let old = ErrorLogConfig {
            path: Some(first.clone()),
            level: Level::Error,
            max_per_second: 100,
        };
        let log = ErrorLog::open(&old).unwrap();
        let worker = log.clone();
        assert!(!worker.enabled(Level::Info));
        let new = ErrorLogConfig {
            path: Some(second.clone()),
            level: Level::Info,
            ..old.clone()
        };
        log.reconfigure(&old, &new).unwrap();
        assert!(
            worker.enabled(Level::Info),
            "every handle sees the new level"
        );
        assert!(!worker.enabled(Level::Debug));
        worker.log(Level::Info, "http_request_error", format_args!("after"));
        drop((log, worker));
        let text = read_when(&second, |text| text.contains("after"));
        let _ = std::fs::remove_dir_all(&directory);
        assert!(text.contains("[info] http_request_error: after"), "{text}");
    }

    #[test]
    fn a_flood_is_cut_to_the_limit_and_summarised() {
        let path = std::env::temp_dir().join(format!("coldwire-error-log-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let config = ErrorLogConfig {
            path: Some(path.clone()),
            level: Level::Warn,
            max_per_second: 5,
        };
        let log = ErrorLog::open(&config).unwrap();
        for index in 0..50 {
            log.log(
                Level::Error,
                "connection_refused",
                format_args!("line {index}"),
            );
        }
        log.log(
            Level::Info,
            "http_request_error",
            format_args!("below the level"),
        );
        drop(log);
        let text = read_when(&path, |text| text.contains("suppressed"));
        let _ = std::fs::remove_file(&path);
        let written = text.lines().filter(|line| line.contains("[error]")).count();
        assert_eq!(written, 5, "{text}");
        assert!(
            text.contains("[warn] suppressed 45 similar lines (connection_refused)"),
            "{text}"
        );
        assert!(!text.contains("below the level"), "{text}");
        assert!(text.starts_with("20") && text.contains("Z [error] connection_refused: line 0\n"));
    }

    #[test]
    fn iso_times_match_known_instants() {
        let instant = SystemTime::UNIX_EPOCH + Duration::from_secs(971_186_136);
        assert_eq!(iso_time(instant), "2000-10-10T13:55:36Z");
    }
}
