//! The workload library end to end on text: parse errors name line and key,
//! plans are deterministic, the checker catches what it must.

use std::path::Path;

use ring::digest;
use xload_testkit::TempDir;
use xload_workload::{parse, sha256_hex, Checker, Failure, Flow, RequestPlan, Think};

fn url() -> xload_http::Url {
    xload_http::parse_url("http://127.0.0.1:8080/").unwrap()
}

fn err(toml: &str) -> String {
    parse(toml, "workload.toml", Path::new("."))
        .unwrap_err()
        .to_string()
}

#[test]
fn parse_errors_name_the_file_line_and_key() {
    let cases = [
        ("[classes.static]\npath = \"/a\"\nweight = -1\n", "workload.toml:3: classes.static.weight: expected a positive number"),
        ("[classes.static]\npath = \"/a\"\nwieght = 1\n", "workload.toml:3: classes.static.wieght: unknown key; expected one of: method, path, n, headers, body, weight, check, limits, capture"),
        ("[classes.a]\npath = \"a\"\n", "workload.toml:2: classes.a.path: expected a path starting with '/'"),
        ("[classes.a]\npath = \"/{n}\"\n", "workload.toml:2: classes.a.path: uses {n} but the class has no `n`"),
        ("[classes.a]\npath = \"/\"\n\n[classes.a.check]\nstatus = [200, 700]\n", "workload.toml:5: classes.a.check.status[1]: expected a status code from 100 to 599"),
        ("[classes.a]\npath = \"/\"\nlimits = { p99 = \"5 parsecs\" }\n", "workload.toml:3: classes.a.limits.p99: \"5 parsecs\": unknown unit (use ns, us, ms, s, m or h)"),
        ("[classes.a]\npath = \"/\"\nmethod = \"GE T\"\n", "workload.toml:1: classes.a: invalid method \"GE T\": must be an HTTP token such as GET or POST"),
        ("[classes.a]\npath = \"/\"\ncheck = { sha256 = \"manifest\" }\n", "workload.toml:3: classes.a.check.sha256: needs a top-level `manifest = \"PATH\"`"),
        ("[classes.a]\npath = \"/\"\n[session]\nsequence = [\"a\", \"b\"]\n", "workload.toml:4: session.sequence[1]: no class named \"b\""),
        ("seed = 1\n", "workload.toml:1: classes: missing: a workload needs at least one [classes.NAME] table"),
        ("[classes.a\n", "workload.toml:1: "),
        ("[classes.a]\npath = \"/{tokn}\"\n", "workload.toml:2: classes.a.path: uses {tokn} but no class captures \"tokn\""),
        ("[classes.a]\npath = \"/\"\nheaders = { X-T = \"{t}\" }\n", "workload.toml:3: classes.a.headers.X-T: uses {t} but no class captures \"t\""),
        ("[classes.a]\npath = \"/\"\ncapture = { t = { json = \"cart.id\" } }\n", "workload.toml:3: classes.a.capture.t.json: expected a JSON path"),
        ("[classes.a]\npath = \"/\"\ncapture = { t = { body_regex = \"(\" } }\n", "workload.toml:3: classes.a.capture.t.body_regex: regex parse error"),
        ("[classes.a]\npath = \"/\"\ncapture = { t = { cookie = \"sid\" } }\n", "workload.toml:3: classes.a.capture.t.cookie: unknown key; expected one of: header, body_regex, json"),
        ("[classes.a]\npath = \"/\"\ncapture = { t = { } }\n", "workload.toml:3: classes.a.capture.t: expected exactly one of"),
        ("[classes.a]\npath = \"/\"\ncapture = { n = { header = \"X\" } }\n", "workload.toml:3: classes.a.capture.n: a capture name is"),
        ("[classes.a]\npath = \"/\"\nmethod = \"POST\"\nbody = \"id={t}\"\nheaders = { Content-Length = \"6\" }\ncapture = { t = { header = \"X\" } }\n", "workload.toml:5: classes.a.headers: a body with {NAME} values"),
        ("[classes.a]\npath = \"/\"\n[session]\nsequence = [\"a\"]\ncookies = 1\n", "workload.toml:5: session.cookies: expected true or false"),
    ];
    for (toml, want) in cases {
        let got = err(toml);
        assert!(got.starts_with(want), "{toml:?}\n got: {got}\nwant: {want}");
    }
}

