//! `--fail-if` exit codes on runs and sweeps, `xload merge` (exact sums of
//! counters and histograms), and the run outputs: the per-second CSV and the
//! live progress line (shown on a terminal only).
//!
//! Runs here are short (0.3–2 s) closed-loop or low-rate runs against the
//! std-only test servers on loopback; their figures are counts, not timings,
//! so they do not depend on how busy the machine is.

mod support;

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use support::run::{exit_code, xload_bin};
use support::{run_xload, spawn_xload, Behavior, TempDir, TestServer};
use xload_stats::{Histogram, Report};

fn ok_server() -> TestServer {
    TestServer::start(Behavior::Ok { body_len: 16 })
}

/// A server whose every connection answers one request, then closes without
/// saying so: each connection's second request fails (a mix of responses and
/// errors in every run).
fn faulty_server() -> TestServer {
    TestServer::start(Behavior::CloseWithoutConnectionClose)
}

/// `xload ARGS`: (exit code, stdout, stderr).
fn xload(args: &[&str]) -> (i32, String, String) {
    let (status, stdout, stderr, _) = run_xload(args);
    (exit_code(status), stdout, stderr)
}

fn read_report(path: &Path) -> Report {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    Report::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

/// Runs `xload URL ARGS --json PATH`, asserts exit 0, returns the report.
fn run_to(url: &str, args: &[&str], path: &Path) -> Report {
    let mut all = vec![url.to_string()];
    all.extend(args.iter().map(|s| s.to_string()));
    all.extend(["--json".to_string(), path.display().to_string()]);
    let (status, stdout, stderr, _) = run_xload(&all);
    assert_eq!(
        exit_code(status),
        0,
        "xload {all:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    read_report(path)
}

// ---------------------------------------------------------------- --fail-if

#[test]
fn fail_if_p99_above_one_microsecond_exits_3_and_names_the_expression() {
    let server = ok_server();
    let (code, stdout, stderr) = xload(&[
        &server.url("/"),
        "-c",
        "2",
        "-d",
        "300ms",
        "--fail-if",
        "p99>1us",
    ]);
    assert_eq!(code, 3, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains("p99>1us"),
        "the violated expression is not on stderr:\n{stderr}"
    );
    // The report is still printed: a failed gate is a verdict, not a crash.
    assert!(stdout.contains("Latency"), "{stdout}");
    // Any percentile, read from the histogram: p95 too.
    let (code, _, stderr) = xload(&[
        &server.url("/"),
        "-c",
        "2",
        "-d",
        "300ms",
        "--fail-if",
        "p95>1us",
    ]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("p95>1us (measured"), "{stderr}");
    let (code, _, stderr) = xload(&[
        &server.url("/"),
        "-c",
        "2",
        "-d",
        "300ms",
        "--fail-if",
        "p95>1h",
    ]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn fail_if_errors_with_a_faulty_server_exits_3_but_errors_alone_do_not_fail() {
    let server = faulty_server();
    let dir = TempDir::new("gate-errors");
    let json = dir.join("run.json");
    let url = server.url("/");
    // Without a gate, a run with errors but with responses succeeds.
    let report = run_to(&url, &["-c", "2", "-d", "300ms"], &json);
    assert!(
        report.errors_total > 0 && report.requests > 0,
        "the faulty server should give both responses and errors: {:?} {}",
        report.errors,
        report.requests
    );
    let (code, stdout, stderr) = xload(&[&url, "-c", "2", "-d", "300ms", "--fail-if", "errors>0"]);
    assert_eq!(code, 3, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stderr.contains("errors>0"), "{stderr}");
    let (code, _, stderr) = xload(&[
        &url,
        "-c",
        "2",
        "-d",
        "300ms",
        "--fail-if",
        "error_rate>0.001",
    ]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("error_rate>0.001"), "{stderr}");
}

#[test]
fn gates_that_hold_exit_0() {
    let server = ok_server();
    let (code, stdout, stderr) = xload(&[
        &server.url("/"),
        "-c",
        "2",
        "-d",
        "300ms",
        "--fail-if",
        "rps<1",
        "--fail-if",
        "errors>0",
        "--fail-if",
        "p99>1h",
    ]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(!stderr.contains("threshold failed"), "{stderr}");
}

#[test]
fn open_loop_run_is_gated_on_its_corrected_latency() {
    let server = ok_server();
    let (code, _, stderr) = xload(&[
        &server.url("/"),
        "--rate",
        "200",
        "-c",
        "4",
        "-d",
        "300ms",
        "--fail-if",
        "p50>1us",
        "--fail-if",
        "rps<1",
    ]);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("p50>1us") && !stderr.contains("rps<1"),
        "{stderr}"
    );
}

#[test]
fn bad_fail_if_expressions_exit_2_before_any_traffic() {
    let server = ok_server();
    let url = server.url("/");
    for bad in [
        "p99>>5ms",
        "p99>50",
        "latency>5ms",
        "p99",
        "rps<lots",
        "errors>-1",
    ] {
        let (code, _, stderr) = xload(&[&url, "-c", "1", "-d", "300ms", "--fail-if", bad]);
        assert_eq!(code, 2, "--fail-if {bad:?}: {stderr}");
        assert!(
            stderr.contains(bad),
            "--fail-if {bad:?}: the message should quote it: {stderr}"
        );
        let (code, _, stderr) =
            xload(&["sweep", &url, "-c", "1,2", "-d", "300ms", "--fail-if", bad]);
        assert_eq!(code, 2, "sweep --fail-if {bad:?}: {stderr}");
    }
    // Checked before the run: not even the reachability probe connected.
    thread::sleep(Duration::from_millis(100));
    assert_eq!(
        server.accepted(),
        0,
        "a bad expression must stop xload before any connection"
    );
}

#[test]
fn sweep_fail_if_exits_3_naming_each_failing_step_after_writing_its_outputs() {
    let server = ok_server();
    let dir = TempDir::new("sweep-gate");
    let json = dir.join("sweep.json");
    let url = server.url("/");
    let (code, stdout, stderr) = xload(&[
        "sweep",
        &url,
        "-c",
        "1,2",
        "-d",
        "300ms",
        "--warmup",
        "100ms",
        "--fail-if",
        "p99>1us",
        "--fail-if",
        "rps<1",
        "--json",
        &json.display().to_string(),
    ]);
    assert_eq!(code, 3, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let failing: Vec<&str> = stderr.lines().filter(|l| l.contains("p99>1us")).collect();
    assert_eq!(failing.len(), 2, "one line per failing step:\n{stderr}");
    assert!(
        failing[0].contains("concurrency 1") && failing[1].contains("concurrency 2"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("rps<1"),
        "a gate that holds is not reported: {stderr}"
    );
    let doc = support::read_json(&json);
    assert_eq!(doc["steps"].as_array().map(Vec::len), Some(2), "{doc}");

    let (code, _, stderr) = xload(&[
        "sweep",
        &url,
        "-c",
        "1,2",
        "-d",
        "300ms",
        "--warmup",
        "100ms",
        "--fail-if",
        "rps<1",
    ]);
    assert_eq!(code, 0, "{stderr}");
}

// ---------------------------------------------------------------- merge

/// Asserts that `merged` holds, at every recorded value, the sum of the
/// counts of `parts` (and nothing else).
fn assert_histogram_is_sum(what: &str, merged: &Histogram<u64>, parts: &[Histogram<u64>]) {
    let total: u64 = parts.iter().map(|h| h.len()).sum();
    assert_eq!(merged.len(), total, "{what}: merged count");
    let mut checked = 0;
    for v in merged.iter_recorded() {
        let value = v.value_iterated_to();
        let expected: u64 = parts.iter().map(|h| h.count_at(value)).sum();
        assert_eq!(v.count_at_value(), expected, "{what}: count at {value} µs");
        checked += v.count_at_value();
    }
    assert_eq!(
        checked, total,
        "{what}: merged histogram has values no part has"
    );
    for h in parts {
        for v in h.iter_recorded() {
            assert!(
                merged.count_at(v.value_iterated_to()) >= v.count_at_value(),
                "{what}: a part's value is missing from the merge"
            );
        }
    }
}

fn sum_maps<'a>(
    maps: impl IntoIterator<Item = &'a std::collections::BTreeMap<String, u64>>,
) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for m in maps {
        for (k, n) in m {
            *out.entry(k.clone()).or_insert(0) += n;
        }
    }
    out
}

/// Runs made one after another: not one load, merged anyway.
const SEQUENTIAL: &[&str] = &["--allow-different-runs", "--allow-partial-overlap"];

/// `xload merge INPUTS FLAGS --json OUT`: asserts exit 0, returns the merged report.
fn merge(inputs: &[&Path], flags: &[&str], out: &Path) -> Report {
    let mut args: Vec<String> = vec!["merge".into()];
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.extend(flags.iter().map(|f| f.to_string()));
    args.extend(["--json".into(), out.display().to_string()]);
    let (status, stdout, stderr, _) = run_xload(&args);
    assert_eq!(
        exit_code(status),
        0,
        "xload {args:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    assert!(
        stdout.contains("Requests"),
        "merge prints the merged report: {stdout}"
    );
    read_report(out)
}

#[test]
fn merge_of_two_runs_sums_requests_errors_statuses_and_histograms_exactly() {
    let good = ok_server();
    let faulty = faulty_server();
    let dir = TempDir::new("merge-two");
    let (a_path, b_path, m_path) = (dir.join("a.json"), dir.join("b.json"), dir.join("m.json"));
    let a = run_to(&good.url("/"), &["-c", "2", "-d", "300ms"], &a_path);
    let b = run_to(&faulty.url("/"), &["-c", "3", "-d", "300ms"], &b_path);
    assert!(
        b.errors_total > 0,
        "run b should have errors: {:?}",
        b.errors
    );
    let m = merge(&[&a_path, &b_path], SEQUENTIAL, &m_path);

    assert_eq!(m.requests, a.requests + b.requests);
    assert_eq!(m.errors_total, a.errors_total + b.errors_total);
    assert_eq!(m.errors, sum_maps([&a.errors, &b.errors]));
    assert_eq!(m.status, sum_maps([&a.status, &b.status]));
    assert_eq!(m.bytes, a.bytes + b.bytes);
    assert_eq!(m.connections, 5);
    assert_eq!(m.target, "multiple", "two targets were merged");
    let hm = m.latency_histogram().expect("merged histogram decodes");
    let ha = a.latency_histogram().expect("histogram a decodes");
    let hb = b.latency_histogram().expect("histogram b decodes");
    assert_eq!(
        ha.len(),
        a.requests + a.unanswered_at_end.recorded,
        "one latency per response in a (and per request recorded unanswered at the end)"
    );
    assert_histogram_is_sum("merged latency", &hm, &[ha, hb]);
    // Percentiles are recomputed from the merged histogram, not averaged.
    assert_eq!(m.latency_us.p99, hm.value_at_quantile(0.99));
    assert_eq!(m.latency_us.max, hm.max());
    assert!(m.latency_us.max == a.latency_us.max.max(b.latency_us.max));
}

// Issue 22 changed this on purpose: a copy of a report (same host, same
// window start) is refused, where its requests used to count twice.
#[test]
fn merging_a_report_with_a_copy_of_itself_is_refused() {
    let server = faulty_server();
    let dir = TempDir::new("merge-self");
    let a_path = dir.join("a.json");
    run_to(&server.url("/"), &["-c", "2", "-d", "300ms"], &a_path);
    // A copy: the same path twice is refused (see below).
    let copy = dir.join("a-copy.json");
    std::fs::copy(&a_path, &copy).expect("copy");
    let (code, stdout, stderr) = xload(&[
        "merge",
        &a_path.display().to_string(),
        &copy.display().to_string(),
    ]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("{} is {} again", copy.display(), a_path.display()))
            && stderr.contains("counts its requests twice"),
        "{stderr}"
    );
    assert!(!stdout.contains("req/s"), "no merged report: {stdout}");
}

#[test]
fn merge_of_two_simultaneous_runs_equals_what_the_server_served() {
    let server = ok_server();
    let dir = TempDir::new("merge-hosts");
    let (a_path, b_path, m_path) = (dir.join("a.json"), dir.join("b.json"), dir.join("m.json"));
    let url = server.url("/");
    // Two generators at once, as on two hosts, each with its own report:
    // one run, one start.
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_micros() as i64;
    let at = xload_stats::walltime::format_rfc3339_us(now_us + 1_000_000);
    let children: Vec<_> = [&a_path, &b_path]
        .iter()
        .map(|p| {
            spawn_xload([
                url.clone(),
                "-c".into(),
                "2".into(),
                "-d".into(),
                "500ms".into(),
                "--run-id".into(),
                "two-at-once".into(),
                "--start-at".into(),
                at.clone(),
                "--json".into(),
                p.display().to_string(),
            ])
        })
        .collect();
    for child in children {
        let out = child.wait_timeout(Duration::from_secs(30));
        assert!(!out.timed_out && exit_code(out.status) == 0, "{out:?}");
    }
    let m = merge(&[&a_path, &b_path], &[], &m_path);
    // Every response the server wrote was counted by one of the two, except
    // at most one in flight per connection when the windows closed.
    server.assert_reconciles(m.requests, 4);
    assert_eq!(m.errors_total, 0);
    assert_eq!(m.status.get("200").copied(), Some(m.requests));
}

#[test]
fn merge_of_open_loop_runs_sums_targets_drops_and_uncorrected_histograms() {
    let server = ok_server();
    let dir = TempDir::new("merge-open");
    let (a_path, b_path, m_path) = (dir.join("a.json"), dir.join("b.json"), dir.join("m.json"));
    let url = server.url("/");
    let a = run_to(&url, &["--rate", "300", "-c", "4", "-d", "500ms"], &a_path);
    let b = run_to(&url, &["--rate", "200", "-c", "4", "-d", "500ms"], &b_path);
    let m = merge(&[&a_path, &b_path], SEQUENTIAL, &m_path);
    let open = |r: &Report| r.open_loop.clone().expect("an open-loop report");
    let (mo, ao, bo) = (open(&m), open(&a), open(&b));
    assert_eq!(mo.rate_target, 500.0);
    assert_eq!(m.requests, a.requests + b.requests);
    assert_eq!(mo.dropped, ao.dropped + bo.dropped);
    assert_eq!(mo.late_sends, ao.late_sends + bo.late_sends);
    let unc = |r: &Report| {
        r.latency_uncorrected_histogram()
            .expect("decodes")
            .expect("open-loop report has the uncorrected histogram")
    };
    assert_histogram_is_sum("uncorrected", &unc(&m), &[unc(&a), unc(&b)]);
    assert_histogram_is_sum(
        "corrected",
        &m.latency_histogram().expect("decodes"),
        &[
            a.latency_histogram().expect("decodes"),
            b.latency_histogram().expect("decodes"),
        ],
    );
}

#[test]
fn merge_of_a_file_that_is_not_a_report_exits_2_naming_it() {
    let server = ok_server();
    let dir = TempDir::new("merge-bad");
    let good = dir.join("good.json");
    run_to(&server.url("/"), &["-c", "1", "-d", "300ms"], &good);
    let text = dir.join("notes.txt");
    std::fs::write(&text, "hello, not JSON\n").expect("write");
    let other_json = dir.join("other.json");
    std::fs::write(&other_json, r#"{"name": "some other tool", "requests": 3}"#).expect("write");
    let sweep_doc = dir.join("sweep.json");
    std::fs::write(
        &sweep_doc,
        r#"{"schema": "xload-sweep/1", "target": "http://x/", "steps": [], "knee": null}"#,
    )
    .expect("write");
    let missing = dir.join("missing.json");
    for bad in [&text, &other_json, &sweep_doc, &missing] {
        let bad_arg = bad.display().to_string();
        let (code, stdout, stderr) = xload(&["merge", &good.display().to_string(), &bad_arg]);
        // An input that cannot be read, or is no report, is a bad argument.
        assert_eq!(code, 2, "merge with {bad_arg}: {stdout}{stderr}");
        assert!(
            stderr.contains(&bad_arg),
            "the message names the file {bad_arg}: {stderr}"
        );
        if bad != &missing {
            assert!(
                stderr.contains("not an xload report"),
                "the message says why: {stderr}"
            );
        }
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn merge_refuses_counters_whose_sum_exceeds_64_bits_naming_file_and_field() {
    let server = ok_server();
    let dir = TempDir::new("merge-wrap");
    let a = dir.join("a.json");
    run_to(&server.url("/"), &["-c", "1", "-d", "300ms"], &a);
    let good: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&a).expect("read")).expect("json");
    let edited = |name: &str, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v = good.clone();
        edit(&mut v);
        let path = dir.join(name);
        std::fs::write(&path, v.to_string()).expect("write");
        path.display().to_string()
    };
    let a = a.display().to_string();
    for (field, pointer) in [
        ("requests", "/requests"),
        ("bytes", "/bytes"),
        ("status.200", "/status/200"),
    ] {
        let b = edited(&format!("{field}.json"), &|v| {
            *v.pointer_mut(pointer).expect("the key is in every report") = u64::MAX.into();
        });
        let (code, stdout, stderr) = xload(&["merge", &a, &b, "--allow-different-runs"]);
        assert_eq!(code, 2, "{field}: {stdout}{stderr}");
        assert!(
            stderr.contains(&b) && stderr.contains(&format!("{field} is")),
            "the message names {b} and {field}: {stderr}"
        );
        assert!(!stdout.contains("req/s"), "no merged report: {stdout}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // One report alone holds such counts: printed as they are, no panic.
    let big = edited("alone.json", &|v| {
        v["requests"] = u64::MAX.into();
        v["errors_total"] = 7.into();
        v["unanswered_at_end"]["recorded"] = 3.into();
        v["duration_s"] = 1e300.into();
    });
    let (code, stdout, stderr) = xload(&["merge", &big]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("18,446,744,073,709,551,615"), "{stdout}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn merge_of_a_document_of_another_schema_names_that_schema() {
    let dir = TempDir::new("merge-schema");
    // A sweep's JSON (what `xload sweep --json` writes) and a report of a
    // later schema version: the message should say which schema it found.
    for (name, schema, text) in [
        (
            "sweep.json",
            "xload-sweep/1",
            r#"{"schema": "xload-sweep/1", "target": "http://x/", "mode": "rate", "steps": [], "knee": null}"#,
        ),
        (
            "v2.json",
            "xload/2",
            r#"{"schema": "xload/2", "requests": 1}"#,
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        let (code, _, stderr) = xload(&["merge", &path.display().to_string()]);
        assert_eq!(code, 2, "{stderr}");
        assert!(
            stderr.contains(schema) && stderr.contains("schema"),
            "merging {name} should name its schema {schema:?}: {stderr}"
        );
    }
}

#[test]
fn merge_refuses_open_and_closed_loop_reports_together() {
    let server = ok_server();
    let dir = TempDir::new("merge-loops");
    let (closed, open) = (dir.join("closed.json"), dir.join("open.json"));
    let a = run_to(&server.url("/"), &["-c", "2", "-d", "300ms"], &closed);
    let b = run_to(
        &server.url("/"),
        &["-c", "2", "-d", "300ms", "--rate", "500"],
        &open,
    );
    assert!(
        !a.interrupted && !b.interrupted,
        "a full run is not interrupted"
    );
    let (code, stdout, stderr) = xload(&[
        "merge",
        &closed.display().to_string(),
        &open.display().to_string(),
    ]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("{} is open loop", open.display()))
            && stderr.contains(&format!("{} closed loop", closed.display())),
        "the message names the files: {stderr}"
    );
    assert!(!stdout.contains("req/s"), "no merged report: {stdout}");
    // The same report twice (by another path too) would count twice.
    let again = dir.path().join(".").join("closed.json");
    let (code, stdout, stderr) = xload(&[
        "merge",
        &closed.display().to_string(),
        &again.display().to_string(),
    ]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains("counts its requests twice"), "{stderr}");
    // An output that cannot be written is found before anything is merged.
    let (code, stdout, stderr) = xload(&[
        "merge",
        &closed.display().to_string(),
        "--json",
        "/nonexistent-dir/x.json",
    ]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        stderr.contains("--json /nonexistent-dir/x.json"),
        "{stderr}"
    );
    assert!(!stdout.contains("req/s"), "nothing printed first: {stdout}");
}

#[test]
fn answers_outside_2xx_and_3xx_are_shown_and_gated() {
    let server = TestServer::start(Behavior::Status { code: 503 });
    let (code, stdout, stderr) = xload(&[
        &server.url("/"),
        "-c",
        "2",
        "-d",
        "300ms",
        "--fail-if",
        "errors>0",
    ]);
    assert_eq!(
        code, 0,
        "answers are not transport errors: {stdout}{stderr}"
    );
    assert!(stdout.contains("Non-2xx/3xx"), "{stdout}");
    let (code, _, stderr) = xload(&[
        &server.url("/"),
        "-c",
        "2",
        "-d",
        "300ms",
        "--fail-if",
        "non2xx>0",
    ]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("non2xx>0"), "{stderr}");
}

// ---------------------------------------------------------------- outputs

/// The CSV rows as (second, rps, p50_us, p99_us, errors).
fn csv_rows(text: &str, header: &str) -> Vec<Vec<f64>> {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(header), "CSV header of:\n{text}");
    lines
        .map(|l| {
            l.split(',')
                .map(|f| {
                    f.parse::<f64>()
                        .unwrap_or_else(|_| panic!("bad CSV field {f:?} in {l:?}"))
                })
                .collect()
        })
        .collect()
}

#[test]
fn run_csv_has_the_documented_header_and_the_json_timeseries() {
    let server = ok_server();
    let dir = TempDir::new("csv");
    let (csv, json) = (dir.join("run.csv"), dir.join("run.json"));
    let csv_arg = csv.display().to_string();
    let r = run_to(
        &server.url("/"),
        &["--rate", "500", "-c", "4", "-d", "2s", "--csv", &csv_arg],
        &json,
    );
    let text = std::fs::read_to_string(&csv).expect("--csv wrote the file");
    let rows = csv_rows(&text, "second,rps,p50_us,p99_us,errors");
    assert!(!rows.is_empty(), "no rows in a 2 s run:\n{text}");
    assert_eq!(rows.len(), r.timeseries.len(), "{text}\n{:?}", r.timeseries);
    for (i, (row, ts)) in rows.iter().zip(&r.timeseries).enumerate() {
        assert_eq!(row.len(), 5, "{text}");
        assert_eq!(row[0], (i + 1) as f64, "seconds count from 1:\n{text}");
        assert_eq!(row[0], ts.second as f64);
        assert!((row[1] - ts.rps).abs() < 0.1, "{text}");
        assert_eq!(
            (row[2], row[3], row[4]),
            (ts.p50_us as f64, ts.p99_us as f64, ts.errors as f64)
        );
        // Open loop at 500/s: each full second carries about 500 responses.
        assert!((row[1] - 500.0).abs() <= 10.0, "row {row:?}:\n{text}");
    }
}

#[test]
fn run_csv_has_a_row_for_every_second_of_the_measured_window() {
    let server = ok_server();
    let dir = TempDir::new("csv-rows");
    let (csv, json) = (dir.join("run.csv"), dir.join("run.json"));
    let csv_arg = csv.display().to_string();
    let r = run_to(
        &server.url("/"),
        &["--rate", "400", "-c", "4", "-d", "3s", "--csv", &csv_arg],
        &json,
    );
    let text = std::fs::read_to_string(&csv).expect("--csv wrote the file");
    let rows = csv_rows(&text, "second,rps,p50_us,p99_us,errors");
    let seconds: Vec<f64> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(
        seconds,
        vec![1.0, 2.0, 3.0],
        "a 3 s run has three rows:\n{text}"
    );
    // The rows cover the whole window: their responses add up to the run's.
    let in_rows: u64 = r.timeseries.iter().map(|t| t.requests).sum();
    assert!(
        r.requests - in_rows <= 4,
        "rows hold {in_rows} of {} responses:\n{text}",
        r.requests
    );
}

/// A window that ends between seconds (`-d 1500ms`) or within its first
/// second (`-n`) has a last row for the part it measured, whose rate is over
/// that part. Before: `-d 2500ms` lost its last half second (143,845
/// responses, rows adding up to 111,078), and runs under 1 s had no rows.
#[test]
fn a_window_that_ends_between_seconds_keeps_its_last_part_in_the_series() {
    let server = ok_server();
    let dir = TempDir::new("csv-partial");
    let json = dir.join("run.json");
    let r = run_to(
        &server.url("/"),
        &["--rate", "400", "-c", "4", "-d", "1500ms"],
        &json,
    );
    let seconds: Vec<u64> = r.timeseries.iter().map(|t| t.second).collect();
    assert_eq!(seconds, vec![1, 2], "{:?}", r.timeseries);
    let in_rows: u64 = r.timeseries.iter().map(|t| t.requests).sum();
    assert!(
        r.requests - in_rows <= 4,
        "rows hold {in_rows} of {}: {:?}",
        r.requests,
        r.timeseries
    );
    // The half second's rate is over its half second: about 400/s.
    let last = &r.timeseries[1];
    assert!(
        (last.rps - 400.0).abs() <= 40.0,
        "last row {last:?} (about 200 responses in 0.5 s)"
    );
    let r = run_to(&server.url("/"), &["-n", "300", "-c", "2"], &json);
    assert_eq!(r.timeseries.len(), 1, "{:?}", r.timeseries);
    assert_eq!(r.timeseries[0].second, 1);
    assert_eq!(r.timeseries[0].requests, 300, "{:?}", r.timeseries);
}

#[test]
fn sweep_csv_has_a_row_for_every_second_of_every_step() {
    let server = ok_server();
    let dir = TempDir::new("sweep-csv");
    let csv = dir.join("sweep.csv");
    let json = dir.join("sweep.json");
    let (code, stdout, stderr) = xload(&[
        "sweep",
        &server.url("/"),
        "--rate",
        "200,400",
        "-c",
        "4",
        "-d",
        "2s",
        "--warmup",
        "100ms",
        "--csv",
        &csv.display().to_string(),
        "--json",
        &json.display().to_string(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let text = std::fs::read_to_string(&csv).expect("--csv wrote the file");
    let rows = csv_rows(&text, "rate,second,rps,p50_us,p99_us,errors");
    let keys: Vec<(f64, f64)> = rows.iter().map(|r| (r[0], r[1])).collect();
    // On a failure, each step's window and series as the report has them.
    let steps = || {
        let doc: serde_json::Value = std::fs::read_to_string(&json)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        doc["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| {
                let keys = ["duration_s", "requests", "timeseries", "unanswered_at_end"];
                format!("{:?}\n", keys.map(|k| s[k].to_string()))
            })
            .collect::<String>()
    };
    assert_eq!(
        keys,
        vec![(200.0, 1.0), (200.0, 2.0), (400.0, 1.0), (400.0, 2.0)],
        "two rows per 2 s step:\n{text}{}",
        steps()
    );
    // The seconds' rows account for every response of their step (how
    // close each second comes to the rate is the open-loop tests' business:
    // a second the machine did not run the client in has none).
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("--json")).expect("json");
    for step in doc["steps"].as_array().expect("steps") {
        let rate = step["rate"].as_f64().expect("rate");
        let in_rows: f64 = rows.iter().filter(|r| r[0] == rate).map(|r| r[2]).sum();
        let requests = step["requests"].as_u64().expect("requests") as f64;
        assert!(
            (in_rows - requests).abs() < 0.5,
            "{rate}/s: rows {in_rows} vs {requests} responses:\n{text}{}",
            steps()
        );
    }
}

#[test]
fn run_json_to_stdout_is_only_the_json_document() {
    let server = ok_server();
    let (code, stdout, stderr) =
        xload(&[&server.url("/"), "-c", "2", "-d", "300ms", "--json", "-"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let report = Report::from_json(&stdout)
        .unwrap_or_else(|e| panic!("stdout of `--json -` is not one report ({e}):\n{stdout}"));
    assert!(report.requests > 0);
    assert!(
        stderr.contains("Requests"),
        "the text report moves to stderr: {stderr}"
    );
}

#[test]
fn live_progress_is_silent_when_output_is_piped() {
    let server = ok_server();
    // Long enough for two progress ticks.
    let (code, stdout, stderr) =
        xload(&[&server.url("/"), "--rate", "200", "-c", "2", "-d", "2200ms"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        !stdout.contains('\r'),
        "carriage return on a piped stdout:\n{stdout:?}"
    );
    assert!(
        !stdout.contains('\x1b'),
        "escape sequence on a piped stdout:\n{stdout:?}"
    );
    assert!(
        !stderr.contains('\r') && !stderr.contains('\x1b'),
        "{stderr:?}"
    );
    assert!(
        stdout.contains("Requests"),
        "the report itself is printed: {stdout}"
    );
}

/// A pseudo-terminal: the master side and the path-opened slave side.
struct Pty {
    master: OwnedFd,
    slave: OwnedFd,
}

fn open_pty() -> Pty {
    // SAFETY: posix_openpt has no memory preconditions; the result is checked.
    let master = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY) };
    assert!(
        master >= 0,
        "posix_openpt: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `master` is a fresh fd we own from here on.
    let master = unsafe { OwnedFd::from_raw_fd(master) };
    // SAFETY: grantpt/unlockpt take a valid pty master fd.
    let rc = unsafe { libc::grantpt(master.as_raw_fd()) | libc::unlockpt(master.as_raw_fd()) };
    assert_eq!(
        rc,
        0,
        "grantpt/unlockpt: {}",
        std::io::Error::last_os_error()
    );
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: `name` is a writable buffer of the length passed.
    let rc = unsafe { libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()) };
    assert_eq!(rc, 0, "ptsname_r");
    // SAFETY: ptsname_r wrote a NUL-terminated path into `name`.
    let path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) };
    // SAFETY: `path` is a valid C string; the result is checked.
    let slave = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NOCTTY) };
    assert!(
        slave >= 0,
        "open {path:?}: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `slave` is a fresh fd we own from here on.
    let slave = unsafe { OwnedFd::from_raw_fd(slave) };
    Pty { master, slave }
}

/// Runs `xload ARGS` with stderr on a pseudo-terminal, and stdout on it too
/// when `stdout_on_terminal` (else on a pipe). Returns (exit code, what the
/// terminal showed). Killed after 30 s.
fn run_on_terminal(args: &[String], stdout_on_terminal: bool) -> (i32, String) {
    let pty = open_pty();
    let mut command = Command::new(xload_bin());
    command
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::from(pty.slave.try_clone().expect("dup slave")))
        .process_group(0);
    if stdout_on_terminal {
        command.stdout(Stdio::from(pty.slave.try_clone().expect("dup slave")));
    } else {
        command.stdout(Stdio::piped());
    }
    let mut child = command.spawn().expect("spawn xload");
    // The command keeps copies of the slave fd: drop them with our own, so
    // that the child is the last holder.
    drop(command);
    drop(pty.slave);
    // The reader stops at EIO (the child, last slave holder, exited) or once
    // the child has exited and nothing more is readable.
    let exited = Arc::new(AtomicBool::new(false));
    let reader_exited = Arc::clone(&exited);
    let mut master = std::fs::File::from(pty.master);
    let reader = thread::spawn(move || {
        let mut shown = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let mut pfd = libc::pollfd {
                fd: master.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: `pfd` is one valid pollfd on the stack for a live fd.
            let ready = unsafe { libc::poll(&mut pfd, 1, 100) };
            if ready <= 0 {
                if reader_exited.load(Ordering::SeqCst) {
                    break;
                }
                continue;
            }
            match master.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => shown.extend_from_slice(&buf[..n]),
            }
        }
        shown
    });
    let piped = child.stdout.take().map(|mut out| {
        thread::spawn(move || {
            let mut s = Vec::new();
            let _ = out.read_to_end(&mut s);
            s
        })
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            // SAFETY: kill(2) on the process group our child leads.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = child.wait();
            panic!("xload {args:?} on a terminal still running after 30 s: killed");
        }
        thread::sleep(Duration::from_millis(10));
    };
    exited.store(true, Ordering::SeqCst);
    let shown = String::from_utf8_lossy(&reader.join().expect("pty reader")).into_owned();
    if let Some(p) = piped {
        let out = String::from_utf8_lossy(&p.join().expect("stdout reader")).into_owned();
        assert!(
            !out.contains('\x1b'),
            "escape sequences on piped stdout: {out:?}"
        );
    }
    (exit_code(status), shown)
}

/// The live line clears the terminal line before each update.
const CLEAR_LINE: &str = "\x1b[2K";

#[test]
fn live_progress_line_shows_on_a_terminal_only_and_never_with_quiet() {
    let server = ok_server();
    let url = server.url("/");
    let run = ["--rate", "200", "-c", "2", "-d", "2200ms"];
    let with = |extra: &'static str| -> Vec<String> {
        let mut v = vec![url.clone()];
        v.extend(run.iter().map(|s| s.to_string()));
        if !extra.is_empty() {
            v.push(extra.to_string());
        }
        v
    };
    let (code, shown) = run_on_terminal(&with(""), true);
    assert_eq!(code, 0, "{shown}");
    assert!(
        shown.contains(CLEAR_LINE) && shown.contains("req/s"),
        "no live status line on a terminal:\n{shown:?}"
    );

    let (code, shown) = run_on_terminal(&with("--quiet"), true);
    assert_eq!(code, 0, "{shown}");
    assert!(
        !shown.contains(CLEAR_LINE),
        "--quiet still shows progress:\n{shown:?}"
    );
    assert!(
        shown.contains("Requests"),
        "--quiet keeps the report:\n{shown:?}"
    );

    // stdout redirected (e.g. `xload ... > report.txt`), stderr still a terminal.
    let (code, shown) = run_on_terminal(&with(""), false);
    assert_eq!(code, 0, "{shown}");
    assert!(
        !shown.contains(CLEAR_LINE),
        "progress shown although stdout is not a terminal:\n{shown:?}"
    );
}

/// `xload URL | head -1` and `xload merge ... | head -1`: the reader exits
/// before the report is printed. Nothing panics, the exit code and the
/// files still tell the run's outcome.
#[test]
fn a_reader_that_goes_away_loses_no_exit_code_and_no_file() {
    let server = ok_server();
    let dir = TempDir::new("closed-stdout");
    let (a_path, m_path) = (dir.join("a.json"), dir.join("m.json"));
    let a = dir.join("a.json").display().to_string();
    let m = m_path.display().to_string();
    let url = server.url("/");
    // (A merge of one report: a copy of it beside it is refused since issue 22.)
    for args in [
        vec!["-c", "2", "-d", "300ms", "--json", &a, &url],
        vec!["merge", &a, "--json", &m],
    ] {
        let mut child = Command::new(xload_bin())
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "xload {args:?} hangs");
            thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "xload {args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(0), "xload {args:?}: {stderr}");
    }
    let single = read_report(&a_path);
    assert!(single.requests > 0);
    assert_eq!(read_report(&m_path).requests, single.requests);
}

#[test]
fn csv_to_stdout_keeps_stdout_to_the_csv() {
    let server = ok_server();
    let (status, stdout, stderr, _) =
        run_xload(&[&server.url("/"), "-c", "2", "-d", "1200ms", "--csv", "-"]);
    assert_eq!(exit_code(status), 0, "{stderr}");
    assert!(
        stdout.starts_with("second,"),
        "only the CSV on stdout: {stdout}"
    );
    assert!(!stdout.contains("req/s"), "{stdout}");
    assert!(
        stderr.contains("req/s"),
        "the text report went to stderr: {stderr}"
    );
}
