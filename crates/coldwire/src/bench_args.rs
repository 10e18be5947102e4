//! What `coldwire bench`'s flags turn into besides the load itself: the parsers of its
//! human values (percentages, milliseconds-or-units), the request options (`-m`, `-H`,
//! `--body`, `--body-file`), the thresholds (`--max-error-rate`, `--p50` … `--p999`), the
//! line describing the run before it starts, and the exit statuses in `--help`.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use coldwire_bench::thresholds::{Percentile, Thresholds};
use coldwire_bench::{Arrivals, BenchPlan, LoadConfig, Rate, RequestOptions};

use crate::bench::BenchArgs;
use crate::runtime_args::parse_duration;

/// The end of `coldwire bench --help`: examples and exit statuses.
pub const AFTER_HELP: &str = "\
Examples:
  coldwire bench                                   built-in scenario (starts its own server)
  coldwire bench -c 100 -d 30s -R 2000 http://127.0.0.1:8080/index.html
  coldwire bench -m POST -H 'Content-Type: application/json' --body '{}' http://127.0.0.1:8080/api
  coldwire bench -k --p99 20ms https://127.0.0.1:8443/
  coldwire bench --rate max -d 10s http://127.0.0.1:8080/   closed loop, as wrk
  coldwire bench -n 10000 -c 50 http://127.0.0.1:8080/     exactly 10,000 requests, as ab

Exit status:
  0   the run completed and every threshold held
  1   the run could not be done (a host that does not resolve, a --spawn server
      that did not start, too few descriptors, ...); the message says what to do
  64  the command line is wrong (EX_USAGE, as every coldwire subcommand)
  99  a threshold failed: errors above --max-error-rate (1% by default) or a
      latency above --p50/--p90/--p99/--p999 (not checked with --saturate)";

/// A share of requests: `1%`, `0.5%`, or a plain number read as a percentage (`0.5` is
/// half a percent). Returns a fraction (0–1).
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%').trim();
    match number.parse::<f64>() {
        Ok(percent) if (0.0..=100.0).contains(&percent) => Ok(percent / 100.0),
        _ => Err(format!(
            "{text:?} is not a percentage from 0 to 100: write e.g. 1%, 0.5% or 100%"
        )),
    }
}

/// A duration with a unit (`80ms`, `1s`), or a plain number of **milliseconds** (the unit
/// these flags had before units were accepted, so existing command lines keep their
/// meaning).
pub fn parse_millis(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if let Ok(millis) = trimmed.parse::<f64>() {
        return Duration::try_from_secs_f64(millis / 1000.0).map_err(|_| {
            format!("{text:?} is not a duration: a number of milliseconds must be 0 or more")
        });
    }
    parse_duration(trimmed)
}

/// A duration as [`parse_duration`] reads it (a plain number is seconds), in seconds.
pub fn parse_seconds(text: &str) -> Result<f64, String> {
    parse_duration(text).map(|duration| duration.as_secs_f64())
}

/// A duration as [`parse_millis`] reads it (a plain number is milliseconds), in
/// milliseconds.
pub fn parse_milliseconds(text: &str) -> Result<f64, String> {
    parse_millis(text).map(|duration| duration.as_secs_f64() * 1000.0)
}

/// The method, header fields and body of every request.
pub fn request_options(arguments: &BenchArgs) -> anyhow::Result<RequestOptions> {
    let body = match (&arguments.body, &arguments.body_file) {
        (Some(text), _) => Bytes::from(text.clone().into_bytes()),
        (None, Some(path)) => Bytes::from(std::fs::read(path).with_context(|| {
            format!(
                "cannot read --body-file {} — check the path and that it is readable",
                path.display()
            )
        })?),
        (None, None) => Bytes::new(),
    };
    let options = RequestOptions {
        method: arguments.method.to_ascii_uppercase(),
        headers: arguments.headers.clone(),
        body,
    };
    options.validate()?;
    Ok(options)
}

/// The run's objectives.
pub fn thresholds(arguments: &BenchArgs) -> Thresholds {
    let latency = [
        (Percentile::P50, arguments.p50),
        (Percentile::P90, arguments.p90),
        (Percentile::P99, arguments.p99),
        (Percentile::P999, arguments.p999),
    ]
    .into_iter()
    .filter_map(|(percentile, bound)| bound.map(|bound| (percentile, bound)))
    .collect();
    Thresholds {
        max_error_rate: arguments.max_error_rate,
        latency,
    }
}

