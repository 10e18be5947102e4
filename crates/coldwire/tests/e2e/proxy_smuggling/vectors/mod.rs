//! The request-smuggling vectors: what a client sends to the proxy, byte for byte, and what
//! must come of it (a rejection, or exactly which request the origin receives), with the
//! builders that keep the table short. The table itself is split by family: `framing.rs`
//! (Content-Length and Transfer-Encoding), `chunks.rs` (chunk syntax and trailers) and
//! `messages.rs` (field and request-line syntax, Connection, Upgrade, Expect, CONNECT,
//! pipelining).
//!
//! Placeholders in the bytes: `{T}` is the target prefix, `http://127.0.0.1:PORT` in
//! forward mode (absolute-form) and nothing in reverse mode (origin-form), so
//! `GET {T}/a HTTP/1.1` suits both; `{H}` is the origin's authority `127.0.0.1:PORT`.
//! Expected heads use `{H}` too. The bytes `SMUGGLED` must never reach the origin: vectors
//! put them after the point where the request turns malformed.
//!
//! The normalised head the proxy sends upstream is built in one place,
//! [`normalized_head`].

mod chunks;
mod framing;
mod messages;

/// The two ways the proxy runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward proxy: absolute-form targets.
    Forward,
    /// Reverse proxy in front of the origin: origin-form targets.
    Reverse,
}

impl Mode {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Forward => "forward",
            Mode::Reverse => "reverse",
        }
    }
}

/// Where the request turned out malformed, which decides what the origin may have seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// In the head: the origin receives nothing at all.
    Head,
    /// In the body: the origin may have received a partial request, but the proxy must
    /// have closed that connection and no complete request may have formed.
    Body,
}

/// A request as the origin must receive it.
#[derive(Clone, Debug)]
pub struct Forwarded {
    /// The exact head (with `{H}` for the origin's authority).
    pub head: Vec<u8>,
    /// The decoded body.
    pub body: Vec<u8>,
    /// Trailer fields (chunked bodies only), as `name: value` in order.
    pub trailers: Vec<String>,
}

/// What must come of a vector.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// The client gets `status` with `Connection: close`, then the proxy closes.
    Reject {
        /// The status.
        status: u16,
        /// Where the request is malformed.
        stage: Stage,
    },
    /// The origin receives this request and the client gets the origin's answer.
    Forward(Forwarded),
    /// Several requests on one connection, in order.
    Pipelined(Vec<Outcome>),
}

impl Outcome {
    /// The outcomes in order, pipelines flattened.
    pub fn flattened(&self) -> Vec<&Outcome> {
        match self {
            Outcome::Pipelined(all) => all.iter().flat_map(Outcome::flattened).collect(),
            single => vec![single],
        }
    }

    /// A short description.
    pub fn describe(&self) -> String {
        match self {
            Outcome::Reject { status, stage } => match stage {
                Stage::Head => format!("{status} + close, origin receives nothing"),
                Stage::Body => format!("{status} + close, origin connection aborted"),
            },
            Outcome::Forward(forwarded) => {
                let mut text = format!("forward `{}`", escape(&forwarded.head));
                if !forwarded.body.is_empty() {
                    text.push_str(&format!(", body `{}`", escape(&forwarded.body)));
                }
                if !forwarded.trailers.is_empty() {
                    text.push_str(&format!(", trailers `{}`", forwarded.trailers.join("; ")));
                }
                text
            }
            Outcome::Pipelined(all) => all
                .iter()
                .enumerate()
                .map(|(index, outcome)| format!("({}) {}", index + 1, outcome.describe()))
                .collect::<Vec<_>>()
                .join("; then "),
        }
    }
}

/// One vector.
pub struct Vector {
    /// Unique name.
    pub name: &'static str,
    /// Family (research area).
    pub family: &'static str,
    /// The writes the client makes (most vectors: one).
    pub parts: Vec<&'static [u8]>,
    /// Modes it runs in (both unless it only makes sense in one).
    pub modes: &'static [Mode],
    /// `100 Continue` answers the client must get before the final one.
    pub interim: usize,
    /// What must happen.
    pub expect: Outcome,
}

impl Vector {
    /// Adds a second write, sent after a pause.
    pub fn then(mut self, part: &'static [u8]) -> Vector {
        self.parts.push(part);
        self
    }

    /// Runs in forward mode only.
    pub fn forward_only(mut self) -> Vector {
        self.modes = &[Mode::Forward];
        self
    }

