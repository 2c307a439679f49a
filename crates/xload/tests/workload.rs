//! Workload runs (`xload run FILE`, `-w FILE`) against `xload serve`: per-class
//! counts that sum to the run's and reconcile with the responder's counter,
//! failed checks counted as consistency errors with their paths, per-class
//! JSON that `xload merge` merges exactly, and file errors that name the line.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::nginx::{Nginx, NginxOptions};
use support::run::{
    exit_code, free_port, read_json, run_json, run_xload_with_timeout, spawn_xload, wait_listening,
    JsonRun, TempDir, XloadChild,
};
use xload_testkit::both_engines;

const HARD_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `xload serve --body-size 64` on a free loopback port, stopped on drop.
struct Serve {
    _child: XloadChild,
    port: u16,
}

impl Serve {
    fn start() -> Serve {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let child = spawn_xload([
            "serve",
            "--listen",
            &listen,
            "--body-size",
            "64",
            "--for",
            "20s",
        ]);
        wait_listening(port);
        Serve {
            _child: child,
            port,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// `/stats`' count of answers, once it stops moving (sends complete).
    fn served(&self) -> u64 {
        let read = || {
            let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .unwrap();
            let mut text = String::new();
            s.read_to_string(&mut text).unwrap();
            let body = text.split("\r\n\r\n").nth(1).expect("a body").to_string();
            let v: serde_json::Value = serde_json::from_str(&body).expect("stats JSON");
            v["requests"].as_u64().unwrap()
        };
        let mut last = read();
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(50));
            let now = read();
            if now == last {
                break;
            }
            last = now;
        }
        last
    }
}

/// Two classes: `a` GETs /a/1../a/100 by Zipf (weight 3), `b` HEADs /b.
fn two_classes(body_size: u64) -> String {
    format!(
        r#"
[classes.a]
path = "/a/{{n}}"
n = {{ range = [1, 100], zipf = 1.0 }}
weight = 3
check = {{ status = [200], body_size = {body_size} }}
limits = {{ mean = "1s", p99 = "2s" }}

[classes.b]
method = "HEAD"
path = "/b"
check = {{ status = 200, body_size = 0 }}
"#
    )
}

fn run(args: &[&str]) -> (i32, String, String) {
    let (status, stdout, stderr, _) =
        run_xload_with_timeout(args.iter().map(|s| s.to_string()), HARD_TIMEOUT);
    assert!(!stderr.contains("panicked"), "{stderr}");
    (exit_code(status), stdout, stderr)
}

/// `xload ARGS --json ...` with this file's timeout: exit code, output, report.
fn run_report(dir: &TempDir, args: &[&str]) -> JsonRun {
    run_json(dir, args, HARD_TIMEOUT)
}

/// `xload HEAD.. LOAD.. -t 1 -q --json ...`: one thread, quiet. `HEAD` names
/// the workload and target (`run W URL` or `-w W URL`), `LOAD` the rest.
fn run_quiet(dir: &TempDir, head: &[&str], load: &[&str]) -> JsonRun {
    let args: Vec<&str> = head
        .iter()
        .chain(load)
        .chain(&["-t", "1", "-q"])
        .copied()
        .collect();
    run_report(dir, &args)
}

impl JsonRun {
    /// Exit code, stdout, stderr and report, to bind in one `let`.
    fn parts(self) -> (i32, String, String, serde_json::Value) {
        (self.code, self.stdout, self.stderr, self.json)
    }
}

fn two_class_counts_sum_and_reconcile_with_serve(engine: &str) {
    let srv = Serve::start();
    let dir = TempDir::new("workload");
    let w = dir.file("w.toml", &two_classes(64));
    let (code, stdout, stderr, r) = run_quiet(
        &dir,
        &["run", &w, &srv.url()],
        &["-n", "3000", "-c", "4", "--engine", engine],
    )
    .parts();
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(r["requests"], 3000, "{stdout}");
    let classes = r["classes"].as_array().expect("classes");
    let count = |i: usize| classes[i]["requests"].as_u64().unwrap();
    assert_eq!(
        (classes[0]["name"].as_str(), classes[1]["name"].as_str()),
        (Some("a"), Some("b"))
    );
    assert_eq!(count(0) + count(1), 3000);
    // Weights 3:1, drawn: about 2250 and 750.
    assert!((2000..2500).contains(&count(0)), "{stdout}");
    assert!(
        classes.iter().all(|c| c["consistency_errors"] == 0),
        "{stdout}"
    );
    assert_eq!(r["errors_total"], 0, "{stdout}");
    let limits = classes[0]["limits"].as_array().expect("limits");
    assert!(limits.iter().all(|l| l["pass"] == true), "{stdout}");
    assert!(stdout.contains("Limits      a: mean"), "{stdout}");
    assert_eq!(srv.served(), 3000, "responder's count vs the report");
}

