//! Server codec tests: against the client [`Connection`] over in-memory
//! byte buffers (whole, byte by byte, at every split), and frame by frame
//! for the errors.

use super::frame::{
    self, flags, setting, ErrorCode, FrameHeader, FrameKind, FRAME_HEADER_LEN, PREFACE,
};
use super::*;
use crate::{parse_url, RequestSpec};

/// Tags the server gives: what was asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Get,
    Head,
    Stats,
}

fn classify(method: &[u8], path: &[u8]) -> Kind {
    match (method, path) {
        (_, b"/stats") => Kind::Stats,
        (b"HEAD", _) => Kind::Head,
        _ => Kind::Get,
    }
}

const OK: usize = 0;
const HEAD: usize = 1;

fn responses(body: usize) -> Vec<H2Response> {
    let len = body.to_string();
    let fields = [("content-type", "text/plain"), ("content-length", &len[..])];
    vec![
        H2Response::new(200, &fields, vec![b'x'; body]),
        H2Response::new(200, &fields, Vec::new()),
    ]
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum SEv {
    Request(u32, Kind, u64),
    Sent(u32, Kind),
    Reset(u32, ErrorCode),
    Malformed(u32),
    Refused(u32),
    GoAway(u32, ErrorCode),
}

fn own(e: ServerEvent<Kind>) -> SEv {
    match e {
        ServerEvent::Request {
            stream,
            tag,
            body_bytes,
        } => SEv::Request(stream, tag, body_bytes),
        ServerEvent::Sent { stream, tag } => SEv::Sent(stream, tag),
        ServerEvent::Reset { stream, code, .. } => SEv::Reset(stream, code),
        ServerEvent::Malformed { stream } => SEv::Malformed(stream),
        ServerEvent::Refused { stream } => SEv::Refused(stream),
        ServerEvent::GoAway { last_stream, code } => SEv::GoAway(last_stream, code),
    }
}

/// A server that answers every request as soon as it is whole.
struct Server {
    conn: ServerConnection<Kind>,
    table: Vec<H2Response>,
    out: Vec<u8>,
    events: Vec<SEv>,
}

impl Server {
    fn new(config: ServerConfig, body: usize) -> Self {
        let mut conn = ServerConnection::new(config);
        let mut out = Vec::new();
        conn.start(&mut out);
        Server {
            conn,
            table: responses(body),
            out,
            events: Vec::new(),
        }
    }

    fn feed(&mut self, bytes: &[u8]) -> Result<(), H2Error> {
        let mut got = Vec::new();
        let r = self
            .conn
            .recv(bytes, &self.table, &mut self.out, &mut classify, &mut |e| {
                got.push(own(e))
            });
        self.answer(got);
        r
    }

    fn answer(&mut self, got: Vec<SEv>) {
        let mut more = Vec::new();
        for e in got {
            self.events.push(e.clone());
            let SEv::Request(stream, kind, _) = e else {
                continue;
            };
            let mut push = |e| more.push(own(e));
            let done = match kind {
                Kind::Get => self
                    .conn
                    .respond(stream, &self.table, OK, &mut self.out, &mut push),
                Kind::Head => {
                    self.conn
                        .respond(stream, &self.table, HEAD, &mut self.out, &mut push)
                }
                Kind::Stats => {
                    let r = H2Response::new(200, &[("content-length", "2")], b"{}".to_vec());
                    self.conn
                        .respond_once(stream, r, &self.table, &mut self.out, &mut push)
                }
            };
            assert!(done, "stream {stream} awaits its answer");
        }
        self.events.extend(more);
    }

    fn pump(&mut self) {
        let mut got = Vec::new();
        self.conn
            .pump(&self.table, &mut self.out, &mut |e| got.push(own(e)));
        self.events.extend(got);
    }
}

struct Client {
    conn: Connection<u32>,
    reqs: Vec<H2Request>,
    out: Vec<u8>,
    done: Vec<(u32, u16, u64)>,
    other: Vec<String>,
}

fn requests(post_body: &[u8], big_header: bool) -> Vec<H2Request> {
    let url = parse_url("http://127.0.0.1:8080/x").unwrap();
    let stats = parse_url("http://127.0.0.1:8080/stats").unwrap();
    let headers = if big_header {
        vec![("x-big".to_string(), "v".repeat(40_000))]
    } else {
        Vec::new()
    };
    let get = RequestSpec {
        method: "GET",
        url: &url,
        headers: &headers,
        body: b"",
    };
    vec![
        H2Request::new(&get).unwrap(),
        H2Request::new(&RequestSpec {
            method: "HEAD",
            ..get
        })
        .unwrap(),
        H2Request::new(&RequestSpec {
            method: "POST",
            body: post_body,
            ..get
        })
        .unwrap(),
        H2Request::new(&RequestSpec { url: &stats, ..get }).unwrap(),
    ]
}

impl Client {
    fn new(config: Config, reqs: Vec<H2Request>) -> Self {
        let mut conn = Connection::new(config);
        let mut out = Vec::new();
        conn.preface(&mut out);
        Client {
            conn,
            reqs,
            out,
            done: Vec::new(),
            other: Vec::new(),
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        let (done, other) = (&mut self.done, &mut self.other);
        self.conn
            .recv(bytes, &self.reqs, &mut self.out, &mut |e| match e {
                Event::Response {
                    tag,
                    status,
                    body_bytes,
                    ..
                } => done.push((tag, status, body_bytes)),
                Event::Reset { .. } | Event::Malformed { .. } | Event::Refused { .. } => {
                    other.push(format!("{e:?}"))
                }
                _ => {}
            })
            .expect("the client sees no connection error");
    }
}

/// Runs `n` requests (cycling over `order`) through a client and a server,
/// moving bytes in pieces of `piece` (0: whole buffers), until all are
/// answered. Returns the client's answers by request and the server's events.
fn exchange(
    client_config: Config,
    server_config: ServerConfig,
    reqs: Vec<H2Request>,
    order: &[usize],
    n: usize,
    body: usize,
    piece: usize,
) -> (Client, Server) {
    let mut c = Client::new(client_config, reqs);
    let mut s = Server::new(server_config, body);
    let mut opened = 0;
    for _round in 0..1_000_000 {
        while opened < n && c.conn.can_open() {
            let r = order[opened % order.len()];
            c.conn.open(&c.reqs, r, r as u32, &mut c.out);
            opened += 1;
        }
        if c.out.is_empty() && s.out.is_empty() {
            s.pump();
            if s.out.is_empty() {
                break;
            }
        }
        let to_server = std::mem::take(&mut c.out);
        let to_client = std::mem::take(&mut s.out);
        let step = if piece == 0 { usize::MAX } else { piece };
        for p in to_server.chunks(step.min(to_server.len().max(1))) {
            s.feed(p).expect("the server sees no connection error");
        }
        for p in to_client.chunks(step.min(to_client.len().max(1))) {
            c.feed(p);
        }
    }
    (c, s)
}

fn client_config(streams: u32) -> Config {
    Config {
        max_streams: streams,
        ..Config::default()
    }
}

#[test]
fn loopback_answers_every_request_exactly() {
    for piece in [0, 1, 7, 1000] {
        let (c, s) = exchange(
            client_config(10),
            ServerConfig::default(),
            requests(b"0123456789", false),
            &[0, 1, 2, 3],
            if piece == 1 { 40 } else { 400 },
            3000,
            piece,
        );
        let n = if piece == 1 { 40 } else { 400 };
        assert_eq!(c.done.len(), n, "piece {piece}");
        assert!(c.other.is_empty(), "{:?}", c.other);
        for &(req, status, body) in &c.done {
            assert_eq!(status, 200);
            let want = match req {
                0 | 2 => 3000,
                1 => 0,
                _ => 2,
            };
            assert_eq!(body, want, "request {req}");
        }
        let requests = s
            .events
            .iter()
            .filter(|e| matches!(e, SEv::Request(..)))
            .count();
        let sent = s
            .events
            .iter()
            .filter(|e| matches!(e, SEv::Sent(..)))
            .count();
        assert_eq!((requests, sent), (n, n));
        // POST bodies were counted whole.
        assert!(s
            .events
            .iter()
            .any(|e| matches!(e, SEv::Request(_, Kind::Get, 10))));
        assert_eq!(s.conn.active(), 0);
        assert!(!s.conn.has_pending());
    }
}

#[test]
fn answers_cross_small_windows_and_frame_sizes() {
    // The client grants 1000 bytes per stream and takes frames of 16 KiB at
    // most: a 100 KB body goes in many window-sized pieces; more streams
    // than the server allows wait for each other.
    let cfg = Config {
        max_streams: 20,
        stream_window: 1000,
        ..Config::default()
    };
    let server = ServerConfig {
        max_concurrent_streams: 5,
        out_budget: 4096,
        ..ServerConfig::default()
    };
    let (c, s) = exchange(cfg, server, requests(b"", false), &[0], 30, 100_000, 0);
    assert_eq!(c.done.len(), 30);
    assert!(c.done.iter().all(|&(_, st, b)| st == 200 && b == 100_000));
    assert_eq!(
        c.conn.stream_limit(),
        5,
        "the server's limit reached the client"
    );
    assert_eq!(s.conn.refused(), 0);
    // Large windows, 1 MB bodies: the out budget bounds each call.
    let server = ServerConfig {
        out_budget: 64 * 1024,
        ..ServerConfig::default()
    };
    let (c, _) = exchange(
        client_config(4),
        server,
        requests(b"", false),
        &[0],
        8,
        1 << 20,
        0,
    );
    assert_eq!(c.done.len(), 8);
    assert!(c.done.iter().all(|&(_, _, b)| b == 1 << 20));
}

#[test]
fn a_large_request_head_and_body_cross_continuation_and_windows() {
    let body = vec![b'p'; 300_000];
    let server = ServerConfig {
        stream_window: 10_000,
        connection_window: 20_000,
        ..ServerConfig::default()
    };
    let (c, s) = exchange(
        client_config(3),
        server,
        requests(&body, true),
        &[2, 0],
        6,
        10,
        0,
    );
    assert_eq!(c.done.len(), 6);
    let posts = s
        .events
        .iter()
        .filter(|e| matches!(e, SEv::Request(_, Kind::Get, 300_000)))
        .count();
    assert_eq!(posts, 3, "{:?}", s.events);
}

fn frame(kind: FrameKind, fl: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    frame::write_header(&mut v, payload.len(), kind, fl, stream);
    v.extend_from_slice(payload);
    v
}

/// The preface and an empty SETTINGS.
fn hello() -> Vec<u8> {
    let mut v = PREFACE.to_vec();
    frame::write_settings(&mut v, &[]);
    v
}

fn request_block(method: &str, path: &str) -> Vec<u8> {
    let mut b = Vec::new();
    hpack::encode_field(b":method", method.as_bytes(), &mut b);
    hpack::encode_field(b":scheme", b"http", &mut b);
    hpack::encode_field(b":path", path.as_bytes(), &mut b);
    b
}

fn frames(mut b: &[u8]) -> Vec<(FrameHeader, Vec<u8>)> {
    let mut v = Vec::new();
    while !b.is_empty() {
        let h = FrameHeader::parse(b[..FRAME_HEADER_LEN].try_into().unwrap());
        let end = FRAME_HEADER_LEN + h.len as usize;
        v.push((h, b[FRAME_HEADER_LEN..end].to_vec()));
        b = &b[end..];
    }
    v
}

fn ready_server(config: ServerConfig, body: usize) -> Server {
    let mut s = Server::new(config, body);
    s.feed(&hello()).unwrap();
    s.out.clear();
    s
}

#[test]
fn start_sends_settings_and_opens_the_connection_window() {
    let s = Server::new(ServerConfig::default(), 1);
    let f = frames(&s.out);
    assert_eq!(f[0].0.kind, FrameKind::SETTINGS);
    let mut want = Vec::new();
    for (id, v) in [
        (setting::MAX_CONCURRENT_STREAMS, 128u32),
        (setting::INITIAL_WINDOW_SIZE, 1 << 20),
    ] {
        want.extend(id.to_be_bytes());
        want.extend(v.to_be_bytes());
    }
    assert_eq!(f[0].1, want);
    assert_eq!(f[1].0.kind, FrameKind::WINDOW_UPDATE);
    assert_eq!(f[1].1, ((1u32 << 24) - 65_535).to_be_bytes());
    // The client's SETTINGS is acknowledged.
    let mut s = s;
    s.out.clear();
    s.feed(&hello()).unwrap();
    let f = frames(&s.out);
    assert_eq!(
        (f[0].0.kind, f[0].0.flags),
        (FrameKind::SETTINGS, flags::ACK)
    );
}

fn error_of(s: &mut Server, wire: &[u8]) -> H2Error {
    let e = s.feed(wire).unwrap_err();
    let f = frames(&s.out);
    let last = f.last().expect("a GOAWAY is written");
    assert_eq!(last.0.kind, FrameKind::GOAWAY);
    assert_eq!(&last.1[4..8], &e.code().0.to_be_bytes());
    assert_eq!(s.feed(b"more").unwrap_err(), e, "the error stays");
    assert_eq!(s.conn.failed(), Some(e));
    e
}

#[test]
fn a_bad_preface_is_a_protocol_error_at_any_split() {
    let wire = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut s = Server::new(ServerConfig::default(), 1);
    s.out.clear();
    let e = error_of(&mut s, wire);
    assert_eq!(e, H2Error::BadPreface);
    assert_eq!(e.code(), ErrorCode::PROTOCOL_ERROR);
    // A preface right up to its last byte, then a wrong one.
    let mut bad = PREFACE.to_vec();
    *bad.last_mut().unwrap() = b'X';
    for i in 0..bad.len() {
        let mut s = Server::new(ServerConfig::default(), 1);
        s.out.clear();
        let (a, b) = bad.split_at(i);
        s.feed(a).unwrap();
        assert_eq!(error_of(&mut s, b), H2Error::BadPreface, "split at {i}");
    }
    // The first frame must be SETTINGS.
    let mut s = Server::new(ServerConfig::default(), 1);
    s.out.clear();
    let mut wire = PREFACE.to_vec();
    wire.extend(frame(FrameKind::PING, 0, 0, &[0; 8]));
    assert_eq!(
        error_of(&mut s, &wire),
        H2Error::SettingsFirst(FrameKind::PING)
    );
}

#[test]
fn ping_is_acknowledged_and_unknown_frames_skipped() {
    let mut s = ready_server(ServerConfig::default(), 1);
    let mut wire = frame(FrameKind(0xee), 0, 0, b"whatever");
    wire.extend(frame(FrameKind::PING, 0, 0, b"abcdefgh"));
    wire.extend(frame(FrameKind::PING, flags::ACK, 0, b"ignored!"));
    s.feed(&wire).unwrap();
    let f = frames(&s.out);
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].0.kind, f[0].0.flags), (FrameKind::PING, flags::ACK));
    assert_eq!(f[0].1, b"abcdefgh");
}

