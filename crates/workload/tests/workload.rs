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
        ("[classes.static]\npath = \"/a\"\nwieght = 1\n", "workload.toml:3: classes.static.wieght: unknown key; expected one of: method, path, n, headers, body, weight, check, limits"),
        ("[classes.a]\npath = \"a\"\n", "workload.toml:2: classes.a.path: expected a path starting with '/'"),
        ("[classes.a]\npath = \"/{n}\"\n", "workload.toml:2: classes.a.path: uses {n} but the class has no `n`"),
        ("[classes.a]\npath = \"/\"\n\n[classes.a.check]\nstatus = [200, 700]\n", "workload.toml:5: classes.a.check.status[1]: expected a status code from 100 to 599"),
        ("[classes.a]\npath = \"/\"\nlimits = { p99 = \"5 parsecs\" }\n", "workload.toml:3: classes.a.limits.p99: \"5 parsecs\": unknown unit (use ns, us, ms, s, m or h)"),
        ("[classes.a]\npath = \"/\"\nmethod = \"GE T\"\n", "workload.toml:1: classes.a: invalid method \"GE T\": must be an HTTP token such as GET or POST"),
        ("[classes.a]\npath = \"/\"\ncheck = { sha256 = \"manifest\" }\n", "workload.toml:3: classes.a.check.sha256: needs a top-level `manifest = \"PATH\"`"),
        ("[classes.a]\npath = \"/\"\n[session]\nsequence = [\"a\", \"b\"]\n", "workload.toml:4: session.sequence[1]: no class named \"b\""),
        ("seed = 1\n", "workload.toml:1: classes: missing: a workload needs at least one [classes.NAME] table"),
        ("[classes.a\n", "workload.toml:1: "),
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
