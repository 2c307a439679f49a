//! Static file sets: `xload files generate` is deterministic for a seed and
//! refuses bad input, `xload files verify` names what differs, and `xload
//! serve --files` answers a generated set byte for byte (GET, HEAD, 404, over
//! TLS too) as nginx serving the same directory does.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::nginx::{Nginx, NginxOptions};
use support::run::{exit_code, run_xload, TempDir};
use support::serve::Serve;
use support::tls::{stream, SelfSigned};
use xload_files::{sha256, Manifest};

/// A generated set of 1,000 files (specweb sizes, seed 1) in `dir/site`.
fn site(dir: &TempDir) -> PathBuf {
    let site = dir.join("site");
    let (status, out, err, _) = run_xload([
        "files",
        "generate",
        site.to_str().unwrap(),
        "--count",
        "1000",
    ]);
    assert!(status.success(), "{out}{err}");
    assert!(out.contains("1000 files"), "{out}");
    site
}

/// Every 37th file of the set's manifest, and the manifest.
fn sample(site: &Path) -> (Manifest, Vec<usize>) {
    let m = Manifest::load(&site.join("MANIFEST")).unwrap();
    assert_eq!(m.entries.len(), 1000);
    let picks = (0..m.entries.len()).step_by(37).collect();
    (m, picks)
}

/// One answer: status, head fields (lowercase names) and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one answer framed by Content-Length (none for HEAD) from `r`,
/// keeping what follows it in `buf`.
fn read_answer(r: &mut impl Read, buf: &mut Vec<u8>, head_only: bool) -> Answer {
    let mut chunk = [0u8; 65536];
    let end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let k = r.read(&mut chunk).expect("read");
        assert!(k > 0, "closed before a whole head");
        buf.extend_from_slice(&chunk[..k]);
    };
    let head = String::from_utf8(buf[..end].to_vec()).expect("ASCII head");
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap()[9..12].parse().expect("status");
    let fields: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    buf.drain(..end);
    let mut a = Answer {
        status,
        fields,
        body: Vec::new(),
    };
    let len: usize = a
        .field("content-length")
        .expect("Content-Length")
        .parse()
        .unwrap();
    let len = if head_only { 0 } else { len };
    while buf.len() < len {
        let k = r.read(&mut chunk).expect("read");
        assert!(k > 0, "closed before the whole body");
        buf.extend_from_slice(&chunk[..k]);
    }
    a.body = buf.drain(..len).collect();
    a
}

/// GETs (or HEADs) `paths` in order on one keep-alive connection, pipelined
/// by `depth`.
fn fetch(s: &mut (impl Read + Write), method: &str, paths: &[String], depth: usize) -> Vec<Answer> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    for group in paths.chunks(depth) {
        let mut req = String::new();
        for p in group {
            req.push_str(&format!("{method} {p} HTTP/1.1\r\nHost: localhost\r\n\r\n"));
        }
        s.write_all(req.as_bytes()).unwrap();
        for _ in group {
            out.push(read_answer(s, &mut buf, method == "HEAD"));
        }
    }
    out
}

/// A running `xload serve --cpus 0 --files SITE` (and any other options).
fn serve_files(site: &Path, extra: &[&str]) -> Serve {
    let site = site.display().to_string();
    let mut args = vec!["--cpus", "0", "--files", site.as_str()];
    args.extend_from_slice(extra);
    Serve::start(&args)
}

/// Every answer is the manifest's file: 200, its Content-Length, its bytes.
fn assert_answers_match(m: &Manifest, picks: &[usize], answers: &[Answer], who: &str) {
    assert_eq!(answers.len(), picks.len());
    for (&i, a) in picks.iter().zip(answers) {
        let e = &m.entries[i];
        assert_eq!(a.status, 200, "{who}: {}", e.path);
        assert_eq!(
            a.field("content-length"),
            Some(&*e.size.to_string()),
            "{who}: {}",
            e.path
        );
        assert_eq!(sha256(&a.body), e.sha256, "{who}: {} differs", e.path);
    }
}

