//! `series.csv`: every point of every figure, one row each, with the axes' labels and
//! units on every row so a row means something on its own (and a spreadsheet filter on
//! `figure` gives one plot's data). RFC 4180 quoting.

use std::fmt::Write as _;

use crate::model::ExperimentRecord;

/// The header row of `series.csv`.
pub const CSV_HEADER: &str = "figure,series,x,y,x_label,x_unit,y_label,y_unit";

/// `series.csv` for `record`: [`CSV_HEADER`], then one row per point in figure, series
/// and point order. Values are written exactly (Rust's shortest round-trip form);
/// non-finite values are written as `NaN`, `inf` or `-inf`.
pub fn series_csv(record: &ExperimentRecord) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    for figure in &record.figures {
        for series in &figure.series {
            for point in &series.points {
                let fields = [
                    quote(&figure.id),
                    quote(&series.name),
                    point.x.to_string(),
                    point.y.to_string(),
                    quote(&figure.x.label),
                    quote(&figure.x.unit),
                    quote(&figure.y.label),
                    quote(&figure.y.unit),
                ];
                let _ = writeln!(out, "{}", fields.join(","));
            }
        }
    }
    out
}

/// Quotes a field when it holds a comma, a quote or a line break (quotes doubled).
pub fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn quotes_only_when_needed() {
        assert_eq!(quote("epoll"), "epoll");
        assert_eq!(quote("a,b"), "\"a,b\"");
        assert_eq!(quote("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
