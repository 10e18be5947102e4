//! `summary.md`: one experiment for a person reading the results directory on GitHub or
//! in a terminal — what it reproduces, how to re-run it, the machine, the parameters, the
//! findings and how they compare with the seed, the tables, links to the figures, and the
//! warnings.

use std::fmt::Write as _;

use crate::model::{ExperimentRecord, MachineRecord, Table};
use crate::time::utc_time;

/// The figure's path relative to the experiment directory, without extension.
pub fn figure_stem(id: &str) -> String {
    format!("figures/{id}")
}

/// `summary.md` for `record`; `warnings` are the record's own followed by the renderer's.
pub fn summary_markdown(record: &ExperimentRecord, warnings: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", record.title);
    if record.quick {
        out.push_str(
            "**Quick run** (`--quick`): scaled down to prove the pipeline end to end; the \
             numbers are not a measurement.\n\n",
        );
    }
    if !record.reproduces.is_empty() {
        let _ = writeln!(out, "Reproduces: {}.\n", record.reproduces.join("; "));
    }
    if !record.description.trim().is_empty() {
        let _ = writeln!(out, "{}\n", record.description.trim());
    }
    out.push_str("## How to reproduce\n\n```sh\n");
    let _ = writeln!(out, "{}", shell_words(&record.command));
    out.push_str("```\n\n");
    let _ = writeln!(
        out,
        "Started {}, took {:.1} s{}.\n",
        utc_time(record.started_unix_seconds),
        record.duration_seconds,
        record
            .commit
            .as_ref()
            .map_or(String::new(), |commit| format!(", at commit {commit}"))
    );
    out.push_str("## Machine\n\n");
    out.push_str(&markdown_table(&machine_table(&record.machine)));
    out.push_str("\n## Parameters\n\n```json\n");
    let parameters =
        serde_json::to_string_pretty(&record.parameters).unwrap_or_else(|_| "null".to_string());
    let _ = writeln!(out, "{parameters}");
    out.push_str("```\n\n");
    bullet_section(&mut out, "Findings", &record.findings);
    bullet_section(&mut out, "Compared with the seed", &record.seed_comparison);
    for table in &record.tables {
        let _ = writeln!(out, "## {}\n", table.title);
        out.push_str(&markdown_table(table));
        out.push('\n');
    }
    if !record.figures.is_empty() {
        out.push_str("## Figures\n\n");
        for figure in &record.figures {
            let stem = figure_stem(&figure.id);
            let _ = write!(
                out,
                "### {}\n\n![{}]({stem}.svg)\n\n",
                figure.title, figure.title
            );
            if let Some(seed) = &figure.reproduces {
                let _ = writeln!(out, "Reproduces {seed}.");
            }
            if let Some(caption) = &figure.caption {
                let _ = writeln!(out, "{caption}");
            }
            let _ = writeln!(out, "([SVG]({stem}.svg), [PNG]({stem}.png))\n");
        }
    }
    if !record.raw_files.is_empty() {
        out.push_str(
            "## Raw data\n\n`series.csv` (every plotted point), `experiment.json` (this record)",
        );
        for file in &record.raw_files {
            let _ = write!(out, ", [`{file}`]({file})");
        }
        out.push_str(".\n\n");
    }
    bullet_section(&mut out, "Warnings", warnings);
    out
}

/// The command as one line a shell accepts: arguments with special characters quoted.
pub fn shell_words(command: &[String]) -> String {
    command
        .iter()
        .map(|word| {
            let plain = !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
            if plain {
                word.clone()
            } else {
                format!("'{}'", word.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The machine as a two-column table (also used by the HTML report).
pub fn machine_table(machine: &MachineRecord) -> Table {
    let row = |name: &str, value: String| vec![name.to_string(), value];
    Table {
        title: "Machine".to_string(),
        columns: vec!["property".to_string(), "value".to_string()],
        rows: vec![
            row("label", machine.label.clone()),
            row("hostname", machine.hostname.clone()),
            row("kernel", machine.kernel.clone()),
            row("CPUs", machine.cpus.to_string()),
            row("CPU model", machine.cpu_model.clone()),
            row(
                "memory",
                format!(
                    "{:.1} GiB",
                    machine.memory_bytes as f64 / f64::from(1u32 << 30)
                ),
            ),
            row("open-files limit", machine.open_files_limit.to_string()),
        ],
    }
}

fn bullet_section(out: &mut String, heading: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(out, "## {heading}\n");
    for item in items {
        let _ = writeln!(out, "- {}", item.replace('\n', " "));
    }
    out.push('\n');
}

/// A GitHub-flavoured markdown table; `|` in cells escaped, line breaks flattened.
pub fn markdown_table(table: &Table) -> String {
    let cell = |text: &str| text.replace('|', r"\|").replace(['\n', '\r'], " ");
    let width = table
        .rows
        .iter()
        .map(Vec::len)
        .chain([table.columns.len()])
        .max()
        .unwrap_or(0);
    let line = |cells: &[String]| {
        let mut text = String::from("|");
        for index in 0..width {
            let value = cells.get(index).map(String::as_str).unwrap_or("");
            let _ = write!(text, " {} |", cell(value));
        }
        text.push('\n');
        text
    };
    let mut out = line(&table.columns);
    out.push('|');
    out.push_str(&" --- |".repeat(width));
    out.push('\n');
    for row in &table.rows {
        out.push_str(&line(row));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_quotes_what_a_shell_would_split() {
        let command = [
            "coldwire",
            "experiment",
            "cold-scaling",
            "--out",
            "my dir",
            "it's",
        ]
        .map(String::from);
        assert_eq!(
            shell_words(&command),
            r"coldwire experiment cold-scaling --out 'my dir' 'it'\''s'"
        );
    }

    #[test]
    fn markdown_table_escapes_pipes_and_pads_short_rows() {
        let table = Table {
            title: "t".into(),
            columns: vec!["backend".into(), "req/s".into()],
            rows: vec![vec!["a|b".into()]],
        };
        assert_eq!(
            markdown_table(&table),
            "| backend | req/s |\n| --- | --- |\n| a\\|b |  |\n"
        );
    }
}
