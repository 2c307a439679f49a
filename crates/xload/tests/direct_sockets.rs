//! Connections set up in the ring (issue 34): with io_uring on Linux 6.7+,
//! each connection's socket is created into its slot of the registered file
//! table, TCP_NODELAY set and the connect made in one linked submission, and
//! the slot closed through the ring (the report's Engine line ends with
//! ", direct sockets"). `XLOAD_TEST_NO_DIRECT_SOCKETS=1` forces the path of
//! older kernels (descriptors, `socket(2)` and `close(2)`).
//!
//! Both paths must count exactly what nginx counts, end every connection
//! with a FIN (the server sees a normal close, never a reset), and put
//! connect failures in their categories.

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::nginx::{Nginx, NginxOptions};
use support::run::{exit_code, run_command_with_timeout, xload_bin};
use support::{read_json, TempDir, TestServer};

const HARD_TIMEOUT: Duration = Duration::from_secs(30);

/// How a run sets up its connections.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Path {
    /// io_uring, sockets created in the ring (where the kernel can).
    Direct,
    /// io_uring with descriptors, as on a kernel without the opcodes.
    Fallback,
    /// The epoll engine.
    Epoll,
}

impl Path {
    /// Makes `cmd` take this path: the engine, and the fallback forced.
    fn select(self, cmd: &mut Command) {
        let engine = if self == Path::Epoll {
            "epoll"
        } else {
            "uring"
        };
        cmd.args(["--engine", engine]);
        if self == Path::Fallback {
            cmd.env("XLOAD_TEST_NO_DIRECT_SOCKETS", "1");
        }
    }
}

const PATHS: [Path; 3] = [Path::Direct, Path::Fallback, Path::Epoll];

/// Linux 6.7 or later: the ring can set socket options, so direct sockets
/// must be used.
fn kernel_has_direct_sockets() -> bool {
    kernel_at_least(6, 7)
}

fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release.trim().split(['.', '-']);
    let have: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let have_minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (have, have_minor) >= (major, minor)
}

struct Run {
    code: i32,
    stderr: String,
    json: Value,
}

impl Run {
    fn u64_at(&self, pointer: &str) -> u64 {
        self.json
            .pointer(pointer)
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("{pointer} is not a count\n{}", self.show()))
    }

    fn errors(&self, kind: &str) -> u64 {
        self.json["errors"][kind].as_u64().unwrap_or(0)
    }

    fn reason(&self) -> &str {
        self.json["engine_reason"].as_str().unwrap_or_default()
    }

    fn show(&self) -> String {
        format!(
            "exit {}\n--- json\n{}\n--- stderr\n{}",
            self.code, self.json, self.stderr
        )
    }

    /// The run took the path it was asked for.
    fn assert_path(&self, path: Path) {
        let reason = self.reason();
        match path {
            Path::Direct if kernel_has_direct_sockets() => {
                assert!(reason.contains("direct sockets"), "{}", self.show())
            }
            Path::Direct => {}
            Path::Fallback => {
                assert!(reason.contains("registered sockets"), "{}", self.show());
                assert!(!reason.contains("direct sockets"), "{}", self.show());
            }
            Path::Epoll => assert_eq!(self.json["engine"], "epoll", "{}", self.show()),
        }
    }
}

/// Runs `xload URL ARGS --json TMP` on `path`. None when io_uring is
/// unavailable here (said on stderr).
fn run(url: &str, args: &[&str], path: Path) -> Option<Run> {
    let dir = TempDir::new("direct-sockets");
    let json_path = dir.join("report.json");
    let mut cmd = Command::new(xload_bin());
    cmd.arg(url).args(args).arg("--json").arg(&json_path);
    path.select(&mut cmd);
    let out = run_command_with_timeout(cmd, HARD_TIMEOUT);
    assert!(!out.timed_out, "xload still running\n{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    if !json_path.exists() {
        if path != Path::Epoll && out.stderr.contains("io_uring") {
            eprintln!("skipping the io_uring run: {}", out.stderr.trim());
            return None;
        }
        panic!("no report (exit {})\n{}", exit_code(out.status), out.stderr);
    }
    Some(Run {
        code: exit_code(out.status),
        stderr: out.stderr,
        json: read_json(&json_path),
    })
}

