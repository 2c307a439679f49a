//! `xtune observe` through the binary: the per-CPU figures of each interval
//! and of the summary account for the whole CPU.

use std::process::Command;

#[test]
fn observe_json_per_cpu_figures_sum_to_about_100() {
    let out = Command::new(env!("CARGO_BIN_EXE_xtune"))
        .args(["observe", "--for", "600ms", "--interval", "200ms", "--json"])
        .output()
        .expect("run xtune");
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(doc["schema"], "xtune-observe/1");
    let intervals = doc["intervals"].as_array().expect("intervals");
    assert!(
        (2..=4).contains(&intervals.len()),
        "{} intervals",
        intervals.len()
    );
    let mut windows: Vec<&serde_json::Value> = intervals.iter().collect();
    windows.push(&doc["summary"]);
    for w in windows {
        let cpus = w["cpus"].as_array().expect("cpus");
        assert!(!cpus.is_empty());
        for c in cpus {
            let sum: f64 = [
                "usr", "nice", "sys", "irq", "softirq", "steal", "iowait", "idle",
            ]
            .iter()
            .map(|k| c[*k].as_f64().expect("a figure"))
            .sum();
            // Per-window tick counts are small: rounding to 0.1% per field.
            assert!((sum - 100.0).abs() <= 2.0, "cpu {} sums to {sum}", c["cpu"]);
        }
    }
}

#[test]
fn observe_refuses_netns() {
    let out = Command::new(env!("CARGO_BIN_EXE_xtune"))
        .args(["observe", "--for", "100ms", "--netns", "nope"])
        .output()
        .expect("run xtune");
    assert_eq!(out.status.code(), Some(2));
}
