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

fn xtune(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_xtune"))
        .args(args)
        .output()
        .expect("run xtune")
}

#[test]
fn observe_args_take_durations_with_units_and_default_to_10s_by_1s() {
    let help = String::from_utf8_lossy(&xtune(&["observe", "--help"]).stdout).into_owned();
    assert!(help.contains("[default: 10s]"), "{help}");
    assert!(help.contains("[default: 1s]"), "{help}");
    let bare = xtune(&["observe", "--for", "2"]);
    assert_eq!(bare.status.code(), Some(2), "a bare number has no unit");
    let zero = xtune(&["observe", "--for", "1s", "--interval", "0s"]);
    assert_eq!(zero.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&zero.stderr).contains("--interval must be longer than 0"),
        "{}",
        String::from_utf8_lossy(&zero.stderr)
    );
}

#[test]
fn observe_into_a_closed_pipe_ends_cleanly() {
    // `xtune observe | head -1`: the reader goes away after the first line,
    // the rows that follow meet a closed pipe; that is no failure.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; {} observe --for 600ms --interval 200ms | head -1",
            env!("CARGO_BIN_EXE_xtune")
        ))
        .output()
        .expect("run bash");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
}
