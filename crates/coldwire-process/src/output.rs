//! A child's output, read by helper threads so the child never blocks on a full pipe:
//! stdout as a channel of lines (to wait for a ready line), stderr as the tail of its last
//! lines (for error messages).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Mutex, mpsc};

/// Sends every line `reader` produces; the channel disconnects at end of stream.
pub(crate) fn lines(reader: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(reader).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

/// The last `limit` lines a reader produced, collected by a thread.
#[derive(Clone, Default)]
pub(crate) struct Tail(Arc<Mutex<VecDeque<String>>>);

impl Tail {
    /// Starts collecting the last `limit` lines of `reader`.
    pub(crate) fn collect(reader: impl Read + Send + 'static, limit: usize) -> Tail {
        let tail = Tail::default();
        let lines = tail.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(reader).lines().map_while(Result::ok) {
                let mut kept = lines
                    .0
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                if kept.len() >= limit {
                    kept.pop_front();
                }
                if limit > 0 {
                    kept.push_back(line);
                }
            }
        });
        tail
    }

    /// The lines kept so far, joined with newlines.
    pub(crate) fn text(&self) -> String {
        let kept = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        kept.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}
