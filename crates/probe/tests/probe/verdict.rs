use std::time::{Duration, Instant};

use xload_probe::{
    cpu_usage, cpu_usage_over, preflight, summarize, summarize_host, Budget, ClientSummary,
    CpuTimes, Sample, SockStat, Softirqs, TcpCounters, ThreadTimes, VerdictInput,
};

/// Ticks per CPU in the synthetic windows: percentages equal tick counts.
const TICKS: u64 = 100;

fn sample(at: Instant, cpus: Vec<CpuTimes>) -> Sample {
    let n = cpus.len();
    Sample {
        at,
        ticks_per_s: 100,
        softirqs: Softirqs {
            cpus: (0..n).collect(),
            net_rx: vec![0; n],
            net_tx: vec![0; n],
            ..Default::default()
        },
        cpus,
        interrupts: Vec::new(),
        irq_cpus: (0..n).collect(),
        tcp: TcpCounters::default(),
        sockstat: SockStat::default(),
        process: ThreadTimes::default(),
        threads: Vec::new(),
        fds_open: 10,
    }
}

fn idle_cpu(cpu: usize) -> CpuTimes {
    CpuTimes {
        cpu,
        idle: 1_000_000,
        user: 5_000,
        system: 3_000,
        ..Default::default()
    }
}

/// A 1-second window in which `cpu` spent (usr, sys, softirq, steal) ticks busy and the
/// rest of 100 ticks idle; other CPUs idle the whole time.
fn window(ncpus: usize, busy: &[(usize, u64, u64, u64, u64)]) -> (Sample, Sample) {
    let t0 = Instant::now();
    let start_cpus: Vec<CpuTimes> = (0..ncpus).map(idle_cpu).collect();
    let end_cpus = start_cpus
        .iter()
        .map(|s| {
            let (usr, sys, soft, steal) = busy
                .iter()
                .find(|b| b.0 == s.cpu)
                .map_or((0, 0, 0, 0), |b| (b.1, b.2, b.3, b.4));
            CpuTimes {
                user: s.user + usr,
                system: s.system + sys,
                softirq: s.softirq + soft,
                steal: s.steal + steal,
                idle: s.idle + (TICKS - usr - sys - soft - steal),
                ..*s
            }
        })
        .collect();
    (
        sample(t0, start_cpus),
        sample(t0 + Duration::from_secs(1), end_cpus),
    )
}

fn budget() -> Budget {
    Budget {
        fd_soft: 20000,
        fd_hard: 20000,
        port_range: (32768, 60999),
        reserved_ports_in_range: 0,
        somaxconn: 4096,
        tcp_max_syn_backlog: 2048,
        tw_reuse: 2,
    }
}

fn judge(
    ncpus: usize,
    busy: &[(usize, u64, u64, u64, u64)],
    input: &VerdictInput,
) -> ClientSummary {
    let (start, end) = window(ncpus, busy);
    summarize(&start, &end, input, &budget())
}

#[test]
fn cpu_saturated_verdict_names_the_cpu_and_its_two_largest_parts() {
    let s = judge(
        2,
        &[(0, 8, 61, 30, 0), (1, 20, 5, 0, 0)],
        &VerdictInput::default(),
    );
    assert!(s.saturated);
    assert_eq!(
        s.verdict,
        "client: SATURATED — cpu0 99% (sys 61%, softirq 30%): results understate the server"
    );
    assert_eq!(s.reasons.len(), 1, "{:?}", s.reasons);
    assert!(
        s.reasons[0].contains("cpu0 99% busy (sys 61%, softirq 30%, usr 8%)"),
        "{}",
        s.reasons[0]
    );
}

#[test]
fn light_load_is_not_saturated_and_reports_the_busiest_generator_cpu() {
    let s = judge(
        2,
        &[(0, 30, 11, 0, 0), (1, 10, 5, 0, 0)],
        &VerdictInput::default(),
    );
    assert!(!s.saturated, "{:?}", s.reasons);
    assert!(s.reasons.is_empty());
    assert_eq!(s.verdict, "client: not saturated (max CPU 41% on cpu0)");
}