/// `--no-keepalive -n N` against nginx, on each path: exactly N requests
/// on their own connections in nginx's stub_status, no error.
#[test]
fn each_path_reconciles_exactly_with_nginx() {
    const N: u64 = 600;
    const C: u64 = 6;
    for path in PATHS {
        let Some(nginx) = Nginx::start(NginxOptions::default()) else {
            return;
        };
        let Some(out) = run(
            &nginx.url("/"),
            &["--no-keepalive", "-n", &N.to_string(), "-c", &C.to_string()],
            path,
        ) else {
            continue;
        };
        assert_eq!(out.code, 0, "{path:?}\n{}", out.show());
        out.assert_path(path);
        assert_eq!(out.u64_at("/errors_total"), 0, "{path:?}\n{}", out.show());
        assert_eq!(out.u64_at("/requests"), N, "{path:?}\n{}", out.show());
        let status = nginx.status();
        assert_eq!(
            status.requests,
            N,
            "{path:?} nginx requests\n{}",
            out.show()
        );
        // N connections with a request, the reachability check, and at most
        // one per connection that connected after the quota ran out.
        assert!(
            status.accepts > N && status.accepts <= N + 1 + C,
            "{path:?}: nginx accepted {} connections for {N} requests\n{}",
            status.accepts,
            out.show()
        );
        let connects = out.u64_at("/connects");
        assert!(
            connects >= N && connects < status.accepts,
            "{path:?}: {connects} connects, nginx accepted {}\n{}",
            status.accepts,
            out.show()
        );
    }
}

/// How the connections to a [`FinServer`] ended, as the server saw them.
#[derive(Default)]
struct Ends {
    accepted: AtomicU64,
    /// The client's FIN: a read returned 0.
    fin: AtomicU64,
    /// A reset (or any other read error).
    reset: AtomicU64,
    /// Bytes the client sent after its request.
    extra: AtomicU64,
    /// Each accepted connection's source address.
    peers: std::sync::Mutex<Vec<String>>,
}

/// A server that answers one request per connection with `Connection:
/// close`, shuts its side and reads until the client's end: a FIN (a read
/// of 0) or a reset. It serves until the test process ends.
fn fin_server() -> (String, Arc<Ends>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/", listener.local_addr().expect("addr"));
    let ends = Arc::new(Ends::default());
    let e = ends.clone();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            e.accepted.fetch_add(1, Ordering::SeqCst);
            if let Ok(a) = stream.peer_addr() {
                e.peers.lock().unwrap().push(a.ip().to_string());
            }
            let e = e.clone();
            thread::spawn(move || serve_once(stream, &e));
        }
    });
    (url, ends)
}

fn serve_once(mut s: TcpStream, ends: &Ends) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = [0u8; 4096];
    let mut got = Vec::new();
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) => return ends.count(&ends.fin),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => return ends.count(&ends.reset),
        }
    }
    let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    if s.write_all(answer).is_err() {
        return ends.count(&ends.reset);
    }
    let _ = s.shutdown(Shutdown::Write);
    loop {
        match s.read(&mut buf) {
            Ok(0) => return ends.count(&ends.fin),
            Ok(n) => {
                ends.extra.fetch_add(n as u64, Ordering::SeqCst);
            }
            Err(_) => return ends.count(&ends.reset),
        }
    }
}

impl Ends {
    fn count(&self, which: &AtomicU64) {
        which.fetch_add(1, Ordering::SeqCst);
    }

    fn ended(&self) -> u64 {
        self.fin.load(Ordering::SeqCst) + self.reset.load(Ordering::SeqCst)
    }
}

