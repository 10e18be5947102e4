//! Vectors on message framing: well-formed baselines, the canonical framing field the proxy
//! writes itself, CL.TE and TE.CL conflicts, duplicate and malformed `Content-Length`, and
//! `Transfer-Encoding` obfuscations (Kettle's "HTTP Desync Attacks", PortSwigger's TE
//! obfuscation list, RFC 9112 §6).

use super::{Vector, fwd, reject, vector};

const BASE: &str = "baseline";
const CANON: &str = "canonical framing";
const CLTE: &str = "CL.TE / TE.CL";
const CL: &str = "Content-Length";
const TE: &str = "Transfer-Encoding";
const UNDERSCORE: &str = "underscore variants";

pub fn vectors() -> Vec<Vector> {
    vec![
        vector(
            "baseline-get",
            BASE,
            b"GET {T}/get HTTP/1.1\r\nHost: {H}\r\nAccept: */*\r\n\r\n",
            fwd("GET", "/get").fields(&[("Accept", "*/*")]),
        ),
        vector(
            "baseline-post-content-length",
            BASE,
            b"POST {T}/post HTTP/1.1\r\nHost: {H}\r\nContent-Type: text/plain\r\n\
              Content-Length: 5\r\n\r\nhello",
            fwd("POST", "/post")
                .fields(&[("Content-Type", "text/plain")])
                .length(b"hello"),
        ),
        vector(
            "baseline-post-chunked",
            BASE,
            b"POST {T}/chunked HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            fwd("POST", "/chunked").chunked(b"hello world", &[]),
        ),
        vector(
            "baseline-post-content-length-zero",
            BASE,
            b"POST {T}/empty HTTP/1.1\r\nHost: {H}\r\nContent-Length: 0\r\n\r\n",
            fwd("POST", "/empty").length(b""),
        ),
        vector(
            "framing-field-moves-after-end-to-end-fields",
            CANON,
            b"POST {T}/moved HTTP/1.1\r\nContent-Length: 5\r\nHost: {H}\r\nX-After: 1\r\n\r\nhello",
            fwd("POST", "/moved")
                .fields(&[("X-After", "1")])
                .length(b"hello"),
        ),
        vector(
            "content-length-leading-zeros",
            CANON,
            b"POST {T}/zeros HTTP/1.1\r\nHost: {H}\r\nContent-Length: 005\r\n\r\nhello",
            fwd("POST", "/zeros").length(b"hello"),
        ),
        vector(
            "content-length-lowercase-name-and-ows",
            CANON,
            b"POST {T}/lower HTTP/1.1\r\nHost: {H}\r\ncontent-length:\t5 \r\n\r\nhello",
            fwd("POST", "/lower").length(b"hello"),
        ),
        vector(
            "te-uppercase-value",
            CANON,
            b"POST {T}/upper HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: CHUNKED\r\n\r\n\
              5\r\nhello\r\n0\r\n\r\n",
            fwd("POST", "/upper").chunked(b"hello", &[]),
        ),
        vector(
            "te-lowercase-name-tab-ows",
            CANON,
            b"POST {T}/tab HTTP/1.1\r\nHost: {H}\r\ntransfer-encoding:\tchunked\t \r\n\r\n\
              5\r\nhello\r\n0\r\n\r\n",
            fwd("POST", "/tab").chunked(b"hello", &[]),
        ),
        vector(
            "te-empty-list-members",
            CANON,
            b"POST {T}/members HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: , chunked,\r\n\r\n\
              5\r\nhello\r\n0\r\n\r\n",
            fwd("POST", "/members").chunked(b"hello", &[]),
        ),
        vector(
            "cl-te-classic",
            CLTE,
            b"POST {T}/clte HTTP/1.1\r\nHost: {H}\r\nContent-Length: 13\r\n\
              Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nSMUGGLED",
            reject(400),
        ),
        vector(
            "te-cl-classic",
            CLTE,
            b"POST {T}/tecl HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\
              Content-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n",
            reject(400),
        ),
        vector(
            "cl-te-obfuscated-xchunked",
            CLTE,
            b"POST {T}/clx HTTP/1.1\r\nHost: {H}\r\nContent-Length: 4\r\n\
              Transfer-Encoding: xchunked\r\n\r\n5c\r\nSMUGGLED",
            reject(400),
        ),
        vector(
            "cl-te-zero-length",
            CLTE,
            b"POST {T}/cl0te HTTP/1.1\r\nHost: {H}\r\nContent-Length: 0\r\n\
              Transfer-Encoding: chunked\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n",
            reject(400),
        ),
        vector(
            "content-length-duplicate-identical",
            CL,
            b"POST {T}/dup HTTP/1.1\r\nHost: {H}\r\nContent-Length: 5\r\n\
              Content-Length: 5\r\n\r\nhello",
            reject(400),
        ),
        vector(
            "content-length-duplicate-conflicting",
            CL,
            b"POST {T}/conflict HTTP/1.1\r\nHost: {H}\r\nContent-Length: 5\r\n\
              Content-Length: 13\r\n\r\nhelloSMUGGLED",
            reject(400),
        ),
        vector(
            "content-length-list",
            CL,
            b"POST {T}/list HTTP/1.1\r\nHost: {H}\r\nContent-Length: 5, 5\r\n\r\nhello",
            reject(400),
        ),
        vector(
            "content-length-plus-sign",
            CL,
            b"POST {T}/plus HTTP/1.1\r\nHost: {H}\r\nContent-Length: +5\r\n\r\nhello",
            reject(400),
        ),
        vector(
            "content-length-minus-sign",
            CL,
            b"POST {T}/minus HTTP/1.1\r\nHost: {H}\r\nContent-Length: -5\r\n\r\nhello",
            reject(400),
        ),
        vector(
            "content-length-hex",
            CL,
            b"POST {T}/hex HTTP/1.1\r\nHost: {H}\r\nContent-Length: 0x5\r\n\r\nhello",
            reject(400),
        ),
        vector(
            "content-length-space-inside",
            CL,
            b"POST {T}/inside HTTP/1.1\r\nHost: {H}\r\nContent-Length: 1 3\r\n\r\nhelloSMUGGLED",
            reject(400),
        ),
        vector(
            "content-length-empty",
            CL,
            b"POST {T}/clempty HTTP/1.1\r\nHost: {H}\r\nContent-Length: \r\n\r\nSMUGGLED",
            reject(400),
        ),
        vector(
            "content-length-overflow",
            CL,
            b"POST {T}/huge HTTP/1.1\r\nHost: {H}\r\n\
              Content-Length: 184467440737095516160\r\n\r\nhello",
            reject(400),
        ),
        vector(
            "content-length-space-before-colon",
            CL,
            b"POST {T}/clsp HTTP/1.1\r\nHost: {H}\r\nContent-Length : 5\r\n\r\nhello",
            reject(400),
        ),
        vector(
            "te-xchunked",
            TE,
            b"POST {T}/xchunked HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: xchunked\r\n\r\n\
              0\r\n\r\n",
            reject(400),
        ),
        vector(
            "te-chunked-then-identity",
            TE,
            b"POST {T}/ci HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked, identity\r\n\r\n\
              0\r\n\r\n",
            reject(400),
        ),
        vector(
            "te-identity-then-chunked",
            TE,
            b"POST {T}/ic HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: identity, chunked\r\n\r\n\
              0\r\n\r\n",
            reject(501),
        ),
        vector(
            "te-gzip-chunked",
            TE,
            b"POST {T}/gzip HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: gzip, chunked\r\n\r\n\
              0\r\n\r\n",
            reject(501),
        ),
        vector(
            "te-two-lines-gzip-then-chunked",
            TE,
            b"POST {T}/twolines HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: gzip\r\n\
              Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            reject(501),
        ),
        vector(
            "te-two-lines-chunked-then-identity",
            TE,
            b"POST {T}/twolines2 HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\
              Transfer-Encoding: identity\r\n\r\n0\r\n\r\n",
            reject(400),
        ),
        vector(
            "te-chunked-twice",
            TE,
            b"POST {T}/twice HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\
              Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            reject(400),
        ),
        vector(
            "te-empty-value",
            TE,
            b"POST {T}/teempty HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: \r\n\r\n0\r\n\r\n",
            reject(400),
        ),
        vector(
            "te-in-http10",
            TE,
            b"POST {T}/te10 HTTP/1.0\r\nHost: {H}\r\nTransfer-Encoding: chunked\r\n\r\n\
              0\r\n\r\n",
            reject(400),
        ),
        vector(
            "te-vertical-tab-before-value",
            TE,
            b"POST {T}/vt HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding:\x0bchunked\r\n\r\n\
              0\r\n\r\n",
            reject(400),
        ),
        vector(
            "te-form-feed-before-value",
            TE,
            b"POST {T}/ff HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding:\x0cchunked\r\n\r\n\
              0\r\n\r\n",
            reject(400),
        ),
        vector(
            "te-space-before-colon",
            TE,
            b"POST {T}/tesp HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding : chunked\r\n\r\n\
              0\r\n\r\n",
            reject(400),
        ),
        vector(
            "te-quoted-chunked",
            TE,
            b"POST {T}/quoted HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: \"chunked\"\r\n\r\n\
              0\r\n\r\n",
            reject(400),
        ),
        vector(
            "te-chunked-with-parameter",
            TE,
            b"POST {T}/param HTTP/1.1\r\nHost: {H}\r\nTransfer-Encoding: chunked;q=1\r\n\r\n\
              0\r\n\r\n",
            reject(400),
        ),
        vector(
            "te-folded-onto-previous-field",
            TE,
            b"POST {T}/folded HTTP/1.1\r\nHost: {H}\r\nX-A: a\r\n Transfer-Encoding: chunked\r\n\
              Content-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n",
            reject(400),
        ),
        vector(
            "te-underscore-is-dropped",
            UNDERSCORE,
            b"POST {T}/teunder HTTP/1.1\r\nHost: {H}\r\nTransfer_Encoding: chunked\r\n\
              Content-Length: 5\r\n\r\nhello",
            fwd("POST", "/teunder").length(b"hello"),
        ),
        vector(
            "content-length-underscore-is-dropped",
            UNDERSCORE,
            b"POST {T}/clunder HTTP/1.1\r\nHost: {H}\r\nContent_Length: 44\r\n\
              Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            fwd("POST", "/clunder").chunked(b"hello", &[]),
        ),
        vector(
            "content-length-underscore-alone-is-not-framing",
            UNDERSCORE,
            b"GET {T}/clunder0 HTTP/1.1\r\nHost: {H}\r\nContent_Length: 0\r\nX-B: 2\r\n\r\n",
            fwd("GET", "/clunder0").fields(&[("X-B", "2")]),
        ),
    ]
}
