//! HTTP/1.1 edge cases of a server's answer (issue 31), seen by the xload
//! binary with both engines: each answer is counted once, under the name of
//! what it is, and nothing waits for a request timeout that cannot help.
//!
//! Every run is bounded: `-d 800ms`, and a hard kill from the support code.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::run::exit_code;
use support::{read_json, run_xload_with_timeout, Behavior, TempDir, TestServer};
use xload_testkit::both_engines;

/// Far longer than the window: an answer that could only end by a request
/// timeout is counted as no error at all within the run.
const REQUEST_TIMEOUT: &str = "10s";

/// The report of `xload URL -c 2 -d 800ms --engine ENGINE` against a server
/// answering every request with `answer` (then closing, with `close`), and
/// the server. None when io_uring is unavailable here (a skip, said so).
fn run(answer: &'static [u8], close: bool, engine: &str) -> Option<(Value, TestServer)> {
    let server = TestServer::start(Behavior::Raw { answer, close });
    let dir = TempDir::new("edges");
    let json = dir.join("report.json");
    let json_arg = json.to_str().expect("utf-8 temp path");
    let url = server.url("/");
    let args = [
        &url[..],
        "-c",
        "2",
        "-d",
        "800ms",
        "--timeout",
        REQUEST_TIMEOUT,
        "--engine",
        engine,
        "--json",
        json_arg,
    ];
    let (status, stdout, stderr, elapsed) = run_xload_with_timeout(args, Duration::from_secs(30));
    if !json.exists() && engine == "uring" && stderr.contains("io_uring") {
        eprintln!("skipping the io_uring run: {}", stderr.trim());
        return None;
    }
    assert!(
        !stderr.contains("panicked"),
        "xload panicked\n{stdout}\n{stderr}"
    );
    assert!(
        elapsed < Duration::from_secs(6),
        "an 800 ms run took {elapsed:?}: it waited on something\n{stderr}"
    );
    assert!(
        json.exists(),
        "no report (exit {})\n{stdout}\n{stderr}",
        exit_code(status)
    );
    Some((read_json(&json), server))
}

fn count(report: &Value, pointer: &str) -> u64 {
    report.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// Defect 6: a 204 followed by body bytes is one broken answer, counted as
/// `body_after_bodiless_status` and not also as a 204 (nor as `bad_version`).
fn a_body_after_a_204_is_counted_once_by_its_name(engine: &str) {
    let Some((report, server)) = run(b"HTTP/1.1 204 No Content\r\n\r\nhello", false, engine) else {
        return;
    };
    let named = count(&report, "/parse_errors/body_after_bodiless_status");
    assert!(named > 0, "{report}");
    assert_eq!(count(&report, "/errors_total"), named, "{report}");
    assert_eq!(count(&report, "/status/204"), 0, "{report}");
    assert_eq!(count(&report, "/requests"), 0, "{report}");
    // One error per answer the server wrote (its last may still be in flight).
    let served = server.served();
    assert!(
        named <= served && served - named <= 2,
        "{named} errors, {served} answers"
    );
}

/// Defect 7: a length no body can reach is refused at once, not waited on.
fn impossible_lengths_are_errors_at_once(engine: &str) {
    let cases: [(&'static [u8], &str); 2] = [
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n",
            "bad_content_length",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
            "bad_chunk_size",
        ),
    ];
    for (answer, cause) in cases {
        let Some((report, _server)) = run(answer, false, engine) else {
            return;
        };
        let named = count(&report, &format!("/parse_errors/{cause}"));
        // Each connection fails at its first answer and is replaced, many
        // times in the window; a request timeout would have counted none.
        assert!(named > 2, "{cause}: {report}");
        assert_eq!(count(&report, "/errors_total"), named, "{cause}: {report}");
    }
}

/// Defect 13: an answer whose Connection list holds `close` ends the
/// connection, wherever keep-alive stands in the list.
fn a_connection_list_holding_close_closes(engine: &str) {
    let answer = b"HTTP/1.1 200 OK\r\nConnection: close, keep-alive\r\nContent-Length: 2\r\n\r\nok";
    let Some((report, server)) = run(answer, false, engine) else {
        return;
    };
    assert_eq!(count(&report, "/errors_total"), 0, "{report}");
    let requests = server.requests();
    assert!(requests > 2, "{report}");
    // The server keeps every connection open: only the client closed them,
    // one request each.
    assert!(
        requests <= server.accepted(),
        "{requests} requests over {} connections: a connection was reused\n{report}",
        server.accepted()
    );
}

/// Defect 14: codings that do not end in chunked: the body ends at the close
/// (RFC 9112 §6.3), a complete answer; one list over two lines that ends in
/// chunked is chunked.
fn transfer_codings_not_ending_in_chunked_end_at_the_close(engine: &str) {
    let answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nuntil the close";
    let Some((report, _server)) = run(answer, true, engine) else {
        return;
    };
    let ok = count(&report, "/status/200");
    assert!(ok > 2, "{report}");
    assert_eq!(count(&report, "/requests"), ok, "{report}");
    assert_eq!(count(&report, "/errors_total"), 0, "{report}");
    assert_eq!(
        count(&report, "/bytes"),
        ok * answer.len() as u64,
        "{report}"
    );

    let answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: deflate\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
    let Some((report, _server)) = run(answer, false, engine) else {
        return;
    };
    assert!(count(&report, "/status/200") > 2, "{report}");
    assert_eq!(count(&report, "/errors_total"), 0, "{report}");
}

both_engines!(
    a_body_after_a_204_is_counted_once_by_its_name,
    impossible_lengths_are_errors_at_once,
    a_connection_list_holding_close_closes,
    transfer_codings_not_ending_in_chunked_end_at_the_close,
);
