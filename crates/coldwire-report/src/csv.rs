//! `series.csv`: every point of every figure, one row each, with the axes' labels and
//! units on every row so a row means something on its own (and a spreadsheet filter on
//! `figure` gives one plot's data). RFC 4180 quoting.

use crate::model::ExperimentRecord;

/// The header row of `series.csv`.
pub const CSV_HEADER: &str = "figure,series,x,y,x_label,x_unit,y_label,y_unit";

/// `series.csv` for `record`: [`CSV_HEADER`], then one row per point in figure, series
/// and point order, written by the `csv` crate (RFC 4180 quoting: a field is quoted only
/// when it holds a comma, a quote or a line break). Values are written exactly (Rust's
/// shortest round-trip form); non-finite values are written as `NaN`, `inf` or `-inf`.
pub fn series_csv(record: &ExperimentRecord) -> String {
    let mut writer = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    let _ = writer.write_record(CSV_HEADER.split(','));
    for figure in &record.figures {
        for series in &figure.series {
            for point in &series.points {
                let _ = writer.write_record([
                    figure.id.as_str(),
                    series.name.as_str(),
                    &point.x.to_string(),
                    &point.y.to_string(),
                    figure.x.label.as_str(),
                    figure.x.unit.as_str(),
                    figure.y.label.as_str(),
                    figure.y.unit.as_str(),
                ]);
            }
        }
    }
    // Writing to a Vec cannot fail; the fields are UTF-8, so the output is.
    let bytes = writer.into_inner().unwrap_or_default();
    String::from_utf8(bytes).unwrap_or_default()
}

/// One field as `series.csv` writes it (quoted, quotes doubled, only when needed).
pub fn quote(field: &str) -> String {
    let mut writer = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    let _ = writer.write_field(field);
    let _ = writer.write_record(None::<&[u8]>);
    let bytes = writer.into_inner().unwrap_or_default();
    String::from_utf8(bytes)
        .unwrap_or_default()
        .trim_end_matches('\n')
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn quotes_only_when_needed() {
        assert_eq!(quote("epoll"), "epoll");
        assert_eq!(quote("a,b"), "\"a,b\"");
        assert_eq!(quote("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(quote("two\nlines"), "\"two\nlines\"");
    }
}
