//! `h2_frames`: the HTTP/2 client codec on a server byte stream fed whole,
//! split in two at a fuzzer-chosen point, and in fuzzer-chosen piece sizes
//! gives the same events, the same DATA bytes per stream (however the
//! pieces cut them), the same bytes to send and the same connection
//! error; nothing panics; the streams' books balance.
//!
//! Input layout: byte 0 = options (bits 0..1: streams opened - 1; bits
//! 2..7: piece size - 1), bytes 1..3 = split point, then the bytes the server
//! sent after its first (empty) SETTINGS.
//!
//! `hpack`: the HPACK decoder against loona-hpack (the oracle) on a series
//! of header blocks through one table: the same fields, or both refuse
//! (loona accepting a size update after a field, which RFC 7541 §4.2
//! forbids, is the one difference allowed).
//! Input layout: blocks, each a length byte then that many bytes (the last
//! one takes what is left).

use xload_http::h2::{Config, Connection, Event, H2Error, H2Request, HpackError};
use xload_http::{parse_url, RequestSpec};

#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    events: Vec<String>,
    /// Each stream's DATA bytes (`Event::Data`), by tag.
    bodies: Vec<Vec<u8>>,
    out: Vec<u8>,
    end: Result<(), H2Error>,
    active: usize,
    can_open: bool,
}

fn requests() -> Vec<H2Request> {
    let url = parse_url("http://127.0.0.1:8080/f").unwrap();
    let get = RequestSpec {
        method: "GET",
        url: &url,
        headers: &[],
        body: b"",
    };
    let post = RequestSpec {
        method: "POST",
        body: &[b'p'; 300],
        ..get
    };
    let head = RequestSpec {
        method: "HEAD",
        ..get
    };
    vec![
        H2Request::new(&get).unwrap(),
        H2Request::new(&post).unwrap(),
        H2Request::new(&head).unwrap(),
    ]
}

fn drive<'a>(pieces: impl IntoIterator<Item = &'a [u8]>, streams: usize) -> Outcome {
    let reqs = requests();
    let mut conn = Connection::<usize>::new(Config {
        max_streams: 4,
        stream_window: 1000,
        header_table_size: 256,
        max_header_block: 4096,
        ..Config::default()
    });
    let mut out = Vec::new();
    conn.preface(&mut out);
    conn.recv(&[0, 0, 0, 4, 0, 0, 0, 0, 0], &reqs, &mut out, &mut |_| {})
        .unwrap();
    for i in 0..streams {
        conn.open(&reqs, i % reqs.len(), i, &mut out);
    }
    let mut finished = 0;
    let mut events = Vec::new();
    let mut bodies = vec![Vec::new(); streams];
    let mut end = Ok(());
    for piece in pieces {
        end = conn.recv(piece, &reqs, &mut out, &mut |e| {
            if let Event::Data { tag, data } = e {
                return bodies[tag].extend_from_slice(data);
            }
            if matches!(
                e,
                Event::Response { .. }
                    | Event::Reset { .. }
                    | Event::Malformed { .. }
                    | Event::Refused { .. }
            ) {
                finished += 1;
            }
            events.push(format!("{e:?}"));
        });
        if end.is_err() {
            break;
        }
    }
    if end.is_ok() {
        assert_eq!(streams, conn.active() + finished, "every stream ends once");
    }
    Outcome {
        events,
        bodies,
        out,
        end,
        active: conn.active(),
        can_open: conn.can_open(),
    }
}

pub(crate) fn check(data: &[u8]) {
    let Some((options, at, stream)) = super::split_input(data) else {
        return;
    };
    let streams = 1 + usize::from(options & 3);
    let piece = 1 + usize::from(options >> 2);
    let whole = drive([stream], streams);
    let (a, b) = stream.split_at(at);
    assert_eq!(drive([a, b], streams), whole, "split at {at}");
    assert_eq!(
        drive(stream.chunks(piece), streams),
        whole,
        "pieces of {piece}"
    );
}

pub(crate) fn check_hpack(data: &[u8]) {
    let mut ours = xload_http::h2::hpack::Decoder::new(4096);
    let mut theirs = loona_hpack::Decoder::new();
    theirs.set_max_allowed_table_size(4096);
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let n = usize::from(len).min(tail.len());
        let (block, next) = if next_is_last(tail, n) {
            (tail, &[][..])
        } else {
            tail.split_at(n)
        };
        rest = next;
        let mut a = Vec::new();
        let mine = ours.decode(block, |n, v| a.push((n.to_vec(), v.to_vec())));
        let mut b = Vec::new();
        let oracle = theirs.decode_with_cb(block, |n, v| b.push((n.to_vec(), v.to_vec())));
        match (mine, oracle) {
            (Ok(()), Ok(())) => assert_eq!(a, b, "block {block:?}"),
            (Err(_), Err(_)) => return, // both refuse: the tables are now undefined
            // The one known difference: loona takes a size update after a
            // field, which RFC 7541 §4.2 puts at the block's start only.
            (Err(HpackError::LateSizeUpdate), Ok(())) => return,
            (m, o) => panic!("ours {m:?}, loona {o:?} on {block:?}"),
        }
    }
}

/// The block takes all that is left when its length byte says more than there is.
fn next_is_last(tail: &[u8], n: usize) -> bool {
    n >= tail.len()
}
