//! The adversarial request-smuggling suite: raw-byte vectors (CL.TE and TE.CL desyncs,
//! Content-Length and Transfer-Encoding obfuscations, chunk-size, chunk-extension and
//! trailer syntax, field and request-line syntax, Connection, Upgrade, Expect, CONNECT,
//! pipelining around errors) sent through the real `coldwire proxy` to a recording origin,
//! on every I/O backend, in forward and in reverse mode. Each vector says what must
//! happen: a rejection (status, `Connection: close`, the connection closed, nothing
//! complete at the origin) or exactly which normalised request the origin receives. All
//! failures of a (backend, mode) are collected and reported together.
//!
//! The vectors are in `proxy_smuggling/vectors/`, listed in `docs/smuggling-vectors.md`
//! (a test keeps that file in step with the table).

mod client;
mod origin;
mod strict;
mod vectors;

use std::collections::HashSet;
use std::thread;
use std::time::{Duration, Instant};

use coldwire_testkit::Proxy;
use origin::{Origin, Seen};
use vectors::{Mode, Outcome, Stage, Vector, escape, substitute};

coldwire_testkit::backend_tests! { forward_mode, reverse_mode }

fn forward_mode(backend: &str) {
    run_backend(backend, Mode::Forward);
}

fn reverse_mode(backend: &str) {
    run_backend(backend, Mode::Reverse);
}

