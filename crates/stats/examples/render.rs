//! Prints the text report of a synthetic run (closed and open loop), to see
//! the layout: `cargo run -p xload-stats --example render`.

use xload_stats::{ErrorKind, Recorder, Report, RunMeta, TextOptions};

fn main() {
    let mut rec = Recorder::new();
    for i in 0..2_131_004u64 {
        rec.record_response(
            300 + (i * 7919) % 250 + if i % 1000 == 0 { 3_000 } else { 0 },
            200,
            156,
        );
    }
    rec.record_error(ErrorKind::Reset);
    rec.record_parse_error("bad_chunk_size");
    rec.record_errno(libc::ENOBUFS);
    let meta = RunMeta {
        target: "http://127.0.0.1:8080/".into(),
        engine: "io_uring".into(),
        engine_reason: None,
        threads: 2,
        connections: 100,
        duration_s: 10.0,
        rate_target: None,
        pipeline: 1,
    };
    let mut report = Report::build(&meta, &rec);
    report.client = Some(serde_json::json!({"verdict": "not saturated (CPU 0 at 61%)"}));
    print!(
        "{}",
        report.render_text(&TextOptions {
            latency_table: true
        })
    );
    println!();

    let mut rec = Recorder::new_open_loop();
    for i in 0..50_000u64 {
        let lag = if i % 500 == 0 { 1_200 } else { i % 5 };
        rec.record_send(lag);
        rec.record_response_open_loop(400 + lag + i % 100, 400 + i % 100, 200, 156);
        if lag > 10 {
            rec.record_late_send();
        }
    }
    let meta = RunMeta {
        rate_target: Some(5_000.0),
        engine: "epoll".into(),
        engine_reason: Some("io_uring_setup: EPERM (seccomp)".into()),
        ..meta
    };
    let report = Report::build(&meta, &rec);
    print!(
        "{}",
        report.render_text(&TextOptions {
            latency_table: true
        })
    );
    println!();
    let empty = Report::build(
        &RunMeta {
            duration_s: 0.0,
            ..Default::default()
        },
        &Recorder::new(),
    );
    print!(
        "{}",
        empty.render_text(&TextOptions {
            latency_table: true
        })
    );
}
