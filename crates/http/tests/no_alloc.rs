//! The codec's steady state allocates nothing: a counting global allocator
//! watches this thread while the response parser and the request scanner
//! take pipelined, split and chunked traffic after a warm-up (the first
//! pass may size the buffers they keep).

use xload_http::{Limits, Parse, RequestScanner, ResponseParser};
use xload_testkit::alloc::{allocations, CountingAlloc};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

const RESPONSES: &[u8] = b"HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 5\r\n\r\nhello\
HTTP/1.1 204 No Content\r\n\r\n\
HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5;a=\"b\"\r\nhello\r\n0\r\nX: y\r\n\r\n\
HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nConnection: close, keep-alive\r\nContent-Length: 0\r\n\r\n";

const REQUESTS: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n\r\n\
POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc\
POST /y HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: deflate\r\nTransfer-Encoding: chunked\r\n\r\n\
3;n=\"v\"\r\nabc\r\n0\r\n\r\n\
GET /stats HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n";

/// Feeds `RESPONSES` whole, then in pieces of 7 bytes; the responses seen.
fn responses(p: &mut ResponseParser) -> usize {
    let mut n = 0;
    for size in [RESPONSES.len(), 7] {
        for mut piece in RESPONSES.chunks(size) {
            while let Ok(Parse::Complete { consumed, .. }) = p.parse(piece) {
                n += 1;
                piece = &piece[consumed..];
            }
        }
    }
    n
}

/// Feeds `REQUESTS` whole, then in pieces of 5 bytes; the requests seen.
fn requests(s: &mut RequestScanner) -> usize {
    let mut n = 0;
    for size in [REQUESTS.len(), 5] {
        for piece in REQUESTS.chunks(size) {
            s.feed(piece, |_| n += 1).expect("valid requests");
        }
    }
    n
}

#[test]
fn parsing_and_scanning_allocate_nothing_once_warm() {
    let mut p = ResponseParser::new(Limits::default(), false);
    let mut s = RequestScanner::new(b"/stats");
    assert_eq!(responses(&mut p), 8);
    assert_eq!(requests(&mut s), 8);
    let before = allocations();
    for _ in 0..1000 {
        assert_eq!(responses(&mut p), 8);
        assert_eq!(requests(&mut s), 8);
    }
    let during = allocations() - before;
    assert_eq!(during, 0, "the codec allocated {during} times");
    // The counter does see allocations.
    let before = allocations();
    drop(std::hint::black_box(vec![0u8; 64]));
    assert!(allocations() > before);
}
