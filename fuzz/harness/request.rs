//! `scan_request`: the responder's request scanner on a request stream fed
//! whole, split in two at a fuzzer-chosen point, and in fuzzer-chosen piece
//! sizes gives the same requests in the same order and the same verdict;
//! after an error (a 400) the connection takes nothing more.
//!
//! Input layout: byte 0 = options (bits 0..5: piece size - 1; bit 6: a path
//! table is given), bytes 1..3 = split point, then the bytes the client sent.

use std::sync::Arc;

use xload_http::{BadRequest, PathTable, RequestScanner, ScannedRequest};

/// Knows `/a` and `/b/c`.
#[derive(Debug)]
struct Table;

impl PathTable for Table {
    fn find(&self, path: &[u8]) -> Option<u32> {
        match path {
            b"/a" => Some(1),
            b"/b/c" => Some(2),
            _ => None,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    requests: Vec<ScannedRequest>,
    end: Result<(), BadRequest>,
}

fn drive<'a>(pieces: impl IntoIterator<Item = &'a [u8]>, table: bool) -> Outcome {
    let mut s = RequestScanner::new(b"/stats");
    if table {
        s = s.with_paths(Arc::new(Table));
    }
    let mut requests = Vec::new();
    let mut end = Ok(());
    for piece in pieces {
        if let Err(e) = s.feed(piece, |r| requests.push(r)) {
            end = Err(e);
            break;
        }
    }
    Outcome { requests, end }
}

/// Runs the checks on one fuzzer input.
pub(crate) fn check(data: &[u8]) {
    let Some((options, at, stream)) = super::split_input(data) else {
        return;
    };
    let piece = usize::from(options & 0x3f) + 1;
    let table = options & 0x40 != 0;

    let whole = drive([stream], table);
    for r in &whole.requests {
        assert!(!(r.special_path && r.found.is_some()), "{r:?}");
        assert!(r.keep_alive || !r.says_keep_alive, "{r:?}");
    }
    let (a, b) = stream.split_at(at);
    assert_eq!(drive([a, b], table), whole, "split at {at}");
    assert_eq!(
        drive(stream.chunks(piece), table),
        whole,
        "pieces of {piece}"
    );
}
