//! How `coldwire top` draws a [`View`] with ratatui: a header line, a block of the
//! server's numbers, and a table with one row per worker. Drawn the same on a terminal
//! and on ratatui's test backend (`--once`, and the tests).

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};

use super::model::View;

/// `1.23 ms`, `4.6 s`, or `–` when unknown. A quantile inside the histogram's first
/// bucket is shown as `≤100 µs`: the histogram cannot tell more (responses answered within
/// one loop turn count 0).
pub fn duration(seconds: Option<f64>) -> String {
    match seconds {
        None => "–".into(),
        Some(seconds) if seconds <= 0.000_1 => "≤100 µs".into(),
        Some(seconds) if seconds < 0.001 => format!("{:.0} µs", seconds * 1e6),
        Some(seconds) if seconds < 1.0 => format!("{:.2} ms", seconds * 1e3),
        Some(seconds) => format!("{seconds:.2} s"),
    }
}

fn number(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "–".into(), |value| format!("{value:.digits$}"))
}

fn pair<'a>(label: &'a str, value: String) -> Vec<Span<'a>> {
    vec![
        Span::styled(
            format!("{label:>18} "),
            Style::new().add_modifier(Modifier::DIM),
        ),
        Span::styled(
            format!("{value:<22}"),
            Style::new().add_modifier(Modifier::BOLD),
        ),
    ]
}

/// Draws `view` over the whole frame (`status` is the bottom line: how to quit, or an
/// error from the last poll).
pub fn draw(frame: &mut Frame, view: &View, status: &str) {
    let [header, numbers, workers, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(5),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled("coldwire top ", Style::new().add_modifier(Modifier::BOLD)),
            Span::raw(format!(
                "{} — {}, {} worker(s), up {:.0} s",
                view.server,
                view.backend,
                view.workers.len(),
                view.uptime_seconds
            )),
        ])),
        header,
    );
    let hits = if view.has_cache {
        view.hit_ratio
            .map_or_else(|| "–".into(), |ratio| format!("{:.1} %", ratio * 100.0))
    } else {
        "no cache".into()
    };
    let rows = vec![
        Line::from(
            [
                pair("requests/s", format!("{:.0}", view.rate)),
                pair("CPU (cores)", format!("{:.2}", view.cpu_cores)),
            ]
            .concat(),
        ),
        Line::from(
            [
                pair(
                    "p50 / p99",
                    format!("{} / {}", duration(view.p50), duration(view.p99)),
                ),
                pair("syscalls/request", number(view.syscalls_per_request, 2)),
            ]
            .concat(),
        ),
        Line::from(
            [
                pair(
                    "open/active/cold",
                    format!(
                        "{} / {} / {}",
                        view.open,
                        view.active,
                        view.open.saturating_sub(view.active)
                    ),
                ),
                pair("cache hit ratio", hits),
            ]
            .concat(),
        ),
    ];
    frame.render_widget(
        Paragraph::new(rows).block(Block::new().borders(Borders::TOP | Borders::BOTTOM)),
        numbers,
    );
    let table = Table::new(
        view.workers.iter().enumerate().map(|(index, worker)| {
            Row::new(vec![
                index.to_string(),
                format!("{:.0}", worker.rate),
                worker.open.to_string(),
                worker.active.to_string(),
                worker.open.saturating_sub(worker.active).to_string(),
                number(worker.syscalls_per_request, 2),
                number(worker.waits_per_request, 2),
            ])
        }),
        [
            Constraint::Length(7),
            Constraint::Length(11),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(17),
            Constraint::Length(14),
        ],
    )
    .header(
        Row::new(vec![
            "worker",
            "requests/s",
            "open",
            "active",
            "cold",
            "syscalls/request",
            "waits/request",
        ])
        .style(Style::new().add_modifier(Modifier::BOLD)),
    );
    frame.render_widget(table, workers);
    frame.render_widget(
        Paragraph::new(status.to_owned()).style(Style::new().add_modifier(Modifier::DIM)),
        footer,
    );
}

/// A rendered buffer as plain text, one line per row, trailing spaces removed.
pub fn buffer_text(buffer: &Buffer) -> String {
    let width = usize::from(buffer.area.width.max(1));
    let mut text = String::new();
    for row in buffer.content().chunks(width) {
        let line: String = row.iter().map(|cell| cell.symbol()).collect();
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}