/// On each path, every connection xload opens ends with its FIN, never a
/// reset: closing through the ring (a cancelled receive, then the slot)
/// is the same normal close the server sees from `close(2)`.
#[test]
fn every_connection_ends_with_a_fin() {
    const N: u64 = 300;
    for path in PATHS {
        let (url, ends) = fin_server();
        let Some(out) = run(
            &url,
            &["--no-keepalive", "-n", &N.to_string(), "-c", "4"],
            path,
        ) else {
            continue;
        };
        assert_eq!(out.code, 0, "{path:?}\n{}", out.show());
        out.assert_path(path);
        assert_eq!(out.u64_at("/requests"), N, "{path:?}\n{}", out.show());
        // xload has exited: every connection has ended by now, give the
        // server's threads a moment to see it.
        let deadline = Instant::now() + Duration::from_secs(10);
        while ends.ended() < ends.accepted.load(Ordering::SeqCst) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        let accepted = ends.accepted.load(Ordering::SeqCst);
        assert!(
            accepted > N,
            "{path:?}: {accepted} accepted\n{}",
            out.show()
        );
        assert_eq!(
            ends.reset.load(Ordering::SeqCst),
            0,
            "{path:?}: connections reset, not closed\n{}",
            out.show()
        );
        assert_eq!(
            ends.fin.load(Ordering::SeqCst),
            accepted,
            "{path:?}: every accepted connection ends with a FIN\n{}",
            out.show()
        );
        assert_eq!(ends.extra.load(Ordering::SeqCst), 0, "{path:?}");
    }
}

/// A listener whose accept queue is full drops SYNs: on each path the
/// connects time out after `--connect-timeout` and count as
/// `connect_timeout`, nothing else.
#[test]
fn connect_timeouts_are_counted_as_such_on_each_path() {
    for path in PATHS {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        // Backlog 0 leaves room for one queued connection: xload's
        // reachability check takes it, so the run's own SYNs are dropped.
        // SAFETY: listen(2) on a socket we own; no memory is passed.
        let rc = unsafe { libc::listen(listener.as_raw_fd(), 0) };
        assert_eq!(rc, 0, "listen: {}", std::io::Error::last_os_error());
        let url = format!("http://{}/", listener.local_addr().expect("addr"));
        let Some(out) = run(
            &url,
            &[
                "--no-keepalive",
                "-c",
                "2",
                "-d",
                "800ms",
                "--connect-timeout",
                "200ms",
            ],
            path,
        ) else {
            continue;
        };
        assert_eq!(out.code, 1, "{path:?}: no response: exit 1\n{}", out.show());
        out.assert_path(path);
        let timeouts = out.errors("connect_timeout");
        assert!(timeouts > 0, "{path:?}: no connect_timeout\n{}", out.show());
        assert_eq!(
            out.u64_at("/errors_total"),
            timeouts,
            "{path:?}: only connect timeouts\n{}",
            out.show()
        );
        // 200 ms each, two connections, 800 ms (plus back-off): at most
        // ~8; more would be timeouts fired early or twice per attempt.
        assert!(
            timeouts <= 12,
            "{path:?}: {timeouts} connect timeouts\n{}",
            out.show()
        );
        drop(listener);
    }
}

