//! End-to-end runs of the library across a veth pair between two network
//! namespaces created (and removed) by each test.

use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use xload_xdp::lab::VethLab;
use xload_xdp::netdev;
use xload_xdp::pps::{self, PeerConfig, PpsConfig, PpsError, SearchConfig};
use xload_xdp::program::RxMode;
use xload_xdp::report::TxReport;
use xload_xdp::seq::SeqFault;
use xload_xdp::xsk::BindMode;

macro_rules! need_root {
    () => {
        if let Some(why) = xload_xdp::lab::unsupported() {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

fn config(lab: &VethLab, mode: RxMode) -> PpsConfig {
    PpsConfig {
        dev: lab.dev_tx.clone(),
        dst_mac: None,
        src_mac: None,
        dst_ip: lab.ip_rx.parse::<IpAddr>().unwrap(),
        src_ip: None,
        dst_port: 9,
        src_port: 10000,
        flows: lab.queues,
        wire_size: 64,
        rate_per_s: Some(100_000.0),
        queues: (0..lab.queues).collect(),
        cpus: None,
        duration: Duration::from_secs(5),
        count: Some(40_000),
        batch: 64,
        bind_mode: BindMode::Auto,
        fault: SeqFault::None,
        peer: Some(PeerConfig {
            netns: Some(lab.ns_rx.clone()),
            dev: lab.dev_rx.clone(),
            mode,
            queues: None,
            cpus: None,
            drop_every: 0,
            force_generic: false,
        }),
        search: None,
    }
}

fn run(lab: &VethLab, cfg: &PpsConfig) -> Result<TxReport, PpsError> {
    // One run at a time: two senders and receivers on two CPUs starve each
    // other's rings and drop frames (an IPv6 run lost 61 of 5000 in CI
    // beside another test's run), which these exact counts do not allow.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let stop = Arc::new(AtomicBool::new(false));
    netdev::in_netns(Some(&lab.ns_tx), || pps::run_pps(cfg, &stop)).expect("enter netns")
}

/// The program must be gone from the interface. Allows up to 2 s: a child
/// process another test forks can hold the (close-on-exec) link fd until
/// its exec.
fn assert_detached(lab: &VethLab) {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let listed = lab.xdp_listed(&lab.ns_rx, &lab.dev_rx).unwrap();
        let li = netdev::in_netns(Some(&lab.ns_rx), || netdev::link_by_name(&lab.dev_rx))
            .unwrap()
            .unwrap();
        if !listed && li.xdp_prog_id.is_none() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "XDP program still attached: ip link lists it: {listed}, IFLA_XDP prog id {:?}",
            li.xdp_prog_id
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every frame the sender completed is accounted for by some counter, on
/// every layer, whether or not frames were lost on the way.
fn assert_accounting(r: &TxReport) {
    let rx = r.rx.as_ref().expect("receiver report");
    let c = rx.xdp_counters;
    let x = rx.xdp_statistics;
    // Device layer: what left the sender reached the XDP hook or was
    // counted as dropped by one of the two veth ends.
    // Frames XDP matched and the socket then dropped (fill ring empty) can
    // show in the device's rx_dropped too: counted once here.
    let device_drops = rx.interface.delta.rx_dropped;
    let device_drops = if c.matched_packets + r.interface.delta.tx_dropped + device_drops > r.sent {
        device_drops.saturating_sub(x.rx_dropped)
    } else {
        device_drops
    };
    assert_eq!(
        r.sent,
        c.matched_packets + r.interface.delta.tx_dropped + device_drops,
        "sent vs XDP-matched + interface drops (matched {}, sender tx_dropped {}, receiver rx_dropped {}; counters {c:?}, xsk {x:?})",
        c.matched_packets,
        r.interface.delta.tx_dropped,
        rx.interface.delta.rx_dropped
    );
    // XDP/socket layer: matched frames were read from a ring or dropped
    // with a reason.
    let read: u64 = rx.per_queue.iter().map(|q| q.frames).sum();
    assert_eq!(
        read,
        c.matched_packets - c.injected_drops - c.redirect_failed - x.rx_dropped - x.rx_ring_full,
        "socket reads vs XDP counters and XDP_STATISTICS"
    );
    // Application layer: every read frame is delivered, a duplicate, or junk.
    assert_eq!(
        read,
        rx.delivered + rx.duplicated.unwrap_or(0) + rx.foreign + rx.checksum_errors,
        "socket reads vs sequence tracker"
    );
}

/// Frames sent but not read by the receiver (in transit or test-dropped).
fn missing(r: &TxReport) -> u64 {
    let rx = r.rx.as_ref().unwrap();
    r.sent - rx.per_queue.iter().map(|q| q.frames).sum::<u64>()
}

#[test]
fn tx_to_rx_across_veth_delivers_every_frame_and_all_layers_agree() {
    need_root!();
    let lab = VethLab::new(2, false).unwrap();
    let sys_before = lab
        .sysfs_stat(&lab.ns_rx, &lab.dev_rx, "rx_packets")
        .unwrap();
    let r = run(&lab, &config(&lab, RxMode::Xsk)).expect("run");
    let sys_after = lab
        .sysfs_stat(&lab.ns_rx, &lab.dev_rx, "rx_packets")
        .unwrap();
    let rx = r.rx.as_ref().expect("receiver report");
    eprintln!("{}", r.to_text());
    // Application rings.
    assert_accounting(&r);
    assert_eq!(r.sent, 40_000);
    assert_eq!(r.submitted, 40_000);
    assert_eq!(rx.delivered, 40_000);
    assert_eq!(
        (rx.lost, rx.reordered, rx.duplicated),
        (Some(0), Some(0), Some(0))
    );
    assert_eq!((r.delivered, r.lost), (Some(40_000), Some(Some(0))));
    assert_eq!(rx.flows, Some(2));
    assert_eq!((rx.foreign, rx.checksum_errors), (0, 0));
    // Every queue received its flow.
    assert_eq!(rx.per_queue.len(), 2);
    for q in &rx.per_queue {
        assert_eq!(q.frames, 20_000, "queue {}", q.queue);
    }
    // XDP program and XDP_STATISTICS.
    assert_eq!(rx.xdp_counters.matched_packets, 40_000);
    assert_eq!(rx.xdp_counters.matched_bytes, 40_000 * 60);
    assert_eq!(rx.xdp_counters.redirect_failed, 0);
    let s = rx.xdp_statistics;
    assert_eq!(
        (s.rx_dropped, s.rx_ring_full, s.rx_invalid_descs),
        (0, 0, 0)
    );
    assert_eq!(r.xdp_statistics.tx_invalid_descs, 0);
    // Interface counters on both ends (netlink), and sysfs as seen in the namespace.
    assert_eq!(r.interface.delta.tx_packets, 40_000);
    assert_eq!(
        rx.interface.delta.rx_packets,
        40_000 + rx.xdp_counters.other_packets
    );
    assert_eq!(sys_after - sys_before, rx.interface.delta.rx_packets);
    assert_eq!(rx.interface.delta.rx_dropped, 0);
    // Latency is measured and plausible (same host clock).
    let lat = rx.latency_us.expect("latency");
    assert!(
        lat.samples == 40_000 && lat.min > 0.0 && lat.p50 < 1_000_000.0,
        "{lat:?}"
    );
    // Pacing never overshoots the 100 kpps asked (it may fall short on a
    // loaded machine, and the verdict then says why).
    assert!(r.pps > 10_000.0 && r.pps < 110_000.0, "pps {}", r.pps);
    assert!(
        ["rate-target", "scheduling", "generator-cpu", "receiver-cpu"].contains(&r.verdict.limit),
        "{:?}",
        r.verdict
    );
    assert_eq!(r.link_speed_mbps, Some(10_000));
    assert_detached(&lab);
}

#[test]
fn ipv6_frames_are_delivered_with_valid_checksums() {
    need_root!();
    let lab = VethLab::new(1, false).unwrap();
    let mut cfg = config(&lab, RxMode::Xsk);
    cfg.dst_ip = "2001:2::2".parse().unwrap();
    cfg.wire_size = 128;
    cfg.count = Some(5_000);
    let r = run(&lab, &cfg).expect("run");
    let rx = r.rx.as_ref().unwrap();
    assert_eq!((r.sent, rx.delivered, rx.lost), (5_000, 5_000, Some(0)));
    assert_eq!(rx.checksum_errors, 0);
    assert_eq!(rx.xdp_counters.matched_bytes, 5_000 * 124);
    assert_eq!(r.ip_version, 6);
}

#[test]
fn loss_injected_in_the_receiver_program_is_counted_exactly() {
    need_root!();
    let lab = VethLab::new(1, false).unwrap();
    let mut cfg = config(&lab, RxMode::Xsk);
    cfg.count = Some(20_000);
    if let Some(p) = cfg.peer.as_mut() {
        p.drop_every = 10;
    }
    let r = run(&lab, &cfg).expect("run");
    let rx = r.rx.as_ref().unwrap();
    assert_accounting(&r);
    let injected = rx.xdp_counters.injected_drops;
    // Every 10th frame per CPU: about 2000 in total.
    assert!((1_800..=2_000).contains(&injected), "injected {injected}");
    // Each missing frame is one lost sequence number; on a quiet machine
    // the injected drops are all of them.
    assert_eq!(rx.lost, Some(missing(&r)));
    assert!(rx.lost.unwrap() >= injected);
    assert_eq!(rx.delivered, 20_000 - missing(&r));
    assert_eq!(rx.reordered, Some(0));
    assert!(
        ["loss", "device-drops"].contains(&r.verdict.limit),
        "{:?}",
        r.verdict
    );
}

#[test]
fn sender_sequence_faults_show_up_as_reordering_duplicates_and_loss() {
    need_root!();
    let lab = VethLab::new(1, false).unwrap();
    let mut cfg = config(&lab, RxMode::Xsk);
    cfg.count = Some(10_000);

    // Frames lost in transit on a loaded machine are allowed; they must show
    // up in the counters (assert_accounting) and the fault figures are
    // checked against what actually arrived.
    cfg.fault = SeqFault::Swap(50);
    let r = run(&lab, &cfg).expect("swap run");
    let rx = r.rx.as_ref().unwrap();
    assert_accounting(&r);
    // ~10000/51 swapped pairs; a run may end between the two of a pair
    // (the held-back frame then counts as lost).
    assert!(
        rx.reordered.unwrap() >= 190 - missing(&r),
        "{:?}",
        rx.reordered
    );
    assert!(rx.lost.unwrap() <= 1 + missing(&r));
    assert_eq!(rx.duplicated, Some(0));
    assert_eq!(rx.delivered, 10_000 - missing(&r));

    cfg.fault = SeqFault::Duplicate(50);
    let r = run(&lab, &cfg).expect("dup run");
    let rx = r.rx.as_ref().unwrap();
    assert_accounting(&r);
    // 9800 distinct numbers and 200 repeats were sent; each missing frame
    // is either a lost number or a repeat that never arrived.
    assert_eq!(
        rx.lost.unwrap() + (200 - rx.duplicated.unwrap()),
        missing(&r)
    );
    assert_eq!(rx.delivered, 9_800 - rx.lost.unwrap());
    assert!(rx.duplicated.unwrap() >= 200 - missing(&r));
    assert_eq!(rx.reordered, Some(0));

    cfg.fault = SeqFault::Skip(100);
    let r = run(&lab, &cfg).expect("skip run");
    let rx = r.rx.as_ref().unwrap();
    assert_accounting(&r);
    // 100 numbers were never sent at all: lost although nothing dropped.
    assert_eq!(rx.lost, Some(100 + missing(&r)));
    assert_eq!(rx.delivered, 10_000 - missing(&r));
}

#[test]
fn count_mode_receiver_counts_every_frame_that_reaches_it() {
    need_root!();
    let lab = VethLab::new(2, false).unwrap();
    let mut cfg = config(&lab, RxMode::Count);
    // Unpaced: on a loaded host the veth ring between the ends may
    // overflow; such drops must then show in the interface counters.
    cfg.rate_per_s = None;
    cfg.count = Some(100_000);
    let r = run(&lab, &cfg).expect("run");
    let rx = r.rx.as_ref().unwrap();
    assert_eq!(r.sent, 100_000);
    let c = rx.xdp_counters;
    let drops = r.interface.delta.tx_dropped + rx.interface.delta.rx_dropped;
    assert_eq!(r.sent, c.matched_packets + drops, "{}", r.to_text());
    assert_eq!(rx.delivered, c.matched_packets);
    assert_eq!(rx.lost, Some(r.sent - rx.delivered));
    assert_eq!(
        rx.reordered, None,
        "count mode does not see sequence numbers"
    );
    assert_eq!(
        rx.interface.delta.rx_packets,
        c.matched_packets + c.other_packets
    );
    if drops == 0 {
        assert_eq!(rx.delivered, 100_000);
    }
    assert_detached(&lab);
}

#[test]
fn zero_loss_search_brackets_the_rate() {
    need_root!();
    let lab = VethLab::new(1, false).unwrap();
    let mut cfg = config(&lab, RxMode::Count);
    cfg.rate_per_s = None;
    cfg.count = None;
    cfg.search = Some(SearchConfig {
        trial: Duration::from_millis(200),
        resolution_pct: 5.0,
        max_trials: 4,
    });
    let r = run(&lab, &cfg).expect("search");
    let z = r.zero_loss.as_ref().expect("search result");
    assert!(!z.trials.is_empty() && z.trials.len() <= 4);
    assert_eq!(z.trials[0].rate_target, None, "first trial at full speed");
    assert_eq!(z.rate_pps, z.bracket_pps.0);
    if let Some(hi) = z.bracket_pps.1 {
        assert!(z.bracket_pps.0 <= hi);
    }
    for t in &z.trials {
        assert_eq!(t.lost, t.sent - t.delivered.min(t.sent));
    }

    // With the receiver dropping one frame in 100, no rate is loss-free.
    if let Some(p) = cfg.peer.as_mut() {
        p.drop_every = 100;
    }
    let r = run(&lab, &cfg).expect("search with loss");
    let z = r.zero_loss.as_ref().unwrap();
    assert_eq!(z.rate_pps, 0.0);
    assert!(z.bracket_pps.1.is_some());
    assert!(z.trials.iter().all(|t| t.lost > 0), "{:?}", z.trials);
    assert_detached(&lab);
}

#[test]
fn setup_errors_name_the_cause() {
    need_root!();
    let lab = VethLab::new(1, false).unwrap();
    let mut cfg = config(&lab, RxMode::Xsk);
    cfg.dev = "xload-none0".into();
    let e = run(&lab, &cfg).unwrap_err();
    assert!(
        e.to_string().contains("no interface named \"xload-none0\""),
        "{e}"
    );
    assert_eq!(e.exit_code(), 1);

    let mut cfg = config(&lab, RxMode::Xsk);
    cfg.queues = vec![3];
    cfg.flows = 1;
    let e = run(&lab, &cfg).unwrap_err();
    assert!(e.to_string().contains("queue 3 does not exist"), "{e}");

    let mut cfg = config(&lab, RxMode::Xsk);
    cfg.wire_size = 60;
    let e = run(&lab, &cfg).unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");

    lab.ip(&lab.ns_tx, &["link", "set", &lab.dev_tx, "down"])
        .unwrap();
    let e = run(&lab, &config(&lab, RxMode::Xsk)).unwrap_err();
    assert!(e.to_string().contains("is down"), "{e}");
    assert_eq!(e.exit_code(), 1);
    assert_detached(&lab);
}

#[test]
fn program_is_detached_when_setup_fails_after_attaching() {
    need_root!();
    use xload_xdp::xsk::{XskConfig, XskSocket};
    let lab = VethLab::new(1, false).unwrap();
    // Occupy queue 0 of the receiving end so the receiver's bind fails
    // after its XDP program is already attached.
    let ns = lab.ns_rx.clone();
    let dev = lab.dev_rx.clone();
    let blocker = netdev::in_netns(Some(&ns), || {
        let li = netdev::link_by_name(&dev).unwrap();
        XskSocket::open(XskConfig {
            ifindex: li.ifindex,
            queue: 0,
            frame_size: 2048,
            frame_count: 64,
            rx_size: 64,
            tx_size: 0,
            fill_size: 64,
            comp_size: 64,
            mode: BindMode::Copy,
        })
    })
    .unwrap()
    .expect("blocking socket");
    let e = run(&lab, &config(&lab, RxMode::Xsk)).unwrap_err();
    assert!(e.to_string().contains("queue 0"), "{e}");
    drop(blocker);
    assert_detached(&lab);
}
