//! Many connections (issue 19): one worker holds more connections than its
//! io_uring ring could once be set up for, spread over several loopback
//! source addresses (`--source`) and opened at a paced rate
//! (`--connect-rate`), on both engines; the counts reconcile with `xload
//! serve`'s /stats. Bounded: a few seconds per engine.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use support::run::{free_port, read_json, run_xload_with_timeout, spawn_xload, TempDir};

/// More than one worker's ring could be set up for before (about 5,500).
const CONNECTIONS: u64 = 12_000;

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
    // Each side (client, server) needs a descriptor per connection.
    if fd_hard_limit() < CONNECTIONS + 1000 {
        eprintln!("skipped: the hard descriptor limit is below {CONNECTIONS}");
        return;
    }
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
            &CONNECTIONS.to_string(),
            "--cpus",
            "0",
            "--engine",
            engine,
            "--source",
            "127.0.0.2-127.0.0.4,127.0.0.9",
            "--connect-rate",
            "40k/s",
            // The ramp takes 0.3 s, and each connection's first request
            // leaves once it is up: unanswered 1.5 s later, it would time out
            // within the window (a timeout in the warm-up is not counted).
            "--warmup",
            "1s",
            "-d",
            "1s",
            "--timeout",
            "1500ms",
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
    let conns = after["connections"].as_u64().unwrap() - before["connections"].as_u64().unwrap();
    assert_eq!(conns, CONNECTIONS + 2, "{msg}");
    // It answered at least every request the window counted, and at least
    // one per connection (the warm-up's answers are not in the window).
    let served = after["requests"].as_u64().unwrap() - before["requests"].as_u64().unwrap();
    let counted = r["requests"].as_u64().unwrap();
    assert!(served >= counted && served >= CONNECTIONS, "{msg}");
    if engine == "uring" {
        assert_eq!(r["engine"], "io_uring", "{msg}");
    }
}

#[test]
fn one_uring_worker_holds_12k_connections_over_four_sources() {
    many_connections_reconcile("uring");
}

#[test]
fn one_epoll_worker_holds_12k_connections_over_four_sources() {
    many_connections_reconcile("epoll");
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
