//! The request scanner on request cases of llhttp's test suite
//! (test/request/*.md), each fed whole, byte by byte and at every two-piece
//! split: the same requests and the same verdict whatever the split.
//!
//! llhttp's cases are written with LF line ends that its harness turns into
//! CRLF; here they are spelled out. Requests that llhttp parses without a
//! Host field carry one here: RFC 9112 §3.2 makes a server answer 400 to an
//! HTTP/1.1 request without it, which llhttp leaves to its user.

use xload_http::{BadRequest, RequestScanner, ScannedRequest};

/// What a stream gave: the requests (keep-alive flag of each) and how it ended.
type Outcome = (Vec<bool>, Result<(), BadRequest>);

fn scan<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> Outcome {
    let mut s = RequestScanner::new(b"/stats");
    let mut out = Vec::new();
    for piece in pieces {
        if let Err(e) = s.feed(piece, |r: ScannedRequest| {
            if !r.continue_only {
                out.push(r.keep_alive)
            }
        }) {
            return (out, Err(e));
        }
    }
    (out, Ok(()))
}

/// The outcome of `input` fed whole, after checking that every other way of
/// feeding it gives the same.
fn outcome(name: &str, input: &[u8]) -> Outcome {
    let whole = scan([input]);
    assert_eq!(scan(input.chunks(1)), whole, "{name}: byte by byte");
    for at in 0..=input.len() {
        let (a, b) = input.split_at(at);
        assert_eq!(scan([a, b]), whole, "{name}: split at {at}");
    }
    whole
}

/// Cases that must be answered: their requests' keep-alive flags, in order.
const ANSWERED: &[(&str, &[u8], &[bool])] = &[
    (
        "Prefix newline",
        b"\r\nGET /test HTTP/1.1\r\nHost: a\r\n\r\n",
        &[true],
    ),
    (
        "CRLF between requests, implicit keep-alive",
        b"POST / HTTP/1.1\r\nHost: www.example.com\r\n\
          Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 4\r\n\r\n\
          q=42\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
        &[true, true],
    ),
    (
        "Should parse multiple events",
        b"POST /aaa HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nAAA\r\n\
          PUT /bbb HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nBBBB\r\n\
          PATCH /ccc HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nCCCCC",
        &[true, true, true],
    ),
    (
        "Parse chunks with lowercase size",
        b"PUT /url HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
          a\r\n0123456789\r\n0\r\n\r\n",
        &[true],
    ),
    (
        "Parse chunks with uppercase size",
        b"PUT /url HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
          A\r\n0123456789\r\n0\r\n\r\n",
        &[true],
    ),
    (
        "Two chunks and triple zero prefixed end chunk",
        b"POST /two_chunks_mult_zero_end HTTP/1.1\r\nHost: a\r\n\
          Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n000\r\n\r\n",
        &[true],
    ),
    (
        "Trailing headers",
        b"POST /chunked_w_trailing_headers HTTP/1.1\r\nHost: a\r\n\
          Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\
          Vary: *\r\nContent-Type: text/plain\r\n\r\n",
        &[true],
    ),
    (
        "Chunk extensions",
        b"POST /chunked_w_unicorns_after_length HTTP/1.1\r\nHost: a\r\n\
          Transfer-Encoding: chunked\r\n\r\n\
          5;ilovew3;somuchlove=aretheseparametersfor;another=withvalue\r\nhello\r\n\
          6;blahblah;blah\r\n world\r\n0\r\n\r\n",
        &[true],
    ),
    (
        "Chunk extensions quoting",
        b"POST /chunked_w_unicorns_after_length HTTP/1.1\r\nHost: a\r\n\
          Transfer-Encoding: chunked\r\n\r\n\
          5;ilovew3=\"I \\\"love\\\"; \\\\extensions\\\\\";somuchlove=\"aretheseparametersfor\";blah;foo=bar\r\n\
          hello\r\n6;blahblah;blah\r\n world\r\n0\r\n\r\n",
        &[true],
    ),
    (
        // RFC 9112 §7.1.1: BWS is allowed around `;` and `=` of an extension.
        "whitespace around an extension's ; and =",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
          5 ;\tname = \"v\" ; other\r\nhello\r\n0\r\n\r\n",
        &[true],
    ),
    (
        // Any list holding `close` closes (RFC 9112 §9.6), wherever
        // keep-alive stands in it; llhttp sets both flags.
        "Parsing multiple tokens: Sample",
        b"PUT /url HTTP/1.1\r\nHost: a\r\nConnection: close, token, upgrade, token, keep-alive\r\n\r\n",
        &[false],
    ),
    (
        "close then keep-alive on two lines",
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n",
        &[false],
    ),
    (
        "HTTP/1.0 keep-alive then close",
        b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
        &[false],
    ),
    (
        "Restarting when keep-alive is explicitly",
        b"PUT /url HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n\
          PUT /url HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n",
        &[true, true],
    ),
    (
        "POST with `chunked` as last transfer-encoding",
        b"POST /post_identity_body_world?q=search#hey HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\
          Transfer-Encoding: deflate, chunked\r\n\r\n5\r\nWorld\r\n0\r\n\r\n",
        &[true],
    ),
    (
        "POST with `chunked` as last transfer-encoding (multiple headers)",
        b"POST /post_identity_body_world?q=search#hey HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\
          Transfer-Encoding: deflate\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nWorld\r\n0\r\n\r\n",
        &[true],
    ),
    (
        "HTTP/1.0 needs no Host; tabs and obs-text are value bytes",
        b"GET / HTTP/1.0\r\nX-Note: a\tb \xe9\r\n\r\n",
        &[false],
    ),
];