/// The server goes away mid-run: on each path the reconnects are refused
/// and counted as `connect_refused` (with back-off), and what was answered
/// before still reconciles with the server's count.
#[test]
fn refused_connects_are_counted_as_such_on_each_path() {
    for path in PATHS {
        let server = TestServer::start(support::Behavior::Ok { body_len: 10 });
        let url = server.url("/");
        let dir = TempDir::new("direct-refused");
        let json_path = dir.join("report.json");
        let mut cmd = Command::new(xload_bin());
        cmd.args([
            url.as_str(),
            "--no-keepalive",
            "-c",
            "4",
            "-d",
            "1500ms",
            "--json",
            json_path.to_str().expect("utf-8 path"),
        ]);
        path.select(&mut cmd);
        let child = support::run::XloadChild::spawn(cmd);
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.served() < 100 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
        }
        server.stop();
        let output = child.wait_timeout(HARD_TIMEOUT);
        if !json_path.exists() && path != Path::Epoll && output.stderr.contains("io_uring") {
            eprintln!("skipping the io_uring run: {}", output.stderr.trim());
            continue;
        }
        let out = Run {
            code: exit_code(output.status),
            stderr: output.stderr,
            json: read_json(&json_path),
        };
        assert_eq!(out.code, 0, "{path:?}\n{}", out.show());
        out.assert_path(path);
        let refused = out.errors("connect_refused");
        assert!(refused > 0, "{path:?}: no connect_refused\n{}", out.show());
        // Back-off from 1 ms doubling to 1 s per connection: a dozen
        // attempts each at most, not a hot loop.
        assert!(refused <= 4 * 12, "{path:?}: {refused}\n{}", out.show());
        let requests = out.u64_at("/requests");
        assert!(requests > 0, "{path:?}\n{}", out.show());
        server.assert_reconciles(requests, 4);
    }
}

/// `--no-keepalive` with answers of 200 KB: a connection's single-shot
/// receives (one per buffer of 16 KiB) are re-armed until its answer is
/// whole; every answer counts, with every byte, on each path.
#[test]
fn answers_larger_than_a_receive_buffer_complete_on_each_path() {
    const N: u64 = 60;
    const BODY: usize = 200_000;
    for path in PATHS {
        let server = TestServer::start(support::Behavior::Ok { body_len: BODY });
        let Some(out) = run(
            &server.url("/"),
            &["--no-keepalive", "-n", &N.to_string(), "-c", "3"],
            path,
        ) else {
            continue;
        };
        assert_eq!(out.code, 0, "{path:?}\n{}", out.show());
        out.assert_path(path);
        assert_eq!(out.u64_at("/errors_total"), 0, "{path:?}\n{}", out.show());
        assert_eq!(out.u64_at("/requests"), N, "{path:?}\n{}", out.show());
        assert!(
            out.u64_at("/bytes") >= N * BODY as u64,
            "{path:?}: every body whole\n{}",
            out.show()
        );
        server.assert_reconciles(N, 3);
    }
}

/// `--source` on each path: every connection of the run comes from one of
/// the source addresses, each address used, every request answered (on
/// Linux 6.11+ the io_uring engine binds in the ring, with direct sockets).
#[test]
fn source_addresses_are_bound_on_each_path() {
    const N: u64 = 120;
    for path in PATHS {
        let (url, ends) = fin_server();
        let Some(out) = run(
            &url,
            &[
                "--no-keepalive",
                "-n",
                &N.to_string(),
                "-c",
                "4",
                "--source",
                "127.0.0.2,127.0.0.3",
            ],
            path,
        ) else {
            continue;
        };
        assert_eq!(out.code, 0, "{path:?}\n{}", out.show());
        // Linux 6.11 or later binds in the ring: direct sockets stay.
        if path != Path::Direct || kernel_at_least(6, 11) {
            out.assert_path(path);
        }
        assert_eq!(out.u64_at("/errors_total"), 0, "{path:?}\n{}", out.show());
        assert_eq!(out.u64_at("/requests"), N, "{path:?}\n{}", out.show());
        let peers = ends.peers.lock().unwrap().clone();
        // The run's connections: all but the reachability check (from
        // whatever address the kernel picks).
        let from_sources = peers
            .iter()
            .filter(|p| *p == "127.0.0.2" || *p == "127.0.0.3")
            .count() as u64;
        assert!(
            from_sources >= N && from_sources + 1 >= peers.len() as u64,
            "{path:?}: peers {peers:?}\n{}",
            out.show()
        );
        for src in ["127.0.0.2", "127.0.0.3"] {
            let n = peers.iter().filter(|p| *p == src).count() as u64;
            assert!(n >= N / 4, "{path:?}: {n} from {src}: {peers:?}");
        }
    }
}
