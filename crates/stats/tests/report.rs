//! Report model: JSON keys, round trip, HdrHistogram V2 interop, exact merge.

use base64::Engine as _;
use hdrhistogram::serialization::Deserializer;
use serde_json::Value;
use xload_stats::{
    decode_histogram, ErrorKind, Histogram, IntervalRow, LatencySummary, Recorder, Report,
    ReportError, RunMeta, TextOptions, SCHEMA,
};

fn meta(target: &str, threads: usize, connections: usize, duration_s: f64) -> RunMeta {
    RunMeta {
        target: target.to_string(),
        engine: "io_uring".to_string(),
        engine_reason: None,
        threads,
        connections,
        duration_s,
        rate_target: None,
        pipeline: 1,
    }
}

/// A recorder with a spread of latencies, statuses and errors from `seed`.
fn busy_recorder(seed: u64, n: u64, open_loop: bool) -> Recorder {
    let mut r = if open_loop {
        Recorder::new_open_loop()
    } else {
        Recorder::new()
    };
    let mut x = seed;
    for i in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let latency_us = 50 + (x >> 33) % 20_000;
        let status = if i % 17 == 0 { 503 } else { 200 };
        if open_loop {
            let lag = (x >> 20) % 300;
            r.record_send(lag);
            r.record_response_open_loop(latency_us + lag, latency_us, status, 180);
        } else {
            r.record_response(latency_us, status, 180);
        }
        r.add_bytes_sent(60);
        if i % 101 == 0 {
            r.record_error(ErrorKind::Reset);
        }
        if i % 211 == 0 {
            r.record_parse_error("bad_chunk_size");
        }
        if i % 307 == 0 {
            r.record_errno(libc::ENOBUFS);
        }
    }
    if open_loop {
        r.record_late_send();
        r.record_dropped(2);
    }
    r.record_connect();
    r
}

