//! The prepared run (ripgrep's `hiargs`): command-line arguments resolved
//! into a checked [`Prepared`] plan that `run::execute` can carry out any
//! number of times. Nothing here touches the network but name resolution
//! and, in [`check_reachable`], one connect to the target.

use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use xload_engine::{Arrival, EngineChoice, OpenLoop, Plan, XdpTarget};
use xload_http::h2::H2Request;
use xload_http::{parse_header_arg, parse_url, RequestSpec, RequestTemplate, Url};
use xload_stats::gate::Gate;

use crate::args::{ArrivalArg, CommonArgs, EngineArg};
use crate::gate::parse_gates;
use crate::Failure;

/// A run resolved from its arguments, ready to execute (possibly many times, as
/// sweep steps do).
pub(crate) struct Prepared {
    pub target: String,
    /// Every address of the target host, in the order they are tried.
    pub addrs: Vec<SocketAddr>,
    /// Every request closes its connection (--no-keepalive or Connection: close).
    pub closes: bool,
    pub plan: Plan,
    pub gates: Vec<Gate>,
    /// `--start-at`: the wall-clock instant the measured window opens at.
    pub start_at: Option<xload_stats::walltime::UnixMicros>,
    /// Workload runs: each class's latency limits, in class order.
    pub class_limits: Vec<Vec<xload_stats::ClassLimit>>,
}

/// Default measured window when neither -d nor -n is given.
const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// Checks the arguments and resolves the target; nothing touches the network
/// except name resolution.
pub(crate) fn prepare(
    url: &str,
    a: &CommonArgs,
    connections: usize,
    rate: Option<f64>,
) -> Result<Prepared, Failure> {
    prepare_with(url, a, connections, rate, DEFAULT_DURATION, Duration::ZERO)
}

/// A seed for Poisson arrivals that differs from run to run and host to host.
fn fresh_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ (u64::from(std::process::id()) << 32) ^ 0x2545_f491_4f6c_dd1d
}

