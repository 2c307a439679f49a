//! Cost of the record path: `cargo bench -p xload-stats --bench record`.
//! Each iteration records one response (latency spread like a real run),
//! so the figure is ns per response on one core.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use xload_stats::Recorder;

/// Latencies cycling through a realistic spread (200 µs .. ~13 ms), so the
/// histogram writes land in different buckets as they do under load.
fn latencies() -> Vec<u64> {
    (0..4096u64)
        .map(|i| 200 + (i * 7919) % 800 + if i % 64 == 0 { 12_000 } else { 0 })
        .collect()
}

fn record(c: &mut Criterion) {
    let lat = latencies();
    let mut group = c.benchmark_group("record");
    group.throughput(Throughput::Elements(1));

    let mut rec = Recorder::new();
    let mut i = 0usize;
    group.bench_function("record_response", |b| {
        b.iter(|| {
            i = (i + 1) & 4095;
            rec.record_response(black_box(lat[i]), black_box(200), black_box(180));
        })
    });

    let mut rec = Recorder::new_open_loop();
    let mut i = 0usize;
    group.bench_function("record_response_open_loop", |b| {
        b.iter(|| {
            i = (i + 1) & 4095;
            let v = lat[i];
            rec.record_response_open_loop(
                black_box(v + 3),
                black_box(v),
                black_box(200),
                black_box(180),
            );
        })
    });

    let mut rec = Recorder::new();
    rec.record_parse_error("bad_chunk_size");
    group.bench_function("record_parse_error_known_cause", |b| {
        b.iter(|| rec.record_parse_error(black_box("bad_chunk_size")))
    });
    group.finish();

    let mut workers: Vec<Recorder> = (0..2).map(|_| Recorder::new()).collect();
    for (w, r) in workers.iter_mut().enumerate() {
        for (i, v) in lat.iter().enumerate() {
            r.record_response(*v + w as u64, 200, 180);
            if i % 100 == 0 {
                let _ = r.take_interval();
            }
        }
    }
    c.bench_function("take_interval", |b| {
        b.iter(|| black_box(workers[0].take_interval()))
    });
    c.bench_function("merge_two_recorders", |b| {
        b.iter(|| {
            let mut total = Recorder::new();
            total.merge(&workers[0]);
            total.merge(&workers[1]);
            black_box(total.requests())
        })
    });
}

criterion_group! {
    name = benches;
    // Short runs: the machine is shared; these are indications, not
    // published figures.
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2))
        .sample_size(30);
    targets = record
}
criterion_main!(benches);
