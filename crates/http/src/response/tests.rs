//! The parser end to end: whole input against byte-by-byte feeding, errors
//! by cause, limits, EOF, memory of heads.

use super::*;
use crate::memo::MEMO_MAX;

/// Parses `input` in one piece: the responses (with their end offsets) and how it ended.
fn parse_whole(
    input: &[u8],
    head: bool,
    limits: Limits,
) -> (Vec<(Response, usize)>, Result<(), ParseError>) {
    let mut p = ResponseParser::new(limits, head);
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        match p.parse(&input[at..]) {
            Ok(Parse::Partial) => return (out, Ok(())),
            Ok(Parse::Complete { consumed, response }) => {
                assert!(consumed > 0, "a response has at least one byte");
                at += consumed;
                out.push((response, at));
                if at == input.len() {
                    return (out, Ok(()));
                }
            }
            Err(e) => return (out, Err(e)),
        }
    }
}

/// Parses `input` whole, and checks that feeding it byte by byte (the state
/// machine only, never the fast path) ends the same way.
fn one(input: &str) -> Result<Parse, ParseError> {
    let whole = ResponseParser::new(Limits::default(), false).parse(input.as_bytes());
    let mut p = ResponseParser::new(Limits::default(), false);
    let mut bytewise = Ok(Parse::Partial);
    for (i, b) in input.as_bytes().iter().enumerate() {
        bytewise = p.parse(std::slice::from_ref(b));
        match bytewise {
            Ok(Parse::Partial) => {}
            Ok(Parse::Complete { consumed, response }) => {
                bytewise = Ok(Parse::Complete {
                    consumed: i + consumed,
                    response,
                });
                break;
            }
            Err(_) => break,
        }
    }
    assert_eq!(bytewise, whole, "{input:?} byte by byte");
    whole
}

fn resp(status: u16, keep_alive: bool, body_bytes: u64, wire_bytes: u64) -> Response {
    Response {
        status,
        keep_alive,
        body_bytes,
        wire_bytes,
    }
}

/// Parses a single complete response whole, and checks that byte-by-byte
/// feeding (the state machine only) stays Partial until the last byte completes it identically.
fn complete(input: &str, head: bool) -> Response {
    let bytes = input.as_bytes();
    let response = match ResponseParser::new(Limits::default(), head).parse(bytes) {
        Ok(Parse::Complete { consumed, response }) if consumed == bytes.len() => response,
        other => panic!("{input:?}: {other:?}"),
    };
    let mut p = ResponseParser::new(Limits::default(), head);
    let (last, init) = bytes.split_last().expect("non-empty response");
    for (i, b) in init.iter().enumerate() {
        assert_eq!(
            p.parse(std::slice::from_ref(b)),
            Ok(Parse::Partial),
            "{input:?} byte {i}"
        );
    }
    assert_eq!(
        p.parse(std::slice::from_ref(last)),
        Ok(Parse::Complete {
            consumed: 1,
            response
        }),
        "{input:?}"
    );
    response
}

