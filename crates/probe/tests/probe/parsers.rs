use xload_probe::parse::*;
use xload_probe::ParseErrorKind;

use crate::fixture_text;

/// Sums the aggregate `cpu ` line's columns, to check per-CPU columns land in the right
/// fields (the synthesizer writes the aggregate as the column sums).
fn aggregate(text: &str) -> Vec<u64> {
    let line = text
        .lines()
        .find(|l| l.starts_with("cpu "))
        .expect("aggregate line");
    line.split_whitespace()
        .skip(1)
        .map(|t| t.parse().expect("number"))
        .collect()
}

fn field_sums(cpus: &[CpuTimes]) -> Vec<u64> {
    let f = |get: fn(&CpuTimes) -> u64| cpus.iter().map(get).sum::<u64>();
    vec![
        f(|c| c.user),
        f(|c| c.nice),
        f(|c| c.system),
        f(|c| c.idle),
        f(|c| c.iowait),
        f(|c| c.irq),
        f(|c| c.softirq),
        f(|c| c.steal),
        f(|c| c.guest),
        f(|c| c.guest_nice),
    ]
}

#[test]
fn stat_real_capture_has_both_cpus_with_exact_columns() {
    let cpus = parse_stat(&fixture_text("vm2-6.18-idle/stat")).expect("parse");
    assert_eq!(cpus.len(), 2);
    assert_eq!(
        cpus[0],
        CpuTimes {
            cpu: 0,
            user: 22187,
            nice: 0,
            system: 2159,
            idle: 141392,
            iowait: 65,
            irq: 0,
            softirq: 19,
            steal: 8,
            guest: 0,
            guest_nice: 0
        }
    );
    assert_eq!(cpus[1].cpu, 1);
    assert_eq!(cpus[1].total(), 22490 + 2451 + 140569 + 257 + 48 + 13);
}

#[test]
fn stat_every_layout_maps_columns_like_the_aggregate_line() {
    // (layout, CPUs, columns the kernel prints)
    for (dir, ncpus, ncols) in [
        ("synth/1cpu-5.10", 1, 10),
        ("synth/8cpu-4.19", 8, 10),
        ("synth/96cpu-5.15", 96, 10),
        ("synth/4cpu-2.6.32", 4, 9),
        ("synth/2cpu-2.6.18", 2, 8),
        ("synth/2cpu-2.4", 2, 4),
    ] {
        let text = fixture_text(&format!("{dir}/stat"));
        let cpus = parse_stat(&text).unwrap_or_else(|e| panic!("{dir}: {e}"));
        assert_eq!(cpus.len(), ncpus, "{dir}");
        assert!(
            cpus.iter().enumerate().all(|(i, c)| c.cpu == i),
            "{dir}: CPU numbers"
        );
        let mut expected = aggregate(&text);
        expected.resize(10, 0);
        assert_eq!(field_sums(&cpus), expected, "{dir}: columns");
        let printed = text
            .lines()
            .nth(1)
            .map_or(0, |l| l.split_whitespace().count() - 1);
        assert_eq!(printed, ncols, "{dir}: fixture layout");
    }
    let old = parse_stat(&fixture_text("synth/2cpu-2.4/stat")).expect("2.4");
    assert!(old
        .iter()
        .all(|c| c.iowait == 0 && c.irq == 0 && c.softirq == 0 && c.steal == 0));
}

#[test]
fn stat_keeps_cpu_numbers_when_a_cpu_is_offline() {
    let cpus = parse_stat("cpu  2 0 2 8\ncpu0 1 0 1 4\ncpu2 1 0 1 4\nintr 0\n").expect("parse");
    assert_eq!(cpus.iter().map(|c| c.cpu).collect::<Vec<_>>(), vec![0, 2]);
}

#[test]
fn stat_rejects_truncated_and_garbled_lines() {
    let kind = |t: &str| parse_stat(t).expect_err(t).parse_kind().cloned();
    assert_eq!(kind(""), Some(ParseErrorKind::Empty));
    assert_eq!(
        kind("cpu  1 2 3 4\ncpu0 1 2 3\n"),
        Some(ParseErrorKind::TooFewColumns {
            expected: 4,
            found: 3
        })
    );
    assert_eq!(
        kind("cpu0 1 x 3 4\n"),
        Some(ParseErrorKind::BadNumber("x".into()))
    );
    assert_eq!(
        kind("cpuX 1 2 3 4\n"),
        Some(ParseErrorKind::BadLine("cpuX".into()))
    );
    assert_eq!(
        kind("intr 1 2\nctxt 5\n"),
        Some(ParseErrorKind::MissingField("cpuN lines"))
    );
    assert_eq!(
        kind("cpu0 1 2 3 -4\n"),
        Some(ParseErrorKind::BadNumber("-4".into()))
    );
}

