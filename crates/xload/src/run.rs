//! One load run: arguments → checked plan → preflight → workers → report.

use std::io::IsTerminal;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use xload_engine::{Arrival, EngineChoice, OpenLoop, Plan, XdpTarget};
use xload_http::{parse_header_arg, parse_url, RequestSpec, RequestTemplate, Url};
use xload_stats::gate::Gate;
use xload_stats::{Batching, Report, RunMeta, TextOptions};

use crate::args::{ArrivalArg, CommonArgs, EngineArg, RunArgs};
use crate::gate::parse_gate;
use crate::progress::{Live, Progress};
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
    let mut addrs = resolve(&url, &a.tls.resolve)?;
    let tls = (url.tls)
        .then(|| crate::tls::client(&a.tls, &url.host, connections))
        .transpose()?;
    let sources = a.source.as_ref().map_or_else(Vec::new, |s| s.0.clone());
    check_sources(&sources, &mut addrs, &url.host)?;
    let mut headers = Vec::new();
    for h in &a.headers {
        headers.push(parse_header_arg(h).map_err(|e| Failure::Usage(format!("-H {h:?}: {e}")))?);
    }
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
    let gates = a
        .fail_if
        .iter()
        .map(|g| parse_gate(g))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Failure::Usage)?;
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
    };
    let scheme = if url.tls { "https" } else { "http" };
    let target = format!("{scheme}://{}{}", url.authority, url.path_and_query);
    let (plan, class_limits) = match crate::workload::resolve(a, &url)? {
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

/// Raises the soft RLIMIT_NOFILE to the hard one (a server takes as many
/// connections as it may; clients are checked by [`ensure_fd_limit`]).
pub(crate) fn raise_fd_soft_limit() {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: rl is a valid out-parameter, then a valid rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 && rl.rlim_cur < rl.rlim_max {
            rl.rlim_cur = rl.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
        }
    }
}