#[test]
fn softirq_dominating_a_busy_generator_cpu_is_saturation() {
    let s = judge(
        2,
        &[(1, 10, 10, 55, 0)],
        &VerdictInput {
            generator_cpus: vec![0, 1],
            ..Default::default()
        },
    );
    assert!(s.saturated);
    assert_eq!(
        s.verdict,
        "client: SATURATED — cpu1 75% (softirq 55%, usr 10%): results understate the server"
    );
    assert!(
        s.reasons[0].contains("softirq 55% exceeds usr+sys 20%"),
        "{}",
        s.reasons[0]
    );
    // The same mix on a CPU below 70% busy is not.
    let light = judge(2, &[(1, 5, 5, 40, 0)], &VerdictInput::default());
    assert!(!light.saturated, "{:?}", light.reasons);
}

#[test]
fn only_generator_cpus_are_judged_and_others_become_notes() {
    let s = judge(
        2,
        &[(0, 20, 5, 0, 0), (1, 90, 9, 0, 0)],
        &VerdictInput {
            generator_cpus: vec![0],
            ..Default::default()
        },
    );
    assert!(!s.saturated, "{:?}", s.reasons);
    assert_eq!(s.verdict, "client: not saturated (max CPU 25% on cpu0)");
    assert!(
        s.notes
            .iter()
            .any(|n| n.starts_with("cpu1 99% busy is not a generator CPU")),
        "{:?}",
        s.notes
    );
}

#[test]
fn steal_and_run_side_limits_each_saturate_the_client() {
    let steal = judge(1, &[(0, 30, 10, 0, 15)], &VerdictInput::default());
    assert_eq!(
        steal.verdict,
        "client: SATURATED — cpu0 steal 15%: results understate the server"
    );

    let cases: Vec<(VerdictInput, &str)> = vec![
        (
            VerdictInput {
                fd_errors: 3,
                connections: 100,
                ..Default::default()
            },
            "fd limit (10 of 20000 open, 3 errors)",
        ),
        (
            VerdictInput {
                port_errors: 12,
                ..Default::default()
            },
            "ephemeral ports (12 errors)",
        ),
        (
            VerdictInput {
                schedule_lag_p99_us: Some(2_300),
                ..Default::default()
            },
            "schedule lag p99 2.3 ms",
        ),
        (
            VerdictInput {
                late_send_ratio: Some(0.042),
                ..Default::default()
            },
            "late sends 4.2%",
        ),
        (
            VerdictInput {
                cq_overflows: 7,
                ..Default::default()
            },
            "io_uring CQ overflow (7)",
        ),
    ];
    for (input, short) in cases {
        let s = judge(1, &[(0, 10, 5, 0, 0)], &input);
        assert!(s.saturated, "{input:?}");
        assert_eq!(
            s.verdict,
            format!("client: SATURATED — {short}: results understate the server")
        );
    }
    // Below the thresholds: nothing.
    let fine = VerdictInput {
        schedule_lag_p99_us: Some(900),
        late_send_ratio: Some(0.005),
        ..Default::default()
    };
    assert!(!judge(1, &[(0, 10, 5, 0, 0)], &fine).saturated);
}

