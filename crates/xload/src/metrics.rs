//! `--metrics-listen ADDR`: a Prometheus / OpenMetrics text endpoint
//! (`GET /metrics`) served by one small thread while the run lasts. It
//! reads what the workers already publish once per tick for the time
//! series (the progress aggregator adds each worker's interval to the
//! board under a lock, once per tick): nothing is added to a request's path.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use xload_stats::{ErrorKind, Interval};

/// Upper bounds of the latency buckets, µs (then +Inf).
const BUCKETS_US: &[u64] = &[
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// One worker's running totals.
#[derive(Clone, Default)]
struct Totals {
    responses: u64,
    errors: u64,
    /// By kind (`ErrorKind as usize`).
    by_kind: [u64; ErrorKind::COUNT],
    bytes: u64,
    /// Per bucket of BUCKETS_US, then +Inf (not cumulative).
    buckets: Vec<u64>,
    sum_us: u64,
    /// Requests in flight at the last tick (a gauge: replaced, and summed
    /// over workers).
    in_flight: u64,
}

impl Totals {
    fn add(&mut self, iv: &Interval, in_flight: u64) {
        self.in_flight = in_flight;
        self.responses += iv.requests;
        self.errors += iv.errors;
        for (a, b) in self.by_kind.iter_mut().zip(iv.errors_by_kind) {
            *a += b;
        }
        self.bytes += iv.bytes;
        self.buckets.resize(BUCKETS_US.len() + 1, 0);
        for v in iv.latency.iter_recorded() {
            let value = v.value_iterated_to();
            let n = v.count_at_value();
            let i = BUCKETS_US.partition_point(|&b| b < value);
            self.buckets[i] += n;
            self.sum_us += value * n;
        }
    }

    fn merge(&mut self, o: &Totals) {
        self.in_flight += o.in_flight;
        self.responses += o.responses;
        self.errors += o.errors;
        for (a, b) in self.by_kind.iter_mut().zip(o.by_kind) {
            *a += b;
        }
        self.bytes += o.bytes;
        self.buckets.resize(BUCKETS_US.len() + 1, 0);
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.sum_us += o.sum_us;
    }
}

/// What the endpoint shows: each worker's totals, and whether the run's
/// report is written (its values are final).
#[derive(Default)]
pub(crate) struct Board {
    state: Mutex<(Vec<Totals>, bool)>,
    /// A scrape has read the final values.
    final_read: AtomicBool,
}

impl Board {
    /// Adds worker `worker`'s interval and its requests in flight (once per tick).
    pub(crate) fn add(&self, worker: usize, iv: &Interval, in_flight: u64) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.0.len() <= worker {
            s.0.resize(worker + 1, Totals::default());
        }
        s.0[worker].add(iv, in_flight);
    }

    /// The report is written: the values are final.
    pub(crate) fn set_final(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
    }

    /// The text exposition (Prometheus 0.0.4 format).
    pub(crate) fn render(&self) -> String {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.1 {
            self.final_read.store(true, Ordering::SeqCst);
        }
        let mut total = Totals::default();
        let mut rows: Vec<(String, &Totals)> = Vec::new();
        for (i, t) in s.0.iter().enumerate() {
            total.merge(t);
            rows.push((format!("worker=\"{i}\""), t));
        }
        rows.push(("worker=\"all\"".into(), &total));
        let mut out = String::new();
        let counter = |out: &mut String, name: &str, help: &str, f: &dyn Fn(&Totals) -> u64| {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} counter\n"));
            for (l, t) in &rows {
                out.push_str(&format!("{name}_total{{{l}}} {}\n", f(t)));
            }
        };
        counter(
            &mut out,
            "xload_responses",
            "Responses completed in the measured window.",
            &|t| t.responses,
        );
        counter(
            &mut out,
            "xload_errors",
            "Failed requests and connection attempts in the measured window.",
            &|t| t.errors,
        );
        out.push_str("# HELP xload_errors_by_category Errors by category (the report's `errors` keys).\n# TYPE xload_errors_by_category counter\n");
        for (l, t) in &rows {
            for k in ErrorKind::ALL {
                out.push_str(&format!(
                    "xload_errors_by_category_total{{{l},category=\"{}\"}} {}\n",
                    k.name(),
                    t.by_kind[k as usize]
                ));
            }
        }
        counter(
            &mut out,
            "xload_response_bytes",
            "Response bytes received (status line, headers, body).",
            &|t| t.bytes,
        );
        out.push_str("# HELP xload_in_flight Requests sent and not yet answered, at the last tick.\n# TYPE xload_in_flight gauge\n");
        for (l, t) in &rows {
            out.push_str(&format!("xload_in_flight{{{l}}} {}\n", t.in_flight));
        }
        let name = "xload_latency_seconds";
        out.push_str(&format!(
            "# HELP {name} Response latency (from the intended send in open loop).\n# TYPE {name} histogram\n"
        ));
        for (l, t) in &rows {
            let mut cum = 0;
            for (i, n) in t.buckets.iter().enumerate() {
                cum += n;
                let le = BUCKETS_US
                    .get(i)
                    .map_or("+Inf".to_string(), |b| format!("{}", *b as f64 / 1e6));
                out.push_str(&format!("{name}_bucket{{{l},le=\"{le}\"}} {cum}\n"));
            }
            if t.buckets.is_empty() {
                out.push_str(&format!("{name}_bucket{{{l},le=\"+Inf\"}} 0\n"));
            }
            out.push_str(&format!("{name}_sum{{{l}}} {}\n", t.sum_us as f64 / 1e6));
            out.push_str(&format!("{name}_count{{{l}}} {cum}\n"));
        }
        out.push_str(&format!(
            "# HELP xload_final Whether the run's report is written (the values are final).\n# TYPE xload_final gauge\nxload_final {}\n",
            u8::from(s.1)
        ));
        out
    }
}

