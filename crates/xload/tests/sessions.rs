//! Stateful sessions against `xload serve --app banking|ecommerce|support`
//! with the shipped workloads: cookies and captured ids carried by every
//! request after login (the responder counts any that are not the
//! session's own), wrong ids refused and counted on both sides, a capture
//! that finds nothing restarting the session instead of sending an empty
//! id, a dropped cookie restarting its session.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::run::{
    exit_code, free_port, run_json, run_xload_with_timeout, spawn_xload, wait_listening, JsonRun,
    TempDir, XloadChild,
};
use xload_testkit::both_engines;

const HARD_TIMEOUT: Duration = Duration::from_secs(30);
const SESSIONS: u64 = 8;

/// `xload serve --app NAME` on a free port, stopped on drop.
struct App {
    _child: XloadChild,
    port: u16,
}

impl App {
    fn start(app: &str, extra: &[&str]) -> App {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let mut args = vec!["serve", "--app", app, "--listen", &listen, "--for", "25s"];
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

/// A shipped workload with a shorter think time (more requests per second
/// of test) and `edit` applied to its text.
fn workload(dir: &TempDir, name: &str, edit: impl Fn(String) -> String) -> String {
    let src = std::fs::read_to_string(shipped(name)).unwrap();
    let think = src
        .lines()
        .find(|l| l.starts_with("think = "))
        .expect("a think time");
    let src = src.replace(think, "think = { exponential = \"20ms\" }");
    dir.file(name, &edit(src))
}

fn banking(dir: &TempDir, edit: impl Fn(String) -> String) -> String {
    workload(dir, "banking.toml", edit)
}

/// The support workload, its manifest that of a file set generated in `dir`
/// (8 files, one of 1 MiB), and the set's directory.
fn support_workload(dir: &TempDir) -> (String, String) {
    let files = dir.join("downloads").display().to_string();
    let (status, _, err, _) = run_xload_with_timeout(
        [
            "files",
            "generate",
            &files,
            "--count",
            "8",
            "--sizes",
            "list:64k:3,1m:1",
        ],
        HARD_TIMEOUT,
    );
    assert_eq!(exit_code(status), 0, "{err}");
    let w = workload(dir, "support.toml", |s| {
        let m = s.replace(
            "manifest = \"../downloads/MANIFEST\"",
            &format!("manifest = \"{files}/MANIFEST\""),
        );
        assert_ne!(m, s);
        m
    });
    (w, files)
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
const SHOP: [&str; 4] = ["browse", "product", "add_to_cart", "checkout"];
const SUPPORT: [&str; 2] = ["search", "download"];

/// `lo <= x <= lo + slack`, with a message.
fn within(x: u64, lo: u64, slack: u64, what: &str, r: &JsonRun) {
    assert!(
        lo <= x && x <= lo + slack,
        "{what}: {x} not in {lo}..={}\n{}",
        lo + slack,
        r.show()
    );
}

/// A shipped workload against its app: zero errors of any kind on either
/// side, and every request after the session's start counted `checked` by
/// the responder (its own cookie and ids). Returns the run and the stats.
fn carries_its_own(
    app: &App,
    dir: &TempDir,
    w: &str,
    classes: &[&str],
    engine: &str,
) -> (JsonRun, serde_json::Value) {
    let r = run(dir, w, &app.url(), engine);
    assert_eq!(r.code, 0, "{}", r.show());
    let s = app.stats();
    assert_eq!(
        (s["mismatches"].as_u64(), s["no_session"].as_u64()),
        (Some(0), Some(0)),
        "{s}"
    );
    let mut total = 0;
    for &name in classes {
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
    (r, s)
}

fn banking_sessions_carry_their_own_cookie_and_ids(engine: &str) {
    let app = App::start("banking", &[]);
    let dir = TempDir::new("sessions-banking");
    let w = banking(&dir, |s| s);
    let (r, s) = carries_its_own(&app, &dir, &w, &CLASSES, engine);
    let logins = s["logins"].as_u64().unwrap();
    within(logins, class(&r, "login").0, SESSIONS, "logins", &r);
}

/// The shop's first page starts a session; a session that never restarts
/// keeps it: one server session per client session, every later page,
/// product, cart and checkout its own.
fn ecommerce_sessions_carry_their_own_cookie_and_ids(engine: &str) {
    let app = App::start("ecommerce", &[]);
    let dir = TempDir::new("sessions-ecommerce");
    let w = workload(&dir, "ecommerce.toml", |s| s);
    let (r, s) = carries_its_own(&app, &dir, &w, &SHOP, engine);
    assert_eq!(s["logins"].as_u64(), Some(SESSIONS), "{s}\n{}", r.show());
    assert!(class(&r, "checkout").0 > 0, "{}", r.show());
}

/// Searches and downloads of a generated file set: every download the size
/// the manifest says, its ticket the session's own.
fn support_sessions_carry_their_own_cookie_and_ids(engine: &str) {
    let dir = TempDir::new("sessions-support");
    let (w, files) = support_workload(&dir);
    let app = App::start("support", &["--files", &files]);
    let (r, s) = carries_its_own(&app, &dir, &w, &SUPPORT, engine);
    assert_eq!(s["logins"].as_u64(), Some(SESSIONS), "{s}\n{}", r.show());
}

/// Capturing only the first digit of the account: the server refuses every
/// request that echoes it (another session's id), and each refusal is a
/// consistency error of `account` that restarts the session.
fn a_wrong_capture_is_refused_and_counted(engine: &str) {
    let app = App::start("banking", &[]);
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
    ecommerce_sessions_carry_their_own_cookie_and_ids,
    support_sessions_carry_their_own_cookie_and_ids,
    a_wrong_capture_is_refused_and_counted
);

/// The shop's cart captured from the wrong JSON member (the item count,
/// not the id): every checkout echoes a cart that is not the session's,
/// the shop refuses it and counts a mismatch, and each refusal is a
/// consistency error of `checkout` that restarts the session.
#[test]
fn a_wrong_cart_is_refused_and_counted() {
    let app = App::start("ecommerce", &[]);
    let dir = TempDir::new("sessions-wrong-cart");
    let w = workload(&dir, "ecommerce.toml", |s| {
        let wrong = s.replace("$.cart.id", "$.cart.items");
        assert_ne!(wrong, s);
        wrong
    });
    let r = run(&dir, &w, &app.url(), "uring");
    let s = app.stats();
    let (n, consistency, captures, restarts) = class(&r, "checkout");
    assert!(n > 0 && consistency == n, "{}", r.show());
    assert_eq!((captures, restarts), (0, consistency), "{}", r.show());
    within(
        s["mismatches"].as_u64().unwrap(),
        consistency,
        SESSIONS,
        "mismatches",
        &r,
    );
    assert_eq!(s["no_session"], 0, "{s}");
    for name in &SHOP[..3] {
        assert_eq!(class(&r, name).1, 0, "{name}\n{}", r.show());
    }
}

/// A capture that finds nothing is a named consistency error of its class,
/// and the session starts over rather than send `{token}` empty: the
/// server sees logins only.
#[test]
fn a_capture_that_finds_nothing_restarts_the_session() {
    let app = App::start("banking", &[]);
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

/// One session start in 5 gets no cookie: the session's next request is
/// refused (no session), counted on `classes[1]` and restarted; the rest
/// run clean.
fn dropped_cookies_restart_their_sessions(app: &App, dir: &TempDir, w: &str, classes: &[&str]) {
    let r = run(dir, w, &app.url(), "uring");
    let s = app.stats();
    let (_, consistency, captures, restarts) = class(&r, classes[1]);
    assert!(consistency > 0, "{}", r.show());
    assert_eq!((captures, restarts), (0, consistency), "{}", r.show());
    let (dropped, refused) = (
        s["dropped_cookies"].as_u64().unwrap(),
        s["no_session"].as_u64().unwrap(),
    );
    within(refused, consistency, SESSIONS, "no_session", &r);
    within(dropped, refused, SESSIONS, "dropped cookies", &r);
    assert_eq!(s["mismatches"], 0, "{s}");
    for name in [classes[0]].iter().chain(&classes[2..]) {
        assert_eq!(class(&r, name).1, 0, "{name}\n{}", r.show());
    }
}

#[test]
fn a_dropped_cookie_restarts_its_session() {
    let app = App::start("banking", &["--drop-cookie", "5"]);
    let dir = TempDir::new("sessions-drop");
    let w = banking(&dir, |s| s);
    dropped_cookies_restart_their_sessions(&app, &dir, &w, &CLASSES);
}

#[test]
fn a_dropped_shop_cookie_restarts_its_session() {
    let app = App::start("ecommerce", &["--drop-cookie", "5"]);
    let dir = TempDir::new("sessions-drop-shop");
    let w = workload(&dir, "ecommerce.toml", |s| s);
    dropped_cookies_restart_their_sessions(&app, &dir, &w, &SHOP);
}

#[test]
fn a_dropped_support_cookie_restarts_its_session() {
    let dir = TempDir::new("sessions-drop-support");
    let (w, files) = support_workload(&dir);
    let app = App::start("support", &["--files", &files, "--drop-cookie", "5"]);
    dropped_cookies_restart_their_sessions(&app, &dir, &w, &SUPPORT);
}

/// `--app support` needs the downloads (`--files`), the others serve none:
/// both refused with exit 2 before listening.
#[test]
fn support_needs_files_and_only_it() {
    for args in [
        &["serve", "--app", "support", "--for", "1s"][..],
        &["serve", "--app", "banking", "--files", ".", "--for", "1s"],
    ] {
        let (status, out, err, _) = run_xload_with_timeout(args, HARD_TIMEOUT);
        assert_eq!(exit_code(status), 2, "{args:?}\n{out}\n{err}");
        assert!(err.contains("--files"), "{args:?}\n{err}");
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
