//! HTTPS: `xload serve --tls` answers over TLS 1.2 and 1.3 with a
//! self-signed certificate (fingerprint printed) or one given in PEM files,
//! pipelined and large answers included, with /stats counting as over plain
//! HTTP; a client that does not speak TLS is not answered.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::{ClientConfig, ClientConnection, StreamOwned};
use support::run::TempDir;
use support::serve::Serve;
use support::tls::{any_cert, any_cert_client, client, SelfSigned};
use xload_testkit::both_engines;

/// `xload serve --tls --cpus 0 ARGS...` on a free loopback port.
fn serve_tls(args: &[&str]) -> Serve {
    Serve::start(&[&["--tls", "--cpus", "0"][..], args].concat())
}

/// A TLS stream to `srv` with `cfg`, as "localhost".
fn tls_connect(srv: &Serve, cfg: &Arc<ClientConfig>) -> StreamOwned<ClientConnection, TcpStream> {
    support::tls::stream(srv.connect(), cfg)
}

/// Reads until `n` answers, each with a body of `body_len` bytes, came whole.
fn read_answers(s: &mut impl Read, n: usize, body_len: usize) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let head_len = |b: &[u8]| {
        let t = String::from_utf8_lossy(b);
        t.matches("HTTP/1.1 200 OK").count()
    };
    while head_len(&buf) < n || buf.len() < n * body_len + head_len(&buf) * 40 {
        let k = s.read(&mut chunk).expect("read");
        assert!(k > 0, "closed early after {} bytes", buf.len());
        buf.extend_from_slice(&chunk[..k]);
        let t = String::from_utf8_lossy(&buf);
        if t.matches("HTTP/1.1 200 OK").count() == n
            && t.rfind("\r\n\r\n")
                .is_some_and(|p| buf.len() - (p + 4) >= body_len)
        {
            break;
        }
    }
    buf
}

/// The `/stats` JSON, asked over TLS.
fn stats(srv: &Serve, cfg: &Arc<ClientConfig>) -> serde_json::Value {
    let mut s = tls_connect(srv, cfg);
    s.write_all(b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = Vec::new();
    // The answer ends with close_notify: read_to_end sees a clean end.
    s.read_to_end(&mut text)
        .expect("read /stats to a clean end");
    let text = String::from_utf8_lossy(&text);
    let body = text.split("\r\n\r\n").nth(1).expect("a body");
    serde_json::from_str(body).expect("stats JSON")
}

#[test]
fn serve_tls_answers_pipelined_requests_over_tls12_and_tls13() {
    let srv = serve_tls(&["--body-size", "100000"]);
    let seen = Arc::new(any_cert());
    for versions in [
        &[&rustls::version::TLS13][..],
        &[&rustls::version::TLS12][..],
    ] {
        let cfg = client(versions, seen.clone());
        let mut s = tls_connect(&srv, &cfg);
        // Three pipelined requests in one write: three answers, in order.
        s.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\nGET /c HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let got = read_answers(&mut s, 3, 100_000);
        assert_eq!(
            String::from_utf8_lossy(&got)
                .matches("HTTP/1.1 200 OK")
                .count(),
            3
        );
        let negotiated = s.conn.protocol_version().expect("a version");
        assert_eq!(negotiated, versions[0].version);
        assert_eq!(s.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
    }
    // Plain HTTP on the TLS port: not answered as HTTP, not counted.
    let mut plain = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut back = Vec::new();
    let _ = plain.read_to_end(&mut back);
    assert!(
        !String::from_utf8_lossy(&back).contains("HTTP/1.1"),
        "{back:?}"
    );

    let st = stats(&srv, &client(rustls::DEFAULT_VERSIONS, seen.clone()));
    assert_eq!(st["requests"], 6, "{st}");
    // The start's readiness probe, two TLS clients, the plain one and this.
    assert_eq!(st["connections"], 5, "{st}");
    assert_eq!(st["bad_requests"], 0, "{st}");
    let out = srv.stop();
    let der = seen.last();
    let d = ring::digest::digest(&ring::digest::SHA256, &der);
    let hex: Vec<String> = d.as_ref().iter().map(|b| format!("{b:02X}")).collect();
    assert!(out.contains("listening on https://"), "{out}");
    assert!(
        out.contains(&format!(
            "self-signed certificate, SHA-256 fingerprint {}",
            hex.join(":")
        )),
        "the printed fingerprint is the served certificate's: {out}"
    );
}

#[test]
fn serve_tls_uses_the_given_certificate_and_a_verifying_client_trusts_it() {
    let dir = TempDir::new("xload-tls");
    let cert = SelfSigned::new(&["localhost"]);
    let (cert_path, key_path) = cert.write(&dir);
    let srv = serve_tls(&[
        "--cert",
        cert_path.to_str().unwrap(),
        "--key",
        key_path.to_str().unwrap(),
    ]);
    let cfg = cert.trusting_client();
    let mut s = tls_connect(&srv, &cfg);
    s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    read_answers(&mut s, 1, 0);
    drop(s);
    assert_eq!(stats(&srv, &cfg)["requests"], 1);
    let out = srv.stop();
    assert!(
        out.contains("given certificate, SHA-256 fingerprint"),
        "{out}"
    );
}

#[test]
fn serve_refuses_a_cert_without_a_key() {
    let (status, _out, err, _) = support::run::run_xload([
        "serve",
        "--tls",
        "--cert",
        "/nonexistent.pem",
        "--for",
        "1s",
    ]);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("--cert and --key go together"), "{err}");
}

// ---------------------------------------------------------------------------
// The client: `xload https://…`.

/// `xload ARGS --json PATH`: exit code, report, stdout and stderr.
fn client_run(engine: &str, args: &[&str]) -> (i32, serde_json::Value, String, String) {
    let dir = TempDir::new("xload-https");
    let all = [args, &["-t", "1", "--engine", engine]].concat();
    let r = support::run::run_json(&dir, &all, support::run::DEFAULT_XLOAD_TIMEOUT);
    (r.code, r.json, r.stdout, r.stderr)
}

fn has_tls_ulp() -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp")
        .unwrap_or_default()
        .split_whitespace()
        .any(|u| u == "tls")
}

