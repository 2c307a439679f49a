//! Unit tests: every frame type, every connection error, HPACK against the
//! RFC's vectors and against loona-hpack as an oracle.

use super::frame::{flags, setting, ErrorCode, FrameHeader, FrameKind, FRAME_HEADER_LEN, PREFACE};
use super::hpack::{encode_int, encode_str, huffman_decode, huffman_encode, Decoder};
use super::*;
use crate::{parse_url, RequestSpec};

// ---------------------------------------------------------------------------
// HPACK

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn decode_all(d: &mut Decoder, block: &[u8]) -> Result<Fields, HpackError> {
    let mut v = Vec::new();
    d.decode(block, |n, val| v.push((n.to_vec(), val.to_vec())))?;
    Ok(v)
}

fn oracle(d: &mut loona_hpack::Decoder, block: &[u8]) -> Option<Fields> {
    let mut v = Vec::new();
    d.decode_with_cb(block, |n, val| v.push((n.to_vec(), val.to_vec())))
        .ok()?;
    Some(v)
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn huffman_rfc_vectors() {
    // RFC 7541 C.4.1 and C.4.2.
    for (text, code) in [
        ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
        ("no-cache", "a8eb 1064 9cbf"),
        ("custom-key", "25a8 49e9 5ba9 7d7f"),
        ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
    ] {
        let mut enc = Vec::new();
        huffman_encode(text.as_bytes(), &mut enc);
        assert_eq!(enc, hex(code), "{text}");
        let mut dec = Vec::new();
        huffman_decode(&enc, &mut dec).unwrap();
        assert_eq!(dec, text.as_bytes());
    }
}

#[test]
fn huffman_round_trips_every_byte() {
    let all: Vec<u8> = (0..=255).chain((0..=255).rev()).collect();
    for len in [0, 1, 2, 3, 7, 100, all.len()] {
        let mut enc = Vec::new();
        huffman_encode(&all[..len], &mut enc);
        let mut dec = Vec::new();
        huffman_decode(&enc, &mut dec).unwrap();
        assert_eq!(dec, &all[..len]);
    }
}

#[test]
fn huffman_errors() {
    let mut d = Vec::new();
    // 'a' is 00011: padding of zeros is not a prefix of EOS.
    assert_eq!(
        huffman_decode(&[0x18], &mut d),
        Err(HpackError::HuffmanPadding)
    );
    // Eight 1-bits: padding longer than 7 bits.
    assert_eq!(
        huffman_decode(&[0x1f, 0xff], &mut d),
        Err(HpackError::HuffmanPadding)
    );
    // EOS (30 ones) spelled out.
    assert_eq!(
        huffman_decode(&[0xff, 0xff, 0xff, 0xfc], &mut d),
        Err(HpackError::HuffmanEos)
    );
    d.clear();
    assert_eq!(huffman_decode(&[0x1f], &mut d), Ok(()));
    assert_eq!(d, b"a");
}

#[test]
fn integers_rfc_vectors() {
    // RFC 7541 C.1.
    let mut v = Vec::new();
    encode_int(10, 5, 0, &mut v);
    assert_eq!(v, [0x0a]);
    v.clear();
    encode_int(1337, 5, 0, &mut v);
    assert_eq!(v, [0x1f, 0x9a, 0x0a]);
    v.clear();
    encode_int(42, 8, 0, &mut v);
    assert_eq!(v, [42]);
    // A size update of 2^28 + more is refused, not wrapped.
    let mut d = Decoder::new(4096);
    assert_eq!(
        decode_all(&mut d, &[0x3f, 0xff, 0xff, 0xff, 0xff, 0x0f]),
        Err(HpackError::IntegerOverflow)
    );
    assert_eq!(
        decode_all(&mut d, &[0x3f, 0x80, 0x80, 0x80, 0x80, 0x00]),
        Err(HpackError::IntegerOverflow)
    );
    // Four continuation bytes are fine (here a size update of 31).
    assert_eq!(
        decode_all(&mut d, &[0x3f, 0x80, 0x80, 0x80, 0x00, 0x88])
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        decode_all(&mut d, &[0x20]),
        Err(HpackError::SizeUpdateAtEnd)
    );
}

#[test]
fn rfc_response_examples_with_huffman_and_eviction() {
    // RFC 7541 C.6: three responses, table of 256 bytes, Huffman coded.
    let mut d = Decoder::new(256);
    let r1 = hex(
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
    );
    let r2 = hex("4883 640e ff c1 c0 bf");
    let r3 = hex(
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    );
    let f = |v: &[(&str, &str)]| {
        v.iter()
            .map(|(a, b)| (a.as_bytes().to_vec(), b.as_bytes().to_vec()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        decode_all(&mut d, &r1).unwrap(),
        f(&[
            (":status", "302"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("location", "https://www.example.com"),
        ])
    );
    assert_eq!(d.table_size(), (222, 256));
    assert_eq!(
        decode_all(&mut d, &r2).unwrap(),
        f(&[
            (":status", "307"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("location", "https://www.example.com"),
        ])
    );
    assert_eq!(d.table_size(), (222, 256));
    assert_eq!(
        decode_all(&mut d, &r3).unwrap(),
        f(&[
            (":status", "200"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
            ("location", "https://www.example.com"),
            ("content-encoding", "gzip"),
            (
                "set-cookie",
                "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"
            ),
        ])
    );
    assert_eq!(d.table_size(), (215, 256));
}

#[test]
fn hpack_errors() {
    let mut d = Decoder::new(4096);
    assert_eq!(decode_all(&mut d, &[0x80]), Err(HpackError::ZeroIndex));
    assert_eq!(decode_all(&mut d, &[0xbe]), Err(HpackError::BadIndex)); // 62, table empty
    assert_eq!(decode_all(&mut d, &[0x7e, 0x00]), Err(HpackError::BadIndex)); // literal, name 62
    assert_eq!(
        decode_all(&mut d, &[0x04, 0x05, b'a']),
        Err(HpackError::Truncated)
    );
    assert_eq!(decode_all(&mut d, &[0x00]), Err(HpackError::Truncated));
    assert_eq!(decode_all(&mut d, &[0xff]), Err(HpackError::Truncated));
    // Size update above the allowed 4096.
    let mut big = Vec::new();
    encode_int(4097, 5, 0x20, &mut big);
    assert_eq!(
        decode_all(&mut d, &big),
        Err(HpackError::SizeUpdateTooLarge)
    );
    // Size update after a field.
    assert_eq!(
        decode_all(&mut d, &[0x88, 0x20]),
        Err(HpackError::LateSizeUpdate)
    );
    // Size update first is fine, two of them too.
    assert!(decode_all(&mut d, &[0x20, 0x3f, 0xe1, 0x1f, 0x88]).is_ok());
}

#[test]
fn size_update_to_zero_empties_the_table() {
    let mut d = Decoder::new(4096);
    let mut b = vec![0x40];
    encode_str(b"x-a", &mut b);
    encode_str(b"1", &mut b);
    assert_eq!(decode_all(&mut d, &b).unwrap().len(), 1);
    assert_eq!(
        decode_all(&mut d, &[0xbe]).unwrap(),
        [(b"x-a".to_vec(), b"1".to_vec())]
    );
    assert_eq!(decode_all(&mut d, &[0x20, 0x88]).unwrap().len(), 1);
    assert_eq!(d.table_size(), (0, 0));
    assert_eq!(decode_all(&mut d, &[0xbe]), Err(HpackError::BadIndex));
    // Back up to 100 bytes: an entry bigger than the table empties it.
    let mut b = Vec::new();
    encode_int(100, 5, 0x20, &mut b);
    b.push(0x40);
    encode_str(&[b'n'; 40], &mut b);
    encode_str(&[b'v'; 40], &mut b);
    assert_eq!(decode_all(&mut d, &b).unwrap().len(), 1);
    assert_eq!(d.table_size(), (0, 100));
}

/// A small deterministic generator for the differential tests.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> usize {
        (self.next() % n) as usize
    }
}

#[test]
fn matches_loona_on_its_encoder_output() {
    // loona's encoder indexes every new name and value: blocks that use the
    // dynamic table heavily, with eviction at small sizes.
    let names: [&[u8]; 6] = [
        b"server",
        b"x-id",
        b"content-type",
        b"set-cookie",
        b"date",
        b"x",
    ];
    for (seed, table) in [(1u64, 4096usize), (7, 256), (99, 120)] {
        let mut rng = Rng(seed);
        let mut enc = loona_hpack::Encoder::new();
        enc.set_max_table_size(table);
        let mut ours = Decoder::new(4096);
        let mut theirs = loona_hpack::Decoder::new();
        let mut first = Vec::new();
        encode_int(table, 5, 0x20, &mut first);
        for i in 0..300 {
            let fields: Vec<(Vec<u8>, Vec<u8>)> = (0..1 + rng.below(8))
                .map(|_| {
                    let n = names[rng.below(names.len() as u64)].to_vec();
                    let v = format!("v{}", rng.below(20)).repeat(1 + rng.below(4));
                    (n, v.into_bytes())
                })
                .collect();
            let mut block = if i == 0 { first.clone() } else { Vec::new() };
            block.extend(enc.encode(fields.iter().map(|(n, v)| (&n[..], &v[..]))));
            let a = decode_all(&mut ours, &block).unwrap();
            assert_eq!(Some(a.clone()), oracle(&mut theirs, &block));
            assert_eq!(a, fields);
        }
    }
}

#[test]
fn matches_loona_on_huffman_literals() {
    let mut rng = Rng(5);
    let mut ours = Decoder::new(4096);
    let mut theirs = loona_hpack::Decoder::new();
    for _ in 0..500 {
        let mut block = Vec::new();
        for _ in 0..1 + rng.below(5) {
            let kind = [0x40u8, 0x00, 0x10][rng.below(3)];
            let prefix = if kind == 0x40 { 6 } else { 4 };
            encode_int(0, prefix, kind, &mut block);
            for _ in 0..2 {
                let s: Vec<u8> = (0..rng.below(30)).map(|_| rng.next() as u8).collect();
                if rng.below(2) == 0 {
                    let mut h = Vec::new();
                    huffman_encode(&s, &mut h);
                    encode_int(h.len(), 7, 0x80, &mut block);
                    block.extend(h);
                } else {
                    encode_str(&s, &mut block);
                }
            }
        }
        let a = decode_all(&mut ours, &block).ok();
        assert_eq!(a, oracle(&mut theirs, &block));
        assert!(a.is_some());
    }
}

// ---------------------------------------------------------------------------
// Frames and the connection

fn frame(kind: FrameKind, fl: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    frame::write_header(&mut v, payload.len(), kind, fl, stream);
    v.extend_from_slice(payload);
    v
}

fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut v = Vec::new();
    frame::write_settings(&mut v, pairs);
    v
}

/// `:status: 200` plus `content-length: n` when given.
fn head_block(status: &str, content_length: Option<usize>) -> Vec<u8> {
    let mut b = Vec::new();
    hpack::encode_field(b":status", status.as_bytes(), &mut b);
    if let Some(n) = content_length {
        hpack::encode_field(b"content-length", n.to_string().as_bytes(), &mut b);
    }
    b
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Settings,
    Acked,
    PingAck([u8; 8]),
    Head(u32, u16),
    Field(String, String),
    Response(u32, u16, u64),
    Reset(u32, ErrorCode),
    Malformed(u32, Malformed),
    Refused(u32),
    GoAway(u32, ErrorCode),
}

fn own(e: Event<'_, u32>) -> Ev {
    match e {
        Event::Settings => Ev::Settings,
        Event::SettingsAcked => Ev::Acked,
        Event::PingAck(d) => Ev::PingAck(d),
        Event::Head { stream, status, .. } => Ev::Head(stream, status),
        Event::Field { name, value, .. } => Ev::Field(
            String::from_utf8_lossy(name).into(),
            String::from_utf8_lossy(value).into(),
        ),
        Event::Response {
            tag,
            stream,
            status,
            body_bytes,
        } => {
            assert_eq!(tag, stream * 10, "tags travel with their stream");
            Ev::Response(stream, status, body_bytes)
        }
        Event::Reset { stream, code, .. } => Ev::Reset(stream, code),
        Event::Malformed { stream, why, .. } => Ev::Malformed(stream, why),
        Event::Refused { stream, .. } => Ev::Refused(stream),
        Event::GoAway { last_stream, code } => Ev::GoAway(last_stream, code),
        Event::Data { .. } => unreachable!("kept in Client::bodies"),
    }
}

struct Client {
    conn: Connection<u32>,
    reqs: Vec<H2Request>,
    out: Vec<u8>,
    events: Vec<Ev>,
    /// The DATA of each stream, as [`Event::Data`] gave it.
    bodies: std::collections::BTreeMap<u32, Vec<u8>>,
}

impl Client {
    fn new(config: Config, body: &[u8]) -> Self {
        let url = parse_url("http://127.0.0.1:8080/x").unwrap();
        let get = RequestSpec {
            method: "GET",
            url: &url,
            headers: &[],
            body: b"",
        };
        let post = RequestSpec {
            method: "POST",
            body,
            ..get
        };
        let head = RequestSpec {
            method: "HEAD",
            ..get
        };
        let reqs = vec![
            H2Request::new(&get).unwrap(),
            H2Request::new(&post).unwrap(),
            H2Request::new(&head).unwrap(),
        ];
        let mut conn = Connection::new(config);
        let mut out = Vec::new();
        conn.preface(&mut out);
        Client {
            conn,
            reqs,
            out,
            events: Vec::new(),
            bodies: Default::default(),
        }
    }

    /// A client that has the server's (given) SETTINGS.
    fn ready(config: Config, server: &[(u16, u32)]) -> Self {
        let mut c = Client::new(config, b"0123456789");
        c.feed(&settings(server)).unwrap();
        c.out.clear();
        c.events.clear();
        c
    }

    fn feed(&mut self, bytes: &[u8]) -> Result<(), H2Error> {
        let (events, bodies) = (&mut self.events, &mut self.bodies);
        self.conn
            .recv(bytes, &self.reqs, &mut self.out, &mut |e| match e {
                Event::Data { tag, data } => {
                    bodies.entry(tag / 10).or_default().extend_from_slice(data)
                }
                e => events.push(own(e)),
            })
    }

    fn open(&mut self, request: usize) -> u32 {
        let id = self.conn.next_id();
        self.conn.open(&self.reqs, request, id * 10, &mut self.out)
    }

    /// The frames written so far, parsed (and cleared).
    fn sent(&mut self) -> Vec<(FrameHeader, Vec<u8>)> {
        let mut v = Vec::new();
        let mut b = &self.out[..];
        if b.starts_with(PREFACE) {
            b = &b[PREFACE.len()..];
        }
        while !b.is_empty() {
            let h = FrameHeader::parse(b[..FRAME_HEADER_LEN].try_into().unwrap());
            let end = FRAME_HEADER_LEN + h.len as usize;
            v.push((h, b[FRAME_HEADER_LEN..end].to_vec()));
            b = &b[end..];
        }
        self.out.clear();
        v
    }
}

fn config(streams: u32) -> Config {
    Config {
        max_streams: streams,
        ..Config::default()
    }
}

#[test]
fn preface_settings_and_window() {
    let mut c = Client::new(config(4), b"");
    assert!(c.out.starts_with(PREFACE));
    let sent = c.sent();
    assert_eq!(sent[0].0.kind, FrameKind::SETTINGS);
    let pairs: Vec<(u16, u32)> = sent[0]
        .1
        .chunks(6)
        .map(|s| {
            (
                u16::from_be_bytes([s[0], s[1]]),
                u32::from_be_bytes([s[2], s[3], s[4], s[5]]),
            )
        })
        .collect();
    assert!(pairs.contains(&(setting::ENABLE_PUSH, 0)));
    assert!(pairs.contains(&(
        setting::INITIAL_WINDOW_SIZE,
        Config::default().stream_window
    )));
    assert_eq!(sent[1].0.kind, FrameKind::WINDOW_UPDATE);
    assert!(!c.conn.can_open(), "no stream before the server's SETTINGS");
    c.feed(&settings(&[])).unwrap();
    assert!(c.conn.can_open());
    assert_eq!(c.events, [Ev::Settings]);
    let sent = c.sent();
    assert_eq!(
        (sent[0].0.kind, sent[0].0.flags),
        (FrameKind::SETTINGS, flags::ACK)
    );
    c.feed(&frame(FrameKind::SETTINGS, flags::ACK, 0, &[]))
        .unwrap();
    assert!(c.conn.settings_acked());
    assert_eq!(c.events, [Ev::Settings, Ev::Acked]);
}

#[test]
fn request_block_decodes_to_the_request() {
    let url = parse_url("http://127.0.0.1:8080/a?b=1").unwrap();
    let headers = [
        ("Host".to_string(), "example.test".to_string()),
        ("Connection".to_string(), "keep-alive".to_string()),
        ("X-Trace".to_string(), "abc".to_string()),
        ("Accept".to_string(), "*/*".to_string()),
    ];
    let spec = RequestSpec {
        method: "POST",
        url: &url,
        headers: &headers,
        body: b"hello",
    };
    let r = H2Request::new(&spec).unwrap();
    let mut d = Decoder::new(4096);
    let got = decode_all(&mut d, r.block()).unwrap();
    assert_eq!(
        oracle(&mut loona_hpack::Decoder::new(), r.block()),
        Some(got.clone())
    );
    let want: Vec<(Vec<u8>, Vec<u8>)> = [
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", "example.test"),
        (":path", "/a?b=1"),
        ("x-trace", "abc"),
        ("accept", "*/*"),
        ("user-agent", crate::USER_AGENT),
        ("content-length", "5"),
    ]
    .iter()
    .map(|(a, b)| (a.as_bytes().to_vec(), b.as_bytes().to_vec()))
    .collect();
    assert_eq!(got, want);
    assert_eq!(r.body(), b"hello");
    // Bad requests are refused as for HTTP/1.1.
    let bad = RequestSpec {
        method: "G T",
        ..spec
    };
    assert!(H2Request::new(&bad).is_err());
}

/// A request rendered as HTTP/1.1 bytes (a session's, per send) becomes
/// the same header block and body as the request made directly, reusing
/// one H2Request for each.
#[test]
fn http1_bytes_render_to_the_same_block_as_the_request() {
    let url = parse_url("http://127.0.0.1:8080/a?b=1").unwrap();
    let tls = parse_url("https://localhost/x").unwrap();
    let h = |n: &str, v: &str| (n.to_string(), v.to_string());
    let long = "X-".to_string() + &"Long".repeat(20);
    let sets: [Vec<(String, String)>; 4] = [
        vec![],
        vec![h("Host", "example.test"), h("Connection", "keep-alive")],
        vec![
            h("X-Trace", "abc"),
            h("Cookie", "a=1; b=2"),
            h("TE", "gzip"),
        ],
        vec![h(&long, "v"), h("te", "trailers"), h("Accept", "*/*")],
    ];
    let mut r = H2Request::empty();
    for (url, https) in [(&url, false), (&tls, true)] {
        for headers in &sets {
            for (method, body) in [("GET", &b""[..]), ("POST", b"hello"), ("HEAD", b"")] {
                let spec = RequestSpec {
                    method,
                    url,
                    headers,
                    body,
                };
                let direct = H2Request::new(&spec).unwrap();
                let bytes = crate::RequestTemplate::new(&spec).unwrap().bytes().to_vec();
                assert!(r.render_http1(&bytes, https));
                assert_eq!(r, direct, "{}", String::from_utf8_lossy(&bytes));
            }
        }
    }
    // A long name is lowered and sent as a literal, as H2Request::new does.
    let fields = decode_all(&mut Decoder::new(4096), r.block()).unwrap();
    assert!(fields
        .iter()
        .any(|(n, _)| *n == long.to_lowercase().as_bytes()));
    assert!(!r.render_http1(b"GET / HTTP/1.1\r\nHost: a\r\n", false));
    assert_eq!((r.block(), r.body()), (&b""[..], &b""[..]));
}

/// A response to `stream`: head with content-length, `body` in DATA frames of `chunk` bytes.
fn response(stream: u32, body: &[u8], chunk: usize) -> Vec<u8> {
    let mut v = frame(
        FrameKind::HEADERS,
        flags::END_HEADERS,
        stream,
        &head_block("200", Some(body.len())),
    );
    let chunks: Vec<&[u8]> = body.chunks(chunk).collect();
    for (i, c) in chunks.iter().enumerate() {
        let fl = if i + 1 == chunks.len() {
            flags::END_STREAM
        } else {
            0
        };
        v.extend(frame(FrameKind::DATA, fl, stream, c));
    }
    v
}

#[test]
fn responses_are_the_same_at_every_split() {
    let mut wire = response(1, &[b'a'; 300], 100);
    wire.extend(frame(FrameKind::PING, 0, 0, b"12345678"));
    // Stream 3: padded HEADERS with priority, padded DATA, trailers.
    let block = head_block("200", None);
    let mut p = vec![3];
    p.extend([0, 0, 0, 0, 16]);
    p.extend(&block);
    p.extend([0; 3]);
    wire.extend(frame(
        FrameKind::HEADERS,
        flags::END_HEADERS | flags::PADDED | flags::PRIORITY,
        3,
        &p,
    ));
    wire.extend(frame(
        FrameKind::DATA,
        flags::PADDED,
        3,
        &[4, b'x', b'y', 0, 0, 0, 0],
    ));
    wire.extend(frame(FrameKind::DATA, flags::PADDED, 3, &[0]));
    let mut trailer = Vec::new();
    hpack::encode_field(b"x-t", b"1", &mut trailer);
    wire.extend(frame(
        FrameKind::HEADERS,
        flags::END_HEADERS | flags::END_STREAM,
        3,
        &trailer,
    ));
    let run = |pieces: &[&[u8]]| {
        let mut c = Client::ready(config(2), &[]);
        c.open(0);
        c.open(0);
        c.out.clear();
        for p in pieces {
            c.feed(p).unwrap();
        }
        let sent = c.sent();
        // The DATA's bytes, without padding, whatever the split.
        let bodies: Vec<_> = c.bodies.into_iter().collect();
        assert_eq!(bodies, [(1, vec![b'a'; 300]), (3, b"xy".to_vec())]);
        (c.events, sent)
    };
    let (whole, sent) = run(&[&wire]);
    assert_eq!(
        whole,
        [
            Ev::Field("content-length".into(), "300".into()),
            Ev::Head(1, 200),
            Ev::Response(1, 200, 300),
            Ev::Head(3, 200),
            Ev::Field("x-t".into(), "1".into()),
            Ev::Response(3, 200, 2),
        ]
    );
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0.kind, FrameKind::PING);
    assert_eq!(sent[0].0.flags, flags::ACK);
    assert_eq!(sent[0].1, b"12345678");
    for i in 0..=wire.len() {
        let (a, b) = wire.split_at(i);
        assert_eq!(run(&[a, b]).0, whole, "split at {i}");
    }
    let bytes: Vec<&[u8]> = wire.chunks(1).collect();
    assert_eq!(run(&bytes).0, whole);
}

#[test]
fn continuation_carries_a_split_block() {
    let mut c = Client::ready(config(1), &[]);
    c.open(0);
    let mut block = head_block("204", None);
    for i in 0..20 {
        hpack::encode_field(format!("x-{i}").as_bytes(), b"value", &mut block);
    }
    let (a, rest) = block.split_at(5);
    let (b, d) = rest.split_at(rest.len() / 2);
    let mut wire = frame(FrameKind::HEADERS, flags::END_STREAM, 1, a);
    wire.extend(frame(FrameKind::CONTINUATION, 0, 1, b));
    wire.extend(frame(FrameKind::CONTINUATION, flags::END_HEADERS, 1, d));
    c.feed(&wire).unwrap();
    assert_eq!(c.events[0], Ev::Field("x-0".into(), "value".into()));
    assert_eq!(c.events[20..], [Ev::Head(1, 204), Ev::Response(1, 204, 0)]);
    assert_eq!(c.events.len(), 22);
}

fn error_of(c: &mut Client, wire: &[u8]) -> H2Error {
    let e = c.feed(wire).unwrap_err();
    let sent = c.sent();
    let last = sent.last().expect("a GOAWAY is written");
    assert_eq!(last.0.kind, FrameKind::GOAWAY);
    assert_eq!(&last.1[4..8], &e.code().0.to_be_bytes());
    assert_eq!(c.feed(b"more").unwrap_err(), e, "the error stays");
    e
}

#[test]
fn continuation_errors() {
    let mut c = Client::ready(config(1), &[]);
    c.open(0);
    let mut wire = frame(FrameKind::HEADERS, 0, 1, &[0x88]);
    wire.extend(frame(FrameKind::PING, 0, 0, b"12345678"));
    assert_eq!(
        error_of(&mut c, &wire),
        H2Error::ExpectedContinuation(FrameKind::PING)
    );

    let mut c = Client::ready(config(1), &[]);
    c.open(0);
    let wire = frame(FrameKind::CONTINUATION, flags::END_HEADERS, 1, &[0x88]);
    assert_eq!(error_of(&mut c, &wire), H2Error::UnexpectedContinuation);

    let mut c = Client::ready(
        Config {
            max_header_block: 10,
            ..config(1)
        },
        &[],
    );
    c.open(0);
    let mut wire = frame(FrameKind::HEADERS, 0, 1, &[0x88; 6]);
    wire.extend(frame(FrameKind::CONTINUATION, 0, 1, &[0x88; 6]));
    assert_eq!(error_of(&mut c, &wire), H2Error::HeaderBlockTooLarge);
}

#[test]
fn settings_errors_and_limits() {
    for (pairs, err) in [
        (vec![(setting::ENABLE_PUSH, 2)], H2Error::BadEnablePush),
        (
            vec![(setting::INITIAL_WINDOW_SIZE, 1 << 31)],
            H2Error::BadInitialWindowSize,
        ),
        (
            vec![(setting::MAX_FRAME_SIZE, 16_383)],
            H2Error::BadMaxFrameSize,
        ),
        (
            vec![(setting::MAX_FRAME_SIZE, 1 << 24)],
            H2Error::BadMaxFrameSize,
        ),
    ] {
        let mut c = Client::new(config(1), b"");
        c.out.clear();
        assert_eq!(error_of(&mut c, &settings(&pairs)), err);
    }
    let mut c = Client::new(config(1), b"");
    c.out.clear();
    let e = error_of(&mut c, &frame(FrameKind::SETTINGS, 0, 0, &[0; 7]));
    assert_eq!(e, H2Error::BadFrameSize(FrameKind::SETTINGS));
    assert_eq!(e.code(), ErrorCode::FRAME_SIZE_ERROR);
    let mut c = Client::new(config(1), b"");
    c.out.clear();
    let e = error_of(&mut c, &frame(FrameKind::SETTINGS, flags::ACK, 0, &[0; 6]));
    assert_eq!(e, H2Error::BadFrameSize(FrameKind::SETTINGS));
    let mut c = Client::new(config(1), b"");
    c.out.clear();
    let e = error_of(&mut c, &frame(FrameKind::SETTINGS, 0, 1, &[]));
    assert_eq!(e, H2Error::NotStreamZero(FrameKind::SETTINGS));
    // Unknown settings are ignored.
    let mut c = Client::new(config(1), b"");
    c.feed(&settings(&[(0x99, 7)])).unwrap();
}

#[test]
fn max_concurrent_streams_caps_and_can_be_raised() {
    let mut c = Client::ready(config(10), &[(setting::MAX_CONCURRENT_STREAMS, 1)]);
    assert_eq!(c.conn.stream_limit(), 1);
    assert_eq!(c.open(0), 1);
    assert!(!c.conn.can_open());
    c.feed(&settings(&[(setting::MAX_CONCURRENT_STREAMS, 3)]))
        .unwrap();
    assert_eq!(c.open(0), 3);
    assert_eq!(c.open(0), 5);
    assert!(!c.conn.can_open());
    assert_eq!(c.conn.active(), 3);
    c.feed(&frame(
        FrameKind::HEADERS,
        flags::END_HEADERS | flags::END_STREAM,
        3,
        &[0x88],
    ))
    .unwrap();
    assert!(c.conn.can_open());
    // The local limit caps too.
    c.feed(&settings(&[(setting::MAX_CONCURRENT_STREAMS, 1000)]))
        .unwrap();
    assert_eq!(c.conn.stream_limit(), 10);
}

#[test]
fn max_frame_size_splits_headers_and_data() {
    let big = vec![b'b'; 40_000];
    let mut c = Client::new(config(1), &big);
    c.feed(&settings(&[(setting::MAX_FRAME_SIZE, 20_000)]))
        .unwrap();
    c.out.clear();
    c.open(1);
    let sent = c.sent();
    let kinds: Vec<(FrameKind, u32, u8)> =
        sent.iter().map(|(h, _)| (h.kind, h.len, h.flags)).collect();
    // Window 65535 holds the whole body, in frames of at most 20000 bytes.
    assert_eq!(
        kinds[1..],
        [
            (FrameKind::DATA, 20_000, 0),
            (FrameKind::DATA, 20_000, flags::END_STREAM)
        ]
    );
    // A header block above the frame size goes out in CONTINUATIONs.
    let url = parse_url("http://127.0.0.1/").unwrap();
    let long = [("x-long".to_string(), "v".repeat(30_000))];
    let spec = RequestSpec {
        method: "GET",
        url: &url,
        headers: &long,
        body: b"",
    };
    c.reqs.push(H2Request::new(&spec).unwrap());
    c.feed(&frame(
        FrameKind::HEADERS,
        flags::END_HEADERS | flags::END_STREAM,
        1,
        &[0x88],
    ))
    .unwrap();
    c.out.clear();
    c.open(3);
    let sent = c.sent();
    let kinds: Vec<(FrameKind, u8)> = sent.iter().map(|(h, _)| (h.kind, h.flags)).collect();
    assert_eq!(
        kinds,
        [
            (FrameKind::HEADERS, flags::END_STREAM),
            (FrameKind::CONTINUATION, flags::END_HEADERS)
        ]
    );
    let block: Vec<u8> = sent.iter().flat_map(|(_, p)| p.clone()).collect();
    assert_eq!(block, c.reqs[3].block());
}

fn data_sent(sent: &[(FrameHeader, Vec<u8>)]) -> Vec<u8> {
    sent.iter()
        .filter(|(h, _)| h.kind == FrameKind::DATA)
        .flat_map(|(_, p)| p.clone())
        .collect()
}

#[test]
fn send_flow_control_one_byte_window() {
    let mut c = Client::ready(config(1), &[(setting::INITIAL_WINDOW_SIZE, 1)]);
    c.open(1);
    assert_eq!(data_sent(&c.sent()), b"0");
    // The stream window is empty: a connection update frees nothing.
    c.feed(&frame(
        FrameKind::WINDOW_UPDATE,
        0,
        0,
        &100u32.to_be_bytes(),
    ))
    .unwrap();
    assert_eq!(data_sent(&c.sent()), b"");
    for i in 1..10 {
        c.feed(&frame(FrameKind::WINDOW_UPDATE, 0, 1, &1u32.to_be_bytes()))
            .unwrap();
        let sent = c.sent();
        assert_eq!(data_sent(&sent), [b'0' + i]);
        let end = sent[0].0.flags & flags::END_STREAM != 0;
        assert_eq!(end, i == 9);
    }
    // SETTINGS raising the initial window adds to open streams.
    let mut c = Client::ready(config(1), &[(setting::INITIAL_WINDOW_SIZE, 0)]);
    c.open(1);
    assert_eq!(data_sent(&c.sent()), b"");
    c.feed(&settings(&[(setting::INITIAL_WINDOW_SIZE, 4)]))
        .unwrap();
    assert_eq!(data_sent(&c.sent()), b"0123");
    // The connection window limits all streams.
    let mut c = Client::ready(config(1), &[]);
    let body = vec![b'z'; 70_000];
    c.reqs[1] = H2Request::new(&RequestSpec {
        method: "POST",
        url: &parse_url("http://h/").unwrap(),
        headers: &[],
        body: &body,
    })
    .unwrap();
    c.open(1);
    assert_eq!(data_sent(&c.sent()).len(), 65_535);
    c.feed(&frame(
        FrameKind::WINDOW_UPDATE,
        0,
        1,
        &10_000u32.to_be_bytes(),
    ))
    .unwrap();
    assert_eq!(data_sent(&c.sent()).len(), 0);
    c.feed(&frame(
        FrameKind::WINDOW_UPDATE,
        0,
        0,
        &10_000u32.to_be_bytes(),
    ))
    .unwrap();
    assert_eq!(data_sent(&c.sent()).len(), 4_465);
}

#[test]
fn window_update_errors() {
    let mut c = Client::ready(config(1), &[]);
    c.open(0);
    let e = error_of(
        &mut c,
        &frame(FrameKind::WINDOW_UPDATE, 0, 0, &0u32.to_be_bytes()),
    );
    assert_eq!(e, H2Error::ZeroWindowIncrement);
    let mut c = Client::ready(config(1), &[]);
    c.open(0);
    let e = error_of(
        &mut c,
        &frame(FrameKind::WINDOW_UPDATE, 0, 1, &0u32.to_be_bytes()),
    );
    assert_eq!(e, H2Error::ZeroWindowIncrement);
    let mut c = Client::ready(config(1), &[]);
    let e = error_of(
        &mut c,
        &frame(
            FrameKind::WINDOW_UPDATE,
            0,
            0,
            &((1u32 << 31) - 1).to_be_bytes(),
        ),
    );
    assert_eq!(
        (e, e.code()),
        (H2Error::WindowOverflow, ErrorCode::FLOW_CONTROL_ERROR)
    );
    let mut c = Client::ready(config(1), &[]);
    c.open(0);
    let e = error_of(&mut c, &frame(FrameKind::WINDOW_UPDATE, 0, 1, &[0; 3]));
    assert_eq!(e, H2Error::BadFrameSize(FrameKind::WINDOW_UPDATE));
    let mut c = Client::ready(config(1), &[]);
    let e = error_of(
        &mut c,
        &frame(FrameKind::WINDOW_UPDATE, 0, 5, &1u32.to_be_bytes()),
    );
    assert_eq!(e, H2Error::IdleStream(FrameKind::WINDOW_UPDATE));
    // INITIAL_WINDOW_SIZE pushing an open stream's window over the top.
    let mut c = Client::ready(config(1), &[]);
    c.open(0);
    c.feed(&frame(
        FrameKind::WINDOW_UPDATE,
        0,
        1,
        &((1u32 << 31) - 1 - 65_535).to_be_bytes(),
    ))
    .unwrap();
    let e = error_of(&mut c, &settings(&[(setting::INITIAL_WINDOW_SIZE, 65_536)]));
    assert_eq!(e, H2Error::WindowOverflow);
}

#[test]
fn receive_flow_control() {
    let small = Config {
        stream_window: 1000,
        connection_window: 3000,
        ..config(4)
    };
    let mut c = Client::ready(small, &[]);
    c.open(0);
    c.open(0);
    // 600 bytes on stream 1: its window drops below half: an update for it.
    c.feed(&frame(FrameKind::HEADERS, flags::END_HEADERS, 1, &[0x88]))
        .unwrap();
    c.feed(&frame(FrameKind::DATA, 0, 1, &[0; 600])).unwrap();
    let ups: Vec<(u32, Vec<u8>)> = c
        .sent()
        .into_iter()
        .filter(|(h, _)| h.kind == FrameKind::WINDOW_UPDATE)
        .map(|(h, p)| (h.stream, p))
        .collect();
    assert_eq!(ups, [(1, 600u32.to_be_bytes().to_vec())]);
    // The stream's window is 1000 again: 1001 bytes break it.
    c.feed(&frame(FrameKind::HEADERS, flags::END_HEADERS, 3, &[0x88]))
        .unwrap();
    let e = error_of(&mut c, &frame(FrameKind::DATA, 0, 3, &[0; 1001]));
    assert_eq!(
        (e, e.code()),
        (H2Error::FlowControlViolation, ErrorCode::FLOW_CONTROL_ERROR)
    );
}

#[test]
fn ping_both_ways() {
    let mut c = Client::ready(config(1), &[]);
    c.feed(&frame(FrameKind::PING, flags::ACK, 0, b"abcdefgh"))
        .unwrap();
    assert_eq!(c.events, [Ev::PingAck(*b"abcdefgh")]);
    assert!(c.sent().is_empty(), "an ACK is not answered");
    c.conn.ping(*b"zzzzzzzz", &mut c.out);
    assert_eq!(c.sent()[0].0.flags, 0);
    let e = error_of(&mut c, &frame(FrameKind::PING, 0, 0, b"short"));
    assert_eq!(e, H2Error::BadFrameSize(FrameKind::PING));
    let mut c = Client::ready(config(1), &[]);
    let e = error_of(&mut c, &frame(FrameKind::PING, 0, 1, b"12345678"));
    assert_eq!(e, H2Error::NotStreamZero(FrameKind::PING));
}

#[test]
fn rst_stream() {
    let mut c = Client::ready(config(3), &[]);
    c.open(0);
    c.open(0);
    c.feed(&frame(FrameKind::RST_STREAM, 0, 3, &7u32.to_be_bytes()))
        .unwrap();
    assert_eq!(c.events, [Ev::Reset(3, ErrorCode::REFUSED_STREAM)]);
    assert_eq!(c.conn.active(), 1);
    // Frames for the reset stream are ignored; its DATA still uses the connection window.
    c.feed(&frame(FrameKind::DATA, 0, 3, &[0; 10])).unwrap();
    c.feed(&frame(FrameKind::RST_STREAM, 0, 3, &8u32.to_be_bytes()))
        .unwrap();
    assert_eq!(c.events.len(), 1);
    assert_eq!(ErrorCode(7).to_string(), "REFUSED_STREAM");
    assert_eq!(ErrorCode(0x77).to_string(), "error code 0x77");
    for (wire, err) in [
        (
            frame(FrameKind::RST_STREAM, 0, 0, &[0; 4]),
            H2Error::StreamZero(FrameKind::RST_STREAM),
        ),
        (
            frame(FrameKind::RST_STREAM, 0, 1, &[0; 5]),
            H2Error::BadFrameSize(FrameKind::RST_STREAM),
        ),
        (
            frame(FrameKind::RST_STREAM, 0, 9, &[0; 4]),
            H2Error::IdleStream(FrameKind::RST_STREAM),
        ),
    ] {
        let mut c = Client::ready(config(1), &[]);
        c.open(0);
        assert_eq!(error_of(&mut c, &wire), err);
    }
}

#[test]
fn goaway_refuses_streams_above_last() {
    let mut c = Client::ready(config(4), &[]);
    for _ in 0..4 {
        c.open(0);
    }
    let mut p = 3u32.to_be_bytes().to_vec();
    p.extend(0u32.to_be_bytes());
    p.extend(b"debug data");
    c.feed(&frame(FrameKind::GOAWAY, 0, 0, &p)).unwrap();
    assert_eq!(
        c.events,
        [
            Ev::GoAway(3, ErrorCode::NO_ERROR),
            Ev::Refused(5),
            Ev::Refused(7)
        ]
    );
    assert!(!c.conn.can_open() && c.conn.is_closing());
    // Streams at or below last-stream-id finish.
    c.feed(&frame(
        FrameKind::HEADERS,
        flags::END_HEADERS | flags::END_STREAM,
        1,
        &[0x88],
    ))
    .unwrap();
    assert_eq!(c.events.last(), Some(&Ev::Response(1, 200, 0)));
    // A second GOAWAY cannot raise the last stream.
    let mut p = 9u32.to_be_bytes().to_vec();
    p.extend(2u32.to_be_bytes());
    c.feed(&frame(FrameKind::GOAWAY, 0, 0, &p)).unwrap();
    assert_eq!(c.conn.goaway(), Some((3, ErrorCode::INTERNAL_ERROR)));
    let e = error_of(&mut c, &frame(FrameKind::GOAWAY, 0, 0, &[0; 7]));
    assert_eq!(e, H2Error::BadFrameSize(FrameKind::GOAWAY));
}

#[test]
fn unknown_frames_and_priority_are_ignored() {
    let mut c = Client::ready(config(1), &[]);
    c.open(0);
    c.out.clear();
    c.feed(&frame(FrameKind(0xfa), 0xff, 1, b"anything at all"))
        .unwrap();
    c.feed(&frame(FrameKind(0x20), 0, 0, &[])).unwrap();
    c.feed(&frame(FrameKind::PRIORITY, 0, 1, &[0, 0, 0, 0, 9]))
        .unwrap();
    c.feed(&frame(FrameKind::PRIORITY, 0, 11, &[0, 0, 0, 0, 9]))
        .unwrap();
    assert!(c.events.is_empty() && c.sent().is_empty());
    let e = error_of(&mut c, &frame(FrameKind::PRIORITY, 0, 1, &[0; 4]));
    assert_eq!(e, H2Error::BadFrameSize(FrameKind::PRIORITY));
}

#[test]
fn frame_level_errors() {
    let cases: Vec<(Vec<u8>, H2Error)> = vec![
        (
            frame(FrameKind::DATA, 0, 0, b"x"),
            H2Error::StreamZero(FrameKind::DATA),
        ),
        (
            frame(FrameKind::HEADERS, 4, 0, &[0x88]),
            H2Error::StreamZero(FrameKind::HEADERS),
        ),
        (
            frame(FrameKind::PRIORITY, 0, 0, &[0; 5]),
            H2Error::StreamZero(FrameKind::PRIORITY),
        ),
        (
            frame(FrameKind::DATA, 0, 3, b"x"),
            H2Error::IdleStream(FrameKind::DATA),
        ),
        (
            frame(FrameKind::HEADERS, 4, 2, &[0x88]),
            H2Error::IdleStream(FrameKind::HEADERS),
        ),
        (
            frame(FrameKind::PUSH_PROMISE, 4, 1, &[0, 0, 0, 2, 0x88]),
            H2Error::PushPromise,
        ),
        (
            frame(FrameKind::GOAWAY, 0, 1, &[0; 8]),
            H2Error::NotStreamZero(FrameKind::GOAWAY),
        ),
        (
            frame(FrameKind::DATA, flags::PADDED, 1, &[]),
            H2Error::BadPadding(FrameKind::DATA),
        ),
        (
            frame(FrameKind::DATA, flags::PADDED, 1, &[3, 0, 0]),
            H2Error::BadPadding(FrameKind::DATA),
        ),
        (
            frame(FrameKind::HEADERS, flags::PADDED | 4, 1, &[2, 0x88]),
            H2Error::BadPadding(FrameKind::HEADERS),
        ),
        (
            frame(FrameKind::HEADERS, flags::PRIORITY | 4, 1, &[0, 0]),
            H2Error::BadFrameSize(FrameKind::HEADERS),
        ),
        (
            frame(FrameKind::HEADERS, 4, 1, &[0x80]),
            H2Error::Compression(HpackError::ZeroIndex),
        ),
    ];
    for (wire, err) in cases {
        let mut c = Client::ready(config(1), &[]);
        c.open(0);
        assert_eq!(error_of(&mut c, &wire), err, "{wire:?}");
    }
    // A frame longer than the advertised 16384 is refused at its header.
    let mut c = Client::ready(config(1), &[]);
    let mut head = Vec::new();
    frame::write_header(&mut head, 16_385, FrameKind::DATA, 0, 1);
    let e = error_of(&mut c, &head);
    assert_eq!(
        (e, e.code()),
        (H2Error::FrameTooLarge(16_385), ErrorCode::FRAME_SIZE_ERROR)
    );
    assert_eq!(
        H2Error::Compression(HpackError::ZeroIndex).code(),
        ErrorCode::COMPRESSION_ERROR
    );
}

/// The last frame in `wire` has END_STREAM.
fn ends_stream(mut wire: &[u8]) -> bool {
    let mut end = false;
    while !wire.is_empty() {
        let h = FrameHeader::parse(wire[..FRAME_HEADER_LEN].try_into().unwrap());
        end = h.flags & flags::END_STREAM != 0;
        wire = &wire[FRAME_HEADER_LEN + h.len as usize..];
    }
    end
}

#[test]
fn malformed_responses_reset_the_stream_only() {
    let field = |n: &[u8], v: &[u8]| {
        let mut b = Vec::new();
        hpack::encode_field(n, v, &mut b);
        b
    };
    let cat = |a: Vec<u8>, b: Vec<u8>| [a, b].concat();
    let eh = flags::END_HEADERS | flags::END_STREAM;
    let cases: Vec<(Vec<u8>, Malformed)> = vec![
        (
            frame(FrameKind::HEADERS, eh, 1, &field(b"server", b"x")),
            Malformed::BadStatus,
        ),
        (
            frame(FrameKind::HEADERS, eh, 1, &field(b":status", b"20")),
            Malformed::BadStatus,
        ),
        (
            frame(FrameKind::HEADERS, eh, 1, &cat(vec![0x88], vec![0x88])),
            Malformed::BadStatus,
        ),
        (
            frame(
                FrameKind::HEADERS,
                eh,
                1,
                &cat(vec![0x88], field(b":path", b"/")),
            ),
            Malformed::BadPseudo,
        ),
        (
            frame(
                FrameKind::HEADERS,
                eh,
                1,
                &cat(field(b"x", b"1"), vec![0x88]),
            ),
            Malformed::BadPseudo,
        ),
        (
            frame(
                FrameKind::HEADERS,
                eh,
                1,
                &cat(vec![0x88], field(b"X-Up", b"1")),
            ),
            Malformed::BadFieldName,
        ),
        (
            frame(
                FrameKind::HEADERS,
                eh,
                1,
                &cat(vec![0x88], field(b"connection", b"close")),
            ),
            Malformed::BadFieldName,
        ),
        (
            frame(FrameKind::HEADERS, eh, 1, &head_block("200", Some(5))),
            Malformed::ContentLength,
        ),
        (
            frame(
                FrameKind::HEADERS,
                eh,
                1,
                &cat(vec![0x88], field(b"content-length", b"x")),
            ),
            Malformed::ContentLength,
        ),
        (
            frame(FrameKind::DATA, 0, 1, b"early"),
            Malformed::DataBeforeHeaders,
        ),
        (
            frame(FrameKind::HEADERS, eh, 1, &head_block("103", None)),
            Malformed::InformationalEnd,
        ),
        (
            cat(
                frame(FrameKind::HEADERS, flags::END_HEADERS, 1, &[0x88]),
                frame(
                    FrameKind::HEADERS,
                    flags::END_HEADERS,
                    1,
                    &field(b"x-t", b"1"),
                ),
            ),
            Malformed::TrailersWithoutEnd,
        ),
        (
            cat(
                frame(FrameKind::HEADERS, flags::END_HEADERS, 1, &[0x88]),
                frame(FrameKind::HEADERS, eh, 1, &[0x88]),
            ),
            Malformed::BadPseudo,
        ),
    ];
    for (wire, why) in cases {
        let mut c = Client::ready(config(2), &[]);
        c.open(0);
        c.open(0);
        c.feed(&wire).unwrap();
        assert_eq!(c.events.last(), Some(&Ev::Malformed(1, why)), "{wire:?}");
        // A stream the server has not ended is reset.
        let ended = ends_stream(&wire);
        let rst = c
            .sent()
            .iter()
            .any(|(h, p)| h.kind == FrameKind::RST_STREAM && h.stream == 1 && p == &[0, 0, 0, 1]);
        assert_eq!(rst, !ended, "{wire:?}");
        // The connection goes on.
        c.feed(&frame(FrameKind::HEADERS, eh, 3, &[0x88])).unwrap();
        assert_eq!(c.events.last(), Some(&Ev::Response(3, 200, 0)));
    }
}

#[test]
fn interim_heads_head_requests_and_early_answers() {
    let mut c = Client::ready(config(3), &[(setting::INITIAL_WINDOW_SIZE, 2)]);
    c.open(0);
    c.open(2);
    c.open(1);
    c.out.clear();
    let eh = flags::END_HEADERS | flags::END_STREAM;
    c.feed(&frame(
        FrameKind::HEADERS,
        flags::END_HEADERS,
        1,
        &head_block("100", None),
    ))
    .unwrap();
    c.feed(&frame(
        FrameKind::HEADERS,
        eh,
        1,
        &head_block("200", Some(0)),
    ))
    .unwrap();
    // HEAD: content-length without a body is right.
    c.feed(&frame(
        FrameKind::HEADERS,
        eh,
        3,
        &head_block("200", Some(1234)),
    ))
    .unwrap();
    // The POST is answered before its body went: the rest is abandoned.
    c.feed(&frame(FrameKind::HEADERS, eh, 5, &head_block("413", None)))
        .unwrap();
    let resp: Vec<&Ev> = c
        .events
        .iter()
        .filter(|e| matches!(e, Ev::Response(..)))
        .collect();
    assert_eq!(
        resp,
        [
            &Ev::Response(1, 200, 0),
            &Ev::Response(3, 200, 0),
            &Ev::Response(5, 413, 0)
        ]
    );
    let sent = c.sent();
    assert!(sent
        .iter()
        .any(|(h, p)| h.kind == FrameKind::RST_STREAM && h.stream == 5 && p == &[0, 0, 0, 0]));
    // Nothing more of its body goes on a later window.
    c.feed(&frame(
        FrameKind::WINDOW_UPDATE,
        0,
        0,
        &100u32.to_be_bytes(),
    ))
    .unwrap();
    assert!(data_sent(&c.sent()).is_empty());
}

#[test]
fn header_table_size_setting_after_ack() {
    let mut c = Client::ready(
        Config {
            header_table_size: 0,
            ..config(1)
        },
        &[],
    );
    c.open(0);
    // Before the ACK the server may still use 4096.
    let mut block = Vec::new();
    encode_int(4096, 5, 0x20, &mut block);
    block.push(0x88);
    c.feed(&frame(FrameKind::HEADERS, flags::END_HEADERS, 1, &block))
        .unwrap();
    c.feed(&frame(FrameKind::SETTINGS, flags::ACK, 0, &[]))
        .unwrap();
    c.feed(&frame(
        FrameKind::HEADERS,
        flags::END_HEADERS | flags::END_STREAM,
        1,
        &[0x20, 0x90], // size update to 0, then accept-encoding (a trailer)
    ))
    .unwrap();
    c.open(0);
    let e = error_of(
        &mut c,
        &frame(FrameKind::HEADERS, flags::END_HEADERS, 3, &[0x21, 0x88]),
    );
    assert_eq!(e, H2Error::Compression(HpackError::SizeUpdateTooLarge));
}

/// nginx's way: every response's fields as Huffman-coded literals with
/// incremental indexing, the table never referenced; values repeat by
/// place in the block (remembered) and change now and then (decoded again),
/// with more coded values than remembered places.
#[test]
fn repeated_huffman_values_by_place_match_loona() {
    let mut rng = Rng(11);
    let mut ours = Decoder::new(4096);
    let mut theirs = loona_hpack::Decoder::new();
    let mut values: Vec<Vec<u8>> = (0..12).map(|k| format!("v{k}").into_bytes()).collect();
    for i in 0..400 {
        if rng.below(4) == 0 {
            let k = rng.below(values.len() as u64);
            values[k] = format!("Sun, 06 Dec 2026 03:{:02}:{:02} GMT", i / 60, i % 60).into_bytes();
        }
        let n = 1 + rng.below(values.len() as u64);
        let mut block = vec![0x88];
        let mut want = vec![(b":status".to_vec(), b"200".to_vec())];
        for (k, v) in values[..n].iter().enumerate() {
            // Indexed names (static 1..=61), with incremental indexing.
            let name_index = [54, 33, 31, 28][k % 4];
            encode_int(name_index, 6, 0x40, &mut block);
            let mut h = Vec::new();
            huffman_encode(v, &mut h);
            encode_int(h.len(), 7, 0x80, &mut block);
            block.extend(h);
            let name = [&b"server"[..], b"date", b"content-type", b"content-length"][k % 4];
            want.push((name.to_vec(), v.clone()));
        }
        let a = decode_all(&mut ours, &block).unwrap();
        assert_eq!(Some(a.clone()), oracle(&mut theirs, &block));
        assert_eq!(a, want);
    }
    // A bad Huffman string in a remembered place is an error, and the
    // place forgets it.
    let mut block = vec![0x5c, 0x81, 0xff];
    assert_eq!(
        decode_all(&mut ours, &block),
        Err(HpackError::HuffmanPadding)
    );
    block = vec![0x5c, 0x80];
    assert_eq!(
        decode_all(&mut ours, &block).unwrap(),
        [(b"content-length".to_vec(), Vec::new())]
    );
}