    /// Runs in reverse mode only.
    pub fn reverse_only(mut self) -> Vector {
        self.modes = &[Mode::Reverse];
        self
    }

    /// The client must get `count` interim `100 Continue` answers.
    pub fn continues(mut self, count: usize) -> Vector {
        self.interim = count;
        self
    }
}

/// A vector sent in one write, run in both modes.
pub fn vector(
    name: &'static str,
    family: &'static str,
    bytes: &'static [u8],
    expect: impl Into<Outcome>,
) -> Vector {
    Vector {
        name,
        family,
        parts: vec![bytes],
        modes: &[Mode::Forward, Mode::Reverse],
        interim: 0,
        expect: expect.into(),
    }
}

/// Rejected in the head with `status`.
pub fn reject(status: u16) -> Outcome {
    Outcome::Reject {
        status,
        stage: Stage::Head,
    }
}

/// Rejected with `status` once the body turns malformed.
pub fn reject_in_body(status: u16) -> Outcome {
    Outcome::Reject {
        status,
        stage: Stage::Body,
    }
}

/// Several outcomes on one connection.
pub fn pipelined(outcomes: Vec<Outcome>) -> Outcome {
    Outcome::Pipelined(outcomes)
}

/// How the proxy frames the body it sends upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No framing field (no body).
    None,
    /// `Content-Length: N`.
    Length(usize),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// The head the proxy sends upstream: `METHOD PATH HTTP/1.1`, `Host`, the client's
/// end-to-end fields in order (values without surrounding whitespace), the proxy's own
/// framing field, `Via` — the order of `write_upstream_request` in
/// `crates/coldwire-server/src/proxy/head.rs`. The one place that knows this order. (The
/// proxy answers `Expect: 100-continue` itself and does not forward it: vectors leave it
/// out of their expected fields.)
pub fn normalized_head(
    method: &str,
    path: &str,
    host: &str,
    fields: &[(&str, Vec<u8>)],
    framing: Framing,
) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n").into_bytes();
    for (name, value) in fields {
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    }
    match framing {
        Framing::None => {}
        Framing::Length(length) => {
            head.extend_from_slice(format!("Content-Length: {length}\r\n").as_bytes());
        }
        Framing::Chunked => head.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
    }
    head.extend_from_slice(b"Via: 1.1 coldwire\r\n\r\n");
    head
}

/// Builder of a [`Outcome::Forward`]: [`fwd`], then fields, then the body.
pub struct Expected {
    method: &'static str,
    path: &'static str,
    host: &'static str,
    fields: Vec<(&'static str, Vec<u8>)>,
    framing: Framing,
    body: Vec<u8>,
    trailers: Vec<String>,
}

/// The origin receives `METHOD PATH` with `Host: {H}`, no other field and no body (add
/// them with the builder's methods).
pub fn fwd(method: &'static str, path: &'static str) -> Expected {
    Expected {
        method,
        path,
        host: "{H}",
        fields: Vec::new(),
        framing: Framing::None,
        body: Vec::new(),
        trailers: Vec::new(),
    }
}

impl Expected {
    /// The `Host` it carries instead of `{H}`.
    pub fn host(mut self, host: &'static str) -> Expected {
        self.host = host;
        self
    }

    /// End-to-end fields, in order.
    pub fn fields(mut self, fields: &[(&'static str, &'static str)]) -> Expected {
        self.fields.extend(
            fields
                .iter()
                .map(|(name, value)| (*name, value.as_bytes().to_vec())),
        );
        self
    }

    /// One field whose value is not UTF-8.
    pub fn raw_field(mut self, name: &'static str, value: &'static [u8]) -> Expected {
        self.fields.push((name, value.to_vec()));
        self
    }

    /// A `Content-Length` body.
    pub fn length(mut self, body: &[u8]) -> Expected {
        self.framing = Framing::Length(body.len());
        self.body = body.to_vec();
        self
    }

