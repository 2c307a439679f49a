//! The parser gives the same outcome however the input is split: whole, in
//! two pieces at every index, byte by byte, and (for short inputs) in three
//! pieces at every pair of indices. This is what lets the engine hand each
//! receive buffer back to the kernel right after parsing it.

use xload_http::{Limits, Parse, ParseError, Response, ResponseParser};

/// Everything observable from feeding a byte stream and then closing it.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    /// Each response with the stream offset where it ended.
    responses: Vec<(Response, usize)>,
    /// The first error, with the stream offset of the piece that raised it
    /// removed (offsets depend on the split), or none.
    error: Option<ParseError>,
    /// `in_progress()` after the last piece (no error case).
    in_progress: bool,
    /// What `eof()` said after the last piece.
    eof: Result<Option<Response>, ParseError>,
}

fn drive<'a>(pieces: impl IntoIterator<Item = &'a [u8]>, head: bool, limits: Limits) -> Outcome {
    let mut p = ResponseParser::new(limits, head);
    let mut responses = Vec::new();
    let mut offset = 0;
    let mut error = None;
    'pieces: for piece in pieces {
        let mut rest = piece;
        loop {
            match p.parse(rest) {
                Ok(Parse::Partial) => {
                    offset += rest.len();
                    break;
                }
                Ok(Parse::Complete { consumed, response }) => {
                    assert!(
                        consumed > 0 && consumed <= rest.len(),
                        "consumed {consumed} of {}",
                        rest.len()
                    );
                    offset += consumed;
                    responses.push((response, offset));
                    if !response.keep_alive {
                        break 'pieces; // as the engine does: the connection is closed, later bytes are not parsed
                    }
                    rest = &rest[consumed..];
                    if rest.is_empty() {
                        break;
                    }
                }
                Err(e) => {
                    error = Some(e);
                    break 'pieces;
                }
            }
        }
    }
    let in_progress = error.is_none() && p.in_progress();
    let eof = p.eof();
    Outcome {
        responses,
        error,
        in_progress,
        eof,
    }
}

struct Case {
    name: &'static str,
    input: Vec<u8>,
    head: bool,
    limits: Limits,
    /// (status, keep_alive, body_bytes) of each response the whole input yields.
    want: Vec<(u16, bool, u64)>,
    want_error: Option<ParseError>,
}

fn case(name: &'static str, input: &str, want: &[(u16, bool, u64)]) -> Case {
    Case {
        name,
        input: input.as_bytes().to_vec(),
        head: false,
        limits: Limits::default(),
        want: want.to_vec(),
        want_error: None,
    }
}

const NGINX_200: &str = "HTTP/1.1 200 OK\r\nServer: nginx/1.24.0\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Type: text/html\r\nContent-Length: 12\r\nConnection: keep-alive\r\n\r\nhello world\n";
const INDEX_HEAD: &str = "HTTP/1.1 200 OK\r\nServer: nginx/1.24.0\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Type: text/html\r\nContent-Length: 612\r\nLast-Modified: Tue, 11 Apr 2023 01:45:34 GMT\r\nConnection: keep-alive\r\nETag: \"6434bbbe-264\"\r\nAccept-Ranges: bytes\r\n\r\n";
const CHUNKED: &str = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5;name=val\r\nhello\r\n6 ; a=\"b c\"\r\n world\r\nA\r\n0123456789\r\n0;last\r\nX-Trailer: t\r\nExpires: never\r\n\r\n";