#[test]
fn complete_responses_table() {
    let cases: &[(&str, bool, u16, bool, u64)] = &[
        ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false, 200, true, 5),
        ("HTTP/1.1 200 OK\r\nContent-Length: 0000000000000000012\r\n\r\n0123456789ab", false, 200, true, 12),
        ("HTTP/1.1 200 OK\r\nServer: nginx/1.24.0\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Type: text/html\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nabc", false, 200, true, 3),
        ("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", false, 404, true, 0),
        ("HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n", false, 200, true, 0),
        ("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", false, 200, true, 0),
        ("HTTP/1.1 200 OK\nContent-Length: 2\n\nok", false, 200, true, 2),
        ("HTTP/1.1 599 Whatever \t reason é\r\ncontent-length:1\r\n\r\nx", false, 599, true, 1),
        ("HTTP/1.1 200 OK\r\nCONTENT-LENGTH: \t 2 \t\r\n\r\nok", false, 200, true, 2),
        ("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", false, 200, true, 2),
        ("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false, 200, false, 0),
        ("HTTP/1.1 200 OK\r\nConnection: Upgrade, CLOSE\r\nContent-Length: 0\r\n\r\n", false, 200, false, 0),
        ("HTTP/1.1 200 OK\r\nConnection: closed\r\nContent-Length: 0\r\n\r\n", false, 200, true, 0),
        ("HTTP/1.1 200 OK\r\nConnection: clo se\r\nContent-Length: 0\r\n\r\n", false, 200, true, 0),
        ("HTTP/1.1 200 OK\r\nX-Connection: close\r\nContent-Length: 0\r\n\r\n", false, 200, true, 0),
        ("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", false, 200, false, 1),
        ("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx", false, 200, true, 1),
        ("HTTP/1.0 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 1\r\n\r\nx", false, 200, false, 1),
        ("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", false, 204, true, 0),
        ("HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", false, 304, true, 0),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", true, 200, true, 0),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", true, 200, true, 0),
        ("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", false, 200, true, 1),
        ("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", false, 201, true, 0),
        ("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", false, 101, false, 0),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", false, 200, true, 5),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n1;a=b;c=\"d e\"\r\nx\r\nA \r\n0123456789\r\n0\r\nT: 1\r\nU:\r\n\r\n", false, 200, true, 11),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false, 200, true, 0),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: ,chunked,\r\n\r\n0\r\n\n", false, 200, true, 0),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n00000000000000000000001\r\nx\r\n0\r\n\r\n", false, 200, true, 1),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n", false, 200, false, 0),
        // Any list holding `close` closes, wherever keep-alive stands.
        ("HTTP/1.1 200 OK\r\nConnection: close, keep-alive\r\nContent-Length: 0\r\n\r\n", false, 200, false, 0),
        ("HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n", false, 200, false, 0),
        ("HTTP/1.1 200 OK\r\nConnection: close\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", false, 200, false, 0),
        ("HTTP/1.1 200 OK\r\nConnection: close, token, upgrade, token, keep-alive\r\nContent-Length: 0\r\n\r\n", false, 200, false, 0),
        ("HTTP/1.0 200 OK\r\nConnection: close, keep-alive\r\nContent-Length: 0\r\n\r\n", false, 200, false, 0),
        ("HTTP/1.0 200 OK\r\nConnection: close\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", false, 200, false, 0),
    ];
    for &(input, head, status, keep_alive, body) in cases {
        let r = complete(input, head);
        assert_eq!(
            r,
            resp(status, keep_alive, body, input.len() as u64),
            "{input:?}"
        );
    }
    // Multi-digit lengths through both paths.
    for len in [9usize, 10, 99, 612, 1000, 4097] {
        let input = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n{}",
            "b".repeat(len)
        );
        assert_eq!(
            complete(&input, false),
            resp(200, true, len as u64, input.len() as u64),
            "{len}"
        );
    }
}

/// RFC 9112 §6.3: a response whose transfer codings do not end in chunked
/// is read until the server closes; the list may span several field lines.
#[test]
fn transfer_codings_not_ending_in_chunked_are_read_until_close() {
    for head in [
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: deflate\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: Deflate\r\nConnection: keep-alive\r\n\r\n",
    ] {
        let input = format!("{head}5\r\nhello\r\n0\r\n\r\n");
        assert_eq!(one(&input), Ok(Parse::Partial), "{head:?}");
        let mut p = ResponseParser::new(Limits::default(), false);
        assert_eq!(p.parse(input.as_bytes()), Ok(Parse::Partial));
        let body = (input.len() - head.len()) as u64;
        assert_eq!(
            p.eof(),
            Ok(Some(resp(200, false, body, input.len() as u64))),
            "{head:?}"
        );
    }
    // Bodiless answers stay bodiless.
    for (input, head, status) in [
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            true,
            200,
        ),
        (
            "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: gzip\r\n\r\n",
            false,
            304,
        ),
    ] {
        let c = complete(input, head);
        assert_eq!(c, resp(status, true, 0, input.len() as u64), "{input:?}");
    }
    // One list over two lines that ends in chunked is chunked.
    let c = complete(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: deflate\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        false,
    );
    assert_eq!((c.status, c.keep_alive, c.body_bytes), (200, true, 2));
}

