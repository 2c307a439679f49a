//! Response parsing: xload-http's parser against httparse on the same bytes.
//!
//! Both sides do the work the engine needs per response: find the status, the
//! body framing (Content-Length) and `Connection: close`, and step over the
//! body. httparse needs the whole head in one slice and caller-provided
//! header slots; xload-http is incremental and keeps no bytes.
//!
//! Times are the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not
//! wall time, so that other work on a shared machine inflates them less.
//!
//! Run: `cargo bench -p xload-http --bench parse`.

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use xload_http::{Limits, Parse, ResponseParser};
use xload_sys::clock::thread_cpu_ns;

/// CPU time consumed by the calling thread.
struct ThreadCpu;

/// Durations are formatted the way criterion formats wall time.
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

/// nginx's answer to a small static file: status line, 5 headers, 13-byte body.
fn small() -> Vec<u8> {
    b"HTTP/1.1 200 OK\r\nServer: nginx/1.24.0\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nConnection: keep-alive\r\n\r\nHello, world!"
        .to_vec()
}

/// nginx's default index page: 8 headers, 612-byte body.
fn index_612() -> Vec<u8> {
    let mut v = b"HTTP/1.1 200 OK\r\nServer: nginx/1.24.0\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Type: text/html\r\nContent-Length: 612\r\nLast-Modified: Tue, 11 Apr 2023 01:45:34 GMT\r\nConnection: keep-alive\r\nETag: \"6434bbbe-264\"\r\nAccept-Ranges: bytes\r\n\r\n".to_vec();
    v.extend(std::iter::repeat_n(b'x', 612));
    v
}

/// Counts the responses in `input` with xload-http (`ResponseParser`).
#[inline(never)]
fn xload(parser: &mut ResponseParser, mut input: &[u8]) -> u64 {
    let mut n = 0;
    loop {
        match parser.parse(input) {
            Ok(Parse::Complete { consumed, response }) => {
                n += u64::from(response.status) + u64::from(response.keep_alive);
                input = &input[consumed..];
                if input.is_empty() {
                    return n;
                }
            }
            Ok(Parse::Partial) => return n,
            Err(_) => return 0,
        }
    }
}

/// Counts the responses in `input` with httparse plus the framing the engine needs.
#[inline(never)]
fn httparse(mut input: &[u8]) -> u64 {
    let mut n = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut headers);
        let Ok(httparse::Status::Complete(head_len)) = resp.parse(input) else {
            return 0;
        };
        let mut body_len = 0usize;
        let mut close = resp.version == Some(0);
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                let Some(len) = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                else {
                    return 0;
                };
                body_len = len;
            } else if h.name.eq_ignore_ascii_case("connection") {
                for t in h.value.split(|&b| b == b',') {
                    let t = t.trim_ascii();
                    if t.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if t.eq_ignore_ascii_case(b"keep-alive") {
                        close = false;
                    }
                }
            }
        }
        n += u64::from(resp.code.unwrap_or(0)) + u64::from(!close);
        let end = head_len + body_len;
        if end > input.len() {
            return n;
        }
        input = &input[end..];
        if input.is_empty() {
            return n;
        }
    }
}

fn bench(c: &mut Criterion<ThreadCpu>) {
    let cases = [
        ("small", small(), 1u64),
        ("small_pipelined_16", small().repeat(16), 16),
        ("index_612", index_612(), 1),
        ("index_612_pipelined_16", index_612().repeat(16), 16),
    ];
    for (name, input, responses) in &cases {
        let mut parser = ResponseParser::new(Limits::default(), false);
        assert_eq!(
            xload(&mut parser, input),
            httparse(input),
            "{name}: both parsers agree"
        );
        assert_ne!(httparse(input), 0, "{name}: input parses");
        let mut g = c.benchmark_group(*name);
        g.throughput(Throughput::Elements(*responses));
        g.bench_function("xload_http", |b| {
            b.iter(|| xload(&mut parser, black_box(input)))
        });
        g.bench_function("httparse", |b| b.iter(|| httparse(black_box(input))));
        g.finish();
    }

    // A head that changes with every answer (the Date, a request id): the
    // remembered head never matches, so this is the full read plus the failed
    // comparison and the copy. (The cases above repeat one head, as a server
    // answering one request does between two ticks of its Date.)
    let a = small();
    let b = String::from_utf8(small())
        .unwrap()
        .replace("00:00:00", "00:00:01")
        .into_bytes();
    let mut parser = ResponseParser::new(Limits::default(), false);
    let mut g = c.benchmark_group("small_every_head_new");
    g.throughput(Throughput::Elements(2));
    g.bench_function("xload_http", |bch| {
        bch.iter(|| xload(&mut parser, black_box(&a)) + xload(&mut parser, black_box(&b)))
    });
    g.bench_function("httparse", |bch| {
        bch.iter(|| httparse(black_box(&a)) + httparse(black_box(&b)))
    });
    g.finish();

    // The same response arriving in pieces (a head split across receive
    // buffers): the state machine and line path at work. No httparse column:
    // it needs the caller to keep and re-offer the whole head.
    let input = index_612();
    for piece in [64usize, 16] {
        let mut parser = ResponseParser::new(Limits::default(), false);
        let mut g = c.benchmark_group(format!("index_612_in_{piece}_byte_pieces"));
        g.throughput(Throughput::Elements(1));
        g.bench_function("xload_http", |b| {
            b.iter(|| {
                let mut n = 0;
                for p in black_box(&input).chunks(piece) {
                    n += xload(&mut parser, p);
                }
                n
            })
        });
        g.finish();
    }

    // Chunked bodies: httparse's head parser plus its chunk-size parser.
    let chunked = b"HTTP/1.1 200 OK\r\nServer: nginx/1.24.0\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n64\r\n".iter()
        .copied()
        .chain(std::iter::repeat_n(b'y', 100))
        .chain(*b"\r\n0\r\n\r\n")
        .collect::<Vec<u8>>();
    let mut parser = ResponseParser::new(Limits::default(), false);
    let mut g = c.benchmark_group("chunked_100");
    g.throughput(Throughput::Elements(1));
    g.bench_function("xload_http", |b| {
        b.iter(|| xload(&mut parser, black_box(&chunked)))
    });
    g.bench_function("httparse", |b| {
        b.iter(|| {
            let input: &[u8] = black_box(&chunked);
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut resp = httparse::Response::new(&mut headers);
            let Ok(httparse::Status::Complete(mut at)) = resp.parse(input) else {
                return 0;
            };
            let chunked = resp.headers.iter().any(|h| {
                h.name.eq_ignore_ascii_case("transfer-encoding")
                    && h.value.eq_ignore_ascii_case(b"chunked")
            });
            if !chunked {
                return 0;
            }
            let mut body = 0u64;
            loop {
                let Ok(httparse::Status::Complete((len, size))) =
                    httparse::parse_chunk_size(&input[at..])
                else {
                    return 0;
                };
                at += len;
                if size == 0 {
                    return body; // no trailers in this input: the final CRLF follows
                }
                at += size as usize + 2;
                body += size;
            }
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpu).warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
