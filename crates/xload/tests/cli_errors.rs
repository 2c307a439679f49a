//! Bad input on the command line and unreachable targets (issue 2, "Bad
//! input and faults"; docs/design.md exit codes): bad arguments exit 2 before any
//! connection is made; a target that cannot be reached exits 1 with a clear
//! one-line error, bounded by the connect timeout; `--fail-if` violations
//! exit 3. Nothing panics.

mod support;

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use support::run::{exit_code, run_command_with_timeout, xload_bin};
use support::{free_port, run_xload_with_timeout, Behavior, TestServer};

/// Hard kill for one invocation; each should take well under a second.
const HARD_TIMEOUT: Duration = Duration::from_secs(30);

struct Invocation {
    args: Vec<String>,
    code: i32,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl Invocation {
    fn show(&self) -> String {
        format!(
            "xload {:?}: exit {} after {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.args, self.code, self.elapsed, self.stdout, self.stderr
        )
    }

    /// The non-empty lines of stderr.
    fn stderr_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|line| !line.trim().is_empty())
            .collect()
    }

    /// Exactly one line on stderr, prefixed `xload:`; nothing on stdout.
    fn assert_one_line_error(&self) {
        let lines = self.stderr_lines();
        assert_eq!(lines.len(), 1, "expected a one-line error\n{}", self.show());
        assert!(lines[0].starts_with("xload: "), "{}", self.show());
        assert!(
            self.stdout.trim().is_empty(),
            "no report expected\n{}",
            self.show()
        );
    }

    fn assert_no_panic(&self) {
        assert!(
            !self.stderr.contains("panicked"),
            "xload panicked\n{}",
            self.show()
        );
    }
}

fn xload(args: &[&str]) -> Invocation {
    let (status, stdout, stderr, elapsed) = run_xload_with_timeout(args, HARD_TIMEOUT);
    let out = Invocation {
        args: args.iter().map(|s| s.to_string()).collect(),
        code: exit_code(status),
        stdout,
        stderr,
        elapsed,
    };
    out.assert_no_panic();
    out
}

/// Runs each argument list against a live test server and asserts exit 2
/// and that the server saw no connection at all (arguments are checked
/// before the network is touched).
fn assert_usage_errors(cases: &[&[&str]]) {
    let server = TestServer::start(Behavior::Ok { body_len: 0 });
    let url = server.url("/");
    for case in cases {
        let mut args: Vec<&str> = vec![url.as_str()];
        args.extend_from_slice(case);
        // Short runs in case an argument is wrongly accepted.
        args.extend_from_slice(&["-n", "10", "-c", "1"]);
        let out = xload(&args);
        assert_eq!(out.code, 2, "bad arguments: exit 2\n{}", out.show());
        assert!(
            !out.stderr.trim().is_empty(),
            "a usage error says why\n{}",
            out.show()
        );
        assert!(
            !out.stdout.contains("req/s"),
            "no run expected\n{}",
            out.show()
        );
    }
    assert_eq!(
        server.accepted(),
        0,
        "a connection was made despite bad arguments"
    );
}

#[test]
fn invalid_urls_exit_2_with_a_one_line_error() {
    for url in [
        "not a url",
        "http://",
        "http://127.0.0.1:notaport/",
        "http://127.0.0.1:99999/",
        "ftp://127.0.0.1/",
        "http://user@127.0.0.1/",
        "127.0.0.1:80/path with space",
    ] {
        let out = xload(&[url, "-n", "1"]);
        assert_eq!(out.code, 2, "invalid URL {url:?}: exit 2\n{}", out.show());
        out.assert_one_line_error();
        assert!(
            out.stderr.contains("URL") || out.stderr.contains("url"),
            "the error names the URL\n{}",
            out.show()
        );
    }
}