#[test]
fn a_full_workload_parses() {
    let toml = r#"
        seed = 9
        [classes.home]
        method = "POST"
        path = "/login"
        headers = { "X-Test" = "1" }
        body = { size = 30 }
        check = { status = [200, 302], contains = ["a", "b"] }
        limits = { mean = "10ms", "p99.9" = "1s", p50 = "5ms" }
        [classes.item]
        path = "/item/{n}"
        n = { list = ["x", "y"], zipf = 1.2 }
        [session]
        start = "home"
        think = { uniform = ["10ms", "20ms"] }
        [session.markov.home]
        item = 1
        [session.markov.item]
        item = 3
        home = 1
    "#;
    let w = parse(toml, "w.toml", Path::new(".")).unwrap();
    assert_eq!(w.seed, 9);
    assert_eq!(w.classes[0].body.len(), 30);
    assert_eq!(
        w.classes[0]
            .limits
            .percentiles
            .iter()
            .map(|p| p.0)
            .collect::<Vec<_>>(),
        [50.0, 99.9]
    );
    let session = w.session.unwrap();
    assert!(matches!(session.think, Think::Uniform(..)));
    let Flow::Markov { start, rows } = session.flow else {
        panic!("markov")
    };
    assert_eq!(start, [1.0, 0.0]);
    assert_eq!(rows, [vec![0.0, 1.0], vec![1.0, 3.0]]);
}

#[test]
fn plan_is_deterministic_and_prebuilt() {
    let toml = "[classes.a]\npath = \"/a/{n}\"\nn = { range = [1, 50], zipf = 1.0 }\nweight = 3\n[classes.b]\npath = \"/b\"\nmethod = \"HEAD\"\n";
    let w = parse(toml, "w.toml", Path::new(".")).unwrap();
    let base = xload_http::parse_url("http://127.0.0.1:8080/prefix/").unwrap();
    let plan = RequestPlan::build(&w, &base).unwrap();
    assert_eq!(plan.classes[0].variants.len(), 50);
    assert!(plan.classes[1].head);
    assert!(plan.classes[0].variants[6]
        .request
        .starts_with(b"GET /prefix/a/7 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"));
    let a = plan.schedule(5, 4000);
    assert_eq!(a, plan.schedule(5, 4000));
    assert_ne!(a, plan.schedule(6, 4000));
    let share_a = a.iter().filter(|p| p.class == 0).count() as f64 / 4000.0;
    assert!((share_a - 0.75).abs() < 0.03, "{share_a}");
    // Zipf: the first rank is drawn far more often than the last.
    let first = a.iter().filter(|p| p.class == 0 && p.variant == 0).count();
    let last = a.iter().filter(|p| p.class == 0 && p.variant == 49).count();
    assert!(first > 10 * last.max(1), "{first} vs {last}");
    // Every pick has its own place among all the variants.
    let all: Vec<_> = plan.variants().collect();
    assert_eq!(all.len(), 51);
    for p in &a {
        assert_eq!(all[plan.index(*p)], plan.variant(*p));
    }
}

/// A manifest with two files in a temporary directory, and their bytes.
fn file_set(dir: &TempDir) -> Vec<Vec<u8>> {
    let files: Vec<Vec<u8>> = vec![
        (0..5000u32).map(|i| (i * 7) as u8).collect(),
        b"hello world".to_vec(),
    ];
    let mut manifest = String::new();
    for (i, body) in files.iter().enumerate() {
        let d = digest::digest(&digest::SHA256, body);
        let hex = sha256_hex(d.as_ref().try_into().unwrap());
        manifest.push_str(&format!("{hex} {} f{i}.bin\n", body.len()));
    }
    dir.put("MANIFEST", &manifest);
    files
}

#[test]
fn checker_catches_one_corrupted_byte_and_a_wrong_length() {
    let dir = TempDir::new("workload-check");
    let files = file_set(&dir);
    let toml = "manifest = \"MANIFEST\"\n[classes.f]\npath = \"/{n}\"\nn = { manifest = true }\ncheck = { status = [200], body_size = \"manifest\", sha256 = \"manifest\" }\n";
    let w = parse(toml, "w.toml", dir.path()).unwrap();
    let plan = RequestPlan::build(&w, &url()).unwrap();
    let class = &plan.classes[0];
    assert!(class.needs_body());
    let v = &class.variants[0];
    assert_eq!((v.path.as_str(), v.body_size), ("/f0.bin", Some(5000)));
    let mut c = Checker::new();
    let run = |c: &mut Checker, body: &[u8], status: u16| {
        c.start(v);
        c.status(status);
        for piece in body.chunks(777) {
            c.body(class, piece);
        }
        c.finish(class, v, body.len() as u64)
    };
    assert_eq!(run(&mut c, &files[0], 200), Ok(()));
    let mut bad = files[0].clone();
    bad[4321] ^= 1;
    assert_eq!(run(&mut c, &bad, 200), Err(Failure::Sha256));
    assert_eq!(
        run(&mut c, &files[0][..4999], 200),
        Err(Failure::BodySize {
            expected: 5000,
            got: 4999
        })
    );
    assert_eq!(
        run(&mut c, &files[0], 500),
        Err(Failure::Status { got: 500 })
    );
    // The checker is reused: a good response after bad ones passes again.
    assert_eq!(run(&mut c, &files[0], 200), Ok(()));
}