/// A request count (`-n`) runs one phase against the URLs given: not with the modes that
/// plan their own phases (built-in scenario, `--saturate`, `--replay`, PolyMix).
pub fn check_request_count(arguments: &BenchArgs) -> anyhow::Result<()> {
    let Some(requests) = arguments.requests else {
        return Ok(());
    };
    let conflict = if requests == 0 {
        Some("-n 0: give at least one request (-n 1000)".to_owned())
    } else if arguments.saturate {
        Some(format!(
            "-n {requests} with --saturate: the saturation steps last -d each; drop one of them"
        ))
    } else if arguments.replay.is_some() || arguments.workload != "urls" {
        Some(format!(
            "-n {requests}: a replay or a --workload other than urls runs for a duration (-d); \
             drop -n"
        ))
    } else if arguments.urls.is_empty() && arguments.positional_urls.is_empty() {
        Some(format!(
            "-n {requests}: give the target URL (coldwire bench -n {requests} \
             http://HOST:PORT/PATH); the built-in scenario has phases of its own"
        ))
    } else {
        None
    };
    match conflict {
        Some(message) => Err(crate::exit_status::usage(anyhow::anyhow!(message))),
        None => Ok(()),
    }
}

/// The flags of other load testers that coldwire bench accepts but reads differently:
/// `-t N` (wrk's threads) runs, with a note on stderr that the generator is one thread
/// and, without `-R`, not wrk's closed loop.
pub fn check_habits(arguments: &BenchArgs) -> anyhow::Result<()> {
    // `-q 100` (oha's and hey's rate) makes `100` a URL here: say where the rate goes.
    if let Some(number) = arguments
        .urls
        .iter()
        .chain(&arguments.positional_urls)
        .find(|url| url.parse::<f64>().is_ok())
    {
        return Err(crate::exit_status::usage(anyhow::anyhow!(
            "`{number}` is not a URL: -q is --quiet here; the rate is -R {number} (wrk2's), \
             the URL comes as http://HOST:PORT/PATH"
        )));
    }
    if let Some(threads) = arguments.threads
        && threads != 1
    {
        // The built-in scenario (no URL) has rates of its own.
        let closed_loop = match arguments.rate {
            None if !arguments.urls.is_empty() && arguments.requests.is_none() => {
                " Without -R it offers 1,000 requests/s (open loop): add -R max for wrk's \
                 closed loop."
            }
            _ => "",
        };
        let note = format!(
            "coldwire bench: note: -t {threads} is ignored: the generator is one event loop \
             on one thread (tens of thousands of requests/s on a core; for more, run one \
             instance per core).{closed_loop}"
        );
        let _ = std::io::stderr()
            .lock()
            .write_all(coldwire_bench::table::wrap(&note, 2).as_bytes());
    }
    Ok(())
}

/// wrk's and ab's way of asking for a connection per request, `-H 'Connection: close'`,
/// becomes `--requests-per-connection 1` (the generator writes the field itself, on each
/// connection's last request); `Connection: keep-alive`, the default, is dropped.
pub fn adopt_connection_header(arguments: &mut BenchArgs) -> anyhow::Result<()> {
    let mut close = false;
    let mut unknown = None;
    arguments.headers.retain(|(name, value)| {
        if !name.eq_ignore_ascii_case("connection") {
            return true;
        }
        if value.eq_ignore_ascii_case("close") {
            close = true;
        } else if !value.eq_ignore_ascii_case("keep-alive") {
            unknown = Some(value.clone());
        }
        false
    });
    if let Some(value) = unknown {
        return Err(crate::exit_status::usage(anyhow::anyhow!(
            "--header 'Connection: {value}': the generator sets Connection itself; \
             -H 'Connection: close' (or --requests-per-connection 1) opens a connection per \
             request, keep-alive is the default"
        )));
    }
    if close {
        match arguments.requests_per_connection {
            0 | 1 => arguments.requests_per_connection = 1,
            other => {
                return Err(crate::exit_status::usage(anyhow::anyhow!(
                    "-H 'Connection: close' asks for a connection per request but \
                     --requests-per-connection is {other}: give one or the other"
                )));
            }
        }
    }
    Ok(())
}