/// As [`prepare`], with the defaults of the caller for -d and --warmup.
pub(crate) fn prepare_with(
    url: &str,
    a: &CommonArgs,
    connections: usize,
    rate: Option<f64>,
    default_duration: Duration,
    default_warmup: Duration,
) -> Result<Prepared, Failure> {
    if rate.is_none() && (a.arrival == ArrivalArg::Poisson || a.seed.is_some()) {
        return Err(Failure::Usage(
            "--arrival and --seed shape an open loop's sends: they need --rate (a closed loop sends when an answer comes back)".into(),
        ));
    }
    let url = parse_url(url).map_err(|e| Failure::Usage(format!("invalid URL {url:?}: {e}")))?;
    let mut addrs = match &a.unix_socket {
        Some(path) => unix_target(a, &url, path)?,
        None => resolve(&url, &a.tls.resolve)?,
    };
    let alpn = alpn_of(a, url.tls)?;
    let tls = (url.tls)
        .then(|| crate::tls::client(&a.tls, &url.host, connections, &alpn))
        .transpose()?;
    let sources = a.source.as_ref().map_or_else(Vec::new, |s| s.0.clone());
    check_sources(&sources, &mut addrs, &url.host)?;
    let headers = request_headers(a)?;
    let body = match (&a.body, &a.body_file) {
        (Some(b), _) => b.clone().into_bytes(),
        (None, Some(p)) => {
            xload_sys::input::read(p, "a request body", xload_sys::input::BODY_LIMIT)
                .map_err(|e| Failure::Usage(format!("--body-file {}: {e}", p.display())))?
        }
        (None, None) => Vec::new(),
    };
    let spec = RequestSpec {
        method: &a.method,
        url: &url,
        headers: &headers,
        body: &body,
    };
    let mut tpl =
        RequestTemplate::new(&spec).map_err(|e| Failure::Usage(format!("request: {e}")))?;
    if a.no_keepalive && !tpl.closes() {
        tpl = tpl
            .with_connection_close()
            .map_err(|e| Failure::Usage(format!("request: {e}")))?;
    }
    check_pipeline(a.pipeline, rate, tpl.closes())?;
    let workload = crate::workload::resolve(a, &url)?;
    let h2 = h2_plan(a, &alpn, &spec, tpl.closes(), workload.as_ref())?;
    if connections == 0 {
        return Err(Failure::Usage("-c must be at least 1".into()));
    }
    let worker_cpus = workers(a)?;
    let mut worker_cpus: Vec<Option<usize>> = worker_cpus.into_iter().take(connections).collect();
    let xdp = xdp_target(a, url.tls, &mut addrs, &mut worker_cpus)?;
    let duration = match (a.duration, a.requests) {
        (Some(d), _) => Some(d),
        (None, Some(_)) => None,
        (None, None) => Some(default_duration),
    };
    if duration == Some(Duration::ZERO) {
        return Err(Failure::Usage("-d must be above zero".into()));
    }
    let gates = parse_gates(a)?;
    let plan = Plan {
        addr: addrs[0],
        request: tpl.bytes().to_vec(),
        head: tpl.is_head(),
        pipeline: a.pipeline,
        connections,
        worker_cpus,
        duration,
        warmup: a.warmup.unwrap_or(default_warmup),
        requests: a.requests,
        timeout: a.timeout,
        connect_timeout: a.connect_timeout,
        handshake_timeout: a.handshake_timeout,
        engine: engine_choice(a.engine),
        open_loop: rate.map(|r| OpenLoop {
            rate_per_s: r,
            arrival: match a.arrival {
                ArrivalArg::Uniform => Arrival::Uniform,
                ArrivalArg::Poisson => Arrival::Poisson,
            },
            seed: a.seed.unwrap_or_else(fresh_seed),
            // One second of sends per worker may wait for a connection; beyond that they are dropped.
            queue_cap: (r as usize).clamp(1, 1_000_000),
        }),
        tick: Duration::from_secs(1),
        sources,
        connect_rate_per_s: a.connect_rate.0,
        start_at_ns: None,
        workload: None,
        tls,
        xdp,
        unix: a.unix_socket.clone(),
        h2,
    };
    let scheme = if url.tls { "https" } else { "http" };
    let target = format!("{scheme}://{}{}", url.authority, url.path_and_query);
    let (plan, class_limits) = match workload {
        Some(w) => (
            Plan {
                workload: Some(w.engine),
                ..plan
            },
            w.limits,
        ),
        None => (plan, Vec::new()),
    };
    Ok(Prepared {
        target,
        addrs,
        closes: tpl.closes(),
        plan,
        gates,
        start_at: None,
        class_limits,
    })
}

/// The ALPN protocols offered on https:// (`--http2`: h2 alone; `--alpn`:
/// those given, in order; else http/1.1).
fn alpn_of(a: &CommonArgs, tls: bool) -> Result<Vec<Vec<u8>>, Failure> {
    let usage = |m: String| Err(Failure::Usage(m));
    let Some(list) = &a.alpn else {
        return Ok(vec![if a.http2 {
            b"h2".to_vec()
        } else {
            b"http/1.1".to_vec()
        }]);
    };
    if !tls {
        return usage("--alpn is negotiated in the TLS handshake: it needs an https:// URL (use --http2 for h2c on http://)".into());
    }
    if list.is_empty() {
        return usage("--alpn needs at least one protocol: h2, http/1.1".into());
    }
    for p in list {
        if p != "h2" && p != "http/1.1" {
            return usage(format!("--alpn {p:?}: xload speaks h2 and http/1.1"));
        }
    }
    Ok(list.iter().map(|p| p.as_bytes().to_vec()).collect())
}

