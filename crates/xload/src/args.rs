//! Command-line arguments shared by `xload URL` and `xload sweep`, and the
//! small value parsers they use (durations, counts with SI suffixes).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use clap::{Args, ValueEnum};

mod export;
mod hosts;
pub(crate) use export::ExportArgs;
pub(crate) use hosts::{parse_host, HostArgs};

/// Options of one load run (docs/design.md, command-line contract).
#[derive(Debug, Clone, Args)]
pub(crate) struct RunArgs {
    /// Total connections, spread evenly over the workers.
    #[arg(short = 'c', long = "connections", default_value_t = 64, value_parser = parse_count_usize)]
    pub connections: usize,

    /// Open loop: R requests/s in total, sent at intended times (latency corrected for coordinated omission).
    #[arg(long = "rate", value_parser = parse_rate)]
    pub rate: Option<f64>,

    /// Workload sessions instead of -c: N connections, each a session walking the workload's
    /// [session] (sequence or Markov chain) with its think time; a session that ends starts over
    /// on a new connection.
    #[arg(long = "sessions", value_parser = parse_count_usize, conflicts_with_all = ["connections", "rate"])]
    pub sessions: Option<usize>,

    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub hosts: HostArgs,

    #[command(flatten)]
    pub export: ExportArgs,
}

/// Options shared by `xload URL` and `xload sweep` (all but the load level).
#[derive(Debug, Clone, Args)]
pub(crate) struct CommonArgs {
    /// Length of the measured window: 500ms, 10s, 2m (default 10s; 5s per sweep step).
    #[arg(short = 'd', visible_short_alias = 'z', long = "duration", value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Stop after N requests have completed in the measured window: answered or failed (with -d,
    /// whichever comes first). A --warmup runs its full length first and does not count; the
    /// requests it left in flight count when answered. When a connection fails (closed, reset,
    /// timed out) with requests unanswered, the first counts as failed and the rest (pipelined
    /// behind it) are sent again.
    #[arg(short = 'n', long = "requests", value_parser = parse_count_u64)]
    pub requests: Option<u64>,

    /// Number of workers (default: one per allowed CPU).
    #[arg(short = 't', long = "threads", conflicts_with_all = ["pin_all", "cpus"])]
    pub threads: Option<usize>,

    /// One worker per allowed CPU, each pinned to its CPU.
    #[arg(long = "pin-all", conflicts_with = "cpus")]
    pub pin_all: bool,

    /// Use and pin these CPUs, one worker each: 0-3,6.
    #[arg(long = "cpus", value_parser = parse_cpus)]
    pub cpus: Option<CpuList>,

    /// Request method.
    #[arg(short = 'm', long = "method", default_value = "GET")]
    pub method: String,

    /// Extra request header 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,

    /// Request body.
    #[arg(long = "body", conflicts_with = "body_file")]
    pub body: Option<String>,

    /// Request body read from a file.
    #[arg(long = "body-file")]
    pub body_file: Option<std::path::PathBuf>,

    /// Requests in flight per connection (HTTP/1.1 pipelining).
    #[arg(long = "pipeline", default_value_t = 1)]
    pub pipeline: usize,

    /// Speak HTTP/2: h2c with prior knowledge on http://, ALPN h2 on https://
    /// (the run fails if the server does not choose it).
    #[arg(long = "http2", conflicts_with = "alpn")]
    pub http2: bool,

    /// HTTP/2: requests in flight per connection, as streams (h2load's -m; default 1), capped
    /// by the server's SETTINGS_MAX_CONCURRENT_STREAMS.
    #[arg(long = "streams", value_parser = parse_count_usize)]
    pub streams: Option<usize>,

    /// https: the protocols offered in ALPN, the server chooses: h2,http/1.1 (the report says
    /// which it chose; h2 connections carry --streams).
    #[arg(long = "alpn", value_delimiter = ',')]
    pub alpn: Option<Vec<String>>,

