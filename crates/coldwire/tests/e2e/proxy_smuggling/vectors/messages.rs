//! Vectors on the rest of the message: field syntax (obs-fold, whitespace before the
//! colon, bare CR, NUL, non-token names), request-line oddities and `Host` rules
//! (RFC 9112 §3, §5), `Connection` naming framing or routing fields, hop-by-hop removal,
//! `Upgrade`, `Expect: 100-continue`, `CONNECT`, HTTP/1.0, and pipelining around errors
//! (the CL.0 / 0.CL desyncs of "HTTP/1.1 must die").

use super::{Vector, fwd, pipelined, reject, vector};

const FIELDS: &str = "field syntax";
const LINE: &str = "request line";
const HOST: &str = "Host";
const CONNECTION: &str = "Connection";
const UPGRADE: &str = "Upgrade";
const EXPECT: &str = "Expect";
const CONNECT: &str = "CONNECT";
const HTTP10: &str = "HTTP/1.0";
const PIPELINE: &str = "pipelining";

pub fn vectors() -> Vec<Vector> {
    let mut all = fields_and_lines();
    all.extend(hops_and_pipelines());
    all
}

fn fields_and_lines() -> Vec<Vector> {
    vec![
        vector(
            "obs-fold",
            FIELDS,
            b"GET {T}/fold HTTP/1.1\r\nHost: {H}\r\nX-A: a\r\n b\r\n\r\n",
            reject(400),
        ),
        vector(
            "space-before-colon",
            FIELDS,
            b"GET {T}/wsc HTTP/1.1\r\nHost: {H}\r\nX-A : b\r\n\r\n",
            reject(400),
        ),
        vector(
            "tab-before-colon",
            FIELDS,
            b"GET {T}/tabc HTTP/1.1\r\nHost: {H}\r\nX-A\t: b\r\n\r\n",
            reject(400),
        ),
        vector(
            "bare-cr-in-value",
            FIELDS,
            b"GET {T}/crv HTTP/1.1\r\nHost: {H}\r\nX-A: a\rSMUGGLED: b\r\n\r\n",
            reject(400),
        ),
        vector(
            "bare-cr-line-ending",
            FIELDS,
            b"GET {T}/crend HTTP/1.1\r\nHost: {H}\rX-A: b\r\n\r\n",
            reject(400),
        ),
        vector(
            "nul-in-value",
            FIELDS,
            b"GET {T}/nulv HTTP/1.1\r\nHost: {H}\r\nX-A: a\x00b\r\n\r\n",
            reject(400),
        ),
        vector(
            "nul-in-name",
            FIELDS,
            b"GET {T}/nuln HTTP/1.1\r\nHost: {H}\r\nX\x00A: b\r\n\r\n",
            reject(400),
        ),
        vector(
            "name-with-non-token-chars",
            FIELDS,
            b"GET {T}/tok HTTP/1.1\r\nHost: {H}\r\nX<A>: b\r\n\r\n",
            reject(400),
        ),
        vector(
            "empty-field-name",
            FIELDS,
            b"GET {T}/noname HTTP/1.1\r\nHost: {H}\r\n: b\r\n\r\n",
            reject(400),
        ),
        vector(
            "field-line-without-colon",
            FIELDS,
            b"GET {T}/nocolon HTTP/1.1\r\nHost: {H}\r\nX-A b\r\n\r\n",
            reject(400),
        ),
        vector(
            "obs-text-and-tab-in-values-forwarded",
            FIELDS,
            b"GET {T}/obstext HTTP/1.1\r\nHost: {H}\r\nX-A: caf\xe9\r\nX-B: a\tb\r\n\r\n",
            fwd("GET", "/obstext")
                .raw_field("X-A", b"caf\xe9")
                .fields(&[("X-B", "a\tb")]),
        ),
        vector(
            "bare-lf-line-endings-normalised",
            FIELDS,
            b"POST {T}/barelf HTTP/1.1\nHost: {H}\nX-A: 1\nContent-Length: 5\n\nhello",
            fwd("POST", "/barelf")
                .fields(&[("X-A", "1")])
                .length(b"hello"),
        ),
        vector(
            "leading-empty-line-ignored",
            LINE,
            b"\r\nGET {T}/leading HTTP/1.1\r\nHost: {H}\r\n\r\n",
            fwd("GET", "/leading"),
        ),
        vector(
            "double-space-in-request-line",
            LINE,
            b"GET  {T}/dsp HTTP/1.1\r\nHost: {H}\r\n\r\n",
            reject(400),
        ),
        vector(
            "trailing-space-in-request-line",
            LINE,
            b"GET {T}/tsp HTTP/1.1 \r\nHost: {H}\r\n\r\n",
            reject(400),
        ),
        vector(
            "tab-in-request-line",
            LINE,
            b"GET\t{T}/tab HTTP/1.1\r\nHost: {H}\r\n\r\n",
            reject(400),
        ),
        vector(
            // RFC 9110 §2.5 says a higher minor version SHOULD be handled as 1.1; the codec
            // (httparse) cannot parse it, so it is refused with the specific status.
            "http-1-2-is-505",
            LINE,
            b"GET {T}/v12 HTTP/1.2\r\nHost: {H}\r\n\r\n",
            reject(505),
        ),
        vector(
            "http-2-0-request-line",
            LINE,
            b"GET {T}/v20 HTTP/2.0\r\nHost: {H}\r\n\r\n",
            reject(505),
        ),
        vector(
            "lowercase-http-version",
            LINE,
            b"GET {T}/vlow http/1.1\r\nHost: {H}\r\n\r\n",
            reject(400),
        ),
        vector(
            "http-0-9-request",
            LINE,
            b"GET {T}/v09\r\n\r\n",
            reject(400),
        ),
        vector(
            "lowercase-method-forwarded-as-is",
            LINE,
            b"get {T}/lower HTTP/1.1\r\nHost: {H}\r\n\r\n",
            fwd("get", "/lower"),
        ),
        vector(
            "absolute-form-empty-path-keeps-query",
            LINE,
            b"GET http://{H}?q=1 HTTP/1.1\r\nHost: {H}\r\n\r\n",
            fwd("GET", "/?q=1"),
        ),
        vector(
            "absolute-form-userinfo",
            LINE,
            b"GET http://user@{H}/userinfo HTTP/1.1\r\nHost: {H}\r\n\r\n",
            reject(400),
        )
        .forward_only(),
        vector(
            // Found by the upstream_request fuzz target: the authority became `Host: }`.
            "absolute-form-invalid-authority",
            LINE,
            b"GET http://}/bad-authority HTTP/1.1\r\nHost: {H}\r\n\r\n",
            reject(400),
        ),
        vector(
            "absolute-form-host-disagrees",
            HOST,
            b"GET http://{H}/abs HTTP/1.1\r\nHost: evil.example\r\nX-A: 1\r\n\r\n",
            fwd("GET", "/abs").fields(&[("X-A", "1")]),
        ),
        vector(
            "host-missing-in-http11",
            HOST,
            b"GET {T}/nohost HTTP/1.1\r\nX-A: 1\r\n\r\n",
            reject(400),
        ),
        vector(
            "host-twice",
            HOST,
            b"GET {T}/twohosts HTTP/1.1\r\nHost: {H}\r\nHost: evil.example\r\n\r\n",
            reject(400),
        ),
        vector(
            "host-with-path",
            HOST,
            b"GET {T}/hostpath HTTP/1.1\r\nHost: {H}/SMUGGLED\r\n\r\n",
            reject(400),
        ),
        vector(
            "reverse-host-passed-through",
            HOST,
            b"GET /vhost HTTP/1.1\r\nHost: www.example\r\n\r\n",
            fwd("GET", "/vhost").host("www.example"),
        )
        .reverse_only(),
        vector(
            "origin-form-to-forward-proxy",
            LINE,
            b"GET /origin-form HTTP/1.1\r\nHost: {H}\r\n\r\n",
            reject(400),
        )
        .forward_only(),
    ]
}