/// Sends late because every connection was busy are the server's pace: a
/// note, not client saturation, and the lag they make is not the client's.
#[test]
fn sends_that_waited_for_a_connection_do_not_saturate_the_client() {
    let waiting = VerdictInput {
        connections: 64,
        schedule_lag_p99_us: Some(305_000),
        late_send_ratio: Some(0.005),
        late_waiting_ratio: Some(0.90),
        ..Default::default()
    };
    let s = judge(1, &[(0, 10, 5, 0, 0)], &waiting);
    assert!(!s.saturated, "{}", s.verdict);
    assert!(s.judged, "a window long enough for CPU figures is judged");
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("90.0% of sends left late because all 64 connections")),
        "{:?}",
        s.notes
    );
    // Of them, those held behind the backlog at the catch-up limit: a note
    // of their own, not client saturation either.
    let catch_up = VerdictInput {
        late_catch_up_ratio: Some(0.40),
        ..waiting.clone()
    };
    let s = judge(1, &[(0, 10, 5, 0, 0)], &catch_up);
    assert!(!s.saturated, "{}", s.verdict);
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("50.0% of sends left late because all 64 connections")),
        "{:?}",
        s.notes
    );
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("40.0% of sends came due after connections were free again")),
        "{:?}",
        s.notes
    );
    // The client's own late sends over the limit still count.
    let both = VerdictInput {
        late_send_ratio: Some(0.03),
        ..waiting.clone()
    };
    let s = judge(1, &[(0, 10, 5, 0, 0)], &both);
    assert_eq!(
        s.verdict,
        "client: SATURATED — late sends 3.0%: results understate the server"
    );
    // A handful of late sends is no verdict, whatever its share.
    let two = VerdictInput {
        late_send_ratio: Some(0.05),
        late_sends: Some(2),
        ..waiting.clone()
    };
    assert!(!judge(1, &[(0, 10, 5, 0, 0)], &two).saturated);
    let five = VerdictInput {
        late_sends: Some(5),
        ..two
    };
    assert!(judge(1, &[(0, 10, 5, 0, 0)], &five).saturated);
    // With few waits, the lag is the client's again.
    let few = VerdictInput {
        late_waiting_ratio: Some(0.002),
        ..waiting
    };
    assert!(judge(1, &[(0, 10, 5, 0, 0)], &few)
        .verdict
        .contains("schedule lag p99 305.0 ms"));
}

#[test]
fn fds_near_the_soft_limit_saturate_the_client() {
    let (start, mut end) = window(1, &[(0, 10, 5, 0, 0)]);
    end.fds_open = 950;
    let tight = Budget {
        fd_soft: 1024,
        ..budget()
    };
    let s = summarize(
        &start,
        &end,
        &VerdictInput {
            connections: 900,
            ..Default::default()
        },
        &tight,
    );
    assert!(s.saturated);
    assert!(
        s.verdict.contains("fd limit (950 of 1024 open, 0 errors)"),
        "{}",
        s.verdict
    );
    assert!(s.reasons[0].contains("ulimit -n 1900"), "{}", s.reasons[0]);
    let unlimited = Budget {
        fd_soft: u64::MAX,
        ..budget()
    };
    let s = summarize(
        &start,
        &end,
        &VerdictInput {
            fd_errors: 1,
            ..Default::default()
        },
        &unlimited,
    );
    assert!(
        s.verdict
            .contains("fd limit (950 of unlimited open, 1 errors)"),
        "{}",
        s.verdict
    );
}

#[test]
fn a_busy_unpinned_worker_thread_is_named() {
    let (mut start, mut end) = window(2, &[(0, 50, 10, 0, 0), (1, 40, 10, 0, 0)]);
    let worker = |ut, st| ThreadTimes {
        tid: 42,
        comm: "xload-w0".into(),
        state: 'R',
        utime_ticks: ut,
        stime_ticks: st,
        last_cpu: 1,
    };
    start.threads = vec![worker(1000, 200)];
    end.threads = vec![worker(1080, 215)];
    let s = summarize(
        &start,
        &end,
        &VerdictInput {
            worker_tids: vec![42],
            ..Default::default()
        },
        &budget(),
    );
    assert_eq!(s.workers.len(), 1);
    assert_eq!(
        (
            s.workers[0].usr_pct,
            s.workers[0].sys_pct,
            s.workers[0].busy_pct
        ),
        (80.0, 15.0, 95.0)
    );
    assert_eq!(
        s.verdict,
        "client: SATURATED — worker 42 95%: results understate the server"
    );
}