#[test]
fn connection_errors_are_named() {
    let block = request_block("GET", "/");
    let cases: Vec<(Vec<u8>, H2Error)> = vec![
        (
            frame(FrameKind::HEADERS, flags::END_HEADERS, 2, &block),
            H2Error::EvenStream(FrameKind::HEADERS),
        ),
        (
            frame(FrameKind::DATA, 0, 5, b"x"),
            H2Error::IdleStream(FrameKind::DATA),
        ),
        (
            frame(FrameKind::DATA, 0, 0, b"x"),
            H2Error::StreamZero(FrameKind::DATA),
        ),
        (
            frame(FrameKind::PING, 0, 1, &[0; 8]),
            H2Error::NotStreamZero(FrameKind::PING),
        ),
        (
            frame(FrameKind::WINDOW_UPDATE, 0, 0, &[0; 4]),
            H2Error::ZeroWindowIncrement,
        ),
        (
            frame(
                FrameKind::WINDOW_UPDATE,
                0,
                0,
                &0x7fff_ffffu32.to_be_bytes(),
            ),
            H2Error::WindowOverflow,
        ),
        (
            frame(FrameKind::CONTINUATION, 0, 1, b""),
            H2Error::UnexpectedContinuation,
        ),
        (
            frame(FrameKind::PUSH_PROMISE, 0, 1, &[0; 4]),
            H2Error::PushPromise,
        ),
        (
            frame(FrameKind::SETTINGS, 0, 0, &[0; 5]),
            H2Error::BadFrameSize(FrameKind::SETTINGS),
        ),
        (
            {
                let mut v = Vec::new();
                frame::write_settings(&mut v, &[(setting::MAX_FRAME_SIZE, 100)]);
                v
            },
            H2Error::BadMaxFrameSize,
        ),
        (
            {
                let mut v = frame(FrameKind::HEADERS, 0, 1, &block);
                v.extend(frame(FrameKind::PING, 0, 0, &[0; 8]));
                v
            },
            H2Error::ExpectedContinuation(FrameKind::PING),
        ),
        (
            frame(FrameKind::HEADERS, flags::END_HEADERS, 1, &[0x80]),
            H2Error::Compression(HpackError::ZeroIndex),
        ),
        (
            {
                let mut v = Vec::new();
                frame::write_header(&mut v, 20_000, FrameKind::DATA, 0, 1);
                v
            },
            H2Error::FrameTooLarge(20_000),
        ),
    ];
    for (wire, want) in cases {
        let mut s = ready_server(ServerConfig::default(), 1);
        assert_eq!(error_of(&mut s, &wire), want, "{want:?}");
    }
    // DATA beyond the stream window granted.
    let mut s = ready_server(
        ServerConfig {
            stream_window: 10,
            ..ServerConfig::default()
        },
        1,
    );
    let mut wire = frame(
        FrameKind::HEADERS,
        flags::END_HEADERS,
        1,
        &request_block("POST", "/"),
    );
    wire.extend(frame(FrameKind::DATA, 0, 1, &[0; 11]));
    assert_eq!(error_of(&mut s, &wire), H2Error::FlowControlViolation);
}