fn cases() -> Vec<Case> {
    let mut v = vec![
        case("content-length", NGINX_200, &[(200, true, 12)]),
        case("chunked with extensions and trailers", CHUNKED, &[(200, true, 21)]),
        case("close-delimited", "HTTP/1.1 200 OK\r\nServer: x\r\n\r\nbody that ends at close", &[]),
        case("204", "HTTP/1.1 204 No Content\r\nServer: x\r\nContent-Length: 7\r\n\r\n", &[(204, true, 0)]),
        case("304", "HTTP/1.1 304 Not Modified\r\nETag: \"abc\"\r\n\r\n", &[(304, true, 0)]),
        case(
            "100-continue then 200",
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
            &[(200, true, 3)],
        ),
        case("HTTP/1.0 closes by default", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", &[(200, false, 2)]),
        case(
            "HTTP/1.0 keep-alive",
            "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok",
            &[(200, true, 2)],
        ),
        case(
            "connection close, bare LF, empty reason, tabs",
            "HTTP/1.1 503 \nConnection:\tfoo ,  close \t\nContent-Length:\t0\t\n\n",
            &[(503, false, 0)],
        ),
        case(
            "look-alike header names are not framing headers",
            "HTTP/1.1 200 OK\r\nSet-Cookie: close\r\nKeep-Alive: close\r\nContent-Lengts: 5\r\nTransfer-Encodinf: chunked\r\nX: Content-Length: 9\r\nContent-Length: 2\r\n\r\nok",
            &[(200, true, 2)],
        ),
        case("no reason phrase", "HTTP/1.1 404\r\ncontent-length: 1\r\n\r\nx", &[(404, true, 1)]),
        case(
            "101 ends the connection",
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x01\x02",
            &[(101, false, 0)],
        ),
        case(
            "truncated chunked body",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nonly part",
            &[],
        ),
        // Error responses: the error must not depend on the split either.
        case("garbage", "garbage\r\n\r\n", &[]),
        case("obs-fold", "HTTP/1.1 200 OK\r\nA: b\r\n  c\r\nContent-Length: 0\r\n\r\n", &[]),
        case("CL and TE", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", &[]),
        case("bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n", &[]),
        case("NUL in value", "HTTP/1.1 200 OK\r\nContent-Type: te\0xt\r\nContent-Length: 0\r\n\r\n", &[]),
        case("bad content-length", "HTTP/1.1 200 OK\r\nContent-Length: 12a\r\n\r\n", &[]),
        case(
            "stray CRLF after a body and after 100 Continue",
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok\r\nHTTP/1.1 100 Continue\r\n\r\n\r\n\nHTTP/1.1 204 No Content\r\n\r\n",
            &[(200, true, 2), (204, true, 0)],
        ),
        case("stray CRLF then close", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok\r\n\r\n", &[(200, true, 2)]),
        case(
            "bare LF in chunk framing (llhttp)",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\n0\n\n",
            &[],
        ),
        case(
            "bare LF after chunk data",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\n0\r\n\r\n",
            &[],
        ),
    ];
    for c in &mut v {
        c.want_error = match c.name {
            "garbage" => Some(ParseError::BadVersion),
            "obs-fold" => Some(ParseError::ObsFold),
            "CL and TE" => Some(ParseError::ConflictingLength),
            "bad chunk size" => Some(ParseError::BadChunkSize),
            "NUL in value" => Some(ParseError::BadHeaderValue),
            "bad content-length" => Some(ParseError::BadContentLength),
            "bare LF in chunk framing (llhttp)" => Some(ParseError::BadLineEnding),
            "bare LF after chunk data" => Some(ParseError::BadChunkTerminator),
            _ => None,
        };
    }
    let mut head = case(
        "HEAD responses pipelined",
        "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        &[(200, true, 0), (200, true, 0)],
    );
    head.head = true;
    v.push(head);
    let pipelined = format!(
        "{NGINX_200}{CHUNKED}HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx"
    );
    v.push(Case {
        name: "pipelined: CL, chunked, empty, close",
        input: pipelined.into_bytes(),
        head: false,
        limits: Limits::default(),
        want: vec![
            (200, true, 12),
            (200, true, 21),
            (404, true, 0),
            (200, false, 1),
        ],
        want_error: None,
    });
    v.push(Case {
        name: "nginx index page: 8 fields, 612-byte body",
        input: [INDEX_HEAD.as_bytes(), &[b'x'; 612]].concat(),
        head: false,
        limits: Limits::default(),
        want: vec![(200, true, 612)],
        want_error: None,
    });
    v.push(Case {
        name: "head over a small byte limit",
        input: NGINX_200.as_bytes().to_vec(),
        head: false,
        limits: Limits {
            max_header_bytes: 60,
            max_headers: 128,
        },
        want: vec![],
        want_error: Some(ParseError::HeaderTooLarge),
    });
    v.push(Case {
        name: "chunk extension over a small byte limit",
        input: format!(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;{}\r\nx\r\n0\r\n\r\n",
            "e".repeat(60)
        )
        .into_bytes(),
        head: false,
        limits: Limits {
            max_header_bytes: 48,
            max_headers: 128,
        },
        want: vec![],
        want_error: Some(ParseError::ChunkLineTooLong),
    });
    v.push(Case {
        name: "too many headers",
        input: NGINX_200.as_bytes().to_vec(),
        head: false,
        limits: Limits {
            max_header_bytes: 1024,
            max_headers: 4,
        },
        want: vec![],
        want_error: Some(ParseError::TooManyHeaders),
    });
    v
}

#[test]
fn whole_input_gives_the_expected_responses() {
    for c in cases() {
        let out = drive([c.input.as_slice()], c.head, c.limits);
        let got: Vec<(u16, bool, u64)> = out
            .responses
            .iter()
            .map(|(r, _)| (r.status, r.keep_alive, r.body_bytes))
            .collect();
        assert_eq!(got, c.want, "{}", c.name);
        assert_eq!(out.error, c.want_error, "{}", c.name);
        // Wire bytes add up to the stream offsets.
        let mut prev = 0;
        for (r, end) in &out.responses {
            assert_eq!(r.wire_bytes, (end - prev) as u64, "{}", c.name);
            prev = *end;
        }
    }
}

#[test]
fn close_delimited_and_truncated_cases_end_at_eof() {
    let by_name = |n: &str| {
        cases()
            .into_iter()
            .find(|c| c.name == n)
            .expect("case exists")
    };
    let c = by_name("close-delimited");
    let out = drive([c.input.as_slice()], false, c.limits);
    let body = "body that ends at close".len() as u64;
    assert_eq!(
        out.eof,
        Ok(Some(Response {
            status: 200,
            keep_alive: false,
            body_bytes: body,
            wire_bytes: c.input.len() as u64
        }))
    );
    let t = by_name("truncated chunked body");
    let out = drive([t.input.as_slice()], false, t.limits);
    assert_eq!(
        out.eof,
        Err(ParseError::UnexpectedEof {
            stage: xload_http::Stage::Chunked
        })
    );
}

#[test]
fn every_two_piece_split_matches_whole_input() {
    for c in cases() {
        let whole = drive([c.input.as_slice()], c.head, c.limits);
        for at in 0..=c.input.len() {
            let (a, b) = c.input.split_at(at);
            let split = drive([a, b], c.head, c.limits);
            assert_eq!(split, whole, "{}: split at {at}", c.name);
        }
    }
}

#[test]
fn byte_by_byte_feeding_matches_whole_input() {
    for c in cases() {
        let whole = drive([c.input.as_slice()], c.head, c.limits);
        let bytes = drive(c.input.chunks(1), c.head, c.limits);
        assert_eq!(bytes, whole, "{}: byte by byte", c.name);
    }
}

#[test]
fn every_three_piece_split_of_short_inputs_matches_whole_input() {
    for c in cases().into_iter().filter(|c| c.input.len() <= 120) {
        let whole = drive([c.input.as_slice()], c.head, c.limits);
        for i in 0..=c.input.len() {
            for j in i..=c.input.len() {
                let split = drive(
                    [&c.input[..i], &c.input[i..j], &c.input[j..]],
                    c.head,
                    c.limits,
                );
                assert_eq!(split, whole, "{}: split at {i} and {j}", c.name);
            }
        }
    }
}

#[test]
fn fixed_size_pieces_match_whole_input() {
    for c in cases() {
        let whole = drive([c.input.as_slice()], c.head, c.limits);
        for size in [2, 3, 7, 8, 13, 16, 64] {
            assert_eq!(
                drive(c.input.chunks(size), c.head, c.limits),
                whole,
                "{}: pieces of {size}",
                c.name
            );
        }
    }
}
