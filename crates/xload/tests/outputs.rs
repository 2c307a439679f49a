//! Outputs other tools read, checked with those tools' own readers: the
//! HdrHistogram interval log (`--hlog`) with Python's `hdrh` (PyPI
//! `hdrhistogram`), which scripts/test installs.

mod support;

use std::process::Command;
use std::time::Duration;

use support::serve::Serve;
use support::TempDir;

/// Runs `script` with python3 after importing `module`; None (the test is
/// skipped, with the reason) when python3 or the module is missing, unless
/// scripts/test said it installed them (XLOAD_TEST_PYTHON_MODULES=1): then
/// a missing module fails the test instead of hiding it.
fn python(module: &str, script: &str, args: &[&str]) -> Option<String> {
    let probe = Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output();
    let importable = probe.as_ref().is_ok_and(|o| o.status.success());
    if !importable {
        let why = match &probe {
            Err(e) => format!("no python3 ({e})"),
            Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
        };
        assert!(
            std::env::var_os("XLOAD_TEST_PYTHON_MODULES").is_none(),
            "scripts/test installs the Python module {module}, yet: {why}"
        );
        eprintln!("skipped: Python module {module} unavailable ({why}); scripts/test installs it");
        return None;
    }
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "python3 failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Reads an interval log with hdrh's HistogramLogReader and prints, per
/// interval, its start and end (ms since the epoch) and total count, then
/// the total count of the JSON report's histogram, decoded by hdrh too.
const READ_HLOG: &str = r#"
import json, sys
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 3600000000, 3))
while True:
    h = reader.get_next_interval_histogram()
    if h is None:
        break
    print("interval", h.get_start_time_stamp(), h.get_end_time_stamp(), h.get_total_count(), h.get_max_value())
report = json.load(open(sys.argv[2]))
print("report", HdrHistogram.decode(report["histogram"]).get_total_count())
"#;

#[test]
fn hlog_is_read_back_by_hdrh_one_interval_per_second_adding_up_to_the_report() {
    let srv = Serve::start(&["--cpus", "0"]);
    let dir = TempDir::new("hlog");
    let hlog = dir.join("run.hlog");
    let json = dir.join("run.json");
    let url = format!("http://127.0.0.1:{}/", srv.port);
    // 2.5 s: two whole seconds and a half one, which the log must keep
    // with its own length.
    let (status, stdout, stderr, _) = support::run_xload_with_timeout(
        [
            "-c",
            "4",
            "-t",
            "1",
            "-d",
            "2500ms",
            "-q",
            "--json",
            json.to_str().unwrap(),
            "--hlog",
            hlog.to_str().unwrap(),
            &url,
        ],
        Duration::from_secs(30),
    );
    assert!(status.success(), "{stdout}\n{stderr}");
    let report = support::read_json(&json);
    let text = std::fs::read_to_string(&hlog).unwrap();
    assert!(
        text.contains("#[Histogram log format version 1.3]"),
        "{text}"
    );
    assert!(text.contains("#[StartTime: "), "{text}");
    assert!(text.contains("#[BaseTime: "), "{text}");
    assert!(text.contains(
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
    ));
    let Some(out) = python(
        "hdrh",
        READ_HLOG,
        &[hlog.to_str().unwrap(), json.to_str().unwrap()],
    ) else {
        return;
    };
    let mut intervals = Vec::new();
    let mut report_count = None;
    for line in out.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f[0] {
            "interval" => intervals.push((
                f[1].parse::<f64>().unwrap(),
                f[2].parse::<f64>().unwrap(),
                f[3].parse::<u64>().unwrap(),
            )),
            "report" => report_count = Some(f[1].parse::<u64>().unwrap()),
            _ => panic!("unexpected line {line}"),
        }
    }
    let rows = report["timeseries"].as_array().unwrap();
    assert_eq!(intervals.len(), rows.len(), "one interval per row:\n{out}");
    assert_eq!(intervals.len(), 3, "2.5 s: three intervals:\n{out}");
    // Back to back, a second each, but the last one half a second; the
    // first starts at the report's started_at.
    let started = report["started_at"].as_str().unwrap();
    let t0 = intervals[0].0;
    for (i, (start, end, _)) in intervals.iter().enumerate() {
        assert!((start - (t0 + 1000.0 * i as f64)).abs() < 1.5, "{out}");
        let len = if i == 2 { 500.0 } else { 1000.0 };
        assert!((end - start - len).abs() < 1.5, "interval {i}: {out}");
    }
    let secs = xload_stats::walltime::parse_rfc3339(started).unwrap() as f64 / 1000.0;
    assert!((t0 - secs).abs() < 1.0, "{t0} vs {started}");
    // The counts add up to the report's histogram, and to its responses
    // (plus those the window closed on, counted at their age).
    let total: u64 = intervals.iter().map(|i| i.2).sum();
    let recorded = report["unanswered_at_end"]["recorded"]
        .as_u64()
        .unwrap_or(0);
    assert_eq!(Some(total), report_count, "{out}");
    assert_eq!(
        total,
        report["requests"].as_u64().unwrap() + recorded,
        "{out}"
    );
    for (row, iv) in rows.iter().zip(&intervals) {
        assert!(iv.2 >= row["requests"].as_u64().unwrap(), "{row} vs {out}");
    }
}

#[test]
fn hlog_to_a_missing_directory_is_refused_before_the_run() {
    let dir = TempDir::new("hlog-bad");
    let bad = dir.join("no/such/dir/run.hlog");
    let (status, _, stderr, elapsed) = support::run_xload([
        "-d",
        "10s",
        "--hlog",
        bad.to_str().unwrap(),
        "http://127.0.0.1:9/",
    ]);
    assert_eq!(support::run::exit_code(status), 2, "{stderr}");
    assert!(stderr.contains("--hlog"), "{stderr}");
    assert!(elapsed < Duration::from_secs(5), "refused before the run");
}