#[test]
fn close_delimited_body_ends_at_eof_and_never_keeps_alive() {
    for input in [
        "HTTP/1.1 200 OK\r\nServer: x\r\n\r\nbody until close",
        "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\nbody",
    ] {
        let mut p = ResponseParser::new(Limits::default(), false);
        assert_eq!(p.parse(input.as_bytes()), Ok(Parse::Partial));
        assert_eq!(p.parse(b"more"), Ok(Parse::Partial));
        let head_len = input.find("\r\n\r\n").unwrap() + 4;
        let body = (input.len() - head_len + 4) as u64;
        assert_eq!(
            p.eof(),
            Ok(Some(resp(200, false, body, input.len() as u64 + 4)))
        );
        assert!(!p.in_progress());
        assert_eq!(
            p.eof(),
            Ok(None),
            "parser starts over after the close-delimited response"
        );
    }
}

#[test]
fn pipelined_responses_complete_one_by_one_with_offsets() {
    let a = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let b = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
    let c = "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    let all = format!("{a}{b}{c}");
    let (got, end) = parse_whole(all.as_bytes(), false, Limits::default());
    assert_eq!(end, Ok(()));
    let (la, lb, lc) = (a.len(), b.len(), c.len());
    assert_eq!(
        got,
        vec![
            (resp(200, true, 2, la as u64), la),
            (resp(200, true, 3, lb as u64), la + lb),
            (resp(503, false, 0, lc as u64), la + lb + lc),
        ]
    );
}

#[test]
fn prefixes_are_partial() {
    let partial = [
        "",
        "H",
        "HTTP/1.",
        "HTTP/1.1",
        "HTTP/1.1 ",
        "HTTP/1.1 20",
        "HTTP/1.1 200",
        "HTTP/1.1 200 OK",
        "HTTP/1.1 200 OK\r",
        "HTTP/1.1 200 OK\r\n",
        "HTTP/1.1 200 OK\r\nContent-Len",
        "HTTP/1.1 200 OK\r\nContent-Length:",
        "HTTP/1.1 200 OK\r\nContent-Length: 1",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nx",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nTrailer: x\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r",
        "HTTP/1.1 100 Continue\r\n\r\n",
        "HTTP/1.1 200 OK\r\n\r\nclose-delimited",
    ];
    for input in partial {
        assert_eq!(one(input), Ok(Parse::Partial), "{input:?}");
    }
}

#[test]
fn malformed_responses_name_their_cause() {
    use ParseError::*;
    let cases: &[(&str, ParseError)] = &[
        ("XTTP/1.1 200 OK\r\n\r\n", BadVersion),
        ("HTTP/2 200 OK\r\n\r\n", BadVersion),
        ("HTTP/1.2 200 OK\r\n\r\n", BadVersion),
        ("HTTP/1.10 200 OK\r\n\r\n", BadVersion),
        ("HTTP/1.1  200 OK\r\n\r\n", BadStatus),
        ("http/1.1 200 OK\r\n\r\n", BadVersion),
        ("garbage\r\n\r\n", BadVersion),
        ("HTTP/1.1 20 OK\r\n\r\n", BadStatus),
        ("HTTP/1.1 2000 OK\r\n\r\n", BadStatus),
        ("HTTP/1.1 099 OK\r\n\r\n", BadStatus),
        ("HTTP/1.1 2x0 OK\r\n\r\n", BadStatus),
        ("HTTP/1.1 200 O\0K\r\n\r\n", BadReason),
        ("HTTP/1.1 200 OK\rX\n\r\n", BadLineEnding),
        ("HTTP/1.1 200 OK\r\nA: b\rX\r\n\r\n", BadLineEnding),
        ("HTTP/1.1 200 OK\r\n\rX", BadLineEnding),
        ("HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", BadHeaderName),
        ("HTTP/1.1 200 OK\r\nName : x\r\n\r\n", BadHeaderName),
        ("HTTP/1.1 200 OK\r\n: x\r\n\r\n", BadHeaderName),
        ("HTTP/1.1 200 OK\r\nNo-Colon\r\n\r\n", BadHeaderName),
        ("HTTP/1.1 200 OK\r\nN\u{e9}: x\r\n\r\n", BadHeaderName),
        ("HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", ObsFold),
        ("HTTP/1.1 200 OK\r\nA: b\r\n\tc\r\n\r\n", ObsFold),
        ("HTTP/1.1 200 OK\r\nA: b\0c\r\n\r\n", BadHeaderValue),
        ("HTTP/1.1 200 OK\r\nA: b\x7fc\r\n\r\n", BadHeaderValue),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            BadContentLength,
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n",
            BadContentLength,
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n",
            BadContentLength,
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 1,1\r\n\r\n",
            BadContentLength,
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n",
            BadContentLength,
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
            BadContentLength,
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\n",
            BadContentLength,
        ),
        // Lengths no body can reach (above 2^60 - 1): refused at once, not
        // waited on until the request times out.
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n",
            BadContentLength,
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 1152921504606846976\r\n\r\n",
            BadContentLength,
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            ConflictingLength,
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            ConflictingLength,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n",
            ConflictingLength,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
            UnsupportedTransferEncoding,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\n\r\n",
            UnsupportedTransferEncoding,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunk ed\r\n\r\n",
            UnsupportedTransferEncoding,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nx\r\n",
            BadChunkSize,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
            BadChunkSize,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n",
            BadChunkSize,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1 1\r\n",
            BadChunkSize,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",
            BadChunkSize,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
            BadChunkSize,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n",
            BadChunkSize,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;a\0\r\n",
            BadChunkExtension,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\rx",
            BadLineEnding,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy",
            BadChunkTerminator,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\rx",
            BadChunkTerminator,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nBad Trailer: x\r\n\r\n",
            BadHeaderName,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: \x01\r\n\r\n",
            BadHeaderValue,
        ),
    ];
    for &(input, want) in cases {
        assert_eq!(one(input), Err(want), "{input:?}");
    }
}

