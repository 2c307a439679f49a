//! The HTTP/2 client codec against real servers: nghttpd (nghttp2's server:
//! Huffman, an indexing HPACK encoder, large bodies) and hostile servers
//! written with python3-h2 (tests/h2/hostile.py): GOAWAY mid-run,
//! RST_STREAM, a 1-byte stream window, MAX_CONCURRENT_STREAMS 1 then
//! raised, table size updates, CONTINUATION, a PING flood, a bad frame.
//!
//! A small blocking driver stands in for the engine: it keeps up to
//! `streams` streams open, retries the streams a GOAWAY refused on a new
//! connection, and is bounded in time (a run that hangs fails). Servers
//! come from Debian (nghttp2-server, python3-h2, installed by scripts/test);
//! without them these tests are skipped with a note.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use xload_http::h2::{Config, Connection, ErrorCode, Event, H2Error, H2Request};
use xload_http::{parse_url, RequestSpec};

const DEADLINE: Duration = Duration::from_secs(90);

#[derive(Debug, Default)]
struct Tally {
    responses: u64,
    statuses: BTreeMap<u16, u64>,
    body_bytes: u64,
    resets: BTreeMap<ErrorCode, u64>,
    malformed: u64,
    refused: u64,
    goaways: u64,
    connections: u64,
    /// Streams lost with a connection that ended under them.
    lost: u64,
    errors: Vec<H2Error>,
    max_active: usize,
    pings_acked: bool,
}

/// Runs `total` requests (`reqs[which]`) over as many connections as it
/// takes, `streams` at once per connection.
fn drive(addr: SocketAddr, req: &H2Request, total: u64, streams: u32) -> Tally {
    let reqs = std::slice::from_ref(req);
    let start = Instant::now();
    let mut t = Tally::default();
    let mut opened = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let finished = |t: &Tally| t.responses + t.resets.values().sum::<u64>() + t.malformed + t.lost;
    while finished(&t) < total {
        assert!(start.elapsed() < DEADLINE, "no progress: {t:?}");
        let mut sock = TcpStream::connect(addr).expect("connect");
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        t.connections += 1;
        let mut conn = Connection::<u64>::new(Config {
            max_streams: streams,
            ..Config::default()
        });
        let mut out = Vec::new();
        conn.preface(&mut out);
        loop {
            assert!(start.elapsed() < DEADLINE, "hung: {t:?}");
            while opened < total && conn.can_open() {
                conn.open(reqs, 0, opened, &mut out);
                opened += 1;
            }
            t.max_active = t.max_active.max(conn.active());
            if !out.is_empty() {
                if sock.write_all(&out).is_err() {
                    t.lost += conn.active() as u64;
                    break;
                }
                out.clear();
            }
            if finished(&t) == total || (conn.is_closing() && conn.active() == 0) {
                break;
            }
            let n = match sock.read(&mut buf) {
                Ok(0) => {
                    t.lost += conn.active() as u64;
                    break;
                }
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => continue,
                Err(_) => {
                    t.lost += conn.active() as u64;
                    break;
                }
            };
            let r = conn.recv(&buf[..n], reqs, &mut out, &mut |e| match e {
                Event::Response {
                    status, body_bytes, ..
                } => {
                    t.responses += 1;
                    *t.statuses.entry(status).or_default() += 1;
                    t.body_bytes += body_bytes;
                }
                Event::Reset { code, .. } => *t.resets.entry(code).or_default() += 1,
                Event::Malformed { .. } => t.malformed += 1,
                Event::Refused { .. } => {
                    t.refused += 1;
                    opened -= 1; // sent again on the next connection
                }
                Event::GoAway { .. } => t.goaways += 1,
                Event::PingAck(_) => t.pings_acked = true,
                _ => {}
            });
            if let Err(e) = r {
                let _ = sock.write_all(&out);
                t.errors.push(e);
                t.lost += conn.active() as u64;
                return t;
            }
        }
    }
    t
}