#[test]
fn generate_is_deterministic_for_a_seed() {
    let dir = TempDir::new("files-seed");
    let gen = |name: &str, seed: &str| {
        let path = dir.join(name);
        let (status, out, err, _) = run_xload([
            "files",
            "generate",
            path.to_str().unwrap(),
            "--count",
            "150",
            "--sizes",
            "list:1k:40,10k:30,100k:20,1m:10",
            "--seed",
            seed,
        ]);
        assert!(status.success(), "{out}{err}");
        let text = std::fs::read_to_string(path.join("MANIFEST")).unwrap();
        (Manifest::load(&path.join("MANIFEST")).unwrap(), text)
    };
    let (a, text_a) = gen("a", "7");
    let (_, text_b) = gen("b", "7");
    let (c, _) = gen("c", "8");
    assert_eq!(text_a, text_b, "same seed, same manifest");
    assert_ne!(a, c, "another seed, another set");
    assert_eq!(a.entries.len(), 150);
    assert_eq!(a.entries[0].path, "dir000/file00000.bin");
    assert_eq!(a.entries[149].path, "dir001/file00149.bin");
    for e in &a.entries {
        assert!(
            [1 << 10, 10 << 10, 100 << 10, 1 << 20].contains(&e.size),
            "{e:?}"
        );
        let bytes = std::fs::read(dir.join("b").join(&e.path)).unwrap();
        assert_eq!(sha256(&bytes), e.sha256, "{}", e.path);
    }
    let (status, out, _, _) = run_xload(["files", "verify", dir.join_str("a").as_str()]);
    assert!(status.success(), "{out}");
    assert!(out.contains("150 files"), "{out}");
}