/// Runs every vector of `mode` against one proxy on `backend` (its `--io` name; the
/// macro has checked that it works here).
fn run_backend(backend: &str, mode: Mode) {
    let origin = Origin::start();
    let authority = origin.address.to_string();
    let reverse = format!("http://{authority}");
    let args: Vec<&str> = match mode {
        Mode::Forward => Vec::new(),
        Mode::Reverse => vec!["--reverse", &reverse],
    };
    let proxy = Proxy::start(backend, &args);
    let mut failures = Vec::new();
    let mut ran = 0;
    for vector in vectors::all() {
        if !vector.modes.contains(&mode) {
            continue;
        }
        ran += 1;
        let problems = run_vector(&proxy, &origin, &vector, mode);
        if !problems.is_empty() {
            let sent: Vec<String> = vector
                .parts
                .iter()
                .map(|part| escape(&substitute(part, mode, &authority)))
                .collect();
            failures.push(format!(
                "- {} ({}) on {backend}/{}:\n    sent:     {}\n    expected: {}\n    got:      {}",
                vector.name,
                vector.family,
                mode.name(),
                sent.join(" | then | "),
                String::from_utf8_lossy(&substitute(
                    vector.expect.describe().as_bytes(),
                    mode,
                    &authority
                )),
                problems.join("\n              "),
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {ran} smuggling vectors failed on {backend}/{}:\n{}",
        failures.len(),
        mode.name(),
        failures.join("\n")
    );
}

/// Sends one vector on a fresh connection and checks the client's answers and what the
/// origin received; the problems found.
fn run_vector(proxy: &Proxy, origin: &Origin, vector: &Vector, mode: Mode) -> Vec<String> {
    let authority = origin.address.to_string();
    let parts: Vec<Vec<u8>> = vector
        .parts
        .iter()
        .map(|part| substitute(part, mode, &authority))
        .collect();
    let outcomes = vector.expect.flattened();
    let last = outcomes.last().copied();
    let ends_with_reject = matches!(last, Some(Outcome::Reject { .. }));
    let may_leave_partial = matches!(
        last,
        Some(Outcome::Reject {
            stage: Stage::Body,
            ..
        })
    );
    let mark = origin.mark();
    let got = client::exchange(proxy.address, &parts, outcomes.len(), ends_with_reject);
    thread::sleep(Duration::from_millis(100));
    let mut seen = origin.since(&mark);
    // A proxy that aborts the origin mid-request may close that connection just after
    // answering the client.
    let until = Instant::now() + Duration::from_secs(1);
    while may_leave_partial
        && seen.unfinished.iter().any(|unfinished| !unfinished.closed)
        && Instant::now() < until
    {
        thread::sleep(Duration::from_millis(50));
        seen = origin.since(&mark);
    }
    let mut problems = client_problems(vector, &outcomes, &got, &seen);
    problems.extend(origin_problems(
        &outcomes,
        &seen,
        may_leave_partial,
        (&authority, mode),
    ));
    origin.abort_unfinished();
    problems
}

/// What is wrong with the answers the client got.
fn client_problems(
    vector: &Vector,
    outcomes: &[&Outcome],
    got: &client::Received,
    seen: &Seen,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut forwarded = 0;
    for (index, outcome) in outcomes.iter().enumerate() {
        let Some(response) = got.finals.get(index) else {
            problems.push(format!(
                "no response #{} from the proxy{}",
                index + 1,
                if got.closed {
                    " (it closed the connection)"
                } else {
                    " (timed out)"
                }
            ));
            break;
        };
        let summary = format!(
            "{} `{}`",
            response.status,
            escape(&response.body[..response.body.len().min(80)])
        );
        match outcome {
            Outcome::Forward(_) => {
                let origin_answer = seen
                    .requests
                    .get(forwarded)
                    .map(|(sequence, _)| format!("ok {sequence}"));
                forwarded += 1;
                if response.status != 200
                    || Some(response.body.as_slice()) != origin_answer.as_deref().map(str::as_bytes)
                {
                    problems.push(format!(
                        "response #{} is {summary}, not the origin's answer {} to request #{forwarded}",
                        index + 1,
                        origin_answer.as_deref().unwrap_or("(none)"),
                    ));
                }
            }
            Outcome::Reject { status, .. } => {
                if response.is_origin_parse_error() {
                    problems.push(format!(
                        "response #{} is the origin's 400 for what the proxy sent it, not the \
                         proxy's {status}",
                        index + 1
                    ));
                } else if response.status != *status {
                    problems.push(format!(
                        "response #{} is {summary}, not {status}",
                        index + 1
                    ));
                } else if !response.closes() {
                    problems.push(format!(
                        "response #{} ({status}) has no `Connection: close`",
                        index + 1
                    ));
                }
            }
            Outcome::Pipelined(_) => unreachable!("flattened"),
        }
    }
    if got.finals.len() > outcomes.len() {
        let extra: Vec<String> = got.finals[outcomes.len()..]
            .iter()
            .map(|response| response.status.to_string())
            .collect();
        problems.push(format!("extra responses: {}", extra.join(", ")));
    }
    if matches!(outcomes.last(), Some(Outcome::Reject { .. })) && !got.closed {
        problems.push("the proxy left the connection open after the rejection".to_owned());
    }
    if got.interim != vector.interim {
        problems.push(format!(
            "{} interim 1xx responses, expected {}",
            got.interim, vector.interim
        ));
    }
    if let Some(garbage) = &got.garbage {
        problems.push(garbage.clone());
    }
    if let Some(error) = &got.write_error {
        problems.push(format!("client {error}"));
    }
    problems
}

/// The head a vector expects at the origin: origin-form, and in reverse mode with the
/// client's address appended to `X-Forwarded-For` just before `Via` (no vector sends one).
fn upstream_head(expected: &[u8], mode: Mode, authority: &str) -> Vec<u8> {
    let head = substitute(expected, Mode::Reverse, authority);
    match mode {
        Mode::Forward => head,
        Mode::Reverse => vectors::replace(
            &head,
            b"\r\nVia: 1.1 coldwire\r\n",
            b"\r\nX-Forwarded-For: 127.0.0.1\r\nVia: 1.1 coldwire\r\n",
        ),
    }
}

/// What is wrong with what the origin received.
fn origin_problems(
    outcomes: &[&Outcome],
    seen: &Seen,
    may_leave_partial: bool,
    (authority, mode): (&str, Mode),
) -> Vec<String> {
    let mut problems = Vec::new();
    let expected: Vec<&vectors::Forwarded> = outcomes
        .iter()
        .filter_map(|outcome| match outcome {
            Outcome::Forward(forwarded) => Some(forwarded),
            _ => None,
        })
        .collect();
    for index in 0..expected.len().max(seen.requests.len()) {
        let number = index + 1;
        match (expected.get(index), seen.requests.get(index)) {
            (Some(want), Some((_, request))) => {
                let head = upstream_head(&want.head, mode, authority);
                if request.head != head {
                    problems.push(format!(
                        "origin request #{number} head is `{}`, expected `{}`",
                        escape(&request.head),
                        escape(&head)
                    ));
                }
                if request.body != want.body {
                    problems.push(format!(
                        "origin request #{number} body is `{}`, expected `{}`",
                        escape(&request.body),
                        escape(&want.body)
                    ));
                }
                if request.trailers != want.trailers {
                    problems.push(format!(
                        "origin request #{number} trailers are {:?}, expected {:?}",
                        request.trailers, want.trailers
                    ));
                }
            }
            (Some(_), None) => {
                problems.push(format!("origin never received request #{number}"));
            }
            (None, Some((_, request))) => problems.push(format!(
                "origin received an unexpected request: `{}` body `{}`",
                escape(&request.head),
                escape(&request.body)
            )),
            (None, None) => {}
        }
    }
    for error in &seen.errors {
        problems.push(format!("origin could not parse what it got: {error}"));
    }
    for unfinished in &seen.unfinished {
        let bytes = escape(&unfinished.bytes[..unfinished.bytes.len().min(200)]);
        if !may_leave_partial {
            problems.push(format!("origin holds an incomplete request: `{bytes}`"));
        } else if !unfinished.closed {
            problems.push(format!(
                "origin connection with a partial request left open: `{bytes}`"
            ));
        }
    }
    if seen.raw.windows(8).any(|window| window == b"SMUGGLED") {
        problems.push(format!(
            "bytes after the malformed point reached the origin: `{}`",
            escape(&seen.raw[..seen.raw.len().min(300)])
        ));
    }
    problems
}

#[test]
fn vectors_are_many_and_named_uniquely() {
    let all = vectors::all();
    assert!(all.len() >= 60, "only {} vectors", all.len());
    let mut names = HashSet::new();
    for vector in &all {
        assert!(names.insert(vector.name), "{} twice", vector.name);
        assert!(!vector.parts.is_empty() && !vector.modes.is_empty());
    }
}

/// `docs/smuggling-vectors.md` lists the table; `SMUGGLING_DOC_WRITE=1` rewrites it.
#[test]
fn docs_list_every_vector() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/smuggling-vectors.md"
    );
    let generated = vectors::markdown();
    if std::env::var_os("SMUGGLING_DOC_WRITE").is_some() {
        std::fs::write(path, &generated).unwrap();
    }
    let written = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        written == generated,
        "docs/smuggling-vectors.md is out of date: run \
         `SMUGGLING_DOC_WRITE=1 cargo test -p coldwire --test proxy_smuggling docs_list`"
    );
}