#[test]
fn malformed_requests_reset_their_stream_only() {
    let mut no_path = Vec::new();
    hpack::encode_field(b":method", b"GET", &mut no_path);
    let mut upper = request_block("GET", "/");
    hpack::encode_field(b"X-Up", b"1", &mut upper);
    let mut conn_field = request_block("GET", "/");
    hpack::encode_field(b"connection", b"close", &mut conn_field);
    let mut late_pseudo = request_block("GET", "/");
    hpack::encode_field(b"x", b"1", &mut late_pseudo);
    hpack::encode_field(b":authority", b"a", &mut late_pseudo);
    let mut cl = request_block("POST", "/");
    hpack::encode_field(b"content-length", b"5", &mut cl);
    for (i, block) in [no_path, upper, conn_field, late_pseudo].iter().enumerate() {
        let mut s = ready_server(ServerConfig::default(), 1);
        let id = 1;
        s.feed(&frame(
            FrameKind::HEADERS,
            flags::END_HEADERS | flags::END_STREAM,
            id,
            block,
        ))
        .unwrap();
        assert_eq!(s.events, [SEv::Malformed(id)], "case {i}");
        let f = frames(&s.out);
        assert_eq!(f[0].0.kind, FrameKind::RST_STREAM);
        assert_eq!(f[0].1, ErrorCode::PROTOCOL_ERROR.0.to_be_bytes());
        // The connection goes on.
        s.out.clear();
        s.feed(&frame(
            FrameKind::HEADERS,
            flags::END_HEADERS | flags::END_STREAM,
            3,
            &request_block("GET", "/"),
        ))
        .unwrap();
        assert_eq!(
            s.events[1..],
            [SEv::Request(3, Kind::Get, 0), SEv::Sent(3, Kind::Get)]
        );
    }
    // A body shorter than its content-length.
    let mut s = ready_server(ServerConfig::default(), 1);
    let mut wire = frame(FrameKind::HEADERS, flags::END_HEADERS, 1, &cl);
    wire.extend(frame(FrameKind::DATA, flags::END_STREAM, 1, b"abc"));
    s.feed(&wire).unwrap();
    assert_eq!(s.events, [SEv::Malformed(1)]);
}