#[test]
fn bad_input_is_a_usage_error_that_says_why() {
    let dir = TempDir::new("files-bad");
    dir.put("full/x", "x");
    let full = dir.join_str("full");
    let fresh = dir.join_str("fresh");
    let cases: [(&[&str], &str); 6] = [
        (
            &["generate", &full, "--count", "3"],
            "is not empty (--force",
        ),
        (
            &["generate", &fresh, "--count", "3", "--sizes", "zipf"],
            "expected specweb",
        ),
        (
            &[
                "generate",
                &fresh,
                "--count",
                "3",
                "--sizes",
                "uniform:9..2",
            ],
            "larger than MAX",
        ),
        (
            &["generate", &fresh, "--count", "3", "--sizes", "fixed:100m"],
            "64 MiB",
        ),
        (
            &["generate", &dir.join_str("full/x"), "--count", "3"],
            "not a directory",
        ),
        (&["verify", &fresh], "MANIFEST"),
    ];
    for (args, want) in cases {
        let (status, out, err, _) = run_xload(["files"].iter().chain(args));
        let code = if args[0] == "verify" { 1 } else { 2 };
        assert_eq!(exit_code(status), code, "{args:?}: {out}{err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // --force writes into the directory that is not empty.
    let (status, _, err, _) = run_xload(["files", "generate", &full, "--count", "3", "--force"]);
    assert!(status.success(), "{err}");
    // A malformed manifest is bad input too, named by file and line.
    dir.put("full/MANIFEST", "# set\nnot a line\n");
    let (status, _, err, _) = run_xload(["files", "verify", &full]);
    assert_eq!(exit_code(status), 2, "{err}");
    assert!(
        err.contains("MANIFEST:2: expected 64 hex digits of SHA-256"),
        "{err}"
    );
    // serve --files of something that is not a directory.
    let (status, _, err, _) =
        run_xload(["serve", "--files", &dir.join_str("full/x"), "--for", "1s"]);
    assert_eq!(exit_code(status), 2, "{err}");
    assert!(
        err.contains("--files") && err.contains("not a directory"),
        "{err}"
    );
}

#[test]
fn verify_names_the_files_that_differ() {
    let dir = TempDir::new("files-verify");
    let set = dir.join("set");
    let (status, _, err, _) = run_xload([
        "files",
        "generate",
        set.to_str().unwrap(),
        "--count",
        "20",
        "--sizes",
        "fixed:3k",
    ]);
    assert!(status.success(), "{err}");
    // One byte changed, one file gone, one cut short, one not listed.
    let flip = set.join("dir000/file00004.bin");
    let mut bytes = std::fs::read(&flip).unwrap();
    bytes[1234] ^= 1;
    std::fs::write(&flip, bytes).unwrap();
    std::fs::remove_file(set.join("dir000/file00007.bin")).unwrap();
    std::fs::write(set.join("dir000/file00011.bin"), b"short").unwrap();
    std::fs::write(set.join("dir000/file00013.bin"), vec![b'x'; 4000]).unwrap();
    std::fs::write(set.join("extra.txt"), b"x").unwrap();
    let (status, out, err, _) = run_xload(["files", "verify", set.to_str().unwrap()]);
    assert_eq!(exit_code(status), 1, "{out}{err}");
    assert!(
        out.contains("dir000/file00004.bin: SHA-256 differs"),
        "{out}"
    );
    assert!(out.contains("dir000/file00007.bin: missing"), "{out}");
    assert!(
        out.contains("dir000/file00011.bin: 5 bytes, the manifest says 3072"),
        "{out}"
    );
    assert!(
        out.contains("dir000/file00013.bin: 4000 bytes, the manifest says 3072"),
        "{out}"
    );
    assert!(err.contains("4 of 20 files do not match"), "{err}");
    assert!(
        err.contains("1 files not in the manifest, e.g. extra.txt"),
        "{err}"
    );
}

#[test]
fn serve_files_answers_get_head_and_404_with_the_sets_bytes() {
    let dir = TempDir::new("files-serve");
    let site = site(&dir);
    let (m, picks) = sample(&site);
    let srv = serve_files(&site, &[]);
    let paths: Vec<String> = picks
        .iter()
        .map(|&i| format!("/{}", m.entries[i].path))
        .collect();
    // One at a time, then pipelined 8 deep, on keep-alive connections.
    assert_answers_match(
        &m,
        &picks,
        &fetch(&mut srv.connect(), "GET", &paths, 1),
        "serve",
    );
    assert_answers_match(
        &m,
        &picks,
        &fetch(&mut srv.connect(), "GET", &paths, 8),
        "serve",
    );
    let heads = fetch(&mut srv.connect(), "HEAD", &paths, 4);
    for (&i, a) in picks.iter().zip(&heads) {
        assert_eq!(a.status, 200);
        assert_eq!(
            a.field("content-length"),
            Some(&*m.entries[i].size.to_string())
        );
        assert!(a.body.is_empty());
    }
    // Normalised paths find the file; what is not in the set, or outside it, is 404.
    let e = &m.entries[picks[3]];
    let odd = [
        format!("/x/..//{}", e.path),
        format!("/{}?q=1", e.path.replace('/', "%2F")),
        "/nope".to_string(),
        "/../MANIFEST".to_string(),
        "/dir000/".to_string(),
        format!("/{}", e.path),
    ];
    let a = fetch(&mut srv.connect(), "GET", &odd, 6);
    assert_eq!(sha256(&a[0].body), e.sha256);
    assert_eq!(sha256(&a[1].body), e.sha256);
    for b in &a[2..5] {
        assert_eq!((b.status, &b.body[..]), (404, &b"not found\n"[..]));
    }
    assert_eq!(sha256(&a[5].body), e.sha256, "keep-alive after the 404s");
    // HTTP/1.0 and Connection: close end the connection after the answer.
    let mut s = srv.connect();
    write!(s, "GET /{} HTTP/1.0\r\n\r\n", e.path).unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let a = read_answer(&mut &[][..], &mut all, false);
    assert_eq!(sha256(&a.body), e.sha256);
    assert!(all.is_empty());
    let requests = 2 * paths.len() + heads.len() + odd.len() + 1;
    let out = srv.stop();
    assert!(
        out.contains("--files") && out.contains(": 1001 files, "),
        "{out}"
    );
    assert!(out.contains(&format!("{requests} requests")), "{out}");
    assert!(out.contains("(0 bad, 3 not found, 0 abandoned"), "{out}");
}

#[test]
fn serve_files_over_tls_gives_the_same_bytes() {
    let dir = TempDir::new("files-serve");
    let site = site(&dir);
    let (m, picks) = sample(&site);
    let cert = SelfSigned::new(&["localhost"]);
    let (cert_pem, key_pem) = cert.write(&dir);
    let srv = serve_files(
        &site,
        &[
            "--tls",
            "--cert",
            &cert_pem.display().to_string(),
            "--key",
            &key_pem.display().to_string(),
        ],
    );
    let mut tls = stream(srv.connect(), &cert.trusting_client());
    let paths: Vec<String> = picks
        .iter()
        .map(|&i| format!("/{}", m.entries[i].path))
        .collect();
    assert_answers_match(
        &m,
        &picks,
        &fetch(&mut tls, "GET", &paths, 4),
        "serve --tls",
    );
    let a = fetch(&mut tls, "GET", &["/nope".to_string()], 1);
    assert_eq!(a[0].status, 404);
}

#[test]
fn nginx_serving_the_same_directory_gives_the_same_bytes() {
    let dir = TempDir::new("files-serve");
    let site = site(&dir);
    let (m, picks) = sample(&site);
    let Some(nginx) = Nginx::start(NginxOptions {
        root: Some(site.clone()),
        ..NginxOptions::default()
    }) else {
        return;
    };
    let srv = serve_files(&site, &[]);
    let mut paths: Vec<String> = picks
        .iter()
        .map(|&i| format!("/{}", m.entries[i].path))
        .collect();
    let ours = fetch(&mut srv.connect(), "GET", &paths, 4);
    let mut s = TcpStream::connect(nginx.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let theirs = fetch(&mut s, "GET", &paths, 4);
    assert_answers_match(&m, &picks, &theirs, "nginx");
    for (a, b) in ours.iter().zip(&theirs) {
        // (Content-Type differs: the test's nginx has no mime.types.)
        assert_eq!(a.body, b.body);
        assert_eq!(a.field("content-length"), b.field("content-length"));
    }
    paths = vec!["/nope.bin".to_string()];
    let mut s = TcpStream::connect(nginx.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(fetch(&mut s, "GET", &paths, 1)[0].status, 404);
}

#[test]
fn xload_runs_against_one_file_of_the_set() {
    let dir = TempDir::new("files-serve");
    let site = site(&dir);
    let (m, picks) = sample(&site);
    let e = &m.entries[picks[1]];
    let srv = serve_files(&site, &[]);
    let url = format!("http://127.0.0.1:{}/{}", srv.port, e.path);
    let (status, out, err, _) = run_xload([url.as_str(), "-n", "2000", "-c", "4", "-t", "1"]);
    assert!(status.success(), "{out}{err}");
    assert!(out.contains("200: 2,000"), "{out}");
    let out = srv.stop();
    assert!(out.contains("2000 requests"), "{out}");
}

#[test]
fn held_file_answers_go_in_order_after_the_delay() {
    let dir = TempDir::new("files-delay");
    let site = site(&dir);
    let (m, picks) = sample(&site);
    let srv = serve_files(&site, &["--delay", "30ms"]);
    let paths: Vec<String> = picks[..6]
        .iter()
        .map(|&i| format!("/{}", m.entries[i].path))
        .chain(["/nope".to_string()])
        .collect();
    let t = Instant::now();
    let answers = fetch(&mut srv.connect(), "GET", &paths, 7);
    assert!(
        t.elapsed() >= Duration::from_millis(30),
        "{:?}",
        t.elapsed()
    );
    assert_answers_match(&m, &picks[..6], &answers[..6], "serve --delay");
    assert_eq!(answers[6].status, 404);
}