/// `--http2` / `--alpn` with h2 and `--streams`, checked: the HTTP/2 part
/// of the plan (None: HTTP/1.1 only). With a workload, every variant of
/// every class is encoded once, in `RequestPlan::index` order.
fn h2_plan(
    a: &CommonArgs,
    alpn: &[Vec<u8>],
    spec: &RequestSpec,
    closes: bool,
    workload: Option<&crate::workload::Resolved>,
) -> Result<Option<xload_engine::H2Plan>, Failure> {
    let usage = |m: &str| Err(Failure::Usage(m.into()));
    let h2 = a.http2 || (a.alpn.is_some() && alpn.iter().any(|p| p == b"h2"));
    if !h2 {
        if a.streams.is_some() {
            return usage("--streams sets HTTP/2 streams per connection: it needs --http2 (or --alpn with h2)");
        }
        return Ok(None);
    }
    let streams = a.streams.unwrap_or(1);
    if streams == 0 || streams > 4096 {
        return usage("--streams must be between 1 and 4096");
    }
    if a.engine == EngineArg::Xdp {
        return usage(
            "--engine xdp speaks HTTP/1.1 only: drop --http2 (or use --engine uring or epoll)",
        );
    }
    if a.pipeline > 1 {
        return usage("--pipeline is HTTP/1.1 pipelining: with HTTP/2, --streams sets the requests in flight per connection");
    }
    if closes {
        return usage("HTTP/2 keeps connections open: drop --no-keepalive / Connection: close");
    }
    let request = match workload {
        None => vec![H2Request::new(spec).map_err(|e| Failure::Usage(format!("request: {e}")))?],
        Some(w) => (w.engine.requests)
            .variants()
            .map(|v| {
                let mut r = H2Request::empty();
                r.render_http1(&v.request, w.engine.requests.https)
                    .then_some(r)
                    .ok_or_else(|| Failure::Usage(format!("{}: not a request", v.path)))
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    Ok(Some(xload_engine::H2Plan {
        streams: streams as u32,
        request: request.into(),
        alpn_optional: a.alpn.is_some(),
    }))
}

fn engine_choice(e: EngineArg) -> EngineChoice {
    match e {
        EngineArg::Auto => EngineChoice::Auto,
        EngineArg::Uring => EngineChoice::Uring,
        EngineArg::Epoll => EngineChoice::Epoll,
        EngineArg::Xdp => EngineChoice::Xdp,
    }
}

/// `--engine xdp --dev IFACE --src-ip ADDR`, checked: plain http to an IPv4
/// target (the only addresses kept), one worker (one AF_XDP socket).
fn xdp_target(
    a: &CommonArgs,
    tls: bool,
    addrs: &mut Vec<SocketAddr>,
    worker_cpus: &mut Vec<Option<usize>>,
) -> Result<Option<XdpTarget>, Failure> {
    let usage = |m: &str| Err(Failure::Usage(m.into()));
    if a.engine != EngineArg::Xdp {
        if a.dev.is_some() || a.src_ip.is_some() {
            return usage("--dev and --src-ip are for --engine xdp");
        }
        return Ok(None);
    }
    let Some(dev) = a.dev.clone() else {
        return usage("--engine xdp needs --dev IFACE: the interface toward the server, whose AF_XDP socket carries the connections");
    };
    let Some(src_ip) = a.src_ip else {
        return usage("--engine xdp needs --src-ip ADDR: an IPv4 address on the subnet of --dev that no host uses (the user-space stack owns it; `xload lab` prints one as ip_user)");
    };
    if tls {
        return usage("--engine xdp speaks plain http:// only");
    }
    if a.source.is_some() {
        return usage("--source binds kernel sockets; --engine xdp sends from --src-ip");
    }
    if worker_cpus.len() > 1 && (a.threads.is_some() || a.cpus.is_some() || a.pin_all) {
        return usage("--engine xdp runs one worker (one AF_XDP socket on queue 0): -t 1 or one CPU in --cpus");
    }
    worker_cpus.truncate(1);
    addrs.retain(SocketAddr::is_ipv4);
    if addrs.is_empty() {
        return usage("--engine xdp speaks IPv4 only: the host has no IPv4 address");
    }
    if let Err(e) = xload_xdp::netdev::link_by_name(&dev) {
        return Err(Failure::Usage(format!("--dev {dev}: {e}")));
    }
    let (drop_every, hold_every) = test_faults()?;
    Ok(Some(XdpTarget {
        dev,
        src_ip,
        drop_every,
        hold_every,
    }))
}

/// Test only: `XLOAD_XDP_TEST_FAULTS=drop=N,hold=M` drops every Nth frame
/// each way in the xdp engine's frame path and holds every Mth behind the
/// next ones (this kernel has no netem to do it on the wire).
fn test_faults() -> Result<(u32, u32), Failure> {
    let Ok(spec) = std::env::var("XLOAD_XDP_TEST_FAULTS") else {
        return Ok((0, 0));
    };
    let bad = || {
        Failure::Usage(format!(
            "XLOAD_XDP_TEST_FAULTS={spec:?}: expected drop=N,hold=M"
        ))
    };
    let (mut drop_every, mut hold_every) = (0, 0);
    for part in spec.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(bad)?;
        let v: u32 = v.parse().map_err(|_| bad())?;
        match k {
            "drop" => drop_every = v,
            "hold" => hold_every = v,
            _ => return Err(bad()),
        }
    }
    Ok((drop_every, hold_every))
}

/// `--pipeline` within bounds, and only where requests may queue on a connection.
fn check_pipeline(pipeline: usize, rate: Option<f64>, closes: bool) -> Result<(), Failure> {
    if pipeline == 0 || pipeline > 1024 {
        return Err(Failure::Usage(format!(
            "--pipeline {pipeline} must be between 1 and 1024"
        )));
    }
    if rate.is_some() && pipeline > 1 {
        return Err(Failure::Usage(
            "--rate sends one request per connection at a time: drop --pipeline".into(),
        ));
    }
    if closes && pipeline > 1 {
        return Err(Failure::Usage(
            "--pipeline needs keep-alive connections (drop --no-keepalive / Connection: close)"
                .into(),
        ));
    }
    Ok(())
}

/// Every address of the host, IPv4 first (as curl and wrk effectively do),
/// or the ones `--resolve` gives for its host and port.
fn resolve(url: &Url, given: &[crate::args::Resolve]) -> Result<Vec<SocketAddr>, Failure> {
    let pinned: Vec<SocketAddr> = given
        .iter()
        .filter(|r| r.host.eq_ignore_ascii_case(&url.host) && r.port == url.port)
        .map(|r| SocketAddr::new(r.addr, url.port))
        .collect();
    if !pinned.is_empty() {
        return Ok(pinned);
    }
    let mut addrs: Vec<SocketAddr> = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|e| Failure::Run(format!("cannot resolve host {:?}: {e}", url.host)))?
        .collect();
    addrs.sort_by_key(|a| !a.is_ipv4());
    addrs.dedup();
    if addrs.is_empty() {
        return Err(Failure::Run(format!("host {:?} has no address", url.host)));
    }
    Ok(addrs)
}

/// `--source`: every address must be one connections can be bound to on
/// this host, all of the target's family; the target's addresses of another
/// family are dropped.
fn check_sources(
    sources: &[IpAddr],
    addrs: &mut Vec<SocketAddr>,
    host: &str,
) -> Result<(), Failure> {
    let Some(first) = sources.first() else {
        return Ok(());
    };
    if sources.iter().any(|s| s.is_ipv4() != first.is_ipv4()) {
        return Err(Failure::Usage(
            "--source: all addresses must be IPv4 or all IPv6".into(),
        ));
    }
    addrs.retain(|a| a.is_ipv4() == first.is_ipv4());
    if addrs.is_empty() {
        let family = if first.is_ipv4() { "IPv4" } else { "IPv6" };
        return Err(Failure::Usage(format!(
            "--source gives {family} addresses but host {host:?} has no {family} address"
        )));
    }
    for &ip in sources {
        xload_engine::check_source(ip).map_err(|e| {
            Failure::Usage(format!(
                "--source {ip}: connections cannot be bound to it ({e}): it must be an address of this host"
            ))
        })?;
    }
    Ok(())
}

/// The CPUs of the workers: None = unpinned.
fn workers(a: &CommonArgs) -> Result<Vec<Option<usize>>, Failure> {
    let allowed = xload_engine::pin::allowed_cpus()
        .map_err(|e| Failure::Run(format!("sched_getaffinity: {e}")))?;
    if let Some(crate::args::CpuList(cpus)) = &a.cpus {
        if let Some(c) = cpus.iter().find(|c| !allowed.contains(c)) {
            return Err(Failure::Usage(format!(
                "--cpus: CPU {c} is not available to this process (allowed: {allowed:?})"
            )));
        }
        return Ok(cpus.iter().map(|&c| Some(c)).collect());
    }
    if a.pin_all {
        return Ok(allowed.iter().map(|&c| Some(c)).collect());
    }
    let n = match a.threads {
        Some(0) => return Err(Failure::Usage("-t must be at least 1".into())),
        Some(n) => n,
        None => allowed.len(),
    };
    Ok(vec![None; n])
}

/// Fails fast, within the connect timeout (or the run's length, if shorter),
/// when nothing answers at the target, and at once on Ctrl-C; otherwise points
/// the plan at the first address that accepts (a name such as `localhost` may
/// answer on ::1 only).
pub(crate) fn check_reachable(p: &mut Prepared, stop: &AtomicBool) -> Result<(), Failure> {
    if p.plan.xdp.is_some() {
        // The kernel's path says nothing of the user-space stack's: its
        // own connects report refusals and timeouts.
        return Ok(());
    }
    let mut timeout = p.plan.connect_timeout;
    let mut handshake_timeout = p.plan.handshake_timeout;
    if let Some(d) = p.plan.duration {
        let run = (p.plan.warmup + d).max(Duration::from_millis(1));
        timeout = timeout.min(run);
        handshake_timeout = handshake_timeout.min(run);
    }
    if let Some(path) = p.plan.unix.clone() {
        return connect_unix(&path, timeout, stop, &p.target);
    }
    let mut last = None;
    for &addr in &p.addrs {
        // The connect (https: and the TLS pre-check) blocks in a thread of
        // its own so that Ctrl-C is seen while it waits (a listener whose
        // accept queue is full never answers; a server may never answer a
        // ClientHello).
        let (tx, rx) = mpsc::channel();
        let tls = p.plan.tls.clone();
        let target = p.target.clone();
        let h2_only = p.plan.h2.as_ref().is_some_and(|h| !h.alpn_optional);
        std::thread::spawn(move || {
            let r = TcpStream::connect_timeout(&addr, timeout).map(|stream| match &tls {
                Some(t) => {
                    crate::tls::check_trusted(t, stream, handshake_timeout, &target, h2_only)
                }
                None if h2_only => check_h2c(stream, handshake_timeout, &target),
                None => Ok(()),
            });
            let _ = tx.send(r);
        });
        let result = loop {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(r) => break r,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if stop.load(Ordering::Relaxed) {
                        return Err(Failure::Run(format!(
                            "interrupted while connecting to {} ({addr}): nothing was measured",
                            p.target
                        )));
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    break Err(std::io::Error::other("the connect thread ended"))
                }
            }
        };
        match result {
            Ok(trusted) => {
                p.plan.addr = addr;
                return trusted;
            }
            Err(e) => last = Some((addr, e)),
        }
    }
    let (addr, e) = last.expect("resolve returns at least one address");
    Err(Failure::Run(format!(
        "cannot connect to {} ({addr}): {e}",
        p.target
    )))
}