    /// A chunked body (decoded) and its trailer fields.
    pub fn chunked(mut self, body: &[u8], trailers: &[&str]) -> Expected {
        self.framing = Framing::Chunked;
        self.body = body.to_vec();
        self.trailers = trailers.iter().map(|line| (*line).to_owned()).collect();
        self
    }
}

impl From<Expected> for Outcome {
    fn from(expected: Expected) -> Outcome {
        Outcome::Forward(Forwarded {
            head: normalized_head(
                expected.method,
                expected.path,
                expected.host,
                &expected.fields,
                expected.framing,
            ),
            body: expected.body,
            trailers: expected.trailers,
        })
    }
}

/// Every vector, names unique.
pub fn all() -> Vec<Vector> {
    let mut all = framing::vectors();
    all.extend(chunks::vectors());
    all.extend(messages::vectors());
    all
}

/// Bytes as an escaped ASCII string (`\r`, `\n`, `\t`, `\xNN`).
pub fn escape(bytes: &[u8]) -> String {
    let mut text = String::new();
    for &byte in bytes {
        match byte {
            b'\r' => text.push_str("\\r"),
            b'\n' => text.push_str("\\n"),
            b'\t' => text.push_str("\\t"),
            b'\\' => text.push_str("\\\\"),
            b'`' => text.push_str("\\x60"),
            b'|' => text.push_str("\\x7c"),
            0x20..=0x7e => text.push(char::from(byte)),
            _ => text.push_str(&format!("\\x{byte:02x}")),
        }
    }
    text
}

/// Replaces `{T}` and `{H}` for a mode and an origin.
pub fn substitute(bytes: &[u8], mode: Mode, origin: &str) -> Vec<u8> {
    let target = match mode {
        Mode::Forward => format!("http://{origin}"),
        Mode::Reverse => String::new(),
    };
    replace(
        &replace(bytes, b"{T}", target.as_bytes()),
        b"{H}",
        origin.as_bytes(),
    )
}

/// `bytes` with every `from` replaced by `to`.
pub fn replace(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = rest.windows(from.len()).position(|window| window == from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// The markdown list in `docs/smuggling-vectors.md`.
pub fn markdown() -> String {
    let vectors = all();
    let mut text = String::from(
        "# Request-smuggling vectors\n\n\
         What `crates/coldwire/tests/e2e/proxy_smuggling/` sends to `coldwire proxy` and what \
         must come of it, on every I/O backend, in forward mode (absolute-form targets) and \
         reverse mode (origin-form). Generated from the table in \
         `crates/coldwire/tests/e2e/proxy_smuggling/vectors/`; a test checks that this file \
         matches it (`SMUGGLING_DOC_WRITE=1 cargo test -p coldwire --test e2e proxy_smuggling::docs_list` rewrites it).\n\n\
         In the bytes, `{T}` is `http://127.0.0.1:PORT` in forward mode and empty in reverse \
         mode, `{H}` the origin's `127.0.0.1:PORT`. Every request the origin receives is in \
         the proxy's normalised form: `METHOD PATH HTTP/1.1`, `Host`, the client's \
         end-to-end fields in order (hop-by-hop ones removed: `Connection` and the fields it \
         names, `Keep-Alive`, `Proxy-*`, `TE`, `Trailer`, `Upgrade`; and \
         `Expect: 100-continue`, which the proxy answers itself), one framing field \
         written by the proxy (`Content-Length: N` or `Transfer-Encoding: chunked`), \
         `Via: 1.1 coldwire`. A rejection is answered with `Connection: close` and the \
         connection closes; \"origin receives nothing\" means no byte of it reaches the \
         origin, \"origin connection aborted\" that the origin may have seen part of the \
         request but the proxy closed that connection before a complete request formed. \
         The bytes `SMUGGLED` never reach the origin.\n\n",
    );
    text.push_str(&format!("{} vectors.\n\n", vectors.len()));
    text.push_str("| # | Vector | Family | Modes | Bytes sent | Outcome |\n");
    text.push_str("|---|---|---|---|---|---|\n");
    for (index, vector) in vectors.iter().enumerate() {
        let modes = match vector.modes {
            [Mode::Forward] => "forward",
            [Mode::Reverse] => "reverse",
            _ => "both",
        };
        let bytes: Vec<String> = vector
            .parts
            .iter()
            .map(|part| format!("`{}`", escape(part)))
            .collect();
        let mut outcome = vector.expect.describe();
        if vector.interim > 0 {
            outcome = format!("{} × `100 Continue`, then {outcome}", vector.interim);
        }
        text.push_str(&format!(
            "| {} | {} | {} | {modes} | {} | {} |\n",
            index + 1,
            vector.name,
            vector.family,
            bytes.join(" then "),
            outcome.replace('|', "\\|"),
        ));
    }
    text
}
