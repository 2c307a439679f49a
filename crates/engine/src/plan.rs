//! The checked description of a run that the workers execute.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Which driver the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineChoice {
    /// io_uring when the kernel and sandbox allow it, else epoll.
    Auto,
    /// io_uring or fail.
    Uring,
    /// epoll.
    Epoll,
    /// The user-space TCP stack over AF_XDP ([`Plan::xdp`] says where).
    Xdp,
}

/// Which driver ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineKind {
    Uring,
    Epoll,
    Xdp,
}

impl EngineKind {
    /// The name used in reports: `io_uring` or `epoll`.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Uring => "io_uring",
            EngineKind::Epoll => "epoll",
            EngineKind::Xdp => "xdp",
        }
    }
}

/// How intended send times are spaced in open loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Evenly spaced: one request every 1/rate seconds per worker.
    Uniform,
    /// Exponentially distributed gaps with mean 1/rate (a Poisson process).
    Poisson,
}

/// Open-loop pacing: requests leave at intended times whatever the server does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpenLoop {
    /// Total rate over all workers, requests per second.
    pub rate_per_s: f64,
    pub arrival: Arrival,
    /// Seed of the Poisson gaps (each worker mixes in its index).
    pub seed: u64,
    /// Intended sends that may wait for a free connection: each worker holds at
    /// most one second of its own sends and never more than this; beyond it they
    /// are dropped and counted (the queue never grows without bound).
    pub queue_cap: usize,
}

/// `--engine xdp`: the interface whose AF_XDP socket carries the
/// connections, and the IPv4 address the user-space stack owns there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpTarget {
    pub dev: String,
    pub src_ip: Ipv4Addr,
    /// Test only: every Nth frame each way is dropped, and every Nth is
    /// held back behind the next ones (0: none).
    pub drop_every: u32,
    pub hold_every: u32,
}

/// https: how connections speak TLS.
#[derive(Clone, Debug)]
pub struct TlsClient {
    /// Versions, roots (or no verification), ALPN, session cache.
    pub config: Arc<rustls::ClientConfig>,
    /// The name sent as SNI and checked against the certificate.
    pub server_name: rustls::pki_types::ServerName<'static>,
}

/// Everything a run needs, resolved and validated once by the caller.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The target, resolved once.
    pub addr: SocketAddr,
    /// One request, rendered to bytes.
    pub request: Vec<u8>,
    /// Responses carry no body (the request is HEAD).
    pub head: bool,
    /// Requests in flight per connection (1 = no pipelining).
    pub pipeline: usize,
    /// Total connections, spread evenly over the workers.
    pub connections: usize,
    /// One entry per worker: the CPU it is pinned to, or None for unpinned.
    pub worker_cpus: Vec<Option<usize>>,
    /// Measured window (after warm-up). None with `requests` set means "until done".
    pub duration: Option<Duration>,
    /// Run but leave out of the statistics.
    pub warmup: Duration,
    /// Stop after this many responses in total (spread over workers).
    pub requests: Option<u64>,
    /// Per-request timeout.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// https: how long a TLS handshake may take once TCP is connected.
    pub handshake_timeout: Duration,
    pub engine: EngineChoice,
    pub open_loop: Option<OpenLoop>,
    /// Period of progress ticks (time series rows).
    pub tick: Duration,
    /// Local addresses the connections are bound to, in turn (empty: the
    /// kernel picks). Each gives its own ephemeral ports toward the target.
    pub sources: Vec<IpAddr>,
    /// New connections per second over all workers while they first open
    /// (None: all at once). Replacements of closed connections are not paced.
    pub connect_rate_per_s: Option<f64>,
    /// Open the measured window at this CLOCK_MONOTONIC instant (ns) rather
    /// than `warmup` after the start; the time before it is the warm-up.
    /// Without a warm-up, connections open and wait: nothing is sent
    /// before the window.
    pub start_at_ns: Option<u64>,
    /// A workload (`-w`): each send carries the next request of the
    /// worker's schedule instead of `request`; one request in flight per
    /// connection (`pipeline` 1).
    pub workload: Option<crate::mix::Workload>,
    /// https: each connection handshakes before its first request.
    pub tls: Option<TlsClient>,
    /// `--engine xdp`: where its stack runs.
    pub xdp: Option<XdpTarget>,
    /// `--unix-socket`: connect to this Unix socket instead of `addr` (the
    /// request still names the URL's host and path).
    pub unix: Option<std::path::PathBuf>,
    /// HTTP/2 (`--http2`, or `--alpn` when the server picks h2): each
    /// connection speaks h2 and carries up to `streams` requests at once.
    pub h2: Option<H2Plan>,
}