fn get(url: &str) -> H2Request {
    let url = parse_url(url).unwrap();
    H2Request::new(&RequestSpec {
        method: "GET",
        url: &url,
        headers: &[],
        body: b"",
    })
    .unwrap()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_listening(addr: SocketAddr) {
    let start = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{addr} never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills the server when the test ends, passed or not.
struct Server {
    child: Child,
    addr: SocketAddr,
    lines: Option<mpsc::Receiver<String>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// The server's last "total REQUESTS ANSWERED" once ANSWERED reaches
    /// `answered` (the client has closed its connections by then).
    fn totals(&mut self, answered: u64) -> (u64, u64) {
        let lines = self.lines.as_ref().unwrap();
        let start = Instant::now();
        let mut last = (0, 0);
        while start.elapsed() < Duration::from_secs(10) {
            let Ok(line) = lines.recv_timeout(Duration::from_millis(200)) else {
                continue;
            };
            let v: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .filter_map(|w| w.parse().ok())
                .collect();
            if let [req, ans] = v[..] {
                last = (req, ans);
                if ans >= answered {
                    break;
                }
            }
        }
        last
    }
}

fn nghttpd(docroot: &std::path::Path) -> Option<Server> {
    let bin = ["/usr/sbin/nghttpd", "/usr/bin/nghttpd"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let Some(bin) = bin else {
        eprintln!("nghttpd not installed (Debian nghttp2-server): skipped");
        return None;
    };
    let port = free_port();
    let child = Command::new(bin)
        .args(["--no-tls", "-d"])
        .arg(docroot)
        .arg(port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nghttpd");
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let s = Server {
        child,
        addr,
        lines: None,
    };
    wait_listening(addr);
    Some(s)
}

fn hostile(mode: &str) -> Option<Server> {
    let python = "/usr/bin/python3";
    let ok = Command::new(python)
        .args(["-c", "import h2"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("python3-h2 not installed: skipped");
        return None;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/h2/hostile.py");
    let port = free_port();
    let mut child = Command::new(python)
        .arg(script)
        .args([mode, &port.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("hostile.py");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let ready = rx.recv_timeout(Duration::from_secs(10));
    assert_eq!(
        ready.as_deref(),
        Ok("ready"),
        "hostile.py {mode} did not start"
    );
    Some(Server {
        child,
        addr: ([127, 0, 0, 1], port).into(),
        lines: Some(rx),
    })
}

#[test]
fn nghttpd_small_and_large_bodies_at_1_and_100_streams() {
    let dir = std::env::temp_dir().join(format!("xload-h2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("small"), b"hello").unwrap();
    // 300 kB: many DATA frames, past the 65535 default windows.
    let large: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.join("large"), &large).unwrap();
    let Some(server) = nghttpd(&dir) else { return };
    let base = format!("http://{}", server.addr);
    for (path, size, total, streams) in [
        ("/small", 5u64, 2000u64, 100u32),
        ("/small", 5, 300, 1),
        ("/large", 300_000, 60, 10),
    ] {
        let t = drive(server.addr, &get(&format!("{base}{path}")), total, streams);
        assert!(t.errors.is_empty(), "{path}: {t:?}");
        assert_eq!(t.responses, total, "{path}: {t:?}");
        assert_eq!(t.statuses.get(&200), Some(&total), "{path}: {t:?}");
        assert_eq!(t.body_bytes, total * size, "{path}: {t:?}");
        assert!(t.max_active as u32 <= streams, "{t:?}");
        assert_eq!(t.connections, 1, "{t:?}");
    }
    // A missing file: 404 with a body, still exact.
    let t = drive(server.addr, &get(&format!("{base}/missing")), 50, 10);
    assert_eq!(t.statuses.get(&404), Some(&50), "{t:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn plain_run(mode: &str, total: u64, streams: u32) -> Option<(Tally, (u64, u64))> {
    let mut server = hostile(mode)?;
    let req = get(&format!("http://{}/", server.addr));
    let t = drive(server.addr, &req, total, streams);
    let totals = server.totals(t.responses);
    Some((t, totals))
}

#[test]
fn plain_server_counts_match() {
    let Some((t, (requests, answered))) = plain_run("plain", 500, 20) else {
        return;
    };
    assert_eq!((t.responses, t.body_bytes), (500, 1000), "{t:?}");
    assert_eq!((requests, answered), (500, 500));
}

#[test]
fn goaway_mid_run_refused_streams_retry_on_a_new_connection() {
    let Some((t, (requests, answered))) = plain_run("goaway", 200, 10) else {
        return;
    };
    assert!(t.errors.is_empty(), "{t:?}");
    assert_eq!(t.responses, 200, "{t:?}");
    assert_eq!(t.goaways, 1, "{t:?}");
    assert!(t.connections >= 2, "{t:?}");
    // Every request the server answered is a response, none twice.
    assert_eq!(answered, 200);
    assert!(
        requests >= 200,
        "the refused ones may have arrived: {requests}"
    );
    assert_eq!(t.lost, 0, "{t:?}");
}

#[test]
fn rst_stream_refused_on_every_tenth() {
    let Some((t, (requests, answered))) = plain_run("rst", 300, 10) else {
        return;
    };
    assert!(t.errors.is_empty(), "{t:?}");
    assert_eq!(t.resets.get(&ErrorCode::REFUSED_STREAM), Some(&30), "{t:?}");
    assert_eq!(t.responses, 270, "{t:?}");
    assert_eq!((requests, answered), (300, 270));
}

#[test]
fn one_byte_window_sends_bodies_a_byte_at_a_time() {
    let Some(mut server) = hostile("window") else {
        return;
    };
    let url = parse_url(&format!("http://{}/up", server.addr)).unwrap();
    let body = vec![b'q'; 100];
    let req = H2Request::new(&RequestSpec {
        method: "POST",
        url: &url,
        headers: &[],
        body: &body,
    })
    .unwrap();
    let t = drive(server.addr, &req, 20, 4);
    assert!(t.errors.is_empty(), "{t:?}");
    assert_eq!(t.responses, 20, "{t:?}");
    // The server answers with the length of the body it received: "100".
    assert_eq!(t.body_bytes, 20 * 3, "{t:?}");
    assert_eq!(server.totals(20), (20, 20));
}

#[test]
fn max_concurrent_streams_1_then_raised() {
    let Some((t, (requests, answered))) = plain_run("maxstreams", 100, 8) else {
        return;
    };
    assert!(t.errors.is_empty(), "{t:?}");
    assert_eq!(t.responses, 100, "{t:?}");
    assert!(t.resets.is_empty(), "the limit was never exceeded: {t:?}");
    assert_eq!(
        t.max_active, 8,
        "raised to 10, capped by --streams 8: {t:?}"
    );
    assert_eq!((requests, answered), (100, 100));
}

#[test]
fn table_size_updates_and_continuation_and_ping_flood() {
    // python-h2 takes ~0.2 s to encode each 40 kB header block: few
    // responses keep the continuation run inside the deadline under load.
    for (mode, total) in [("tableupdate", 60), ("continuation", 8), ("pingflood", 60)] {
        let Some((t, (requests, answered))) = plain_run(mode, total, 5) else {
            return;
        };
        assert!(t.errors.is_empty(), "{mode}: {t:?}");
        assert_eq!((t.responses, t.malformed), (total, 0), "{mode}: {t:?}");
        assert_eq!((requests, answered), (total, total), "{mode}");
    }
}

#[test]
fn a_bad_frame_is_a_named_error_not_a_hang() {
    let Some((t, _)) = plain_run("garbage", 10, 2) else {
        return;
    };
    assert_eq!(
        t.errors,
        [H2Error::BadFrameSize(xload_http::h2::FrameKind::PING)],
        "{t:?}"
    );
    assert_eq!(t.errors[0].code(), ErrorCode::FRAME_SIZE_ERROR);
}
