//! The population engine's seam: a load made of **users**, each with its own connections
//! and its own sequence of requests — PolyMix's robots (`crate::workload::polymix`), a
//! trace's clients (`--replay`) — rather than one arrival stream over a shared pool.
//!
//! A [`Population`] says, per user: when its next request is due
//! ([`Population::next_arrival`]: a Poisson stream, a logged timestamp, …), what it asks
//! ([`Population::request`]), from which source address it connects
//! ([`Population::source`]), how many connections it may hold open at once and how many
//! requests each may carry ([`Population::connection_limits`]); and, over time, how many
//! users are active ([`Population::active_users`]: a phase schedule's ramp and decline).
//! The engine ([`engine::PopulationEngine`]) keeps each user's connections (persistent,
//! reused in that user's own order; a request waits in its user's queue while all of its
//! connections are busy), sends, reads, classifies and verifies the responses
//! ([`inspect`]), and records per phase ([`recorder`]).
//!
//! Users are numbered `0..`; user `i` is active while `i < active_users(now)`, so growing
//! and shrinking a population is one number. A user whose next arrival is `None` is done
//! (a replayed client at the end of its log); when every user is done and nothing is
//! outstanding, the phase ends early.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::schedule::Random;

mod connections;
pub mod engine;
pub mod inspect;
pub mod recorder;
pub mod run;
pub mod summary;

pub use engine::{PopulationConfig, PopulationEngine};
pub use recorder::{PopulationPhase, PopulationRecorder};

/// One request a user makes.
#[derive(Clone, Debug)]
pub struct UserRequest {
    /// Index into [`Population::endpoints`]: where its connection goes.
    pub endpoint: usize,
    /// The bytes to send (the whole request, body included).
    pub bytes: Bytes,
    /// The request is `HEAD` (its response has no body).
    pub head_request: bool,
    /// The object the response must carry (`X-Coldwire-Object`'s id), when known: a
    /// response naming another object is an integrity failure.
    pub expected_object: Option<u64>,
    /// Counted in the hit ratios (Polygraph counts basic `GET`s answered `200` only).
    pub basic: bool,
    /// The workload offers this request as a hit (a repeat of a cachable object).
    pub offered_hit: bool,
    /// The workload's kind of request, an index into [`Population::request_kinds`].
    pub kind: usize,
}

/// What became of a request (told to [`Population::completed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completed {
    /// The user.
    pub user: usize,
    /// Its status, or `None` when it failed without a response.
    pub status: Option<u16>,
    /// The response was a cache hit (`Cache-Status`).
    pub hit: bool,
    /// Body bytes received.
    pub body_bytes: u64,
}

/// A population of users for the engine (see the module documentation).
pub trait Population {
    /// The addresses connections go to (at least one).
    fn endpoints(&self) -> &[SocketAddr];

    /// How many users there can be (the most that are ever active).
    fn users(&self) -> usize;

    /// Phase `phase` begins at `at` (a workload whose behaviour changes with the phase —
    /// recurrence, a working set that stops growing — takes note).
    fn phase_started(&mut self, _phase: usize, _at: Instant) {}

    /// How many users are active at `elapsed` into phase `phase` (users `0..n`).
    fn active_users(&self, phase: usize, elapsed: Duration) -> usize;

    /// The user's next request after one intended at `after` (or, for a user just
    /// activated, after the moment it was activated, `first` true); `None`: it has no more.
    fn next_arrival(
        &mut self,
        user: usize,
        after: Instant,
        first: bool,
        random: &mut Random,
    ) -> Option<Instant>;

    /// The request user `user` makes now (its intended start was `intended`); `close`
    /// asks for `Connection: close` (the last request its connection carries).
    fn request(
        &mut self,
        user: usize,
        intended: Instant,
        close: bool,
        random: &mut Random,
    ) -> UserRequest;

    /// A request ended (response or failure): a workload that learns (recurrence of what
    /// was fetched, a trace's order) hears about it here.
    fn completed(&mut self, _completed: &Completed) {}

    /// The user's source address (bound before connecting), if it has its own.
    fn source(&self, user: usize) -> Option<IpAddr>;

    /// Most connections the user holds open at once, and the number of requests a new
    /// connection carries before it closes (0: unlimited), drawn per connection.
    fn connection_limits(&mut self, user: usize, random: &mut Random) -> (usize, u64);

    /// Names of the workload's kinds of request (reported with their counts).
    fn request_kinds(&self) -> &[&'static str];

    /// A closed loop: the user's next arrival is asked for when its previous request ends
    /// (a response, or a failure), not when it is made — each user then has one request
    /// at a time and goes as fast as the server answers (`--replay-connections`). The
    /// default, an open loop, asks as soon as a request is made.
    fn closed_loop(&self) -> bool {
        false
    }
}