fn counts(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

#[test]
fn json_has_every_design_key() {
    let report = Report::build(
        &meta("http://127.0.0.1:8080/", 2, 100, 10.0),
        &busy_recorder(1, 5_000, false),
    );
    let v: Value = serde_json::from_str(&report.to_json()).expect("valid JSON");
    for key in [
        "schema",
        "target",
        "engine",
        "threads",
        "connections",
        "duration_s",
        "requests",
        "bytes",
        "rps",
        "status",
        "errors",
        "errors_total",
        "latency_us",
        "histogram",
    ] {
        assert!(v.get(key).is_some(), "missing key {key}");
    }
    for key in ["min", "mean", "p50", "p90", "p99", "p999", "max", "stdev"] {
        assert!(
            v["latency_us"].get(key).is_some(),
            "missing latency_us.{key}"
        );
    }
    assert_eq!(v["schema"], "xload/1");
    assert_eq!(v["requests"], 5_000);
    assert_eq!(v["bytes"], 5_000 * 180);
    assert_eq!(v["bytes_sent"], 5_000 * 60);
    assert_eq!(v["rps"], 500.0);
    assert_eq!(v["status"]["200"], 5_000 - 295);
    assert_eq!(v["status"]["503"], 295);
    assert_eq!(v["errors"]["reset"], 50);
    assert_eq!(v["errors"]["parse"], 24);
    assert_eq!(v["errors"]["other"], 17);
    assert_eq!(v["errors_total"], 50 + 24 + 17);
    assert!(
        v["errors"].get("closed").is_none(),
        "zero categories are left out"
    );
    assert_eq!(v["parse_errors"]["bad_chunk_size"], 24);
    assert_eq!(v["errors_other"]["errno_ENOBUFS"], 17);
    // Closed loop has no open-loop keys.
    for key in [
        "rate_target",
        "latency_uncorrected_us",
        "late_sends",
        "dropped",
        "client",
        "timeseries",
    ] {
        assert!(v.get(key).is_none(), "unexpected key {key}");
    }
}

#[test]
fn open_loop_json_adds_rate_target_uncorrected_latency_and_lag() {
    let mut m = meta("http://127.0.0.1:8080/", 2, 100, 10.0);
    m.rate_target = Some(1_000.0);
    let report = Report::build(&m, &busy_recorder(2, 3_000, true));
    let v: Value = serde_json::from_str(&report.to_json()).expect("valid JSON");
    assert_eq!(v["rate_target"], 1_000.0);
    assert!(v["latency_uncorrected_us"]["p99"].as_u64().is_some());
    assert!(v["schedule_lag_us"]["max"].as_u64().is_some());
    assert_eq!(v["late_sends"], 1);
    assert_eq!(v["dropped"], 2);
    assert!(report.is_open_loop());
    // Corrected latency includes the lag, so it is never below the uncorrected one.
    let u = &report
        .open_loop
        .as_ref()
        .expect("open loop")
        .latency_uncorrected_us;
    assert!(report.latency_us.p99 >= u.p99);
    assert!(report
        .latency_uncorrected_histogram()
        .expect("decodes")
        .is_some());
}

#[test]
fn json_round_trip_keeps_every_key_and_histogram_counts() {
    let mut m = meta("http://[::1]:9000/x?y=1", 2, 64, 3.5);
    m.rate_target = Some(2_500.0);
    m.engine = "epoll".into();
    m.engine_reason = Some("io_uring disabled (kernel.io_uring_disabled=2)".into());
    m.pipeline = 4;
    let rec = busy_recorder(3, 4_000, true);
    let mut report = Report::build(&m, &rec);
    report.client = Some(
        serde_json::json!({"cpu_s": 1.5, "saturated": false, "reasons": [], "verdict": "not saturated"}),
    );
    report.timeseries = vec![
        IntervalRow {
            second: 1,
            requests: 2_000,
            rps: 2_000.0,
            p50_us: 400,
            p99_us: 900,
            errors: 1,
        },
        IntervalRow {
            second: 2,
            requests: 2_000,
            rps: 2_000.0,
            p50_us: 410,
            p99_us: 950,
            errors: 0,
        },
    ];
    report.extra.insert(
        "steps".into(),
        serde_json::json!([{"concurrency": 4, "rps": 10.5}]),
    );
    report.extra.insert(
        "future_key".into(),
        serde_json::json!({"nested": [1, 2, 3]}),
    );

    let json = report.to_json();
    let back = Report::from_json(&json).expect("parses");
    assert_eq!(back, report);
    // Key-for-key identical documents.
    let a: Value = serde_json::from_str(&json).expect("json");
    let b: Value = serde_json::from_str(&back.to_json()).expect("json");
    assert_eq!(a, b);
    assert_eq!(a["future_key"]["nested"][2], 3);
    assert_eq!(a["client"]["verdict"], "not saturated");
    assert_eq!(a["timeseries"][1]["p99_us"], 950);
    // The histogram decodes to the recorder's counts, value for value.
    let h = back.latency_histogram().expect("decodes");
    assert_eq!(counts(&h), counts(&rec.latency_histogram()));
    let u = back
        .latency_uncorrected_histogram()
        .expect("decodes")
        .expect("present");
    assert_eq!(
        counts(&u),
        counts(rec.latency_uncorrected_histogram().expect("open loop"))
    );
    let lag = back
        .schedule_lag_histogram()
        .expect("decodes")
        .expect("present");
    assert_eq!(
        counts(&lag),
        counts(rec.schedule_lag_histogram().expect("open loop"))
    );
}

#[test]
fn histogram_is_hdr_v2_compressed_base64_readable_by_the_plain_deserializer() {
    let rec = busy_recorder(4, 2_000, false);
    let report = Report::build(&meta("t", 1, 1, 1.0), &rec);
    // "HISTFAAA" is base64 of the V2 compressed cookie 0x1c849314 that the
    // Java, Go and C implementations write and read.
    assert!(
        report.histogram.starts_with("HISTFAAA"),
        "{}",
        &report.histogram[..16]
    );
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&report.histogram)
        .expect("base64");
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .expect("V2");
    assert_eq!(h, rec.latency_histogram());
    assert_eq!(h.low(), 1);
    assert_eq!(h.high(), 3_600_000_000);
    assert_eq!(h.sigfig(), 3);
}

