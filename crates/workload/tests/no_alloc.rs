//! A warm session allocates nothing per request: the jar reuses its
//! cookies' buffers, captures reuse their slots, rendering reuses the
//! output buffer, and so does its HTTP/2 header block.

use std::path::Path;

use xload_testkit::alloc::{allocations, CountingAlloc};
use xload_workload::{parse, Captured, Jar, Origin, RequestPlan};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

#[test]
fn a_warm_session_allocates_nothing_per_request() {
    let toml = r#"
        [classes.login]
        method = "POST"
        path = "/login"
        body = "u=1"
        capture = { account = { body_regex = "acct=([0-9]+)" }, token = { header = "X-Token" } }
        [classes.transfer]
        method = "POST"
        path = "/transfer?acct={account}"
        body = "acct={account}&token={token}"
        headers = { X-Token = "{token}" }
    "#;
    let w = parse(toml, "w.toml", Path::new(".")).unwrap();
    let url = xload_http::parse_url("http://127.0.0.1:8080/").unwrap();
    let plan = RequestPlan::build(&w, &url).unwrap();
    let mut jar = Jar::new();
    let mut values = Captured::new(plan.captures.len());
    let mut out = Vec::with_capacity(1024);
    let origin = Origin {
        host: "127.0.0.1",
        path: b"/transfer",
        https: false,
    };
    let head = b"HTTP/1.1 200 OK\r\nX-Token: 123456\r\nSet-Cookie: SID=00ff; Path=/\r\n\r\n";
    let body = b"<a href=\"/account?acct=100042\">";
    // Over HTTP/2 the rendered bytes become a header block, in buffers reused too.
    let mut h2 = xload_http::h2::H2Request::empty();
    let mut round = || {
        jar.clear();
        values.clear();
        jar.set(b"SID=00ff; Path=/", origin, 0, 0);
        for c in &plan.classes[0].captures {
            values.take(c, head, body).unwrap();
        }
        out.clear();
        plan.classes[1].variants[0].render(&values, &mut out, |o| {
            jar.write_header(origin, 1, o);
        });
        assert!(h2.render_http1(&out, false));
    };
    // Warm: the jar's spare cookie, the regex's match cache.
    for _ in 0..3 {
        round();
    }
    let before = allocations();
    for _ in 0..100 {
        round();
    }
    assert_eq!(allocations() - before, 0);
    assert_eq!(h2.body(), b"acct=100042&token=123456");
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.starts_with("POST /transfer?acct=100042 HTTP/1.1\r\n")
            && text.contains("X-Token: 123456\r\n")
            && text.ends_with("Cookie: SID=00ff\r\n\r\nacct=100042&token=123456"),
        "{text}"
    );
}
