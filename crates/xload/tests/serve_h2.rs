//! `xload serve --h2` against the reference HTTP/2 clients: h2load and
//! nghttp (Debian nghttp2-client) and curl, h2c with prior knowledge and h2
//! over TLS by ALPN. Counts are exact: h2load's succeeded == /stats; big
//! bodies cross small flow-control windows; a bad preface is answered with
//! GOAWAY(PROTOCOL_ERROR) and counted. Without the tools the tests are
//! skipped with a note (scripts/test installs them).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use support::run::{
    exit_code, free_port, run_command_with_timeout, run_xload, spawn_xload, XloadChild,
};

fn have(tool: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("{tool} not installed (scripts/test installs it): skipped");
    }
    found
}

/// A running `xload serve --h2` on a free loopback port, stopped on drop.
struct Serve {
    child: Option<XloadChild>,
    port: u16,
    tls: bool,
    spawned: Instant,
}

impl Serve {
    fn start(extra: &[&str]) -> Serve {
        let port = free_port();
        let mut args = vec![
            "serve".to_string(),
            "--h2".into(),
            "--listen".into(),
            format!("127.0.0.1:{port}"),
            "--for".into(),
            "60s".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let spawned = Instant::now();
        let child = spawn_xload(args);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "xload serve did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Serve {
            child: Some(child),
            port,
            tls: extra.contains(&"--tls"),
            spawned,
        }
    }

    fn url(&self, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}{path}", self.port)
    }

    /// `curl` over HTTP/2 (prior knowledge, or ALPN over TLS): (version, body).
    fn curl(&self, path: &str, extra: &[&str]) -> (String, String) {
        let mut c = Command::new("curl");
        c.args(["-sS", "-k", "--max-time", "10", "-w", "\n%{http_version}"]);
        if !self.tls {
            c.arg("--http2-prior-knowledge");
        }
        c.args(extra).arg(self.url(path));
        let out = run_command_with_timeout(c, Duration::from_secs(15));
        assert!(out.status.success(), "curl failed: {}", out.stderr);
        let (body, version) = out.stdout.rsplit_once('\n').expect("the version line");
        (version.to_string(), body.to_string())
    }

    fn stats(&self) -> serde_json::Value {
        let (version, body) = self.curl("/stats", &[]);
        assert_eq!(version, "2", "/stats over HTTP/2");
        serde_json::from_str(&body).expect("stats JSON")
    }

    fn requests(&self) -> u64 {
        self.stats()["requests"].as_u64().unwrap()
    }

    fn stop(mut self) -> String {
        let c = self.child.take().expect("running");
        c.interrupt();
        let out = c.wait_timeout(self.spawned.elapsed() + Duration::from_secs(5));
        assert!(!out.timed_out, "xload serve did not stop on SIGINT");
        out.stdout
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(c) = self.child.take() {
            c.interrupt();
            let _ = c.wait_timeout(self.spawned.elapsed() + Duration::from_secs(5));
        }
    }
}

/// Runs h2load (bounded by -n and a timeout) and returns its "succeeded" count.
fn h2load(args: &[&str], url: &str) -> u64 {
    let mut c = Command::new("h2load");
    c.args(args).arg(url);
    let out = run_command_with_timeout(c, Duration::from_secs(60));
    assert!(!out.timed_out, "h2load hung: {}", out.stdout);
    assert!(
        out.status.success(),
        "h2load: {}\n{}",
        out.stdout,
        out.stderr
    );
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("requests:"))
        .unwrap_or_else(|| panic!("no requests line: {}", out.stdout));
    // requests: N total, N started, N done, N succeeded, 0 failed, ...
    let succeeded = line
        .split(',')
        .find(|p| p.trim().ends_with("succeeded"))
        .and_then(|p| p.split_whitespace().next()?.parse().ok())
        .expect("a succeeded count");
    assert!(
        out.stdout.contains("0 failed, 0 errored, 0 timeout"),
        "{}",
        out.stdout
    );
    succeeded
}

