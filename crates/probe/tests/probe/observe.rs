use std::time::Duration;

use xload_probe::observe::{observe, ObserveArgs, ObserveError, ObserveReport};
use xload_probe::Sampler;

#[test]
fn observe_json_two_intervals_cpu_percentages_sum_to_100() {
    let args = ObserveArgs {
        for_duration: Duration::from_millis(400),
        interval: Duration::from_millis(200),
        json: true,
    };
    let mut out = Vec::new();
    observe(&args, &mut Sampler::new(), &mut out).expect("observe");
    let report: ObserveReport = serde_json::from_slice(&out).expect("stdout is one JSON document");
    assert_eq!(report.schema, "xtune-observe/1");
    assert_eq!(report.intervals.len(), 2);
    let online = std::fs::read_to_string("/proc/stat")
        .expect("/proc/stat")
        .lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .count();
    let all_cpus = report
        .intervals
        .iter()
        .map(|i| &i.cpus)
        .chain(std::iter::once(&report.summary.cpus));
    for cpus in all_cpus {
        assert_eq!(cpus.len(), online);
        for c in cpus {
            let sum = c.usr + c.nice + c.sys + c.irq + c.softirq + c.steal + c.iowait + c.idle;
            assert!((sum - 100.0).abs() <= 2.0, "cpu{} sums to {sum}", c.cpu);
        }
    }
    // The tick base matches the wall clock: the right columns at the right rate.
    for iv in &report.intervals {
        let expected = iv.window_s * report.ticks_per_s as f64;
        for c in &iv.cpus {
            assert!(
                (c.ticks as f64) > expected * 0.5 && (c.ticks as f64) < expected * 1.5 + 2.0,
                "{c:?} vs {expected}"
            );
        }
    }
    assert!(
        (report.duration_s - 0.4).abs() < 0.2,
        "{}",
        report.duration_s
    );
    assert!(
        report.summary.verdict.starts_with("host: "),
        "{}",
        report.summary.verdict
    );
}

#[test]
fn observe_text_prints_a_row_per_cpu_and_the_verdict() {
    let args = ObserveArgs {
        for_duration: Duration::from_millis(150),
        interval: Duration::from_millis(150),
        json: false,
    };
    let mut out = Vec::new();
    let report = observe(&args, &mut Sampler::new(), &mut out).expect("observe");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.contains("NET_RX/s"), "{text}");
    for c in &report.intervals[0].cpus {
        assert!(text.contains(&format!("cpu{}", c.cpu)), "{text}");
    }
    assert_eq!(text.lines().last(), Some(report.summary.verdict.as_str()));
}

#[test]
fn observe_rejects_a_zero_interval() {
    let args = ObserveArgs {
        for_duration: Duration::from_secs(1),
        interval: Duration::ZERO,
        json: true,
    };
    let mut out = Vec::new();
    assert!(matches!(
        observe(&args, &mut Sampler::new(), &mut out),
        Err(ObserveError::BadArgs(_))
    ));
    assert!(out.is_empty());
}
