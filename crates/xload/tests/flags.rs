//! Flags where other tools' users have their hands: options before a
//! subcommand (`xload -d 1s sweep URL`), `-z` for `-d` (hey, oha), `-a
//! user:pass` (hey, oha, ab), `--threshold` pass conditions (k6) beside
//! `--fail-if`, and `--unix-socket PATH` (oha, vegeta, curl).
//!
//! Runs are short closed-loop runs against loopback test servers; what is
//! asserted are exit codes, counts and the bytes the server saw.

mod support;

use std::path::Path;

use support::run::exit_code;
use support::{run_xload, Behavior, TempDir, TestServer};
use xload_stats::Report;

/// `xload ARGS`: (exit code, stdout, stderr).
fn xload(args: &[&str]) -> (i32, String, String) {
    let (status, stdout, stderr, _) = run_xload(args);
    (exit_code(status), stdout, stderr)
}

fn read_report(path: &Path) -> Report {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    Report::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

fn ok_server() -> TestServer {
    TestServer::start(Behavior::Ok { body_len: 16 })
}

#[test]
fn options_before_sweep_apply_to_the_sweep() {
    let server = ok_server();
    let dir = TempDir::new("flags");
    let json = dir.join_str("sweep.json");
    let url = server.url("/");
    let (code, _, stderr) = xload(&[
        "-d", "300ms", "--warmup", "0s", "-t", "1", "sweep", &url, "-c", "1,2", "-q", "--json",
        &json,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let steps = doc["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 2, "{doc}");
    for s in steps {
        // The step's window is the -d given before `sweep`, not the 5 s default.
        let secs = s["report"]["duration_s"]
            .as_f64()
            .or_else(|| s["duration_s"].as_f64())
            .unwrap_or_else(|| panic!("no duration_s in {s}"));
        assert!((0.29..1.0).contains(&secs), "step of {secs} s: {s}");
    }
}

#[test]
fn options_before_run_apply_to_the_run_and_z_is_d() {
    let server = ok_server();
    let dir = TempDir::new("flags");
    let w = dir.file("w.toml", "[classes.a]\npath = \"/\"\n");
    let json = dir.join_str("run.json");
    let url = server.url("");
    let (code, _, stderr) = xload(&[
        "-z", "300ms", "-n", "50", "-c", "1", "-t", "1", "run", &w, &url, "-q", "--json", &json,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let r = read_report(Path::new(&json));
    // -n 50 given before `run` stopped the run: exactly 50 answered.
    assert_eq!(r.requests, 50, "{stderr}");
}

#[test]
fn an_option_given_before_and_after_the_subcommand_takes_the_later() {
    let server = ok_server();
    let dir = TempDir::new("flags");
    let w = dir.file("w.toml", "[classes.a]\npath = \"/\"\n");
    let json = dir.join_str("run.json");
    let url = server.url("");
    let (code, _, stderr) = xload(&[
        "-n", "500", "-c", "1", "-t", "1", "run", &w, &url, "-n", "20", "-q", "--json", &json,
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(read_report(Path::new(&json)).requests, 20);
}

#[test]
fn an_option_the_subcommand_does_not_take_is_a_usage_error() {
    let (code, _, stderr) = xload(&["-d", "1s", "serve"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("-d given before `xload serve` is not an option of `xload serve`"),
        "{stderr}"
    );
}

#[test]
fn basic_auth_reaches_the_server_encoded() {
    let server = ok_server();
    let (code, _, stderr) = xload(&[
        &server.url("/"),
        "-a",
        "Aladdin:open sesame",
        "-n",
        "3",
        "-c",
        "1",
        "-t",
        "1",
        "-q",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let head = server.first_request_head().expect("a request");
    assert!(
        head.contains("\r\nAuthorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==\r\n"),
        "{head}"
    );
}

#[test]
fn basic_auth_refuses_a_bad_value_and_a_second_authorization() {
    let url = "http://127.0.0.1:9/";
    let (code, _, stderr) = xload(&[url, "-a", "alice", "-n", "1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("expected USER:PASS"), "{stderr}");
    let (code, _, stderr) = xload(&[url, "-a", "a:b", "-H", "authorization: x", "-n", "1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("both set the Authorization header"),
        "{stderr}"
    );
}

/// (exit code, stderr) of a 30-request run with `args`.
fn gated_run(server: &TestServer, args: &[&str]) -> (i32, String) {
    let url = server.url("/");
    let mut all = vec![url.as_str(), "-n", "30", "-c", "1", "-t", "1", "-q"];
    all.extend_from_slice(args);
    let (code, _, stderr) = xload(&all);
    (code, stderr)
}

#[test]
fn a_threshold_passes_when_it_holds_and_exits_3_when_not() {
    let server = ok_server();
    // Held: no errors, every answer within a minute.
    let (code, stderr) = gated_run(
        &server,
        &["--threshold", "errors<1", "--threshold", "p99<60s"],
    );
    assert_eq!(code, 0, "{stderr}");
    // Not held: 30 requests, so rps is finite and never above 1e12.
    let (code, stderr) = gated_run(&server, &["--threshold", "rps>1e12"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("threshold failed: rps>1e12 not met (measured"),
        "{stderr}"
    );
    // Beside --fail-if: either failing fails the run.
    let (code, stderr) = gated_run(&server, &["--threshold", "errors<1", "--fail-if", "rps>0"]);
    assert_eq!(code, 3, "{stderr}");
}

#[test]
fn a_threshold_judges_every_sweep_step() {
    let server = ok_server();
    let url = server.url("/");
    let args = |t: &'static str| {
        vec![
            "sweep",
            url.as_str(),
            "-c",
            "1,2",
            "-d",
            "200ms",
            "--warmup",
            "0s",
            "-t",
            "1",
            "-q",
            "--threshold",
            t,
        ]
    };
    let (code, _, stderr) = xload(&args("errors<1"));
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = xload(&args("rps>1e12"));
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(stderr.matches("rps>1e12 not met").count(), 2, "{stderr}");
}

#[test]
fn a_bad_threshold_is_a_usage_error_naming_the_flag() {
    let (code, _, stderr) = xload(&["http://127.0.0.1:9/", "--threshold", "p99<50", "-n", "1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--threshold \"p99<50\""), "{stderr}");
}

/// `GET /stats` of an `xload serve` through its Unix socket: its request count.
fn serve_requests(sock: &Path) -> u64 {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(sock).expect("connect to serve");
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    s.write_all(b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut page = String::new();
    let _ = s.read_to_string(&mut page);
    let body = &page[page.find("\r\n\r\n").expect("a response") + 4..];
    let v: serde_json::Value = serde_json::from_str(body).expect("stats JSON");
    v["requests"].as_u64().expect("requests")
}

/// `xload serve --unix-socket` and a run through it with `engine`: every
/// response the client counted is one the server answered, exactly.
fn unix_socket_run_reconciles_with_serve(engine: &str) {
    let dir = TempDir::new("unix");
    let sock = dir.join("serve.sock");
    let sock_s = sock.display().to_string();
    let serve = support::spawn_xload(["serve", "--unix-socket", &sock_s, "--for", "20s"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(std::time::Instant::now() < deadline, "serve never listened");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let before = serve_requests(&sock);
    let json = dir.join_str("run.json");
    let (code, _, stderr) = xload(&[
        "http://localhost/",
        "--unix-socket",
        &sock_s,
        "--engine",
        engine,
        "-n",
        "300",
        "-c",
        "4",
        "-t",
        "2",
        "-q",
        "--json",
        &json,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let r = read_report(Path::new(&json));
    assert_eq!((r.requests, r.errors_total), (300, 0), "{stderr}");
    // Both /stats reads count (or not) the same way: the difference is the run's.
    assert_eq!(serve_requests(&sock) - before, r.requests);
    serve.interrupt();
    let out = serve.wait_timeout(std::time::Duration::from_secs(30));
    assert!(!out.timed_out);
    assert!(!sock.exists(), "the socket file outlived serve");
}

xload_testkit::both_engines!(unix_socket_run_reconciles_with_serve);

#[test]
fn a_missing_unix_socket_is_named_and_tcp_options_are_refused() {
    let dir = TempDir::new("unix");
    let sock = dir.join_str("none.sock");
    let (code, _, stderr) = xload(&["http://localhost/", "--unix-socket", &sock, "-n", "1"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("through the Unix socket {sock}: No such file")),
        "{stderr}"
    );
    for extra in [
        &["--source", "127.0.0.2"][..],
        &["--resolve", "localhost:80:127.0.0.1"],
        &["--engine", "xdp", "--dev", "lo", "--src-ip", "10.0.0.1"],
    ] {
        let mut args = vec!["http://localhost/", "--unix-socket", &sock, "-n", "1"];
        args.extend_from_slice(extra);
        let (code, _, stderr) = xload(&args);
        assert_eq!(code, 2, "{extra:?}: {stderr}");
        assert!(stderr.contains("is for TCP connections"), "{stderr}");
    }
    let (code, _, stderr) = xload(&["https://localhost/", "--unix-socket", &sock, "-n", "1"]);
    assert_eq!(code, 2, "{stderr}");
}

/// nginx with `listen unix:PATH`: a run through the socket with `engine`
/// reconciles exactly with nginx's stub_status request counter.
fn unix_socket_run_reconciles_with_nginx(engine: &str) {
    use support::nginx::{Nginx, NginxOptions};
    let dir = TempDir::new("unix-nginx");
    let sock = dir.join("nginx.sock");
    let Some(nginx) = Nginx::start(NginxOptions {
        unix: Some(sock.clone()),
        ..NginxOptions::default()
    }) else {
        return;
    };
    let before = nginx.status();
    let json = dir.join_str("run.json");
    let sock_s = sock.display().to_string();
    let (code, _, stderr) = xload(&[
        "http://localhost/small",
        "--unix-socket",
        &sock_s,
        "--engine",
        engine,
        "-n",
        "300",
        "-c",
        "4",
        "-t",
        "2",
        "-q",
        "--json",
        &json,
    ]);
    assert_eq!(code, 0, "{stderr}\n{}", nginx.logs());
    let r = read_report(Path::new(&json));
    assert_eq!((r.requests, r.errors_total), (300, 0), "{stderr}");
    let after = nginx.status();
    assert_eq!(after.requests - before.requests, r.requests);
    // The connections nginx accepted are the run's 4 and the reachability
    // check's one: none was lost or went elsewhere.
    assert_eq!(after.accepts - before.accepts, 4 + 1);
}

xload_testkit::both_engines!(unix_socket_run_reconciles_with_nginx);
