//! `xload serve --h2`: one connection's HTTP/2 state beside the HTTP/1.1
//! scanner, and the worker's prebuilt HTTP/2 answers.
//!
//! The codec ([`xload_http::h2::ServerConnection`]) turns received bytes
//! into whole requests and renders answers into [`H2State::out`]; the
//! responder sends that buffer whole (one send in flight per connection, as
//! for HTTP/1.1) and counts an answer once the send holding its last byte
//! has completed.

use std::collections::VecDeque;

use xload_http::h2::{H2Response, ServerConfig, ServerConnection, ServerEvent};

/// Streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
pub(super) const MAX_STREAMS: u32 = 128;

/// Bytes waiting behind the send in flight, at most: what a client provokes
/// without reading (PING ACKs, WINDOW_UPDATEs, resets of refused streams)
/// stops here and the connection is closed (answers themselves wait for
/// the send, within the codec's out budget).
pub(super) const MAX_PENDING_OUT: usize = 16 << 20;

/// What a stream asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ask {
    /// The plain answer (any method but HEAD).
    Ok,
    /// The plain answer's head only.
    Head,
    /// `/stats` (its head only for `head`).
    Stats { head: bool },
}

impl Ask {
    fn of(method: &[u8], path: &[u8]) -> Ask {
        let head = method == b"HEAD";
        match path {
            b"/stats" => Ask::Stats { head },
            _ if head => Ask::Head,
            _ => Ask::Ok,
        }
    }

    /// Counted in `requests` once sent (`/stats` is not, as over HTTP/1.1).
    fn counts(self) -> bool {
        !matches!(self, Ask::Stats { .. })
    }
}

/// Index of the plain answer in [`answers`]' table, and of its HEAD form.
const OK: usize = 0;
const HEAD: usize = 1;

/// A worker's prebuilt answers: `body_size` bytes of `x`, and its head alone.
pub(super) fn answers(body_size: usize) -> Vec<H2Response> {
    let len = body_size.to_string();
    let fields = [
        ("server", "xload"),
        ("content-type", "text/plain"),
        ("content-length", len.as_str()),
    ];
    vec![
        H2Response::new(200, &fields, vec![b'x'; body_size]),
        H2Response::new(200, &fields, Vec::new()),
    ]
}

fn stats_answer(body: String, head: bool) -> H2Response {
    let len = body.len().to_string();
    let fields = [
        ("server", "xload"),
        ("content-type", "application/json"),
        ("content-length", len.as_str()),
    ];
    let body = if head { Vec::new() } else { body.into_bytes() };
    H2Response::new(200, &fields, body)
}

/// One HTTP/2 connection of the responder.
pub(super) struct H2State {
    pub conn: ServerConnection<Ask>,
    /// Bytes to send next (the send in flight reads the connection's `out`).
    pub out: Vec<u8>,
    /// Answers whose last byte is in `out`, counted when it has gone.
    pub ok_in_out: u32,
    /// Requests held by `--delay`, oldest first.
    pub held: VecDeque<(u32, Ask)>,
    /// Whole requests of the bytes being read.
    ready: Vec<(u32, Ask)>,
}

/// What reading some bytes did.
pub(super) struct Read {
    /// Requests now held by `--delay`.
    pub held: u32,
    /// Malformed requests (reset) and connection errors (GOAWAY written).
    pub bad: u32,
    /// A connection error: the GOAWAY goes, then the connection closes.
    pub failed: bool,
    /// More than [`MAX_PENDING_OUT`] bytes wait behind a send the client
    /// does not take: dropped, and the connection closes.
    pub flooded: bool,
}

fn config() -> ServerConfig {
    ServerConfig {
        max_concurrent_streams: MAX_STREAMS,
        ..ServerConfig::default()
    }
}

impl H2State {
    /// A connection's state with the server's SETTINGS ready to go.
    pub(super) fn new() -> Box<H2State> {
        let mut s = Box::new(H2State {
            conn: ServerConnection::new(config()),
            out: Vec::new(),
            ok_in_out: 0,
            held: VecDeque::new(),
            ready: Vec::new(),
        });
        s.conn.start(&mut s.out);
        s
    }