#[test]
fn softirqs_every_layout_has_net_rx_and_net_tx_per_cpu() {
    for (dir, ncpus) in [
        ("vm2-6.18-idle", 2),
        ("synth/1cpu-5.10", 1),
        ("synth/8cpu-4.19", 8),
        ("synth/96cpu-5.15", 96),
        ("synth/4cpu-2.6.32", 4),
    ] {
        let s = parse_softirqs(&fixture_text(&format!("{dir}/softirqs")))
            .unwrap_or_else(|e| panic!("{dir}: {e}"));
        assert_eq!(s.cpus, (0..ncpus).collect::<Vec<_>>(), "{dir}");
        assert_eq!(s.net_rx.len(), ncpus, "{dir}");
        assert_eq!(s.net_tx.len(), ncpus, "{dir}");
        assert_eq!(s.rows.len(), 10, "{dir}");
        assert_eq!(s.net_rx_by_cpu(), s.net_rx, "{dir}");
    }
    let real = parse_softirqs(&fixture_text("vm2-6.18-idle/softirqs")).expect("real");
    assert_eq!(real.net_rx, vec![971, 1455]);
    assert_eq!(real.net_tx, vec![4, 0]);
    let old = parse_softirqs(&fixture_text("synth/4cpu-2.6.32/softirqs")).expect("old");
    assert!(old.rows.contains_key("BLOCK_IOPOLL") && !old.rows.contains_key("IRQ_POLL"));
}

#[test]
fn softirqs_rejects_short_rows_missing_rows_and_bad_header() {
    let kind = |t: &str| parse_softirqs(t).expect_err(t).parse_kind().cloned();
    let header = "                    CPU0       CPU1\n";
    assert_eq!(
        kind(&format!(
            "{header}      NET_TX:          4\n      NET_RX:  1 2\n"
        )),
        Some(ParseErrorKind::TooFewColumns {
            expected: 2,
            found: 1
        })
    );
    assert_eq!(
        kind(&format!("{header}      NET_TX:  4 0\n")),
        Some(ParseErrorKind::MissingField("NET_RX"))
    );
    assert_eq!(
        kind("  CPUx  CPU1\n NET_RX: 1 2\n"),
        Some(ParseErrorKind::BadHeader)
    );
    assert_eq!(kind("  \n"), Some(ParseErrorKind::Empty));
    assert_eq!(
        kind(&format!("{header}      NET_RX   1 2\n")),
        Some(ParseErrorKind::BadLine("NET_RX".into()))
    );
}

#[test]
fn interrupts_real_capture_splits_chip_hwirq_and_queue_name() {
    let irqs = parse_interrupts(&fixture_text("vm2-6.18-idle/interrupts")).expect("parse");
    assert_eq!(irqs.cpus, vec![0, 1]);
    let line = |label: &str| {
        irqs.lines
            .iter()
            .find(|l| l.irq == label)
            .unwrap_or_else(|| panic!("{label}"))
    };
    let rx = line("41");
    assert_eq!(rx.counts, vec![2353, 0]);
    assert_eq!(rx.chip.as_deref(), Some("PCI-MSIX-0000:00:04.0"));
    assert_eq!(rx.hwirq.as_deref(), Some("1-edge"));
    assert_eq!(rx.name, "virtio3-rx");
    assert!(rx.is_device());
    assert_eq!(line("24").name, "ACPI:Ged");
    let loc = line("LOC");
    assert_eq!(loc.counts, vec![81227, 84872]);
    assert_eq!(loc.name, "Local timer interrupts");
    assert!(!loc.is_device() && loc.chip.is_none());
    assert_eq!(line("ERR").counts, vec![0]);
}

