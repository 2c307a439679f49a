//! Stateful sessions against `xload serve --app banking`: cookies and
//! captured ids carried by every request after login (the responder counts
//! any that are not the session's own), wrong ids refused and counted on
//! both sides, a capture that finds nothing restarting the session instead
//! of sending an empty id, a dropped cookie restarting its session.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::run::{
    free_port, run_json, spawn_xload, wait_listening, JsonRun, TempDir, XloadChild,
};
use xload_testkit::both_engines;

const HARD_TIMEOUT: Duration = Duration::from_secs(30);
const SESSIONS: u64 = 8;

/// `xload serve --app banking` on a free port, stopped on drop.
struct App {
    _child: XloadChild,
    port: u16,
}

impl App {
    fn start(extra: &[&str]) -> App {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut args = vec![
            "serve", "--app", "banking", "--listen", &listen, "--for", "25s",
        ];
        args.extend(extra);
        let child = spawn_xload(args);
        wait_listening(port);
        App {
            _child: child,
            port,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    fn stats(&self) -> serde_json::Value {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let body = text.split("\r\n\r\n").nth(1).expect("a body");
        serde_json::from_str(body).expect("stats JSON")
    }
}

fn shipped(name: &str) -> String {
    format!("{}/../../workloads/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The banking workload with a shorter think time (more requests per second
/// of test) and `edit` applied to its text.
fn banking(dir: &TempDir, edit: impl Fn(String) -> String) -> String {
    let src = std::fs::read_to_string(shipped("banking.toml")).unwrap();
    let src = src.replace(
        "think = { exponential = \"100ms\" }",
        "think = { exponential = \"20ms\" }",
    );
    assert!(src.contains("\"20ms\""));
    dir.file("banking.toml", &edit(src))
}

fn run(dir: &TempDir, w: &str, url: &str, engine: &str) -> JsonRun {
    let sessions = SESSIONS.to_string();
    let r = run_json(
        dir,
        &[
            "run",
            w,
            url,
            "--sessions",
            &sessions,
            "-d",
            "2s",
            "-t",
            "1",
            "-q",
            "--engine",
            engine,
        ],
        HARD_TIMEOUT,
    );
    assert!(r.json.is_object(), "{}", r.show());
    r
}

/// Per class: (requests, consistency errors, capture failures, session restarts).
fn class(r: &JsonRun, name: &str) -> (u64, u64, u64, u64) {
    let c = r.json["classes"]
        .as_array()
        .expect("classes")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no class {name}: {}", r.show()));
    let n = |k: &str| c[k].as_u64().unwrap_or_else(|| panic!("{k}: {c}"));
    (
        n("requests"),
        n("consistency_errors"),
        n("capture_failures"),
        n("session_restarts"),
    )
}

const CLASSES: [&str; 5] = ["login", "account", "transfer_form", "transfer", "logout"];

/// `lo <= x <= lo + slack`, with a message.
fn within(x: u64, lo: u64, slack: u64, what: &str, r: &JsonRun) {
    assert!(
        lo <= x && x <= lo + slack,
        "{what}: {x} not in {lo}..={}\n{}",
        lo + slack,
        r.show()
    );
}

fn banking_sessions_carry_their_own_cookie_and_ids(engine: &str) {
    let app = App::start(&[]);
    let dir = TempDir::new("sessions-banking");
    let w = banking(&dir, |s| s);
    let r = run(&dir, &w, &app.url(), engine);
    assert_eq!(r.code, 0, "{}", r.show());
    let s = app.stats();
    assert_eq!(
        (s["mismatches"].as_u64(), s["no_session"].as_u64()),
        (Some(0), Some(0)),
        "{s}"
    );
    let mut total = 0;
    for name in CLASSES {
        let (n, consistency, captures, restarts) = class(&r, name);
        assert_eq!(
            (consistency, captures, restarts),
            (0, 0, 0),
            "{name}\n{}",
            r.show()
        );
        assert!(n > 0, "{name}: no request\n{}", r.show());
        total += n;
    }
    assert_eq!(r.json["requests"].as_u64(), Some(total));
    // Every request after a login was its session's own (answered 200 and
    // counted as checked); the server saw at most the requests in flight
    // at the end more than the client counted.
    let (served, logins, checked) = (
        s["requests"].as_u64().unwrap(),
        s["logins"].as_u64().unwrap(),
        s["checked"].as_u64().unwrap(),
    );
    assert_eq!(served, logins + checked, "{s}");
    within(served, total, SESSIONS, "served", &r);
    within(logins, class(&r, "login").0, SESSIONS, "logins", &r);
}

/// Capturing only the first digit of the account: the server refuses every
/// request that echoes it (another session's id), and each refusal is a
/// consistency error of `account` that restarts the session.
fn a_wrong_capture_is_refused_and_counted(engine: &str) {
    let app = App::start(&[]);
    let dir = TempDir::new("sessions-wrong");
    let w = banking(&dir, |s| {
        let wrong = s.replace("acct=([0-9]+)", "acct=([0-9])");
        assert_ne!(wrong, s);
        wrong
    });
    let r = run(&dir, &w, &app.url(), engine);
    let s = app.stats();
    let (n, consistency, captures, restarts) = class(&r, "account");
    assert!(n > 0 && consistency == n, "{}", r.show());
    assert_eq!((captures, restarts), (0, consistency), "{}", r.show());
    within(
        s["mismatches"].as_u64().unwrap(),
        consistency,
        SESSIONS,
        "mismatches",
        &r,
    );
    assert_eq!(
        (s["checked"].as_u64(), s["no_session"].as_u64()),
        (Some(0), Some(0)),
        "{s}"
    );
    // No session got past `account`.
    assert_eq!(class(&r, "transfer_form").0, 0, "{}", r.show());
}

both_engines!(
    banking_sessions_carry_their_own_cookie_and_ids,
    a_wrong_capture_is_refused_and_counted
);

/// A capture that finds nothing is a named consistency error of its class,
/// and the session starts over rather than send `{token}` empty: the
/// server sees logins only.
#[test]
fn a_capture_that_finds_nothing_restarts_the_session() {
    let app = App::start(&[]);
    let dir = TempDir::new("sessions-missing");
    let w = banking(&dir, |s| {
        s.replace(
            "capture = { account = { body_regex = \"acct=([0-9]+)\" } }",
            "capture = { account = { header = \"X-Account\" } }",
        )
    });
    let r = run(&dir, &w, &app.url(), "uring");
    let (n, consistency, captures, restarts) = class(&r, "login");
    assert!(n > 0, "{}", r.show());
    assert_eq!((consistency, captures, restarts), (n, n, n), "{}", r.show());
    let offender = &r.json["classes"][0]["offending"][0]["reason"];
    assert_eq!(offender, "capture account: found nothing", "{}", r.show());
    for name in &CLASSES[1..] {
        assert_eq!(class(&r, name).0, 0, "{name}\n{}", r.show());
    }
    let s = app.stats();
    assert_eq!(s["requests"], s["logins"], "{s}");
}

/// One login in 5 gets no cookie: its session's next request is refused
/// (no session), counted on `account` and restarted; the rest run clean.
#[test]
fn a_dropped_cookie_restarts_its_session() {
    let app = App::start(&["--drop-cookie", "5"]);
    let dir = TempDir::new("sessions-drop");
    let w = banking(&dir, |s| s);
    let r = run(&dir, &w, &app.url(), "uring");
    let s = app.stats();
    let (_, consistency, captures, restarts) = class(&r, "account");
    assert!(consistency > 0, "{}", r.show());
    assert_eq!((captures, restarts), (0, consistency), "{}", r.show());
    let (dropped, refused) = (
        s["dropped_cookies"].as_u64().unwrap(),
        s["no_session"].as_u64().unwrap(),
    );
    within(refused, consistency, SESSIONS, "no_session", &r);
    within(dropped, refused, SESSIONS, "dropped cookies", &r);
    assert_eq!(s["mismatches"], 0, "{s}");
    for name in &CLASSES[2..] {
        assert_eq!(class(&r, name).1, 0, "{name}\n{}", r.show());
    }
}

/// Captures belong to sessions: a stateful workload without --sessions is
/// refused (exit 2), as is --cookies without a workload.
#[test]
fn captures_need_sessions() {
    let dir = TempDir::new("sessions-refused");
    let w = banking(&dir, |s| s);
    let r = run_json(
        &dir,
        &["run", &w, "http://127.0.0.1:9/", "-c", "1", "-d", "1s"],
        HARD_TIMEOUT,
    );
    assert_eq!(r.code, 2, "{}", r.show());
    assert!(r.stderr.contains("--sessions N"), "{}", r.show());
    let r = run_json(
        &dir,
        &["http://127.0.0.1:9/", "--cookies", "-d", "1s"],
        HARD_TIMEOUT,
    );
    assert_eq!(r.code, 2, "{}", r.show());
}
