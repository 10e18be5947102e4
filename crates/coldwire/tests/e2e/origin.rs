//! `coldwire origin` end to end: every answer waits its think time, its body is the one its
//! `X-Coldwire-Object` field names (checked byte for byte with `coldwire_workload`), a
//! current validator gets `304`, pipelined answers come in order, and a thousand requests
//! waiting in think time at once are all answered about one think time later by a
//! single-threaded worker (no thread per request).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Origin {
    child: Child,
    address: SocketAddr,
}

impl Drop for Origin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn origin(args: &[&str]) -> Origin {
    let mut child = Command::new(env!("CARGO_BIN_EXE_coldwire"))
        .args(["origin", "--listen", "127.0.0.1:0", "--workers", "1"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting coldwire origin");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let address = line
        .trim()
        .strip_prefix("origin listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .unwrap();
    Origin { child, address }
}

/// One response read from `reader`: (status, head, body).
fn read_response(reader: &mut BufReader<TcpStream>) -> (u16, String, Vec<u8>) {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        head.push_str(&line);
    }
    let status = head[9..12].parse().unwrap();
    let length: usize = field(&head, "content-length").map_or(0, |value| value.parse().unwrap());
    let mut body = vec![0; if status == 304 { 0 } else { length }];
    reader.read_exact(&mut body).unwrap();
    (status, head, body)
}

fn field<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (field, value) = line.split_once(':')?;
        field.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

fn connect(address: SocketAddr) -> (TcpStream, BufReader<TcpStream>) {
    let stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let reader = BufReader::new(stream.try_clone().unwrap());
    (stream, reader)
}

/// Checks a body against the object its head names.
fn verify(head: &str, body: &[u8]) {
    let named = field(head, "x-coldwire-object").expect("object field");
    let mut id = 0;
    let mut version = 0;
    let mut size = 0;
    for part in named.split(';') {
        let (key, value) = part.trim().split_once('=').unwrap();
        match key {
            "id" => id = u64::from_str_radix(value, 16).unwrap(),
            "v" => version = u64::from_str_radix(value, 16).unwrap(),
            "size" => size = value.parse().unwrap(),
            _ => {}
        }
    }
    let mut expected = Vec::new();
    coldwire_workload::fill_body(&mut expected, id, version, 0, size);
    assert_eq!(body.len() as u64, size);
    assert!(body == expected.as_slice(), "body of object {id:x} differs");
}

#[test]
fn answers_wait_their_think_time_and_bodies_verify() {
    let origin = origin(&["--think", "200ms", "--think-sd", "0"]);
    let (mut stream, mut reader) = connect(origin.address);
    for id in [1u64, 42, 777, 123_456] {
        let started = Instant::now();
        stream
            .write_all(format!("GET /obj/{id} HTTP/1.1\r\nHost: o\r\n\r\n").as_bytes())
            .unwrap();
        let (status, head, body) = read_response(&mut reader);
        let took = started.elapsed();
        assert_eq!(status, 200, "{head}");
        assert!(took >= Duration::from_millis(200), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
        verify(&head, &body);
        assert!(field(&head, "etag").is_some() && field(&head, "last-modified").is_some());
        assert!(field(&head, "cache-control").is_some());
    }
}

#[test]
fn current_validators_get_304_and_pipelined_answers_keep_their_order() {
    let origin = origin(&["--think", "0"]);
    let (mut stream, mut reader) = connect(origin.address);
    stream
        .write_all(b"GET /obj/5 HTTP/1.1\r\nHost: o\r\n\r\n")
        .unwrap();
    let (_, head, _) = read_response(&mut reader);
    let etag = field(&head, "etag").unwrap().to_owned();
    let modified = field(&head, "last-modified").unwrap().to_owned();
    let pipelined = format!(
        "GET /obj/5 HTTP/1.1\r\nHost: o\r\nIf-None-Match: {etag}\r\n\r\n\
         GET /obj/6 HTTP/1.1\r\nHost: o\r\n\r\n\
         GET /obj/5 HTTP/1.1\r\nHost: o\r\nIf-Modified-Since: {modified}\r\n\r\n\
         HEAD /obj/7 HTTP/1.1\r\nHost: o\r\n\r\n\
         GET /obj/8 HTTP/1.1\r\nHost: o\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(pipelined.as_bytes()).unwrap();
    let (status, _, _) = read_response(&mut reader);
    assert_eq!(status, 304);
    let (status, head, body) = read_response(&mut reader);
    assert_eq!(status, 200);
    assert!(
        field(&head, "x-coldwire-object")
            .unwrap()
            .starts_with("id=6;")
    );
    verify(&head, &body);
    let (status, _, _) = read_response(&mut reader);
    assert_eq!(status, 304);
    // HEAD: the head of object 7, no body (read_response reads Content-Length bytes, so
    // read the next answer's status line directly instead).
    let mut line = String::new();
    let mut head7 = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        head7.push_str(&line);
    }
    assert!(head7.starts_with("HTTP/1.1 200"), "{head7}");
    assert!(
        field(&head7, "x-coldwire-object")
            .unwrap()
            .starts_with("id=7;")
    );
    let (status, head, body) = read_response(&mut reader);
    assert_eq!(status, 200);
    verify(&head, &body);
    let mut rest = Vec::new();
    assert_eq!(
        reader.read_to_end(&mut rest).unwrap(),
        0,
        "closed after Connection: close"
    );
}

#[test]
fn a_thousand_requests_in_think_time_are_held_without_a_thread_each() {
    let origin = origin(&["--think", "1s", "--think-sd", "0"]);
    let started = Instant::now();
    let mut connections: Vec<(TcpStream, BufReader<TcpStream>)> =
        (0..1000).map(|_| connect(origin.address)).collect();
    for (index, (stream, _)) in connections.iter_mut().enumerate() {
        stream
            .write_all(format!("GET /obj/{index} HTTP/1.1\r\nHost: o\r\n\r\n").as_bytes())
            .unwrap();
    }
    let threads = std::fs::read_dir(format!("/proc/{}/task", origin.child.id()))
        .unwrap()
        .count();
    for (_, reader) in &mut connections {
        let (status, head, body) = read_response(reader);
        assert_eq!(status, 200);
        verify(&head, &body);
    }
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(1), "{took:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(threads < 10, "{threads} threads for 1,000 waiting requests");
}