#[test]
fn other_schemes_and_bad_resolve_are_refused_with_a_clear_message() {
    let out = xload(&["ftp://127.0.0.1/", "-n", "1"]);
    assert_eq!(out.code, 2, "{}", out.show());
    out.assert_one_line_error();
    assert!(
        out.stderr.contains("http:// and https://"),
        "{}",
        out.show()
    );
    let out = xload(&["https://127.0.0.1/", "--resolve", "x:1", "-n", "1"]);
    assert_eq!(out.code, 2, "{}", out.show());
    assert!(out.stderr.contains("HOST:PORT:ADDR"), "{}", out.show());
}

#[test]
fn missing_url_exits_2() {
    let out = xload(&["-n", "1"]);
    assert_eq!(out.code, 2, "{}", out.show());
    assert!(out.stderr.contains("URL"), "{}", out.show());
}

#[test]
fn unknown_host_exits_1_with_a_one_line_error() {
    // RFC 6761: .invalid never resolves.
    let out = xload(&["http://no-such-host.invalid/", "-n", "1"]);
    assert_eq!(out.code, 1, "{}", out.show());
    out.assert_one_line_error();
    assert!(
        out.stderr.contains("no-such-host.invalid"),
        "the error names the host\n{}",
        out.show()
    );
    assert!(
        out.elapsed < Duration::from_secs(10),
        "name resolution failure took {:?}",
        out.elapsed
    );
}

#[test]
fn nothing_listening_exits_1_within_the_connect_timeout() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/");
    let out = xload(&[&url, "-d", "5s", "--connect-timeout", "1s"]);
    assert_eq!(out.code, 1, "{}", out.show());
    out.assert_one_line_error();
    assert!(
        out.stderr.contains(&port.to_string()) && out.stderr.contains("connect"),
        "the error names the target and the failed connect\n{}",
        out.show()
    );
    // Refused at once on loopback; never more than the connect timeout.
    assert!(
        out.elapsed < Duration::from_millis(1000 + 700),
        "took {:?} with --connect-timeout 1s\n{}",
        out.elapsed,
        out.show()
    );
}

#[test]
fn zero_or_bad_counts_exit_2_before_connecting() {
    assert_usage_errors(&[
        &["-c", "0"],
        &["-c", "many"],
        &["-c", "-3"],
        &["-t", "0"],
        &["--requests=0"],
        &["--pipeline", "0"],
        &["--pipeline", "5000"],
        &["--pipeline", "2", "--no-keepalive"],
        // Rates beyond one send per nanosecond (1e99 used to spin forever).
        &["--rate", "1e99"],
        &["--rate", "2G"],
        // Options that contradict each other are refused, not silently resolved.
        &["-t", "4", "--cpus", "0"],
        &["-t", "1", "--pin-all"],
        &["--pin-all", "--cpus", "0"],
        // Open-loop shapes without an open loop: silently ignored before.
        &["--arrival", "poisson"],
        &["--seed", "7"],
        &["--seed", "x", "--rate", "10"],
    ]);
}

#[test]
fn bad_durations_exit_2_before_connecting() {
    assert_usage_errors(&[
        &["-d", "fast"],
        &["-d", "10parsecs"],
        &["--duration=-1s"],
        &["-d", "0"],
        &["-d", "0s"],
        &["--timeout", "x"],
        &["--timeout", "5y"],
        &["--connect-timeout", "soon"],
        &["--warmup", "abc"],
        // A zero timeout would time out every request (or blame the target).
        &["--timeout", "0"],
        &["--connect-timeout", "0s"],
    ]);
}

#[test]
fn unwritable_report_paths_exit_2_before_connecting() {
    let dir = support::TempDir::new("outputs");
    let sub = dir.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let sub = sub.display().to_string();
    assert_usage_errors(&[
        &["--json", "/nonexistent-xload-dir/r.json"],
        &["--csv", "/nonexistent-xload-dir/r.csv"],
        &["--json", &sub],
        &["--json", "-", "--csv", "-"],
    ]);
}