    /// Takes received bytes: whole requests are answered into `out` (or
    /// held when `delayed`); `stats` renders the `/stats` document.
    pub(super) fn read(
        &mut self,
        data: &[u8],
        table: &[H2Response],
        delayed: bool,
        stats: impl Fn() -> String,
    ) -> Read {
        let H2State {
            conn,
            out,
            ok_in_out,
            held,
            ready,
        } = self;
        ready.clear();
        let mut bad = 0;
        let res = conn.recv(data, table, out, &mut Ask::of, &mut |e| match e {
            ServerEvent::Request { stream, tag, .. } => ready.push((stream, tag)),
            ServerEvent::Sent { tag, .. } => *ok_in_out += u32::from(tag.counts()),
            ServerEvent::Malformed { .. } => bad += 1,
            _ => {}
        });
        let mut n_held = 0;
        for &(stream, ask) in ready.iter() {
            let mut sent = |e| {
                if let ServerEvent::Sent { tag, .. } = e {
                    *ok_in_out += u32::from(Ask::counts(tag));
                }
            };
            match ask {
                Ask::Stats { head } => {
                    conn.respond_once(stream, stats_answer(stats(), head), table, out, &mut sent);
                }
                _ if delayed => {
                    held.push_back((stream, ask));
                    n_held += 1;
                }
                Ask::Ok => {
                    conn.respond(stream, table, OK, out, &mut sent);
                }
                Ask::Head => {
                    conn.respond(stream, table, HEAD, out, &mut sent);
                }
            }
        }
        let flooded = out.len() > MAX_PENDING_OUT;
        if flooded {
            out.clear();
        }
        Read {
            held: n_held,
            bad: bad + u32::from(res.is_err() || flooded),
            failed: res.is_err() || flooded,
            flooded,
        }
    }

    /// The oldest held request's time has come: its answer goes into `out`.
    pub(super) fn release_oldest(&mut self, table: &[H2Response]) {
        let Some((stream, ask)) = self.held.pop_front() else {
            return;
        };
        let idx = if ask == Ask::Head { HEAD } else { OK };
        let ok_in_out = &mut self.ok_in_out;
        // A stream reset meanwhile is not answered.
        self.conn
            .respond(stream, table, idx, &mut self.out, &mut |e| {
                if let ServerEvent::Sent { tag, .. } = e {
                    *ok_in_out += u32::from(tag.counts());
                }
            });
    }

    /// Renders what the windows now allow of answers held back (large bodies).
    pub(super) fn pump(&mut self, table: &[H2Response]) {
        let ok_in_out = &mut self.ok_in_out;
        self.conn.pump(table, &mut self.out, &mut |e| {
            if let ServerEvent::Sent { tag, .. } = e {
                *ok_in_out += u32::from(tag.counts());
            }
        });
    }