#[test]
fn streams_above_the_limit_are_refused() {
    let mut s = ready_server(
        ServerConfig {
            max_concurrent_streams: 2,
            ..ServerConfig::default()
        },
        1,
    );
    // Three heads whose bodies are still to come.
    let mut wire = Vec::new();
    for id in [1, 3, 5] {
        wire.extend(frame(
            FrameKind::HEADERS,
            flags::END_HEADERS,
            id,
            &request_block("POST", "/"),
        ));
    }
    // DATA still arriving on the refused stream is dropped.
    wire.extend(frame(FrameKind::DATA, flags::END_STREAM, 5, b"late"));
    wire.extend(frame(FrameKind::DATA, flags::END_STREAM, 1, b"b"));
    s.feed(&wire).unwrap();
    assert_eq!(
        s.events,
        [
            SEv::Refused(5),
            SEv::Request(1, Kind::Get, 1),
            SEv::Sent(1, Kind::Get)
        ]
    );
    assert_eq!(s.conn.refused(), 1);
    let f = frames(&s.out);
    assert_eq!(f[0].0.kind, FrameKind::RST_STREAM);
    assert_eq!(f[0].1, ErrorCode::REFUSED_STREAM.0.to_be_bytes());
    assert_eq!(s.conn.active(), 1);
}

