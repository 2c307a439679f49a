//! Saved reports (tests/data, written by `xload --json`) read back and
//! written again byte for byte, and older files still read and merge.

use xload_stats::Report;

fn data(name: &str) -> String {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn saved_reports_round_trip_byte_for_byte() {
    for name in ["closed-loop.json", "open-loop.json"] {
        let text = data(name);
        let report = Report::from_json(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        // `xload --json` ends the document with a newline.
        assert_eq!(format!("{}\n", report.to_json()), text, "{name}");
    }
}

#[test]
fn saved_reports_keep_their_loop_kind() {
    let closed = Report::from_json(&data("closed-loop.json")).expect("closed");
    let open = Report::from_json(&data("open-loop.json")).expect("open");
    assert!(!closed.is_open_loop());
    assert!(open.is_open_loop());
    assert!(Report::merge(&[closed, open]).is_err(), "mixed loops");
}

#[test]
fn an_open_loop_report_from_before_the_send_counters_reads_and_merges() {
    // The first open-loop reports had no `sends`, `late_waiting_for_connection`
    // or `late_catch_up`.
    let old = Report::from_json(&data("open-loop-2026-12-02.json")).expect("old report");
    let o = old.open_loop.as_ref().expect("open loop");
    assert_eq!(o.rate_target, 2_000.0);
    assert_eq!(
        (o.sends, o.late_waiting_for_connection, o.late_catch_up),
        (0, 0, 0),
        "absent counters read as 0"
    );
    let new = Report::from_json(&data("open-loop.json")).expect("new report");
    let merged = Report::merge(&[old.clone(), new.clone()]).expect("merges");
    assert_eq!(merged.requests, old.requests + new.requests);
    assert!(merged.is_open_loop());
    assert_eq!(
        merged
            .latency_uncorrected_histogram()
            .expect("decodes")
            .map(|h| h.len()),
        Some(
            2 * new
                .latency_uncorrected_histogram()
                .expect("h")
                .expect("open")
                .len()
        )
    );
}

#[test]
fn run_keys_follow_the_schema_and_round_trip_while_older_reports_have_none() {
    let old = Report::from_json(&data("closed-loop.json")).expect("closed");
    assert_eq!(
        old.run,
        xload_stats::RunInfo::default(),
        "absent keys read as absent"
    );
    assert!(old.timeseries_histograms.is_empty());
    let mut r = old.clone();
    r.run.run_id = Some("cap-7".into());
    r.run.segment = Some("2/4".into());
    r.run.host = Some("gen2".into());
    r.run.started_at = Some("2026-12-03T10:00:00.000250Z".into());
    r.run.start_at = Some("2026-12-03T10:00:00.000000Z".into());
    r.run.start_error_us = Some(250);
    r.run.xload_version = Some("0.1.0".into());
    r.run.argv = Some(vec!["xload".into(), "http://x/".into()]);
    r.run
        .settings
        .insert("pipeline".into(), serde_json::json!(1));
    r.timeseries_histograms = vec![xload_stats::SecondHistogram {
        second: 1,
        histogram: old.histogram.clone(),
    }];
    let text = r.to_json();
    let back = Report::from_json(&text).expect("reads");
    assert_eq!(back, r);
    assert!(back.extra.is_empty(), "{:?}", back.extra);
    assert_eq!(back.run.started_at_us(), Some(1_796_292_000_000_250));
    // The run's keys come right after `schema`.
    assert!(
        text.starts_with("{\n  \"schema\": \"xload/1\",\n  \"run_id\": \"cap-7\",\n  \"segment\": \"2/4\",\n  \"host\": \"gen2\",\n  \"started_at\""),
        "{text}"
    );
}