#[test]
fn window_figures_sum_to_100_and_deltas_come_from_both_samples() {
    let (mut start, mut end) = window(2, &[(0, 33, 33, 33, 0)]);
    start.tcp = TcpCounters {
        retrans_segs: Some(10),
        listen_overflows: Some(1),
        tcp_syn_retrans: None,
        ..Default::default()
    };
    end.tcp = TcpCounters {
        retrans_segs: Some(25),
        listen_overflows: Some(4),
        tcp_syn_retrans: Some(3),
        ..Default::default()
    };
    end.softirqs.net_rx = vec![500, 7];
    start.process.utime_ticks = 100;
    end.process.utime_ticks = 250;
    end.process.stime_ticks = 50;
    let s = summarize(&start, &end, &VerdictInput::default(), &budget());
    for c in &s.cpus {
        let sum = c.usr + c.nice + c.sys + c.irq + c.softirq + c.steal + c.iowait + c.idle;
        assert!((sum - 100.0).abs() < 0.5, "{c:?}");
        assert_eq!(c.ticks, TICKS);
    }
    assert_eq!(s.tcp.get("RetransSegs"), Some(&15));
    assert_eq!(s.tcp.get("ListenOverflows"), Some(&3));
    assert_eq!(
        s.tcp.get("TCPSynRetrans"),
        None,
        "absent at the start: no delta"
    );
    assert!(
        s.notes.iter().any(|n| n.starts_with("ListenOverflows +3")),
        "{:?}",
        s.notes
    );
    assert!(
        s.notes.iter().any(|n| n.starts_with("RetransSegs +15")),
        "{:?}",
        s.notes
    );
    assert_eq!(s.net_rx, vec![500, 7]);
    assert!((s.cpu_s - 2.0).abs() < 1e-9);
    assert!((s.window_s - 1.0).abs() < 1e-9);
    // The JSON form round-trips.
    let json = serde_json::to_string(&s).expect("serialize");
    let back: ClientSummary = serde_json::from_str(&json).expect("deserialize");
    assert_eq!(back, s);
}

#[test]
fn cpu_usage_skips_cpus_without_ticks_and_tolerates_counters_going_back() {
    let start = vec![
        CpuTimes {
            cpu: 0,
            user: 10,
            idle: 100,
            iowait: 50,
            ..Default::default()
        },
        idle_cpu(1),
    ];
    let end = vec![
        CpuTimes {
            cpu: 0,
            user: 20,
            idle: 110,
            iowait: 40,
            ..Default::default()
        },
        idle_cpu(1),
    ];
    let u = cpu_usage(&start, &end);
    assert_eq!(u.len(), 1, "cpu1 accounted no ticks");
    assert_eq!(
        (u[0].usr, u[0].idle, u[0].iowait, u[0].busy),
        (50.0, 50.0, 0.0, 50.0)
    );
}

#[test]
fn no_keepalive_churn_beyond_the_port_range_is_noted() {
    let input = VerdictInput {
        no_keepalive_conn_per_s: Some(1000.0),
        target_is_loopback: false,
        ..Default::default()
    };
    let s = judge(1, &[(0, 10, 5, 0, 0)], &input);
    assert!(!s.saturated);
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("~60000 local ports in TIME_WAIT")),
        "{:?}",
        s.notes
    );
    // tcp_tw_reuse=2 covers loopback targets.
    let lo = judge(
        1,
        &[(0, 10, 5, 0, 0)],
        &VerdictInput {
            target_is_loopback: true,
            ..input
        },
    );
    assert!(lo.notes.is_empty(), "{:?}", lo.notes);
}

#[test]
fn host_verdict_judges_every_cpu_and_listen_overflows() {
    let (start, end) = window(2, &[(1, 70, 25, 0, 0)]);
    let s = summarize_host(&start, &end);
    assert_eq!(s.verdict, "host: SATURATED — cpu1 95% (usr 70%, sys 25%)");
    let (mut start, mut end) = window(2, &[(0, 10, 5, 0, 0)]);
    start.tcp.listen_overflows = Some(5);
    end.tcp.listen_overflows = Some(25);
    start.tcp.listen_drops = Some(5);
    end.tcp.listen_drops = Some(25);
    let s = summarize_host(&start, &end);
    assert!(s.saturated);
    assert_eq!(
        s.verdict,
        "host: SATURATED — accept queue (ListenOverflows +20, ListenDrops +20)"
    );
    let (start, end) = window(2, &[(0, 10, 5, 0, 0)]);
    assert_eq!(
        summarize_host(&start, &end).verdict,
        "host: not saturated (max CPU 15% on cpu0)"
    );
}

