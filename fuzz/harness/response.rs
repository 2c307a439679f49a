//! `parse_response`: a response stream parsed whole, split in two at a
//! fuzzer-chosen point, and in fuzzer-chosen piece sizes gives the same
//! responses at the same offsets, the same error and the same end-of-stream
//! verdict; wire bytes add up.
//!
//! Input layout: byte 0 = options (bit 0: responses to HEAD; bit 1: small
//! limits, 64 header bytes and 3 fields; bits 2..7: piece size - 1), bytes
//! 1..3 = split point, then the bytes the server sent.

use xload_http::{Limits, Parse, ParseError, Response, ResponseParser};

#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    responses: Vec<(Response, usize)>,
    error: Option<ParseError>,
    in_progress: bool,
    eof: Result<Option<Response>, ParseError>,
}

fn drive<'a>(pieces: impl IntoIterator<Item = &'a [u8]>, head: bool, limits: Limits) -> Outcome {
    let mut p = ResponseParser::new(limits, head);
    let mut responses = Vec::new();
    let mut offset = 0;
    let mut error = None;
    let mut ended = false;
    'pieces: for piece in pieces {
        let mut rest = piece;
        loop {
            match p.parse(rest) {
                Ok(Parse::Partial) => {
                    assert!(
                        rest.is_empty() || p.in_progress(),
                        "bytes consumed but nothing in progress"
                    );
                    offset += rest.len();
                    break;
                }
                Ok(Parse::Complete { consumed, response }) => {
                    assert!(
                        consumed > 0 && consumed <= rest.len(),
                        "consumed {consumed} of {}",
                        rest.len()
                    );
                    assert!(
                        response.body_bytes < response.wire_bytes,
                        "body {response:?} inside wire bytes"
                    );
                    offset += consumed;
                    responses.push((response, offset));
                    if !response.keep_alive {
                        ended = true; // the engine closes the connection here
                        break 'pieces;
                    }
                    rest = &rest[consumed..];
                    if rest.is_empty() {
                        break;
                    }
                }
                Err(e) => {
                    assert!(!e.name().is_empty());
                    error = Some(e);
                    break 'pieces;
                }
            }
        }
    }
    // Wire bytes add up to the stream offsets.
    let mut prev = 0;
    for (r, end) in &responses {
        assert_eq!(r.wire_bytes, (end - prev) as u64);
        prev = *end;
    }
    let in_progress = error.is_none() && !ended && p.in_progress();
    let eof = if ended { Ok(None) } else { p.eof() };
    Outcome {
        responses,
        error,
        in_progress,
        eof,
    }
}

/// Runs the checks on one fuzzer input.
pub(crate) fn check(data: &[u8]) {
    let Some((options, at, stream)) = super::split_input(data) else {
        return;
    };
    let head = options & 1 != 0;
    let limits = if options & 2 != 0 {
        Limits {
            max_header_bytes: 64,
            max_headers: 3,
        }
    } else {
        Limits::default()
    };
    let piece = usize::from(options >> 2) + 1;

    let whole = drive([stream], head, limits);
    let (a, b) = stream.split_at(at);
    assert_eq!(drive([a, b], head, limits), whole, "split at {at}");
    assert_eq!(
        drive(stream.chunks(piece), head, limits),
        whole,
        "pieces of {piece}"
    );
}