#[test]
fn bad_fail_if_expressions_exit_2_before_connecting() {
    assert_usage_errors(&[
        &["--fail-if", "p99"],
        &["--fail-if", "p99>"],
        &["--fail-if", "latency>5ms"],
        &["--fail-if", "p99>50"],
        &["--fail-if", "p99>fast"],
        &["--fail-if", "rps<lots"],
        &["--fail-if", "errors>0", "--fail-if", "bogus"],
    ]);
}

/// A bad `--slo` is named as such (its syntax is --fail-if's).
#[test]
fn a_bad_slo_is_named_as_the_slo() {
    let out = xload(&[
        "sweep",
        "http://127.0.0.1:1/",
        "--rate",
        "100..200",
        "--find-max",
        "--slo",
        "bogus",
    ]);
    assert_eq!(out.code, 2, "{}", out.show());
    assert!(out.stderr.contains("--slo \"bogus\""), "{}", out.show());
    assert!(!out.stderr.contains("--fail-if"), "{}", out.show());
}

#[test]
fn bad_headers_and_bodies_exit_2_before_connecting() {
    assert_usage_errors(&[
        &["-H", "NoColonHere"],
        &["-H", "Bad Name: x"],
        &["--body-file", "/nonexistent/xload-test-body"],
        &["--body", "x", "--body-file", "/etc/hostname"],
        &["--engine", "turbo"],
        &["--cpus", "9999"],
    ]);
}

#[test]
fn fail_if_violation_exits_3_and_a_met_threshold_exits_0() {
    let server = TestServer::start(Behavior::Ok { body_len: 0 });
    let url = server.url("/");
    let out = xload(&[&url, "-n", "200", "-c", "2", "--fail-if", "rps<1e12"]);
    assert_eq!(
        out.code,
        3,
        "rps below 10^12 must trip the gate\n{}",
        out.show()
    );
    assert!(
        out.stdout.contains("req/s"),
        "the report is still printed\n{}",
        out.show()
    );
    assert!(
        out.stderr.contains("rps"),
        "the failed gate is named\n{}",
        out.show()
    );
    let out = xload(&[&url, "-n", "200", "-c", "2", "--fail-if", "errors>0"]);
    assert_eq!(out.code, 0, "no errors: the gate holds\n{}", out.show());
}

/// With a hard fd limit too low for -c, xload stops before starting and says
/// the numbers and how to raise the limit.
#[test]
fn fd_limit_too_low_for_connections_exits_1_with_the_numbers() {
    let server = TestServer::start(Behavior::Ok { body_len: 0 });
    let mut command = Command::new(xload_bin());
    command.args([server.url("/").as_str(), "-c", "1000", "-d", "1s"]);
    // SAFETY: runs in the forked child before exec; setrlimit(2) is
    // async-signal-safe and gets a struct on the child's stack.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 128,
                rlim_max: 128,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let output = run_command_with_timeout(command, HARD_TIMEOUT);
    let out = Invocation {
        args: vec!["-c".into(), "1000".into(), "(RLIMIT_NOFILE 128)".into()],
        code: exit_code(output.status),
        stdout: output.stdout,
        stderr: output.stderr,
        elapsed: output.elapsed,
    };
    out.assert_no_panic();
    assert_eq!(out.code, 1, "{}", out.show());
    out.assert_one_line_error();
    assert!(
        out.stderr.contains("1000")
            && out.stderr.contains("128")
            && out.stderr.contains("ulimit -n"),
        "the error says what -c needs, the limit, and how to raise it\n{}",
        out.show()
    );
    assert_eq!(server.accepted(), 0, "stopped before connecting");
}