#[test]
fn contains_and_not_contains_are_found_across_pieces() {
    let toml = "[classes.p]\npath = \"/\"\ncheck = { contains = [\"needle\", \"x\"], not_contains = \"bad thing\" }\n";
    let w = parse(toml, "w.toml", Path::new(".")).unwrap();
    let plan = RequestPlan::build(&w, &url()).unwrap();
    let (class, v) = (&plan.classes[0], &plan.classes[0].variants[0]);
    let mut c = Checker::new();
    let body = b"....nee|dle....x....bad thi|ng...";
    // Every split into single bytes and two-piece splits.
    for split in 0..body.len() {
        let mut run = |pieces: &[&[u8]]| {
            c.start(v);
            c.status(200);
            for p in pieces {
                c.body(
                    class,
                    &p.iter().copied().filter(|&b| b != b'|').collect::<Vec<_>>(),
                );
            }
            c.finish(class, v, 0)
        };
        let (a, b) = body.split_at(split);
        assert_eq!(run(&[a, b]), Err(Failure::Forbidden(0)), "split {split}");
        let singles: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(run(&singles), Err(Failure::Forbidden(0)));
        assert_eq!(run(&[b"needle x"]), Ok(()));
        assert_eq!(run(&[b"need", b"le"]), Err(Failure::Missing(1)));
    }
}

#[test]
fn shipped_example_workload_parses() {
    let dir = TempDir::new("workload-example");
    dir.mkdir("site");
    dir.mkdir("workloads");
    let hex = "00".repeat(32);
    dir.put("site/MANIFEST", &format!("{hex} 1 a\n{hex} 2 b\n"));
    let src = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../workloads/static.toml"
    ))
    .unwrap();
    dir.put("workloads/static.toml", &src);
    let w = xload_workload::load(&dir.join("workloads/static.toml")).unwrap();
    assert_eq!(w.classes.len(), 2);
    let plan = RequestPlan::build(&w, &url()).unwrap();
    assert_eq!(plan.classes[0].variants[1].body_size, Some(2));
    assert!(w.session.is_some());
}

#[test]
fn captured_values_fill_path_headers_and_body() {
    let toml = r#"
        [classes.login]
        method = "POST"
        path = "/login"
        body = "user=ann"
        capture = { token = { header = "X-Token" }, account = { body_regex = "acct=([0-9]+)" } }
        [classes.summary]
        path = "/acct/{account}?v={n}"
        n = { list = ["1"] }
        headers = { X-Token = "{token}" }
        capture = { cart = { json = "$.cart.id" } }
        [classes.transfer]
        method = "POST"
        path = "/transfer"
        body = '{"from": "{account}", "cart": {cart}, "lit": "{other}"}'
        [session]
        sequence = ["login", "summary", "transfer"]
        cookies = false
    "#;
    let w = parse(toml, "w.toml", Path::new(".")).unwrap();
    let slot = |name: &str| 1u64 << w.captures.iter().position(|c| c == name).unwrap();
    assert_eq!(w.captures.len(), 3);
    assert!(!w.session.as_ref().unwrap().cookies);
    assert_eq!(
        (w.classes[0].uses, w.classes[1].uses, w.classes[2].uses),
        (
            0,
            slot("token") | slot("account"),
            slot("account") | slot("cart")
        )
    );
    let plan = RequestPlan::build(&w, &url()).unwrap();
    assert!(plan.stateful());
    let mut values = xload_workload::Captured::new(3);
    let head = b"HTTP/1.1 200 OK\r\nX-Token: t0k\r\nContent-Length: 9\r\n\r\n";
    for c in &plan.classes[0].captures {
        values.take(c, head, b"acct=4711").unwrap();
    }
    values
        .take(&plan.classes[1].captures[0], b"", br#"{"cart":{"id":99}}"#)
        .unwrap();
    let render = |class: usize, cookie: &[u8]| {
        let mut out = Vec::new();
        plan.classes[class].variants[0].render(&values, &mut out, |o| o.extend_from_slice(cookie));
        String::from_utf8(out).unwrap()
    };
    let login = render(0, b"");
    assert_eq!(login.as_bytes(), &plan.classes[0].variants[0].request[..]);
    let summary = render(1, b"Cookie: sid=1\r\n");
    assert!(
        summary.starts_with("GET /acct/4711?v=1 HTTP/1.1\r\n"),
        "{summary}"
    );
    assert!(
        summary.contains("\r\nX-Token: t0k\r\n") && summary.ends_with("Cookie: sid=1\r\n\r\n"),
        "{summary}"
    );
    let transfer = render(2, b"");
    let body = r#"{"from": "4711", "cart": 99, "lit": "{other}"}"#;
    assert!(
        transfer.ends_with(&format!("Content-Length: {}\r\n\r\n{body}", body.len())),
        "{transfer}"
    );
    assert_eq!(transfer.matches("Content-Length").count(), 1, "{transfer}");
}
