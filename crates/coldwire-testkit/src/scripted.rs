//! A scripted origin: each request is answered by a test's own function with raw bytes —
//! interim responses, 304s with chosen validators, `Age` lists, odd date forms — written in
//! pieces with pauses between them; the origin counts requests per method and path. Used
//! by the caching-conformance tests; [`date_from_now`] and [`raw_exchange`] go with it.

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::request::{OriginRequest, read_request};

/// A request as the scripted origin saw it.
pub struct ScriptedRequest {
    /// Method.
    pub method: String,
    /// Target (origin form).
    pub path: String,
    /// Fields, names lower-cased (the last of repeated names).
    pub headers: HashMap<String, String>,
    /// How many requests with this method and path arrived, this one included.
    pub count: usize,
}

impl ScriptedRequest {
    /// A field's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// What the origin sends back: pieces written in order with a pause before each but the
/// first; `close` ends the connection afterwards.
pub struct Reply {
    /// The bytes, in pieces.
    pub pieces: Vec<Vec<u8>>,
    /// Pause before every piece after the first.
    pub pause: Duration,
    /// Close the connection after the reply.
    pub close: bool,
}

impl Reply {
    /// One complete response with `fields` and `body` (Content-Length added).
    pub fn new(status: &str, fields: &[(&str, &str)], body: &[u8]) -> Reply {
        Reply {
            pieces: vec![response(status, fields, body)],
            pause: Duration::ZERO,
            close: false,
        }
    }

    /// Only a head (for 304 and HEAD answers): no Content-Length is added.
    pub fn head(status: &str, fields: &[(&str, &str)]) -> Reply {
        let mut text = format!("HTTP/1.1 {status}\r\n");
        for (name, value) in fields {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        text.push_str("\r\n");
        Reply {
            pieces: vec![text.into_bytes()],
            pause: Duration::ZERO,
            close: false,
        }
    }

    /// Sends `interim` heads (raw) first, each after `pause`, then this reply.
    pub fn after_interims(mut self, interim: &[&str], pause: Duration) -> Reply {
        let mut pieces: Vec<Vec<u8>> = interim
            .iter()
            .map(|head| head.as_bytes().to_vec())
            .collect();
        pieces.append(&mut self.pieces);
        self.pieces = pieces;
        self.pause = pause;
        self
    }
}

/// A response's bytes with `Content-Length`.
pub fn response(status: &str, fields: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut text = format!("HTTP/1.1 {status}\r\n");
    for (name, value) in fields {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// The scripted origin.
pub struct ScriptedOrigin {
    /// Its address.
    pub address: SocketAddr,
    counts: Arc<Mutex<HashMap<(String, String), usize>>>,
}

impl ScriptedOrigin {
    /// Listens on 127.0.0.1:0; every request is answered by `script`.
    pub fn start(script: fn(&ScriptedRequest) -> Reply) -> ScriptedOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let counts: Arc<Mutex<HashMap<(String, String), usize>>> = Arc::default();
        let shared = counts.clone();
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let counts = shared.clone();
                thread::spawn(move || serve(stream, &counts, script));
            }
        });
        ScriptedOrigin { address, counts }
    }

    /// Requests seen with `method` for `path`.
    pub fn requests(&self, method: &str, path: &str) -> usize {
        self.counts
            .lock()
            .unwrap()
            .get(&(method.to_owned(), path.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// `http://127.0.0.1:PORT/path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }
}

fn serve(
    stream: TcpStream,
    counts: &Mutex<HashMap<(String, String), usize>>,
    script: fn(&ScriptedRequest) -> Reply,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    while let Some(OriginRequest {
        method,
        path,
        headers,
        ..
    }) = read_request(&mut reader)
    {
        let count = {
            let mut counts = counts.lock().unwrap();
            let count = counts.entry((method.clone(), path.clone())).or_default();
            *count += 1;
            *count
        };
        let request = ScriptedRequest {
            method,
            path,
            headers,
            count,
        };
        let reply = script(&request);
        for (index, piece) in reply.pieces.iter().enumerate() {
            if index > 0 {
                thread::sleep(reply.pause);
            }
            if writer.write_all(piece).is_err() {
                return;
            }
            let _ = writer.flush();
        }
        if reply.close {
            return;
        }
    }
}

/// An IMF-fixdate `offset` seconds from now (negative: in the past).
pub fn date_from_now(offset: i64) -> String {
    let now = std::time::SystemTime::now();
    let at = if offset >= 0 {
        now + Duration::from_secs(offset as u64)
    } else {
        now - Duration::from_secs(offset.unsigned_abs())
    };
    String::from_utf8(coldwire_http::format_http_date(at).to_vec()).unwrap()
}

/// Sends raw `request` bytes to the proxy on a new connection and reads until it closes.
pub fn raw_exchange(proxy: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect_timeout(&proxy, Duration::from_secs(5)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut all = Vec::new();
    let _ = stream.read_to_end(&mut all);
    String::from_utf8_lossy(&all).into_owned()
}
