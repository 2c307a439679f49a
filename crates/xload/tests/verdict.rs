//! The client-saturation verdict on a real run (issue 5): a CPU-burning thread
//! on the generator's CPU makes the client saturated, and the report names that
//! CPU; a light open-loop run on the same CPU is not saturated.
//!
//! One test function on purpose: the two halves must not run at the same time.

mod support;

use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::run::{read_json, run_xload, TempDir};
use support::server::{Behavior, TestServer};
use support::timing::{last_run_disturbed, undisturbed};

fn pin_to(cpu: usize) {
    xload_sys::cpu::pin_current_thread(cpu).expect("pin the burner thread");
}

/// The report's verdict: its last line that is not an indented note under it
/// (the probe adds "  note: ..." lines when another CPU was busy).
fn verdict_line(stdout: &str) -> &str {
    stdout
        .lines()
        .rev()
        .find(|l| !l.starts_with("  "))
        .unwrap_or("")
}

fn allowed_cpus() -> Vec<usize> {
    xload_sys::cpu::allowed_cpus().expect("sched_getaffinity")
}

/// A 1.5 s run (after 300 ms of warm-up) of xload on `cpu` with `args`
/// against `server`, its report in `json`.
fn run_on(
    cpu: usize,
    args: &[&str],
    json: &Path,
    server: &TestServer,
) -> (ExitStatus, String, String, Duration) {
    let cpu = cpu.to_string();
    let url = server.url("/");
    let common = [
        "-d", "1500ms", "--warmup", "300ms", "--cpus", &cpu, "--json",
    ];
    let json = json.to_str().unwrap();
    run_xload(args.iter().chain(&common).chain(&[json, url.as_str()]))
}

#[test]
fn verdict_names_a_burned_generator_cpu_and_clears_a_light_run() {
    let cpus = allowed_cpus();
    let gen_cpu = cpus[0];
    let server = TestServer::start(Behavior::Ok { body_len: 16 });
    let dir = TempDir::new("verdict");

    // 1. A thread burning the generator's CPU for the whole run.
    let burning = Arc::new(AtomicBool::new(true));
    let burner = {
        let burning = Arc::clone(&burning);
        std::thread::spawn(move || {
            pin_to(gen_cpu);
            let until = Instant::now() + Duration::from_secs(10);
            let mut x = 0u64;
            while burning.load(Ordering::Relaxed) && Instant::now() < until {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                std::hint::black_box(x);
            }
        })
    };
    let hot = dir.join("hot.json");
    let (status, stdout, stderr, _) = run_on(gen_cpu, &["-c", "8"], &hot, &server);
    burning.store(false, Ordering::Relaxed);
    burner.join().unwrap();
    assert!(status.success(), "{stderr}");
    let r = read_json(&hot);
    let client = &r["client"];
    assert_eq!(client["saturated"], true, "{client:#}");
    let cpu_name = format!("cpu{gen_cpu}");
    let reasons = client["reasons"].to_string();
    assert!(
        reasons.contains(&cpu_name),
        "reasons must name {cpu_name}: {reasons}"
    );
    let last = verdict_line(&stdout);
    assert!(
        last.starts_with("client: SATURATED") && last.contains(&cpu_name),
        "{stdout}"
    );

    // 2. A light open-loop run on the same CPU, nothing else on it. Measured
    // again if the machine stalled or the hypervisor stole the CPU meanwhile,
    // or if sends left late: on a shared VM a hiccup of a few ms (too short
    // for the stall watchdog) puts 1% of a 200 req/s run's sends behind.
    let light = dir.join("light.json");
    let mut tries = 0;
    let (stdout, client, saturated, disturbed) = loop {
        tries += 1;
        let (status, stdout, stderr, _) =
            undisturbed(|| run_on(gen_cpu, &["-c", "4", "--rate", "200"], &light, &server));
        assert!(status.success(), "{stderr}");
        let client = read_json(&light)["client"].clone();
        let saturated = client["saturated"]
            .as_bool()
            .unwrap_or_else(|| panic!("no verdict: {client:#}"));
        // A 200 req/s run cannot saturate a CPU by itself: the only reasons
        // allowed, on any try, are late sends, and, when other processes
        // loaded the machine (all three tries), a busy CPU that the verdict
        // itself says xload barely used.
        let busy_elsewhere = last_run_disturbed();
        let reasons = client["reasons"].as_array().cloned().unwrap_or_default();
        assert!(
            reasons.iter().all(|r| r.as_str().is_some_and(|r| {
                r.starts_with("open loop:")
                    || (busy_elsewhere && r.contains("other processes or interrupts share"))
            })),
            "a 200 req/s run cannot saturate a CPU: {client:#}"
        );
        assert!(!saturated || !reasons.is_empty(), "{client:#}");
        if !saturated || tries == 3 {
            break (stdout, client, saturated, last_run_disturbed());
        }
        eprintln!(
            "light run sent late ({}): measuring again",
            client["reasons"]
        );
    };
    // Three runs in a row with late sends (a disturbed machine; the open-loop
    // tests hold the lag itself) are left at the checks in the loop.
    if !saturated {
        let last = verdict_line(&stdout);
        assert!(last.starts_with("client: not saturated"), "{stdout}");
    } else {
        eprintln!("three light runs sent late (disturbed: {disturbed}): {client:#}");
    }
}