/// A rate sweep's levels are rates, not connections: a top rate above the fd
/// limit must not be taken for a connection count (it was, and refused).
#[test]
fn a_rate_sweep_needs_file_descriptors_for_its_connections_only() {
    let server = TestServer::start(Behavior::Ok { body_len: 0 });
    let mut command = Command::new(xload_bin());
    command.args([
        "sweep",
        server.url("/").as_str(),
        "--rate",
        "500..1000/2",
        "-c",
        "2",
        "-d",
        "200ms",
        "--cooldown",
        "0s",
    ]);
    // SAFETY: as above: setrlimit(2) in the forked child before exec.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 300,
                rlim_max: 300,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let output = run_command_with_timeout(command, HARD_TIMEOUT);
    let out = Invocation {
        args: vec![
            "sweep --rate 500..1000/2 -c 2".into(),
            "(RLIMIT_NOFILE 300)".into(),
        ],
        code: exit_code(output.status),
        stdout: output.stdout,
        stderr: output.stderr,
        elapsed: output.elapsed,
    };
    out.assert_no_panic();
    assert_eq!(out.code, 0, "{}", out.show());
    assert!(out.stdout.contains("1000/s"), "{}", out.show());
}

#[test]
fn sweep_levels_must_make_sense_for_what_they_count() {
    for case in [
        &["sweep", "http://127.0.0.1:1/", "-c", "1.5,2"][..],
        &["sweep", "http://127.0.0.1:1/", "--rate", "0.5..2"][..],
        &["sweep", "http://127.0.0.1:1/", "--rate", "1k..2G"][..],
        &["sweep", "http://127.0.0.1:1/", "-c", "1,2", "--latency"][..],
        &["demo", "--step", "0s"][..],
        // Refused before the sweep (it ran the whole sweep, then exit 1).
        &["demo", "--json", "/nonexistent-dir/d.json"][..],
    ] {
        let out = xload(case);
        assert_eq!(out.code, 2, "{}", out.show());
        assert!(
            out.stderr.contains("error:") || out.stderr.starts_with("xload: "),
            "{}",
            out.show()
        );
    }
}

#[test]
fn a_mistyped_subcommand_is_named_not_resolved_as_a_host() {
    for (typo, meant) in [
        ("swep", "sweep"),
        ("serv", "serve"),
        ("mrege", "merge"),
        ("dmeo", "demo"),
    ] {
        let out = xload(&[typo, "http://127.0.0.1:1/"]);
        assert_eq!(out.code, 2, "{}", out.show());
        assert!(
            out.stderr
                .contains(&format!("did you mean `xload {meant}`")),
            "{}",
            out.show()
        );
    }
    // A run too short for a round trip says so instead of blaming the target.
    // (The server takes 50 ms to answer: no response can come in 100 µs.)
    let server = TestServer::start(Behavior::Delay {
        delay: Duration::from_millis(50),
    });
    let out = xload(&[&server.url("/"), "-d", "100us"]);
    assert_eq!(out.code, 1, "{}", out.show());
    assert!(
        out.stderr.contains("too short for a round trip"),
        "{}",
        out.show()
    );
    assert!(
        !out.stdout.contains("Batching"),
        "no waits, no batching line\n{}",
        out.show()
    );
    // A duration given as negative says so.
    let out = xload(&["http://127.0.0.1:1/", "-d=-1s"]);
    assert_eq!(out.code, 2, "{}", out.show());
    assert!(out.stderr.contains("cannot be negative"), "{}", out.show());
}

/// The two searches of `sweep --find-max` each say what they need.
#[test]
fn sweep_find_max_and_sessions_usage_errors_say_what_is_needed() {
    let cases: [(&[&str], &str); 4] = [
        (&["--sessions", "10..20"], "--sessions needs a workload"),
        (&["-c", "1..4", "--find-max"], "workload sessions (-w FILE"),
        (
            &["--rate", "100..200", "--find-max"],
            "needs the service level",
        ),
        (&["-c", "1", "--sessions", "4"], "cannot be used with"),
    ];
    for (args, expect) in cases {
        let all = [&["sweep", "http://127.0.0.1:1/"][..], args].concat();
        let out = xload(&all);
        assert_eq!(out.code, 2, "{}", out.show());
        assert!(out.stderr.contains(expect), "{expect:?}\n{}", out.show());
    }
}