/// How connections speak HTTP/2.
#[derive(Clone, Debug)]
pub struct H2Plan {
    /// Streams a connection may carry at once (`--streams`), further capped
    /// by the server's SETTINGS_MAX_CONCURRENT_STREAMS.
    pub streams: u32,
    /// The run's request, rendered once as an HPACK header block and body.
    pub request: Arc<[xload_http::h2::H2Request]>,
    /// https with `--alpn`: h2 only on connections where the server chose
    /// it (the others speak HTTP/1.1); without, every connection speaks h2.
    pub alpn_optional: bool,
}

impl Plan {
    /// Connections of worker `w`.
    pub fn connections_of(&self, w: usize) -> usize {
        let n = self.worker_cpus.len().max(1);
        self.connections / n + usize::from(w < self.connections % n)
    }

    /// Response quota of worker `w` when `requests` is set.
    pub fn quota_of(&self, w: usize) -> Option<u64> {
        let n = self.worker_cpus.len().max(1) as u64;
        self.requests.map(|r| r / n + u64::from((w as u64) < r % n))
    }

    /// Open-loop rate of one worker, requests per second: shared in proportion to
    /// its connections so that a worker with no connections gets no schedule.
    pub fn rate_of(&self, w: usize) -> Option<f64> {
        self.open_loop
            .map(|o| o.rate_per_s * self.connections_of(w) as f64 / self.connections.max(1) as f64)
    }

    /// The source address of connection `i` of worker `w`, if any: the
    /// workers' connections interleave over the list, so each address gets
    /// an equal share of the whole run's connections.
    pub fn source_of(&self, w: usize, i: usize) -> Option<IpAddr> {
        let n = self.worker_cpus.len().max(1);
        let k = self.sources.len();
        (k > 0).then(|| self.sources[(i * n + w) % k])
    }

    /// The connect rate of worker `w`, per second: its share of the total.
    pub fn connect_rate_of(&self, w: usize) -> Option<f64> {
        self.connect_rate_per_s
            .map(|r| r * self.connections_of(w) as f64 / self.connections.max(1) as f64)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn plan(workers: usize, conns: usize, reqs: Option<u64>) -> Plan {
        Plan {
            addr: "127.0.0.1:1".parse().unwrap(),
            request: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            head: false,
            pipeline: 1,
            connections: conns,
            worker_cpus: vec![None; workers],
            duration: None,
            warmup: Duration::ZERO,
            requests: reqs,
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            handshake_timeout: Duration::from_secs(1),
            engine: EngineChoice::Auto,
            open_loop: Some(OpenLoop {
                rate_per_s: 1000.0,
                arrival: Arrival::Uniform,
                seed: 1,
                queue_cap: 10,
            }),
            tick: Duration::from_secs(1),
            sources: Vec::new(),
            connect_rate_per_s: Some(1000.0),
            start_at_ns: None,
            workload: None,
            tls: None,
            xdp: None,
            unix: None,
            h2: None,
        }
    }

    #[test]
    fn connections_and_quota_split_exactly() {
        let p = plan(3, 10, Some(100));
        let c: Vec<_> = (0..3).map(|w| p.connections_of(w)).collect();
        assert_eq!(c, vec![4, 3, 3]);
        let q: u64 = (0..3).map(|w| p.quota_of(w).unwrap()).sum();
        assert_eq!(q, 100);
        let r: f64 = (0..3).map(|w| p.rate_of(w).unwrap()).sum();
        assert!((r - 1000.0).abs() < 1e-9);
        let r: f64 = (0..3).map(|w| p.connect_rate_of(w).unwrap()).sum();
        assert!((r - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn sources_are_shared_evenly_over_all_connections() {
        let mut p = plan(2, 8, None);
        assert_eq!(p.source_of(0, 0), None);
        p.sources = (1..=4).map(|d| IpAddr::from([127, 0, 0, d])).collect();
        let mut count = [0; 4];
        for w in 0..2 {
            for i in 0..p.connections_of(w) {
                let ip = p.source_of(w, i).unwrap();
                count[p.sources.iter().position(|&s| s == ip).unwrap()] += 1;
            }
        }
        assert_eq!(count, [2, 2, 2, 2]);
    }
}
