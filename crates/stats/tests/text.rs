//! Text report: the figures on each line, open-loop lines, the latency
//! table, error breakdowns, the client verdict hook, and the empty report.

use xload_stats::{ErrorKind, Recorder, Report, RunMeta, TextOptions};

fn meta() -> RunMeta {
    RunMeta {
        target: "http://127.0.0.1:8080/".into(),
        engine: "io_uring".into(),
        engine_reason: None,
        threads: 2,
        connections: 100,
        duration_s: 10.0,
        rate_target: None,
        pipeline: 1,
    }
}

/// 2,131,004 responses: 2,131,000 at 400 µs and 4 at 4,100 µs, 156 bytes each.
fn closed_loop_report() -> Report {
    let mut rec = Recorder::new();
    for _ in 0..2_131_000 {
        rec.record_response(400, 200, 156);
    }
    for _ in 0..4 {
        rec.record_response(4_100, 503, 156);
    }
    Report::build(&meta(), &rec)
}

fn line<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no {label:?} line in:\n{text}"))
}

#[test]
fn summary_lines_carry_the_figures_with_units_and_separators() {
    let text = closed_loop_report().render_text(&TextOptions::default());
    assert_eq!(
        text.lines().next().expect("header"),
        "xload 10.00s @ http://127.0.0.1:8080/  (io_uring, 2 threads, 100 connections)"
    );
    let latency = line(&text, "Latency");
    assert!(latency.contains("avg 400µs"), "{latency}");
    assert!(latency.contains("p50 400µs"), "{latency}");
    assert!(latency.contains("p99 400µs"), "{latency}");
    assert!(latency.contains("max 4.10ms"), "{latency}");
    let requests = line(&text, "Requests");
    assert!(requests.contains("2,131,004 in 10.00s"), "{requests}");
    assert!(requests.contains("213,100 req/s"), "{requests}");
    // 2,131,004 * 156 B / 10 s = 31.7 MiB/s.
    assert!(requests.contains("Transfer 31.7 MiB/s"), "{requests}");
    assert_eq!(
        line(&text, "Status").trim(),
        "Status      200: 2,131,000  503: 4"
    );
    assert_eq!(line(&text, "Errors").trim(), "Errors      none");
    assert!(!text.contains("Latency distribution"));
    assert!(!text.contains("client:"));
}

#[test]
fn errors_line_lists_categories_in_taxonomy_order_with_breakdowns() {
    let mut rec = Recorder::new();
    rec.record_response(100, 200, 10);
    rec.record_error(ErrorKind::RequestTimeout);
    for _ in 0..3 {
        rec.record_error(ErrorKind::Reset);
    }
    rec.record_parse_error("bad_chunk_size");
    rec.record_parse_error("bad_chunk_size");
    rec.record_parse_error("header_too_large");
    rec.record_errno(libc::ENOBUFS);
    let text = Report::build(&meta(), &rec).render_text(&TextOptions::default());
    assert_eq!(
        line(&text, "Errors").trim(),
        "Errors      reset 3, parse 3 [bad_chunk_size 2, header_too_large 1], request_timeout 1, \
         other 1 [errno_ENOBUFS 1]"
    );
}

#[test]
fn latency_table_lists_the_percentiles_and_a_distribution() {
    let mut rec = Recorder::new();
    for v in 1..=100_000u64 {
        rec.record_response(v, 200, 0);
    }
    let report = Report::build(&meta(), &rec);
    let text = report.render_text(&TextOptions {
        latency_table: true,
    });
    let h = report.latency_histogram().expect("decodes");
    for (label, q) in [
        ("50%", 0.5),
        ("75%", 0.75),
        ("90%", 0.9),
        ("99%", 0.99),
        ("99.9%", 0.999),
        ("99.99%", 0.9999),
        ("99.999%", 0.99999),
        ("100%", 1.0),
    ] {
        let row = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(label))
            .unwrap_or_else(|| panic!("no {label} row in:\n{text}"));
        let want = xload_sys::fmt::fmt_duration_us(h.value_at_quantile(q) as f64);
        assert_eq!(row.split_whitespace().nth(1), Some(want.as_str()), "{row}");
    }
    assert!(line(&text, "50%").contains("50.0ms"));
    assert!(line(&text, "100%").contains("100ms"));
    assert!(text.contains("Detailed distribution"));
    // The distribution ends at percentile 1 with the total count.
    let last = text
        .lines()
        .rfind(|l| l.trim_end().ends_with("inf"))
        .expect("final distribution row");
    assert!(
        last.contains("1.000000") && last.contains("100,000"),
        "{last}"
    );
}