/// Raises RLIMIT_NOFILE to what `connections` needs, or says how.
pub(crate) fn ensure_fd_limit(connections: usize) -> Result<(), Failure> {
    let need = connections as u64 + 256;
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: rl is a valid out-parameter.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return Ok(());
    }
    if rl.rlim_cur >= need {
        return Ok(());
    }
    if rl.rlim_max >= need {
        let new = libc::rlimit {
            rlim_cur: need.max(rl.rlim_cur),
            rlim_max: rl.rlim_max,
        };
        // SAFETY: new is a valid rlimit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &new) } == 0 {
            return Ok(());
        }
    }
    Err(Failure::Run(format!(
        "-c {connections} needs about {need} file descriptors but the limit is {} (hard {}): raise it with `ulimit -n {need}` \
         (as root, or LimitNOFILE={need} in a systemd unit; tuning/loadgen.toml's [limits] names it)",
        rl.rlim_cur, rl.rlim_max
    )))
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
    if let Some(d) = p.plan.duration {
        timeout = timeout.min(p.plan.warmup + d).max(Duration::from_millis(1));
    }
    let mut last = None;
    for &addr in &p.addrs {
        // The connect blocks in a thread of its own so that Ctrl-C is seen
        // while it waits (a listener whose accept queue is full never answers).
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(TcpStream::connect_timeout(&addr, timeout));
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
            Ok(stream) => {
                p.plan.addr = addr;
                if let Some(t) = &p.plan.tls {
                    crate::tls::check_trusted(t, stream, timeout, &p.target)?;
                }
                return Ok(());
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

/// Everything measured by one execution of a prepared run.
pub(crate) struct Measured {
    pub report: Report,
    pub interrupted: bool,
    /// When the measured window began, CLOCK_MONOTONIC ns.
    pub window_start_ns: u64,
    /// The latency histogram of each row of `report.timeseries`.
    pub second_histograms: Vec<xload_stats::SecondHistogram>,
}

/// Executes a prepared run and builds its report (with the probe's verdict).
pub(crate) fn execute(
    p: &Prepared,
    stop: Arc<AtomicBool>,
    live: Live,
) -> Result<Measured, Failure> {
    let budget = preflight(p);
    let mut sampler = xload_probe::Sampler::new();
    // --start-at: wait until the engine must start (as late as can be, so
    // that nothing else comes between the wait and the engine's start).
    let timed;
    let plan = match p.start_at {
        None => &p.plan,
        Some(at) => {
            let at_ns =
                crate::hosts::wait_for_start(at, p.plan.warmup, &stop).ok_or_else(|| {
                    Failure::Run(
                        "interrupted while waiting for --start-at: nothing was measured".into(),
                    )
                })?;
            timed = Plan {
                start_at_ns: Some(at_ns),
                ..p.plan.clone()
            };
            &timed
        }
    };
    let (tx, rx) = mpsc::channel();
    let workers = p.plan.worker_cpus.len();
    let tick_s = p.plan.tick.as_secs_f64();
    let progress = Progress::spawn(rx, workers, tick_s, live);
    // The client's evidence covers the measured window: sample when the
    // warm-up ends (the workers reset their recorders at the same moment).
    let end_sample = std::sync::Mutex::new(None);
    let first_sample = std::sync::Mutex::new(None);
    let (outcome, start) = std::thread::scope(|s| {
        let engine = s.spawn(|| {
            // Without a warm-up the start sample is taken as soon as the
            // worker threads exist (before, their CPU times would be missing);
            // the end sample while they still exist.
            xload_engine::run_observed(
                plan,
                stop.clone(),
                Some(tx),
                || {
                    if plan.warmup.is_zero() && plan.start_at_ns.is_none() {
                        *first_sample.lock().unwrap_or_else(|e| e.into_inner()) =
                            xload_probe::Sampler::new().sample().ok();
                    }
                },
                || {
                    let mut end_sampler = xload_probe::Sampler::new();
                    *end_sample.lock().unwrap_or_else(|e| e.into_inner()) =
                        end_sampler.sample().ok();
                },
            )
        });
        let until = std::time::Instant::now()
            + plan.start_at_ns.map_or(plan.warmup, |at| {
                Duration::from_nanos(at.saturating_sub(xload_engine::clock::now_ns()))
            });
        while std::time::Instant::now() < until
            && !stop.load(std::sync::atomic::Ordering::Relaxed)
            && !engine.is_finished()
        {
            std::thread::sleep((until - std::time::Instant::now()).min(Duration::from_millis(20)));
        }
        let start = if plan.warmup.is_zero() && plan.start_at_ns.is_none() {
            None
        } else {
            sampler.sample().ok()
        };
        (engine.join(), start)
    });
    let start = start.or_else(|| first_sample.into_inner().unwrap_or_else(|e| e.into_inner()));
    let outcome = outcome
        .map_err(|_| Failure::Run("the engine thread panicked".into()))?
        .map_err(Failure::Run)?;
    let (rows, second_histograms) = progress.finish();
    let end = end_sample.into_inner().unwrap_or_else(|e| e.into_inner());
    for w in &outcome.workers {
        if let Some(e) = &w.error {
            eprintln!("xload: worker {}: {e}", w.index);
        }
    }
    let mut report = build_report(p, &outcome, rows);
    if let (Some(start), Some(end), Some(budget)) = (start, end, budget) {
        let input = verdict_input(p, &outcome, &report);
        let summary = xload_probe::summarize(&start, &end, &input, &budget);
        report.client = serde_json::to_value(&summary).ok();
    }
    report.interrupted = outcome.interrupted;
    Ok(Measured {
        report,
        interrupted: outcome.interrupted,
        window_start_ns: outcome.window_start_ns,
        second_histograms,
    })
}

/// The probe's budget of this host, after warning about what it says of
/// the plan (fds, ephemeral ports per source); `None` if /proc is unreadable.
fn preflight(p: &Prepared) -> Option<xload_probe::Budget> {
    let budget = xload_probe::read_budget().ok()?;
    let loopback = p.plan.addr.ip().is_loopback();
    let sources = p.plan.sources.len();
    for w in xload_probe::preflight_sources(p.plan.connections, sources, loopback, &budget) {
        eprintln!("xload: warning: {w}");
    }
    Some(budget)
}

/// The report of an engine outcome and its time series, before the client verdict.
fn build_report(
    p: &Prepared,
    outcome: &xload_engine::Outcome,
    rows: Vec<xload_stats::IntervalRow>,
) -> Report {
    let workers = p.plan.worker_cpus.len();
    let meta = RunMeta {
        target: p.target.clone(),
        engine: outcome.engine.name().to_string(),
        engine_reason: Some(outcome.engine_reason.clone()),
        threads: workers,
        connections: p.plan.connections,
        duration_s: outcome.measured.as_secs_f64(),
        rate_target: p.plan.open_loop.map(|o| o.rate_per_s),
        pipeline: p.plan.pipeline,
    };
    let mut report = Report::build(&meta, &outcome.recorder);
    crate::workload::judge(&mut report, &p.class_limits);
    if p.plan.tls.is_some() {
        let mut t = report.tls.take().unwrap_or_default();
        t.mode = "user-space".into();
        t.library = "rustls".into();
        t.ktls_unavailable = Some(xload_engine::ktls_unavailable());
        report.tls = Some(t);
    }
    report.timeseries = rows;
    report.batching = outcome
        .workers
        .iter()
        .map(|w| w.batching)
        .fold(None, Batching::merge)
        // A run too short for a single wait has nothing to say about batching.
        .filter(|b| b.waits > 0);
    report
}

fn verdict_input(p: &Prepared, o: &xload_engine::Outcome, r: &Report) -> xload_probe::VerdictInput {
    let pinned = o.workers.iter().all(|w| w.cpu.is_some());
    let generator_cpus: Vec<usize> = if pinned {
        o.workers.iter().filter_map(|w| w.cpu).collect()
    } else {
        xload_engine::pin::allowed_cpus().unwrap_or_default()
    };
    // Shares of the sends that left (each late send is one of them).
    // Sends that waited for a connection, or behind such a wait's backlog
    // at the catch-up limit, are the server's pace, not this client's.
    let open = r.open_loop.as_ref();
    let catch_up = open.map_or(0, |o| o.late_catch_up);
    let waiting = open.map_or(0, |o| o.late_waiting_for_connection) + catch_up;
    let share = |n: u64| match open.map(|o| o.sends) {
        Some(s) if s > 0 => Some(n as f64 / s as f64),
        _ => None,
    };
    let late_sends = open.map(|o| o.late_sends);
    let late_ratio = late_sends.and_then(|l| share(l.saturating_sub(waiting)));
    let late_waiting_ratio = late_sends.and_then(|_| share(waiting));
    xload_probe::VerdictInput {
        generator_cpus,
        worker_tids: o.workers.iter().map(|w| w.tid).collect(),
        workers_pinned: pinned,
        connections: p.plan.connections,
        no_keepalive_conn_per_s: (p.closes && r.duration_s > 0.0)
            .then(|| r.connects as f64 / r.duration_s),
        schedule_lag_p99_us: open.map(|o| o.schedule_lag_us.p99),
        late_send_ratio: late_ratio,
        late_sends: late_sends.map(|l| l.saturating_sub(waiting)),
        late_waiting_ratio,
        late_catch_up_ratio: late_sends.and_then(|_| share(catch_up)),
        cq_overflows: o.workers.iter().map(|w| w.cq_overflow).sum(),
        fd_errors: r.errors.get("fd_limit").copied().unwrap_or(0),
        port_errors: r.errors.get("no_ephemeral_port").copied().unwrap_or(0),
        target_is_loopback: p.plan.addr.ip().is_loopback(),
        tls_handshakes: r
            .tls
            .as_ref()
            .map_or(0, |t| t.handshakes_full + t.handshakes_resumed),
        tls_handshake_cpu_s: r.tls.as_ref().map_or(0.0, |t| t.handshake_cpu_s),
    }
}

/// `xload URL`: run, print, write, judge.
pub(crate) fn main_run(url: &str, ra: &RunArgs, stop: Arc<AtomicBool>) -> Result<i32, Failure> {
    let a = &ra.common;
    let mut p = prepare(url, a, ra.sessions.unwrap_or(ra.connections), ra.rate)?;
    if ra.sessions.is_some() {
        crate::workload::enable_sessions(&mut p.plan, a)?;
    }
    p.start_at = ra.hosts.start_at;
    let run_id = ra
        .hosts
        .run_id
        .clone()
        .unwrap_or_else(crate::hosts::new_run_id);
    check_outputs(a)?;
    ensure_fd_limit(p.plan.connections)?;
    check_reachable(&mut p, &stop)?;
    let live = if ra.hosts.progress_lines {
        Live::Lines
    } else if !a.quiet && std::io::stdout().is_terminal() && std::io::stderr().is_terminal() {
        Live::Terminal
    } else {
        Live::Off
    };
    let mut m = execute(&p, stop, live)?;
    crate::hosts::stamp(&mut m.report, &ra.hosts, a, &p, &run_id, m.window_start_ns);
    m.report.timeseries_histograms = std::mem::take(&mut m.second_histograms);
    let report = &m.report;
    let text = report.render_text(&TextOptions {
        latency_table: a.latency,
    });
    if a.document_to_stdout() {
        eprint!("{text}");
    } else {
        crate::out(&text);
    }
    if let Some(path) = &a.json {
        write_out(path, &report.to_json())?;
    }
    if let Some(path) = &a.csv {
        let csv = crate::progress::csv(&report.timeseries);
        write_out(&path.to_string_lossy(), csv.trim_end())?;
    }
    if let Some(path) = &a.class_csv {
        let csv = xload_stats::classes_csv(&report.classes);
        write_out(&path.to_string_lossy(), csv.trim_end())?;
    }
    if report.requests == 0 && m.interrupted {
        // Stopped by the user before any answer was measured: nothing failed.
        if p.plan.warmup > Duration::ZERO && report.duration_s < 0.001 {
            eprintln!("xload: stopped during the warm-up, before the measured window began: nothing was measured");
        } else {
            eprintln!("xload: stopped before any response was measured");
        }
        return Ok(0);
    }
    if report.requests == 0 {
        let why = if report.errors_total > 0 {
            let mut v: Vec<_> = report
                .errors
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            v.sort();
            format!(" ({})", v.join(", "))
        } else if let Some(d) = p.plan.duration.filter(|d| d.as_millis() < 50) {
            // Not the target's fault: the window ended before a round trip.
            return Err(Failure::Run(format!(
                "no response from {} within -d {d:?}: too short for a round trip; measure longer (e.g. -d 1s)",
                p.target
            )));
        } else {
            String::new()
        };
        return Err(Failure::Run(format!("no response from {}{why}", p.target)));
    }
    let failed: Vec<&Gate> = p.gates.iter().filter(|g| g.violated(report)).collect();
    for g in &failed {
        eprintln!("xload: {}", g.explain(report));
    }
    if !failed.is_empty() {
        return Ok(3);
    }
    Ok(0)
}

/// `--json` and `--csv` paths are checked before the run: a typo found
/// after a long run would lose it (and the gates with it).
pub(crate) fn check_outputs(a: &CommonArgs) -> Result<(), Failure> {
    let csv = a.csv.as_ref().map(|p| p.to_string_lossy().into_owned());
    if a.json_to_stdout() && a.csv_to_stdout() {
        return Err(Failure::Usage(
            "--json - and --csv - would both write to stdout; give one of them a file".into(),
        ));
    }
    for (opt, path) in [("--json", a.json.clone()), ("--csv", csv)] {
        let Some(path) = path.filter(|p| p != "-") else {
            continue;
        };
        writable(&path).map_err(|e| Failure::Usage(format!("{opt} {path}: {e}")))?;
    }
    Ok(())
}

/// Whether `path` can be written: the file if it exists, else its directory.
pub(crate) fn writable(path: &str) -> Result<(), String> {
    use std::ffi::CString;
    let p = std::path::Path::new(path);
    if p.is_dir() {
        return Err("is a directory".into());
    }
    let (target, what) = if p.exists() {
        (p.to_path_buf(), "the file is not writable")
    } else {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        if !dir.is_dir() {
            return Err(format!("directory {} does not exist", dir.display()));
        }
        (dir, "its directory is not writable")
    };
    let c = CString::new(target.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: access(2) reads a NUL-terminated path that lives for the call.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        return Err(format!("{what} ({})", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Writes to a path, or to stdout for `-`.
pub(crate) fn write_out(path: &str, content: &str) -> Result<(), Failure> {
    if path == "-" {
        crate::out(&format!("{content}\n"));
        return Ok(());
    }
    std::fs::write(path, format!("{content}\n"))
        .map_err(|e| Failure::Run(format!("cannot write {path}: {e}")))
}
