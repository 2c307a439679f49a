//! Many connections (issue 19): one worker holds 20k connections (or as many
//! as the descriptor limit allows, well past the ~5,500 its io_uring ring
//! could once be set up for), spread over several loopback source addresses
//! (`--source`) and opened at a paced rate (`--connect-rate`), on both
//! engines; the counts reconcile with `xload serve`'s /stats. A ring that
//! cannot be set up falls back to epoll with the reason (`--engine auto`)
//! or names the limit (`--engine uring`). Bounded: a few seconds per run.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use support::run::{
    free_port, read_json, run_command_with_timeout, run_xload_with_timeout, spawn_xload, xload_bin,
    TempDir,
};

/// The connections one worker is asked to hold.
const WANTED: u64 = 20_000;
/// Fewer than this (a low descriptor limit) would prove little beyond the
/// ~5,500 one worker's ring could once be set up for: the test is skipped.
const AT_LEAST: u64 = 12_000;

/// WANTED, or as many as the hard descriptor limit leaves room for (each
/// side, client and server, needs one per connection and a few more).
fn connections() -> Option<u64> {
    let n = WANTED.min(fd_hard_limit().saturating_sub(1000));
    (n >= AT_LEAST).then_some(n)
}

/// The soft descriptor limit this process may reach (the hard limit).
fn fd_hard_limit() -> u64 {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: rl is a valid out-parameter.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return 0;
    }
    rl.rlim_max
}

fn stats(port: u16) -> serde_json::Value {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    serde_json::from_str(text.split("\r\n\r\n").nth(1).expect("a body")).expect("stats JSON")
}

/// One such run at a time: two at once on two CPUs would slow the ramp.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn many_connections_reconcile(engine: &str) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(conns) = connections() else {
        eprintln!(
            "skipped: the hard descriptor limit is below {}",
            AT_LEAST + 1000
        );
        return;
    };
    eprintln!("{engine}: {conns} connections on one worker");
    let port = free_port();
    let spawned = Instant::now();
    let serve = spawn_xload([
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--cpus",
        "1",
        "--for",
        "30s",
    ]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "xload serve did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = stats(port);
    let dir = TempDir::new("scale");
    let json = dir.join("r.json");
    let (status, stdout, stderr, _) = run_xload_with_timeout(
        [
            &format!("http://127.0.0.1:{port}/"),
            "-c",
            &conns.to_string(),
            "--cpus",
            "0",
            "--engine",
            engine,
            "--source",
            "127.0.0.2-127.0.0.4,127.0.0.9",
            "--connect-rate",
            "20k/s",
            // The ramp takes 1 s (slow enough for a busy server to accept
            // from its 4096-deep queue), and each connection's first request
            // leaves once it is up: unanswered 2 s later, it would time out
            // within the window, from 1.5 s to 3.5 s (a timeout in the
            // warm-up is not counted). A busy machine gets 2 s to answer.
            "--warmup",
            "1500ms",
            "-d",
            "2s",
            "--timeout",
            "2s",
            "-q",
            "--json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(30),
    );
    assert!(status.success(), "{engine}: {status:?}\n{stdout}\n{stderr}");
    let r = read_json(&json);
    let after = stats(port);
    serve.interrupt();
    let _ = serve.wait_timeout(spawned.elapsed() + Duration::from_secs(10));
    let msg = format!("{engine}: {r}\n{stderr}\nserve: {before} -> {after}");
    assert_eq!(r["errors_total"], 0, "{msg}");
    // The server saw exactly those connections, xload's reachability check
    // and the last /stats read.
    let accepted = after["connections"].as_u64().unwrap() - before["connections"].as_u64().unwrap();
    assert_eq!(accepted, conns + 2, "{msg}");
    // It answered at least every request the window counted, and at least
    // one per connection (the warm-up's answers are not in the window).
    let served = after["requests"].as_u64().unwrap() - before["requests"].as_u64().unwrap();
    let counted = r["requests"].as_u64().unwrap();
    assert!(served >= counted && served >= conns, "{msg}");
    if engine == "uring" {
        assert_eq!(r["engine"], "io_uring", "{msg}");
    }
}

#[test]
fn one_uring_worker_holds_20k_connections_over_four_sources() {
    many_connections_reconcile("uring");
}

#[test]
fn one_epoll_worker_holds_20k_connections_over_four_sources() {
    many_connections_reconcile("epoll");
}

/// Runs xload (one worker) against `xload serve` with the worker's ring
/// made impossible (an SQ of 0 entries:
/// EINVAL after the probe's small ring succeeded).
fn run_with_a_ring_that_fails(
    engine: &str,
) -> (std::process::ExitStatus, String, Option<serde_json::Value>) {
    let port = free_port();
    let serve = spawn_xload([
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--cpus",
        "0",
        "--for",
        "20s",
    ]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "xload serve did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    let dir = TempDir::new("ringfail");
    let json = dir.join("r.json");
    let mut cmd = Command::new(xload_bin());
    cmd.args([
        &format!("http://127.0.0.1:{port}/"),
        "-c",
        "8",
        "-t",
        "1",
        "--engine",
        engine,
        "-d",
        "500ms",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ])
    .env("XLOAD_TEST_RING_SQ", "0");
    let out = run_command_with_timeout(cmd, Duration::from_secs(20));
    serve.interrupt();
    let _ = serve.wait_timeout(Duration::from_secs(10));
    assert!(!out.timed_out, "{}", out.stderr);
    let report = json.exists().then(|| read_json(&json));
    (out.status, out.stderr, report)
}

#[test]
fn a_ring_that_cannot_be_set_up_falls_back_to_epoll_with_the_reason() {
    let (status, stderr, report) = run_with_a_ring_that_fails("auto");
    assert!(status.success(), "{status:?}\n{stderr}");
    let r = report.expect("a JSON report");
    let why = r["engine_reason"].as_str().unwrap();
    assert_eq!(r["engine"], "epoll", "{r}");
    assert!(
        why.contains("worker 0 runs on epoll: io_uring_setup (SQ 0")
            && why.contains("Invalid argument")
            && why.contains("refused the ring's flags or sizes"),
        "{why}"
    );
    assert!(r["requests"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["errors_total"], 0, "{r}");
}

#[test]
fn a_ring_that_cannot_be_set_up_names_the_limit_with_engine_uring() {
    let (status, stderr, _) = run_with_a_ring_that_fails("uring");
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("io_uring_setup (SQ 0")
            && stderr.contains("refused the ring's flags or sizes"),
        "{stderr}"
    );
}

#[test]
fn a_source_that_is_not_local_is_a_usage_error() {
    let (status, _, stderr, _) = run_xload_with_timeout(
        ["http://127.0.0.1:9/", "--source", "192.0.2.1", "-d", "1s"],
        Duration::from_secs(10),
    );
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--source 192.0.2.1"), "{stderr}");
}