#[test]
fn interrupts_every_layout_parses_with_one_count_per_cpu() {
    for (dir, ncpus) in [
        ("synth/1cpu-5.10", 1),
        ("synth/8cpu-4.19", 8),
        ("synth/96cpu-5.15", 96),
        ("synth/4cpu-2.6.32", 4),
        ("synth/2cpu-2.6.18", 2),
        ("synth/4cpu-arm64-6.1", 4),
    ] {
        let irqs = parse_interrupts(&fixture_text(&format!("{dir}/interrupts")))
            .unwrap_or_else(|e| panic!("{dir}: {e}"));
        assert_eq!(irqs.cpus.len(), ncpus, "{dir}");
        for l in &irqs.lines {
            let single = matches!(l.irq.as_str(), "ERR" | "MIS" | "Err");
            assert_eq!(
                l.counts.len(),
                if single { 1 } else { ncpus },
                "{dir} {}",
                l.irq
            );
        }
    }
}

#[test]
fn interrupts_names_survive_every_kernel_layout() {
    let get = |dir: &str, label: &str| -> IrqLine {
        let irqs = parse_interrupts(&fixture_text(&format!("{dir}/interrupts"))).expect(dir);
        irqs.lines
            .into_iter()
            .find(|l| l.irq == label)
            .unwrap_or_else(|| panic!("{dir} {label}"))
    };
    // 96 CPUs, 4-digit IRQ column, mlx5 queues, shared handlers, an IRQ without hwirq.
    let comp = get("synth/96cpu-5.15", "98");
    assert_eq!(comp.name, "mlx5_comp62@pci:0000:3b:00.0");
    assert_eq!(comp.hwirq.as_deref(), Some("1572927-edge"));
    assert_eq!(
        get("synth/96cpu-5.15", "16").name,
        "ehci_hcd:usb1, i801_smbus"
    );
    let bare = get("synth/96cpu-5.15", "1025");
    assert_eq!(
        (
            bare.chip.as_deref(),
            bare.hwirq.as_deref(),
            bare.name.as_str()
        ),
        (Some("PCI-MSI"), None, "")
    );
    // 8 CPUs, ixgbe queues.
    assert_eq!(get("synth/8cpu-4.19", "43").name, "eth0-TxRx-3");
    // 2.6.32: chip and trigger in one token, no hwirq; handler names with spaces.
    let old = get("synth/4cpu-2.6.32", "16");
    assert_eq!(old.chip.as_deref(), Some("IO-APIC-fasteoi"));
    assert_eq!(old.hwirq, None);
    assert_eq!(old.name, "ohci_hcd:usb3, ohci_hcd:usb4, HDA Intel");
    // 2.6.18: summary lines without description.
    let nmi = get("synth/2cpu-2.6.18", "NMI");
    assert_eq!((nmi.counts.len(), nmi.name.as_str()), (2, ""));
    assert_eq!(
        get("synth/2cpu-2.6.18", "16").name,
        "uhci_hcd:usb1, ATI IXP Modem"
    );
    // arm64: the trigger is its own word.
    let timer = get("synth/4cpu-arm64-6.1", "11");
    assert_eq!(
        (timer.chip.as_deref(), timer.hwirq.as_deref()),
        (Some("GICv3"), Some("27 Level"))
    );
    assert_eq!(timer.name, "arch_timer");
    assert_eq!(
        get("synth/4cpu-arm64-6.1", "IPI3").name,
        "CPU stop (for crash dump) interrupts"
    );
    // 1 CPU.
    assert_eq!(get("synth/1cpu-5.10", "25").counts, vec![8123456]);
}

#[test]
fn interrupts_rejects_device_lines_cut_short_and_lines_without_label() {
    let real = fixture_text("vm2-6.18-idle/interrupts");
    // Cut right after the first count of IRQ 41: one count where two are due.
    let at = real.find(" 41:       2353").expect("irq 41") + " 41:       2353".len();
    let err = parse_interrupts(&real[..at]).expect_err("cut");
    assert_eq!(
        err.parse_kind(),
        Some(&ParseErrorKind::TooFewColumns {
            expected: 2,
            found: 1
        })
    );
    let kind = |t: &str| parse_interrupts(t).expect_err(t).parse_kind().cloned();
    let header = "           CPU0       CPU1\n";
    assert_eq!(
        kind(&format!("{header} 41:   1  virtio\n")),
        Some(ParseErrorKind::TooFewColumns {
            expected: 2,
            found: 1
        })
    );
    assert_eq!(
        kind(&format!("{header}LOC:  Local timer\n")),
        Some(ParseErrorKind::TooFewColumns {
            expected: 2,
            found: 0
        })
    );
    assert_eq!(
        kind(&format!("{header} 41   1  2  virtio\n")),
        Some(ParseErrorKind::BadLine("41   1  2  virtio".into()))
    );
    assert_eq!(kind(""), Some(ParseErrorKind::Empty));
    assert_eq!(kind("  0:  1 2\n"), Some(ParseErrorKind::BadHeader));
}

