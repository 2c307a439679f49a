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

mod h2 {
    use xload_http::h2::frame::{flags, write_header, write_ping, FrameKind};
    use xload_http::h2::hpack::{encode_int, huffman_encode};
    use xload_http::h2::{Config, Connection, Event, H2Request};
    use xload_http::{parse_url, RequestSpec};
    use xload_testkit::alloc::allocations;

    const STREAMS: u32 = 4;

    /// The server's answer to streams `first`, `first + 2`, ...: HEADERS
    /// with a Huffman value entering the dynamic table (evicting as it
    /// fills), one block split over CONTINUATION, DATA, and a PING.
    fn answer(first: u32) -> Vec<u8> {
        let mut block = vec![0x88]; // :status 200
        encode_int(0, 6, 0x40, &mut block); // literal, incremental indexing, new name
        block.extend([0x06]);
        block.extend(b"x-tick");
        let mut h = Vec::new();
        huffman_encode(format!("value-{first}").as_bytes(), &mut h);
        encode_int(h.len(), 7, 0x80, &mut block);
        block.extend(h);
        block.push(0xbe); // the entry just added
        let mut v = Vec::new();
        for k in 0..STREAMS {
            let id = first + 2 * k;
            if k == 0 {
                let (a, b) = block.split_at(3);
                write_header(&mut v, a.len(), FrameKind::HEADERS, 0, id);
                v.extend(a);
                write_header(
                    &mut v,
                    b.len(),
                    FrameKind::CONTINUATION,
                    flags::END_HEADERS,
                    id,
                );
                v.extend(b);
            } else {
                write_header(
                    &mut v,
                    block.len(),
                    FrameKind::HEADERS,
                    flags::END_HEADERS,
                    id,
                );
                v.extend(&block);
            }
            write_header(&mut v, 5, FrameKind::DATA, flags::END_STREAM, id);
            v.extend(b"hello");
        }
        write_ping(&mut v, false, *b"pingping");
        v
    }

    #[test]
    fn streams_allocate_nothing_once_warm() {
        let url = parse_url("http://127.0.0.1:8080/").unwrap();
        let reqs = [H2Request::new(&RequestSpec {
            method: "GET",
            url: &url,
            headers: &[],
            body: b"",
        })
        .unwrap()];
        let rounds = 1000u32;
        // Built before counting: the server's bytes for every round.
        let wire: Vec<Vec<u8>> = (0..=rounds).map(|r| answer(1 + 2 * STREAMS * r)).collect();
        let mut conn = Connection::<u32>::new(Config {
            max_streams: STREAMS,
            ..Config::default()
        });
        let mut out = Vec::with_capacity(4096);
        conn.preface(&mut out);
        conn.recv(&[0, 0, 0, 4, 0, 0, 0, 0, 0], &reqs, &mut out, &mut |_| {})
            .unwrap();
        let mut done = 0u32;
        let mut round = |r: u32, out: &mut Vec<u8>, done: &mut u32| {
            out.clear();
            for k in 0..STREAMS {
                conn.open(&reqs, 0, k, out);
            }
            let piece = if r.is_multiple_of(2) { usize::MAX } else { 7 };
            for p in wire[r as usize].chunks(piece.min(wire[r as usize].len())) {
                conn.recv(p, &reqs, out, &mut |e| {
                    if let Event::Response { body_bytes: 5, .. } = e {
                        *done += 1;
                    }
                })
                .unwrap();
            }
        };
        // Warm-up: one round whole, one in pieces (which sizes the buffers
        // kept for split frames and header blocks).
        round(0, &mut out, &mut done);
        round(1, &mut out, &mut done);
        let before = allocations();
        for r in 2..=rounds {
            round(r, &mut out, &mut done);
        }
        let during = allocations() - before;
        assert_eq!(done, (rounds + 1) * STREAMS);
        assert_eq!(during, 0, "the h2 codec allocated {during} times");
    }
}
