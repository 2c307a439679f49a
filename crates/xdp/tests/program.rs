//! The hand-assembled XDP programs pass the kernel verifier and classify
//! frames as intended (run through BPF_PROG_TEST_RUN, no interface needed).

use std::net::IpAddr;

use xload_xdp::frame::{FrameSpec, FrameTemplate};
use xload_xdp::program::{ProgramOptions, RxMode, XdpProgram, XDP_DROP, XDP_PASS};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn frame(src: &str, dst: &str, dst_port: u16, wire_size: usize) -> Vec<u8> {
    let t = FrameTemplate::new(&FrameSpec {
        src_mac: "02:00:00:00:00:01".parse().unwrap(),
        dst_mac: "02:00:00:00:00:02".parse().unwrap(),
        src_ip: src.parse::<IpAddr>().unwrap(),
        dst_ip: dst.parse::<IpAddr>().unwrap(),
        src_port: 10000,
        dst_port,
        wire_size,
        run_tag: 7,
    })
    .unwrap();
    let mut b = vec![0u8; t.len()];
    t.write(&mut b, 1, 2);
    b
}

fn arp() -> Vec<u8> {
    let mut b = vec![0u8; 60];
    b[0..6].copy_from_slice(&[0xff; 6]);
    b[12] = 0x08;
    b[13] = 0x06;
    b
}

#[test]
fn count_program_drops_and_counts_xload_frames_and_passes_others() {
    if !is_root() {
        eprintln!("skipped: needs root for bpf()");
        return;
    }
    let p = XdpProgram::load(ProgramOptions {
        mode: RxMode::Count,
        dst_port: 9,
        drop_every: 0,
        max_queues: 1,
    })
    .expect("load count program");
    let v4 = frame("198.18.0.1", "198.18.0.2", 9, 64);
    let v6 = frame("2001:2::1", "2001:2::2", 9, 84);
    let other_port = frame("198.18.0.1", "198.18.0.2", 10, 64);
    let other_port6 = frame("2001:2::1", "2001:2::2", 10, 84);
    assert_eq!(p.test_run(&v4).unwrap(), XDP_DROP);
    assert_eq!(p.test_run(&v6).unwrap(), XDP_DROP);
    assert_eq!(p.test_run(&v4).unwrap(), XDP_DROP);
    assert_eq!(p.test_run(&other_port).unwrap(), XDP_PASS);
    assert_eq!(p.test_run(&other_port6).unwrap(), XDP_PASS);
    assert_eq!(p.test_run(&arp()).unwrap(), XDP_PASS);
    // Too short for the IPv4 check: passes untouched.
    assert_eq!(p.test_run(&v4[..30]).unwrap(), XDP_PASS);
    let c = p.counters().unwrap();
    assert_eq!(c.matched_packets, 3);
    assert_eq!(c.matched_bytes, 60 + 80 + 60);
    assert_eq!(c.other_packets, 4);
    assert_eq!(c.injected_drops, 0);
}

#[test]
fn loss_injection_drops_every_nth_matched_frame() {
    if !is_root() {
        eprintln!("skipped: needs root for bpf()");
        return;
    }
    let p = XdpProgram::load(ProgramOptions {
        mode: RxMode::Xsk,
        dst_port: 9,
        drop_every: 3,
        max_queues: 2,
    })
    .expect("load xsk program");
    let v4 = frame("198.18.0.1", "198.18.0.2", 9, 64);
    for _ in 0..10 {
        // No socket in the map: redirect fails and the frame is dropped.
        assert_eq!(p.test_run(&v4).unwrap(), XDP_DROP);
    }
    let c = p.counters().unwrap();
    assert_eq!(c.matched_packets, 10);
    assert_eq!(c.injected_drops, 3, "frames 3, 6 and 9");
    assert_eq!(c.redirect_failed, 7);
    assert!(p.register_socket(5, 0).is_err(), "queue beyond the map");
}