#[test]
fn h2load_counts_match_stats_exactly() {
    if !have("h2load") || !have("curl") {
        return;
    }
    // Two workers: connections spread over both, the count is their sum.
    let srv = Serve::start(&["--cpus", "0,1", "--body-size", "100"]);
    let (version, body) = srv.curl("/", &[]);
    assert_eq!((version.as_str(), body.len()), ("2", 100));
    let base = srv.requests();
    assert_eq!(base, 1, "curl's request");
    // Many streams on few connections, then many connections of one stream.
    let n = h2load(&["-n", "5000", "-c", "10", "-m", "100"], &srv.url("/"));
    assert_eq!(n, 5000);
    assert_eq!(
        srv.requests(),
        base + 5000,
        "/stats requests == h2load succeeded"
    );
    let n = h2load(&["-n", "2000", "-c", "100", "-m", "1"], &srv.url("/x"));
    assert_eq!(n, 2000);
    let stats = srv.stats();
    assert_eq!(stats["requests"], base + 7000);
    assert_eq!(stats["bad_requests"], 0);
    assert_eq!(stats["workers"], 2);
    // HEAD: the head only (curl -I), counted like HTTP/1.1's.
    let (_, head) = srv.curl("/", &["-I"]);
    assert!(head.contains("content-length: 100"), "{head}");
    assert_eq!(srv.requests(), base + 7001);
    let out = srv.stop();
    assert!(out.contains("7002 requests"), "{out}");
}

#[test]
fn tls_serves_h2_or_http11_as_alpn_chose() {
    if !have("h2load") || !have("curl") {
        return;
    }
    let srv = Serve::start(&["--tls", "--cpus", "0", "--body-size", "20000"]);
    let (v2, body) = srv.curl("/", &["--http2"]);
    assert_eq!((v2.as_str(), body.len()), ("2", 20000));
    let (v1, body) = srv.curl("/", &["--http1.1"]);
    assert_eq!((v1.as_str(), body.len()), ("1.1", 20000));
    let n = h2load(&["-n", "1000", "-c", "4", "-m", "20"], &srv.url("/"));
    assert_eq!(n, 1000);
    // h2load's HTTP/1.1 over the same listener (ALPN http/1.1).
    let n = h2load(&["-n", "300", "-c", "3", "--h1"], &srv.url("/"));
    assert_eq!(n, 300);
    let mut want = 1302;
    if have("nghttp") {
        // Answers through 1 KiB windows, sealed record by record.
        let mut c = Command::new("nghttp");
        c.args(["-n", "-s", "-w", "10", "-W", "11", "-m", "3"])
            .arg(srv.url("/"));
        let out = run_command_with_timeout(c, Duration::from_secs(60));
        assert!(!out.timed_out, "nghttp hung");
        assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
        let answered = out.stdout.lines().filter(|l| l.contains(" 200 ")).count();
        assert_eq!(answered, 3, "{}", out.stdout);
        want += 3;
    }
    assert_eq!(srv.requests(), want, "both protocols counted, exactly");
}

#[test]
fn the_stop_says_goaway_no_error() {
    if !have("curl") {
        return;
    }
    let srv = Serve::start(&["--cpus", "0"]);
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut wire = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    wire.extend([0, 0, 0, 4, 0, 0, 0, 0, 0]); // SETTINGS
    s.write_all(&wire).unwrap();
    // The server's SETTINGS, WINDOW_UPDATE and the ACK of ours: 9 + 12, 9 + 4, 9.
    let mut first = [0u8; 43];
    s.read_exact(&mut first).unwrap();
    assert_eq!((first[3], first[24], first[37]), (4, 8, 4));
    let out = srv.stop();
    assert!(out.contains("0 requests"), "{out}");
    assert!(
        out.contains("(HTTP/2 with prior knowledge, 1 worker"),
        "{out}"
    );
    let frames = frames_until_close(&mut s);
    assert_eq!(frames.len(), 1, "{frames:?}");
    let (kind, payload) = &frames[0];
    // GOAWAY, last stream 0, NO_ERROR.
    assert_eq!((*kind, &payload[..]), (7, &[0u8; 8][..]));
}

#[test]
fn big_bodies_cross_small_flow_control_windows() {
    if !have("h2load") || !have("nghttp") || !have("curl") {
        return;
    }
    // 1 MB answers through 1 KiB stream windows and a 4 KiB connection
    // window: hundreds of WINDOW_UPDATEs per answer.
    let srv = Serve::start(&["--cpus", "0", "--body-size", "1000000"]);
    let mut c = Command::new("nghttp");
    c.args(["-n", "-s", "-w", "10", "-W", "12", "-m", "4"])
        .arg(srv.url("/"));
    let out = run_command_with_timeout(c, Duration::from_secs(60));
    assert!(!out.timed_out, "nghttp hung");
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let answered = out
        .stdout
        .lines()
        .filter(|l| l.contains(" 200 ") && l.contains("976K"))
        .count();
    assert_eq!(answered, 4, "{}", out.stdout);
    let n = h2load(
        &["-n", "40", "-c", "2", "-m", "8", "-w", "14", "-W", "16"],
        &srv.url("/"),
    );
    assert_eq!(n, 40);
    assert_eq!(srv.requests(), 44);
}

