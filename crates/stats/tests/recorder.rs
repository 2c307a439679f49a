//! Recorder counting, interval ticks, reset and exact merge.

use xload_stats::{ErrorKind, Histogram, Recorder};

/// Deterministic pseudo-random stream (xorshift64*), so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Latency spread over the whole range, log-uniform-ish: 0 µs .. ~1 h.
    fn latency_us(&mut self) -> u64 {
        let shift = self.next() % 32;
        self.next() % (1u64 << shift).max(1)
    }
}

const STATUSES: [u16; 5] = [200, 204, 404, 503, 1200];
const CAUSES: [&str; 3] = ["bad_chunk_size", "header_too_large", "bad_status_line"];

/// Feeds `n` events of every kind into `r`, drawn from `rng`.
fn feed(r: &mut Recorder, rng: &mut Rng, n: usize, open_loop: bool) {
    for _ in 0..n {
        let pick = rng.next() % 100;
        let status = STATUSES[(rng.next() % STATUSES.len() as u64) as usize];
        let wire = 100 + rng.next() % 2000;
        match pick {
            0..=79 => {
                if open_loop {
                    let corrected = rng.latency_us();
                    let lag = rng.next() % 500;
                    r.record_send(lag);
                    r.record_response_open_loop(
                        corrected,
                        corrected.saturating_sub(lag),
                        status,
                        wire,
                    );
                } else {
                    r.record_response(rng.latency_us(), status, wire);
                }
            }
            80..=84 => {
                r.record_error(ErrorKind::ALL[(rng.next() % ErrorKind::COUNT as u64) as usize])
            }
            85..=87 => r.record_parse_error(CAUSES[(rng.next() % 3) as usize]),
            88..=89 => r.record_errno(
                [libc::ENOBUFS, libc::ENOMEM, libc::ECONNRESET, 9999][(rng.next() % 4) as usize],
            ),
            90..=93 => r.add_bytes_sent(rng.next() % 300),
            94 => r.record_connect(),
            95..=96 if open_loop => r.record_late_send(),
            97 if open_loop => r.record_dropped(rng.next() % 3),
            _ => r.record_connect(),
        }
    }
}