/// Before an h2c run: the server answers the connection preface with
/// SETTINGS (an HTTP/1.1-only server answers 400 or nothing), else the run
/// ends here, saying so.
fn check_h2c(mut stream: TcpStream, timeout: Duration, target: &str) -> Result<(), Failure> {
    use std::io::{Read, Write};
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]); // empty SETTINGS
    let mut head = [0u8; 9];
    let mut got = 0;
    if stream.write_all(&hello).is_ok() {
        while got < head.len() {
            match stream.read(&mut head[got..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
    }
    if got == head.len() && head[3] == 4 {
        return Ok(());
    }
    let answer = if got == 0 {
        "nothing".to_string()
    } else {
        format!("{:?}", String::from_utf8_lossy(&head[..got]))
    };
    Err(Failure::Run(format!(
        "{target}: --http2 on http:// speaks HTTP/2 with prior knowledge (h2c), and the server \
         answered the connection preface with {answer}, not SETTINGS: it does not speak h2c \
         on this port (drop --http2, or enable h2c on the server)"
    )))
}

/// `--unix-socket PATH`, checked: plain http with the options that mean
/// something over a Unix socket. The URL's host is not resolved (it gives
/// the Host header only); the address stands for this host.
fn unix_target(
    a: &CommonArgs,
    url: &Url,
    path: &std::path::Path,
) -> Result<Vec<SocketAddr>, Failure> {
    let usage = |m: String| Err(Failure::Usage(m));
    let shown = path.display();
    if path.as_os_str().is_empty() {
        return usage("--unix-socket needs a path".into());
    }
    if path.as_os_str().len() > xload_engine::UNIX_PATH_MAX {
        return usage(format!(
            "--unix-socket {shown}: longer than the {} bytes a Unix socket path may have",
            xload_engine::UNIX_PATH_MAX
        ));
    }
    let tcp_only = [
        (url.tls, "https:// (TLS)"),
        (a.source.is_some(), "--source"),
        (!a.tls.resolve.is_empty(), "--resolve"),
        (a.engine == EngineArg::Xdp, "--engine xdp"),
    ];
    if let Some((_, what)) = tcp_only.iter().find(|(given, _)| *given) {
        return usage(format!(
            "{what} is for TCP connections; --unix-socket {shown} connects to a Unix socket (the URL gives only Host and path)"
        ));
    }
    Ok(vec![SocketAddr::from(([127, 0, 0, 1], url.port))])
}

/// The reachability check through `--unix-socket`: one connect, in a thread
/// of its own so that Ctrl-C is seen while a full accept queue holds it.
fn connect_unix(
    path: &std::path::Path,
    timeout: Duration,
    stop: &AtomicBool,
    target: &str,
) -> Result<(), Failure> {
    let (tx, rx) = mpsc::channel();
    let p = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(std::os::unix::net::UnixStream::connect(p).map(drop));
    });
    let start = std::time::Instant::now();
    let failed = |e: &dyn std::fmt::Display| {
        Err(Failure::Run(format!(
            "cannot connect to {target} through the Unix socket {}: {e}",
            path.display()
        )))
    };
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => return failed(&e),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if stop.load(Ordering::Relaxed) {
                    return Err(Failure::Run(format!(
                        "interrupted while connecting to {target} ({}): nothing was measured",
                        path.display()
                    )));
                }
                if start.elapsed() >= timeout {
                    return failed(&"connect timed out (the accept queue is full?)");
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return failed(&"the connect thread ended")
            }
        }
    }
}

