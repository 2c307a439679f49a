//! Per-class figures: recorded per worker, reported, merged exactly by
//! class across reports, limits judged again from the merged histogram.

use xload_stats::{classes_csv, ClassLimit, ErrorKind, Recorder, Report, RunMeta};

fn meta() -> RunMeta {
    RunMeta {
        target: "http://127.0.0.1:8080/".into(),
        engine: "io_uring".into(),
        engine_reason: None,
        threads: 1,
        connections: 4,
        duration_s: 2.0,
        rate_target: None,
        pipeline: 1,
    }
}

/// A recorder with two classes: `a` gets latencies from `a_us`, `b` from `b_us`.
fn recorder(a_us: &[u64], b_us: &[u64], bad_paths: &[&str]) -> Recorder {
    let mut r = Recorder::new();
    r.set_classes(&["a", "b"]);
    for (class, lat) in [(0, a_us), (1, b_us)] {
        for &us in lat {
            r.record_response(us, 200, 100);
            r.record_class(class, us);
        }
    }
    for p in bad_paths {
        r.record_consistency(1, p, &"body SHA-256 differs");
    }
    r
}

#[test]
fn classes_merge_exactly_by_name_and_limits_are_judged_on_the_merge() {
    let a1: Vec<u64> = (1..=1000).collect();
    let a2: Vec<u64> = (5000..=6999).collect();
    let b: Vec<u64> = vec![300; 10];
    let mut r1 = Report::build(&meta(), &recorder(&a1, &b, &["/x", "/y"]));
    let r2 = Report::build(&meta(), &recorder(&a2, &[], &["/x", "/z"]));
    // p50 of `a` alone is 500 µs (passes 1 ms); merged it is above 5 ms (fails).
    r1.classes[0]
        .set_limits(vec![
            ClassLimit::new("p50", 1000),
            ClassLimit::new("mean", 10_000),
        ])
        .unwrap();
    assert!(r1.classes[0].limits.iter().all(|l| l.pass));
    let j1 = Report::from_json(&r1.to_json()).unwrap();
    let j2 = Report::from_json(&r2.to_json()).unwrap();
    let m = Report::merge(&[j1, j2]).unwrap();

    // Exact: the same as one recorder that saw everything.
    let mut all = recorder(&a1, &b, &["/x", "/y"]);
    all.merge(&recorder(&a2, &[], &["/x", "/z"]));
    let want = Report::build(&meta(), &all);
    assert_eq!(m.classes.len(), 2);
    for (got, want) in m.classes.iter().zip(&want.classes) {
        assert_eq!(got.name, want.name);
        assert_eq!(got.requests, want.requests);
        assert_eq!(got.latency_us, want.latency_us);
        assert_eq!(got.consistency_errors, want.consistency_errors);
    }
    assert_eq!(
        m.classes.iter().map(|c| c.requests).sum::<u64>(),
        m.requests
    );
    assert_eq!(m.classes[1].consistency_errors, 4);
    assert_eq!(m.errors.get("consistency"), Some(&4));
    let paths: Vec<&str> = m.classes[1]
        .offending
        .iter()
        .map(|o| o.path.as_str())
        .collect();
    assert_eq!(paths, ["/x", "/y", "/z"]);
    // The first report's limits, judged on the merged histogram.
    let p50 = &m.classes[0].limits[0];
    assert!(!p50.pass && p50.measured_us > 1000, "{p50:?}");
    assert!(m.classes[0].limits[1].pass);
}

#[test]
fn classes_show_in_text_and_csv_and_reset_with_the_recorder() {
    let mut rec = recorder(&[1000, 2000], &[500], &["/bad"]);
    let mut r = Report::build(&meta(), &rec);
    r.classes[1]
        .set_limits(vec![ClassLimit::new("p99", 100)])
        .unwrap();
    let text = r.render_text(&Default::default());
    assert!(text.contains("Classes"), "{text}");
    assert!(
        text.contains("Limits      b: p99 500µs > 100µs FAIL"),
        "{text}"
    );
    assert!(
        text.contains("Consistency b: 1 failed checks, first: /bad (body SHA-256 differs)"),
        "{text}"
    );
    let csv = classes_csv(&r.classes);
    assert!(
        csv.starts_with(
            "class,requests,rps,mean_us,p50_us,p99_us,consistency_errors,limits_pass\na,2,1.0,"
        ),
        "{csv}"
    );
    assert!(csv.ends_with(",1,false\n"), "{csv}");
    rec.reset();
    assert_eq!(rec.classes().iter().map(|c| c.requests()).sum::<u64>(), 0);
    assert_eq!(rec.error_count(ErrorKind::Consistency), 0);
}
