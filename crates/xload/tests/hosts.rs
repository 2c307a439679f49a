//! Runs made from several generator hosts: what a report says about its run
//! (run id, segment, host, version, command line, when its window began),
//! `--start-at` (every generator's window opens at one instant, nothing is
//! sent before it without a warm-up), and the per-second histograms that
//! let `xload merge` compute each second's percentiles exactly.
//!
//! Runs are short (a few hundred requests, under 2 s each) against the
//! std-only test server on loopback, whose counters are exact.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use support::run::exit_code;
use support::{run_xload, spawn_xload, Behavior, TempDir, TestServer};
use xload_stats::walltime::{format_rfc3339_us, parse_rfc3339};
use xload_stats::{decode_histogram, new_latency_histogram, Report};

fn ok_server() -> TestServer {
    TestServer::start(Behavior::Ok { body_len: 16 })
}

fn unix_now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_micros() as i64
}

/// `xload URL ARGS --json PATH`: asserts exit 0, returns the report and stderr.
fn run_to(url: &str, args: &[&str], path: &std::path::Path) -> (Report, String) {
    let mut all = vec![url.to_string()];
    all.extend(args.iter().map(|s| s.to_string()));
    all.extend(["--json".to_string(), path.display().to_string()]);
    let (status, stdout, stderr, _) = run_xload(&all);
    assert_eq!(
        exit_code(status),
        0,
        "xload {all:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    let text = std::fs::read_to_string(path).expect("the report was written");
    let report = Report::from_json(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (report, stderr)
}

#[test]
fn a_report_says_which_run_which_share_where_and_when() {
    let server = ok_server();
    let dir = TempDir::new("hosts-meta");
    let path = dir.join("r.json");
    let before = unix_now_us();
    let (r, _) = run_to(
        &server.url("/"),
        &[
            "-c",
            "2",
            "-d",
            "1200ms",
            "--run-id",
            "cap-7",
            "--segment",
            "2/3",
        ],
        &path,
    );
    let after = unix_now_us();
    let run = &r.run;
    assert_eq!(run.run_id.as_deref(), Some("cap-7"));
    assert_eq!(run.segment.as_deref(), Some("2/3"));
    assert!(
        run.host.as_deref().is_some_and(|h| !h.is_empty()),
        "{run:?}"
    );
    assert_eq!(
        run.xload_version.as_deref(),
        Some(env!("CARGO_PKG_VERSION"))
    );
    let argv = run.argv.as_ref().expect("argv");
    assert!(argv.iter().any(|a| a == "--run-id") && argv.iter().any(|a| a == "2/3"));
    let started = run.started_at_us().expect("started_at is RFC 3339");
    assert!(
        before <= started && started <= after,
        "{before} {started} {after}"
    );
    // µs precision, UTC.
    let text = run.started_at.as_deref().expect("started_at");
    assert!(text.ends_with('Z') && text.len() == 27, "{text}");
    assert_eq!(run.start_at, None, "no --start-at, no start error");
    assert_eq!(run.start_error_us, None);
    assert!(
        run.settings.contains_key("request_fnv1a"),
        "{:?}",
        run.settings
    );
    // Each second's histogram is kept, and holds that row's responses.
    assert_eq!(r.timeseries.len(), r.timeseries_histograms.len());
    for (row, h) in r.timeseries.iter().zip(&r.timeseries_histograms) {
        assert_eq!(row.second, h.second);
        let h = decode_histogram(&h.histogram).expect("decodes");
        assert_eq!(h.len(), row.requests, "second {}", row.second);
        assert_eq!(h.value_at_quantile(0.99), row.p99_us);
    }
    // Without --run-id, each run gets its own.
    let (a, _) = run_to(&server.url("/"), &["-c", "1", "-n", "10"], &path);
    let (b, _) = run_to(&server.url("/"), &["-c", "1", "-n", "10"], &path);
    let (ida, idb) = (a.run.run_id.expect("id"), b.run.run_id.expect("id"));
    assert!(!ida.is_empty() && ida != idb, "{ida} {idb}");
}

#[test]
fn start_at_opens_the_window_at_that_instant_and_sends_nothing_before_it() {
    let dir = TempDir::new("hosts-start");
    let path = dir.join("r.json");
    for engine in ["uring", "epoll"] {
        for load in [
            &["-c", "3", "-n", "300"][..],
            &["-c", "3", "--rate", "1000", "-n", "200"],
        ] {
            let server = ok_server();
            let at = unix_now_us() + 700_000;
            let at_text = format_rfc3339_us(at);
            let mut args = load.to_vec();
            args.extend(["--start-at", &at_text, "--engine", engine]);
            let (r, stderr) = run_to(&server.url("/"), &args, &path);
            let started = r.run.started_at_us().expect("started_at");
            let error = r.run.start_error_us.expect("a start error with --start-at");
            assert_eq!(r.run.start_at.as_deref().map(parse_rfc3339), Some(Ok(at)));
            // Never early (within the clocks' reading precision); how late
            // is the scheduler's, on a loaded machine up to a tick or more.
            assert!(
                (-50..300_000).contains(&error) && (started - at - error).abs() <= 1,
                "{engine} {load:?}: began {error} µs late\n{stderr}"
            );
            // No warm-up: nothing was sent before the window, so the server
            // saw exactly the requests of the report.
            let n: u64 = load.last().expect("-n").parse().expect("count");
            assert_eq!(r.requests, n, "{engine} {load:?}");
            assert_eq!(
                server.requests(),
                n,
                "{engine} {load:?}: sent before the window"
            );
        }
    }
}

#[test]
fn start_at_after_a_warm_up_and_in_the_past() {
    let server = ok_server();
    let dir = TempDir::new("hosts-start-late");
    let path = dir.join("r.json");
    // With a warm-up: the warm-up runs before the instant, the window after.
    let at = unix_now_us() + 800_000;
    let at_text = format_rfc3339_us(at);
    let (r, _) = run_to(
        &server.url("/"),
        &[
            "-c",
            "2",
            "-d",
            "300ms",
            "--warmup",
            "300ms",
            "--start-at",
            &at_text,
        ],
        &path,
    );
    let error = r.run.start_error_us.expect("start error");
    // As above: never early within the clocks' reading precision, late by
    // what the scheduler of a loaded machine takes.
    assert!((-50..300_000).contains(&error), "began {error} µs late");
    assert!(server.requests() > r.requests, "the warm-up sent too");
    // An instant already past: the run starts at once and says how late.
    let (r, stderr) = run_to(
        &server.url("/"),
        &["-c", "1", "-n", "20", "--start-at", "2020-01-01T00:00:00Z"],
        &path,
    );
    assert!(stderr.contains("--start-at was"), "{stderr}");
    let error = r.run.start_error_us.expect("start error");
    assert!(error > 3 * 365 * 86_400 * 1_000_000, "{error}");
    // A relative instant.
    let before = unix_now_us();
    let (r, _) = run_to(
        &server.url("/"),
        &["-c", "1", "-n", "20", "--start-at", "+400ms"],
        &path,
    );
    let started = r.run.started_at_us().expect("started_at");
    assert!(started - before >= 400_000 - 1, "{}", started - before);
    assert!(Duration::from_micros((started - before) as u64) < Duration::from_secs(2));
}

#[test]
fn bad_run_options_are_refused_before_anything_runs() {
    for (args, what) in [
        (&["--segment", "0/3"][..], "segment"),
        (&["--segment", "4/3"], "segment"),
        (&["--run-id", "a b"], "run id"),
        (&["--start-at", "tomorrow"], "RFC 3339"),
    ] {
        let mut all = vec!["http://127.0.0.1:9/"];
        all.extend(args);
        let (status, _, stderr, _) = run_xload(&all);
        assert_eq!(exit_code(status), 2, "{args:?}: {stderr}");
        assert!(stderr.contains(what), "{args:?}: {stderr}");
    }
}

#[test]
fn bad_on_options_are_refused_before_any_host_is_reached() {
    let url = "http://127.0.0.1:9/";
    for (args, what) in [
        (&["--on", "a,a"][..], "given twice"),
        (
            &["--on", "a,b,c", "-c", "2"],
            "fewer connections than the 3 hosts",
        ),
        (&["--on", "a,b", "-n", "1"], "fewer requests"),
        (&["--on", "a b"], "not a host name"),
        (&["--on", "a", "--rsh", " "], "template is empty"),
        (&["--on", "a", "--rsh", "{host} x"], "must be a program"),
        (&["--on", "a", "--segment", "1/2"], "drop --segment"),
        (&["--on", "a", "-qc", "8"], "bundled"),
        (
            &["--on", "a", "--keep-reports", "/nonexistent-dir"],
            "not a directory",
        ),
    ] {
        // A transport that would say so if it ran.
        let mut all: Vec<&str> = args.to_vec();
        if !args.contains(&"--rsh") {
            all.extend(["--rsh", "echo REACHED {host}"]);
        }
        all.push(url);
        let (status, stdout, stderr, _) = run_xload(&all);
        assert_eq!(exit_code(status), 2, "{args:?}: {stderr}");
        assert!(stderr.contains(what), "{args:?}: {stderr}");
        assert!(
            !stdout.contains("REACHED") && !stderr.contains("REACHED"),
            "{args:?}"
        );
    }
}

/// `xload merge ARGS`: (exit code, stdout, stderr).
fn merge(args: &[&std::path::Path], flags: &[&str]) -> (i32, String, String) {
    let mut all = vec!["merge".to_string()];
    all.extend(args.iter().map(|p| p.display().to_string()));
    all.extend(flags.iter().map(|f| f.to_string()));
    let (status, stdout, stderr, _) = run_xload(&all);
    (exit_code(status), stdout, stderr)
}

#[test]
fn merge_refuses_other_runs_and_windows_apart_and_states_the_interval_when_allowed() {
    let server = ok_server();
    let dir = TempDir::new("hosts-merge-refusals");
    let url = server.url("/");
    let (a, b, c) = (dir.join("a.json"), dir.join("b.json"), dir.join("c.json"));
    let small = ["-c", "1", "-n", "30"];
    run_to(&url, &[&small[..], &["--run-id", "r1"]].concat(), &a);
    run_to(&url, &[&small[..], &["--run-id", "r2"]].concat(), &b);
    // Of run r1 too, but measured after a's window closed.
    std::thread::sleep(Duration::from_millis(50));
    run_to(&url, &[&small[..], &["--run-id", "r1"]].concat(), &c);

    let (code, stdout, stderr) = merge(&[&a, &b], &[]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!(
            "{} is of run r1 and {} of run r2",
            a.display(),
            b.display()
        )),
        "{stderr}"
    );
    assert!(!stdout.contains("req/s"), "nothing merged: {stdout}");

    let (code, stdout, stderr) = merge(&[&a, &c], &[]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        stderr.contains("do not overlap at all") && stderr.contains("--allow-partial-overlap"),
        "{stderr}"
    );
    // Allowed: merged, and the interval of the rate is said.
    let out = dir.join("m.json");
    let (code, stdout, stderr) = merge(
        &[&a, &c],
        &[
            "--allow-partial-overlap",
            "--json",
            &out.display().to_string(),
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains("--allow-partial-overlap: the windows span"),
        "{stderr}"
    );
    let (ra, rc, m) = (read(&a), read(&c), read(&out));
    let from = ra.run.started_at_us().expect("a's start");
    let to = rc.run.started_at_us().expect("c's start") + (rc.duration_s * 1e6).round() as i64;
    assert!(stderr.contains(&format_rfc3339_us(from)) && stderr.contains(&format_rfc3339_us(to)));
    assert_eq!(m.requests, 60);
    assert!(
        (m.duration_s - (to - from) as f64 / 1e6).abs() < 1e-6,
        "rate over the span"
    );
    let windows = &m.extra["merged_windows"];
    assert_eq!(windows["common"], serde_json::Value::Null, "{windows}");
    assert_eq!(windows["span"][0], format_rfc3339_us(from));
}

fn read(path: &std::path::Path) -> Report {
    let text = std::fs::read_to_string(path).expect("report");
    Report::from_json(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn merged_per_second_percentiles_are_those_of_the_merged_raw_histograms() {
    let server = ok_server();
    let dir = TempDir::new("hosts-merge-exact");
    let url = server.url("/");
    let at = format_rfc3339_us(unix_now_us() + 800_000);
    let paths = [dir.join("a.json"), dir.join("b.json")];
    let children: Vec<_> = paths
        .iter()
        .map(|p| {
            spawn_xload([
                url.as_str(),
                "-c",
                "2",
                "-d",
                "2300ms",
                "--run-id",
                "exact",
                "--start-at",
                &at,
                "--json",
                &p.display().to_string(),
            ])
        })
        .collect();
    for child in children {
        let out = child.wait_timeout(Duration::from_secs(30));
        assert!(!out.timed_out && exit_code(out.status) == 0, "{out:?}");
    }
    let out = dir.join("m.json");
    let (code, stdout, stderr) = merge(
        &[&paths[0], &paths[1]],
        &["--json", &out.display().to_string()],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let m = read(&out);
    let parts: Vec<Report> = paths.iter().map(|p| read(p)).collect();
    assert_eq!(m.requests, parts[0].requests + parts[1].requests);
    assert!(m.timeseries.len() >= 3, "{:?}", m.timeseries);
    assert_eq!(m.timeseries.len(), m.timeseries_histograms.len());
    for (row, mh) in m.timeseries.iter().zip(&m.timeseries_histograms) {
        // The raw histograms of that second, from each generator.
        let mut raw = new_latency_histogram();
        for p in &parts {
            for h in p
                .timeseries_histograms
                .iter()
                .filter(|h| h.second == row.second)
            {
                raw.add(decode_histogram(&h.histogram).expect("decodes"))
                    .expect("adds");
            }
        }
        assert_eq!(decode_histogram(&mh.histogram).expect("decodes"), raw);
        assert_eq!(row.requests, raw.len(), "second {}", row.second);
        assert_eq!(
            row.p50_us,
            raw.value_at_quantile(0.5),
            "second {}",
            row.second
        );
        assert_eq!(
            row.p99_us,
            raw.value_at_quantile(0.99),
            "second {}",
            row.second
        );
    }
    assert!(!m.extra.contains_key("timeseries_percentiles"));
}