#[test]
fn a_reset_stops_an_answer_held_back_by_the_window() {
    let mut s = Server::new(ServerConfig::default(), 100_000);
    let mut wire = PREFACE.to_vec();
    frame::write_settings(&mut wire, &[(setting::INITIAL_WINDOW_SIZE, 100)]);
    wire.extend(frame(
        FrameKind::HEADERS,
        flags::END_HEADERS | flags::END_STREAM,
        1,
        &request_block("GET", "/"),
    ));
    s.out.clear();
    s.feed(&wire).unwrap();
    let f = frames(&s.out);
    let data: Vec<_> = f.iter().filter(|f| f.0.kind == FrameKind::DATA).collect();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0].1.len(), 100, "the stream window bounds the DATA");
    assert!(s.conn.has_pending());
    // A WINDOW_UPDATE lets 50 more go.
    s.out.clear();
    s.feed(&frame(FrameKind::WINDOW_UPDATE, 0, 1, &50u32.to_be_bytes()))
        .unwrap();
    let f = frames(&s.out);
    assert_eq!((f.len(), f[0].1.len()), (1, 50));
    // The client resets it: nothing more goes and it is reported.
    s.out.clear();
    s.feed(&frame(
        FrameKind::RST_STREAM,
        0,
        1,
        &ErrorCode::CANCEL.0.to_be_bytes(),
    ))
    .unwrap();
    s.feed(&frame(
        FrameKind::WINDOW_UPDATE,
        0,
        1,
        &5000u32.to_be_bytes(),
    ))
    .unwrap();
    assert!(s.out.is_empty());
    assert_eq!(s.events.last(), Some(&SEv::Reset(1, ErrorCode::CANCEL)));
    assert!(!s.conn.has_pending());
    assert_eq!(s.conn.active(), 0);
}