/// Interval histograms logged by jHiccup 2.0.7 (Java HdrHistogram), from
/// the HdrHistogram Rust crate's test data `tests/data/tagged-Log.logV2.hlog`.
/// Columns there: start, length, max (ms), histogram in ns. The max values
/// below are the ones Java wrote next to each histogram.
const JAVA_HISTOGRAMS: [(&str, f64); 3] = [
    ("HISTFAAAAEV42pNpmSzMwMCgyAABTBDKT4GBgdnNYMcCBvsPEBEJISEuATEZMQ4uASkhIR4nrxg9v2lMaxhvMekILGZkKmcCAEf2CsI=", 2.769),
    ("HISTFAAAAEJ42pNpmSzMwMAgxwABTBDKT4GBgdnNYMcCBvsPEBEWLj45FTExAT4pBSEBKa6UkAgBi1uM7xjfMMlwMDABAC0CCjM=", 0.442),
    ("HISTFAAAAJZ42pNpmSzMwMB0nQECmCCUnwIDA7ObwY4FDPYfYDJMXFxsbGwMbBwszDwsDDxsHFw6RWJMLJMZmcqBMJrJmskSiA2ZZJmkgRBCgmheIORGI1H5rEzMQAyDzFhY2EWRWUwMWCBxQtQQhAIWJiyAaEHyFbKwsLHAADYWAWmiFeKS5gACLsIEzdQICAgBIQShEfhFABXDF+M=", 1551.892),
];

#[test]
fn histograms_written_by_java_hdrhistogram_decode_and_merge() {
    let mut reports = Vec::new();
    let mut total = 0;
    let mut max_ns = 0;
    for (encoded, java_max_ms) in JAVA_HISTOGRAMS {
        let h = decode_histogram(encoded).expect("Java V2 histogram decodes");
        let max_ms = (h.max() as f64 / 1e6 * 1000.0).round() / 1000.0;
        assert_eq!(max_ms, java_max_ms);
        total += h.len();
        max_ns = max_ns.max(h.max());
        // A report carrying a foreign histogram merges too.
        let mut r = Report::build(&meta("java", 1, 1, 1.0), &Recorder::new());
        r.histogram = encoded.to_string();
        r.requests = h.len();
        reports.push(r);
    }
    let merged = Report::merge(&reports).expect("merges");
    let h = merged.latency_histogram().expect("decodes");
    assert_eq!(h.len(), total);
    assert_eq!(merged.requests, total);
    assert!(h.equivalent(h.max(), max_ns));
}

/// Written by the Python implementation (PyPI `hdrhistogram` 0.10.8):
/// `h = HdrHistogram(1, 3600000000, 3)`, values 5, 100, 100, 2500, 999999
/// recorded, then `h.encode()`. The same session decoded a report of this
/// crate with `HdrHistogram.decode` and got identical p50/p90/p99/p999,
/// min, max, mean and total count.
const PYTHON_HISTOGRAM: &str =
    "HISTFAAAACx4nJNpmSzMwMDAwwABzFCaEURcm7yEwf4DRICTaTcjy09Fpt9djEwAnnAIAg==";

#[test]
fn histogram_written_by_python_hdrh_decodes_to_the_recorded_values() {
    let h = decode_histogram(PYTHON_HISTOGRAM).expect("Python V2 histogram decodes");
    assert_eq!(h.len(), 5);
    assert_eq!(h.count_at(5), 1);
    assert_eq!(h.count_at(100), 2);
    assert_eq!(h.count_at(2_500), 1);
    assert_eq!(h.count_at(999_999), 1);
    // Same configuration as ours, so it merges exactly with our reports.
    let mut rec = Recorder::new();
    rec.record_response(100, 200, 0);
    let ours = Report::build(&meta("py", 1, 1, 1.0), &rec);
    let mut theirs = ours.clone();
    theirs.histogram = PYTHON_HISTOGRAM.to_string();
    theirs.requests = 5;
    let merged = Report::merge(&[ours, theirs]).expect("merges");
    let m = merged.latency_histogram().expect("decodes");
    assert_eq!(m.count_at(100), 3);
    assert_eq!(m.len(), 6);
    assert_eq!(merged.latency_us.p50, 100);
}

#[test]
fn summary_percentiles_equal_value_at_quantile() {
    let rec = busy_recorder(5, 10_000, false);
    let report = Report::build(&meta("t", 1, 1, 1.0), &rec);
    let h = rec.latency_histogram();
    let s = &report.latency_us;
    assert_eq!(s.p50, h.value_at_quantile(0.5));
    assert_eq!(s.p75, h.value_at_quantile(0.75));
    assert_eq!(s.p90, h.value_at_quantile(0.9));
    assert_eq!(s.p95, h.value_at_quantile(0.95));
    assert_eq!(s.p99, h.value_at_quantile(0.99));
    assert_eq!(s.p999, h.value_at_quantile(0.999));
    assert_eq!(s.p9999, h.value_at_quantile(0.9999));
    assert_eq!(s.min, h.min());
    assert_eq!(s.max, h.max());
    assert_eq!(s.mean, h.mean());
    assert_eq!(s.stdev, h.stdev());
    // And they are sane for this stream (50..20,050 µs, roughly uniform).
    assert!((9_000..11_500).contains(&s.p50), "p50 {}", s.p50);
    assert!(s.min >= 50 && s.max <= 20_100);
}

