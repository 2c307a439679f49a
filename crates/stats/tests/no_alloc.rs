//! The record path never allocates: a counting global allocator watches
//! this thread while a recorder takes every kind of event.

use xload_stats::{ErrorKind, Recorder};
use xload_testkit::alloc::{allocations, CountingAlloc};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

#[test]
fn record_path_does_not_allocate_after_first_occurrence_of_each_cause() {
    let mut closed = Recorder::new();
    let mut open = Recorder::new_open_loop();
    // First occurrences may allocate (the breakdown vectors).
    for r in [&mut closed, &mut open] {
        r.record_parse_error("bad_chunk_size");
        r.record_parse_error("header_too_large");
        r.record_errno(libc::ENOBUFS);
    }
    let before = allocations();
    for i in 0..200_000u64 {
        let latency_us = (i * 7919) % 5_000_000;
        closed.record_response(latency_us, 200 + (i % 4) as u16, 180);
        open.record_send(5);
        open.record_response_open_loop(latency_us + 5, latency_us, 200, 180);
        closed.add_bytes_sent(60);
        if i % 97 == 0 {
            for r in [&mut closed, &mut open] {
                r.record_error(ErrorKind::ALL[(i % ErrorKind::COUNT as u64) as usize]);
                r.record_parse_error(if i % 2 == 0 {
                    "bad_chunk_size"
                } else {
                    "header_too_large"
                });
                r.record_errno(libc::ENOBUFS);
                r.record_errno(libc::ECONNRESET);
                r.record_connect();
            }
            open.record_late_send();
            open.record_dropped(1);
        }
    }
    let during = allocations() - before;
    assert_eq!(during, 0, "the record path allocated {during} times");
    assert_eq!(closed.requests(), 200_000);
    // The counter does see allocations: a tick allocates its histogram.
    let before = allocations();
    let _ = closed.take_interval();
    assert!(allocations() > before);
}