#[test]
fn goaway_ignores_later_streams_and_answers_earlier_ones() {
    let mut s = ready_server(ServerConfig::default(), 3);
    s.feed(&frame(
        FrameKind::HEADERS,
        flags::END_HEADERS,
        1,
        &request_block("POST", "/"),
    ))
    .unwrap();
    s.conn.close(&mut s.out);
    let f = frames(&s.out);
    assert_eq!(f[0].0.kind, FrameKind::GOAWAY);
    assert_eq!(&f[0].1[..4], &1u32.to_be_bytes());
    assert_eq!(&f[0].1[4..], &ErrorCode::NO_ERROR.0.to_be_bytes());
    let mut wire = frame(
        FrameKind::HEADERS,
        flags::END_HEADERS | flags::END_STREAM,
        3,
        &request_block("GET", "/"),
    );
    wire.extend(frame(FrameKind::DATA, flags::END_STREAM, 1, b""));
    wire.extend(frame(FrameKind::GOAWAY, 0, 0, &[0, 0, 0, 0, 0, 0, 0, 0]));
    s.feed(&wire).unwrap();
    assert_eq!(
        s.events,
        [
            SEv::Request(1, Kind::Get, 0),
            SEv::GoAway(0, ErrorCode::NO_ERROR),
            SEv::Sent(1, Kind::Get)
        ]
    );
}