    /// Something is owed: held requests or answers not written whole.
    pub(super) fn owes(&self) -> bool {
        !self.held.is_empty() || self.conn.has_pending()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xload_http::h2::{Config, Connection, Event, H2Request};
    use xload_http::{parse_url, RequestSpec};

    fn client_requests() -> Vec<H2Request> {
        let url = parse_url("http://127.0.0.1:1/").unwrap();
        let stats = parse_url("http://127.0.0.1:1/stats").unwrap();
        let get = RequestSpec {
            method: "GET",
            url: &url,
            headers: &[],
            body: b"",
        };
        vec![
            H2Request::new(&get).unwrap(),
            H2Request::new(&RequestSpec {
                method: "HEAD",
                ..get
            })
            .unwrap(),
            H2Request::new(&RequestSpec { url: &stats, ..get }).unwrap(),
        ]
    }

    /// Runs the requests through a client and the state; the client's
    /// (request, status, body bytes) and the answers counted.
    fn run(delayed: bool) -> (Vec<(usize, u16, u64)>, u32, usize) {
        let table = answers(7);
        let reqs = client_requests();
        let mut client = Connection::<usize>::new(Config {
            max_streams: 8,
            ..Config::default()
        });
        let mut to_server = Vec::new();
        client.preface(&mut to_server);
        let mut s = H2State::new();
        let mut done = Vec::new();
        let mut counted = 0;
        let mut held_total = 0;
        let mut opened = 0;
        for _ in 0..100 {
            let r = s.read(&to_server, &table, delayed, || "{\"x\":1}".to_string());
            assert_eq!((r.bad, r.failed), (0, false));
            held_total += r.held as usize;
            while !s.held.is_empty() {
                s.release_oldest(&table);
            }
            to_server.clear();
            counted += std::mem::take(&mut s.ok_in_out);
            let to_client = std::mem::take(&mut s.out);
            client
                .recv(&to_client, &reqs, &mut to_server, &mut |e| {
                    if let Event::Response {
                        tag,
                        status,
                        body_bytes,
                        ..
                    } = e
                    {
                        done.push((tag, status, body_bytes));
                    }
                })
                .unwrap();
            while opened < 6 && client.can_open() {
                client.open(&reqs, opened % 3, opened % 3, &mut to_server);
                opened += 1;
            }
            if to_server.is_empty() && s.out.is_empty() {
                break;
            }
        }
        done.sort();
        (done, counted, held_total)
    }

    #[test]
    fn answers_counts_and_stats() {
        let want = vec![
            (0, 200, 7),
            (0, 200, 7),
            (1, 200, 0),
            (1, 200, 0),
            (2, 200, 7),
            (2, 200, 7),
        ];
        // /stats is answered but not counted; held answers go on release.
        assert_eq!(run(false), (want.clone(), 4, 0));
        assert_eq!(run(true), (want, 4, 4));
    }

    #[test]
    fn a_client_that_provokes_without_reading_is_cut_off() {
        let mut s = H2State::new();
        let mut wire = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        wire.extend([0, 0, 0, 4, 0, 0, 0, 0, 0]);
        let r = s.read(&wire, &answers(1), false, String::new);
        assert!(!r.failed);
        // PINGs whose ACKs nobody takes: 17 bytes each.
        let ping = [0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        let burst: Vec<u8> = ping.iter().copied().cycle().take(17 * 100_000).collect();
        let mut flooded = 0;
        for _ in 0..20 {
            let r = s.read(&burst, &answers(1), false, String::new);
            if r.flooded {
                assert!(r.failed && r.bad == 1);
                flooded += 1;
                break;
            }
        }
        assert_eq!(flooded, 1, "cut off once past the cap");
        assert!(s.out.is_empty(), "what waited is dropped");
    }

    #[test]
    fn a_malformed_request_is_counted_and_the_connection_goes_on() {
        let mut s = H2State::new();
        let mut wire = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        wire.extend([0, 0, 0, 4, 0, 0, 0, 0, 0]);
        // HEADERS (END_STREAM | END_HEADERS) on stream 1 with :method GET only.
        wire.extend([0, 0, 1, 1, 5, 0, 0, 0, 1, 0x82]);
        // Then a good one on stream 3: GET, http, /.
        wire.extend([0, 0, 3, 1, 5, 0, 0, 0, 3, 0x82, 0x86, 0x84]);
        let r = s.read(&wire, &answers(4), false, String::new);
        assert_eq!((r.bad, r.failed), (1, false));
        assert_eq!(s.ok_in_out, 1);
    }

    #[test]
    fn a_bad_preface_is_counted_and_failed() {
        let mut s = H2State::new();
        s.out.clear();
        let r = s.read(b"GET / HTTP/1.1\r\n\r\n", &answers(1), false, String::new);
        assert_eq!((r.bad, r.failed, r.held), (1, true, 0));
        // GOAWAY(last 0, PROTOCOL_ERROR).
        assert_eq!(s.out, [0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    }
}
