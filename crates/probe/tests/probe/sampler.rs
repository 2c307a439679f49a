use std::time::Duration;

use xload_probe::{
    read_budget, read_budget_from, sample_cpu_usage, summarize, Budget, ProbeError, Sampler,
    VerdictInput,
};

use crate::fixture;

#[test]
fn sampler_reads_a_fixture_root_including_odd_thread_names() {
    let mut sampler = Sampler::with_root(fixture("vm2-6.18-idle"));
    let s = sampler.sample().expect("sample");
    assert_eq!(s.cpus.len(), 2);
    assert_eq!(s.softirqs.net_rx, vec![971, 1455]);
    assert_eq!(s.irq_cpus, vec![0, 1]);
    assert!(s.interrupts.iter().any(|l| l.name == "virtio3-rx"));
    assert_eq!(s.tcp.active_opens, Some(18));
    assert_eq!(s.sockstat.sockets_used, 23);
    assert_eq!(s.process.comm, "python3");
    let names: Vec<(i32, &str)> = s.threads.iter().map(|t| (t.tid, t.comm.as_str())).collect();
    assert_eq!(names, vec![(15121, "python3"), (15184, "wrk (0) )x")]);
    assert_eq!(s.fds_open, 5);
    // A thread that is gone is left out, not an error.
    let some = sampler.sample_threads(&[15184, 999_999]).expect("threads");
    assert_eq!(some.len(), 1);
    assert_eq!(some[0].comm, "wrk (0) )x");
}

#[test]
fn sampler_reports_a_missing_root_as_io_error_naming_the_file() {
    let mut sampler = Sampler::with_root(fixture("no-such-dir"));
    match sampler.sample() {
        Err(ProbeError::Io { path, .. }) => {
            assert!(path.ends_with("no-such-dir/stat"), "{}", path.display())
        }
        other => panic!("expected Io error, got {other:?}"),
    }
}

#[test]
fn sampler_reads_the_live_proc_with_this_thread_in_it() {
    let mut sampler = Sampler::new();
    let s = sampler.sample().expect("live sample");
    let tid = xload_sys::cpu::gettid();
    assert!(
        s.threads.iter().any(|t| t.tid == tid),
        "own thread {tid} not among {:?}",
        s.threads
    );
    assert!(!s.cpus.is_empty());
    assert_eq!(s.softirqs.net_rx.len(), s.softirqs.cpus.len());
    assert!(s.fds_open >= 3);
    assert!(s.tcp.retrans_segs.is_some());
    assert!(sampler.ticks_per_s() >= 100);
}

#[test]
fn budget_from_fixture_and_live_host() {
    let b = read_budget_from(&fixture("vm2-6.18-idle")).expect("fixture budget");
    assert_eq!(
        b,
        Budget {
            fd_soft: 20000,
            fd_hard: 20000,
            port_range: (32768, 60999),
            reserved_ports_in_range: 0,
            somaxconn: 4096,
            tcp_max_syn_backlog: 2048,
            tw_reuse: 2
        }
    );
    assert_eq!(b.ports_available(), 28232);
    assert!(b.tw_reuse_applies(true) && !b.tw_reuse_applies(false));
    let live = read_budget().expect("live budget");
    assert!(live.fd_soft > 0 && live.port_range.0 <= live.port_range.1);
}

/// Two real snapshots one second apart while `sh -c 'while :; do :; done'` ran pinned
/// to cpu0 (and the machine was busy with other builds): the verdict must name cpu0.
#[test]
fn real_busy_capture_is_judged_saturated_on_cpu0() {
    let start = Sampler::with_root(fixture("vm2-6.18-busy-start"))
        .sample()
        .expect("start");
    let mut end = Sampler::with_root(fixture("vm2-6.18-busy-end"))
        .sample()
        .expect("end");
    end.at = start.at + Duration::from_secs(1);
    let budget = read_budget_from(&fixture("vm2-6.18-busy-end")).expect("budget");
    let busy_pid = start.process.tid;
    let input = VerdictInput {
        generator_cpus: vec![0],
        worker_tids: vec![busy_pid],
        connections: 1,
        ..Default::default()
    };
    let summary = summarize(&start, &end, &input, &budget);
    assert!(summary.saturated, "{summary:#?}");
    assert!(
        summary.verdict.starts_with("client: SATURATED — cpu0 "),
        "{}",
        summary.verdict
    );
    assert!(summary.verdict.contains("(usr "), "{}", summary.verdict);
    assert!(
        summary.verdict.ends_with(": results understate the server"),
        "{}",
        summary.verdict
    );
    let cpu0 = summary.cpus.iter().find(|c| c.cpu == 0).expect("cpu0");
    assert!(cpu0.busy >= 99.0, "{cpu0:?}");
    assert_eq!(summary.workers.len(), 1);
    assert_eq!(summary.workers[0].cpu, 0);
    assert!((summary.cpu_s - 0.78).abs() < 1e-9, "{}", summary.cpu_s);
}

/// A thread that sleeps and wakes every 70 µs, busy 20 µs of them, is seen
/// busy at least for the CPU time it used. By scheduler ticks alone a
/// tickless VM showed it 16% busy for 28% of CPU time (ticks miss brief
/// busy spells); the window less idle showed 27.8%.
#[test]
fn live_cpu_usage_sees_a_thread_that_wakes_every_70_us() {
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    assert!(cpu >= 0);
    let cpu = cpu as usize;
    let mut sampler = Sampler::new();
    let worker = std::thread::spawn(move || {
        let _ = xload_sys::cpu::pin_current_thread(cpu);
        let start = std::time::Instant::now();
        let cpu0 = xload_sys::clock::thread_cpu_ns();
        while start.elapsed() < Duration::from_millis(1000) {
            let spin = std::time::Instant::now();
            while spin.elapsed() < Duration::from_micros(20) {}
            std::thread::sleep(Duration::from_micros(50));
        }
        (xload_sys::clock::thread_cpu_ns() - cpu0) as f64 / start.elapsed().as_nanos() as f64
            * 100.0
    });
    // The sampling thread sleeps meanwhile, off the worker's CPU if it can.
    let before = sampler.sample().expect("live sample");
    let pct = worker.join().expect("worker");
    let after = sampler.sample().expect("live sample");
    let usage = sample_cpu_usage(&before, &after);
    let seen = usage
        .iter()
        .find(|u| u.cpu == cpu)
        .expect("the worker's CPU is in the sample");
    // Steal while the CPU sleeps (a halted vCPU woken late) is inside the
    // idle time the kernel measures, so under steal the busy time cannot be
    // told apart; the verdict names steal on its own (STEAL_PCT).
    if seen.steal > 5.0 {
        eprintln!(
            "cpu{cpu} had {:.1}% steal: not judged ({seen:?})",
            seen.steal
        );
        return;
    }
    // Other work on that CPU can only add to what is seen.
    assert!(
        seen.busy >= pct - 5.0,
        "the worker used {pct:.1}% of cpu{cpu}, the sample saw it {:.1}% busy: {seen:?}",
        seen.busy
    );
}
