//! Faults a server can commit, seen by the xload binary (issue 2, "Bad input
//! and faults"): each is counted under its error category in the `--json`
//! report, the broken connection is replaced, the run ends at its deadline
//! (plus at most the request timeout), and nothing panics. Every fault runs
//! with both engines (`--engine uring` and `--engine epoll`).
//!
//! Also here: Ctrl-C in the middle of a run (report of what was measured,
//! exit 0), a server that goes away mid-run (`connect_refused`), a listener
//! whose accept queue is full (`connect_timeout`).
//!
//! Every run is bounded: `-d` of about a second, `--timeout 300ms`, and a hard
//! kill from the support code if the binary overstays.

mod support;

use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::run::exit_code;
use support::{read_json, run_xload_with_timeout, spawn_xload, Behavior, TempDir, TestServer};
use xload_testkit::both_engines;

/// Measured window of the fault runs.
const RUN: Duration = Duration::from_millis(1000);
/// `--timeout` of the fault runs.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(300);
/// Connections of the fault runs.
const CONNECTIONS: u64 = 4;
/// Startup (exec, reachability check, engine probe, host sampling) and
/// teardown on a busy 2-core machine, on top of duration + request timeout.
const SLACK: Duration = Duration::from_millis(1500);
/// Hard kill for one run: far above the bound asserted, so a hang shows as
/// a failed assertion with the output, not as a stuck test.
const HARD_TIMEOUT: Duration = Duration::from_secs(30);

/// What one `xload ... --json PATH` run left behind.
struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    /// None when the binary wrote no report.
    json: Option<Value>,
}

impl Outcome {
    fn json(&self) -> &Value {
        self.json.as_ref().unwrap_or_else(|| {
            panic!(
                "no JSON report (exit {})\n--- stdout\n{}\n--- stderr\n{}",
                self.code, self.stdout, self.stderr
            )
        })
    }

    fn u64_at(&self, pointer: &str) -> u64 {
        self.json()
            .pointer(pointer)
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("{pointer} is not a count in {}", self.json()))
    }

    fn error_count(&self, category: &str) -> u64 {
        self.json()["errors"]
            .get(category)
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }

    /// Context for assertion messages.
    fn show(&self) -> String {
        format!(
            "exit {} after {:?}\n--- errors {} parse_errors {} requests {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code,
            self.elapsed,
            self.json.as_ref().map_or(Value::Null, |j| j["errors"].clone()),
            self.json.as_ref().map_or(Value::Null, |j| j["parse_errors"].clone()),
            self.json.as_ref().map_or(Value::Null, |j| j["requests"].clone()),
            self.stdout,
            self.stderr
        )
    }

    fn assert_no_panic(&self) {
        assert!(
            !self.stderr.contains("panicked") && !self.stdout.contains("panicked"),
            "xload panicked\n{}",
            self.show()
        );
    }
}

/// Runs `xload URL ARGS --engine ENGINE --json TMP`. Returns None (after
/// saying why) when `--engine uring` is refused because this kernel or
/// sandbox has no usable io_uring: that is a reason to skip, not a failure.
fn run_with_engine(url: &str, args: &[&str], engine: &str) -> Option<Outcome> {
    let dir = TempDir::new("faults");
    let json_path = dir.join("report.json");
    let json_arg = json_path.to_str().expect("utf-8 temp path").to_string();
    let mut full: Vec<&str> = vec![url];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--engine", engine, "--json", &json_arg]);
    let (status, stdout, stderr, elapsed) = run_xload_with_timeout(&full, HARD_TIMEOUT);
    let json = json_path.exists().then(|| read_json(&json_path));
    let outcome = Outcome {
        code: exit_code(status),
        stdout,
        stderr,
        elapsed,
        json,
    };
    if engine == "uring"
        && outcome.json.is_none()
        && outcome.code == 1
        && outcome.stderr.contains("io_uring")
    {
        eprintln!(
            "skipping the io_uring run: the engine is unavailable here: {}",
            outcome.stderr.trim()
        );
        return None;
    }
    Some(outcome)
}