#[test]
fn any_wrong_byte_in_the_version_is_bad_version() {
    for at in 0..8 {
        for wrong in [b'x', b' ', b'\n', b'2', 0] {
            let mut v = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_vec();
            if v[at] == wrong || (at == 7 && wrong == b'0') {
                continue;
            }
            v[at] = wrong;
            let s = String::from_utf8(v).unwrap();
            assert_eq!(one(&s), Err(ParseError::BadVersion), "{s:?}");
        }
    }
}

#[test]
fn errors_stick_until_reset() {
    let mut p = ResponseParser::new(Limits::default(), false);
    assert_eq!(p.parse(b"XTTP"), Err(ParseError::BadVersion));
    assert_eq!(
        p.parse(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        Err(ParseError::BadVersion)
    );
    assert_eq!(p.eof(), Err(ParseError::BadVersion));
    p.reset();
    assert!(!p.in_progress());
    let r = p.parse(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    assert!(matches!(
        r,
        Ok(Parse::Complete {
            response: Response { status: 200, .. },
            ..
        })
    ));
}

/// A head seen before is recalled only when every byte matches: one
/// digit of Content-Length, of the status or of a framing value changed
/// (same length, so a comparison of lengths would not see it) changes
/// what the parser says; an identical head says the same again, also
/// after a reset and for a HEAD parser.
#[test]
fn a_remembered_head_is_recalled_only_byte_for_byte() {
    let head = |status: &str, cl: &str, conn: &str| {
        format!("HTTP/1.1 {status}\r\nServer: nginx\r\nContent-Length: {cl}\r\nConnection: {conn}\r\n\r\n")
    };
    let mut p = ResponseParser::new(Limits::default(), false);
    let answer = |p: &mut ResponseParser, h: String, body: &str| {
        let wire = format!("{h}{body}");
        match p.parse(wire.as_bytes()) {
            Ok(Parse::Complete { consumed, response }) => {
                assert_eq!(consumed, wire.len(), "{wire:?}");
                response
            }
            other => panic!("{wire:?}: {other:?}"),
        }
    };
    let a = answer(&mut p, head("200 OK", "13", "keep-alive"), "Hello, world!");
    let b = answer(&mut p, head("200 OK", "13", "keep-alive"), "Hello, world!");
    assert_eq!((a.status, a.body_bytes, a.keep_alive), (200, 13, true));
    assert_eq!((b.status, b.body_bytes, b.keep_alive), (200, 13, true));
    // Content-Length 13 -> 12: a recalled head would wait for 13 bytes.
    let c = answer(&mut p, head("200 OK", "12", "keep-alive"), "Hello, world");
    assert_eq!(c.body_bytes, 12);
    let c = answer(&mut p, head("200 OK", "12", "keep-alive"), "Hello, world");
    assert_eq!(c.body_bytes, 12);
    let d = answer(&mut p, head("503 OK", "12", "keep-alive"), "Hello, world");
    assert_eq!(d.status, 503);
    let e = answer(&mut p, head("503 OK", "12", "keep-aliv_"), "Hello, world");
    assert!(e.keep_alive, "an unknown token does not close");
    let f = answer(&mut p, head("503 OK", "12", "close\t\t\t "), "Hello, world");
    assert!(!f.keep_alive, "Connection: close");
    p.reset();
    let g = answer(&mut p, head("503 OK", "12", "close\t\t\t "), "Hello, world");
    assert_eq!((g.status, g.body_bytes, g.keep_alive), (503, 12, false));
    p.set_head(true);
    let h = answer(&mut p, head("503 OK", "12", "close\t\t\t "), "");
    assert_eq!((h.status, h.body_bytes), (503, 0), "HEAD: no body");
    // A head cut short is not a remembered one: the state machine waits.
    let mut q = ResponseParser::new(Limits::default(), false);
    let full = head("200 OK", "0", "keep-alive");
    answer(&mut q, full.clone(), "");
    assert_eq!(
        q.parse(&full.as_bytes()[..full.len() - 1]),
        Ok(Parse::Partial)
    );
    assert!(matches!(
        q.parse(b"\n"),
        Ok(Parse::Complete { consumed: 1, .. })
    ));
}

/// Heads longer than the memo's bound are read every time, and right.
#[test]
fn long_heads_are_not_remembered_and_still_parse() {
    let filler = "x".repeat(MEMO_MAX);
    let wire = format!("HTTP/1.1 200 OK\r\nX-Fill: {filler}\r\nContent-Length: 2\r\n\r\nhi");
    let mut p = ResponseParser::new(Limits::default(), false);
    for _ in 0..3 {
        match p.parse(wire.as_bytes()) {
            Ok(Parse::Complete { consumed, response }) => {
                assert_eq!((consumed, response.body_bytes), (wire.len(), 2));
            }
            other => panic!("{other:?}"),
        }
        assert!(p.memo.is_empty());
    }
}

#[test]
fn eof_reports_where_the_response_was_cut() {
    let cases: &[(&str, Option<Stage>)] = &[
        ("", None),
        ("HTTP/1.1 2", Some(Stage::Head)),
        ("HTTP/1.1 100 Continue\r\n\r\n", Some(Stage::Head)),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab",
            Some(Stage::Body),
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
            Some(Stage::Body),
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            Some(Stage::Chunked),
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
            Some(Stage::Chunked),
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: y\r\n",
            Some(Stage::Trailers),
        ),
    ];
    for &(input, stage) in cases {
        let mut p = ResponseParser::new(Limits::default(), false);
        assert_eq!(p.parse(input.as_bytes()), Ok(Parse::Partial), "{input:?}");
        assert_eq!(p.in_progress(), stage.is_some(), "{input:?}");
        let want = match stage {
            None => Ok(None),
            Some(stage) => Err(ParseError::UnexpectedEof { stage }),
        };
        assert_eq!(p.eof(), want, "{input:?}");
    }
}

#[test]
fn in_progress_follows_the_current_response_only() {
    let mut p = ResponseParser::new(Limits::default(), false);
    assert!(!p.in_progress());
    let both = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 2";
    let Ok(Parse::Complete { consumed, .. }) = p.parse(both) else {
        panic!("first response completes")
    };
    assert!(
        !p.in_progress(),
        "completed response leaves nothing in progress"
    );
    assert_eq!(p.parse(&both[consumed..]), Ok(Parse::Partial));
    assert!(p.in_progress());
    p.reset();
    assert!(!p.in_progress());
}

#[test]
fn header_block_at_the_byte_limit_passes_and_one_more_fails() {
    let input = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    let exact = Limits {
        max_header_bytes: input.len(),
        ..Limits::default()
    };
    assert!(matches!(
        ResponseParser::new(exact, false).parse(input.as_bytes()),
        Ok(Parse::Complete { .. })
    ));
    let short = Limits {
        max_header_bytes: input.len() - 1,
        ..Limits::default()
    };
    assert_eq!(
        ResponseParser::new(short, false).parse(input.as_bytes()),
        Err(ParseError::HeaderTooLarge)
    );
    // A head still arriving stays Partial until it passes the limit.
    let mut p = ResponseParser::new(short, false);
    assert_eq!(
        p.parse(&input.as_bytes()[..input.len() - 1]),
        Ok(Parse::Partial)
    );
    assert_eq!(p.parse(b"\n"), Err(ParseError::HeaderTooLarge));
}

#[test]
fn default_limit_refuses_an_endless_header_line() {
    let mut p = ResponseParser::new(Limits::default(), false);
    assert_eq!(p.parse(b"HTTP/1.1 200 OK\r\nX: "), Ok(Parse::Partial));
    let filler = vec![b'a'; 1024];
    let mut result = Ok(Parse::Partial);
    for _ in 0..65 {
        result = p.parse(&filler);
        if result.is_err() {
            break;
        }
    }
    assert_eq!(result, Err(ParseError::HeaderTooLarge));
}

#[test]
fn header_count_limit_applies_to_head_and_to_trailers() {
    let limits = Limits {
        max_headers: 2,
        ..Limits::default()
    };
    let two = "HTTP/1.1 200 OK\r\nA: 1\r\nContent-Length: 0\r\n\r\n";
    assert!(matches!(
        ResponseParser::new(limits, false).parse(two.as_bytes()),
        Ok(Parse::Complete { .. })
    ));
    let three = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(
        ResponseParser::new(limits, false).parse(three.as_bytes()),
        Err(ParseError::TooManyHeaders)
    );
    let trailers = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nB: 2\r\n\r\n0\r\nT: 1\r\nU: 2\r\nV: 3\r\n\r\n";
    assert_eq!(
        ResponseParser::new(limits, false).parse(trailers.as_bytes()),
        Err(ParseError::TooManyHeaders)
    );
}

#[test]
fn trailer_section_and_chunk_line_have_their_own_byte_limit() {
    let limits = Limits {
        max_header_bytes: 48,
        ..Limits::default()
    };
    let ok = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: 1\r\n\r\n";
    assert!(matches!(
        ResponseParser::new(limits, false).parse(ok.as_bytes()),
        Ok(Parse::Complete { .. })
    ));
    let long_trailer = format!(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: {}\r\n\r\n",
        "x".repeat(50)
    );
    assert_eq!(
        ResponseParser::new(limits, false).parse(long_trailer.as_bytes()),
        Err(ParseError::HeaderTooLarge)
    );
    let long_ext = format!(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;{}\r\nx\r\n0\r\n\r\n",
        "e".repeat(50)
    );
    assert_eq!(
        ResponseParser::new(limits, false).parse(long_ext.as_bytes()),
        Err(ParseError::ChunkLineTooLong)
    );
}

#[test]
fn wire_bytes_include_interim_heads_and_chunk_framing() {
    let interim = "HTTP/1.1 100 Continue\r\n\r\n";
    let last = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n";
    let r = complete(&format!("{interim}{last}"), false);
    assert_eq!(r, resp(200, true, 2, (interim.len() + last.len()) as u64));
}

#[test]
fn upgrade_response_ends_parsing_for_the_connection() {
    let input = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n\x81\x05hello";
    let mut p = ResponseParser::new(Limits::default(), false);
    let Ok(Parse::Complete { consumed, response }) = p.parse(input) else {
        panic!("101 completes")
    };
    assert_eq!(consumed, input.len() - 7);
    assert!(!response.keep_alive);
}

#[test]
fn set_head_switches_body_rules_for_the_next_response() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n";
    let mut p = ResponseParser::new(Limits::default(), false);
    assert_eq!(p.parse(input), Ok(Parse::Partial));
    p.reset();
    p.set_head(true);
    assert!(
        matches!(p.parse(input), Ok(Parse::Complete { consumed, .. }) if consumed == input.len())
    );
}