/// Cases that must be refused: the error, after the requests before it.
const REFUSED: &[(&str, &[u8], BadRequest)] = &[
    (
        "Space after chunk header",
        b"PUT /url HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
          a \r\n0123456789\r\n0\r\n\r\n",
        BadRequest::Chunk,
    ),
    (
        "No semicolon before chunk extensions",
        b"POST /chunked_w_unicorns_after_length HTTP/1.1\r\nHost: localhost\r\n\
          Transfer-encoding: chunked\r\n\r\n2 erfrferferf\r\naa\r\n0 rrrr\r\n\r\n",
        BadRequest::Chunk,
    ),
    (
        "No extension after semicolon",
        b"POST /chunked_w_unicorns_after_length HTTP/1.1\r\nHost: localhost\r\n\
          Transfer-encoding: chunked\r\n\r\n2;\r\naa\r\n0\r\n\r\n",
        BadRequest::Chunk,
    ),
    (
        "Unbalanced chunk extensions quoting",
        b"POST /chunked_w_unicorns_after_length HTTP/1.1\r\nHost: a\r\n\
          Transfer-Encoding: chunked\r\n\r\n\
          5;ilovew3=\"abc\";somuchlove=\"def; ghi\r\nhello\r\n\
          6;blahblah;blah\r\n world\r\n0\r\n\r\n",
        BadRequest::Chunk,
    ),
    (
        "Validate chunk parameters",
        b"PUT /url HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
          3 \n  \r\n\nfoo\r\n\r\n\r\n",
        BadRequest::Chunk,
    ),
    (
        "Chunk header not terminated by CRLF",
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close \r\nTransfer-Encoding: chunked \r\n\r\n\
          5\r\r;ABCD\r\n34\r\nE\r\n0\r\n\r\n",
        BadRequest::Chunk,
    ),
    (
        "Chunk data not terminated by CRLF",
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close \r\nTransfer-Encoding: chunked \r\n\r\n\
          5\r\nABCDE0\r\n\r\n",
        BadRequest::Chunk,
    ),
    (
        "Missing last-chunk",
        b"PUT /url HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nfoo\r\n\r\n\r\n",
        BadRequest::Chunk,
    ),
    (
        "an extension value that is neither token nor quoted string",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;a=\r\nhello\r\n0\r\n\r\n",
        BadRequest::Chunk,
    ),
    (
        "whitespace before the size line's end",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;a \r\nhello\r\n0\r\n\r\n",
        BadRequest::Chunk,
    ),
    (
        "POST with `chunked` before other transfer coding names",
        b"POST /post_identity_body_world?q=search#hey HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\
          Transfer-Encoding: chunked, deflate\r\n\r\nWorld",
        BadRequest::TransferEncoding,
    ),
    (
        "POST with `chunked` and duplicate transfer-encoding",
        b"POST /post_identity_body_world?q=search#hey HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\
          Transfer-Encoding: chunked\r\nTransfer-Encoding: deflate\r\n\r\nWorld",
        BadRequest::TransferEncoding,
    ),
    (
        "POST with `chunkedchunked` as transfer-encoding",
        b"POST /post_identity_body_world?q=search#hey HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\
          Transfer-Encoding: chunkedchunked\r\n\r\n5\r\nWorld\r\n0\r\n\r\n",
        BadRequest::TransferEncoding,
    ),
    (
        "Ignoring `pigeons`",
        b"PUT /url HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: pigeons\r\n\r\n",
        BadRequest::TransferEncoding,
    ),
    (
        "POST with `Transfer-Encoding` and `Content-Length`",
        b"POST /post_identity_body_world?q=search#hey HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\
          Transfer-Encoding: identity\r\nContent-Length: 5\r\n\r\nWorld",
        BadRequest::TransferEncoding,
    ),
    (
        "Empty `Transfer-Encoding` with `Content-Length`",
        b"POST /first HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\nContent-Length: 5\r\n\r\nhello",
        BadRequest::TransferEncoding,
    ),
    (
        "chunked applied twice over two lines",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip, chunked\r\n\r\n\
          0\r\n\r\n",
        BadRequest::TransferEncoding,
    ),
    (
        "a form feed in a header value",
        b"GET / HTTP/1.1\r\nHost: a\r\nX-Note: a\x0cb\r\n\r\n",
        BadRequest::HeaderValue,
    ),
    (
        "a DEL in a header value",
        b"GET / HTTP/1.1\r\nHost: a\r\nX-Note: a\x7fb\r\n\r\n",
        BadRequest::HeaderValue,
    ),
    (
        "an HTTP/1.1 request without Host (RFC 9112 §3.2)",
        b"GET / HTTP/1.1\r\nAccept: */*\r\n\r\n",
        BadRequest::Host,
    ),
    (
        "an HTTP/1.1 request with two Host fields",
        b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        BadRequest::Host,
    ),
    (
        "CONNECT request",
        b"CONNECT 0-home0.netscape.com:443 HTTP/1.0\r\nUser-agent: Mozilla/1.1N\r\n\
          Proxy-authorization: basic aGVsbG86d29ybGQ=\r\n\r\n",
        BadRequest::Connect,
    ),
    (
        "CONNECT over HTTP/1.1",
        b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
        BadRequest::Connect,
    ),
];

