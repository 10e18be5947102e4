//! [`Live`]: a service's configuration as its workers read it, replaced while the server
//! runs (a reload on SIGHUP). Each worker holds the `Arc` of the configuration it works
//! with and, once per loop turn, asks its [`LiveView`] whether a newer one was published
//! (one relaxed atomic load); requests already under way finish as they started.
//! What cannot change while running (the listening address, the backend, the workers, the
//! access log's format, the stats log) is kept as it was by
//! [`RuntimeConfig::keep_fixed`], which names it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::config::RuntimeConfig;

/// The current configuration of a service, replaceable.
pub struct Live<C> {
    generation: AtomicU64,
    current: Mutex<Arc<C>>,
}

impl<C> Live<C> {
    /// A live configuration starting at `config`.
    pub fn new(config: Arc<C>) -> Arc<Live<C>> {
        Arc::new(Live {
            generation: AtomicU64::new(0),
            current: Mutex::new(config),
        })
    }

    /// The configuration now in force.
    pub fn current(&self) -> Arc<C> {
        self.current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Publishes `config`: each worker takes it at its next loop turn (wake them).
    pub fn replace(&self, config: C) {
        *self
            .current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(config);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// A worker's view, up to date now.
    pub fn view(self: &Arc<Self>) -> LiveView<C> {
        LiveView {
            seen: self.generation.load(Ordering::Acquire),
            live: self.clone(),
        }
    }
}

/// One worker's view of a [`Live`] configuration.
pub struct LiveView<C> {
    live: Arc<Live<C>>,
    seen: u64,
}

impl<C> LiveView<C> {
    /// The newer configuration, if one was published since the last call.
    pub fn changed(&mut self) -> Option<Arc<C>> {
        let generation = self.live.generation.load(Ordering::Acquire);
        if generation == self.seen {
            return None;
        }
        self.seen = generation;
        Some(self.live.current())
    }
}

impl RuntimeConfig {
    /// For a reload from `self` to `new`: puts back in `new` what cannot change while
    /// running, and names each such setting that `new` wanted changed (as its flag).
    pub fn keep_fixed(&self, new: &mut RuntimeConfig) -> Vec<&'static str> {
        let mut kept = Vec::new();
        macro_rules! keep {
            ($($field:ident).+, $flag:literal) => {
                if new.$($field).+ != self.$($field).+ {
                    new.$($field).+ = self.$($field).+.clone();
                    kept.push($flag);
                }
            };
        }
        keep!(listen, "--listen");
        keep!(backend, "--io");
        keep!(workers, "--workers");
        keep!(pin_workers, "--pin");
        keep!(sqpoll, "--sqpoll");
        keep!(uring_min_wait, "--uring-min-wait");
        keep!(admin, "--admin");
        keep!(backlog, "backlog");
        keep!(max_connections, "--max-connections");
        keep!(limits.max_head_bytes, "--max-head-bytes");
        keep!(access_log_format, "--access-log-format");
        keep!(stats_log, "--stats-log");
        keep!(stats_interval, "--stats-interval");
        if new.access_log.is_some() != self.access_log.is_some() {
            new.access_log = self.access_log.clone();
            kept.push("--access-log (turning it on or off)");
        }
        if new.error_log.path.is_some() != self.error_log.path.is_some() {
            new.error_log.path = self.error_log.path.clone();
            kept.push("--error-log (between stderr and a file)");
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_view_sees_each_replacement_once() {
        let live = Live::new(Arc::new(1));
        let mut view = live.view();
        assert_eq!(view.changed(), None);
        live.replace(2);
        assert_eq!(view.changed().as_deref(), Some(&2));
        assert_eq!(view.changed(), None);
        assert_eq!(*live.current(), 2);
    }

    #[test]
    fn what_cannot_change_live_is_kept_and_named() {
        let old = RuntimeConfig::new("127.0.0.1:8080".parse().unwrap());
        let mut new = old.clone();
        new.listen = "127.0.0.1:9090".parse().unwrap();
        new.workers = old.workers + 1;
        new.idle_timeout = Duration::from_secs(5);
        new.stats_interval = Duration::from_secs(7);
        new.error_log.path = Some("/var/log/coldwire/error.log".into());
        new.error_log.level = crate::error_log::Level::Debug;
        let kept = old.keep_fixed(&mut new);
        assert_eq!(
            kept,
            [
                "--listen",
                "--workers",
                "--stats-interval",
                "--error-log (between stderr and a file)"
            ]
        );
        assert_eq!(new.error_log.path, None);
        assert_eq!(new.error_log.level, crate::error_log::Level::Debug);
        assert_eq!(new.listen, old.listen);
        assert_eq!(new.workers, old.workers);
        assert_eq!(new.idle_timeout, Duration::from_secs(5));
    }
}
