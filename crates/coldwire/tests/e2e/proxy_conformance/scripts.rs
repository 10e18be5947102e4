//! The scripted origin's answers for each test in `proxy_conformance`, one
//! function per test (routes by path and method; what each returns is what the test's
//! doc comment describes).

use std::time::Duration;

use coldwire_testkit::scripted::{Reply, ScriptedRequest as Request, date_from_now};

/// See the test using it in `proxy_conformance`.
pub fn interim_script(request: &Request) -> Reply {
    match request.path.split('?').next().unwrap_or("") {
        "/early" => Reply::new(
            "200 OK",
            &[("Cache-Control", "max-age=60")],
            b"final body",
        )
        .after_interims(
            &[
                "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\nConnection: X-Hop\r\nX-Hop: 1\r\n\r\n",
                "HTTP/1.1 102 Processing\r\n\r\n",
            ],
            Duration::from_millis(100),
        ),
        "/continue" => Reply::new("200 OK", &[("Cache-Control", "no-store")], b"posted")
            .after_interims(&["HTTP/1.1 100 Continue\r\n\r\n"], Duration::from_millis(50)),
        "/switch" => Reply::head(
            "101 Switching Protocols",
            &[("Upgrade", "websocket"), ("Connection", "Upgrade")],
        ),
        _ => Reply::new("404 Not Found", &[], b"no route"),
    }
}

/// See the test using it in `proxy_conformance`.
pub fn age_script(request: &Request) -> Reply {
    let age = match request.path.as_str() {
        "/age-list" => "30, 40",
        "/age-bad" => "soon",
        _ => "0",
    };
    Reply::new(
        "200 OK",
        &[("Cache-Control", "max-age=60"), ("Age", age)],
        b"aged",
    )
}

/// See the test using it in `proxy_conformance`.
pub fn dates_script(request: &Request) -> Reply {
    let hour = std::time::SystemTime::now() + Duration::from_secs(3600);
    let imf = String::from_utf8(coldwire_http::format_http_date(hour).to_vec()).unwrap();
    // "Wed, 25 Nov 2026 10:00:00 GMT" → the other forms of the same instant.
    let parts: Vec<&str> = imf
        .split([' ', ','])
        .filter(|part| !part.is_empty())
        .collect();
    let (day, month, year, time) = (parts[1], parts[2], parts[3], parts[4]);
    let expires = match request.path.as_str() {
        "/rfc850" => format!("Sunday, {day}-{month}-{} {time} GMT", &year[2..]),
        "/asctime" => format!("Sun {month} {day:>2} {time} {year}"),
        "/weekday" => format!("mon, {day} {} {year} {time} gmt", month.to_uppercase()),
        _ => "0".to_owned(),
    };
    Reply::new(
        "200 OK",
        &[
            ("Date", &date_from_now(0)),
            ("Expires", &expires),
            ("Last-Modified", &date_from_now(-86_400)),
        ],
        b"dated",
    )
}

/// See the test using it in `proxy_conformance`.
pub fn status_script(request: &Request) -> Reply {
    let query = request.path.split('?').nth(1).unwrap_or("");
    let code = &query[..3];
    let mut fields = vec![("Last-Modified", "Sun, 01 Nov 2026 00:00:00 GMT")];
    if query.contains("explicit") {
        fields.push(("Cache-Control", "max-age=60"));
    }
    Reply::new(&format!("{code} Status"), &fields, b"status body")
}

/// See the test using it in `proxy_conformance`.
pub fn vary_script(request: &Request) -> Reply {
    let vary = if request.path.starts_with("/star") {
        "*"
    } else {
        "Accept-Encoding, Accept-Language"
    };
    Reply::new(
        "200 OK",
        &[("Cache-Control", "max-age=60"), ("Vary", vary)],
        b"varied",
    )
}