    /// A new connection per request (sends Connection: close).
    #[arg(long = "no-keepalive")]
    pub no_keepalive: bool,

    /// Per-request timeout.
    #[arg(long = "timeout", default_value = "5s", value_parser = parse_positive_duration)]
    pub timeout: Duration,

    /// Connect timeout.
    #[arg(long = "connect-timeout", default_value = "3s", value_parser = parse_positive_duration)]
    pub connect_timeout: Duration,

    /// https: TLS handshake timeout, from the TCP connect on (counted as
    /// tls_handshake_timeout).
    #[arg(long = "handshake-timeout", default_value = "3s", value_parser = parse_positive_duration)]
    pub handshake_timeout: Duration,

    /// Bind the connections to these local addresses, in turn: ADDR[,ADDR...] or a range
    /// 127.0.0.2-127.0.0.9. Each address has its own ephemeral ports toward the target (about
    /// 28k with the default net.ipv4.ip_local_port_range), so more connections fit.
    #[arg(long = "source", value_parser = parse_sources)]
    pub source: Option<SourceList>,

    /// Open at most N new connections per second (N or N/s; 0: all at once). The first
    /// 50 ms of them (at most 1024 per worker) open at once; replacements of closed
    /// connections are not paced. Keeps a large -c from overflowing the server's SYN and
    /// accept queues by itself.
    #[arg(long = "connect-rate", default_value = "50k/s", value_parser = parse_connect_rate)]
    pub connect_rate: ConnectRate,

    /// Run this long first, left out of the statistics (default 0s; 1s per sweep step).
    #[arg(long = "warmup", value_parser = parse_duration)]
    pub warmup: Option<Duration>,

    /// Open loop arrival process (needs --rate).
    #[arg(long = "arrival", value_enum, default_value_t = ArrivalArg::Uniform)]
    pub arrival: ArrivalArg,

    /// Seed of --arrival poisson's gaps (default: a new one each run, so that generators
    /// merged with `xload merge` do not send in step); give one to repeat a run's arrivals.
    #[arg(long = "seed", value_parser = clap::value_parser!(u64))]
    pub seed: Option<u64>,

    /// Fail (exit 3) if a condition holds: 'p99>50ms' (any pNN: p95, p99.99), 'errors>0', 'error_rate>0.01',
    /// 'non2xx>0' (answers outside 2xx/3xx), 'non2xx_rate>0.001', 'rps<1e5'; with a workload
    /// 'consistency>0' (failed checks), 'limits_failed>0' (class latency limits) (repeatable).
    #[arg(long = "fail-if")]
    pub fail_if: Vec<String>,

    /// Pass condition, k6 style: the run fails (exit 3) unless it holds: 'p99<50ms',
    /// 'error_rate<0.01', 'rps>=1e5'; the grammar of --fail-if, which names the failing
    /// condition instead (repeatable).
    #[arg(long = "threshold")]
    pub threshold: Vec<String>,

    /// Basic authentication 'user:pass': sends 'Authorization: Basic' with it, encoded once.
    #[arg(short = 'a', long = "auth", value_name = "USER:PASS")]
    pub auth: Option<String>,

    /// Connect to this Unix socket instead of the URL's host (which still gives Host and path).
    #[arg(long = "unix-socket", value_name = "PATH")]
    pub unix_socket: Option<std::path::PathBuf>,

    /// I/O engine: xdp is a user-space TCP stack over AF_XDP (needs --dev and --src-ip; docs/engine.md).
    #[arg(long = "engine", value_enum, default_value_t = EngineArg::Auto)]
    pub engine: EngineArg,

    /// --engine xdp: the interface toward the server; its AF_XDP socket (queue 0) carries the connections.
    #[arg(long = "dev")]
    pub dev: Option<String>,

    /// --engine xdp: the IPv4 address the user-space stack owns on --dev, one no host on its
    /// subnet uses (it answers ARP for it; `xload lab` prints one as ip_user).
    #[arg(long = "src-ip")]
    pub src_ip: Option<Ipv4Addr>,

