//! Open loop: the measured window's requests and in-flight requests are its
//! own sends, exactly: answers to the warm-up's sends that come back inside
//! the window are not its requests, and a warm-up's backlog is not sent in
//! it. A server holding every answer 300 ms makes ~30 warm-up requests
//! certain to be answered after the window opened, whatever the machine.

mod support;

use std::time::Duration;

use support::{read_json, run_xload, Behavior, TempDir, TestServer};

#[test]
fn requests_plus_in_flight_are_the_windows_sends_exactly() {
    let server = TestServer::start(Behavior::Delay {
        delay: Duration::from_millis(300),
    });
    let dir = TempDir::new("window-accounting");
    let json = dir.join_str("r.json");
    let url = server.url("/");
    let (status, stdout, stderr, _) = run_xload([
        "--rate", "100", "-c", "64", "--warmup", "600ms", "-d", "1s", "--json", &json, &url,
    ]);
    assert!(status.success(), "{stdout}\n{stderr}");
    let r = read_json(&json);
    let requests = r["requests"].as_u64().expect("requests");
    let in_flight = r["unanswered_at_end"]["in_flight"]
        .as_u64()
        .expect("in_flight");
    let sends = r["sends"].as_u64().expect("sends");
    assert_eq!(
        requests + in_flight,
        sends,
        "requests {requests} + in flight {in_flight} against the window's sends {sends}"
    );
    // The window's answers are its sends' less those 300 ms from its end.
    assert!(in_flight > 0 && requests > 0, "{r:#}");
}