#[test]
fn preflight_names_the_exact_fix_for_ports() {
    let w = preflight(
        40000,
        false,
        &Budget {
            fd_soft: 100_000,
            fd_hard: 100_000,
            ..budget()
        },
    );
    assert_eq!(
        w,
        vec![
            "-c 40000 needs 40000 local ports but net.ipv4.ip_local_port_range gives 28232: \
              sysctl -w net.ipv4.ip_local_port_range='1024 65000' (tuning/loadgen.toml sets it)"
                .to_owned()
        ]
    );
    let w = preflight(
        64000,
        false,
        &Budget {
            fd_soft: 100_000,
            ..budget()
        },
    );
    assert_eq!(w.len(), 1);
    assert!(
        w[0].contains("ip_local_port_range='1024 65535'"),
        "{}",
        w[0]
    );
    let w = preflight(
        70000,
        false,
        &Budget {
            fd_soft: 100_000,
            ..budget()
        },
    );
    assert!(
        w[0].contains("spread the connections over several target addresses"),
        "{}",
        w[0]
    );
    assert!(preflight(1000, false, &budget()).is_empty());
}

#[test]
fn preflight_checks_listen_queues_only_for_a_local_target() {
    let b = Budget {
        port_range: (1024, 65000),
        ..budget()
    };
    assert!(preflight(5000, false, &b).is_empty());
    let w = preflight(5000, true, &b);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].contains("net.core.somaxconn is 4096: sysctl -w net.core.somaxconn=8192"),
        "{}",
        w[0]
    );
    assert!(
        w[1].contains(
            "net.ipv4.tcp_max_syn_backlog is 2048: sysctl -w net.ipv4.tcp_max_syn_backlog=8192"
        ),
        "{}",
        w[1]
    );
}

#[test]
fn preflight_fd_limit_says_ulimit_soft_or_hard() {
    let soft = Budget {
        fd_soft: 1024,
        fd_hard: 1_048_576,
        ..budget()
    };
    assert_eq!(
        preflight(2000, false, &soft),
        vec![
            "-c 2000 needs about 2064 file descriptors but the soft limit is 1024: ulimit -n 2064 \
              (the hard limit allows up to 1048576)"
                .to_owned()
        ]
    );
    let hard = Budget {
        fd_soft: 1024,
        fd_hard: 1024,
        ..budget()
    };
    let w = preflight(2000, false, &hard);
    assert!(
        w[0].contains("the hard limit is 1024: as root, ulimit -Hn 2064 && ulimit -n 2064"),
        "{}",
        w[0]
    );
}

#[test]
fn a_saturated_cpu_the_workers_hardly_used_blames_other_load() {
    // cpu0 is 100% busy, mostly softirq from someone else's packets; the pinned
    // worker on it used 2% of a CPU.
    let (mut start, mut end) = window(2, &[(0, 2, 32, 66, 0)]);
    start.threads = vec![worker_on_cpu0(100, 100)];
    end.threads = vec![worker_on_cpu0(101, 102)];
    let input = VerdictInput {
        generator_cpus: vec![0],
        worker_tids: vec![7],
        workers_pinned: true,
        ..Default::default()
    };
    // Unpinned, a worker is seen on the last CPU it ran on: its share of
    // this one is not known, so no remark blames other load.
    let unpinned = VerdictInput {
        workers_pinned: false,
        ..input.clone()
    };
    let s = summarize(&start, &end, &unpinned, &budget());
    assert!(
        !s.reasons[0].contains("other processes") && !s.verdict.contains("of which"),
        "{s:?}"
    );
    let s = summarize(&start, &end, &input, &budget());
    assert!(s.saturated, "the CPU is still saturated: {s:?}");
    assert!(
        s.reasons[0].contains(
            "xload's workers used only 3% of it: other processes or interrupts share this CPU"
        ),
        "{}",
        s.reasons[0]
    );
    assert!(
        s.verdict.contains("of which xload's workers 3%"),
        "the verdict line says whose load it is: {}",
        s.verdict
    );
    // A worker that is the load gets no such remark.
    end.threads = vec![worker_on_cpu0(130, 160)];
    let (_, mut end2) = window(2, &[(0, 30, 60, 10, 0)]);
    end2.threads = end.threads.clone();
    let s = summarize(&start, &end2, &input, &budget());
    assert!(s.saturated);
    assert!(
        !s.reasons[0].contains("other processes"),
        "{}",
        s.reasons[0]
    );
    assert!(!s.verdict.contains("of which"), "{}", s.verdict);
}

