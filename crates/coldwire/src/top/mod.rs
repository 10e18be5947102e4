//! `coldwire top ADMIN_ADDR`: a live terminal view of a running server, from its admin
//! listener's `/stats` (docs/metrics.md): requests/s, p50/p99 from the response-time
//! histograms, cache hit ratio, connections open/active/cold, CPU, syscalls per request,
//! and the same per worker. Refreshes every `--interval` until `q`, Esc or Ctrl-C.
//! `--once` prints one frame as text (no terminal needed: scripts, tests, a pipe).

mod model;
mod view;

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyModifiers};

use crate::runtime_args::{parse_duration, positive};
use model::{StatsDocument, View};

/// `coldwire top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// The server's admin address (its --admin): HOST:PORT, or http://HOST:PORT.
    #[arg(value_name = "ADMIN_ADDR")]
    pub admin: String,
    /// Time between refreshes (each frame shows what happened in the last one).
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = parse_duration)]
    pub interval: Duration,
    /// Print one frame as text after one interval and exit (no terminal needed).
    #[arg(long)]
    pub once: bool,
    /// With --once: the frame's width in columns.
    #[arg(long, default_value_t = 100, value_name = "COLUMNS")]
    pub width: u16,
}

/// The `/stats` URL of an admin address.
fn stats_url(admin: &str) -> String {
    let address = admin
        .trim()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .trim_end_matches("/stats");
    format!("http://{address}/stats")
}

fn fetch(url: &str) -> anyhow::Result<StatsDocument> {
    let body = coldwire_bench::server_stats::fetch(url).map_err(top_error)?;
    serde_json::from_str(&body).with_context(|| {
        format!("{url} is not coldwire's stats JSON (schema 2): is ADMIN_ADDR a coldwire --admin address?")
    })
}

/// The bench's error for an unreadable stats endpoint names the bench's flag; `top`'s
/// names its own argument.
fn top_error(error: coldwire_bench::BenchError) -> anyhow::Error {
    match error {
        coldwire_bench::BenchError::ServerStats { url, reason } => anyhow::anyhow!(
            "cannot read server statistics from {url}: {reason} — ADMIN_ADDR is the address \
             the server was given with --admin (it prints `stats on http://ADDR/stats` at \
             start), not its --listen address"
        ),
        other => other.into(),
    }
}

/// Runs `coldwire top`.
pub fn run(arguments: TopArgs) -> anyhow::Result<()> {
    let interval = positive(arguments.interval, "--interval")?;
    let url = stats_url(&arguments.admin);
    let server = url
        .trim_start_matches("http://")
        .trim_end_matches("/stats")
        .to_owned();
    let first = fetch(&url)?;
    if arguments.once {
        std::thread::sleep(interval);
        let second = fetch(&url)?;
        let view = View::between(&server, &first, &second);
        let height = 9 + u16::try_from(view.workers.len()).unwrap_or(u16::MAX - 9);
        print!("{}", render_text(&view, arguments.width.max(40), height)?);
        return Ok(());
    }
    live(&url, &server, first, interval)
}

/// One frame drawn on ratatui's test backend, as text.
pub fn render_text(view: &View, width: u16, height: u16) -> anyhow::Result<String> {
    let mut terminal = Terminal::new(TestBackend::new(width, height))?;
    terminal.draw(|frame| view::draw(frame, view, ""))?;
    Ok(view::buffer_text(terminal.backend().buffer()))
}

/// The interactive loop on the terminal (alternate screen, raw mode, restored on exit).
fn live(url: &str, server: &str, first: StatsDocument, interval: Duration) -> anyhow::Result<()> {
    let mut terminal = ratatui::try_init()
        .context("cannot set up the terminal (for a pipe or a script, use --once)")?;
    let outcome = (|| -> anyhow::Result<()> {
        let mut previous = first;
        let mut view = View::between(server, &previous, &previous);
        let mut status = "q: quit".to_owned();
        let mut next = Instant::now() + interval;
        loop {
            terminal.draw(|frame| view::draw(frame, &view, &status))?;
            let wait = next.saturating_duration_since(Instant::now());
            if event::poll(wait)? {
                if let Event::Key(key) = event::read()? {
                    let quit = matches!(key.code, KeyCode::Char('q') | KeyCode::Esc)
                        || (key.code == KeyCode::Char('c')
                            && key.modifiers.contains(KeyModifiers::CONTROL));
                    if quit {
                        return Ok(());
                    }
                }
                continue;
            }
            next = Instant::now() + interval;
            match fetch(url) {
                Ok(now) => {
                    view = View::between(server, &previous, &now);
                    previous = now;
                    status = "q: quit".into();
                }
                Err(error) => status = format!("{error:#} (retrying; q: quit)"),
            }
        }
    })();
    ratatui::try_restore()?;
    outcome
}

#[cfg(test)]
mod tests;
