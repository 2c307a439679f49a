//! `xload serve` as a target: pipelined answers in order, HTTP/1.0 keep-alive,
//! 400-and-close on garbage, `/stats`, `--delay` and `--pool`, and counts that
//! reconcile with a load run.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::run::{free_port, read_json, run_xload, spawn_xload, TempDir, XloadChild};

/// A running `xload serve` on a free loopback port, stopped on drop.
struct Serve {
    child: Option<XloadChild>,
    port: u16,
    /// When it was spawned: a child's wait timeout counts from its spawn.
    spawned: Instant,
}

impl Serve {
    fn start(extra: &[&str]) -> Serve {
        let port = free_port();
        let mut args = vec![
            "serve".to_string(),
            "--listen".into(),
            format!("127.0.0.1:{port}"),
            "--for".into(),
            "20s".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let spawned = Instant::now();
        let child = spawn_xload(args);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "xload serve did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Serve {
            child: Some(child),
            port,
            spawned,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s
    }

    fn stats(&self) -> serde_json::Value {
        let mut s = self.connect();
        s.write_all(b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let body = text.split("\r\n\r\n").nth(1).expect("a body");
        serde_json::from_str(body).expect("stats JSON")
    }
}

impl Serve {
    /// Stops the responder (SIGINT) and returns what it printed.
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
            let out = c.wait_timeout(self.spawned.elapsed() + Duration::from_secs(5));
            assert!(!out.timed_out, "xload serve did not stop on SIGINT");
        }
    }
}

/// Reads until `n` responses (each with an empty body, Content-Length: 0 or N) arrived.
fn read_responses(s: &mut TcpStream, n: usize, body_len: usize) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while String::from_utf8_lossy(&buf).matches("HTTP/1.1 ").count() < n
        || !ends_complete(&buf, body_len)
    {
        let k = s.read(&mut chunk).expect("read");
        assert!(
            k > 0,
            "closed early after: {}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..k]);
    }
    String::from_utf8_lossy(&buf).into_owned()
}

fn ends_complete(buf: &[u8], body_len: usize) -> bool {
    let t = String::from_utf8_lossy(buf);
    t.rfind("\r\n\r\n")
        .is_some_and(|p| t.len() - (p + 4) >= body_len)
}

#[test]
fn pipelined_requests_are_answered_in_order_with_the_body_size() {
    let srv = Serve::start(&["--body-size", "5", "--cpus", "0"]);
    let mut s = srv.connect();
    s.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /c HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let text = read_responses(&mut s, 3, 5);
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 3, "{text}");
    assert_eq!(
        text.matches("Content-Length: 5\r\n\r\nxxxxx").count(),
        3,
        "{text}"
    );
}