/// What an endpoint answers GET /metrics with.
pub(crate) type Page = Arc<dyn Fn() -> String + Send + Sync>;

/// The endpoint's thread, until [`Endpoint::close`] or [`Endpoint::stop`].
pub(crate) struct Endpoint {
    pub board: Arc<Board>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Endpoint {
    /// Binds `addr` (before the run: a taken port is a usage error) and
    /// starts serving.
    pub(crate) fn start(addr: SocketAddr) -> Result<Endpoint, String> {
        let board = Arc::new(Board::default());
        let b = Arc::clone(&board);
        Endpoint::serving(addr, board, Arc::new(move || b.render()))
    }

    /// Binds `addr` and answers with `page` (`board` unused but by `close`).
    pub(crate) fn serving(
        addr: SocketAddr,
        board: Arc<Board>,
        page: Page,
    ) -> Result<Endpoint, String> {
        let listener =
            TcpListener::bind(addr).map_err(|e| format!("--metrics-listen {addr}: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("--metrics-listen {addr}: {e}"))?;
        let bound = listener.local_addr().unwrap_or(addr);
        eprintln!("xload: metrics on http://{bound}/metrics");
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("xload-metrics".into())
            .spawn(move || accept_loop(&listener, &*page, &s))
            .map_err(|e| format!("--metrics-listen: cannot start its thread: {e}"))?;
        Ok(Endpoint {
            board,
            stop,
            handle: Some(handle),
        })
    }

    /// The report is written: serves the final values until a scrape has
    /// read them, `linger` has passed or `interrupt` is set, then stops.
    pub(crate) fn close(mut self, linger: Duration, interrupt: &AtomicBool) {
        self.board.set_final();
        let until = Instant::now() + linger;
        while Instant::now() < until
            && !self.board.final_read.load(Ordering::SeqCst)
            && !interrupt.load(Ordering::Relaxed)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop();
    }

    /// Stops serving now.
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn accept_loop(
    listener: &TcpListener,
    page: &(dyn Fn() -> String + Send + Sync),
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((conn, _)) => {
                let _ = answer(conn, page);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Reads one request head (up to 8 KiB, 2 s) and answers it, then closes.
fn answer(mut conn: TcpStream, page: &(dyn Fn() -> String + Send + Sync)) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = vec![0u8; 8192];
    let mut len = 0;
    while len < buf.len() && !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf[len..])?;
        if n == 0 {
            break;
        }
        len += n;
    }
    let head = String::from_utf8_lossy(&buf[..len]);
    let path = head.split_whitespace().nth(1).unwrap_or("");
    let get = head.starts_with("GET ");
    let (status, body) = if get && (path == "/metrics" || path.starts_with("/metrics?")) {
        ("200 OK", page())
    } else {
        ("404 Not Found", "GET /metrics\n".to_string())
    };
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// `xload serve --metrics-listen`: the responder's counters, per worker
/// and all, read from the atomics each worker already keeps on its own
/// cache line (the ones `/stats` reads).
pub(crate) fn serve_page(stats: Arc<xload_engine::serve::ServeStats>) -> Page {
    use xload_engine::serve::WorkerCounters;
    type Get = fn(&WorkerCounters) -> &std::sync::atomic::AtomicU64;
    const METRICS: &[(&str, &str, &str, Get)] = &[
        (
            "xload_serve_requests_total",
            "counter",
            "Requests answered (404s included).",
            |w| &w.requests,
        ),
        (
            "xload_serve_connections_total",
            "counter",
            "Connections accepted.",
            |w| &w.connections,
        ),
        (
            "xload_serve_bad_requests_total",
            "counter",
            "Requests answered 400 and closed.",
            |w| &w.bad_requests,
        ),
        (
            "xload_serve_not_found_total",
            "counter",
            "--files: requests answered 404.",
            |w| &w.not_found,
        ),
        (
            "xload_serve_abandoned_total",
            "counter",
            "Held answers whose client closed first.",
            |w| &w.abandoned,
        ),
        (
            "xload_serve_idle_closed_total",
            "counter",
            "Connections closed by --idle-timeout.",
            |w| &w.idle_closed,
        ),
        (
            "xload_serve_header_timeouts_total",
            "counter",
            "Connections closed by --header-timeout.",
            |w| &w.header_timeouts,
        ),
        (
            "xload_serve_send_timeouts_total",
            "counter",
            "Connections closed by --send-timeout.",
            |w| &w.send_timeouts,
        ),
        (
            "xload_serve_in_flight",
            "gauge",
            "Answers held by --delay/--pool now.",
            |w| &w.in_flight,
        ),
    ];
    Arc::new(move || {
        let mut out = String::new();
        for (name, kind, help, get) in METRICS {
            let family = name.strip_suffix("_total").unwrap_or(name);
            out.push_str(&format!("# HELP {family} {help}\n# TYPE {family} {kind}\n"));
            let mut all = 0;
            for (i, w) in stats.workers.iter().enumerate() {
                let v = get(w).load(Ordering::Relaxed);
                all += v;
                out.push_str(&format!("{name}{{worker=\"{i}\"}} {v}\n"));
            }
            out.push_str(&format!("{name}{{worker=\"all\"}} {all}\n"));
        }
        out
    })
}
