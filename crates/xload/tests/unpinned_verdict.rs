//! An unpinned run's verdict judges the CPUs its workers ran on (sampled
//! over the window from /proc/self/task), not every CPU they were allowed
//! on: a busy CPU the workers never used is a note, never the client's
//! saturation. The workers are forced onto cpu0 (sched_setaffinity on their
//! threads during the warm-up; the process itself stays allowed on every
//! CPU) while a thread burns cpu1, as a server pinned there would.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::run::{read_json, spawn_xload, TempDir};
use support::server::{Behavior, TestServer};

/// Pins thread `tid` (of any process) to `cpu`.
fn pin_tid(tid: i32, cpu: usize) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data, zeroed is a valid empty set; the
    // pointer and size describe it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The worker threads (`xload-wN`) of process `pid`.
fn worker_tids(pid: u32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| {
            let tid: i32 = e.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            comm.starts_with("xload-w").then_some(tid)
        })
        .collect()
}

#[test]
fn an_unpinned_verdict_names_the_cpu_its_workers_ran_on() {
    let allowed = xload_sys::cpu::allowed_cpus().expect("sched_getaffinity");
    if !(allowed.contains(&0) && allowed.contains(&1)) {
        eprintln!("skipped: needs cpu0 and cpu1 (allowed: {allowed:?})");
        return;
    }
    let server = TestServer::start(Behavior::Ok { body_len: 16 });
    let dir = TempDir::new("unpinned-verdict");
    let json = dir.join_str("run.json");

    let burning = Arc::new(AtomicBool::new(true));
    let burner = {
        let burning = Arc::clone(&burning);
        std::thread::spawn(move || {
            xload_sys::cpu::pin_current_thread(1).expect("pin the burner");
            let until = Instant::now() + Duration::from_secs(20);
            let mut x = 0u64;
            while burning.load(Ordering::Relaxed) && Instant::now() < until {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                std::hint::black_box(x);
            }
        })
    };

    // One worker per allowed CPU, none pinned (no --cpus). The window opens
    // after 2 s of warm-up: the workers are moved to cpu0 well before.
    let url = server.url("/");
    let spawned = Instant::now();
    let child = spawn_xload([
        "-c", "4", "--rate", "200", "-d", "1500ms", "--warmup", "2s", "--json", &json, &url,
    ]);
    let mut pinned = Vec::new();
    while pinned.len() < allowed.len() && spawned.elapsed() < Duration::from_millis(1500) {
        for tid in worker_tids(child.pid()) {
            if !pinned.contains(&tid) && pin_tid(tid, 0).is_ok() {
                pinned.push(tid);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_timeout(Duration::from_secs(30));
    burning.store(false, Ordering::Relaxed);
    burner.join().unwrap();
    assert_eq!(
        pinned.len(),
        allowed.len(),
        "the workers were not all moved to cpu0 within the warm-up: {pinned:?}"
    );
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);

    let client = read_json(&json)["client"].clone();
    assert_eq!(
        client["generator_cpus"],
        serde_json::json!([0]),
        "{client:#}"
    );
    let ran_on = client["workers_ran_on"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        !ran_on.is_empty() && ran_on.iter().all(|c| c["cpu"] == 0),
        "{client:#}"
    );
    let verdict = client["verdict"].as_str().unwrap_or_default();
    assert!(
        verdict.contains("cpu0") && !verdict.contains("cpu1"),
        "the verdict must name the workers' cpu0, not the burned cpu1: {verdict}"
    );
    assert!(
        !client["reasons"].to_string().contains("cpu1"),
        "{client:#}"
    );
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("client:") && l.contains("unpinned workers ran on cpu0")),
        "{}",
        out.stdout
    );
}