/// See the test using it in `proxy_conformance`.
pub fn invalidate_script(request: &Request) -> Reply {
    if request.method == "GET" {
        return Reply::new("200 OK", &[("Cache-Control", "max-age=60")], b"stored");
    }
    let status = request.header("x-answer").unwrap_or("200 OK").to_owned();
    let mut fields = Vec::new();
    for (name, asked) in [
        ("Location", "x-location"),
        ("Content-Location", "x-content-location"),
    ] {
        if let Some(value) = request.header(asked) {
            fields.push((name, value));
        }
    }
    Reply::new(&status, &fields, b"done")
}

/// See the test using it in `proxy_conformance`.
pub fn head_script(request: &Request) -> Reply {
    let etag = if request.path == "/changed" && request.method == "HEAD" {
        "\"new\""
    } else {
        "\"h\""
    };
    let mut fields = vec![("Cache-Control", "max-age=60"), ("ETag", etag)];
    if request.method == "HEAD" {
        fields.push(("X-Head", "seen"));
        fields.push(("Content-Length", "9"));
        return Reply::head("200 OK", &fields);
    }
    Reply::new("200 OK", &fields, b"head body")
}

/// See the test using it in `proxy_conformance`.
pub fn etag_change_script(request: &Request) -> Reply {
    if request.header("if-none-match").is_some() {
        return Reply::head(
            "304 Not Modified",
            &[("ETag", "\"other\""), ("Cache-Control", "max-age=60")],
        );
    }
    let body = format!("version {}", request.count);
    let etag = format!("\"v{}\"", request.count);
    Reply::new(
        "200 OK",
        &[("Cache-Control", "max-age=0"), ("ETag", &etag)],
        body.as_bytes(),
    )
}

/// See the test using it in `proxy_conformance`.
pub fn targeted_script(request: &Request) -> Reply {
    let mut fields = vec![("Cache-Control", "no-store")];
    match request.path.as_str() {
        "/cdn" => fields.push(("CDN-Cache-Control", "max-age=60")),
        "/ours" => {
            fields.push(("Coldwire-Cache-Control", "no-store"));
            fields.push(("CDN-Cache-Control", "max-age=60"));
        }
        "/renamed" => fields.push(("Edge-Control", "max-age=60")),
        _ => {}
    }
    Reply::new("200 OK", &fields, b"targeted")
}

/// See the test using it in `proxy_conformance`.
pub fn conditional_script(request: &Request) -> Reply {
    let date = date_from_now(-10);
    let mut fields = vec![("Cache-Control", "max-age=60")];
    if request.path == "/with-lm" {
        fields.push(("ETag", "W/\"w\""));
        fields.push(("Last-Modified", "Sun, 01 Nov 2026 00:00:00 GMT"));
    } else {
        fields.push(("Date", &date));
    }
    Reply::new("200 OK", &fields, b"conditional")
}

/// See the test using it in `proxy_conformance`: a 100-byte representation whose
/// single ranges are answered with `206` (strong `ETag`, or a weak one under `/weak`).
pub fn ranged_script(request: &Request) -> Reply {
    let body: Vec<u8> = (0..100u8).map(|byte| b'a' + byte % 26).collect();
    let etag = if request.path.starts_with("/weak") {
        "W/\"r\""
    } else {
        "\"r\""
    };
    let fields = [("Cache-Control", "max-age=60"), ("ETag", etag)];
    let range = request
        .header("range")
        .and_then(|value| value.strip_prefix("bytes="))
        .and_then(|value| value.split_once('-'))
        .and_then(|(first, last)| {
            Some((first.parse::<usize>().ok()?, last.parse::<usize>().ok()?))
        });
    match range {
        Some((first, last)) if first <= last && last < body.len() => {
            let content_range = format!("bytes {first}-{last}/{}", body.len());
            let mut fields = fields.to_vec();
            fields.push(("Content-Range", &content_range));
            Reply::new("206 Partial Content", &fields, &body[first..=last])
        }
        _ => Reply::new("200 OK", &fields, &body),
    }
}