#[test]
fn trailers_end_a_request() {
    let mut s = ready_server(ServerConfig::default(), 1);
    let mut wire = frame(
        FrameKind::HEADERS,
        flags::END_HEADERS,
        1,
        &request_block("POST", "/"),
    );
    wire.extend(frame(FrameKind::DATA, 0, 1, b"ab"));
    let mut t = Vec::new();
    hpack::encode_field(b"x-sum", b"1", &mut t);
    wire.extend(frame(
        FrameKind::HEADERS,
        flags::END_HEADERS | flags::END_STREAM,
        1,
        &t,
    ));
    // Padded DATA on a second stream counts only its data.
    wire.extend(frame(
        FrameKind::HEADERS,
        flags::END_HEADERS,
        3,
        &request_block("PUT", "/"),
    ));
    wire.extend(frame(
        FrameKind::DATA,
        flags::PADDED | flags::END_STREAM,
        3,
        &[2, b'z', 0, 0],
    ));
    for split in [wire.len(), 1] {
        let mut s2 = ready_server(ServerConfig::default(), 1);
        for p in wire.chunks(split) {
            s2.feed(p).unwrap();
        }
        s2.events.sort();
        assert_eq!(
            s2.events,
            [
                SEv::Request(1, Kind::Get, 2),
                SEv::Request(3, Kind::Get, 1),
                SEv::Sent(1, Kind::Get),
                SEv::Sent(3, Kind::Get)
            ]
        );
    }
    s.feed(&wire).unwrap();
}

#[test]
fn every_split_of_a_client_stream_gives_the_same_bytes_back() {
    // A whole client conversation, recorded once, then fed at every split.
    let mut c = Client::new(client_config(4), requests(b"0123456789", false));
    c.feed(&{
        let mut v = Vec::new();
        frame::write_settings(&mut v, &[]);
        v
    });
    for r in 0..4 {
        c.conn.open(&c.reqs, r, r as u32, &mut c.out);
    }
    c.conn.ping(*b"pingpong", &mut c.out);
    let wire = std::mem::take(&mut c.out);
    let run = |pieces: &[&[u8]]| {
        let mut s = Server::new(ServerConfig::default(), 50);
        s.out.clear();
        for p in pieces {
            s.feed(p).unwrap();
        }
        // The test server answers after each piece, so the order between
        // streams depends on the split; each stream's frames may not.
        let mut events = s.events;
        events.sort();
        let mut f = frames(&s.out);
        f.sort_by_key(|(h, _)| h.stream);
        (events, f)
    };
    let whole = run(&[&wire]);
    assert_eq!(whole.0.len(), 8, "{:?}", whole.0);
    for i in 0..=wire.len() {
        let (a, b) = wire.split_at(i);
        assert_eq!(run(&[a, b]), whole, "split at {i}");
    }
    let bytes: Vec<&[u8]> = wire.chunks(1).collect();
    assert_eq!(run(&bytes), whole);
}