    /// Print the full latency percentile table (a single run or a merge;
    /// a sweep prints p50/p95/p99 per step).
    #[arg(long = "latency")]
    pub latency: bool,

    /// Write the JSON report to PATH ('-' = stdout).
    #[arg(long = "json")]
    pub json: Option<String>,

    /// Write a per-second time series (rps, p50, p99, errors) as CSV.
    #[arg(long = "csv")]
    pub csv: Option<std::path::PathBuf>,

    /// No live progress line.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,

    /// Workload file (TOML; docs/workload.md): request classes, checks, limits. A URL given
    /// overrides the workload's `url`.
    #[arg(short = 'w', long = "workload")]
    pub workload: Option<std::path::PathBuf>,

    /// Workload runs without --sessions: each connection keeps a cookie jar
    /// (sessions have one unless their [session] says `cookies = false`).
    #[arg(long = "cookies", requires = "workload")]
    pub cookies: bool,

    /// Write the per-class summary of a workload run as CSV ('-' = stdout).
    #[arg(long = "class-csv")]
    pub class_csv: Option<std::path::PathBuf>,

    #[command(flatten)]
    pub tls: Box<TlsArgs>,
}

/// https:// (and `--resolve`, which plain http uses too).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct TlsArgs {
    /// https: do not verify the server's certificate (self-signed test servers).
    #[arg(long = "insecure")]
    pub insecure: bool,

    /// https: trust the CA certificates of this PEM file instead of the system's.
    #[arg(long = "cacert", conflicts_with = "insecure")]
    pub cacert: Option<std::path::PathBuf>,

    /// https: present this client certificate chain (PEM; with --key).
    #[arg(long = "cert", requires = "key")]
    pub cert: Option<std::path::PathBuf>,

    /// https: the client certificate's private key (PEM; with --cert).
    #[arg(long = "key", requires = "cert")]
    pub key: Option<std::path::PathBuf>,

    /// https: speak only this TLS version (default: 1.2 and 1.3).
    #[arg(long = "tls-version", value_enum)]
    pub tls_version: Option<TlsVersionArg>,

    /// https: resume sessions (tickets / PSK) on new connections instead of full handshakes.
    #[arg(long = "tls-resume")]
    pub tls_resume: bool,

    /// Connect to ADDR for HOST:PORT, as curl's --resolve: the URL (Host header, SNI,
    /// certificate name) is unchanged (repeatable).
    #[arg(long = "resolve", value_parser = parse_resolve)]
    pub resolve: Vec<Resolve>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum TlsVersionArg {
    #[value(name = "1.2")]
    V12,
    #[value(name = "1.3")]
    V13,
}

/// `--resolve HOST:PORT:ADDR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolve {
    pub host: String,
    pub port: u16,
    pub addr: IpAddr,
}

