//! HTTP/2 (issue 33): `--http2` (h2c with prior knowledge on http://, ALPN
//! h2 on https://) and `--streams`, on both engines. Counts reconcile
//! exactly with nginx's stub_status at one stream and at a hundred per
//! connection, in h2c and over TLS; hostile python3-h2 servers
//! (crates/http/tests/h2/hostile.py: GOAWAY mid-run, REFUSED_STREAM every
//! tenth stream, a 1-byte window, MAX_CONCURRENT_STREAMS 1 then 10 (and 0), a
//! CONTINUATION header block, a PING flood, a table size update to 0, a
//! frame size error, SETTINGS never acknowledged) end on time with the
//! right counts and named categories; bad flag combinations exit 2.
//! Workloads over h2: a two-class mix at ten streams per connection
//! reconciles with `xload serve --h2`'s /stats (and runs in open loop),
//! failed status and body checks are consistency errors of their class,
//! and sessions keep the cookie and the ids a python3-h2 application
//! (tests/support/h2_session_app.py) hands out.

mod support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::nginx::{Nginx, NginxOptions};
use support::run::exit_code;
use support::tls::SelfSigned;
use support::{read_json, run_xload_with_timeout, TempDir};
use xload_testkit::both_engines;

/// Hard kill for one run: each takes a few seconds at most.
const HARD_TIMEOUT: Duration = Duration::from_secs(60);

/// One run's exit code, JSON report (Null if none) and output.
struct Run {
    code: i32,
    json: Value,
    out: String,
    elapsed: Duration,
}

impl Run {
    fn u64_at(&self, pointer: &str) -> u64 {
        self.json
            .pointer(pointer)
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("{pointer} is not a count\n{}", self.out))
    }

    fn u64_or_0(&self, pointer: &str) -> u64 {
        self.json
            .pointer(pointer)
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }
}

fn xload(engine: &str, args: &[&str]) -> Run {
    let dir = TempDir::new("h2");
    let json = dir.join_str("r.json");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--engine", engine, "--json", &json]);
    let (status, stdout, stderr, elapsed) = run_xload_with_timeout(&all, HARD_TIMEOUT);
    let json = if std::path::Path::new(&json).exists() {
        read_json(&json)
    } else {
        Value::Null
    };
    Run {
        code: exit_code(status),
        json,
        out: format!("xload {all:?}\n{stdout}{stderr}"),
        elapsed,
    }
}

fn nginx_h2(tls: bool) -> Option<Nginx> {
    Nginx::start(NginxOptions {
        http2: true,
        tls: tls.then(|| SelfSigned::new(&["localhost"]).nginx("TLSv1.2 TLSv1.3")),
        ..NginxOptions::default()
    })
}

/// `-n N` at `streams` per connection: xload's count, its 200s and nginx's
/// stub_status agree exactly, and the report says h2 and what it used.
fn reconciles_with_nginx(engine: &str, tls: bool, streams: u32) {
    const N: u64 = 100_000;
    let Some(nginx) = nginx_h2(tls) else {
        return;
    };
    let (n, s) = (N.to_string(), streams.to_string());
    let url = nginx.url("/");
    let mut args = vec![&url[..], "--http2", "--streams", &s, "-n", &n, "-c", "4"];
    if tls {
        args.push("--insecure");
    }
    let r = xload(engine, &args);
    assert_eq!(r.code, 0, "{}\n{}", r.out, nginx.logs());
    assert_eq!(r.u64_at("/requests"), N, "{}", r.out);
    assert_eq!(r.u64_at("/status/200"), N, "{}", r.out);
    assert_eq!(r.u64_at("/errors_total"), 0, "{}", r.out);
    assert_eq!(nginx.requests(), N, "nginx stub_status\n{}", r.out);
    assert_eq!(r.json["protocol"], "h2", "{}", r.out);
    let h2 = &r.json["h2"];
    assert_eq!(h2["streams_asked"], streams, "{}", r.out);
    // nginx allows 128 streams at once (http2_max_concurrent_streams).
    assert_eq!(h2["streams_per_connection"], streams.min(128), "{}", r.out);
    assert_eq!(
        h2["server_settings"]["max_concurrent_streams"], 128,
        "{}",
        r.out
    );
    assert_eq!(h2["goaways"], 0, "{}", r.out);
}

fn h2c_one_stream_reconciles_with_nginx(engine: &str) {
    reconciles_with_nginx(engine, false, 1);
}

fn h2c_a_hundred_streams_reconcile_with_nginx(engine: &str) {
    reconciles_with_nginx(engine, false, 100);
}