#[test]
fn snmp_and_netstat_real_capture_give_every_tcp_counter() {
    let snmp =
        parse_snmp_table("/proc/net/snmp", &fixture_text("vm2-6.18-idle/net/snmp")).expect("snmp");
    let netstat = parse_snmp_table(
        "/proc/net/netstat",
        &fixture_text("vm2-6.18-idle/net/netstat"),
    )
    .expect("netstat");
    let tcp_row = snmp.iter().find(|r| r.prefix == "Tcp").expect("Tcp");
    assert_eq!(tcp_row.get("MaxConn"), Some(-1));
    let tcp = tcp_counters(&snmp, &netstat).expect("counters");
    assert_eq!(tcp.active_opens, Some(18));
    assert_eq!(tcp.passive_opens, Some(2));
    assert_eq!(tcp.estab_resets, Some(6));
    assert_eq!(tcp.out_rsts, Some(8));
    assert_eq!(tcp.in_segs, Some(3349));
    assert!(tcp.counters().iter().all(|(_, v)| v.is_some()), "{tcp:?}");
    assert!(netstat.iter().any(|r| r.prefix == "MPTcpExt"));
}

#[test]
fn snmp_older_kernel_layout_leaves_absent_counters_none() {
    let snmp =
        parse_snmp_table("/proc/net/snmp", &fixture_text("synth/4cpu-2.6.32/snmp")).expect("snmp");
    let netstat = parse_snmp_table(
        "/proc/net/netstat",
        &fixture_text("synth/4cpu-2.6.32/netstat"),
    )
    .expect("netstat");
    let tcp = tcp_counters(&snmp, &netstat).expect("counters");
    assert_eq!(tcp.retrans_segs, Some(123456));
    assert_eq!(tcp.listen_overflows, Some(4321));
    assert_eq!(tcp.tcp_timeouts, Some(2345));
    assert_eq!(tcp.tcp_syn_retrans, None, "TCPSynRetrans appeared in 3.10");
    assert!(snmp
        .iter()
        .find(|r| r.prefix == "Tcp")
        .expect("Tcp")
        .get("InCsumErrors")
        .is_none());
}

#[test]
fn snmp_rejects_unpaired_headers_count_mismatch_and_negative_counters() {
    let kind = |t: &str| {
        parse_snmp_table("snmp", t)
            .expect_err(t)
            .parse_kind()
            .cloned()
    };
    assert_eq!(
        kind("Tcp: A B\n"),
        Some(ParseErrorKind::UnpairedHeader("Tcp".into()))
    );
    assert_eq!(
        kind("Tcp: A B\nUdp: 1 2\n"),
        Some(ParseErrorKind::UnpairedHeader("Tcp".into()))
    );
    assert_eq!(
        kind("Tcp: A B C\nTcp: 1 2\n"),
        Some(ParseErrorKind::CountMismatch {
            prefix: "Tcp".into(),
            names: 3,
            values: 2
        })
    );
    assert_eq!(
        kind("Tcp: A\nTcp: x\n"),
        Some(ParseErrorKind::BadNumber("x".into()))
    );
    assert_eq!(
        kind("no colon here\n"),
        Some(ParseErrorKind::BadLine("no colon here".into()))
    );
    assert_eq!(kind(""), Some(ParseErrorKind::Empty));
    let snmp = parse_snmp_table("snmp", "Tcp: ActiveOpens\nTcp: -3\n").expect("table");
    let err = tcp_counters(&snmp, &[]).expect_err("negative counter");
    assert!(matches!(
        err.parse_kind(),
        Some(ParseErrorKind::OutOfRange(_))
    ));
    let udp_only = parse_snmp_table("snmp", "Udp: InDatagrams\nUdp: 3\n").expect("table");
    assert_eq!(
        tcp_counters(&udp_only, &[])
            .expect_err("no Tcp")
            .parse_kind(),
        Some(&ParseErrorKind::MissingField("Tcp"))
    );
}