/// Parses `HOST:PORT:ADDR`; ADDR may be an IPv6 literal, bracketed or not.
pub(crate) fn parse_resolve(s: &str) -> Result<Resolve, String> {
    let bad = || format!("{s:?} is not HOST:PORT:ADDR (e.g. example.com:443:127.0.0.1)");
    let mut parts = s.splitn(3, ':');
    let (Some(host), Some(port), Some(addr)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    let port: u16 = port.parse().ok().filter(|p| *p > 0).ok_or_else(bad)?;
    let addr = addr.trim_start_matches('[').trim_end_matches(']');
    let addr: IpAddr = addr.parse().map_err(|_| bad())?;
    if host.is_empty() {
        return Err(bad());
    }
    Ok(Resolve {
        host: host.to_string(),
        port,
        addr,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ArrivalArg {
    Uniform,
    Poisson,
}

impl CommonArgs {
    /// `--json -`: the JSON report goes to stdout.
    pub(crate) fn json_to_stdout(&self) -> bool {
        self.json.as_deref() == Some("-")
    }

    /// `--csv -`: the CSV goes to stdout.
    pub(crate) fn csv_to_stdout(&self) -> bool {
        self.csv.as_deref().and_then(|p| p.to_str()) == Some("-")
    }

    /// A document (JSON or CSV) takes stdout; the text report goes to stderr.
    pub(crate) fn document_to_stdout(&self) -> bool {
        self.json_to_stdout() || self.csv_to_stdout()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum EngineArg {
    Auto,
    Uring,
    Epoll,
    Xdp,
}

/// Parses a duration: `500ms`, `10s`, `2m`, `1h`, `250us`, `1.5s`; a bare
/// number is seconds.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    xload_sys::duration::parse_duration_or_seconds(s)
        .map_err(|e| format!("invalid duration: {e} (e.g. 500ms, 10s, 2m)"))
}

/// A duration above zero (a zero timeout would time out every request, a
/// zero step measure nothing).
pub(crate) fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(format!("{s:?} must be above zero"));
    }
    Ok(d)
}

/// Parses a count with an optional SI suffix or exponent: 1000, 10k, 2M, 1e5.
pub(crate) fn parse_count_f64(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, mul) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1e3),
        Some((i, 'M')) => (&t[..i], 1e6),
        Some((i, 'G')) => (&t[..i], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| format!("invalid number {s:?}"))?;
    let v = v * mul;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("invalid number {s:?}"));
    }
    Ok(v)
}

fn parse_count_u64(s: &str) -> Result<u64, String> {
    let v = parse_count_f64(s)?;
    if v.fract() != 0.0 || v < 1.0 || v > u64::MAX as f64 {
        return Err(format!("{s:?} is not a positive whole number"));
    }
    Ok(v as u64)
}

pub(crate) fn parse_count_usize(s: &str) -> Result<usize, String> {
    let v = parse_count_u64(s)?;
    if v > 10_000_000 {
        return Err(format!("{s:?} is too large"));
    }
    Ok(v as usize)
}

/// The highest `--rate`: one intended send per nanosecond.
pub(crate) const MAX_RATE: f64 = 1e9;

pub(crate) fn parse_rate(s: &str) -> Result<f64, String> {
    let v = parse_count_f64(s)?;
    if v <= 0.0 {
        return Err(format!("rate {s:?} must be above zero"));
    }
    if v > MAX_RATE {
        return Err(format!(
            "rate {s:?} is beyond what any host sends (at most 1G req/s: one request per nanosecond)"
        ));
    }
    Ok(v)
}

/// Local addresses given with `--source`, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourceList(pub Vec<IpAddr>);

/// At most this many `--source` addresses.
pub(crate) const MAX_SOURCES: usize = 65536;

/// Parses `ADDR[,ADDR...]`, where each item may be a range `FIRST-LAST`
/// (both of one family, FIRST ≤ LAST).
pub(crate) fn parse_sources(s: &str) -> Result<SourceList, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim) {
        let ip = |t: &str| {
            t.trim().parse::<IpAddr>().map_err(|_| {
                format!("{t:?} is not an IP address (e.g. 127.0.0.2 or 127.0.0.2-127.0.0.9)")
            })
        };
        let (first, last) = match item.split_once('-') {
            Some((a, b)) => (ip(a)?, ip(b)?),
            None => (ip(item)?, ip(item)?),
        };
        let (lo, hi) = match (first, last) {
            (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(u32::from(a)), u128::from(u32::from(b))),
            (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b)),
            _ => {
                return Err(format!(
                    "{item:?}: both ends of a range must be IPv4 or both IPv6"
                ))
            }
        };
        if lo > hi {
            return Err(format!("{item:?}: the range ends before it starts"));
        }
        if hi - lo >= (MAX_SOURCES - out.len().min(MAX_SOURCES)) as u128 {
            return Err(format!("--source: more than {MAX_SOURCES} addresses"));
        }
        for v in lo..=hi {
            out.push(match first {
                IpAddr::V4(_) => IpAddr::V4((v as u32).into()),
                IpAddr::V6(_) => IpAddr::V6(v.into()),
            });
        }
    }
    Ok(SourceList(out))
}