#[test]
fn a_window_of_a_few_ticks_gets_no_cpu_verdict() {
    // 10 ms: one /proc tick of a CPU's time reads as 100%.
    let t0 = Instant::now();
    let start_cpus = vec![idle_cpu(0)];
    let end_cpus = vec![CpuTimes {
        system: start_cpus[0].system + 1,
        ..start_cpus[0]
    }];
    let start = sample(t0, start_cpus);
    let end = sample(t0 + Duration::from_millis(10), end_cpus);
    let s = summarize(&start, &end, &VerdictInput::default(), &budget());
    assert!(!s.saturated, "{:?}", s.reasons);
    assert!(!s.judged, "no verdict, not a negative one");
    assert_eq!(
        s.verdict,
        "client: not judged (10 ms window, too short for CPU figures)"
    );
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("too short for CPU figures")),
        "{:?}",
        s.notes
    );
    // Evidence that is not CPU still counts: an fd shortage is named.
    let s = summarize(
        &start,
        &end,
        &VerdictInput {
            fd_errors: 3,
            connections: 100,
            ..VerdictInput::default()
        },
        &budget(),
    );
    assert!(
        s.saturated && s.verdict.contains("fd limit"),
        "{}",
        s.verdict
    );
    // 0.2 s (20 ticks) is judged as before.
    let (start, end) = window(1, &[(0, 0, 99, 0, 0)]);
    let s = summarize(&start, &end, &VerdictInput::default(), &budget());
    assert!(s.saturated, "{}", s.verdict);
}

#[test]
fn cpu_usage_over_the_window_takes_busy_as_what_idle_left() {
    let cpu = |user, system, idle, iowait, steal| CpuTimes {
        cpu: 0,
        user,
        system,
        idle,
        iowait,
        steal,
        ..Default::default()
    };
    let start = vec![cpu(0, 0, 0, 0, 0)];
    // Ticks that missed busy time: 16 busy ticks, 84 idle-ish (a 100-tick
    // window, 72 of them measured idle): 28% busy, split 3:1 usr:sys.
    let end = vec![cpu(12, 4, 60, 12, 0)];
    let u = cpu_usage_over(&start, &end, Some(100.0));
    assert_eq!(
        (u[0].busy, u[0].usr, u[0].sys, u[0].idle, u[0].iowait),
        (28.0, 21.0, 7.0, 60.0, 12.0)
    );
    assert_eq!(u[0].ticks, 100);
    // By ticks alone the same counters read 18.2% busy.
    assert_eq!(cpu_usage(&start, &end)[0].busy, 18.2);
    // Ticks that added busy time: 150 busy ticks in a 100-tick window with 40
    // idle: 60% at most (the window less idle), 50% at least (less the 10
    // stolen too): 60, and no room left for steal outside idle.
    let end = vec![cpu(100, 50, 40, 0, 10)];
    let u = cpu_usage_over(&start, &end, Some(100.0));
    assert_eq!(
        (u[0].busy, u[0].usr, u[0].steal, u[0].ticks),
        (60.0, 40.0, 0.0, 100)
    );
    // Steal inside idle (a vCPU that sleeps and wakes often): the 20 busy
    // ticks, between 0 and 30; of the 30 stolen, 10 were outside idle.
    let end = vec![cpu(20, 0, 70, 0, 30)];
    let u = cpu_usage_over(&start, &end, Some(100.0));
    assert_eq!((u[0].busy, u[0].steal, u[0].ticks), (20.0, 10.0, 100));
    // A saturated CPU under steal: 90 busy ticks, 10 idle, 20 stolen: 90.
    let end = vec![cpu(90, 0, 10, 0, 20)];
    assert_eq!(cpu_usage_over(&start, &end, Some(100.0))[0].busy, 90.0);
    // Idle measured a little past the window (read times): 0% busy, not
    // negative, and the percentages stay within 100.
    let end = vec![cpu(0, 1, 101, 0, 0)];
    let u = cpu_usage_over(&start, &end, Some(100.0));
    assert_eq!((u[0].busy, u[0].idle, u[0].ticks), (0.0, 100.0, 101));
    // No window known (or under a tick): the ticks are the base.
    let u = cpu_usage_over(&start, &end, Some(0.5));
    assert_eq!(u[0].busy, 1.0);
    // Counters that span far more than the window (samples read 15 ms apart
    // by their instants, 1 s by their counters): the ticks, 95% busy.
    let end = vec![cpu(90, 5, 5, 0, 0)];
    assert_eq!(cpu_usage_over(&start, &end, Some(1.5))[0].busy, 95.0);
    // A CPU online for a tenth of the window: its ticks, not the window.
    let end = vec![cpu(1, 0, 9, 0, 0)];
    assert_eq!(cpu_usage_over(&start, &end, Some(100.0))[0].busy, 10.0);
}

