//! HTTP/2 client codec costs per response, on the benchmark thread's CPU
//! time: a whole exchange (open a stream, take an nginx-like response of
//! HEADERS and 612 bytes of DATA) at 100 streams a round, and the HPACK
//! decoder alone against loona-hpack on the same nginx-like block (is
//! HPACK worth its own decoder on the hot path?).
//!
//! Run: `cargo bench -p xload-http --bench h2`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use xload_http::h2::frame::{flags, write_header, FrameKind};
use xload_http::h2::hpack::{encode_int, huffman_encode, Decoder};
use xload_http::h2::{Config, Connection, Event, H2Request};
use xload_http::{parse_url, RequestSpec};

/// The header block nginx sends for its index page: `:status` indexed, the
/// rest literals without indexing, names from the static table, values
/// Huffman-coded.
fn nginx_block() -> Vec<u8> {
    let mut b = vec![0x88];
    for (index, value) in [
        (54, "nginx/1.22.1"),
        (33, "Sat, 05 Dec 2026 21:00:00 GMT"),
        (31, "text/html"),
        (28, "612"),
        (44, "Tue, 21 Mar 2023 12:00:00 GMT"),
        (34, "\"6419a1b0-264\""),
        (18, "bytes"),
    ] {
        encode_int(index, 4, 0x00, &mut b);
        let mut h = Vec::new();
        huffman_encode(value.as_bytes(), &mut h);
        encode_int(h.len(), 7, 0x80, &mut b);
        b.extend(h);
    }
    b
}

fn bench(c: &mut Criterion<xload_bench_cpu::ThreadCpu>) {
    let block = nginx_block();
    let mut g = c.benchmark_group("hpack_nginx_block");
    g.throughput(Throughput::Elements(1));
    let mut ours = Decoder::new(4096);
    g.bench_function("xload_http", |b| {
        b.iter(|| {
            let mut n = 0usize;
            ours.decode(black_box(&block), |k, v| n += k.len() + v.len())
                .unwrap();
            n
        })
    });
    let mut theirs = loona_hpack::Decoder::new();
    g.bench_function("loona_hpack", |b| {
        b.iter(|| {
            let mut n = 0usize;
            theirs
                .decode_with_cb(black_box(&block), |k, v| n += k.len() + v.len())
                .unwrap();
            n
        })
    });
    g.finish();

    const STREAMS: u32 = 100;
    let url = parse_url("http://127.0.0.1:8080/").unwrap();
    let reqs = [H2Request::new(&RequestSpec {
        method: "GET",
        url: &url,
        headers: &[],
        body: b"",
    })
    .unwrap()];
    let mut g = c.benchmark_group("h2_exchange_100_streams");
    g.throughput(Throughput::Elements(u64::from(STREAMS)));
    let mut conn = Connection::<u32>::new(Config {
        max_streams: STREAMS,
        ..Config::default()
    });
    let mut out = Vec::with_capacity(1 << 16);
    conn.preface(&mut out);
    conn.recv(&[0, 0, 0, 4, 0, 0, 0, 0, 0], &reqs, &mut out, &mut |_| {})
        .unwrap();
    let body = [b'x'; 612];
    let mut wire = Vec::with_capacity(1 << 20);
    g.bench_function("xload_http", |b| {
        b.iter(|| {
            out.clear();
            wire.clear();
            for k in 0..STREAMS {
                let id = conn.open(&reqs, 0, k, &mut out);
                write_header(
                    &mut wire,
                    block.len(),
                    FrameKind::HEADERS,
                    flags::END_HEADERS,
                    id,
                );
                wire.extend_from_slice(&block);
                write_header(
                    &mut wire,
                    body.len(),
                    FrameKind::DATA,
                    flags::END_STREAM,
                    id,
                );
                wire.extend_from_slice(&body);
            }
            let mut done = 0u32;
            conn.recv(black_box(&wire), &reqs, &mut out, &mut |e| {
                if let Event::Response { .. } = e {
                    done += 1;
                }
            })
            .unwrap();
            done
        })
    });
    g.finish();
}

/// The thread-CPU measurement of benches/parse.rs.
mod xload_bench_cpu {
    use std::time::Duration;

    use criterion::measurement::{Measurement, ValueFormatter, WallTime};
    use xload_sys::clock::thread_cpu_ns;

    pub(crate) struct ThreadCpu;
    static DURATIONS: WallTime = WallTime;

    impl Measurement for ThreadCpu {
        type Intermediate = u64;
        type Value = Duration;
        fn start(&self) -> u64 {
            thread_cpu_ns()
        }
        fn end(&self, start_ns: u64) -> Duration {
            Duration::from_nanos(thread_cpu_ns().saturating_sub(start_ns))
        }
        fn add(&self, a: &Duration, b: &Duration) -> Duration {
            *a + *b
        }
        fn zero(&self) -> Duration {
            Duration::ZERO
        }
        fn to_f64(&self, d: &Duration) -> f64 {
            d.as_nanos() as f64
        }
        fn formatter(&self) -> &dyn ValueFormatter {
            DURATIONS.formatter()
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .with_measurement(xload_bench_cpu::ThreadCpu)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