fn h2_over_tls_one_stream_reconciles_with_nginx(engine: &str) {
    reconciles_with_nginx(engine, true, 1);
}

fn h2_over_tls_a_hundred_streams_reconcile_with_nginx(engine: &str) {
    reconciles_with_nginx(engine, true, 100);
}

/// Open loop over h2: a stream is what is scheduled; every send is answered
/// and nginx counted them all.
fn h2c_open_loop_reconciles_with_nginx(engine: &str) {
    let Some(nginx) = nginx_h2(false) else {
        return;
    };
    let r = xload(
        engine,
        &[
            &nginx.url("/"),
            "--http2",
            "--streams",
            "8",
            "--rate",
            "2000",
            "-d",
            "1s",
            "-c",
            "2",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.out);
    let requests = r.u64_at("/requests");
    let sends = r.u64_at("/sends");
    assert!(requests > 0, "{}", r.out);
    // Every send of the window is answered in it or left in flight.
    assert_eq!(
        requests + r.u64_at("/unanswered_at_end/in_flight"),
        sends,
        "{}",
        r.out
    );
    // nginx served the window's answers and whatever the window closed on.
    let served = nginx.requests();
    assert!(served >= requests, "nginx {served} < {requests}\n{}", r.out);
    assert_eq!(r.json["protocol"], "h2", "{}", r.out);
}

/// Streams on a few connections batch the io_uring waits (a wait asks for
/// answers on 1/4 to 3/4 of the connections), where one stream per
/// connection does not (fewer than 16 connections): each receive then
/// carries several answers and each send several requests. The count still
/// reconciles with nginx.
#[test]
fn streams_on_few_connections_batch_their_waits() {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut version = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    if (version.next().unwrap_or(0), version.next().unwrap_or(0)) < (6, 4) {
        eprintln!("kernel {release}: no multishot timeouts, no batching");
        return;
    }
    let Some(nginx) = nginx_h2(false) else {
        return;
    };
    let url = nginx.url("/");
    let args = |streams| {
        [
            &url[..],
            "--http2",
            "--streams",
            streams,
            "-c",
            "8",
            "-t",
            "1",
        ]
    };
    let mut batched = args("10").to_vec();
    batched.extend(["-n", "20000"]);
    let r = xload("uring", &batched);
    if r.json["engine"] == "epoll" {
        eprintln!("io_uring unavailable: nothing to batch");
        return;
    }
    assert_eq!(r.code, 0, "{}", r.out);
    assert_eq!(r.u64_at("/requests"), 20_000, "{}", r.out);
    assert_eq!(nginx.requests(), 20_000, "nginx stub_status\n{}", r.out);
    let b = &r.json["batching"];
    let (lo, hi) = (b["cap_min"].as_u64(), b["cap_max"].as_u64());
    // 8 connections: the cap stays within 2 (1/4) and 6 (3/4).
    assert!(
        r.u64_or_0("/batching/waits") > 0
            && lo.is_some_and(|lo| lo >= 2)
            && hi.is_some_and(|hi| hi <= 6),
        "{}",
        r.out
    );
    let mut single = args("1").to_vec();
    single.extend(["-d", "1s"]);
    let r = xload("uring", &single);
    assert_eq!(r.code, 0, "{}", r.out);
    assert!(r.json.get("batching").is_none(), "{}", r.out);
}

/// `--alpn h2,http/1.1`: the server chooses (nginx: h2), the report says so.
fn alpn_lets_the_server_choose(engine: &str) {
    let Some(nginx) = nginx_h2(true) else {
        return;
    };
    let r = xload(
        engine,
        &[
            &nginx.url("/"),
            "--alpn",
            "h2,http/1.1",
            "--streams",
            "10",
            "-n",
            "2000",
            "-c",
            "2",
            "--insecure",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.out);
    assert_eq!(r.u64_at("/requests"), 2000, "{}", r.out);
    assert_eq!(nginx.requests(), 2000, "{}", r.out);
    assert_eq!(r.json["protocol"], "h2", "{}", r.out);
    // A server without h2: http/1.1 is what it chose.
    let Some(h1) = Nginx::start(NginxOptions {
        tls: Some(SelfSigned::new(&["localhost"]).nginx("TLSv1.2 TLSv1.3")),
        ..NginxOptions::default()
    }) else {
        return;
    };
    let r = xload(
        engine,
        &[
            &h1.url("/"),
            "--alpn",
            "h2,http/1.1",
            "-n",
            "500",
            "-c",
            "2",
            "--insecure",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.out);
    assert_eq!(r.u64_at("/requests"), 500, "{}", r.out);
    assert_eq!(h1.requests(), 500, "{}", r.out);
    assert_eq!(r.json["protocol"], "http/1.1", "{}", r.out);
    // --http2 to that server: refused before the run, clearly.
    let r = xload(engine, &[&h1.url("/"), "--http2", "-n", "10", "--insecure"]);
    assert_eq!(r.code, 1, "{}", r.out);
    assert!(r.out.contains("enable HTTP/2 on the server"), "{}", r.out);
}

/// `--http2` on http:// to a server without h2c: refused before the run,
/// naming the cause.
fn h2c_to_an_http11_server_is_refused_before_the_run(engine: &str) {
    let Some(nginx) = Nginx::start(NginxOptions::default()) else {
        return;
    };
    let r = xload(engine, &[&nginx.url("/"), "--http2", "-n", "10"]);
    assert_eq!(r.code, 1, "{}", r.out);
    assert!(r.out.contains("it does not speak h2c"), "{}", r.out);
}

/// nghttpd (nghttp2's server: Huffman, an indexing HPACK encoder, DATA
/// frames split at its frame size): a 40 kB file at 10 streams per
/// connection, every byte and response counted.
fn nghttpd_bodies_arrive_whole(engine: &str) {
    let Some(bin) = ["/usr/sbin/nghttpd", "/usr/bin/nghttpd"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
    else {
        eprintln!("nghttpd not installed (Debian nghttp2-server): skipped");
        return;
    };
    let dir = TempDir::new("nghttpd");
    let body = "0123456789abcdef".repeat(2500);
    std::fs::write(dir.join("f"), &body).unwrap();
    let port = support::run::free_port();
    let mut child = Command::new(bin)
        .args(["--no-tls", "-d"])
        .arg(dir.path())
        .arg(port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nghttpd");
    support::run::wait_listening(port);
    let url = format!("http://127.0.0.1:{port}/f");
    let r = xload(
        engine,
        &[
            &url,
            "--http2",
            "--streams",
            "10",
            "-n",
            "500",
            "-c",
            "2",
            "-t",
            "1",
        ],
    );
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(r.code, 0, "{}", r.out);
    assert_eq!(r.u64_at("/requests"), 500, "{}", r.out);
    assert_eq!(r.u64_at("/status/200"), 500, "{}", r.out);
    assert_eq!(r.u64_at("/errors_total"), 0, "{}", r.out);
    // Every body byte arrived (and the frames around them).
    assert!(r.u64_at("/bytes") >= 500 * body.len() as u64, "{}", r.out);
}

// ---------------------------------------------------------------------------
// Hostile servers.

/// A hostile.py server in `mode`, serving one connection at a time.
struct Hostile {
    child: Child,
    port: u16,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Hostile {
    fn start(mode: &str) -> Option<Hostile> {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../http/tests/h2/hostile.py");
        Self::spawn(script, Some(mode))
    }

    /// tests/support/h2_session_app.py: logins, cookies and ids over h2c.
    fn session_app() -> Option<Hostile> {
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/h2_session_app.py");
        Self::spawn(script, None)
    }

    /// `python3 SCRIPT [MODE] PORT`, once it prints "ready" (None without python3-h2).
    fn spawn(script: PathBuf, mode: Option<&str>) -> Option<Hostile> {
        let python = "/usr/bin/python3";
        let has_h2 = Command::new(python)
            .args(["-c", "import h2"])
            .status()
            .is_ok_and(|s| s.success());
        if !has_h2 {
            eprintln!("python3-h2 not installed: skipped");
            return None;
        }
        let port = support::run::free_port();
        let mut child = Command::new(python)
            .arg(&script)
            .args(mode)
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("hostile.py");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let ready = lines.recv_timeout(Duration::from_secs(10));
        assert_eq!(
            ready.as_deref(),
            Ok("ready"),
            "{} {mode:?}",
            script.display()
        );
        Some(Hostile { child, port, lines })
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// Requests received and answered over every connection so far (the
    /// server prints them as each connection ends; xload closed them all).
    fn totals(&self) -> (u64, u64) {
        match self.last_total()[..] {
            [received, answered] => (received, answered),
            _ => (0, 0),
        }
    }

    /// The numbers of the last "total ..." line printed (none: empty).
    fn last_total(&self) -> Vec<u64> {
        let mut last = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(2000)) {
            if let Some(rest) = line.strip_prefix("total ") {
                last = rest
                    .split_whitespace()
                    .map(|w| w.parse().unwrap())
                    .collect();
            }
        }
        last
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A GOAWAY whose last-stream-id is the 50th request's: the streams above
/// it were never processed and are sent again on a new connection; `-n`
/// stays exact and the server answered exactly that many.
fn goaway_mid_run_retries_the_streams_above_last_stream_id(engine: &str) {
    let Some(server) = Hostile::start("goaway") else {
        return;
    };
    let r = xload(
        engine,
        &[
            &server.url(),
            "--http2",
            "--streams",
            "10",
            "-n",
            "200",
            "-c",
            "1",
            "-t",
            "1",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.out);
    assert_eq!(r.u64_at("/requests"), 200, "{}", r.out);
    assert_eq!(r.u64_at("/errors_total"), 0, "{}", r.out);
    assert_eq!(r.u64_at("/h2/goaways"), 1, "{}", r.out);
    // The server answered each request once: none of those refused (at
    // most the 10 streams open above the last-stream-id) was processed.
    let (_, answered) = server.totals();
    assert_eq!(answered, 200, "{}", r.out);
    assert!(r.u64_at("/h2/retried_streams") <= 10, "{}", r.out);
    assert!(r.u64_at("/connects") >= 2, "{}", r.out);
}

/// RST_STREAM REFUSED_STREAM on every 10th stream: retried (never
/// processed), counted by code, `-n` exact.
fn refused_streams_are_retried_and_counted_by_code(engine: &str) {
    let Some(server) = Hostile::start("rst") else {
        return;
    };
    let r = xload(
        engine,
        &[
            &server.url(),
            "--http2",
            "--streams",
            "8",
            "-n",
            "300",
            "-c",
            "1",
            "-t",
            "1",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.out);
    assert_eq!(r.u64_at("/requests"), 300, "{}", r.out);
    assert_eq!(r.u64_at("/errors_total"), 0, "{}", r.out);
    let (received, answered) = server.totals();
    assert_eq!(answered, 300, "{}", r.out);
    let refused = received - answered;
    assert_eq!(refused, received / 10, "{}", r.out);
    assert_eq!(
        r.u64_at("/h2/rst_stream/REFUSED_STREAM"),
        refused,
        "{}",
        r.out
    );
    assert_eq!(r.u64_at("/h2/retried_streams"), refused, "{}", r.out);
}

/// A 1-byte stream window: POST bodies leave a byte per WINDOW_UPDATE;
/// every request completes and the wait shows as flow-control stall.
fn a_one_byte_window_stalls_bodies_but_completes(engine: &str) {
    let Some(server) = Hostile::start("window") else {
        return;
    };
    let body = "x".repeat(64);
    let r = xload(
        engine,
        &[
            &server.url(),
            "--http2",
            "--streams",
            "4",
            "-m",
            "POST",
            "--body",
            &body,
            "-n",
            "40",
            "-c",
            "1",
            "-t",
            "1",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.out);
    assert_eq!(r.u64_at("/requests"), 40, "{}", r.out);
    assert_eq!(r.u64_at("/errors_total"), 0, "{}", r.out);
    assert_eq!(server.totals(), (40, 40), "{}", r.out);
    let stall = r.json["h2"]["flow_control_stall_ms"].as_f64().unwrap();
    assert!(stall > 0.0, "{}", r.out);
    assert_eq!(
        r.u64_at("/h2/server_settings/initial_window_size"),
        1,
        "{}",
        r.out
    );
}

/// MAX_CONCURRENT_STREAMS 1, raised to 10 by a later SETTINGS: the first
/// SETTINGS is reported, the streams in use follow the raise.
fn max_concurrent_streams_is_honoured_and_follows_a_raise(engine: &str) {
    let Some(server) = Hostile::start("maxstreams") else {
        return;
    };
    let r = xload(
        engine,
        &[
            &server.url(),
            "--http2",
            "--streams",
            "50",
            "-n",
            "200",
            "-c",
            "1",
            "-t",
            "1",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.out);
    assert_eq!(r.u64_at("/requests"), 200, "{}", r.out);
    assert_eq!(r.u64_at("/errors_total"), 0, "{}", r.out);
    assert_eq!(server.totals(), (200, 200), "{}", r.out);
    assert_eq!(
        r.u64_at("/h2/server_settings/max_concurrent_streams"),
        1,
        "{}",
        r.out
    );
    assert_eq!(r.u64_at("/h2/streams_per_connection"), 10, "{}", r.out);
}

/// Servers odd but correct: a header block over CONTINUATION frames, a
/// PING flood, a dynamic table size update to 0 mid-connection. Every
/// request completes, no error.
fn odd_but_correct_servers_are_served_in_full(engine: &str) {
    for mode in ["continuation", "pingflood", "tableupdate"] {
        let Some(server) = Hostile::start(mode) else {
            return;
        };
        let r = xload(
            engine,
            &[
                &server.url(),
                "--http2",
                "--streams",
                "4",
                "-n",
                "100",
                "-c",
                "1",
                "-t",
                "1",
            ],
        );
        assert_eq!(r.code, 0, "{mode}: {}", r.out);
        assert_eq!(r.u64_at("/requests"), 100, "{mode}: {}", r.out);
        assert_eq!(r.u64_at("/errors_total"), 0, "{mode}: {}", r.out);
        assert_eq!(server.totals(), (100, 100), "{mode}: {}", r.out);
    }
}

/// A frame of the wrong size: a connection error, named by its cause;
/// the run ends on time (nothing ever completes).
fn a_connection_error_is_named_and_the_run_ends_on_time(engine: &str) {
    let Some(server) = Hostile::start("garbage") else {
        return;
    };
    let r = xload(
        engine,
        &[&server.url(), "--http2", "-d", "1s", "-c", "1", "-t", "1"],
    );
    assert!(r.elapsed < Duration::from_secs(15), "{}", r.out);
    assert!(r.u64_at("/errors/h2_connection_error") > 0, "{}", r.out);
    assert_eq!(
        r.u64_at("/errors/h2_connection_error"),
        r.u64_at("/h2/connection_errors/bad_frame_size"),
        "{}",
        r.out
    );
}

/// SETTINGS never acknowledged: after the request timeout the connection
/// is dropped (settings_timeout) and replaced; the run ends on time.
fn settings_never_acknowledged_time_out(engine: &str) {
    let Some(server) = Hostile::start("noack") else {
        return;
    };
    let r = xload(
        engine,
        &[
            &server.url(),
            "--http2",
            "-d",
            "2s",
            "--timeout",
            "300ms",
            "-c",
            "1",
            "-t",
            "1",
        ],
    );
    assert!(r.elapsed < Duration::from_secs(15), "{}", r.out);
    assert!(
        r.u64_or_0("/h2/connection_errors/settings_timeout") >= 1,
        "{}",
        r.out
    );
    assert_eq!(
        r.u64_at("/errors/h2_connection_error"),
        r.u64_at("/h2/connection_errors/settings_timeout"),
        "{}",
        r.out
    );
    assert!(r.u64_at("/connects") >= 2, "{}", r.out);
}

// ---------------------------------------------------------------------------
// Workloads (-w, xload run) over HTTP/2.

/// Class `a` GETs /a/1../a/50 (weight 3), its 64-byte body checked for
/// `x`s as it arrives in DATA; `b` HEADs /b. Then `extra`.
fn h2_workload(dir: &TempDir, extra: &str) -> String {
    let text = format!(
        "[classes.a]\npath = \"/a/{{n}}\"\nn = {{ range = [1, 50] }}\nweight = 3\n\
         check = {{ status = 200, body_size = 64, contains = \"xxxxxxxx\" }}\n\
         [classes.b]\nmethod = \"HEAD\"\npath = \"/b\"\ncheck = {{ status = 200, body_size = 0 }}\n{extra}"
    );
    dir.file("w.toml", &text)
}

/// `xload serve --h2`'s count of answers (`/stats` over h2c, by curl).
fn served_h2(port: u16) -> u64 {
    let mut c = Command::new("curl");
    c.args(["-sS", "--max-time", "10", "--http2-prior-knowledge"])
        .arg(format!("http://127.0.0.1:{port}/stats"));
    let out = support::run::run_command_with_timeout(c, Duration::from_secs(15));
    assert!(out.status.success(), "curl: {}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).expect("stats JSON");
    v["requests"].as_u64().expect("requests")
}

/// A weighted two-class workload over h2c with ten streams per
/// connection: each stream carries its own pick and check; the classes'
/// counts add up to `-n`, to the 200s and to the responder's `/stats`.
fn workload_classes_over_h2_reconcile_with_serve(engine: &str) {
    const N: u64 = 3000;
    let srv = support::serve::Serve::start(&["--h2", "--body-size", "64"]);
    let dir = TempDir::new("h2-workload");
    let w = h2_workload(&dir, "");
    let url = format!("http://127.0.0.1:{}/", srv.port);
    let n = N.to_string();
    let r = xload(
        engine,
        &[
            "run",
            &w,
            &url,
            "--http2",
            "--streams",
            "10",
            "-n",
            &n,
            "-c",
            "4",
            "-t",
            "1",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.out);
    assert_eq!(r.json["protocol"], "h2", "{}", r.out);
    assert_eq!(r.json["h2"]["streams_per_connection"], 10, "{}", r.out);
    assert_eq!(r.u64_at("/requests"), N, "{}", r.out);
    assert_eq!(r.u64_at("/status/200"), N, "{}", r.out);
    assert_eq!(r.u64_at("/errors_total"), 0, "{}", r.out);
    let (a, b) = (
        r.u64_at("/classes/0/requests"),
        r.u64_at("/classes/1/requests"),
    );
    assert_eq!(a + b, N, "{}", r.out);
    // Weights 3:1, drawn: about 2250 and 750.
    assert!((2000..2500).contains(&a), "{}", r.out);
    for c in 0..2 {
        assert_eq!(
            r.u64_at(&format!("/classes/{c}/consistency_errors")),
            0,
            "{}",
            r.out
        );
    }
    assert_eq!(served_h2(srv.port), N, "the responder's count\n{}", r.out);
}

/// Open loop: a workload over h2 paced by `--rate`: each stream scheduled,
/// picked and checked on its own; the classes add up to the run's count.
fn workload_over_h2_in_open_loop(engine: &str) {
    let srv = support::serve::Serve::start(&["--h2", "--body-size", "64"]);
    let dir = TempDir::new("h2-workload-open");
    let w = h2_workload(&dir, "");
    let url = format!("http://127.0.0.1:{}/", srv.port);
    let r = xload(
        engine,
        &[
            "run",
            &w,
            &url,
            "--http2",
            "--streams",
            "4",
            "--rate",
            "2000",
            "-d",
            "1s",
            "-c",
            "4",
            "-t",
            "1",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.out);
    assert_eq!(r.json["protocol"], "h2", "{}", r.out);
    let n = r.u64_at("/requests");
    // 2000 intended over 1 s; a loaded machine may answer fewer in the window.
    assert!((1000..=2100).contains(&n), "{}", r.out);
    assert_eq!(r.u64_at("/errors_total"), 0, "{}", r.out);
    let (a, b) = (
        r.u64_at("/classes/0/requests"),
        r.u64_at("/classes/1/requests"),
    );
    assert_eq!(a + b, n, "{}", r.out);
    assert!(a > b && b > 0, "{}", r.out);
}

/// Over h2 as over HTTP/1.1: a class whose status check fails (`b`
/// wants 404) and one whose body check fails (`c`: no `x` allowed) count
/// every response as a consistency error of their class, with the path
/// and reason among the offenders; the class whose checks hold has none.
fn failed_checks_over_h2_are_consistency_errors(engine: &str) {
    let srv = support::serve::Serve::start(&["--h2", "--body-size", "64"]);
    let dir = TempDir::new("h2-workload-bad");
    let w = h2_workload(
        &dir,
        "[classes.c]\npath = \"/c/{n}\"\nn = { range = [1, 3] }\ncheck = { not_contains = \"x\" }\n",
    );
    let w = std::fs::read_to_string(&w).unwrap().replace(
        "check = { status = 200, body_size = 0 }",
        "check = { status = 404 }",
    );
    let w = dir.file("w.toml", &w);
    let url = format!("http://127.0.0.1:{}/", srv.port);
    let r = xload(
        engine,
        &[
            "-w",
            &w,
            &url,
            "--http2",
            "--streams",
            "10",
            "-n",
            "600",
            "-c",
            "2",
            "-t",
            "1",
            "--fail-if",
            "consistency>0",
        ],
    );
    assert_eq!(r.code, 3, "{}", r.out);
    assert_eq!(r.u64_at("/requests"), 600, "{}", r.out);
    let class = |i: usize, k: &str| r.u64_at(&format!("/classes/{i}/{k}"));
    assert_eq!(class(0, "consistency_errors"), 0, "{}", r.out);
    for i in [1, 2] {
        assert!(class(i, "requests") > 0, "{}", r.out);
        assert_eq!(
            class(i, "consistency_errors"),
            class(i, "requests"),
            "{}",
            r.out
        );
    }
    assert_eq!(
        r.u64_at("/errors/consistency"),
        class(1, "requests") + class(2, "requests"),
        "{}",
        r.out
    );
    let offender = |i: usize| &r.json["classes"][i]["offending"][0];
    assert_eq!(offender(1)["path"], "/b", "{}", r.out);
    assert_eq!(
        offender(1)["reason"],
        "status 200 not expected",
        "{}",
        r.out
    );
    assert!(
        offender(2)["path"].as_str().unwrap().starts_with("/c/"),
        "{}",
        r.out
    );
    assert_eq!(
        offender(2)["reason"],
        "body holds not_contains[0]",
        "{}",
        r.out
    );
}

/// Sessions over h2c against tests/support/h2_session_app.py: each logs
/// in, keeps the cookie the server set and the token (a header) and id
/// (JSON body) it captured, and echoes them on every later request; the
/// server finds every one its session's own.
fn h2_sessions_carry_their_cookie_and_captured_ids(engine: &str) {
    const SESSIONS: u64 = 4;
    let Some(app) = Hostile::session_app() else {
        return;
    };
    let dir = TempDir::new("h2-sessions");
    let w = dir.file(
        "w.toml",
        "[classes.login]\npath = \"/login\"\ncheck = { status = 200 }\n\
         capture = { token = { header = \"X-Token\" }, uid = { json = \"$.user.id\" } }\n\
         [classes.account]\npath = \"/account/{uid}\"\nheaders = { X-Token = \"{token}\" }\n\
         check = { status = 200, contains = \"balance ok\" }\n\
         [session]\nsequence = [\"login\", \"account\", \"account\"]\nthink = \"5ms\"\n",
    );
    let sessions = SESSIONS.to_string();
    let r = xload(
        engine,
        &[
            "run",
            &w,
            &app.url(),
            "--http2",
            "--sessions",
            &sessions,
            "-d",
            "1s",
            "-t",
            "1",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.out);
    assert_eq!(r.json["protocol"], "h2", "{}", r.out);
    assert_eq!(r.u64_at("/errors_total"), 0, "{}", r.out);
    let class = |i: usize, k: &str| r.u64_at(&format!("/classes/{i}/{k}"));
    for i in 0..2 {
        for k in ["consistency_errors", "capture_failures", "session_restarts"] {
            assert_eq!(class(i, k), 0, "{k}\n{}", r.out);
        }
    }
    let (logins, accounts) = (class(0, "requests"), class(1, "requests"));
    assert!(logins >= SESSIONS && accounts >= logins, "{}", r.out);
    // The server found every account request its session's own; it saw at
    // most the requests in flight at the end more than the client counted.
    let t = app.last_total();
    let [_, served_logins, checked, mismatches] = t[..] else {
        panic!("no totals: {t:?}\n{}", r.out);
    };
    assert_eq!(mismatches, 0, "{t:?}\n{}", r.out);
    assert!(
        (accounts..=accounts + SESSIONS).contains(&checked),
        "{t:?}\n{}",
        r.out
    );
    assert!(
        (logins..=logins + SESSIONS).contains(&served_logins),
        "{t:?}\n{}",
        r.out
    );
}

/// A concurrency sweep over h2c: each step speaks h2 with its streams, and
/// `--fail-if` judges an h2 run as any other (exit 3 on its condition).
fn sweeps_and_gates_run_over_h2(engine: &str) {
    let srv = support::serve::Serve::start(&["--h2"]);
    let url = format!("http://127.0.0.1:{}/", srv.port);
    let r = xload(
        engine,
        &[
            "sweep",
            &url,
            "--http2",
            "--streams",
            "4",
            "-c",
            "1,2",
            "-d",
            "300ms",
            "-t",
            "1",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.out);
    let steps = r.json["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 2, "{}", r.out);
    for s in steps {
        assert_eq!(s["protocol"], "h2", "{}", r.out);
        assert_eq!(s["h2"]["streams_per_connection"], 4, "{}", r.out);
        assert!(s["requests"].as_u64().unwrap_or(0) > 0, "{}", r.out);
        assert_eq!(s["errors_total"], 0, "{}", r.out);
    }
    let r = xload(
        engine,
        &[
            &url,
            "--http2",
            "-n",
            "500",
            "-c",
            "2",
            "-t",
            "1",
            "--fail-if",
            "p99>1us",
        ],
    );
    assert_eq!(r.code, 3, "{}", r.out);
    assert_eq!(r.u64_at("/requests"), 500, "{}", r.out);
}

both_engines!(
    sweeps_and_gates_run_over_h2,
    workload_classes_over_h2_reconcile_with_serve,
    workload_over_h2_in_open_loop,
    failed_checks_over_h2_are_consistency_errors,
    h2_sessions_carry_their_cookie_and_captured_ids,
);

/// A session sends one request at a time: over HTTP/2 it has a connection
/// and one stream of its own, so `--streams` above 1 is refused.
#[test]
fn sessions_over_h2_refuse_more_streams() {
    let dir = TempDir::new("h2-sessions-streams");
    let w = h2_workload(
        &dir,
        "[session]\nsequence = [\"a\", \"b\"]\nthink = \"5ms\"\n",
    );
    let (status, stdout, stderr, _) = run_xload_with_timeout(
        [
            "run",
            &w,
            "http://127.0.0.1:9/",
            "--http2",
            "--streams",
            "4",
            "--sessions",
            "2",
            "-d",
            "1s",
        ],
        HARD_TIMEOUT,
    );
    assert_eq!(exit_code(status), 2, "{stdout}{stderr}");
    assert!(stderr.contains("--sessions with --http2"), "{stderr}");
}

/// MAX_CONCURRENT_STREAMS 0, never raised: no request can be sent. Each
/// connection gives up after the request timeout (no_streams_allowed), the
/// request it held counts as failed, and a `-n` run ends.
fn no_streams_allowed_fail_in_time_and_a_count_run_ends(engine: &str) {
    let Some(server) = Hostile::start("nostreams") else {
        return;
    };
    let r = xload(
        engine,
        &[
            &server.url(),
            "--http2",
            "-n",
            "4",
            "--timeout",
            "300ms",
            "-c",
            "1",
            "-t",
            "1",
        ],
    );
    assert!(r.elapsed < Duration::from_secs(20), "{}", r.out);
    assert_eq!(r.u64_or_0("/requests"), 0, "{}", r.out);
    assert_eq!(
        r.u64_at("/h2/connection_errors/no_streams_allowed"),
        4,
        "{}",
        r.out
    );
    assert_eq!(r.u64_at("/errors/h2_connection_error"), 4, "{}", r.out);
    assert_eq!(server.totals().0, 0, "{}", r.out);
}

both_engines!(
    h2c_one_stream_reconciles_with_nginx,
    h2c_a_hundred_streams_reconcile_with_nginx,
    h2_over_tls_one_stream_reconciles_with_nginx,
    h2_over_tls_a_hundred_streams_reconcile_with_nginx,
    h2c_open_loop_reconciles_with_nginx,
    alpn_lets_the_server_choose,
    h2c_to_an_http11_server_is_refused_before_the_run,
    nghttpd_bodies_arrive_whole,
    goaway_mid_run_retries_the_streams_above_last_stream_id,
    refused_streams_are_retried_and_counted_by_code,
    a_one_byte_window_stalls_bodies_but_completes,
    max_concurrent_streams_is_honoured_and_follows_a_raise,
    odd_but_correct_servers_are_served_in_full,
    a_connection_error_is_named_and_the_run_ends_on_time,
    settings_never_acknowledged_time_out,
    no_streams_allowed_fail_in_time_and_a_count_run_ends,
);

// ---------------------------------------------------------------------------
// Bad combinations: exit 2, a message naming the fix, nothing run.

#[test]
fn bad_flag_combinations_exit_2_with_a_clear_message() {
    let cases: &[(&[&str], &str)] = &[
        (&["--streams", "4"], "--streams sets HTTP/2 streams"),
        (
            &["--http2", "--streams", "0"],
            "invalid value '0' for '--streams",
        ),
        (
            &["--http2", "--streams", "5000"],
            "--streams must be between 1 and 4096",
        ),
        (
            &["--http2", "--pipeline", "4"],
            "--pipeline is HTTP/1.1 pipelining",
        ),
        (
            &["--http2", "--no-keepalive"],
            "HTTP/2 keeps connections open",
        ),
        (
            &["--alpn", "h2"],
            "--alpn is negotiated in the TLS handshake",
        ),
        (
            &[
                "--http2",
                "--engine",
                "xdp",
                "--dev",
                "lo",
                "--src-ip",
                "127.0.0.9",
            ],
            "--engine xdp speaks HTTP/1.1 only",
        ),
    ];
    for (args, want) in cases {
        let mut all = vec!["http://127.0.0.1:9/", "-n", "1"];
        all.extend_from_slice(args);
        let (status, stdout, stderr, _) = run_xload_with_timeout(&all, HARD_TIMEOUT);
        assert_eq!(exit_code(status), 2, "{all:?}\n{stdout}{stderr}");
        assert!(stderr.contains(want), "{all:?}: want {want:?}\n{stderr}");
    }
    let (status, _, stderr, _) = run_xload_with_timeout(
        ["https://127.0.0.1:9/", "--alpn", "h3", "-n", "1"],
        HARD_TIMEOUT,
    );
    assert_eq!(exit_code(status), 2, "{stderr}");
    assert!(stderr.contains("xload speaks h2 and http/1.1"), "{stderr}");
}