#[test]
fn sockstat_real_and_old_layouts() {
    let s = parse_sockstat(&fixture_text("vm2-6.18-idle/net/sockstat")).expect("real");
    assert_eq!(
        s,
        SockStat {
            sockets_used: 23,
            tcp_inuse: 1,
            tcp_orphan: 0,
            tcp_tw: 0,
            tcp_alloc: 1,
            tcp_mem_pages: 359,
            udp_inuse: 0,
            udp_mem_pages: 0
        }
    );
    let old = parse_sockstat(&fixture_text("synth/4cpu-2.6.32/sockstat")).expect("old");
    assert_eq!((old.tcp_inuse, old.tcp_tw, old.tcp_orphan), (812, 15022, 3));
}

#[test]
fn sockstat_rejects_odd_pairs_and_missing_tcp() {
    let kind = |t: &str| parse_sockstat(t).expect_err(t).parse_kind().cloned();
    assert_eq!(
        kind("sockets: used 3\nTCP: inuse 1 orphan\n"),
        Some(ParseErrorKind::BadLine("TCP: inuse 1 orphan".into()))
    );
    assert_eq!(
        kind("sockets: used 3\nUDP: inuse 1 mem 0\n"),
        Some(ParseErrorKind::MissingField("TCP: inuse"))
    );
    assert_eq!(
        kind("TCP: inuse 1\n"),
        Some(ParseErrorKind::MissingField("sockets: used"))
    );
    assert_eq!(
        kind("sockets: used x\nTCP: inuse 1\n"),
        Some(ParseErrorKind::BadNumber("x".into()))
    );
    assert_eq!(kind(""), Some(ParseErrorKind::Empty));
}

#[test]
fn task_stat_comm_with_spaces_and_parentheses() {
    let t = parse_task_stat(&fixture_text("task/comm-with-parens.stat")).expect("parse");
    assert_eq!(
        (t.tid, t.comm.as_str(), t.state, t.last_cpu),
        (8578, "x) (y z)", 'S', 1)
    );
    let threads = ["15121", "15184"].map(|tid| {
        parse_task_stat(&fixture_text(&format!(
            "vm2-6.18-idle/self/task/{tid}/stat"
        )))
        .expect(tid)
    });
    assert_eq!(threads[0].comm, "python3");
    assert_eq!((threads[0].utime_ticks, threads[0].stime_ticks), (3, 1));
    assert_eq!(threads[1].comm, "wrk (0) )x");
    assert_eq!(threads[1].tid, 15184);
    let k = parse_task_stat(&fixture_text("task/kthreadd.stat")).expect("kthread");
    assert_eq!((k.tid, k.comm.as_str()), (2, "kthreadd"));
    let busy = parse_task_stat(&fixture_text("vm2-6.18-busy-end/self/stat")).expect("busy");
    assert_eq!((busy.state, busy.utime_ticks, busy.last_cpu), ('R', 94, 0));
}

#[test]
fn task_stat_rejects_missing_paren_and_truncation_before_processor() {
    let full = fixture_text("task/comm-with-parens.stat");
    let kind = |t: &str| parse_task_stat(t).expect_err(t).parse_kind().cloned();
    assert_eq!(kind("8578 (x S 1 2 3"), Some(ParseErrorKind::NoCommEnd));
    assert_eq!(
        kind("8578 x) S 1 2 3"),
        Some(ParseErrorKind::MissingField("(comm)"))
    );
    assert_eq!(
        kind("abc (x) S 1"),
        Some(ParseErrorKind::BadNumber("abc".into()))
    );
    assert_eq!(kind(""), Some(ParseErrorKind::Empty));
    // Cut after field 38 (exit_signal): processor is missing.
    let fields: Vec<&str> = full.split_whitespace().collect();
    // The comm spans three whitespace tokens here ("(x)", "(y", "z))").
    let cut = fields[..38 + 2].join(" ");
    assert!(matches!(
        parse_task_stat(&cut).expect_err("cut").parse_kind(),
        Some(ParseErrorKind::TooFewColumns { .. })
    ));
    let bad_state = full.replacen(")) S ", ")) SS ", 1);
    assert_eq!(kind(&bad_state), Some(ParseErrorKind::BadLine("SS".into())));
}