fn human(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

/// One line saying what is about to run, as wrk's `Running 10s test @ URL`.
pub fn describe(load: &LoadConfig, plan: &BenchPlan) -> String {
    let urls: Vec<&str> = load
        .targets
        .iter()
        .map(|target| target.url.as_str())
        .collect();
    let (rate, warmup, duration) = match (&plan.saturate, plan.phases.first()) {
        (Some((config, warmup, duration)), _) => (
            format!(
                "rate stepped from {:.0}/s by ×{}",
                config.start_rate, config.factor
            ),
            *warmup,
            *duration,
        ),
        (None, Some(phase)) => (
            match phase.rate {
                Rate::PerSecond(rate) => format!(
                    "{rate:.0} requests/s ({} arrivals)",
                    match load.arrivals {
                        Arrivals::Constant => "constant",
                        Arrivals::Poisson => "Poisson",
                    }
                ),
                Rate::Max => "closed loop (--rate max)".to_owned(),
            },
            phase.warmup,
            phase.duration,
        ),
        (None, None) => (String::new(), Duration::ZERO, Duration::ZERO),
    };
    let per_connection = match load.requests_per_connection {
        0 => String::new(),
        1 => " (a new one per request)".to_owned(),
        k => format!(" ({k} requests each)"),
    };
    let measured = match load.requests {
        Some(requests) if plan.saturate.is_none() => {
            let bound = if duration >= Duration::from_secs(365 * 24 * 3600) {
                String::new()
            } else {
                format!(" (at most {})", human(duration))
            };
            format!("{requests} requests{bound}")
        }
        _ => format!("{} measured", human(duration)),
    };
    format!(
        "coldwire bench: {} {} — {rate}, up to {} connections{per_connection}, {measured} \
         after {} warm-up",
        load.request.method,
        urls.join(" "),
        load.connections,
        human(warmup),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(arguments: &[&str]) -> BenchArgs {
        use clap::Parser;
        let mut argv = vec!["coldwire", "bench"];
        argv.extend_from_slice(arguments);
        match crate::cli::Cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Bench(arguments) => *arguments,
            other => panic!("not bench: {other:?}"),
        }
    }

    #[test]
    fn wrk_and_oha_flags_parse_and_the_long_ones_still_do() {
        let arguments = parse(&[
            "-c",
            "100",
            "-d",
            "2m",
            "-R",
            "2000",
            "-H",
            "A: b",
            "-H",
            "C:d",
            "-m",
            "post",
            "-k",
            "--p99",
            "20ms",
            "http://127.0.0.1:8080/x",
        ]);
        assert_eq!(arguments.positional_urls, ["http://127.0.0.1:8080/x"]);
        assert_eq!(arguments.connections, 100);
        assert_eq!(arguments.duration(), Duration::from_secs(120));
        assert_eq!(arguments.rate(), Rate::PerSecond(2000.0));
        assert_eq!(
            arguments.headers,
            [("A".into(), "b".into()), ("C".into(), "d".into())]
        );
        assert!(arguments.insecure);
        let options = request_options(&arguments).unwrap();
        assert_eq!(options.method, "POST");
        let thresholds = thresholds(&arguments);
        assert_eq!(thresholds.max_error_rate, 0.01);
        assert_eq!(
            thresholds.latency,
            [(Percentile::P99, Duration::from_millis(20))]
        );
        // The flags of before, plain numbers in their old units.
        let arguments = parse(&[
            "--url",
            "http://a/",
            "--url",
            "http://b/@2",
            "--connections",
            "7",
            "--duration",
            "2.5",
            "--warmup",
            "1",
            "--timeout",
            "3",
            "--rtt",
            "80",
            "--late-limit",
            "1000",
            "--saturate-p99",
            "50",
            "--rate",
            "max",
        ]);
        assert_eq!(arguments.urls.len(), 2);
        assert_eq!(arguments.duration(), Duration::from_millis(2500));
        assert_eq!(arguments.warmup(), Duration::from_secs(1));
        assert_eq!(arguments.timeout, 3.0);
        assert_eq!(arguments.rtt, Duration::from_millis(80));
        assert_eq!(arguments.late_limit, 1000.0);
        assert_eq!(arguments.saturate_p99, Duration::from_millis(50));
        assert_eq!(arguments.rate(), Rate::Max);
        assert!(request_options(&arguments).unwrap().body.is_empty());
    }

    #[test]
    fn percentages_read_with_or_without_the_sign() {
        assert_eq!(parse_percent("1%"), Ok(0.01));
        assert_eq!(parse_percent("0.5"), Ok(0.005));
        assert_eq!(parse_percent("100%"), Ok(1.0));
        assert!(
            parse_percent("150%")
                .unwrap_err()
                .contains("1%, 0.5% or 100%")
        );
        assert!(parse_percent("lots").is_err());
    }

    #[test]
    fn milliseconds_stay_the_plain_unit_and_units_are_accepted() {
        assert_eq!(parse_millis("5"), Ok(Duration::from_millis(5)));
        assert_eq!(parse_millis("0.5"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_millis("80ms"), Ok(Duration::from_millis(80)));
        assert_eq!(parse_millis("1s"), Ok(Duration::from_secs(1)));
        assert!(parse_millis("-1").is_err());
        assert!(parse_millis("soon").unwrap_err().contains("500ms"));
        assert_eq!(parse_seconds("500ms"), Ok(0.5));
        assert_eq!(parse_milliseconds("1s"), Ok(1000.0));
    }
}