#[test]
fn report_merge_equals_the_report_of_the_merged_recorders() {
    for open_loop in [false, true] {
        let a = busy_recorder(10, 7_000, open_loop);
        let b = busy_recorder(20, 5_000, open_loop);
        let mut ma = meta("http://127.0.0.1:8080/", 2, 100, 10.0);
        let mut mb = meta("http://127.0.0.1:8080/", 3, 50, 9.5);
        if open_loop {
            ma.rate_target = Some(700.0);
            mb.rate_target = Some(500.0);
        }
        // Through JSON, as `xload merge A.json B.json` does.
        let ra = Report::from_json(&Report::build(&ma, &a).to_json()).expect("a");
        let rb = Report::from_json(&Report::build(&mb, &b).to_json()).expect("b");
        let merged = Report::merge(&[ra, rb]).expect("merges");

        let mut both = a.clone();
        both.merge(&b);
        let mut mboth = meta("http://127.0.0.1:8080/", 5, 150, 10.0);
        if open_loop {
            mboth.rate_target = Some(1_200.0);
        }
        let expected = Report::build(&mboth, &both);
        // Everything, histograms included (same counts -> same encoding).
        assert_eq!(
            merged.latency_histogram().expect("h"),
            both.latency_histogram()
        );
        assert_eq!(
            counts(&merged.latency_histogram().expect("h")),
            counts(&both.latency_histogram())
        );
        assert_eq!(merged, expected);
        assert_eq!(merged.rps, merged.requests as f64 / 10.0);
    }
}

#[test]
fn merge_names_differing_targets_and_engines() {
    let r1 = Report::build(&meta("http://a/", 1, 1, 1.0), &busy_recorder(1, 10, false));
    let mut m2 = meta("http://b/", 1, 1, 2.0);
    m2.engine = "epoll".into();
    m2.engine_reason = Some("seccomp".into());
    let r2 = Report::build(&m2, &busy_recorder(2, 10, false));
    let merged = Report::merge(&[r1.clone(), r2]).expect("merges");
    assert_eq!(merged.target, "multiple");
    assert_eq!(merged.engine, "io_uring+epoll");
    assert_eq!(merged.engine_reason.as_deref(), Some("seccomp"));
    assert_eq!(merged.duration_s, 2.0);
    assert_eq!(merged.rps, 10.0);
    let same = Report::merge(&[r1.clone(), r1.clone()]).expect("merges");
    assert_eq!(same.target, "http://a/");
    assert_eq!(same.engine, "io_uring");
}

#[test]
fn merge_of_timeseries_adds_rows_by_second_and_bounds_percentiles() {
    let mut a = Report::build(&meta("t", 1, 1, 2.0), &Recorder::new());
    let mut b = a.clone();
    a.timeseries = vec![
        IntervalRow {
            second: 1,
            requests: 10,
            rps: 10.0,
            p50_us: 100,
            p99_us: 300,
            errors: 1,
        },
        IntervalRow {
            second: 2,
            requests: 20,
            rps: 20.0,
            p50_us: 110,
            p99_us: 200,
            errors: 0,
        },
    ];
    b.timeseries = vec![IntervalRow {
        second: 2,
        requests: 5,
        rps: 5.0,
        p50_us: 90,
        p99_us: 900,
        errors: 2,
    }];
    let m = Report::merge(&[a, b]).expect("merges");
    // The JSON says what the rows' percentiles are.
    assert!(
        m.extra["timeseries_percentiles"]
            .as_str()
            .is_some_and(|t| t.starts_with("worst of the merged reports")),
        "{:?}",
        m.extra
    );
    assert_eq!(
        m.timeseries,
        vec![
            IntervalRow {
                second: 1,
                requests: 10,
                rps: 10.0,
                p50_us: 100,
                p99_us: 300,
                errors: 1
            },
            IntervalRow {
                second: 2,
                requests: 25,
                rps: 25.0,
                p50_us: 110,
                p99_us: 900,
                errors: 2
            },
        ]
    );
    assert_eq!(
        m.timeseries_csv(),
        "second,requests,rps,p50_us,p99_us,errors\n1,10,10.0,100,300,1\n2,25,25.0,110,900,2\n"
    );
}