/// RFC 9112 §7.1: the chunk-size line and the end of chunk data are CRLF;
/// a bare LF there is an error (as in llhttp), wherever the input is split.
#[test]
fn chunk_framing_requires_crlf() {
    use ParseError::*;
    let te = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    let cases: &[(&str, ParseError)] = &[
        ("3\nabc\n0\n\n", BadLineEnding),
        ("3\r\nabc\n0\r\n\r\n", BadChunkTerminator),
        ("3\r\nabc\r\n0\n\r\n", BadLineEnding),
        ("3 \nabc\r\n0\r\n\r\n", BadLineEnding),
        ("3;ext\nabc\r\n0\r\n\r\n", BadLineEnding),
        ("3;ext=1 \nabc\r\n0\r\n\r\n", BadLineEnding),
        ("3\r\nabc\r\n0;e\n\r\n", BadLineEnding),
        ("3\r\nabc\r\r\n", BadChunkTerminator),
    ];
    for &(chunks, want) in cases {
        assert_eq!(one(&format!("{te}{chunks}")), Err(want), "{chunks:?}");
    }
}

/// Empty lines before a status line (after a body, after a 1xx) are
/// skipped, as llhttp and httparse do, and count as the next response's bytes.
#[test]
fn stray_empty_lines_between_responses_are_skipped() {
    let a = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let b = "\r\nHTTP/1.1 204 No Content\r\n\r\n";
    let c = "\n\r\n\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n";
    let all = format!("{a}{b}{c}");
    let (got, end) = parse_whole(all.as_bytes(), false, Limits::default());
    assert_eq!(end, Ok(()));
    let (la, lb, lc) = (a.len(), b.len(), c.len());
    assert_eq!(
        got,
        vec![
            (resp(200, true, 2, la as u64), la),
            (resp(204, true, 0, lb as u64), la + lb),
            (resp(200, true, 1, lc as u64), la + lb + lc),
        ]
    );
    let after_continue =
        "HTTP/1.1 100 Continue\r\n\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx";
    assert_eq!(
        complete(after_continue, false),
        resp(200, true, 1, after_continue.len() as u64)
    );
    let lead = "\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(complete(lead, false), resp(200, true, 0, lead.len() as u64));
    assert_eq!(
        one("\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        Ok(Parse::Complete {
            consumed: 40,
            response: resp(200, true, 0, 40)
        })
    );
    // A CR must still be followed by LF; other bytes are still not a status line.
    assert_eq!(
        one("\rHTTP/1.1 200 OK\r\n\r\n"),
        Err(ParseError::BadLineEnding)
    );
    assert_eq!(one("\r\n \r\n"), Err(ParseError::BadVersion));
}