fn hops_and_pipelines() -> Vec<Vector> {
    vec![
        vector(
            "connection-names-content-length",
            CONNECTION,
            b"POST {T}/cncl HTTP/1.1\r\nHost: {H}\r\nConnection: Content-Length\r\n\
              Content-Length: 8\r\n\r\nSMUGGLED",
            reject(400),
        ),
        vector(
            "connection-names-transfer-encoding",
            CONNECTION,
            b"POST {T}/cnte HTTP/1.1\r\nHost: {H}\r\nConnection: keep-alive, Transfer-Encoding\r\n\
              Transfer-Encoding: chunked\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n",
            reject(400),
        ),
        vector(
            "connection-names-host",
            CONNECTION,
            b"POST {T}/cnhost HTTP/1.1\r\nHost: {H}\r\nConnection: Host\r\n\
              Content-Length: 8\r\n\r\nSMUGGLED",
            reject(400),
        ),
        vector(
            "connection-close-strips-named-field",
            CONNECTION,
            b"GET {T}/cnclose HTTP/1.1\r\nHost: {H}\r\nConnection: close, X-Foo\r\nX-Foo: 1\r\n\
              X-Keep: 2\r\n\r\nGET {T}/SMUGGLED HTTP/1.1\r\nHost: {H}\r\n\r\n",
            fwd("GET", "/cnclose").fields(&[("X-Keep", "2")]),
        ),
        vector(
            "hop-by-hop-fields-removed",
            CONNECTION,
            b"GET {T}/hops HTTP/1.1\r\nHost: {H}\r\nConnection: X-A\r\nX-A: 1\r\n\
              Connection: X-B\r\nX-B: 2\r\nKeep-Alive: timeout=5\r\n\
              Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\n\
              TE: trailers\r\nTrailer: X-T\r\nX-C: 3\r\n\r\n",
            fwd("GET", "/hops").fields(&[("X-C", "3")]),
        ),
        vector(
            "upgrade-h2c-removed",
            UPGRADE,
            b"GET {T}/h2c HTTP/1.1\r\nHost: {H}\r\nConnection: Upgrade, HTTP2-Settings\r\n\
              Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nX-A: 1\r\n\r\n",
            fwd("GET", "/h2c").fields(&[("X-A", "1")]),
        ),
        vector(
            "upgrade-websocket-removed",
            UPGRADE,
            b"GET {T}/ws HTTP/1.1\r\nHost: {H}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
            fwd("GET", "/ws").fields(&[
                ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
                ("Sec-WebSocket-Version", "13"),
            ]),
        ),
        vector(
            "upgrade-not-named-by-connection-removed",
            UPGRADE,
            b"GET {T}/up HTTP/1.1\r\nHost: {H}\r\nUpgrade: h2c\r\nX-A: 1\r\n\r\n",
            fwd("GET", "/up").fields(&[("X-A", "1")]),
        ),
        vector(
            "expect-100-continue",
            EXPECT,
            b"POST {T}/expect HTTP/1.1\r\nHost: {H}\r\nExpect: 100-continue\r\n\
              Content-Length: 5\r\n\r\n",
            fwd("POST", "/expect").length(b"hello"),
        )
        .then(b"hello")
        .continues(1),
        vector(
            "expect-100-continue-ignored-in-http10",
            EXPECT,
            b"POST {T}/expect10 HTTP/1.0\r\nHost: {H}\r\nExpect: 100-continue\r\n\
              Content-Length: 5\r\n\r\nhello",
            fwd("POST", "/expect10").length(b"hello"),
        ),
        vector(
            "connect-to-reverse-proxy",
            CONNECT,
            b"CONNECT {H} HTTP/1.1\r\nHost: {H}\r\n\r\nGET /SMUGGLED HTTP/1.1\r\n\r\n",
            reject(405),
        )
        .reverse_only(),
        vector(
            "connect-to-port-not-443",
            CONNECT,
            b"CONNECT {H} HTTP/1.1\r\nHost: {H}\r\n\r\nGET /SMUGGLED HTTP/1.1\r\n\r\n",
            reject(403),
        )
        .forward_only(),
        vector(
            "http10-get",
            HTTP10,
            b"GET {T}/h10 HTTP/1.0\r\nHost: {H}\r\nConnection: keep-alive\r\n\r\n",
            fwd("GET", "/h10"),
        ),
        vector(
            "http10-post-content-length",
            HTTP10,
            b"POST {T}/h10post HTTP/1.0\r\nHost: {H}\r\nContent-Length: 5\r\n\r\nhello",
            fwd("POST", "/h10post").length(b"hello"),
        ),
        vector(
            "http10-without-host-absolute-form",
            HTTP10,
            b"GET http://{H}/h10abs HTTP/1.0\r\n\r\n",
            fwd("GET", "/h10abs"),
        ),
        vector(
            "http10-without-host-reverse",
            HTTP10,
            b"GET /h10nohost HTTP/1.0\r\n\r\n",
            fwd("GET", "/h10nohost"),
        )
        .reverse_only(),
        vector(
            "get-with-body",
            PIPELINE,
            b"GET {T}/getbody HTTP/1.1\r\nHost: {H}\r\nContent-Length: 5\r\n\r\nhello",
            fwd("GET", "/getbody").length(b"hello"),
        ),
        vector(
            "get-with-chunked-body",
            PIPELINE,
            b"GET {T}/getchunked HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\n\r\n",
            fwd("GET", "/getchunked").chunked(b"hello", &[]),
        ),
        vector(
            "get-body-looks-like-a-request",
            PIPELINE,
            b"GET {T}/cl0 HTTP/1.1\r\nHost: {H}\r\nContent-Length: 26\r\n\r\n\
              GET /inner HTTP/1.1\r\nX: \r\n\
              GET {T}/after HTTP/1.1\r\nHost: {H}\r\n\r\n",
            pipelined(vec![
                fwd("GET", "/cl0")
                    .length(b"GET /inner HTTP/1.1\r\nX: \r\n")
                    .into(),
                fwd("GET", "/after").into(),
            ]),
        ),
        vector(
            "content-length-zero-then-second-request",
            PIPELINE,
            b"POST {T}/first HTTP/1.1\r\nHost: {H}\r\nContent-Length: 0\r\n\r\n\
              GET {T}/second HTTP/1.1\r\nHost: {H}\r\n\r\n",
            pipelined(vec![
                fwd("POST", "/first").length(b"").into(),
                fwd("GET", "/second").into(),
            ]),
        ),
        vector(
            "post-without-framing-then-second-request",
            PIPELINE,
            b"POST {T}/noframing HTTP/1.1\r\nHost: {H}\r\n\r\n\
              GET {T}/next HTTP/1.1\r\nHost: {H}\r\n\r\n",
            pipelined(vec![
                fwd("POST", "/noframing").into(),
                fwd("GET", "/next").into(),
            ]),
        ),
        vector(
            "chunked-then-content-length-then-get",
            PIPELINE,
            b"POST {T}/p1 HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              3\r\nabc\r\n0\r\n\r\n\
              PUT {T}/p2 HTTP/1.1\r\nHost: {H}\r\nContent-Length: 3\r\n\r\nxyz\
              GET {T}/p3 HTTP/1.1\r\nHost: {H}\r\n\r\n",
            pipelined(vec![
                fwd("POST", "/p1").chunked(b"abc", &[]).into(),
                fwd("PUT", "/p2").length(b"xyz").into(),
                fwd("GET", "/p3").into(),
            ]),
        ),
        vector(
            "good-then-bad-then-smuggled",
            PIPELINE,
            b"GET {T}/good HTTP/1.1\r\nHost: {H}\r\n\r\n\
              POST {T}/bad HTTP/1.1\r\nHost: {H}\r\nContent-Length: 5\r\nContent-Length: 6\r\n\
              \r\nhello\
              GET {T}/SMUGGLED HTTP/1.1\r\nHost: {H}\r\n\r\n",
            pipelined(vec![fwd("GET", "/good").into(), reject(400)]),
        ),
        vector(
            "good-then-bad-chunk-then-smuggled",
            PIPELINE,
            b"GET {T}/good2 HTTP/1.1\r\nHost: {H}\r\n\r\n\
              POST {T}/badchunk HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              3\r\nabc\n0\r\n\r\nGET {T}/SMUGGLED HTTP/1.1\r\nHost: {H}\r\n\r\n",
            pipelined(vec![
                fwd("GET", "/good2").into(),
                super::reject_in_body(400),
            ]),
        ),
    ]
}