#[test]
fn merge_with_clients_keeps_each_verdict() {
    let mut a = Report::build(&meta("t", 1, 1, 1.0), &Recorder::new());
    a.client = Some(serde_json::json!({"verdict": "client saturated: CPU 0 at 99%"}));
    let b = Report::build(&meta("t", 1, 1, 1.0), &Recorder::new());
    assert_eq!(Report::merge(&[a.clone()]).expect("one").client, a.client);
    let m = Report::merge(&[a, b]).expect("two");
    let c = m.client.expect("client");
    let per = &c["per_report"];
    assert_eq!(per[0]["verdict"], "client saturated: CPU 0 at 99%");
    assert!(per[1].is_null());
    // The documented keys, over both: b has no client section, so not all
    // were judged.
    assert_eq!(c["saturated"], false);
    assert_eq!(c["judged"], false);
    let mut x = Report::build(&meta("t", 1, 1, 1.0), &Recorder::new());
    x.client = Some(
        serde_json::json!({"saturated": true, "judged": true, "cpu_s": 1.5,
        "reasons": ["cpu0 99%"], "verdict": "client: SATURATED — cpu0 99%"}),
    );
    let mut y = x.clone();
    y.client = Some(
        serde_json::json!({"saturated": false, "judged": true, "cpu_s": 0.5,
        "reasons": [], "notes": ["a note"], "verdict": "client: not saturated"}),
    );
    let m = Report::merge(&[x, y]).expect("two");
    let c = m.client.clone().expect("client");
    assert_eq!(
        (c["saturated"].as_bool(), c["judged"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(c["cpu_s"], 2.0);
    assert_eq!(c["reasons"][0], "report 1: cpu0 99%");
    assert_eq!(c["notes"][0], "report 2: a note");
    let text = m.render_text(&TextOptions::default());
    assert!(
        text.contains("client: SATURATED in 1 of 2 merged reports"),
        "{text}"
    );
    assert!(text.contains("  [2] client: not saturated"), "{text}");
}

#[test]
fn merge_rejects_bad_input_naming_the_report() {
    assert!(matches!(
        Report::merge(&[]),
        Err(ReportError::NothingToMerge)
    ));
    let good = Report::build(
        &meta("http://good/", 1, 1, 1.0),
        &busy_recorder(1, 10, false),
    );
    let mut bad = good.clone();
    bad.target = "http://bad/".into();
    bad.histogram = "not base64 !!".into();
    match Report::merge(&[good.clone(), bad.clone()]) {
        Err(ReportError::InReport {
            index: 1,
            target,
            source,
        }) => {
            assert_eq!(target, "http://bad/");
            assert!(matches!(*source, ReportError::HistogramBase64(_)));
        }
        other => panic!("expected an error for report 1, got {other:?}"),
    }
    bad.histogram = base64::engine::general_purpose::STANDARD
        .encode(b"HISTxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    let err = Report::merge(&[good.clone(), bad.clone()]).expect_err("bad cookie");
    assert!(err.to_string().contains("report 1 (http://bad/)"), "{err}");
    bad.histogram = String::new();
    assert!(matches!(
        bad.latency_histogram(),
        Err(ReportError::HistogramMissing)
    ));
    bad.histogram = good.histogram.clone();
    bad.schema = "xload/2".into();
    assert!(matches!(
        Report::merge(&[good, bad]),
        Err(ReportError::InReport { index: 1, .. })
    ));
}

#[test]
fn from_json_rejects_garbage_missing_keys_and_other_schemas_without_panicking() {
    assert!(matches!(Report::from_json(""), Err(ReportError::Json(_))));
    // Valid JSON without a string schema is "not an xload report", by name.
    assert!(matches!(
        Report::from_json("{\"schema\": 3}"),
        Err(ReportError::Schema { .. })
    ));
    assert!(matches!(
        Report::from_json("[1,2,3]"),
        Err(ReportError::Schema { .. })
    ));
    let good = Report::build(&meta("t", 1, 1, 1.0), &busy_recorder(1, 10, false));
    let mut v: Value = serde_json::from_str(&good.to_json()).expect("json");
    v.as_object_mut().expect("object").remove("histogram");
    let err = Report::from_json(&v.to_string()).expect_err("missing histogram");
    assert!(err.to_string().contains("histogram"), "{err}");
    let mut v: Value = serde_json::from_str(&good.to_json()).expect("json");
    v["schema"] = "other/9".into();
    assert!(matches!(
        Report::from_json(&v.to_string()),
        Err(ReportError::Schema { .. })
    ));
    // Truncated histogram payload: an error, not a panic.
    let mut r = good.clone();
    r.histogram.truncate(r.histogram.len() / 2);
    assert!(r.latency_histogram().is_err());
}

#[test]
fn zero_request_report_has_zero_figures_and_no_nan() {
    let report = Report::build(&meta("http://127.0.0.1:1/", 1, 1, 0.0), &Recorder::new());
    assert_eq!(report.requests, 0);
    assert_eq!(report.rps, 0.0);
    assert_eq!(report.latency_us, LatencySummary::default());
    assert_eq!(report.error_rate(), 0.0);
    let json = report.to_json();
    assert!(!json.contains("NaN") && !json.contains("null"), "{json}");
    let back = Report::from_json(&json).expect("parses");
    assert!(back.latency_histogram().expect("decodes").is_empty());
    assert_eq!(back.schema, SCHEMA);
}

#[test]
fn batching_round_trips_and_merges_by_sums_and_bounds() {
    use xload_stats::Batching;
    let b = Batching::new(100, 2_450, 6, 25);
    assert_eq!(b.completions_per_wait, 24.5);
    assert_eq!(Batching::new(0, 0, 2, 2).completions_per_wait, 0.0);
    let mut a = Report::build(&meta("t", 1, 100, 1.0), &Recorder::new());
    a.batching = Some(b);
    let v: Value = serde_json::from_str(&a.to_json()).expect("json");
    assert_eq!(v["batching"]["waits"], 100);
    assert_eq!(v["batching"]["completions"], 2_450);
    assert_eq!(v["batching"]["completions_per_wait"], 24.5);
    assert_eq!(
        (
            v["batching"]["cap_min"].as_u64(),
            v["batching"]["cap_max"].as_u64()
        ),
        (Some(6), Some(25))
    );
    assert_eq!(
        Report::from_json(&a.to_json()).expect("back").batching,
        Some(b)
    );
    // A report without it has no key.
    let plain = Report::build(&meta("t", 1, 100, 1.0), &Recorder::new());
    assert!(!plain.to_json().contains("batching"));
    // Merged: sums and the widest range; a report without it adds nothing.
    let mut c = plain.clone();
    c.batching = Some(Batching::new(50, 50, 2, 8));
    let m = Report::merge(&[a.clone(), plain.clone(), c]).expect("merge");
    assert_eq!(m.batching, Some(Batching::new(150, 2_500, 2, 25)));
    assert_eq!(
        Report::merge(&[plain.clone(), plain])
            .expect("merge")
            .batching,
        None
    );
}

#[test]
fn the_unanswered_line_shows_only_a_stall() {
    let mut r = Recorder::new();
    for _ in 0..100 {
        r.record_response(1_000, 200, 10);
    }
    let c = r.unanswered_censor();
    // A healthy end: one request a little older than the p99.
    r.record_unanswered(&c, 1_200, Some(1_200));
    let rep = Report::build(&meta("http://t/", 1, 4, 1.0), &r);
    assert_eq!(rep.unanswered_text(), None);
    assert_eq!(rep.unanswered_at_end.recorded, 1);
    // A stall: far older.
    r.record_unanswered(&c, 800_000, Some(800_000));
    let rep = Report::build(&meta("http://t/", 1, 4, 1.0), &r);
    let t = rep.unanswered_text().expect("a line");
    assert!(t.starts_with("2 in flight at the end, oldest 800"), "{t}");
    // It survives the JSON round trip and a merge.
    let back = Report::from_json(&rep.to_json()).unwrap();
    assert_eq!(back.unanswered_at_end, rep.unanswered_at_end);
    let merged = Report::merge(&[back.clone(), back]).unwrap();
    assert_eq!(merged.unanswered_at_end.in_flight, 4);
}

#[test]
fn tls_handshakes_report_and_merge_exactly() {
    let mut a = Recorder::new();
    let mut b = Recorder::new();
    for i in 0..10 {
        a.record_tls_handshake(
            100 + i,
            2_000 + i,
            500_000,
            false,
            "TLS1.3",
            "TLS13_AES_128_GCM_SHA256",
        );
    }
    a.reset();
    a.record_tls_handshake(
        100,
        2_000,
        150_000,
        false,
        "TLS1.3",
        "TLS13_AES_128_GCM_SHA256",
    );
    b.record_tls_handshake(
        300,
        8_000,
        50_000,
        true,
        "TLS1.3",
        "TLS13_AES_128_GCM_SHA256",
    );
    assert_eq!(a.tls_handshakes(), (1, 0), "reset forgets the warm-up's");
    let ra = Report::build(&meta("https://h/", 1, 1, 1.0), &a);
    let rb = Report::build(&meta("https://h/", 1, 1, 1.0), &b);
    let t = ra.tls.as_ref().expect("tls");
    assert_eq!((t.handshakes_full, t.handshakes_resumed), (1, 0));
    assert_eq!(t.version, "TLS1.3");
    assert_eq!(t.handshake_us.p50, 2_000);
    assert!(
        (t.handshake_cpu_us - 150.0).abs() < 1e-9,
        "{}",
        t.handshake_cpu_us
    );
    let json: Value = serde_json::from_str(&ra.to_json()).unwrap();
    assert_eq!(json["tls"]["connect_us"]["max"], 100);
    let m = Report::merge(&[ra, rb]).unwrap();
    let t = m.tls.expect("merged tls");
    assert_eq!((t.handshakes_full, t.handshakes_resumed), (1, 1));
    // 150 µs and 50 µs of computation: 100 µs per handshake merged.
    assert!(
        (t.handshake_cpu_s - 200e-6).abs() < 1e-12,
        "{}",
        t.handshake_cpu_s
    );
    assert!(
        (t.handshake_cpu_us - 100.0).abs() < 1e-9,
        "{}",
        t.handshake_cpu_us
    );
    assert_eq!(
        t.handshake_us.max,
        decode_histogram(&t.histogram_handshake).unwrap().max()
    );
    assert!(t.handshake_us.max >= 7_990, "{:?}", t.handshake_us);
    // A plain run has no tls object.
    let plain = Report::build(&meta("http://h/", 1, 1, 1.0), &Recorder::new());
    assert!(!plain.to_json().contains("\"tls\""));
}

#[test]
fn merge_refuses_a_counter_sum_above_u64_naming_the_field() {
    let base = Report::build(&meta("http://t/", 1, 1, 1.0), &busy_recorder(3, 40, false));
    type Edit = fn(&mut Report);
    let cases: [(&str, Edit); 7] = [
        ("requests", |r| r.requests = u64::MAX),
        ("bytes", |r| r.bytes = u64::MAX),
        ("status.200", |r| {
            r.status.insert("200".into(), u64::MAX);
        }),
        ("errors.timeout", |r| {
            r.errors.insert("timeout".into(), u64::MAX);
        }),
        ("errors_total", |r| r.errors_total = u64::MAX),
        ("unanswered_at_end.in_flight", |r| {
            r.unanswered_at_end.in_flight = u64::MAX
        }),
        ("connects", |r| r.connects = u64::MAX),
    ];
    for (field, edit) in cases {
        let mut huge = base.clone();
        huge.errors.insert("timeout".into(), 1);
        edit(&mut huge);
        let mut small = base.clone();
        small.errors.insert("timeout".into(), 1);
        small.errors_total = small.errors_total.max(1);
        small.unanswered_at_end.in_flight = 1;
        small.connects = small.connects.max(1);
        // Whichever comes first, the report whose addition overflows is named.
        for (pair, index) in [([small.clone(), huge.clone()], 1), ([huge, small], 1)] {
            match Report::merge(&pair) {
                Err(ReportError::InReport {
                    index: i, source, ..
                }) => {
                    assert_eq!(i, index, "{field}");
                    let msg = source.to_string();
                    assert!(
                        matches!(*source, ReportError::Overflow { .. }),
                        "{field}: {msg}"
                    );
                    assert!(msg.starts_with(&format!("{field} ")), "{field}: {msg}");
                    assert!(msg.contains("2^64"), "{msg}");
                }
                other => panic!("{field}: expected a refusal, got {other:?}"),
            }
        }
    }
}
