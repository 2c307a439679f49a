//! deploy/kubernetes/xload-job.yaml, the Indexed Job of generators: its
//! fields are asserted line by line (no YAML parser in the dependency tree),
//! and its container's command is run as a pod would run it (through
//! /bin/sh, with `JOB_COMPLETION_INDEX` and the manifest's environment)
//! against a loopback test server, with a smaller load.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use support::run::{exit_code, xload_bin, XloadChild};
use support::{Behavior, TempDir, TestServer};
use xload_stats::walltime::format_rfc3339_us;
use xload_stats::Report;

fn manifest() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes/xload-job.yaml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The value of the first `key: value` line (trimmed, quotes removed).
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let rest = l.trim_start().strip_prefix(key)?.strip_prefix(':')?;
        Some(rest.trim().trim_matches('"'))
    })
}

/// The container's environment: each `- name: N` with the `value:` after it.
fn env(text: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some(name) = l.trim_start().strip_prefix("- name: ") {
            if let Some(v) = lines.get(i + 1).and_then(|n| field(n, "value")) {
                out.push((name.trim().to_string(), v.to_string()));
            }
        }
    }
    out
}

/// The folded (`>-`) script under `args:`: its lines joined by spaces.
fn script(text: &str) -> String {
    let mut lines = text.lines().skip_while(|l| l.trim() != "args:").skip(1);
    let head = lines.next().expect("a line after args:");
    assert_eq!(head.trim(), "- >-", "args is one folded string");
    let indent = |l: &str| l.len() - l.trim_start().len();
    let body: Vec<&str> = lines.take_while(|l| indent(l) > indent(head)).collect();
    body.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ")
}

#[test]
fn the_job_is_indexed_one_pod_per_segment_on_the_host_network() {
    let text = manifest();
    assert!(!text.contains('\t'), "YAML has no tabs");
    for (key, want) in [
        ("apiVersion", "batch/v1"),
        ("kind", "Job"),
        ("completionMode", "Indexed"),
        ("restartPolicy", "Never"),
        ("backoffLimit", "0"),
        ("hostNetwork", "true"),
        ("command", r#"["/bin/sh", "-c"]"#),
        ("topologyKey", "kubernetes.io/hostname"),
    ] {
        assert_eq!(field(&text, key), Some(want), "{key}");
    }
    let env = env(&text);
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    // One segment per pod, all at once.
    let segments = get("SEGMENTS").expect("SEGMENTS");
    assert_eq!(field(&text, "completions"), Some(segments));
    assert_eq!(field(&text, "parallelism"), Some(segments));
    // Filled in when applied (envsubst), shared by every pod.
    assert_eq!(get("START_AT"), Some("${START_AT}"));
    assert_eq!(get("RUN_ID"), Some("${RUN_ID}"));
    // io_uring's seccomp note is kept with the setting it explains.
    let seccomp = text.find("seccompProfile:").expect("seccompProfile");
    assert_eq!(field(&text[seccomp..], "type"), Some("Unconfined"));
    assert!(text[..seccomp].contains("io_uring_setup"));
    let s = script(&text);
    for part in [
        r#"--segment "$((JOB_COMPLETION_INDEX + 1))/$SEGMENTS""#,
        r#"--start-at "$START_AT""#,
        r#"--run-id "$RUN_ID""#,
        "--json -",
    ] {
        assert!(s.contains(part), "{part} in {s}");
    }
}

#[test]
fn a_pod_runs_its_segment_at_the_shared_instant_and_writes_json_to_stdout() {
    let text = manifest();
    let server = TestServer::start(Behavior::Ok { body_len: 16 });
    let dir = TempDir::new("k8s-pod");
    // The image has xload on PATH; here, the binary under test.
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).expect("bin dir");
    std::os::unix::fs::symlink(xload_bin(), bin.join("xload")).expect("symlink");
    let log = dir.join("termination-log");
    let s = script(&text).replace("/dev/termination-log", &log.display().to_string());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_micros() as i64;
    let start_at = format_rfc3339_us(now + 700_000);
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c").arg(&s);
    for (k, v) in env(&text) {
        cmd.env(k, v);
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.env("PATH", path)
        .env("JOB_COMPLETION_INDEX", "2")
        .env("RUN_ID", "k8s-test")
        .env("START_AT", &start_at)
        .env("CONNECTIONS", "2")
        .env("RATE", "200")
        .env("DURATION", "500ms")
        .env("TARGET", server.url("/"));
    let out = XloadChild::spawn(cmd).wait_timeout(Duration::from_secs(30));
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(exit_code(out.status), 0, "{out:?}\n{said}");
    let r = Report::from_json(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
    assert_eq!(r.run.segment.as_deref(), Some("3/4"));
    assert_eq!(r.run.run_id.as_deref(), Some("k8s-test"));
    assert_eq!(r.run.start_at.as_deref(), Some(start_at.as_str()));
    assert!(r.requests > 0 && r.is_open_loop(), "{r:?}");
    assert!(
        said.contains("Requests"),
        "the text report is the termination message: {said}"
    );
}