#[test]
fn busy_time_no_tick_saw_counts_as_sys() {
    let start = vec![CpuTimes {
        cpu: 0,
        ..Default::default()
    }];
    let end = vec![CpuTimes {
        cpu: 0,
        idle: 95,
        ..Default::default()
    }];
    let u = cpu_usage_over(&start, &end, Some(100.0));
    assert_eq!(
        (u[0].busy, u[0].sys, u[0].usr, u[0].idle),
        (5.0, 5.0, 0.0, 95.0)
    );
}

#[test]
fn a_pinned_worker_makes_its_cpu_at_least_as_busy_as_it_was() {
    // cpu0's counters: 5 ticks busy, 30 stolen, 65 idle (steal inside idle:
    // a vCPU that sleeps and wakes often); the worker pinned to it used 97
    // ticks of CPU time in the 100-tick window.
    let (mut start, mut end) = window(2, &[(0, 3, 2, 0, 30)]);
    start.threads = vec![worker_on_cpu0(100, 100)];
    end.threads = vec![worker_on_cpu0(130, 167)];
    let pinned = VerdictInput {
        generator_cpus: vec![0],
        worker_tids: vec![7],
        workers_pinned: true,
        ..Default::default()
    };
    let s = summarize(&start, &end, &pinned, &budget());
    let c = &s.cpus[0];
    assert_eq!(c.busy, 97.0, "{c:?}");
    let sum = c.usr + c.nice + c.sys + c.irq + c.softirq + c.steal + c.iowait + c.idle;
    assert!((sum - 100.0).abs() < 0.5, "fields sum to {sum}: {c:?}");
    assert!(s.saturated, "97% of cpu0 is the worker's: {s:?}");
    assert!(
        !s.reasons[0].contains("other processes"),
        "{}",
        s.reasons[0]
    );
    // Not pinned: the worker's time may have been spent elsewhere.
    let unpinned = VerdictInput {
        workers_pinned: false,
        ..pinned
    };
    let s = summarize(&start, &end, &unpinned, &budget());
    assert_eq!(s.cpus[0].busy, 5.0, "{:?}", s.cpus[0]);
}

/// Worker thread 7 on cpu0 with these user and system ticks so far.
fn worker_on_cpu0(utime_ticks: u64, stime_ticks: u64) -> ThreadTimes {
    ThreadTimes {
        tid: 7,
        comm: "xload-w0".into(),
        state: 'S',
        utime_ticks,
        stime_ticks,
        last_cpu: 0,
    }
}

/// A window whose process used `cpu_ticks` of CPU (1/100 s each).
fn judge_with_process_cpu(
    busy: &[(usize, u64, u64, u64, u64)],
    cpu_ticks: u64,
    input: &VerdictInput,
) -> ClientSummary {
    let (start, mut end) = window(2, busy);
    end.process.utime_ticks = cpu_ticks;
    summarize(&start, &end, input, &budget())
}

