//! Vectors on the chunked coding (RFC 9112 §7.1): chunk-size syntax, line endings, data
//! longer or shorter than announced, chunk extensions (the "funky chunks" research:
//! bare LF / CR in extensions, unterminated quoted strings, control bytes), and the
//! trailer section (valid fields forwarded, fields that must not be trailers dropped,
//! lines that are not field lines rejected). A malformed body is rejected with 400 as soon
//! as it is seen and the origin's connection aborted.

use super::{Vector, fwd, reject_in_body, vector};

const SIZE: &str = "chunk size";
const LINES: &str = "chunk line endings";
const DATA: &str = "chunk data";
const EXT: &str = "chunk extensions";
const TRAILER: &str = "trailers";

pub fn vectors() -> Vec<Vector> {
    vec![
        vector(
            "chunk-size-0x-prefix",
            SIZE,
            b"POST {T}/c0x HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              0x5\r\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-size-plus",
            SIZE,
            b"POST {T}/cplus HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              +5\r\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-size-minus",
            SIZE,
            b"POST {T}/cminus HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              -5\r\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-size-missing",
            SIZE,
            b"POST {T}/cnone HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              \r\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-size-not-hex",
            SIZE,
            b"POST {T}/cg HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5g\r\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-size-leading-space",
            SIZE,
            b"POST {T}/clead HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              \x205\r\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-size-trailing-space",
            SIZE,
            b"POST {T}/ctrail HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5 \r\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-size-trailing-tab",
            SIZE,
            b"POST {T}/ctab HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\t\r\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-size-overflow-17-digits",
            SIZE,
            b"POST {T}/cover HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              10000000000000005\r\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-size-leading-zeros",
            SIZE,
            b"POST {T}/czeros HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              0005\r\nhello\r\n000\r\n\r\n",
            fwd("POST", "/czeros").chunked(b"hello", &[]),
        ),
        vector(
            "chunk-size-uppercase-hex",
            SIZE,
            b"POST {T}/chex HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              A\r\n0123456789\r\n0\r\n\r\n",
            fwd("POST", "/chex").chunked(b"0123456789", &[]),
        ),
        vector(
            "chunk-size-line-bare-lf",
            LINES,
            b"POST {T}/clf HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-size-line-bare-cr",
            LINES,
            b"POST {T}/ccr HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\rhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-data-bare-lf",
            LINES,
            b"POST {T}/cdlf HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-data-bare-cr",
            LINES,
            b"POST {T}/cdcr HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "last-chunk-bare-lf-end",
            LINES,
            b"POST {T}/clastlf HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\n\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-data-longer-than-size",
            DATA,
            b"POST {T}/clong HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhelloSMUGGLED\r\n0\r\n\r\n",
            reject_in_body(400),
        ),
        vector(
            "chunk-data-shorter-than-size",
            DATA,
            b"POST {T}/cshort HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhel\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-data-split-across-writes",
            DATA,
            b"POST {T}/csplit HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhel",
            fwd("POST", "/csplit").chunked(b"hello world", &[]),
        )
        .then(b"lo\r\n6;x=y\r\n world\r\n0\r\n\r\n"),
        vector(
            "chunk-error-in-second-write",
            DATA,
            b"POST {T}/clate HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n",
            reject_in_body(400),
        )
        .then(b"3\r\nabcSMUGGLED\r\n0\r\n\r\n"),
        vector(
            "chunk-ext-bws-before-semicolon",
            EXT,
            b"POST {T}/ebws HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5 ;ext\r\nhello\r\n0\r\n\r\n",
            fwd("POST", "/ebws").chunked(b"hello", &[]),
        ),
        vector(
            "chunk-ext-token-value",
            EXT,
            b"POST {T}/etok HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;a=b\r\nhello\r\n0;last=1\r\n\r\n",
            fwd("POST", "/etok").chunked(b"hello", &[]),
        ),
        vector(
            "chunk-ext-quoted-value",
            EXT,
            b"POST {T}/equot HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;a=\"q s\";b=\"x\\\"y\";c\r\nhello\r\n0\r\n\r\n",
            fwd("POST", "/equot").chunked(b"hello", &[]),
        ),
        vector(
            "chunk-ext-empty",
            EXT,
            b"POST {T}/esemi HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;\r\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-ext-no-name",
            EXT,
            b"POST {T}/enoname HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;=x\r\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-ext-space-in-name",
            EXT,
            b"POST {T}/espace HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;a b\r\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-ext-unterminated-quote",
            EXT,
            b"POST {T}/eunterm HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;a=\"unterminated\r\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-ext-control-byte",
            EXT,
            b"POST {T}/ectl HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;a\x01b\r\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-ext-nul",
            EXT,
            b"POST {T}/enul HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;\x00ext\r\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-ext-bare-lf",
            EXT,
            b"POST {T}/eterm HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;a\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-ext-bare-cr",
            EXT,
            b"POST {T}/ecr HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;a\rb\r\nhello\r\n0\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "chunk-ext-hides-size-line",
            EXT,
            b"POST {T}/ehide HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              2;\n\r\nxx\r\n8\r\nSMUGGLED\r\n0\r\n\r\n",
            reject_in_body(400),
        ),
        vector(
            "trailer-valid-field-forwarded",
            TRAILER,
            b"POST {T}/tvalid HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\nX-T: v\r\nX-U:  w \r\n\r\n",
            fwd("POST", "/tvalid").chunked(b"hello", &["X-T: v", "X-U: w"]),
        ),
        vector(
            "trailer-framing-fields-dropped",
            TRAILER,
            b"POST {T}/tframing HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\nContent-Length: 13\r\nTransfer-Encoding: chunked\r\n\
              Trailer: X-T\r\nX-T: v\r\n\r\n",
            fwd("POST", "/tframing").chunked(b"hello", &["X-T: v"]),
        ),
        vector(
            "trailer-routing-and-auth-fields-dropped",
            TRAILER,
            b"POST {T}/troute HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\nHost: evil.example\r\nAuthorization: Basic eDp5\r\n\
              X-Ok: 1\r\nTE: trailers\r\n\r\n",
            fwd("POST", "/troute").chunked(b"hello", &["X-Ok: 1"]),
        ),
        vector(
            "trailer-content-and-control-fields-dropped",
            TRAILER,
            b"POST {T}/tcontrol HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\nContent-Type: text/evil\r\nX-A: 1\r\n\
              Cache-Control: no-store\r\nX-B: 2\r\n\r\n",
            fwd("POST", "/tcontrol").chunked(b"hello", &["X-A: 1", "X-B: 2"]),
        ),
        vector(
            "trailer-not-a-field-line",
            TRAILER,
            b"POST {T}/tnot HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\nnot a field\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "trailer-is-a-smuggled-request",
            TRAILER,
            b"POST {T}/treq HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\nGET /SMUGGLED HTTP/1.1\r\nHost: {H}\r\n\r\n",
            reject_in_body(400),
        ),
        vector(
            "trailer-leading-space",
            TRAILER,
            b"POST {T}/tlead HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\n leading-space: x\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "trailer-empty-name",
            TRAILER,
            b"POST {T}/tnoname HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\n: x\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "trailer-space-before-colon",
            TRAILER,
            b"POST {T}/tspace HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\nX : y\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "trailer-obs-fold",
            TRAILER,
            b"POST {T}/tfold HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\nX-T: v\r\n\tw\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "trailer-bare-lf",
            TRAILER,
            b"POST {T}/tlf HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\nX-T: v\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
        vector(
            "trailer-nul-in-value",
            TRAILER,
            b"POST {T}/tnul HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n0\r\nX-T: a\x00b\r\n\r\nSMUGGLED",
            reject_in_body(400),
        ),
    ]
}