/// `--connect-rate`: new connections per second (None: no pacing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ConnectRate(pub Option<f64>);

pub(crate) fn parse_connect_rate(s: &str) -> Result<ConnectRate, String> {
    let t = s.trim();
    let t = t.strip_suffix("/s").unwrap_or(t);
    let v = parse_count_f64(t).map_err(|e| format!("{e} (e.g. 20k/s, or 0 for all at once)"))?;
    if v > MAX_RATE {
        return Err(format!("connect rate {s:?} is out of range"));
    }
    Ok(ConnectRate((v > 0.0).then_some(v)))
}

/// A CPU list as one argument value (`0-3,6`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CpuList(pub Vec<usize>);

pub(crate) fn parse_cpus(s: &str) -> Result<CpuList, String> {
    xload_sys::cpu::parse_cpu_list(s)
        .map(CpuList)
        .map_err(|e| format!("{s:?} is not a CPU list: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_is_host_port_addr() {
        let r = parse_resolve("example.com:443:127.0.0.1").unwrap();
        assert_eq!((r.host.as_str(), r.port), ("example.com", 443));
        assert_eq!(r.addr, IpAddr::from([127, 0, 0, 1]));
        assert_eq!(parse_resolve("h:80:[::1]").unwrap().addr.to_string(), "::1");
        assert_eq!(parse_resolve("h:80:::1").unwrap().addr.to_string(), "::1");
        for bad in [
            "h:80",
            "h:0:127.0.0.1",
            ":80:127.0.0.1",
            "h:80:nowhere",
            "h:x:1.2.3.4",
        ] {
            assert!(parse_resolve(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn counts_accept_si_and_exponents() {
        assert_eq!(parse_count_f64("10k").unwrap(), 10_000.0);
        assert_eq!(parse_count_f64("1e5").unwrap(), 100_000.0);
        assert_eq!(parse_count_f64("2M").unwrap(), 2_000_000.0);
        assert!(parse_count_u64("1.5").is_err());
        assert!(parse_count_u64("0").is_err());
        assert!(parse_count_f64("x").is_err());
    }

    #[test]
    fn sources_take_lists_and_ranges() {
        let ips = |s: &str| parse_sources(s).map(|l| l.0);
        let v4 = |d: u8| IpAddr::from([127, 0, 0, d]);
        assert_eq!(ips("127.0.0.2").unwrap(), [v4(2)]);
        assert_eq!(
            ips("127.0.0.2-127.0.0.4, 127.0.0.9").unwrap(),
            [v4(2), v4(3), v4(4), v4(9)]
        );
        assert_eq!(
            ips("127.0.0.255-127.0.1.0").unwrap(),
            [v4(255), IpAddr::from([127, 0, 1, 0])]
        );
        assert_eq!(ips("::1").unwrap(), ["::1".parse::<IpAddr>().unwrap()]);
        assert!(ips("127.0.0.9-127.0.0.2")
            .unwrap_err()
            .contains("ends before"));
        assert!(ips("127.0.0.1-::1").unwrap_err().contains("both ends"));
        assert!(ips("localhost").unwrap_err().contains("not an IP address"));
        assert!(ips("10.0.0.0-10.255.255.255")
            .unwrap_err()
            .contains("more than 65536"));
    }

    #[test]
    fn connect_rate_takes_per_second_and_zero() {
        assert_eq!(
            parse_connect_rate("50k/s").unwrap(),
            ConnectRate(Some(50_000.0))
        );
        assert_eq!(parse_connect_rate("200").unwrap(), ConnectRate(Some(200.0)));
        assert_eq!(parse_connect_rate("0").unwrap(), ConnectRate(None));
        assert!(parse_connect_rate("fast").is_err());
    }
}