#[test]
fn limits_and_sysctls_parse() {
    let l = parse_limits_nofile(&fixture_text("vm2-6.18-idle/self/limits")).expect("limits");
    assert_eq!((l.soft, l.hard), (20000, 20000));
    let unlimited = parse_limits_nofile(
        "Max open files            1024                 unlimited            files\n",
    )
    .expect("unlimited");
    assert_eq!((unlimited.soft, unlimited.hard), (1024, u64::MAX));
    assert!(parse_limits_nofile("Max processes 1 1 processes\n").is_err());
    assert!(parse_limits_nofile("Max open files            1024\n").is_err());

    assert_eq!(
        parse_port_range("32768\t60999\n").expect("range"),
        (32768, 60999)
    );
    assert!(parse_port_range("60999 32768").is_err());
    assert!(parse_port_range("32768").is_err());
    assert!(parse_port_range("1 70000").is_err());
    assert_eq!(
        parse_reserved_ports("\n", (32768, 60999)).expect("empty"),
        0
    );
    assert_eq!(
        parse_reserved_ports("8080,40000-40009,40005-40019,60990-61010\n", (32768, 60999))
            .expect("list"),
        30
    );
    assert!(parse_reserved_ports("5-3", (1, 10)).is_err());
    assert_eq!(parse_sysctl_u64("somaxconn", "4096\n").expect("u64"), 4096);
    assert!(parse_sysctl_u64("somaxconn", "4096 1").is_err());
    assert!(parse_sysctl_u64("somaxconn", "").is_err());
}

/// Every fixture cut at (many) arbitrary points and with bytes replaced: the parsers
/// may accept or reject, but never panic.
#[test]
fn no_parser_panics_on_any_truncation_or_corruption() {
    type Parse = fn(&str);
    let files: Vec<(String, Parse)> = {
        let mut v: Vec<(String, Parse)> = Vec::new();
        for dir in [
            "vm2-6.18-idle",
            "vm2-6.18-busy-end",
            "synth/1cpu-5.10",
            "synth/8cpu-4.19",
            "synth/96cpu-5.15",
            "synth/4cpu-2.6.32",
        ] {
            v.push((format!("{dir}/stat"), |t| drop(parse_stat(t))));
            v.push((format!("{dir}/softirqs"), |t| drop(parse_softirqs(t))));
            v.push((format!("{dir}/interrupts"), |t| drop(parse_interrupts(t))));
        }
        for f in [
            "vm2-6.18-idle/net/snmp",
            "vm2-6.18-idle/net/netstat",
            "synth/4cpu-2.6.32/snmp",
            "synth/4cpu-2.6.32/netstat",
        ] {
            v.push((f.to_owned(), |t| {
                if let Ok(rows) = parse_snmp_table("x", t) {
                    drop(tcp_counters(&rows, &rows));
                }
            }));
        }
        v.push(("vm2-6.18-idle/net/sockstat".into(), |t| {
            drop(parse_sockstat(t))
        }));
        v.push(("vm2-6.18-idle/self/limits".into(), |t| {
            drop(parse_limits_nofile(t))
        }));
        for f in [
            "task/comm-with-parens.stat",
            "task/kthreadd.stat",
            "vm2-6.18-idle/self/task/15184/stat",
        ] {
            v.push((f.to_owned(), |t| drop(parse_task_stat(t))));
        }
        v.push(("synth/2cpu-2.4/stat".into(), |t| drop(parse_stat(t))));
        v.push(("synth/2cpu-2.6.18/interrupts".into(), |t| {
            drop(parse_interrupts(t))
        }));
        v.push(("synth/4cpu-arm64-6.1/interrupts".into(), |t| {
            drop(parse_interrupts(t))
        }));
        v
    };
    for (rel, parse) in files {
        let text = fixture_text(&rel);
        let stride = (text.len() / 1500).max(1);
        for cut in (0..=text.len()).step_by(stride) {
            if let Some(prefix) = text.get(..cut) {
                parse(prefix);
            }
        }
        let bytes = text.as_bytes();
        for (i, replacement) in (0..bytes.len())
            .step_by(stride * 7 + 1)
            .zip([b'(', b')', b':', b'-', b'\n', b'x', b' '].iter().cycle())
        {
            let mut corrupted = bytes.to_vec();
            corrupted[i] = *replacement;
            if let Ok(s) = std::str::from_utf8(&corrupted) {
                parse(s);
            }
        }
    }
}