#[test]
fn open_loop_shows_corrected_and_uncorrected_latency_rate_sends_and_lag() {
    let mut rec = Recorder::new_open_loop();
    for i in 0..5_000u64 {
        let lag_us = if i < 100 { 20_000 } else { 3 };
        rec.record_send(lag_us);
        rec.record_response_open_loop(500 + lag_us, 500, 200, 100);
        if i < 40 {
            rec.record_late_send_waiting();
        } else if lag_us > 1_000 {
            rec.record_late_send();
        }
    }
    rec.record_dropped(7);
    let mut m = meta();
    m.rate_target = Some(500.0);
    m.duration_s = 10.0;
    let text = Report::build(&m, &rec).render_text(&TextOptions {
        latency_table: true,
    });
    assert!(text
        .lines()
        .next()
        .expect("header")
        .contains("open loop 500 req/s target"));
    let corrected = line(&text, "Latency ");
    assert!(corrected.contains("max 20.5ms") && corrected.contains("from intended send times"));
    let uncorrected = line(&text, "Uncorrected");
    assert!(uncorrected.contains("max 500µs") && uncorrected.contains("from actual sends"));
    assert_eq!(
        line(&text, "Rate").trim(),
        "Rate        achieved 500 req/s of 500 target (100.00%)"
    );
    assert_eq!(
        line(&text, "Sends").trim(),
        "Sends       5,000 sent  late 100 (40 waiting for a free connection)  dropped 7"
    );
    assert_eq!(
        line(&text, "Sched. lag").trim(),
        "Sched. lag  p50 3µs  p99 20.0ms  max 20.0ms"
    );
    assert!(
        text.contains("uncorrected"),
        "table has an uncorrected column"
    );
}

#[test]
fn header_names_pipeline_engine_reason_and_reconnects() {
    let mut rec = Recorder::new();
    rec.record_response(10, 200, 1);
    for _ in 0..250 {
        rec.record_connect();
    }
    let mut m = meta();
    m.pipeline = 16;
    m.engine = "epoll".into();
    m.engine_reason = Some("io_uring_setup failed: EPERM".into());
    let text = Report::build(&m, &rec).render_text(&TextOptions::default());
    assert!(text
        .lines()
        .next()
        .expect("header")
        .ends_with("100 connections, pipeline 16)"));
    assert_eq!(
        line(&text, "Engine").trim(),
        "Engine      epoll: io_uring_setup failed: EPERM"
    );
    assert_eq!(
        line(&text, "Connects").trim(),
        "Connects    250 opened  =  25.00 conn/s"
    );
}

#[test]
fn client_verdict_is_the_last_line() {
    let mut report = closed_loop_report();
    report.client = Some(
        serde_json::json!({"cpu_s": 9.9, "verdict": "client: SATURATED — cpu0 99% (sys 59%, softirq 40%): results understate the server"}),
    );
    for opts in [
        TextOptions::default(),
        TextOptions {
            latency_table: true,
        },
    ] {
        let text = report.render_text(&opts);
        assert_eq!(
            text.lines().last(),
            Some("client: SATURATED — cpu0 99% (sys 59%, softirq 40%): results understate the server")
        );
    }
    report.client = Some(serde_json::json!({"cpu_s": 9.9}));
    assert!(!report
        .render_text(&TextOptions::default())
        .contains("client:"));
}

#[test]
fn zero_request_report_renders_without_nan_or_panic() {
    for duration_s in [0.0, 5.0] {
        let mut m = meta();
        m.duration_s = duration_s;
        for rec in [Recorder::new(), Recorder::new_open_loop()] {
            let mut report = Report::build(&m, &rec);
            if let Some(o) = report.open_loop.as_mut() {
                o.rate_target = 0.0;
            }
            let text = report.render_text(&TextOptions {
                latency_table: true,
            });
            assert!(!text.contains("NaN") && !text.contains("inf"), "{text}");
            assert!(line(&text, "Latency").contains("no responses"));
            assert!(line(&text, "Requests").contains("0 in"));
        }
    }
    // An unreadable histogram is reported, not a panic.
    let mut report = closed_loop_report();
    report.histogram = "garbage".into();
    let text = report.render_text(&TextOptions {
        latency_table: true,
    });
    assert!(text.contains("Latency distribution unavailable"), "{text}");
}

#[test]
fn batching_line_says_completions_per_wait_and_the_cap() {
    let mut r = closed_loop_report();
    assert!(!r.render_text(&TextOptions::default()).contains("Batching"));
    r.batching = Some(xload_stats::Batching::new(1_000, 24_500, 6, 25));
    let text = r.render_text(&TextOptions::default());
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("Batching"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("24.5 completions per wait (1000 waits, warm-up included), cap 6-25"),
        "{line}"
    );
    r.batching = Some(xload_stats::Batching::new(10, 20, 2, 2));
    let text = r.render_text(&TextOptions::default());
    assert!(
        text.contains("2.0 completions per wait (10 waits, warm-up included), cap 2\n"),
        "{text}"
    );
}