#[test]
fn eof_after_stray_empty_lines_cuts_nothing_unless_a_1xx_came_first() {
    for (input, want) in [
        ("\r\n", Ok(None)),
        ("\r\n\n\r", Ok(None)),
        (
            "HTTP/1.1 100 Continue\r\n\r\n\r\n",
            Err(ParseError::UnexpectedEof { stage: Stage::Head }),
        ),
    ] {
        let mut p = ResponseParser::new(Limits::default(), false);
        assert_eq!(p.parse(input.as_bytes()), Ok(Parse::Partial), "{input:?}");
        assert!(p.in_progress(), "{input:?}");
        assert_eq!(p.eof(), want, "{input:?}");
    }
    // After a clean end the parser reads a new connection from scratch.
    let mut p = ResponseParser::new(Limits::default(), false);
    assert_eq!(p.parse(b"\r\n"), Ok(Parse::Partial));
    assert_eq!(p.eof(), Ok(None));
    assert!(!p.in_progress());
    let r = p.parse(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    assert!(
        matches!(r, Ok(Parse::Complete { consumed: 38, .. })),
        "{r:?}"
    );
}

#[test]
fn stray_empty_lines_count_toward_the_head_limit() {
    let limits = Limits {
        max_header_bytes: 48,
        ..Limits::default()
    };
    let head = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"; // 38 bytes
    let fits = format!("{}{head}", "\r\n".repeat(5));
    assert!(matches!(
        ResponseParser::new(limits, false).parse(fits.as_bytes()),
        Ok(Parse::Complete { .. })
    ));
    let over = format!("{}{head}", "\r\n".repeat(6));
    assert_eq!(
        ResponseParser::new(limits, false).parse(over.as_bytes()),
        Err(ParseError::HeaderTooLarge)
    );
    let mut p = ResponseParser::new(limits, false);
    let endless = "\r\n".repeat(100);
    assert_eq!(p.parse(endless.as_bytes()), Err(ParseError::HeaderTooLarge));
}

#[test]
fn the_largest_lengths_are_read_without_overflow() {
    // 2^60 - 1, in decimal (leading zeros too) and in hex.
    let mut p = ResponseParser::new(Limits::default(), false);
    assert_eq!(
        p.parse(b"HTTP/1.1 200 OK\r\nContent-Length: 01152921504606846975\r\n\r\n"),
        Ok(Parse::Partial)
    );
    assert_eq!(p.parse(&[0u8; 4096]), Ok(Parse::Partial));
    assert_eq!(
        p.eof(),
        Err(ParseError::UnexpectedEof { stage: Stage::Body })
    );
    let mut p = ResponseParser::new(Limits::default(), false);
    assert_eq!(
        p.parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0fffffffffffffff\r\n"),
        Ok(Parse::Partial)
    );
    let mut p = ResponseParser::new(Limits::default(), false);
    assert_eq!(
        p.parse(b"HTTP/1.1 200 OK\r\nContent-Length: 1152921504606846975\r\n\r\n"),
        Ok(Parse::Partial)
    );
    assert_eq!(p.parse(&[0u8; 4096]), Ok(Parse::Partial));
    assert_eq!(
        p.eof(),
        Err(ParseError::UnexpectedEof { stage: Stage::Body })
    );
}

#[test]
fn parse_body_hands_over_the_payload_at_every_split() {
    let wire: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\n";
    for split in 0..wire.len() {
        let mut p = ResponseParser::new(Limits::default(), false);
        let mut body = Vec::new();
        let mut done = Vec::new();
        for mut piece in [&wire[..split], &wire[split..]] {
            while let Parse::Complete { consumed, response } =
                p.parse_body(piece, |b| body.extend_from_slice(b)).unwrap()
            {
                done.push(response.body_bytes);
                piece = &piece[consumed..];
            }
        }
        assert_eq!(done, [5, 5], "split {split}");
        assert_eq!(body, b"helloabcde", "split {split}");
    }
}

/// A 204 or 304 has no body whatever its fields say; bytes after its head
/// that do not start a response are that body, named as such rather than as
/// a bad status line, however the input is split.
#[test]
fn a_body_after_a_bodiless_status_is_named() {
    for head in [
        "HTTP/1.1 204 No Content\r\n\r\n",
        "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
        "HTTP/1.1 204 No Content\r\nServer: x\r\n\r\n\r\n",
    ] {
        let status: u16 = head[9..12].parse().unwrap();
        for body in ["hello", "Hello", "HTTP/1.1 2"] {
            let input = format!("{head}{body}");
            for at in 0..=input.len() {
                let (a, b) = input.as_bytes().split_at(at);
                let mut p = ResponseParser::new(Limits::default(), false);
                let mut statuses = Vec::new();
                let mut end = Ok(());
                'pieces: for mut piece in [a, b] {
                    loop {
                        match p.parse(piece) {
                            Ok(Parse::Partial) => break,
                            Ok(Parse::Complete { consumed, response }) => {
                                statuses.push(response.status);
                                piece = &piece[consumed..];
                            }
                            Err(e) => {
                                end = Err(e);
                                break 'pieces;
                            }
                        }
                    }
                }
                let want = if body.starts_with("HTTP/1.1 ") {
                    Ok(()) // a response begins: nothing wrong yet
                } else {
                    Err(ParseError::BodyAfterBodilessStatus)
                };
                assert_eq!(
                    (&statuses[..], end),
                    (&[status][..], want),
                    "{input:?} split at {at}"
                );
            }
        }
    }
    // After other responses, the same bytes are a bad status line.
    let (got, end) = parse_whole(
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nhello",
        false,
        Limits::default(),
    );
    assert_eq!((got.len(), end), (1, Err(ParseError::BadVersion)));
    // A response that follows properly clears it.
    let (got, end) = parse_whole(
        b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nhello",
        false,
        Limits::default(),
    );
    assert_eq!((got.len(), end), (2, Err(ParseError::BadVersion)));
}