fn https_against_serve_tls_reconciles_with_its_stats(engine: &str) {
    const N: u64 = 2000;
    let srv = serve_tls(&[]);
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let n = N.to_string();
    let (code, r, out, err) = client_run(engine, &[&url, "--insecure", "-n", &n, "-c", "8"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(r["requests"], N, "{out}");
    assert_eq!(r["errors_total"], 0, "{out}");
    let ran = if engine == "uring" {
        "io_uring"
    } else {
        "epoll"
    };
    assert_eq!(r["engine"], ran, "{out}");
    let t = &r["tls"];
    assert_eq!(t["mode"], "user-space", "{t}");
    assert!(t["version"] == "TLS1.3", "{t}");
    assert_eq!(t["handshakes_full"], r["connects"], "{t}");
    assert_eq!(t["handshakes_resumed"], 0, "{t}");
    assert!(t["handshake_us"]["p50"].as_u64().unwrap() > 0, "{t}");
    assert!(out.contains("user-space (rustls, TLS1.3"), "{out}");
    if !has_tls_ulp() {
        assert!(
            out.contains("kTLS not available: no tls ULP in this kernel"),
            "{out}"
        );
        assert_eq!(t["ktls_unavailable"], "no tls ULP in this kernel");
    }
    let st = stats(&srv, &any_cert_client());
    assert_eq!(st["requests"], N, "{st}\n{out}");
    assert_eq!(st["bad_requests"], 0, "{st}");
    // The start's readiness probe, xload's certificate check, its
    // connections and this /stats request.
    let connects = r["connects"].as_u64().unwrap();
    assert_eq!(st["connections"], connects + 3, "{st}\n{out}");
}

/// A batched closed loop over https waits for answers: the completions its
/// sealed sends post (one each, to free the buffer) are not counted, nor
/// waited for in place of answers (a wait for N would end at N/2 answers).
#[test]
fn https_batched_waits_count_answers_not_sends() {
    let srv = serve_tls(&[]);
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let (code, r, out, err) = client_run("uring", &[&url, "--insecure", "-n", "20000", "-c", "32"]);
    assert_eq!(code, 0, "{out}{err}");
    let Some(b) = r.get("batching") else {
        eprintln!("no batching here (kernel before 6.4 or no io_uring)");
        return;
    };
    let completions = b["completions"].as_u64().unwrap();
    let answers = r["requests"].as_u64().unwrap();
    // Receives: the answers plus a few handshake and ticket records per
    // connection; with the sends counted it was about twice the answers.
    assert!(
        completions >= answers / 4 && completions <= answers + answers / 10 + 32 * 8,
        "{completions} completions for {answers} answers\n{out}"
    );
}

/// Connections set up in the warm-up leave no handshake in the measured
/// window: the report says so rather than "0 full, 0 resumed".
#[test]
fn https_after_a_warmup_says_the_handshakes_were_before_the_window() {
    let srv = serve_tls(&[]);
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let (code, r, out, err) = client_run(
        "uring",
        &[
            &url,
            "--insecure",
            "-c",
            "4",
            "-d",
            "300ms",
            "--warmup",
            "200ms",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(r["requests"].as_u64() > Some(0), "{out}");
    assert_eq!(r["tls"]["handshakes_full"], 0, "{out}");
    assert!(
        out.contains("Handshakes  none in the measured window"),
        "{out}"
    );
}

#[test]
fn https_refuses_an_untrusted_certificate_and_says_what_to_do() {
    let engine = "auto";
    let srv = serve_tls(&[]);
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let (code, _, out, err) = client_run(engine, &[&url, "-d", "2s", "-c", "2"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("not signed by a trusted CA"), "{err}");
    assert!(
        err.contains("--cacert FILE") && err.contains("--insecure"),
        "{err}"
    );
}

/// `xload https://…/ --cacert CERT -d 30s` against `xload serve --tls` with
/// that certificate: exit code and stderr (the run is expected to end at
/// the check before it, far sooner than 30 s).
fn refused_with_cacert(engine: &str, cert: &SelfSigned) -> (i32, String) {
    let dir = TempDir::new("xload-tls");
    let (cert, key) = cert.write(&dir);
    let srv = serve_tls(&[
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let cacert = cert.to_str().unwrap();
    let started = Instant::now();
    let (code, _, out, err) = client_run(engine, &[&url, "--cacert", cacert, "-d", "30s"]);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the whole window ran\n{out}{err}"
    );
    (code, err)
}

/// Defect 16: with --cacert given, an expired certificate or one for
/// another name is named by its cause, not answered with "pass the CA".
fn https_names_an_expired_certificate(engine: &str) {
    let (code, err) = refused_with_cacert(engine, &SelfSigned::expired(&["127.0.0.1"]));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("certificate has expired"), "{err}");
    assert!(!err.contains("--cacert FILE"), "{err}");
}

fn https_names_a_certificate_for_another_name(engine: &str) {
    let (code, err) = refused_with_cacert(engine, &SelfSigned::new(&["other.test"]));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not valid for 127.0.0.1"), "{err}");
    assert!(!err.contains("--cacert FILE"), "{err}");
}

/// A TLS 1.0-only server answers a ClientHello with a ServerHello for TLS
/// 1.0 (version 3.1, TLS_RSA_WITH_AES_128_CBC_SHA, no extensions).
const TLS10_SERVER_HELLO: &[u8] = &[
    0x16, 0x03, 0x01, 0x00, 0x2a, // handshake record, TLS 1.0, 42 bytes
    0x02, 0x00, 0x00, 0x26, // ServerHello, 38 bytes
    0x03, 0x01, // TLS 1.0
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
    27, 28, 29, 30, 31, 32,   // random
    0x00, // no session id
    0x00, 0x2f, // cipher suite
    0x00, // no compression
];

/// Defect 16: a server that speaks only TLS 1.0 is named as such before the
/// run, not counted as tls_handshake_failed for the whole window.
fn https_names_a_tls10_only_server(engine: &str) {
    let srv = Closer::start(Some(TLS10_SERVER_HELLO));
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let started = Instant::now();
    let (code, _, out, err) = client_run(engine, &[&url, "--insecure", "-d", "30s", "-c", "2"]);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the whole window ran\n{out}{err}"
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("TLS 1.1 or older"), "{err}");
}

fn https_trusts_cacert_and_reaches_a_name_through_resolve(engine: &str) {
    let dir = TempDir::new("xload-tls");
    let (cert, key) = SelfSigned::new(&["xload.test"]).write(&dir);
    let srv = serve_tls(&[
        "--cert",
        cert.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
    let url = format!("https://xload.test:{}/", srv.port);
    let resolve = format!("xload.test:{}:127.0.0.1", srv.port);
    let cacert = cert.to_str().unwrap();
    let args = [
        "--resolve",
        &resolve,
        "--cacert",
        cacert,
        "-n",
        "300",
        "-c",
        "2",
    ];
    let (code, r, out, err) = client_run(engine, &[&[url.as_str()][..], &args].concat());
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(r["requests"], 300, "{out}");
    assert_eq!(r["target"], url.as_str());
    // TLS 1.2 only, the same way.
    let (code, r, out, err) = client_run(
        engine,
        &[&[url.as_str(), "--tls-version", "1.2"][..], &args].concat(),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(r["tls"]["version"], "TLS1.2", "{out}");
}

/// A loopback server that accepts, answers `reply` to the first bytes it
/// reads (with `Some`) and closes; until dropped (at most 30 s).
struct Closer {
    port: u16,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Closer {
    fn start(reply: Option<&'static [u8]>) -> Closer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let end = Instant::now() + Duration::from_secs(30);
            while !flag.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < end {
                let Ok((mut s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                };
                if let Some(reply) = reply {
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                    let mut buf = [0u8; 4096];
                    if s.read(&mut buf).is_ok_and(|n| n > 0) {
                        let _ = s.write_all(reply);
                    }
                }
            }
        });
        Closer {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Closer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn https_to_a_plain_http_server_is_not_tls(engine: &str) {
    // What nginx and most servers answer to a ClientHello on a plain port.
    let srv = Closer::start(Some(
        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    ));
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let (code, r, out, err) = client_run(engine, &[&url, "--insecure", "-d", "500ms", "-c", "2"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        r["errors"]["not_tls"].as_u64().unwrap_or(0) > 0,
        "{out}{err}"
    );
    assert!(err.contains("not_tls"), "{err}");
}

fn https_to_a_server_that_closes_during_the_handshake_is_named(engine: &str) {
    let srv = Closer::start(None);
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let (code, r, out, err) = client_run(engine, &[&url, "--insecure", "-d", "500ms", "-c", "2"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        r["errors"]["tls_closed_in_handshake"].as_u64().unwrap_or(0) > 0,
        "{out}{err}"
    );
}

fn nginx_tls(protocols: &str) -> Option<support::nginx::Nginx> {
    support::nginx::Nginx::start(support::nginx::NginxOptions {
        tls: Some(SelfSigned::new(&["localhost"]).nginx(protocols)),
        ..Default::default()
    })
}

fn https_against_nginx_reconciles_with_stub_status(engine: &str) {
    const N: u64 = 1500;
    let Some(nginx) = nginx_tls("TLSv1.2 TLSv1.3") else {
        return;
    };
    let n = N.to_string();
    let (code, r, out, err) = client_run(
        engine,
        &[&nginx.url("/"), "--insecure", "-n", &n, "-c", "4"],
    );
    assert_eq!(code, 0, "{out}{err}\n{}", nginx.logs());
    assert_eq!(r["requests"], N, "{out}");
    assert_eq!(r["errors_total"], 0, "{out}");
    assert_eq!(nginx.requests(), N, "nginx stub_status\n{out}");
    // Its connections and the certificate check before the run.
    assert_eq!(
        nginx.accepted(),
        r["connects"].as_u64().unwrap() + 1,
        "{out}"
    );
}

/// No version in common: named before the run, which does not start.
fn https_version_mismatch_is_named_before_the_run(engine: &str) {
    let Some(nginx) = nginx_tls("TLSv1.2") else {
        return;
    };
    let (code, r, out, err) = client_run(
        engine,
        &[
            &nginx.url("/"),
            "--insecure",
            "--tls-version",
            "1.3",
            "-d",
            "500ms",
            "-c",
            "2",
        ],
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("no TLS version in common"), "{out}{err}");
    assert!(r.is_null(), "no run, no report: {r}");
    assert_eq!(nginx.requests(), 0);
}

/// Pipelined batches are sealed whole; a new connection per request costs
/// a full handshake each, or a resumed one with --tls-resume.
fn https_pipelines_and_handshakes_per_connection(engine: &str) {
    let srv = serve_tls(&[]);
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let (code, r, out, err) = client_run(
        engine,
        &[
            &url,
            "--insecure",
            "-n",
            "4000",
            "-c",
            "4",
            "--pipeline",
            "16",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        (r["requests"].as_u64(), r["errors_total"].as_u64()),
        (Some(4000), Some(0)),
        "{out}"
    );
    let (code, r, out, err) = client_run(
        engine,
        &[&url, "--insecure", "-n", "150", "-c", "2", "--no-keepalive"],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(r["requests"], 150, "{out}");
    // A connection that connected as the quota was met may end before its
    // handshake: at most one per connection (-c 2).
    let connects = r["connects"].as_u64().unwrap();
    let full = r["tls"]["handshakes_full"].as_u64().unwrap();
    assert!(
        full >= 150 && full <= connects && connects - full <= 2,
        "{out}"
    );
    assert_eq!(r["tls"]["handshakes_resumed"], 0, "{out}");
    // Each handshake's computation is timed on the worker's CPU clock.
    let each = r["tls"]["handshake_cpu_us"].as_f64().unwrap();
    assert!(each > 1.0 && each < 1e6, "{each}\n{out}");
    assert!(out.contains("TLS CPU "), "{out}");
    let (code, r, out, err) = client_run(
        engine,
        &[
            &url,
            "--insecure",
            "-n",
            "150",
            "-c",
            "2",
            "--no-keepalive",
            "--tls-resume",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let (full, resumed) = (
        r["tls"]["handshakes_full"].as_u64().unwrap(),
        r["tls"]["handshakes_resumed"].as_u64().unwrap(),
    );
    let connects = r["connects"].as_u64().unwrap();
    assert!(
        full + resumed <= connects && connects - (full + resumed) <= 2,
        "{out}"
    );
    // Only the first connections, with no session cached yet, are full.
    assert!(resumed >= 140 && full >= 1, "{out}");
    // 40 connections closing and reconnecting together: each finds a ticket
    // (rustls's own store keeps 8 per server, and most of a burst went full).
    let (code, r, out, err) = client_run(
        engine,
        &[
            &url,
            "--insecure",
            "-n",
            "400",
            "-c",
            "40",
            "--no-keepalive",
            "--tls-resume",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let full = r["tls"]["handshakes_full"].as_u64().unwrap();
    let resumed = r["tls"]["handshakes_resumed"].as_u64().unwrap();
    assert!(full <= 44 && resumed >= 350, "{out}");
    let st = stats(&srv, &any_cert_client());
    assert_eq!(st["requests"], 4000 + 150 + 150 + 400, "{st}");
}

/// Bodies of several records each: records straddle the engine's receive
/// buffers and are opened across receives, in TLS 1.3 and 1.2.
fn https_large_bodies_open_across_receives(engine: &str) {
    const BODY: u64 = 100_000;
    let srv = serve_tls(&["--body-size", "100000"]);
    let url = format!("https://127.0.0.1:{}/", srv.port);
    for version in ["1.3", "1.2"] {
        let (code, r, out, err) = client_run(
            engine,
            &[
                &url,
                "--insecure",
                "--tls-version",
                version,
                "-n",
                "300",
                "-c",
                "4",
            ],
        );
        assert_eq!(code, 0, "{out}{err}");
        assert_eq!(
            (r["requests"].as_u64(), r["errors_total"].as_u64()),
            (Some(300), Some(0)),
            "{out}"
        );
        assert_eq!(r["tls"]["version"], format!("TLS{version}"), "{out}");
        assert!(r["bytes"].as_u64().unwrap() >= 300 * BODY, "{out}");
    }
}

/// A loopback TCP server that never answers a byte: connections after the
/// first `forward` are held open and read, while the first `forward` are
/// relayed to `to` (a real TLS server), so the certificate pre-check can
/// pass and the run's own handshakes stall. Until dropped (at most 30 s).
struct Staller {
    port: u16,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Staller {
    fn start(forward: usize, to: Option<u16>) -> Staller {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let end = Instant::now() + Duration::from_secs(30);
            let mut held = Vec::new();
            let mut accepted = 0;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < end {
                let Ok((s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                };
                accepted += 1;
                let _ = s.set_nonblocking(false);
                match to.filter(|_| accepted <= forward) {
                    Some(to) => relay(s, to),
                    // Held open unanswered; what the client sends waits in
                    // the socket's buffer.
                    None => held.push(s),
                }
            }
        });
        Staller {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

/// Copies bytes both ways between `client` and 127.0.0.1:`to` until either closes.
fn relay(client: TcpStream, to: u16) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
        return;
    };
    for (mut from, mut into) in [
        (client.try_clone().unwrap(), server.try_clone().unwrap()),
        (server, client),
    ] {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut from, &mut into);
            let _ = into.shutdown(std::net::Shutdown::Both);
        });
    }
}

impl Drop for Staller {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A server that never answers the ClientHello: the certificate pre-check
/// ends at the handshake timeout with the cause named, instead of running
/// the window on top (before: `-d 2s` took 4 s, `Errors none`, then "no
/// response" with no cause).
#[test]
fn a_server_that_never_answers_the_client_hello_is_named_at_once() {
    let srv = Staller::start(0, None);
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let t0 = Instant::now();
    let (code, _, out, err) = client_run(
        "auto",
        &[
            &url,
            "--insecure",
            "-d",
            "10s",
            "--timeout",
            "1s",
            "--handshake-timeout",
            "500ms",
        ],
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("tls_handshake_timeout"), "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "took {:?}: the 10 s window ran after all\n{err}",
        t0.elapsed()
    );
}

/// Ctrl-C during the TLS pre-check is seen at once (before: only when the
/// handshake's wait, up to the connect timeout, ended).
#[test]
fn ctrl_c_during_the_tls_pre_check_exits_at_once() {
    let srv = Staller::start(0, None);
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let child = support::run::spawn_xload([
        url.as_str(),
        "-c",
        "8",
        "-d",
        "10s",
        "--insecure",
        "--connect-timeout",
        "9s",
        "--handshake-timeout",
        "9s",
    ]);
    std::thread::sleep(Duration::from_millis(500));
    let signalled = Instant::now();
    child.interrupt();
    let out = child.wait_timeout(Duration::from_secs(15));
    assert!(!out.timed_out, "no exit 15 s after Ctrl-C");
    assert!(
        signalled.elapsed() < Duration::from_secs(3),
        "{:?} from Ctrl-C to exit\n{}",
        signalled.elapsed(),
        out.stderr
    );
    assert_eq!(support::run::exit_code(out.status), 130, "{}", out.stderr);
    assert!(out.stderr.contains("interrupted"), "{}", out.stderr);
}

/// Handshakes that stall during the run end at the handshake timeout,
/// inside the window, counted as `tls_handshake_timeout` (before: as
/// `connect_timeout` at the connect timeout, although TCP had connected).
fn a_handshake_that_stalls_in_the_run_is_a_tls_handshake_timeout(engine: &str) {
    let real = serve_tls(&[]);
    // The pre-check's connection reaches the real server; the run's stall.
    let srv = Staller::start(1, Some(real.port));
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let (code, r, out, err) = client_run(
        engine,
        &[
            &url,
            "--insecure",
            "-c",
            "2",
            "-d",
            "1500ms",
            "--handshake-timeout",
            "300ms",
        ],
    );
    assert_eq!(code, 1, "nothing answered: {out}{err}");
    let errors = &r["errors"];
    assert!(
        errors["tls_handshake_timeout"].as_u64().unwrap_or(0) >= 2,
        "{errors}\n{out}{err}"
    );
    assert!(errors.get("connect_timeout").is_none(), "{errors}");
    assert!(err.contains("tls_handshake_timeout"), "{err}");
}

both_engines!(
    a_handshake_that_stalls_in_the_run_is_a_tls_handshake_timeout,
    https_large_bodies_open_across_receives,
    https_pipelines_and_handshakes_per_connection,
    https_against_serve_tls_reconciles_with_its_stats,
    https_trusts_cacert_and_reaches_a_name_through_resolve,
    https_to_a_plain_http_server_is_not_tls,
    https_to_a_server_that_closes_during_the_handshake_is_named,
    https_against_nginx_reconciles_with_stub_status,
    https_version_mismatch_is_named_before_the_run,
    https_names_an_expired_certificate,
    https_names_a_certificate_for_another_name,
    https_names_a_tls10_only_server,
);