fn ms(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// Asserts the run ended on time: wall clock within duration + request
/// timeout + slack, and the measured window not longer than asked.
fn assert_on_time(out: &Outcome, run: Duration, request_timeout: Duration) {
    let bound = run + request_timeout + SLACK;
    assert!(
        out.elapsed <= bound,
        "run of {run:?} (request timeout {request_timeout:?}) took {:?}, more than {bound:?}\n{}",
        out.elapsed,
        out.show()
    );
    let duration_s = out.json()["duration_s"]
        .as_f64()
        .expect("duration_s is a number");
    assert!(
        duration_s <= run.as_secs_f64() + 0.05 && duration_s >= run.as_secs_f64() * 0.9,
        "duration_s {duration_s} for a {run:?} run\n{}",
        out.show()
    );
}

/// Polls `f` until it holds or 2 s pass (server counters lag the client by
/// a scheduling delay).
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One fault case: what the server does and what the report must say.
struct Fault {
    behavior: Behavior,
    /// The only error category the run may count (and must count).
    category: &'static str,
    /// For `parse`: the cause in `parse_errors`.
    parse_cause: Option<&'static str>,
    /// Whether some responses complete despite the fault.
    responses: bool,
}

/// Runs `fault` against a fresh test server with `engine` and checks the
/// category, the replacement of connections, the deadline and the absence of
/// panics. Returns the outcome and the server for case-specific checks.
fn check_fault(fault: &Fault, engine: &str) -> Option<(Outcome, TestServer)> {
    let server = TestServer::start(fault.behavior.clone());
    let c = CONNECTIONS.to_string();
    let out = run_with_engine(
        &server.url("/"),
        &["-c", &c, "-d", &ms(RUN), "--timeout", &ms(REQUEST_TIMEOUT)],
        engine,
    )?;
    out.assert_no_panic();
    let expected_code = if fault.responses { 0 } else { 1 };
    assert_eq!(
        out.code,
        expected_code,
        "{:?}: exit code (1 = no response at all)\n{}",
        fault.behavior,
        out.show()
    );
    if !fault.responses {
        assert!(
            out.stderr.contains("no response") && out.stderr.contains(fault.category),
            "{:?}: stderr should say there was no response and why\n{}",
            fault.behavior,
            out.show()
        );
    }
    assert_on_time(&out, RUN, REQUEST_TIMEOUT);

    // The category, and nothing but it.
    let counted = out.error_count(fault.category);
    assert!(
        counted > 0,
        "{:?}: nothing counted under {:?}\n{}",
        fault.behavior,
        fault.category,
        out.show()
    );
    assert_eq!(
        out.u64_at("/errors_total"),
        counted,
        "{:?}: errors counted under other categories than {:?}\n{}",
        fault.behavior,
        fault.category,
        out.show()
    );
    let parse_errors = out.json()["parse_errors"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    match fault.parse_cause {
        Some(cause) => {
            let by_cause = parse_errors.get(cause).and_then(Value::as_u64).unwrap_or(0);
            assert_eq!(
                by_cause,
                counted,
                "{:?}: every parse error should have cause {cause:?}\n{}",
                fault.behavior,
                out.show()
            );
        }
        None => assert!(
            parse_errors.values().all(|n| n.as_u64() == Some(0)),
            "{:?}: unexpected parse causes\n{}",
            fault.behavior,
            out.show()
        ),
    }
    if !fault.responses {
        assert_eq!(out.u64_at("/requests"), 0, "{}", out.show());
    }

    // Broken connections were replaced: more connections than -c, plus one
    // for xload's reachability check before the run.
    assert!(
        server.accepted() > CONNECTIONS + 1,
        "{:?}: server accepted {} connections, -c {CONNECTIONS}: broken connections not replaced\n{}",
        fault.behavior,
        server.accepted(),
        out.show()
    );
    eprintln!(
        "{:?} [{engine}]: errors {} parse_errors {} requests {} | server accepted {} requests {} served {} | {:?}",
        fault.behavior,
        out.json()["errors"],
        out.json()["parse_errors"],
        out.json()["requests"],
        server.accepted(),
        server.requests(),
        server.served(),
        out.elapsed
    );
    Some((out, server))
}

/// Errors of a one-error-per-request fault reconcile with the server's count
/// of `server_count` (answers or requests): each is one error, except those
/// still in flight when the run ended (at most one per connection).
fn assert_one_error_per_exchange(out: &Outcome, errors: u64, server_count: u64, what: &str) {
    assert!(
        errors <= server_count && server_count - errors <= CONNECTIONS,
        "{errors} errors but the server has {server_count} {what} (at most {CONNECTIONS} in flight)\n{}",
        out.show()
    );
}

fn garbage_is_a_parse_error(engine: &str) {
    let fault = Fault {
        behavior: Behavior::Garbage,
        category: "parse",
        parse_cause: Some("bad_version"),
        responses: false,
    };
    let Some((out, server)) = check_fault(&fault, engine) else {
        return;
    };
    assert_one_error_per_exchange(&out, out.error_count("parse"), server.served(), "answers");
}

fn truncated_body_is_eof_mid_response(engine: &str) {
    let fault = Fault {
        behavior: Behavior::TruncatedBody,
        category: "eof_mid_response",
        parse_cause: None,
        responses: false,
    };
    let Some((out, server)) = check_fault(&fault, engine) else {
        return;
    };
    assert_one_error_per_exchange(
        &out,
        out.error_count("eof_mid_response"),
        server.served(),
        "answers",
    );
}

fn oversize_header_is_header_too_large(engine: &str) {
    let fault = Fault {
        behavior: Behavior::OversizeHeader,
        category: "parse",
        parse_cause: Some("header_too_large"),
        responses: false,
    };
    let Some((out, server)) = check_fault(&fault, engine) else {
        return;
    };
    // The client gives up at its header limit, before the server has written
    // the whole 200 KiB answer, so the server's answer count can lag: compare
    // with the requests it read instead.
    let parse = out.error_count("parse");
    let requests = server.requests();
    assert!(
        parse <= requests && requests - parse <= CONNECTIONS,
        "{parse} parse errors, server read {requests} requests\n{}",
        out.show()
    );
}

fn wrong_content_length_is_request_timeout(engine: &str) {
    let fault = Fault {
        behavior: Behavior::WrongContentLength,
        category: "request_timeout",
        parse_cause: None,
        responses: false,
    };
    let Some((out, server)) = check_fault(&fault, engine) else {
        return;
    };
    assert_timeouts_plausible(&out, &server);
}

fn never_answering_is_request_timeout(engine: &str) {
    let fault = Fault {
        behavior: Behavior::NeverAnswer,
        category: "request_timeout",
        parse_cause: None,
        responses: false,
    };
    let Some((out, server)) = check_fault(&fault, engine) else {
        return;
    };
    assert_timeouts_plausible(&out, &server);
}

/// Timeouts fire neither early nor twice: each connection can time out at
/// most once per request timeout of the window, and every request the server
/// read either timed out or was still waiting at the end.
fn assert_timeouts_plausible(out: &Outcome, server: &TestServer) {
    let timeouts = out.error_count("request_timeout");
    let per_connection_max = (RUN.as_millis() / REQUEST_TIMEOUT.as_millis()) as u64;
    assert!(
        timeouts <= CONNECTIONS * per_connection_max,
        "{timeouts} request timeouts in {RUN:?} with {CONNECTIONS} connections and a \
         {REQUEST_TIMEOUT:?} timeout: at most {} possible\n{}",
        CONNECTIONS * per_connection_max,
        out.show()
    );
    // Each connection's first request times out well inside the window; later
    // ones may fall past its end on a busy machine (sweep and reconnect lag).
    assert!(
        timeouts >= CONNECTIONS,
        "only {timeouts} request timeouts in {RUN:?} with {CONNECTIONS} connections and a \
         {REQUEST_TIMEOUT:?} timeout\n{}",
        out.show()
    );
    let ok = eventually(|| server.requests() >= timeouts);
    let requests = server.requests();
    assert!(
        ok && requests - timeouts <= CONNECTIONS,
        "{timeouts} timeouts, server read {requests} requests\n{}",
        out.show()
    );
}

fn bad_chunk_size_is_a_parse_error(engine: &str) {
    let fault = Fault {
        behavior: Behavior::BadChunkSize,
        category: "parse",
        parse_cause: Some("bad_chunk_size"),
        responses: false,
    };
    let Some((out, server)) = check_fault(&fault, engine) else {
        return;
    };
    assert_one_error_per_exchange(&out, out.error_count("parse"), server.served(), "answers");
}

fn close_without_connection_close_is_closed(engine: &str) {
    // conn.rs: EOF with a request outstanding and no byte of its response
    // is `closed` (Exchange::eof); the first response on each connection
    // completes normally.
    let fault = Fault {
        behavior: Behavior::CloseWithoutConnectionClose,
        category: "closed",
        parse_cause: None,
        responses: true,
    };
    let Some((out, server)) = check_fault(&fault, engine) else {
        return;
    };
    let requests = out.u64_at("/requests");
    let closed = out.error_count("closed");
    assert!(
        closed <= requests && requests - closed <= CONNECTIONS,
        "each connection completes one response then is closed: {requests} responses, {closed} closed\n{}",
        out.show()
    );
    server.assert_reconciles(requests, CONNECTIONS);
    assert_eq!(out.u64_at("/status/200"), requests, "{}", out.show());
}

fn reset_is_reset(engine: &str) {
    let fault = Fault {
        behavior: Behavior::Reset,
        category: "reset",
        parse_cause: None,
        responses: false,
    };
    let Some((out, server)) = check_fault(&fault, engine) else {
        return;
    };
    let resets = out.error_count("reset");
    let ok = eventually(|| server.requests() >= resets);
    assert!(
        ok,
        "{resets} resets but the server read {} requests",
        server.requests()
    );
    assert_one_error_per_exchange(&out, resets, server.requests(), "requests");
}

/// The server stops listening a third of the way in: the connections it
/// shut are replaced by connects that are refused, counted under
/// `connect_refused` (with backoff, so not thousands), and the responses
/// before it still count.
fn server_going_away_is_connect_refused(engine: &str) {
    let server = TestServer::start(Behavior::Ok { body_len: 10 });
    let url = server.url("/");
    let dir = TempDir::new("refused");
    let json_path = dir.join("report.json");
    let run = Duration::from_millis(1500);
    let child = spawn_xload([
        url.as_str(),
        "-c",
        "4",
        "-d",
        &ms(run),
        "--timeout",
        &ms(REQUEST_TIMEOUT),
        "--engine",
        engine,
        "--json",
        json_path.to_str().expect("utf-8 temp path"),
    ]);
    // Wait until the load is on, then take the server away.
    let started = eventually(|| server.served() > 100);
    server.stop();
    let output = child.wait_timeout(HARD_TIMEOUT);
    let out = Outcome {
        code: exit_code(output.status),
        stdout: output.stdout,
        stderr: output.stderr,
        elapsed: output.elapsed,
        json: json_path.exists().then(|| read_json(&json_path)),
    };
    if engine == "uring" && out.json.is_none() && out.stderr.contains("io_uring") {
        eprintln!("skipping the io_uring run: {}", out.stderr.trim());
        return;
    }
    assert!(started, "xload never got going\n{}", out.show());
    out.assert_no_panic();
    assert_eq!(
        out.code,
        0,
        "responses were measured: exit 0\n{}",
        out.show()
    );
    assert_on_time(&out, run, REQUEST_TIMEOUT);
    let refused = out.error_count("connect_refused");
    assert!(refused > 0, "no connect_refused counted\n{}", out.show());
    // Backoff doubles from 1 ms to 1 s per connection: in 1.5 s that is at
    // most ~11 attempts each, not a hot loop.
    assert!(
        refused <= 4 * 12,
        "{refused} refused connects in {run:?} with 4 connections: reconnects are not backed off\n{}",
        out.show()
    );
    let requests = out.u64_at("/requests");
    assert!(requests > 0, "{}", out.show());
    server.assert_reconciles(requests, 4);
}

/// A listener whose accept queue is full drops SYNs: the connects time out
/// after `--connect-timeout` and count as `connect_timeout`.
fn full_accept_queue_is_connect_timeout(engine: &str) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    // Backlog 0 leaves room for one queued connection: xload's reachability
    // check takes it, so the run's own SYNs are dropped.
    // SAFETY: listen(2) on a socket we own; no memory is passed.
    let rc = unsafe { libc::listen(listener.as_raw_fd(), 0) };
    assert_eq!(rc, 0, "listen: {}", std::io::Error::last_os_error());
    let url = format!("http://{}/", listener.local_addr().expect("addr"));
    let Some(out) = run_with_engine(
        &url,
        &[
            "-c",
            "2",
            "-d",
            "1s",
            "--connect-timeout",
            "200ms",
            "--timeout",
            &ms(REQUEST_TIMEOUT),
        ],
        engine,
    ) else {
        return;
    };
    out.assert_no_panic();
    assert_eq!(out.code, 1, "no response at all: exit 1\n{}", out.show());
    assert_on_time(&out, Duration::from_secs(1), Duration::from_millis(300));
    let timeouts = out.error_count("connect_timeout");
    assert!(timeouts > 0, "no connect_timeout counted\n{}", out.show());
    assert_eq!(
        out.u64_at("/errors_total"),
        timeouts,
        "only connect timeouts expected\n{}",
        out.show()
    );
    // 200 ms each, two connections, one second (plus backoff): at most ~10.
    assert!(
        timeouts <= 12,
        "{timeouts} connect timeouts: fired early or more than once per attempt\n{}",
        out.show()
    );
    drop(listener);
}

/// A listener whose accept queue is already full: xload's first connect
/// waits. Ctrl-C ends that wait at once, and a short run is not held for the
/// whole connect timeout. Before: 9.5 s to exit after Ctrl-C
/// (`--connect-timeout 10s`), and `-d 1s --connect-timeout 5s` took 5 s.
#[test]
fn a_first_connect_that_waits_yields_to_ctrl_c_and_to_the_run_length() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    // SAFETY: listen(2) on a socket we own; no memory is passed.
    let rc = unsafe { libc::listen(listener.as_raw_fd(), 0) };
    assert_eq!(rc, 0, "listen: {}", std::io::Error::last_os_error());
    let addr = listener.local_addr().expect("addr");
    // The one queued connection backlog 0 leaves room for.
    let _queued = std::net::TcpStream::connect(addr).expect("fill the accept queue");
    let url = format!("http://{addr}/");

    let child = spawn_xload([
        url.as_str(),
        "-c",
        "1",
        "-d",
        "20s",
        "--connect-timeout",
        "10s",
    ]);
    std::thread::sleep(Duration::from_millis(500));
    let signalled = Instant::now();
    child.interrupt();
    let out = child.wait_timeout(Duration::from_secs(8));
    assert!(!out.timed_out, "still connecting 8 s after Ctrl-C");
    assert!(
        signalled.elapsed() < Duration::from_secs(2),
        "{:?} from Ctrl-C to exit\n{}",
        signalled.elapsed(),
        out.stderr
    );
    assert_eq!(
        exit_code(out.status),
        130,
        "interrupted: exit 130\n{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("interrupted while connecting"),
        "{}",
        out.stderr
    );

    let (status, _, stderr, elapsed) = run_xload_with_timeout(
        [
            url.as_str(),
            "-c",
            "1",
            "-d",
            "1s",
            "--connect-timeout",
            "5s",
        ],
        Duration::from_secs(8),
    );
    assert!(
        elapsed < Duration::from_millis(2500),
        "a 1 s run waited {elapsed:?} for its first connect\n{stderr}"
    );
    assert_eq!(exit_code(status), 1, "{stderr}");
    drop(listener);
}