/// Every (value, count) pair of a histogram, for exact comparison.
fn counts(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

fn assert_same(a: &Recorder, b: &Recorder) {
    assert_eq!(a.requests(), b.requests());
    assert_eq!(a.errors_total(), b.errors_total());
    for k in ErrorKind::ALL {
        assert_eq!(a.error_count(k), b.error_count(k), "{k}");
    }
    assert_eq!(
        a.status_counts().collect::<Vec<_>>(),
        b.status_counts().collect::<Vec<_>>()
    );
    assert_eq!(a.bytes_received(), b.bytes_received());
    assert_eq!(a.bytes_sent(), b.bytes_sent());
    assert_eq!(a.connects(), b.connects());
    assert_eq!(a.late_sends(), b.late_sends());
    assert_eq!(a.dropped(), b.dropped());
    let mut ea = a.errno_counts().to_vec();
    let mut eb = b.errno_counts().to_vec();
    ea.sort();
    eb.sort();
    assert_eq!(ea, eb);
    let mut pa = a.parse_causes().to_vec();
    let mut pb = b.parse_causes().to_vec();
    pa.sort();
    pb.sort();
    assert_eq!(pa, pb);
    let (ha, hb) = (a.latency_histogram(), b.latency_histogram());
    assert_eq!(counts(&ha), counts(&hb));
    assert_eq!(ha.len(), hb.len());
    assert_eq!(ha, hb);
    match (
        a.latency_uncorrected_histogram(),
        b.latency_uncorrected_histogram(),
    ) {
        (Some(x), Some(y)) => assert_eq!(counts(x), counts(y)),
        (None, None) => {}
        _ => panic!("open-loop state differs"),
    }
    match (a.schedule_lag_histogram(), b.schedule_lag_histogram()) {
        (Some(x), Some(y)) => assert_eq!(counts(x), counts(y)),
        (None, None) => {}
        _ => panic!("open-loop state differs"),
    }
}

#[test]
fn record_response_counts_requests_status_bytes_and_latency() {
    let mut r = Recorder::new();
    r.record_response(100, 200, 150);
    r.record_response(250, 200, 150);
    r.record_response(1_000, 404, 90);
    assert_eq!(r.requests(), 3);
    assert_eq!(r.status_count(200), 2);
    assert_eq!(r.status_count(404), 1);
    assert_eq!(r.status_count(500), 0);
    assert_eq!(r.bytes_received(), 390);
    let h = r.latency_histogram();
    assert_eq!(h.len(), 3);
    assert_eq!(h.min(), 100);
    assert!(h.equivalent(h.max(), 1_000));
    assert_eq!(r.errors_total(), 0);
}

#[test]
fn status_codes_above_999_share_the_other_slot() {
    let mut r = Recorder::new();
    r.record_response(10, 1200, 0);
    r.record_response(10, u16::MAX, 0);
    assert_eq!(r.status_counts().collect::<Vec<_>>(), vec![(0, 2)]);
}

#[test]
fn latency_beyond_one_hour_is_clamped_not_lost() {
    let mut r = Recorder::new();
    r.record_response(u64::MAX, 200, 0);
    r.record_response(0, 200, 0);
    let h = r.latency_histogram();
    assert_eq!(h.len(), 2);
    assert!(h.equivalent(h.max(), xload_stats::LATENCY_HIGHEST_US));
    assert_eq!(h.min(), 0);
}

#[test]
fn errors_are_counted_per_kind_and_in_total() {
    let mut r = Recorder::new();
    r.record_error(ErrorKind::Reset);
    r.record_error(ErrorKind::Reset);
    r.record_error(ErrorKind::RequestTimeout);
    assert_eq!(r.error_count(ErrorKind::Reset), 2);
    assert_eq!(r.error_count(ErrorKind::RequestTimeout), 1);
    assert_eq!(r.error_count(ErrorKind::Parse), 0);
    assert_eq!(r.errors_total(), 3);
}

#[test]
fn error_kind_names_are_the_json_keys_and_unique() {
    let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(
        names,
        [
            "connect_refused",
            "connect_timeout",
            "reset",
            "closed",
            "eof_mid_response",
            "parse",
            "request_timeout",
            "fd_limit",
            "no_ephemeral_port",
            "consistency",
            "tls_untrusted_certificate",
            "tls_handshake_failed",
            "tls_closed_in_handshake",
            "tls_handshake_timeout",
            "not_tls",
            "h2_stream_reset",
            "h2_connection_error",
            "other"
        ]
    );
    for (i, k) in ErrorKind::ALL.iter().enumerate() {
        assert_eq!(*k as usize, i, "ALL order matches the discriminants");
        assert_eq!(ErrorKind::from_name(k.name()), Some(*k));
    }
}

#[test]
fn record_errno_files_known_errnos_under_their_kind_and_breaks_down_the_rest() {
    let mut r = Recorder::new();
    r.record_errno(libc::ENOBUFS);
    r.record_errno(libc::ENOBUFS);
    r.record_errno(libc::ECONNREFUSED);
    r.record_errno(libc::EMFILE);
    r.record_errno(4242);
    assert_eq!(r.error_count(ErrorKind::ConnectRefused), 1);
    assert_eq!(r.error_count(ErrorKind::FdLimit), 1);
    assert_eq!(r.error_count(ErrorKind::Other), 3);
    assert_eq!(r.errno_counts(), &[(libc::ENOBUFS, 2), (4242, 1)]);
    assert_eq!(xload_stats::errno_key(libc::ENOBUFS), "errno_ENOBUFS");
    assert_eq!(xload_stats::errno_key(libc::EAGAIN), "errno_EAGAIN");
    assert_eq!(xload_stats::errno_key(4242), "errno_4242");
}

#[test]
fn parse_errors_count_as_parse_with_a_per_cause_breakdown() {
    let mut r = Recorder::new();
    r.record_parse_error("bad_chunk_size");
    r.record_parse_error("bad_chunk_size");
    r.record_parse_error("header_too_large");
    // The same text from another static shares the slot.
    let other_static: &'static str = String::from("header_too_large").leak();
    r.record_parse_error(other_static);
    assert_eq!(r.error_count(ErrorKind::Parse), 4);
    assert_eq!(
        r.parse_causes(),
        &[("bad_chunk_size", 2), ("header_too_large", 2)]
    );
}

#[test]
fn open_loop_records_uncorrected_latency_lag_late_and_dropped() {
    let mut r = Recorder::new_open_loop();
    assert!(r.is_open_loop());
    r.record_send(4_700);
    r.record_response_open_loop(5_000, 300, 200, 100);
    r.record_late_send();
    // A send that got no answer is in the lag's distribution too.
    r.record_send(9_000);
    r.record_dropped(3);
    assert_eq!(r.requests(), 1);
    let h = r.latency_histogram();
    assert!(h.equivalent(h.max(), 5_000));
    let u = r.latency_uncorrected_histogram().expect("open loop");
    assert!(u.equivalent(u.max(), 300));
    let lag = r.schedule_lag_histogram().expect("open loop");
    assert_eq!(lag.len(), 2);
    assert!(lag.equivalent(lag.max(), 9_000));
    assert_eq!(r.sends(), 2);
    assert_eq!(r.late_sends(), 1);
    assert_eq!(r.dropped(), 3);
    assert!(!Recorder::new().is_open_loop());
}

#[test]
fn merge_of_two_recorders_equals_one_recorder_fed_both_streams() {
    for open_loop in [false, true] {
        let make = || {
            if open_loop {
                Recorder::new_open_loop()
            } else {
                Recorder::new()
            }
        };
        let (mut a, mut b, mut both) = (make(), make(), make());
        // Same seeds feed `a`/`b` and, in the same order, `both`.
        feed(&mut a, &mut Rng(0x1234_5678), 20_000, open_loop);
        feed(&mut b, &mut Rng(0x9abc_def0), 15_000, open_loop);
        feed(&mut both, &mut Rng(0x1234_5678), 20_000, open_loop);
        feed(&mut both, &mut Rng(0x9abc_def0), 15_000, open_loop);
        assert!(a.requests() > 10_000 && b.requests() > 10_000);
        a.merge(&b);
        assert_same(&a, &both);
    }
}

#[test]
fn merge_is_exact_across_interval_ticks() {
    let (mut a, mut b, mut both) = (Recorder::new(), Recorder::new(), Recorder::new());
    let (mut ra, mut rb) = (Rng(7), Rng(11));
    feed(&mut a, &mut ra, 5_000, false);
    let _ = a.take_interval();
    feed(&mut a, &mut ra, 5_000, false);
    feed(&mut b, &mut rb, 3_000, false);
    a.merge(&b);
    let (mut ra, mut rb) = (Rng(7), Rng(11));
    feed(&mut both, &mut ra, 10_000, false);
    feed(&mut both, &mut rb, 3_000, false);
    assert_same(&a, &both);
}

#[test]
fn take_interval_reports_only_what_happened_since_the_previous_take() {
    let mut r = Recorder::new();
    r.record_response(100, 200, 10);
    r.record_response(200, 200, 10);
    r.record_error(ErrorKind::Reset);
    let first = r.take_interval();
    assert_eq!((first.requests, first.errors, first.bytes), (2, 1, 20));
    assert_eq!(first.latency.len(), 2);
    assert_eq!(first.errors_by_kind[ErrorKind::Reset as usize], 1);
    assert_eq!(first.errors_by_kind.iter().sum::<u64>(), 1);

    r.record_response(900, 500, 7);
    r.record_error(ErrorKind::RequestTimeout);
    r.record_error(ErrorKind::RequestTimeout);
    let second = r.take_interval();
    assert_eq!((second.requests, second.errors, second.bytes), (1, 2, 7));
    assert_eq!(second.errors_by_kind[ErrorKind::RequestTimeout as usize], 2);
    assert_eq!(second.errors_by_kind[ErrorKind::Reset as usize], 0);
    assert_eq!(counts(&second.latency), vec![(900, 1)]);

    let empty = r.take_interval();
    assert_eq!((empty.requests, empty.errors, empty.bytes), (0, 0, 0));
    assert!(empty.latency.is_empty());

    // Totals keep everything.
    assert_eq!(r.requests(), 3);
    assert_eq!(r.latency_histogram().len(), 3);
    assert_eq!(r.errors_total(), 3);
}

#[test]
fn merged_recorder_interval_covers_both_untaken_parts() {
    let mut a = Recorder::new();
    let mut b = Recorder::new();
    a.record_response(10, 200, 1);
    let _ = a.take_interval();
    a.record_response(20, 200, 1);
    b.record_response(30, 200, 1);
    b.record_error(ErrorKind::Closed);
    a.merge(&b);
    let iv = a.take_interval();
    assert_eq!((iv.requests, iv.errors), (2, 1));
    assert_eq!(counts(&iv.latency), vec![(20, 1), (30, 1)]);
    assert_eq!(a.requests(), 3);
}

#[test]
fn intervals_of_two_workers_merge_exactly() {
    let mut a = Recorder::new();
    let mut b = Recorder::new();
    feed(&mut a, &mut Rng(3), 2_000, false);
    feed(&mut b, &mut Rng(5), 2_000, false);
    let mut both = Recorder::new();
    both.merge(&a);
    both.merge(&b);
    let mut iv = a.take_interval();
    iv.merge(&b.take_interval());
    let whole = both.take_interval();
    assert_eq!(
        (iv.requests, iv.errors, iv.bytes),
        (whole.requests, whole.errors, whole.bytes)
    );
    assert_eq!(counts(&iv.latency), counts(&whole.latency));
}

#[test]
fn reset_forgets_everything_but_keeps_open_loop_mode() {
    let mut r = Recorder::new_open_loop();
    feed(&mut r, &mut Rng(99), 1_000, true);
    let _ = r.take_interval();
    feed(&mut r, &mut Rng(98), 1_000, true);
    r.reset();
    assert_same(&r, &Recorder::new_open_loop());
    let iv = r.take_interval();
    assert_eq!((iv.requests, iv.errors, iv.bytes), (0, 0, 0));
    r.record_response(5, 200, 1);
    assert_eq!(r.take_interval().requests, 1);
}

#[test]
fn unanswered_requests_older_than_the_answered_p99_are_recorded_at_their_age() {
    let mut r = Recorder::new_open_loop();
    for i in 0..1000u64 {
        r.record_response_open_loop(100 + i % 100, 90, 200, 50);
    }
    let c = r.unanswered_censor();
    // Younger than the p99 (~199 µs): counted, not recorded.
    r.record_unanswered(&c, 150, Some(150));
    // A stalled one in flight, and one that never left.
    r.record_unanswered(&c, 900_000, Some(400_000));
    r.record_unanswered(&c, 700_000, None);
    let u = r.unanswered();
    assert_eq!((u.in_flight, u.unsent, u.recorded), (2, 1, 2));
    assert_eq!(u.oldest_us, 900_000);
    assert!((190..=200).contains(&u.threshold_us), "{u:?}");
    let h = r.latency_histogram();
    assert_eq!(h.len(), 1002, "the answered and the two recorded");
    assert!(h.max() >= 899_000);
    let unc = r.latency_uncorrected_histogram().unwrap();
    // Against its own p99 (90 µs): the two that were sent, not the unsent one.
    assert_eq!(unc.len(), 1002);
    // Merged exactly; reset forgets them.
    let mut m = Recorder::new_open_loop();
    m.merge(&r);
    m.merge(&r);
    assert_eq!(m.unanswered().recorded, 4);
    assert_eq!(m.unanswered().oldest_us, 900_000);
    m.reset();
    assert_eq!(m.unanswered(), Default::default());
}

#[test]
fn with_few_answers_the_slowest_stands_in_for_the_p99_and_with_none_nothing_is_recorded() {
    let mut r = Recorder::new();
    let c = r.unanswered_censor();
    r.record_unanswered(&c, 5_000_000, Some(5_000_000));
    assert_eq!((r.unanswered().in_flight, r.unanswered().recorded), (1, 0));
    assert!(r.latency_histogram().is_empty(), "no answer: no latency");
    let mut r = Recorder::new();
    for l in [100, 200, 5_000] {
        r.record_response(l, 200, 10);
    }
    let c = r.unanswered_censor();
    r.record_unanswered(&c, 4_000, Some(4_000));
    r.record_unanswered(&c, 9_000, Some(9_000));
    assert_eq!(
        r.unanswered().recorded,
        1,
        "only past the slowest answer (5 ms)"
    );
}