#[test]
fn llhttp_cases_that_must_be_refused_are_refused_whatever_the_split() {
    for (name, input, want) in REFUSED {
        let (_, end) = outcome(name, input);
        assert_eq!(end, Err(*want), "{name}");
    }
}

#[test]
fn llhttp_cases_are_answered_whatever_the_split() {
    for (name, input, want) in ANSWERED {
        let (got, end) = outcome(name, input);
        assert_eq!(end, Ok(()), "{name}");
        assert_eq!(got, *want, "{name}");
    }
}

/// The issue's reproduction: the empty line's CR in one receive, its LF
/// and the request in the next.
#[test]
fn an_empty_line_split_after_its_cr_is_still_skipped() {
    let got = scan([&b"\r"[..], b"\nGET /test HTTP/1.1\r\nHost: a\r\n\r\n"]);
    assert_eq!(got, (vec![true], Ok(())));
    // A CR not followed by LF is no empty line.
    let got = scan([&b"\r"[..], b"GET /test HTTP/1.1\r\nHost: a\r\n\r\n"]);
    assert_eq!(got, (vec![], Err(BadRequest::RequestLine)));
}

/// The head limit is on where a head ends, whole or in pieces: a head of
/// exactly `MAX_REQUEST_HEAD` bytes is read, one byte more is refused.
#[test]
fn the_head_limit_does_not_depend_on_the_split() {
    use xload_http::MAX_REQUEST_HEAD;
    let head = |len: usize| {
        let mut h = b"GET / HTTP/1.1\r\nHost: a\r\nX-Pad: ".to_vec();
        h.resize(len - 4, b'p');
        h.extend_from_slice(b"\r\n\r\n");
        h
    };
    // The long head, then a short request.
    for (len, want) in [
        (MAX_REQUEST_HEAD, (vec![true, true], Ok(()))),
        (
            MAX_REQUEST_HEAD + 1,
            (vec![], Err(BadRequest::HeadTooLarge)),
        ),
    ] {
        let mut input = head(len);
        input.extend_from_slice(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(scan([&input[..]]), want, "{len} whole");
        let cuts = (0..input.len()).step_by(97).chain(len - 8..len + 8);
        for at in cuts {
            let (a, b) = input.split_at(at);
            assert_eq!(scan([a, b]), want, "{len} split at {at}");
        }
    }
}

/// An empty line ended by a bare LF is refused as a malformed request line,
/// whether the head's CRLF CRLF comes later in the same input or not.
#[test]
fn a_bare_lf_empty_line_is_refused_the_same_whatever_follows() {
    for input in [
        &b"GET / HTTP/1.1\r\nHost: a\r\nX: b\n\n"[..],
        b"GET / HTTP/1.1\r\nHost: a\r\nX: b\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
        b"\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
    ] {
        let (got, end) = outcome("bare LF", input);
        assert_eq!(
            (got, end),
            (vec![], Err(BadRequest::RequestLine)),
            "{input:?}"
        );
    }
}