/// Ctrl-C during the warm-up: nothing was measured, and the message says so
/// (before: "no response from URL", while the server was answering); the
/// exit is 130, as for every run a signal cut short.
#[test]
fn ctrl_c_during_the_warmup_says_nothing_was_measured_and_exits_130() {
    let server = TestServer::start(Behavior::Ok { body_len: 10 });
    let child = spawn_xload([
        server.url("/").as_str(),
        "-c",
        "2",
        "-d",
        "2s",
        "--warmup",
        "10s",
    ]);
    assert!(
        eventually(|| server.served() > 10),
        "no warm-up load reached the server"
    );
    child.interrupt();
    let out = child.wait_timeout(Duration::from_secs(10));
    assert!(!out.timed_out, "no exit after Ctrl-C");
    assert_eq!(exit_code(out.status), 130, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("stopped during the warm-up"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("no response"), "{}", out.stderr);
    assert!(
        out.stdout
            .contains("Stopped     early, by a signal (Ctrl-C or SIGTERM)"),
        "{}",
        out.stdout
    );
}

/// Ctrl-C a second into a 10 s run: the report covers what was measured,
/// the exit is prompt and 130 (a CI job must not count it as a pass).
fn ctrl_c_prints_the_report_and_exits_130(engine: &str) {
    let server = TestServer::start(Behavior::Ok { body_len: 10 });
    let dir = TempDir::new("sigint");
    let json_path = dir.join("report.json");
    let child = spawn_xload([
        server.url("/").as_str(),
        "-c",
        "4",
        "-d",
        "10s",
        "--engine",
        engine,
        "--json",
        json_path.to_str().expect("utf-8 temp path"),
    ]);
    let spawned = Instant::now();
    assert!(
        eventually(|| server.served() > 100),
        "no load reached the server"
    );
    std::thread::sleep(Duration::from_millis(500));
    let signalled_after = spawned.elapsed();
    child.interrupt();
    let signalled = Instant::now();
    let output = child.wait_timeout(Duration::from_secs(20));
    let after_signal = signalled.elapsed();
    let out = Outcome {
        code: exit_code(output.status),
        stdout: output.stdout,
        stderr: output.stderr,
        elapsed: output.elapsed,
        json: json_path.exists().then(|| read_json(&json_path)),
    };
    if engine == "uring" && out.json.is_none() && out.stderr.contains("io_uring") {
        eprintln!("skipping the io_uring run: {}", out.stderr.trim());
        return;
    }
    out.assert_no_panic();
    assert!(
        after_signal < Duration::from_secs(2),
        "exit took {after_signal:?} after SIGINT\n{}",
        out.show()
    );
    assert_eq!(
        out.code,
        130,
        "Ctrl-C with responses measured: exit 130\n{}",
        out.show()
    );
    let requests = out.u64_at("/requests");
    assert!(requests > 0, "{}", out.show());
    server.assert_reconciles(requests, 4);
    let duration_s = out.json()["duration_s"].as_f64().expect("duration_s");
    assert!(
        duration_s > 0.2 && duration_s <= signalled_after.as_secs_f64() + 0.2,
        "duration_s {duration_s}: the signal came {signalled_after:?} after the start\n{}",
        out.show()
    );
    assert_eq!(
        out.json()["interrupted"].as_bool(),
        Some(true),
        "the report says it was cut short\n{}",
        out.show()
    );
    assert!(
        out.stdout.contains("Stopped     early, by a signal"),
        "the text says so too\n{}",
        out.show()
    );
    assert!(
        out.stdout.contains("req/s"),
        "the text report is printed\n{}",
        out.show()
    );
}

/// Two SIGTERMs back to back, as `timeout` and a process-group kill send
/// them, at the start of a run: the report is still printed and written and
/// the exit is 143. Before: the second signal exited at once with 130 and no
/// report (1 run in 6).
fn two_sigterms_at_once_keep_the_report(engine: &str) {
    for round in 0..3 {
        let server = TestServer::start(Behavior::Ok { body_len: 10 });
        let dir = TempDir::new("sigterm2");
        let json_path = dir.join("report.json");
        let child = spawn_xload([
            server.url("/").as_str(),
            "-c",
            "8",
            "-d",
            "8s",
            "-q",
            "--engine",
            engine,
            "--json",
            json_path.to_str().expect("utf-8 temp path"),
        ]);
        assert!(
            eventually(|| server.served() > 0),
            "no load reached the server"
        );
        // Round 0 signals at the first request, the others a little later.
        std::thread::sleep(Duration::from_millis(100 * round));
        child.signal(libc::SIGTERM);
        child.signal(libc::SIGTERM);
        let output = child.wait_timeout(Duration::from_secs(20));
        assert!(!output.timed_out, "no exit after two SIGTERMs");
        if engine == "uring" && !json_path.exists() && output.stderr.contains("io_uring") {
            eprintln!("skipping the io_uring run: {}", output.stderr.trim());
            return;
        }
        assert_eq!(
            exit_code(output.status),
            143,
            "round {round}\n{}\n{}",
            output.stdout,
            output.stderr
        );
        assert!(
            json_path.exists(),
            "round {round}: no report after two SIGTERMs\n{}",
            output.stderr
        );
        assert_eq!(read_json(&json_path)["interrupted"], true);
    }
}

both_engines!(
    two_sigterms_at_once_keep_the_report,
    garbage_is_a_parse_error,
    truncated_body_is_eof_mid_response,
    oversize_header_is_header_too_large,
    wrong_content_length_is_request_timeout,
    never_answering_is_request_timeout,
    bad_chunk_size_is_a_parse_error,
    close_without_connection_close_is_closed,
    reset_is_reset,
    server_going_away_is_connect_refused,
    full_accept_queue_is_connect_timeout,
    ctrl_c_prints_the_report_and_exits_130,
);