#[test]
fn http10_keep_alive_gets_a_keep_alive_answer_and_an_open_connection() {
    let srv = Serve::start(&["--cpus", "0"]);
    let mut s = srv.connect();
    for _ in 0..3 {
        s.write_all(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap();
        let text = read_responses(&mut s, 1, 0);
        assert!(text.contains("Connection: keep-alive\r\n"), "{text}");
    }
    // /stats on the same kind of connection says keep-alive too.
    s.write_all(b"GET /stats HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.contains("Connection: keep-alive\r\n"), "{text}");
    // An empty line before a request is skipped, not a 400.
    s.write_all(b"\r\nGET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
        .unwrap();
    let text = read_responses(&mut s, 1, 0);
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
}

#[test]
fn garbage_gets_400_and_the_connection_closes() {
    let srv = Serve::start(&["--cpus", "0"]);
    let mut s = srv.connect();
    s.write_all(b"NOT HTTP AT ALL\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text)
        .expect("the server closes after the 400");
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
    assert_eq!(srv.stats()["bad_requests"], 1);
}

#[test]
fn delay_holds_each_answer_and_the_pool_queues_beyond_its_slots() {
    // One worker, two slots of 200 ms: four concurrent requests finish in two waves.
    let srv = Serve::start(&["--cpus", "0", "--delay", "200ms", "--pool", "2"]);
    let t0 = Instant::now();
    let mut conns: Vec<TcpStream> = (0..4).map(|_| srv.connect()).collect();
    for c in &mut conns {
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    }
    std::thread::sleep(Duration::from_millis(60));
    let held = srv.stats()["in_flight"].as_u64().unwrap();
    assert_eq!(held, 4, "all four are held (two in slots, two queued)");
    let mut done: Vec<Duration> = conns
        .iter_mut()
        .map(|c| {
            read_responses(c, 1, 0);
            t0.elapsed()
        })
        .collect();
    done.sort();
    assert!(done[0] >= Duration::from_millis(190), "{done:?}");
    assert!(
        done[3] >= Duration::from_millis(390),
        "the last two waited for a slot: {done:?}"
    );
    assert!(done[3] < Duration::from_millis(1500), "{done:?}");
}

/// Each connection's socket sits in the worker's registered file table at the
/// connection's index, and a closed connection's slot is cleared and reused:
/// connections opened one after another (closed by the client, or by the
/// server after `Connection: close`) each get their own answer, and a load
/// run afterwards still reconciles. The banner says the sockets are registered.
#[test]
fn reused_slots_answer_each_new_connection() {
    let srv = Serve::start(&["--cpus", "0"]);
    for k in 0..150 {
        let mut s = srv.connect();
        s.write_all(format!("GET /{k} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .unwrap();
        let text = read_responses(&mut s, 1, 0);
        assert!(
            text.starts_with("HTTP/1.1 200 OK\r\n"),
            "connection {k}: {text}"
        );
        drop(s);
        let mut s = srv.connect();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text)
            .expect("the server closes after answering");
        assert!(
            text.starts_with("HTTP/1.1 200 OK\r\n"),
            "connection {k}, close: {text}"
        );
    }
    let (status, _, stderr, _) = run_xload(["-n", "3000", "-c", "8", &srv.url("/")]);
    assert!(status.success(), "{stderr}");
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let served = srv.stats()["requests"].as_u64().unwrap();
        if served >= 3300 || Instant::now() > deadline {
            assert_eq!(served, 3300, "300 single answers and a 3000-request run");
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let banner = srv.stop();
    assert!(banner.contains("registered sockets"), "{banner}");
}

#[test]
fn load_run_counts_reconcile_with_the_responders_own_counter() {
    let srv = Serve::start(&["--cpus", "0"]);
    let dir = TempDir::new("serve");
    let json = dir.join("r.json");
    let (status, _, stderr, _) = run_xload([
        "-n",
        "20000",
        "-c",
        "16",
        "--pipeline",
        "4",
        "--json",
        json.to_str().unwrap(),
        &srv.url("/"),
    ]);
    assert!(status.success(), "{stderr}");
    let r = read_json(&json);
    assert_eq!(r["requests"], 20000);
    // The responder counts answers once their send completed; allow it a moment.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let served = srv.stats()["requests"].as_u64().unwrap();
        // 20000 answers + the earlier /stats calls are not counted as plain answers.
        if served >= 20000 || Instant::now() > deadline {
            assert_eq!(served, 20000, "responder's count vs the report");
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads until the server closes (or 5 s).
fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    all
}

#[test]
fn nothing_is_answered_after_the_last_answer_or_a_400() {
    let srv = Serve::start(&["--cpus", "0"]);
    let count = |buf: &[u8], what: &[u8]| buf.windows(what.len()).filter(|w| w == &what).count();
    // Connection: close, then more pipelined requests: one answer, then the close.
    let mut s = srv.connect();
    let mut req = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec();
    req.extend(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(200));
    s.write_all(&req).unwrap();
    let got = read_to_close(&mut s);
    assert_eq!(
        count(&got, b"HTTP/1.1 200"),
        1,
        "{}",
        String::from_utf8_lossy(&got)
    );
    // HTTP/1.0 without keep-alive likewise.
    let mut s = srv.connect();
    let mut req = b"GET / HTTP/1.0\r\n\r\n".to_vec();
    req.extend(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(50));
    s.write_all(&req).unwrap();
    assert_eq!(count(&read_to_close(&mut s), b"HTTP/1.1 200"), 1);
    // Garbage then more garbage: one 400, one bad request counted.
    let mut s = srv.connect();
    s.write_all(&b"garbage\r\n\r\n".repeat(20)).unwrap();
    let got = read_to_close(&mut s);
    assert_eq!(
        count(&got, b"400 Bad Request"),
        1,
        "{}",
        String::from_utf8_lossy(&got)
    );
    assert_eq!(srv.stats()["bad_requests"], 1);
    assert_eq!(
        srv.stats()["requests"],
        2,
        "the two answers, not the ignored requests"
    );
}

#[test]
fn head_gets_the_head_only_and_the_connection_goes_on() {
    let srv = Serve::start(&["--cpus", "0", "--body-size", "10"]);
    let mut s = srv.connect();
    s.write_all(
        b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let got = String::from_utf8(read_to_close(&mut s)).unwrap();
    let (head_answer, get_answer) = got.split_at(got.find("\r\n\r\n").unwrap() + 4);
    assert!(head_answer.contains("Content-Length: 10\r\n"), "{got}");
    assert!(
        get_answer.starts_with("HTTP/1.1 200 OK\r\n"),
        "no body after the HEAD answer: {got}"
    );
    assert!(get_answer.ends_with("\r\n\r\nxxxxxxxxxx"), "{got}");
    // A HEAD load run keeps its connections.
    let (status, stdout, stderr, _) =
        run_xload([srv.url("/").as_str(), "-m", "HEAD", "-c", "2", "-n", "200"]);
    assert_eq!(support::run::exit_code(status), 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("Errors      none"),
        "a body after a HEAD answer breaks the next parse: {stdout}"
    );
}

#[test]
fn a_second_responder_on_a_busy_port_is_refused() {
    let srv = Serve::start(&["--cpus", "0"]);
    let (status, stdout, stderr, _) = run_xload([
        "serve",
        "--listen",
        &format!("127.0.0.1:{}", srv.port),
        "--for",
        "1s",
    ]);
    assert_eq!(support::run::exit_code(status), 1, "{stdout}{stderr}");
    assert!(stderr.contains("already in use"), "{stderr}");
}

#[test]
fn a_closed_connections_held_answers_give_their_slots_back() {
    // One slot of 300 ms. A client sends 6 requests and leaves: without
    // freeing, the next client would wait behind ~1.8 s of dead answers.
    let srv = Serve::start(&["--cpus", "0", "--delay", "300ms", "--pool", "1"]);
    {
        let mut gone = srv.connect();
        gone.write_all(&b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(6))
            .unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    let mut s = srv.connect();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    read_responses(&mut s, 1, 0);
    let waited = t0.elapsed();
    assert!(
        waited < Duration::from_millis(1000),
        "waited {waited:?} behind a closed connection"
    );
    let stats = srv.stats();
    assert_eq!(stats["in_flight"], 0);
    // The 6 answers the client left behind are counted, not lost silently.
    assert_eq!(stats["abandoned"], 6, "{stats}");
}

/// A client that half-closes after its request while the answer is held:
/// the answer is dropped as documented, and /stats says so (before, the
/// loss showed nowhere).
#[test]
fn a_half_closed_clients_held_answer_is_counted_as_abandoned() {
    let srv = Serve::start(&["--cpus", "0", "--delay", "20ms"]);
    let mut s = srv.connect();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let got = read_to_close(&mut s);
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
    let stats = srv.stats();
    assert_eq!(stats["abandoned"], 1, "{stats}");
    assert_eq!(
        stats["requests"], 0,
        "nothing was answered (/stats counts itself once sent): {stats}"
    );
}

/// HEAD /stats carries GET /stats's header fields (RFC 9110 9.3.2), and a
/// request that says Connection: close gets it back.
#[test]
fn stats_answers_head_and_close_as_get_would() {
    let srv = Serve::start(&["--cpus", "0"]);
    let mut s = srv.connect();
    s.write_all(b"HEAD /stats HTTP/1.1\r\nHost: x\r\n\r\nGET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let got = String::from_utf8_lossy(&read_to_close(&mut s)).into_owned();
    let answers: Vec<&str> = got.split("HTTP/1.1 200 OK").skip(1).collect();
    assert_eq!(answers.len(), 2, "{got}");
    assert!(answers[0].contains("application/json"), "{got}");
    assert!(answers[0].ends_with("\r\n\r\n"), "HEAD: no body: {got}");
    assert!(answers[1].contains("Connection: close"), "{got}");
    assert!(answers[1].trim_end().ends_with('}'), "GET: the body: {got}");
}

/// A chunked request body (curl -T -, streaming uploads) is skipped and
/// answered like any other request (it was answered 400 and closed).
#[test]
fn a_chunked_request_body_is_answered() {
    let srv = Serve::start(&["--cpus", "0"]);
    let mut s = srv.connect();
    s.write_all(
        b"POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
          5\r\nhello\r\n0\r\n\r\n",
    )
    .unwrap();
    let got = String::from_utf8_lossy(&read_to_close(&mut s)).into_owned();
    assert!(got.starts_with("HTTP/1.1 200 OK"), "{got}");
}

/// Answers held when the responder stops (Ctrl-C, or --for's end) are
/// counted abandoned; they were dropped without a word.
#[test]
fn answers_held_at_the_stop_are_counted_abandoned() {
    let srv = Serve::start(&["--cpus", "0", "--delay", "5s"]);
    let mut conns: Vec<_> = (0..3).map(|_| srv.connect()).collect();
    for s in &mut conns {
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    }
    // Held: in flight on the responder.
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while srv.stats()["in_flight"] != 3 {
        assert!(std::time::Instant::now() < deadline, "{}", srv.stats());
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = srv.stop();
    assert!(out.contains("3 abandoned"), "{out}");
}

/// A large body costs memory in proportion: the prebuilt batches of answers
/// stay near 1 MiB unless one answer is larger. Before, each worker built
/// two batches of 64 answers: 4.3 GB resident for --body-size 16 MiB, and
/// an abort for 64 MiB.
#[test]
fn a_large_body_is_answered_without_a_batch_of_copies() {
    const BODY: usize = 16 << 20;
    let srv = Serve::start(&["--cpus", "0", "--body-size", &BODY.to_string()]);
    let mut s = srv.connect();
    s.write_all(&b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(2))
        .unwrap();
    let mut got = 0usize;
    let mut chunk = vec![0u8; 1 << 20];
    while got < 2 * BODY {
        let n = s.read(&mut chunk).expect("read");
        assert!(n > 0, "closed after {got} bytes");
        got += n;
    }
    let pid = srv.child.as_ref().expect("running").pid();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS");
    assert!(
        rss_kb < 512 * 1024,
        "{rss_kb} kB resident for a 16 MiB body"
    );
}

#[test]
fn expect_100_continue_is_answered_before_the_body() {
    let srv = Serve::start(&["--cpus", "0"]);
    let mut s = srv.connect();
    s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 256];
    let n = s
        .read(&mut buf)
        .expect("an interim answer, not a wait for the body");
    assert_eq!(&buf[..n], b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(b"hello").unwrap();
    let text = read_responses(&mut s, 1, 0);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert_eq!(
        srv.stats()["requests"],
        1,
        "the interim answer is not a request"
    );
}

/// The `Date` values in `text` as seconds since the epoch, parsed from the
/// IMF-fixdate form (`Thu, 03 Dec 2026 16:30:07 GMT`).
fn dates(text: &str) -> Vec<u64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    text.split("\r\n")
        .filter_map(|l| l.strip_prefix("Date: "))
        .map(|d| {
            let f: Vec<&str> = d.split([' ', ':']).collect();
            assert!(d.len() == 29 && f.len() == 8 && f[7] == "GMT", "{d}");
            let (day, year): (u64, i64) = (f[1].parse().unwrap(), f[3].parse().unwrap());
            let month = MONTHS.iter().position(|m| *m == f[2]).expect("a month") as i64 + 1;
            // Days from civil (H. Hinnant), then the time of day.
            let y = if month <= 2 { year - 1 } else { year };
            let era = y.div_euclid(400);
            let yoe = y - era * 400;
            let mp = (month + 9) % 12;
            let doy = (153 * mp + 2) / 5 + day as i64 - 1;
            let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
            let days = (era * 146_097 + doe - 719_468) as u64;
            let hms: Vec<u64> = f[4..7].iter().map(|v| v.parse().unwrap()).collect();
            days * 86_400 + hms[0] * 3600 + hms[1] * 60 + hms[2]
        })
        .collect()
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// RFC 9110 6.6.1: an origin server with a clock sends `Date` in its 2xx and
/// 4xx answers. Every kind of answer has one, of the current second, and it
/// moves with the clock.
#[test]
fn every_answer_has_the_current_date() {
    const EVERY_KIND: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\nHEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /stats HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let srv = Serve::start(&["--cpus", "0", "--body-size", "3"]);
    let before = unix_now();
    let mut s = srv.connect();
    s.write_all(EVERY_KIND).unwrap();
    let text = String::from_utf8_lossy(&read_to_close(&mut s)).into_owned();
    let mut bad = srv.connect();
    bad.write_all(b"NOT HTTP\r\n\r\n").unwrap();
    let bad_text = String::from_utf8_lossy(&read_to_close(&mut bad)).into_owned();
    let after = unix_now();
    let got = dates(&text);
    assert_eq!(got.len(), 6, "one per answer: {text}");
    let got_bad = dates(&bad_text);
    assert_eq!(got_bad.len(), 1, "{bad_text}");
    for d in got.iter().chain(&got_bad) {
        assert!(
            (before..=after).contains(d),
            "{d} not in {before}..={after}: {text}"
        );
    }
    // Two seconds later every kind of answer says so (the prebuilt batches,
    // pipelined answers after the first, HTTP/1.0 keep-alive, HEAD, /stats,
    // the closing one), twice: each of the two copies of the batches.
    for wait_ms in [2100, 1100] {
        std::thread::sleep(Duration::from_millis(wait_ms));
        let since = unix_now();
        let mut s = srv.connect();
        s.write_all(EVERY_KIND).unwrap();
        let text = String::from_utf8_lossy(&read_to_close(&mut s)).into_owned();
        let later = dates(&text);
        assert_eq!(later.len(), 6, "{text}");
        let now = unix_now();
        for d in later {
            assert!(
                (since..=now).contains(&d),
                "{d} not in {since}..={now}: {text}"
            );
        }
    }
}

/// Reads one whole answer with an empty body; panics on EOF or a timeout.
fn one_answer(s: &mut TcpStream) -> String {
    read_responses(s, 1, 0)
}

/// The server closes: the next read is the end of the stream (not the 5 s
/// read timeout, not bytes).
fn expect_close(s: &mut TcpStream) {
    let mut buf = [0u8; 256];
    match s.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!(
            "bytes instead of a close: {}",
            String::from_utf8_lossy(&buf[..n])
        ),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("no close: {e}"),
    }
}

/// `--idle-timeout` closes a connection that sends nothing for that long
/// (nginx's keepalive_timeout); one that keeps asking stays open, and an
/// answer still held (`--delay`) is not idleness.
#[test]
fn idle_connections_are_closed_after_the_idle_timeout() {
    let srv = Serve::start(&["--cpus", "0", "--idle-timeout", "600ms"]);
    let mut quiet = srv.connect();
    quiet
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    one_answer(&mut quiet);
    let answered = Instant::now();
    // Half the timeout later it is open (a read finds nothing, not the end).
    std::thread::sleep(Duration::from_millis(300));
    quiet.set_nonblocking(true).unwrap();
    let mut probe = [0u8; 16];
    match quiet.read(&mut probe) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("closed before the timeout: {other:?}"),
    }
    quiet.set_nonblocking(false).unwrap();
    // Then closed, 600 ms after its last answer plus at most a quarter of
    // that (the sweep) and some scheduling slack.
    expect_close(&mut quiet);
    let took = answered.elapsed();
    assert!(
        took >= Duration::from_millis(600) && took < Duration::from_millis(1500),
        "{took:?}"
    );
    assert_eq!(srv.stats()["idle_closed"], 1);
    // One that keeps asking every 200 ms stays open past the timeout.
    let mut busy = srv.connect();
    for _ in 0..8 {
        busy.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        assert!(one_answer(&mut busy).starts_with("HTTP/1.1 200 OK"));
        std::thread::sleep(Duration::from_millis(200));
    }
    busy.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert!(one_answer(&mut busy).starts_with("HTTP/1.1 200 OK"));

    // An answer held longer than the timeout still comes, then the
    // connection goes idle and is closed.
    let held = Serve::start(&["--cpus", "0", "--idle-timeout", "300ms", "--delay", "1s"]);
    let mut s = held.connect();
    let asked = Instant::now();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert!(one_answer(&mut s).starts_with("HTTP/1.1 200 OK"));
    assert!(asked.elapsed() >= Duration::from_secs(1));
    expect_close(&mut s);
    let stats = held.stats();
    assert_eq!(stats["idle_closed"], 1, "{stats}");
    assert_eq!(stats["abandoned"], 0, "{stats}");
}

/// `--header-timeout` closes a connection whose request head does not come
/// whole in time, even while bytes keep trickling in (a slow-headers client
/// is not idle); a head split across two sends in time is answered.
#[test]
fn a_request_head_that_does_not_come_whole_in_time_is_closed() {
    let srv = Serve::start(&["--cpus", "0", "--header-timeout", "500ms"]);
    let mut split = srv.connect();
    split.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    split.write_all(b"\r\n").unwrap();
    assert!(one_answer(&mut split).starts_with("HTTP/1.1 200 OK"));

    let mut slow = srv.connect();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
    let started = Instant::now();
    // A header byte every 100 ms: never idle, never whole.
    let mut closed = false;
    while started.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(100));
        if slow.write_all(b"X-A: b\r\n").is_err() {
            closed = true;
            break;
        }
        slow.set_nonblocking(true).unwrap();
        let mut probe = [0u8; 64];
        let r = slow.read(&mut probe);
        slow.set_nonblocking(false).unwrap();
        match r {
            Ok(0) => {
                closed = true;
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => {
                closed = true;
                break;
            }
            Ok(n) => panic!(
                "answered an incomplete head: {}",
                String::from_utf8_lossy(&probe[..n])
            ),
        }
    }
    let took = started.elapsed();
    assert!(closed, "still open after {took:?}");
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_millis(1500),
        "{took:?}"
    );
    let stats = srv.stats();
    assert_eq!(stats["header_timeouts"], 1, "{stats}");
    assert_eq!(stats["idle_closed"], 0, "{stats}");
}

/// A client that asks for ~20 MB and reads nothing: the responder's send to
/// it stays in flight once both socket buffers are full.
fn non_reader(srv: &Serve) -> TcpStream {
    let mut s = srv.connect();
    s.write_all(&b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(200))
        .unwrap();
    s
}

/// A client that stops reading holds the batch copy its send reads from;
/// the Date of everybody else's answers still moves (another copy is
/// re-dated, or made), and `--send-timeout` ends that client's connection.
#[test]
fn a_client_that_does_not_read_neither_freezes_the_date_nor_stays_forever() {
    let srv = Serve::start(&[
        "--cpus",
        "0",
        "--body-size",
        "100000",
        "--send-timeout",
        "3s",
    ]);
    let mut stuck = non_reader(&srv);
    // Three second boundaries with that send blocked.
    std::thread::sleep(Duration::from_millis(2600));
    let since = unix_now();
    let mut s = srv.connect();
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let text = String::from_utf8_lossy(&read_to_close(&mut s)).into_owned();
    let got = dates(&text);
    assert_eq!(got.len(), 2, "{}", &text[..text.len().min(400)]);
    let now = unix_now();
    for d in got {
        assert!((since..=now).contains(&d), "{d} not in {since}..={now}");
    }
    assert_eq!(srv.stats()["send_timeouts"], 0);
    // 3 s after its send, and one more look (a quarter of that) finding
    // nothing taken, the stuck client is cut off: what it reads ends.
    std::thread::sleep(Duration::from_millis(2600));
    assert_eq!(srv.stats()["send_timeouts"], 1);
    stuck
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut sink = vec![0u8; 1 << 20];
    loop {
        match stuck.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the connection was not ended: {e}"),
        }
    }
}

fn set_rcvbuf(s: &TcpStream, bytes: libc::c_int) {
    use std::os::fd::AsRawFd;
    // SAFETY: an int option on our own socket.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
}

/// `--send-timeout` is about progress, as nginx's send_timeout: a client
/// reading a large answer slowly (each 1 MB send then takes ~2 s) keeps
/// its connection past the timeout; once it stops reading, it is cut off.
#[test]
fn a_slow_reader_is_not_timed_out_while_it_reads() {
    let srv = Serve::start(&[
        "--cpus",
        "0",
        "--body-size",
        "1000000",
        "--send-timeout",
        "1s",
    ]);
    let mut s = srv.connect();
    // A small receive buffer: the window opens as the client reads, not
    // once per megabytes.
    set_rcvbuf(&s, 64 * 1024);
    s.write_all(&b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(30))
        .unwrap();
    let mut chunk = vec![0u8; 100_000];
    let started = Instant::now();
    let mut got = 0usize;
    // ~0.5 MB/s for 3.5 s.
    while started.elapsed() < Duration::from_millis(3500) {
        std::thread::sleep(Duration::from_millis(200));
        let mut want = chunk.len();
        while want > 0 {
            let n = s.read(&mut chunk[..want]).expect("still served");
            assert!(
                n > 0,
                "closed while the client was reading, after {got} bytes"
            );
            got += n;
            want -= n;
        }
    }
    assert_eq!(srv.stats()["send_timeouts"], 0, "after {got} bytes");
    // Stops reading: within the timeout and a look or two, it is cut off.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(srv.stats()["send_timeouts"], 1);
}

/// The server's `/stats` request count once it stops changing (requests
/// the client sent just before it exited may still be in the server's
/// socket buffers).
fn settled_requests(serve: &Serve) -> u64 {
    let mut last = serve.stats()["requests"].as_u64().expect("requests");
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(50));
        let now = serve.stats()["requests"].as_u64().expect("requests");
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

/// `unanswered_at_end.in_flight` is exact: the window's responses plus the
/// requests in flight when it closed are every request the server received
/// (no warm-up: the window is the whole run). Before: `-c 100` left 100
/// answered requests out of both (`in_flight 0`), `-c 64 --pipeline 4` 256.
#[test]
fn responses_plus_in_flight_are_every_request_the_server_received() {
    for engine in ["uring", "epoll"] {
        for (conns, pipeline) in [("100", "1"), ("64", "4")] {
            let serve = Serve::start(&["--cpus", "1"]);
            let before = settled_requests(&serve);
            let dir = TempDir::new("in-flight");
            let json = dir.join("r.json");
            let (status, stdout, stderr, _) = run_xload([
                serve.url("/").as_str(),
                "-c",
                conns,
                "--pipeline",
                pipeline,
                "-d",
                "1s",
                "--engine",
                engine,
                "-q",
                "--json",
                json.to_str().unwrap(),
            ]);
            if engine == "uring" && !json.exists() && stderr.contains("io_uring") {
                eprintln!("skipping the io_uring run: {}", stderr.trim());
                continue;
            }
            assert!(status.success(), "{stdout}\n{stderr}");
            let r = read_json(&json);
            let received = settled_requests(&serve) - before;
            let responses = r["requests"].as_u64().unwrap();
            let in_flight = r["unanswered_at_end"]["in_flight"].as_u64().unwrap();
            assert_eq!(r["errors_total"], 0, "{r}");
            assert_eq!(
                responses + in_flight,
                received,
                "{engine} -c {conns} --pipeline {pipeline}: {responses} responses + \
                 {in_flight} in flight against {received} received"
            );
        }
    }
}
