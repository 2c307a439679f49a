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

/// GET /metrics from 127.0.0.1:`port`: the body of a 200 answer, None if
/// nothing answers yet.
fn scrape(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    Some(body.to_string())
}

/// Parses an exposition with prometheus_client's text parser and prints
/// each sample: name, labels (JSON) and value.
const PARSE_METRICS: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
for family in text_string_to_metric_families(open(sys.argv[1]).read()):
    for s in family.samples:
        print(s.name, json.dumps(s.labels, sort_keys=True), s.value)
"#;

/// The samples of `text` as prometheus_client reads them (None: skipped).
fn parse_metrics(dir: &TempDir, text: &str) -> Option<Vec<(String, String, f64)>> {
    let path = dir.join("metrics.txt");
    std::fs::write(&path, text).unwrap();
    let out = python(
        "prometheus_client",
        PARSE_METRICS,
        &[path.to_str().unwrap()],
    )?;
    Some(
        out.lines()
            .map(|l| {
                let (name, rest) = l.split_once(' ').unwrap();
                let (labels, value) = rest.rsplit_once(' ').unwrap();
                (name.to_string(), labels.to_string(), value.parse().unwrap())
            })
            .collect(),
    )
}

fn sample(samples: &[(String, String, f64)], name: &str, labels: &str) -> f64 {
    samples
        .iter()
        .find(|(n, l, _)| n == name && l == labels)
        .unwrap_or_else(|| panic!("no {name} {labels} in {samples:?}"))
        .2
}

#[test]
fn metrics_parse_with_prometheus_client_and_end_equal_to_the_report() {
    let srv = Serve::start(&["--cpus", "0"]);
    let dir = TempDir::new("metrics");
    let json = dir.join("run.json");
    let port = support::free_port();
    let url = format!("http://127.0.0.1:{}/", srv.port);
    let child = support::spawn_xload([
        "-c",
        "4",
        "-t",
        "2",
        "-d",
        "2s",
        "-q",
        "--json",
        json.to_str().unwrap(),
        "--metrics-listen",
        &format!("127.0.0.1:{port}"),
        "--metrics-linger",
        "60s",
        &url,
    ]);
    // During the run: the endpoint answers and parses.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let during = loop {
        if let Some(body) = scrape(port) {
            break body;
        }
        assert!(std::time::Instant::now() < deadline, "no endpoint");
        std::thread::sleep(Duration::from_millis(20));
    };
    // After the report: the final values (xload_final 1), then the run ends
    // on its own (the linger stops at the first scrape of final values).
    let last = loop {
        let body = scrape(port).expect("the endpoint stays up until the final values are read");
        if body.contains("\nxload_final 1\n") {
            break body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no final values:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_timeout(Duration::from_secs(30));
    assert!(!out.timed_out && out.status.success(), "{}", out.stderr);
    let report = support::read_json(&json);
    let Some(first) = parse_metrics(&dir, &during) else {
        return;
    };
    assert!(first.iter().any(|(n, _, _)| n == "xload_responses_total"));
    let s = parse_metrics(&dir, &last).unwrap();
    let requests = report["requests"].as_u64().unwrap() as f64;
    let all = r#"{"worker": "all"}"#;
    assert_eq!(sample(&s, "xload_responses_total", all), requests);
    let per_worker = sample(&s, "xload_responses_total", r#"{"worker": "0"}"#)
        + sample(&s, "xload_responses_total", r#"{"worker": "1"}"#);
    assert_eq!(per_worker, requests);
    assert_eq!(sample(&s, "xload_latency_seconds_count", all), requests);
    let inf = sample(
        &s,
        "xload_latency_seconds_bucket",
        r#"{"le": "+Inf", "worker": "all"}"#,
    );
    assert_eq!(inf, requests, "cumulative buckets end at the count");
    // The in-flight gauge's last value is the window's close: the report's
    // unanswered_at_end.in_flight, at most one per connection here.
    let in_flight = sample(&s, "xload_in_flight", all);
    assert_eq!(
        in_flight,
        report["unanswered_at_end"]["in_flight"]
            .as_u64()
            .unwrap_or(0) as f64,
        "{last}"
    );
    assert!(in_flight <= 4.0, "{last}");
    assert_eq!(
        sample(&s, "xload_errors_total", all),
        report["errors_total"].as_u64().unwrap() as f64
    );
    // Every category is there, equal to the report's (absent there: 0).
    let errors = &report["errors"];
    for (name, labels, value) in &s {
        if name != "xload_errors_by_category_total" || !labels.contains("\"all\"") {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(labels).unwrap();
        let cat = v["category"].as_str().unwrap();
        assert_eq!(*value, errors[cat].as_u64().unwrap_or(0) as f64, "{cat}");
    }
    assert!(s.iter().any(
        |(n, l, _)| n == "xload_errors_by_category_total" && l.contains("\"request_timeout\"")
    ));
}

#[test]
fn serve_metrics_parse_with_prometheus_client_and_equal_its_stats() {
    let port = support::free_port();
    let srv = Serve::start(&[
        "--cpus",
        "0",
        "--metrics-listen",
        &format!("127.0.0.1:{port}"),
    ]);
    let dir = TempDir::new("serve-metrics");
    let url = format!("http://127.0.0.1:{}/", srv.port);
    let (status, _, stderr, _) = support::run_xload_with_timeout(
        ["-c", "3", "-t", "1", "-n", "500", "-q", &url],
        Duration::from_secs(30),
    );
    assert!(status.success(), "{stderr}");
    let stats = {
        use std::io::{Read, Write};
        let mut c = srv.connect();
        c.write_all(b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut t = String::new();
        c.read_to_string(&mut t).unwrap();
        let json = t.split_once("\r\n\r\n").unwrap().1.to_string();
        serde_json::from_str::<serde_json::Value>(&json).unwrap()
    };
    // Read after /stats: every counter has reached what /stats saw.
    let body = scrape(port).expect("serve's metrics endpoint");
    let Some(s) = parse_metrics(&dir, &body) else {
        return;
    };
    let all = r#"{"worker": "all"}"#;
    // /stats does not count itself as a request.
    let requests = stats["requests"].as_u64().unwrap() as f64;
    assert!(requests >= 500.0, "{stats}");
    assert_eq!(sample(&s, "xload_serve_requests_total", all), requests);
    assert_eq!(
        sample(&s, "xload_serve_requests_total", r#"{"worker": "0"}"#),
        requests
    );
    let conns = sample(&s, "xload_serve_connections_total", all);
    let stats_conns = stats["connections"].as_u64().unwrap() as f64;
    assert!(
        conns >= 3.0 && (conns == stats_conns || conns == stats_conns - 1.0),
        "{conns} vs {stats}"
    );
    assert_eq!(sample(&s, "xload_serve_in_flight", all), 0.0);
}
