//! A whole trace from its text: the format named or detected from the first record line,
//! every line parsed, malformed ones counted (with the first few kept to show the user),
//! blank lines and `#` comments skipped, and the records put in time order (stable: lines
//! with the same timestamp keep their logged order, so a client's order survives).

use std::fmt;
use std::str::FromStr;

use super::{Record, clf, squid};

/// How many malformed lines a [`Trace`] keeps as examples.
pub const MALFORMED_EXAMPLES: usize = 5;

/// The access-log formats read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// Common Log Format, plain or combined (Apache, nginx, the NASA logs).
    Clf,
    /// Squid's native `access.log`.
    Squid,
}

impl TraceFormat {
    /// The format of a log whose first record line is `line`.
    pub fn detect(line: &str) -> TraceFormat {
        if squid::looks_like(line) {
            TraceFormat::Squid
        } else {
            TraceFormat::Clf
        }
    }

    /// Its name (`clf`, `squid`).
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Clf => "clf",
            TraceFormat::Squid => "squid",
        }
    }

    fn parse_line(self, line: &str) -> Result<Record, &'static str> {
        match self {
            TraceFormat::Clf => clf::parse_line(line),
            TraceFormat::Squid => squid::parse_line(line),
        }
    }
}

impl FromStr for TraceFormat {
    type Err = String;

    fn from_str(text: &str) -> Result<TraceFormat, String> {
        match text {
            "clf" | "combined" | "common" => Ok(TraceFormat::Clf),
            "squid" => Ok(TraceFormat::Squid),
            other => Err(format!(
                "unknown trace format `{other}`: expected clf (Common Log Format, plain or combined) or squid (Squid's native access.log)"
            )),
        }
    }
}

/// A malformed line: where and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed {
    /// Its line number (from 1).
    pub line: u64,
    /// What was wrong.
    pub reason: &'static str,
}

impl fmt::Display for Malformed {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "line {}: {}", self.line, self.reason)
    }
}

/// A parsed trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// The format read (`None` for a trace with no record line).
    pub format: Option<TraceFormat>,
    /// The records, in time order (ties in logged order).
    pub records: Vec<Record>,
    /// Lines that held no record.
    pub malformed: u64,
    /// The first [`MALFORMED_EXAMPLES`] of them.
    pub malformed_examples: Vec<Malformed>,
}

impl Trace {
    /// A one-line account of what was skipped (for users), empty when nothing was.
    pub fn malformed_summary(&self) -> String {
        if self.malformed == 0 {
            return String::new();
        }
        let examples: Vec<String> = self
            .malformed_examples
            .iter()
            .map(ToString::to_string)
            .collect();
        format!(
            "{} malformed line(s) skipped ({}{})",
            self.malformed,
            examples.join("; "),
            if self.malformed > self.malformed_examples.len() as u64 {
                "; ..."
            } else {
                ""
            }
        )
    }
}

/// Parses `text` as `format` (or the format of its first record line when `None`).
pub fn parse_trace(text: &str, format: Option<TraceFormat>) -> Trace {
    let mut trace = Trace {
        format,
        ..Trace::default()
    };
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let format = *trace
            .format
            .get_or_insert_with(|| TraceFormat::detect(line));
        match format.parse_line(line) {
            Ok(record) => trace.records.push(record),
            Err(reason) => {
                trace.malformed += 1;
                if trace.malformed_examples.len() < MALFORMED_EXAMPLES {
                    trace.malformed_examples.push(Malformed {
                        line: index as u64 + 1,
                        reason,
                    });
                }
            }
        }
    }
    trace.records.sort_by_key(|record| record.time_ms);
    trace
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CLF: &str = "\
# a comment
a - - [01/Jul/1995:00:00:02 -0400] \"GET /two HTTP/1.0\" 200 2

a - - [01/Jul/1995:00:00:01 -0400] \"GET /one HTTP/1.0\" 200 1
garbage line
b - - [01/Jul/1995:00:00:02 -0400] \"GET /three HTTP/1.0\" 200 3
";

    #[test]
    fn records_come_in_time_order_and_malformed_lines_are_counted() {
        let trace = parse_trace(CLF, None);
        assert_eq!(trace.format, Some(TraceFormat::Clf));
        let urls: Vec<&str> = trace.records.iter().map(|r| r.url.as_str()).collect();
        assert_eq!(urls, ["/one", "/two", "/three"]);
        assert_eq!(trace.malformed, 1);
        assert_eq!(
            trace.malformed_examples,
            [Malformed {
                line: 5,
                reason: "no [timestamp]"
            }]
        );
        assert!(trace.malformed_summary().contains("line 5"));
    }

    #[test]
    fn squid_is_detected() {
        let text = "1066036250.618 340 1.2.3.4 TCP_MISS/200 1514 GET http://h/a - DIRECT/h text/html\n\
                    1066036250.100 10 1.2.3.5 TCP_HIT/200 99 GET http://h/b - NONE/- text/html\n\
                    oops\n";
        let trace = parse_trace(text, None);
        assert_eq!(trace.format, Some(TraceFormat::Squid));
        assert_eq!(trace.records.len(), 2);
        assert_eq!(trace.records[0].path(), "/b");
        assert_eq!(trace.malformed, 1);
        // Named explicitly, a Squid log read as CLF is all malformed, not a panic.
        let wrong = parse_trace(text, Some(TraceFormat::Clf));
        assert_eq!((wrong.records.len(), wrong.malformed), (0, 3));
        assert_eq!("squid".parse(), Ok(TraceFormat::Squid));
        assert!("apache".parse::<TraceFormat>().is_err());
    }

    proptest! {
        #[test]
        fn any_text_parses_without_panic(text in "\\PC{0,200}", squid in any::<bool>()) {
            let format = if squid { TraceFormat::Squid } else { TraceFormat::Clf };
            let trace = parse_trace(&text, Some(format));
            let lines = text.lines().filter(|l| !l.trim().is_empty()).count() as u64;
            prop_assert!(trace.records.len() as u64 + trace.malformed <= lines);
        }

        #[test]
        fn generated_clf_lines_round_trip(
            client in "[a-z0-9.]{1,20}",
            seconds in 0i64..4_000_000_000,
            path in "/[a-zA-Z0-9/._~-]{0,40}",
            status in 100u16..600,
            size in any::<u32>(),
        ) {
            let line = format!(
                "{client} - - [{}] \"GET {path} HTTP/1.0\" {status} {size}",
                super::super::time::format_clf_time(seconds, -240)
            );
            let record = clf::parse_line(&line).map_err(TestCaseError::fail)?;
            prop_assert_eq!(record.time_ms, seconds * 1000);
            prop_assert_eq!(record.client, client);
            prop_assert_eq!(record.url, path);
            prop_assert_eq!((record.status, record.size), (status, u64::from(size)));
        }
    }
}