fn failed_checks_are_consistency_errors_naming_paths(engine: &str) {
    let srv = Serve::start();
    let dir = TempDir::new("workload-bad");
    // The responder sends 64 bytes; the workload expects 63 for class a.
    let w = dir.file("w.toml", &two_classes(63));
    let (code, stdout, stderr, r) = run_quiet(
        &dir,
        &["-w", &w, &srv.url()],
        &[
            "-n",
            "400",
            "-c",
            "2",
            "--engine",
            engine,
            "--fail-if",
            "consistency>0",
        ],
    )
    .parts();
    assert_eq!(code, 3, "{stdout}\n{stderr}");
    assert!(stderr.contains("consistency>0"), "{stderr}");
    let a = &r["classes"][0];
    assert_eq!(a["consistency_errors"], a["requests"]);
    assert_eq!(r["errors"]["consistency"], a["requests"]);
    assert_eq!(r["classes"][1]["consistency_errors"], 0);
    let offending = a["offending"].as_array().unwrap();
    assert_eq!(offending.len(), 5);
    assert!(offending[0]["path"].as_str().unwrap().starts_with("/a/"));
    assert_eq!(offending[0]["reason"], "body of 64 bytes, expected 63");
    assert!(stdout.contains("Consistency a: "), "{stdout}");
}

both_engines!(
    two_class_counts_sum_and_reconcile_with_serve,
    failed_checks_are_consistency_errors_naming_paths
);