/// Reads frames until the server closes; returns each (type, payload).
fn frames_until_close(s: &mut TcpStream) -> Vec<(u8, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
            Err(e) => panic!("no close within the timeout: {e}"),
        }
    }
    let mut frames = Vec::new();
    let mut b = &buf[..];
    while b.len() >= 9 {
        let len = u32::from_be_bytes([0, b[0], b[1], b[2]]) as usize;
        frames.push((b[3], b[9..9 + len].to_vec()));
        b = &b[9 + len..];
    }
    frames
}

#[test]
fn a_bad_preface_gets_goaway_protocol_error_and_is_counted() {
    if !have("curl") {
        return;
    }
    let srv = Serve::start(&["--cpus", "0"]);
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let frames = frames_until_close(&mut s);
    // SETTINGS first (sent at accept), then GOAWAY(0, PROTOCOL_ERROR).
    assert_eq!(frames[0].0, 4, "SETTINGS");
    let (kind, payload) = frames.last().expect("frames");
    assert_eq!(*kind, 7, "GOAWAY last");
    assert_eq!(payload[..8], [0, 0, 0, 0, 0, 0, 0, 1]);
    // The preface whole but garbage after it: the first frame must be SETTINGS.
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut wire = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    wire.extend([0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]); // PING
    s.write_all(&wire).unwrap();
    let frames = frames_until_close(&mut s);
    let (kind, payload) = frames.last().expect("frames");
    assert_eq!((*kind, &payload[4..8]), (7, &[0, 0, 0, 1][..]));
    let stats = srv.stats();
    assert_eq!(stats["bad_requests"], 2);
    assert_eq!(stats["requests"], 0);
    // The responder goes on serving.
    assert_eq!(srv.curl("/", &[]).0, "2");
}

#[test]
fn delay_holds_h2_answers_and_counts_stay_exact() {
    if !have("h2load") || !have("curl") {
        return;
    }
    let srv = Serve::start(&["--cpus", "0", "--delay", "20ms", "--pool", "50"]);
    let started = Instant::now();
    let n = h2load(&["-n", "400", "-c", "4", "-m", "25"], &srv.url("/"));
    assert_eq!(n, 400);
    // 400 answers through 50 slots of 20 ms each: at least 8 rounds.
    assert!(started.elapsed() >= Duration::from_millis(160));
    let stats = srv.stats();
    assert_eq!(stats["requests"], 400);
    assert_eq!(stats["in_flight"], 0);
}

#[test]
fn h2_refuses_files_and_app() {
    for extra in [&["--files", "/tmp"][..], &["--app", "banking"][..]] {
        let mut args = vec!["serve", "--h2", "--for", "1s"];
        args.extend(extra);
        let (status, _, err, _) = run_xload(args);
        assert_eq!(exit_code(status), 2, "{extra:?}: {err}");
        assert!(err.contains("--h2"), "{err}");
    }
}

#[test]
fn a_client_flooding_pings_without_reading_is_cut_off() {
    if !have("curl") {
        return;
    }
    let srv = Serve::start(&["--cpus", "0"]);
    let mut s = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut wire = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    wire.extend([0, 0, 0, 4, 0, 0, 0, 0, 0]);
    s.write_all(&wire).unwrap();
    // 1.7 MB of PINGs a write, their ACKs never read: past 16 MiB waiting
    // (plus the socket buffers) the server shuts the connection.
    let ping = [0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
    let burst: Vec<u8> = ping.iter().copied().cycle().take(17 * 100_000).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut cut = false;
    while Instant::now() < deadline {
        if s.write_all(&burst).is_err() {
            cut = true;
            break;
        }
    }
    assert!(
        cut,
        "the server took PINGs for 30 s without their ACKs read"
    );
    let stats = srv.stats();
    assert_eq!(stats["bad_requests"], 1);
    assert_eq!(
        stats["send_timeouts"], 0,
        "cut off at once, not by the timeout"
    );
}