#[test]
fn tls_handshakes_are_named_as_the_saturated_clients_cost() {
    // New connection per request: cpu0 saturated, 1 s of process CPU of
    // which 0.7 s in 4,000 handshakes' TLS computation.
    let input = VerdictInput {
        generator_cpus: vec![0],
        tls_handshakes: 4_000,
        tls_handshake_cpu_s: 0.7,
        ..Default::default()
    };
    let s = judge_with_process_cpu(&[(0, 80, 19, 0, 0)], 100, &input);
    assert!(s.saturated);
    assert_eq!(
        s.verdict,
        "client: SATURATED — cpu0 99% (usr 80%, sys 19%), TLS handshakes 70% of xload's CPU \
         (175 µs each): results understate the server"
    );
    assert!(
        s.reasons.iter().any(|r| r
            .starts_with("TLS handshakes took 70% of xload's CPU in the window (4000/s, 175 µs")
            && r.contains("--tls-resume")),
        "{:?}",
        s.reasons
    );
    assert_eq!(s.cpu_us_per_handshake, Some(250.0));
    assert!((s.tls_handshake_share.unwrap() - 0.7).abs() < 1e-9);
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["cpu_us_per_handshake"], 250.0);

    // The same handshakes on a client with CPU to spare: a note, no finding.
    let idle = judge_with_process_cpu(&[(0, 40, 10, 0, 0)], 100, &input);
    assert!(!idle.saturated, "{:?}", idle.reasons);
    assert!(
        idle.notes
            .iter()
            .any(|n| n.starts_with("TLS handshakes took 70% of xload's CPU")
                && n.contains("250 µs of xload's CPU per handshake")),
        "{:?}",
        idle.notes
    );

    // Saturated, but by keep-alive requests: handshakes are 1% of the CPU.
    let keepalive = VerdictInput {
        tls_handshakes: 100,
        tls_handshake_cpu_s: 0.01,
        ..input.clone()
    };
    let s = judge_with_process_cpu(&[(0, 80, 19, 0, 0)], 100, &keepalive);
    assert!(s.saturated);
    assert!(!s.verdict.contains("TLS"), "{}", s.verdict);
    assert!(s.notes.iter().all(|n| !n.contains("TLS")), "{:?}", s.notes);

    // Plain http: no TLS figures at all.
    let plain = judge_with_process_cpu(&[(0, 80, 19, 0, 0)], 100, &VerdictInput::default());
    assert_eq!(plain.cpu_us_per_handshake, None);
    assert!(!serde_json::to_string(&plain).unwrap().contains("handshake"));
}

#[test]
fn idle_unpinned_workers_are_placed_where_they_last_ran() {
    // Workers that used no tick in the window (a light open-loop rate) are
    // still judged, and reported, on the CPU they last ran on — never on the
    // busy cpu1 they never used.
    let (mut start, mut end) = window(2, &[(0, 2, 1, 0, 0), (1, 100, 0, 0, 0)]);
    start.threads = vec![worker_on_cpu0(50, 20)];
    end.threads = vec![worker_on_cpu0(50, 20)];
    let input = VerdictInput {
        worker_tids: vec![7],
        worker_cpu_ticks: Some(std::collections::BTreeMap::new()),
        ..Default::default()
    };
    let s = summarize(&start, &end, &input, &budget());
    assert_eq!(s.generator_cpus, vec![0]);
    assert_eq!(s.workers_ran_on.len(), 1, "{:?}", s.workers_ran_on);
    assert_eq!(
        (s.workers_ran_on[0].cpu, s.workers_ran_on[0].busy_pct),
        (0, 0.0)
    );
    assert!(!s.saturated, "{:?}", s.reasons);
    assert_eq!(
        s.verdict,
        "client: not saturated (max CPU 3% on cpu0) [unpinned workers ran on cpu0 0%]"
    );
    assert!(
        s.notes.iter().any(|n| n.starts_with("cpu1 100% busy")),
        "{:?}",
        s.notes
    );
}
