use std::time::Duration;

use xload_probe::observe::{observe, ObserveArgs, ObserveError, ObserveReport};
use xload_probe::Sampler;

#[test]
fn observe_json_two_intervals_cpu_percentages_sum_to_100() {
    let args = ObserveArgs {
        for_duration: Duration::from_millis(400),
        interval: Duration::from_millis(200),
        json: true,
        process: None,
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
        process: None,
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
        process: None,
    };
    let mut out = Vec::new();
    assert!(matches!(
        observe(&args, &mut Sampler::new(), &mut out),
        Err(ObserveError::BadArgs(_))
    ));
    assert!(out.is_empty());
}

#[test]
fn observe_follows_a_process_and_stamps_intervals_with_the_wall_clock() {
    let me = std::process::id() as i32;
    let args = ObserveArgs {
        for_duration: Duration::from_millis(400),
        interval: Duration::from_millis(200),
        json: true,
        process: Some(xload_probe::watch::ProcessSel::Pid(me)),
    };
    let mut out = Vec::new();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64;
    // Burn CPU in this process meanwhile, so its share is above zero.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spin = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut x = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                x = x.wrapping_mul(31).wrapping_add(7);
            }
            x
        })
    };
    observe(&args, &mut Sampler::new(), &mut out).expect("observe");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spin.join().unwrap();
    let report: ObserveReport = serde_json::from_slice(&out).expect("JSON");
    assert!(
        report.started_unix_us >= before,
        "{}",
        report.started_unix_us
    );
    let followed = report.process.expect("the process is named");
    assert_eq!(followed.pids, vec![me]);
    let mut last = report.started_unix_us;
    for iv in &report.intervals {
        assert!(iv.end_unix_us > last, "wall clock moves on: {iv:?}");
        last = iv.end_unix_us;
        let pct = iv.process_cpu_pct.expect("the process's CPU");
        assert!(pct > 0.0 && pct <= 100.0 * 64.0, "{pct}");
        assert!(iv.procs_running.is_some());
        assert!(iv.sockstat.sockets_used > 0);
    }
}