#[test]
fn per_class_json_merges_exactly() {
    let srv = Serve::start();
    let dir = TempDir::new("workload-merge");
    let w = dir.file("w.toml", &two_classes(64));
    let (a, b, m) = (
        dir.join_str("a.json"),
        dir.join_str("b.json"),
        dir.join_str("m.json"),
    );
    for (json, n) in [(&a, "1000"), (&b, "600")] {
        let (code, stdout, stderr) = run(&[
            "-w",
            &w,
            &srv.url(),
            "-n",
            n,
            "-c",
            "2",
            "-t",
            "1",
            "--json",
            json,
            "-q",
        ]);
        assert_eq!(code, 0, "{stdout}\n{stderr}");
    }
    let (code, stdout, stderr) = run(&[
        "merge",
        &a,
        &b,
        "--json",
        &m,
        "--allow-different-runs",
        "--allow-partial-overlap",
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let (ra, rb, rm) = (read_json(&a), read_json(&b), read_json(&m));
    assert_eq!(rm["requests"], 1600);
    for i in 0..2 {
        let sum = ra["classes"][i]["requests"].as_u64().unwrap()
            + rb["classes"][i]["requests"].as_u64().unwrap();
        assert_eq!(rm["classes"][i]["requests"].as_u64().unwrap(), sum);
        // The merged histogram holds every response of the class.
        let h =
            xload_stats::decode_histogram(rm["classes"][i]["histogram"].as_str().unwrap()).unwrap();
        assert_eq!(h.len(), sum);
        let max = |r: &serde_json::Value| r["classes"][i]["latency_us"]["max"].as_u64().unwrap();
        assert_eq!(max(&rm), max(&ra).max(max(&rb)));
    }
}

#[test]
fn a_class_over_its_latency_limit_fails_limits_failed() {
    let srv = Serve::start();
    let dir = TempDir::new("workload-limits");
    // No loopback answer takes under 1 µs on average.
    let w = dir.file(
        "w.toml",
        "[classes.a]\npath = \"/\"\nlimits = { mean = \"1us\", p50 = \"10s\" }\n",
    );
    let (code, stdout, stderr, r) = run_quiet(
        &dir,
        &["-w", &w, &srv.url()],
        &["-n", "200", "-c", "2", "--fail-if", "limits_failed>0"],
    )
    .parts();
    assert_eq!(code, 3, "{stdout}\n{stderr}");
    assert!(stderr.contains("limits_failed>0 (measured 1)"), "{stderr}");
    assert!(
        stdout.contains("Limits      a: mean ") && stdout.contains("FAIL, p50 "),
        "{stdout}"
    );
    assert_eq!(r["classes"][0]["limits"][0]["pass"], false);
    assert_eq!(r["classes"][0]["limits"][1]["pass"], true);
}

#[test]
fn workload_errors_name_the_line_and_key_and_exit_2() {
    let dir = TempDir::new("workload-errors");
    let bad = dir.file("w.toml", "[classes.a]\npath = \"/\"\nweight = 0\n");
    let (code, _, stderr) = run(&["run", &bad, "http://127.0.0.1:1/"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("w.toml:3: classes.a.weight: expected a positive number"),
        "{stderr}"
    );
    let good = dir.file("g.toml", "[classes.a]\npath = \"/\"\n");
    let (code, _, stderr) = run(&["run", &good]);
    assert_eq!(code, 2);
    assert!(stderr.contains("no `url` in the workload"), "{stderr}");
    let (code, _, stderr) = run(&["-w", &good, "http://127.0.0.1:1/", "--pipeline", "4"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--pipeline does not apply with a workload"),
        "{stderr}"
    );
}

/// A session of four requests (home, then item three times) with 50 ms of
/// think time: 8 sessions over 1 s send about 8 × 1 s / 50 ms requests, a
/// quarter of them `home`.
fn sessions_walk_their_sequence_with_think_time(engine: &str) {
    let srv = Serve::start();
    let dir = TempDir::new("workload-sessions");
    let w = dir.file(
        "w.toml",
        "[classes.home]\npath = \"/home\"\n[classes.item]\npath = \"/item/{n}\"\nn = { range = [1, 10] }\n\
         [session]\nsequence = [\"home\", \"item\", \"item\", \"item\"]\nthink = \"50ms\"\n",
    );
    let (code, stdout, stderr, r) = run_quiet(
        &dir,
        &["run", &w, &srv.url()],
        &["--sessions", "8", "-d", "1s", "--engine", engine],
    )
    .parts();
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let n = r["requests"].as_u64().unwrap();
    // At most 8 × 21 (a request at 0 ms, then one every 50 ms and more);
    // a loaded machine may lose a few turns.
    assert!((120..=168).contains(&n), "{n} requests\n{stdout}");
    let home = r["classes"][0]["requests"].as_u64().unwrap();
    let item = r["classes"][1]["requests"].as_u64().unwrap();
    assert_eq!(home + item, n);
    // Each session is at most one sequence short of whole.
    assert!(
        home * 3 <= item + 3 * 8 && item <= home * 3 + 3 * 8,
        "home {home} item {item}"
    );
    assert_eq!(r["connections"], 8);
}

/// A Markov chain that ends (`item` leads nowhere): each session is home then
/// item, and the next session starts on a new connection.
fn markov_sessions_that_end_start_over_on_a_new_connection(engine: &str) {
    let srv = Serve::start();
    let dir = TempDir::new("workload-markov");
    let w = dir.file(
        "w.toml",
        "[classes.home]\npath = \"/home\"\n[classes.item]\npath = \"/item\"\n\
         [session]\nstart = \"home\"\nthink = \"20ms\"\n[session.markov.home]\nitem = 1\n",
    );
    let (code, stdout, stderr, r) = run_quiet(
        &dir,
        &["run", &w, &srv.url()],
        &["--sessions", "4", "-d", "600ms", "--engine", engine],
    )
    .parts();
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let home = r["classes"][0]["requests"].as_u64().unwrap();
    let item = r["classes"][1]["requests"].as_u64().unwrap();
    assert!(
        home >= 8 && home.abs_diff(item) <= 4,
        "home {home} item {item}\n{stdout}"
    );
    // One connection per session.
    assert!(r["connects"].as_u64().unwrap() >= home, "{}", r["connects"]);
}

/// A keep-alive server answering every request with an empty 200, that
/// notes when each request arrived; on its own threads.
fn arrival_server() -> (
    u16,
    std::sync::Arc<std::sync::Mutex<Vec<std::time::Instant>>>,
) {
    use std::sync::{Arc, Mutex};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let noted = arrivals.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            let noted = noted.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        noted.lock().unwrap().push(std::time::Instant::now());
                        if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                            .is_err()
                        {
                            return;
                        }
                    }
                    match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    (port, arrivals)
}

/// Sessions start spread over one think time: with 40 sessions thinking
/// 400 ms, the requests that arrive in the first 50 ms are about 40/8, not
/// all 40 at once (which would keep the sessions in step).
fn first_requests_spread_over_one_think_time(engine: &str) {
    let (port, arrivals) = arrival_server();
    let dir = TempDir::new("workload-spread");
    let w = dir.file(
        "w.toml",
        "[classes.home]\npath = \"/home\"\n[session]\nsequence = [\"home\"]\nthink = \"400ms\"\n",
    );
    let url = format!("http://127.0.0.1:{port}/");
    let (code, stdout, stderr) = run(&[
        "run",
        &w,
        &url,
        "--sessions",
        "40",
        "-d",
        "1s",
        "-t",
        "2",
        "--engine",
        engine,
        "-q",
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let mut at = arrivals.lock().unwrap().clone();
    at.sort();
    let first = at[0];
    let early = at
        .iter()
        .filter(|t| t.duration_since(first) < Duration::from_millis(50))
        .count();
    // Evenly spread: 5 (one slot every 10 ms); in step: 40. Room for a stall.
    assert!(early <= 20, "{early} of the first requests within 50 ms");
    // Every session did start (each sends 2 or 3 requests in 1 s).
    assert!(at.len() >= 60, "{} requests", at.len());
}

both_engines!(
    sessions_walk_their_sequence_with_think_time,
    markov_sessions_that_end_start_over_on_a_new_connection,
    first_requests_spread_over_one_think_time
);

/// A keep-alive server of `files` (path → body) that flips one byte of one
/// response in every `period` it sends (the middle one of each period: the
/// 5,000th, 15,000th... for 10,000), on its own threads.
fn corrupting_server(files: Vec<(String, Vec<u8>)>, period: u64) -> u16 {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let files = Arc::new(files);
    let sent = Arc::new(AtomicU64::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            let (files, sent) = (files.clone(), sent.clone());
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_string();
                        buf.drain(..end + 4);
                        let path = head
                            .split(' ')
                            .nth(1)
                            .unwrap_or("/")
                            .trim_start_matches('/');
                        let Some((_, body)) = files.iter().find(|(p, _)| p == path) else {
                            let _ =
                                s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
                            continue;
                        };
                        let mut body = body.clone();
                        if (sent.fetch_add(1, Ordering::Relaxed) + 1) % period == period / 2 {
                            let mid = body.len() / 2;
                            body[mid] ^= 0x20;
                        }
                        let head =
                            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
                        if s.write_all(&[head.as_bytes(), &body].concat()).is_err() {
                            return;
                        }
                    }
                    match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    port
}

/// A file set of 20 files, its manifest and a one-class workload (plus
/// `extra` TOML) that checks every body's size and SHA-256 in `dir`, served
/// by [`corrupting_server`]: the workload's path and the server's URL.
fn corrupted_site(dir: &TempDir, extra: &str) -> (String, String) {
    let files: Vec<(String, Vec<u8>)> = (0..20u32)
        .map(|i| {
            (
                format!("f{i}.bin"),
                (0..(500 + 37 * i)).map(|b| (b * 7 + i) as u8).collect(),
            )
        })
        .collect();
    let mut manifest = String::new();
    for (path, body) in &files {
        let d = ring::digest::digest(&ring::digest::SHA256, body);
        let hex: String = d.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        manifest.push_str(&format!("{hex} {} {path}\n", body.len()));
    }
    dir.put("MANIFEST", &manifest);
    let w = dir.file(
        "w.toml",
        &format!(
            "manifest = \"MANIFEST\"\n[classes.file]\npath = \"/{{n}}\"\nn = {{ manifest = true, zipf = 1.0 }}\n\
             check = {{ status = 200, body_size = \"manifest\", sha256 = \"manifest\" }}\n{extra}"
        ),
    );
    let port = corrupting_server(files, 10_000);
    (w, format!("http://127.0.0.1:{port}/"))
}

/// Issue 21: a server that corrupts one byte of one response in 10,000 is
/// caught by the manifest's SHA-256: one consistency error, its path named,
/// the gate fails.
#[test]
fn one_corrupted_byte_in_ten_thousand_responses_is_caught_and_named() {
    let dir = TempDir::new("workload-corrupt");
    let (w, url) = corrupted_site(&dir, "");
    let (code, stdout, stderr, r) = run_quiet(
        &dir,
        &["run", &w, &url],
        &["-n", "10000", "-c", "4", "--fail-if", "consistency>0"],
    )
    .parts();
    assert_eq!(code, 3, "{stdout}\n{stderr}");
    assert_eq!(r["requests"], 10000);
    let c = &r["classes"][0];
    assert_eq!(c["consistency_errors"], 1, "{stdout}");
    let offending = c["offending"].as_array().unwrap();
    assert_eq!(offending.len(), 1);
    assert!(
        offending[0]["path"].as_str().unwrap().starts_with("/f"),
        "{offending:?}"
    );
    assert_eq!(offending[0]["reason"], "body SHA-256 differs");
    assert!(
        stdout.contains("Consistency file: 1 failed checks, first: /f"),
        "{stdout}"
    );
}

/// Issue 21: the same server under the compliant-capacity search. Every
/// step of 12,000 responses holds a corrupted one, so no session count is
/// compliant: the first step fails naming the path, the search stops there,
/// and the sweep exits 3.
#[test]
fn a_corrupting_server_fails_the_sweeps_compliance_verdict() {
    let dir = TempDir::new("workload-corrupt-sweep");
    let (w, url) = corrupted_site(&dir, "[session]\nsequence = [\"file\"]\nthink = \"0ms\"\n");
    let JsonRun {
        code,
        stdout,
        stderr,
        json: r,
    } = run_report(
        &dir,
        &[
            "sweep",
            "-w",
            &w,
            &url,
            "--sessions",
            "4,8",
            "--find-max",
            "-n",
            "12000",
            "--warmup",
            "200ms",
            "-t",
            "1",
        ],
    );
    assert_eq!(code, 3, "{stdout}\n{stderr}");
    let max = &r["max_sessions"];
    assert_eq!(max["sessions"], serde_json::Value::Null, "{max}");
    assert_eq!(max["confirmed"], false, "{max}");
    let trials = max["trials"].as_array().unwrap();
    assert_eq!(
        trials.len(),
        1,
        "the search stops at the first failing step: {max}"
    );
    assert_eq!(trials[0]["pass"], false);
    assert!(
        trials[0]["consistency_errors"].as_u64().unwrap() >= 1,
        "{max}"
    );
    let why = trials[0]["why"].as_str().unwrap();
    assert!(why.contains("consistency errors (first: file /f"), "{why}");
    assert!(
        stdout.contains("max compliant sessions: none — even 4 sessions fail"),
        "{stdout}"
    );
}

/// A generated set of 1,000 files in `dir/site` and the shipped static
/// workload copied to `dir/workloads` (its manifest path is relative to it):
/// the site's and the workload's paths.
fn shipped_static_site(dir: &TempDir) -> (String, String) {
    let site = dir.join_str("site");
    let out = run(&["files", "generate", &site, "--count", "1000"]);
    assert_eq!(out.0, 0, "{}\n{}", out.1, out.2);
    dir.mkdir("workloads");
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../workloads/static.toml"
    ))
    .unwrap();
    (site, dir.file("workloads/static.toml", &shipped))
}

/// Runs the shipped static workload (`-n 4000`, 8 connections) at `url` and
/// checks its report: no error, no failed check, the missing paths 404s.
fn run_shipped_static(dir: &TempDir, w: &str, url: &str) -> JsonRun {
    let out = run_quiet(
        dir,
        &["run", w, url],
        &["-n", "4000", "-c", "8", "--fail-if", "consistency>0"],
    );
    assert_eq!(out.code, 0, "{}", out.show());
    let r = &out.json;
    assert_eq!(r["requests"], 4000);
    assert_eq!(r["errors_total"], 0, "{}", out.show());
    let (file, missing) = (&r["classes"][0], &r["classes"][1]);
    assert_eq!(file["consistency_errors"], 0);
    assert_eq!(missing["consistency_errors"], 0);
    let n = |c: &serde_json::Value| c["requests"].as_u64().unwrap();
    assert_eq!(n(file) + n(missing), 4000);
    assert!(n(missing) > 50 && n(missing) < 400, "{}", out.show());
    assert_eq!(r["status"]["404"].as_u64().unwrap(), n(missing));
    out
}

/// Issue 21: the shipped static workload against `xload serve --files` on a
/// generated set of 1,000 files of mixed sizes: every response checked
/// against the manifest (size and SHA-256), none fails; the missing paths
/// are 404s as the workload expects.
#[test]
fn shipped_static_workload_against_serve_files_has_no_consistency_error() {
    let dir = TempDir::new("workload-static");
    let (site, w) = shipped_static_site(&dir);
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let _serve = spawn_xload([
        "serve", "--listen", &listen, "--files", &site, "--for", "20s",
    ]);
    wait_listening(port);
    run_shipped_static(&dir, &w, &format!("http://{listen}/"));
}

/// Issue 21: the same against nginx serving the same directory: no
/// consistency error, and nginx's stub_status counts exactly the requests
/// xload reports (skipped where nginx is not installed).
#[test]
fn shipped_static_workload_against_nginx_reconciles_with_stub_status() {
    let dir = TempDir::new("workload-static-nginx");
    let (site, w) = shipped_static_site(&dir);
    let Some(nginx) = Nginx::start(NginxOptions {
        root: Some(site.into()),
        ..NginxOptions::default()
    }) else {
        return;
    };
    let out = run_shipped_static(&dir, &w, &nginx.url("/"));
    assert_eq!(
        nginx.requests(),
        4000,
        "nginx stub_status requests vs xload's 4000\n{}",
        out.show()
    );
}
