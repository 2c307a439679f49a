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
];

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
