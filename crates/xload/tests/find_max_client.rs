//! A `--find-max` whose maximum was found while the client was SATURATED
//! reports the client's limit and exits 3, unless `--allow-client-limited`.
//! The client is made saturated for certain, whatever the machine's speed: a
//! thread burns the one CPU the generator is pinned to for the whole sweep,
//! and the verdict counts a generator CPU at >= 90% busy as saturated.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::run::{read_json, run_xload, TempDir};
use support::server::{Behavior, TestServer};

/// Runs `f` while a thread burns `cpu` (at most 20 s).
fn with_cpu_burned<T>(cpu: usize, f: impl FnOnce() -> T) -> T {
    let burning = Arc::new(AtomicBool::new(true));
    let burner = {
        let burning = Arc::clone(&burning);
        std::thread::spawn(move || {
            xload_sys::cpu::pin_current_thread(cpu).expect("pin the burner thread");
            let until = Instant::now() + Duration::from_secs(20);
            let mut x = 0u64;
            while burning.load(Ordering::Relaxed) && Instant::now() < until {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                std::hint::black_box(x);
            }
        })
    };
    let out = f();
    burning.store(false, Ordering::Relaxed);
    burner.join().unwrap();
    out
}

#[test]
fn a_maximum_found_by_a_saturated_client_is_the_clients_limit_and_exits_3() {
    let cpu = xload_sys::cpu::allowed_cpus().expect("sched_getaffinity")[0];
    let server = TestServer::start(Behavior::Ok { body_len: 16 });
    let dir = TempDir::new("find-max-client");
    let url = server.url("/");
    let cpu_s = cpu.to_string();
    let sweep = |json: &str, extra: &[&str]| {
        let mut args = vec![
            "sweep",
            &url,
            "--rate",
            "50..100",
            "-c",
            "2",
            "--slo",
            "p99<10s",
            "--find-max",
            "-d",
            "1s",
            "--warmup",
            "200ms",
            "--cooldown",
            "0s",
            "--cpus",
            &cpu_s,
            "--json",
            json,
        ];
        args.extend_from_slice(extra);
        with_cpu_burned(cpu, || run_xload(&args))
    };

    let strict = dir.join_str("strict.json");
    let (status, stdout, stderr, _) = sweep(&strict, &[]);
    assert_eq!(status.code(), Some(3), "{stdout}\n{stderr}");
    let found = &read_json(&strict)["max_rate"];
    assert_eq!(found["client_limited"], true, "{found:#}");
    let summary = found["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("the client's limit") && summary.contains("SATURATED"),
        "{summary}"
    );
    assert!(stdout.contains("the client's limit"), "{stdout}");
    assert!(stderr.contains("--allow-client-limited"), "{stderr}");

    let allowed = dir.join_str("allowed.json");
    let (status, stdout, stderr, _) = sweep(&allowed, &["--allow-client-limited"]);
    assert_eq!(status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(read_json(&allowed)["max_rate"]["client_limited"], true);
    assert!(stdout.contains("the client's limit"), "{stdout}");
}