/// The request's extra headers: each `-H`, and `-a`'s Authorization.
fn request_headers(a: &CommonArgs) -> Result<Vec<(String, String)>, Failure> {
    let mut headers = Vec::new();
    for h in &a.headers {
        headers.push(parse_header_arg(h).map_err(|e| Failure::Usage(format!("-H {h:?}: {e}")))?);
    }
    if let Some(auth) = &a.auth {
        if headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("authorization"))
        {
            return Err(Failure::Usage(
                "-a and -H 'Authorization: ...' both set the Authorization header: give one".into(),
            ));
        }
        headers.push(("Authorization".into(), basic_auth(auth)?));
    }
    Ok(headers)
}

/// `-a user:pass`: the value of its `Authorization: Basic` header (RFC 7617:
/// base64 of `user:pass`), built once with the request template.
pub(crate) fn basic_auth(user_pass: &str) -> Result<String, Failure> {
    if !user_pass.contains(':') {
        return Err(Failure::Usage(format!(
            "-a {user_pass:?}: expected USER:PASS (e.g. -a alice:secret)"
        )));
    }
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::from("Basic ");
    for chunk in user_pass.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_is_base64_of_user_colon_pass() {
        let enc = |s: &str| basic_auth(s).map_err(|_| ()).unwrap();
        // RFC 7617, section 2.
        assert_eq!(
            enc("Aladdin:open sesame"),
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(enc("a:b"), "Basic YTpi");
        assert_eq!(enc("ab:c"), "Basic YWI6Yw==");
        assert_eq!(enc("user:pass"), "Basic dXNlcjpwYXNz");
        assert!(basic_auth("nopassword").is_err());
    }
}
