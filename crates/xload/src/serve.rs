//! `xload serve`: the embedded responder as a command.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use xload_engine::serve::{ServeConfig, Server};

use xload_files::FileSet;

use crate::args::parse_duration;
use crate::Failure;

#[derive(Debug, Clone, Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on.
    #[arg(long = "listen", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Listen on this Unix socket instead of --listen (all workers accept from it; removed on exit).
    #[arg(long = "unix-socket", value_name = "PATH", conflicts_with_all = ["listen", "tls"])]
    pub unix_socket: Option<std::path::PathBuf>,

    /// Response body size in bytes.
    #[arg(long = "body-size", default_value_t = 0)]
    pub body_size: usize,

    /// Serve the files under DIR (read once into memory at start): GET and HEAD
    /// of their paths, 404 for the rest, /stats as always (see docs/xload.md).
    #[arg(long = "files", conflicts_with = "body_size")]
    pub files: Option<std::path::PathBuf>,

    /// Use and pin these CPUs, one worker each (default: one unpinned worker per allowed CPU).
    #[arg(long = "cpus", value_parser = crate::args::parse_cpus)]
    pub cpus: Option<crate::args::CpuList>,

    /// Hold every response this long (a timer, not a sleeping thread). A client that closes its
    /// side (half-close included) before its held answers are due loses them, as a proxy drops
    /// the request of a client that went away; /stats counts them as "abandoned".
    #[arg(long = "delay", value_parser = parse_duration)]
    pub delay: Option<Duration>,

    /// At most N responses held at once (with --delay); the rest queue in order.
    /// Each worker (one per CPU) has its own share of N and its own queue,
    /// at least one slot each: pin to one CPU (--cpus) for one exact pool.
    #[arg(long = "pool", requires = "delay")]
    pub pool: Option<usize>,

    /// Close a keep-alive connection that sends nothing for this long while
    /// no answer is owed to it (nginx's keepalive_timeout; 0: never). /stats
    /// counts them as "idle_closed".
    #[arg(long = "idle-timeout", value_parser = parse_duration, default_value = "75s")]
    pub idle_timeout: Duration,

    /// Close a connection whose request head has not come whole this long
    /// after its first bytes (nginx's client_header_timeout; 0: never): a
    /// client sending a byte at a time is not idle. /stats counts them as
    /// "header_timeouts".
    #[arg(long = "header-timeout", value_parser = parse_duration, default_value = "60s")]
    pub header_timeout: Duration,

    /// Close a connection whose answer has not gone out this long after it
    /// was sent: a client that stopped reading (nginx's send_timeout; 0:
    /// never). /stats counts them as "send_timeouts".
    #[arg(long = "send-timeout", value_parser = parse_duration, default_value = "60s")]
    pub send_timeout: Duration,

    /// Speak HTTPS (TLS 1.2 and 1.3, ALPN http/1.1) with a certificate
    /// self-signed at start for localhost and 127.0.0.1 (its SHA-256
    /// fingerprint is printed), or the one given by --cert and --key.
    #[arg(long = "tls")]
    pub tls: bool,

    /// Speak HTTP/2: with prior knowledge (h2c) on plain connections; with
    /// --tls, h2 or http/1.1, whichever the client's ALPN picks. The same
    /// answers, /stats counting both (see docs/xload.md).
    #[arg(long = "h2", conflicts_with_all = ["files", "app"])]
    pub h2: bool,

    /// The server's certificate chain, PEM (with --tls and --key).
    #[arg(long = "cert", requires = "tls")]
    pub cert: Option<std::path::PathBuf>,

    /// The certificate's private key, PEM (with --tls and --cert).
    #[arg(long = "key", requires = "tls")]
    pub key: Option<std::path::PathBuf>,

    /// Be a minimal stateful application instead (docs/workload.md): login
    /// with a session cookie, ids in pages, and a 403 (counted in /stats)
    /// for a request without its session or with another session's ids.
    /// `support` serves the downloads of --files DIR.
    #[arg(long = "app", value_enum, conflicts_with_all = ["body_size", "pool", "cpus", "unix_socket"])]
    pub app: Option<crate::app::App>,

    /// With --app: every Nth login is answered without its session cookie
    /// (to see clients' sessions restart).
    #[arg(long = "drop-cookie", requires = "app", value_name = "N")]
    pub drop_cookie: Option<u64>,

    /// Stop after this long (default: until Ctrl-C).
    #[arg(long = "for", value_parser = parse_duration)]
    pub run_for: Option<Duration>,

    /// Serve Prometheus metrics on http://ADDR/metrics: requests, connections, bad requests,
    /// timeouts, per worker and all (the counters of /stats).
    #[arg(long = "metrics-listen")]
    pub metrics_listen: Option<std::net::SocketAddr>,
}

pub(crate) fn config(
    a: &ServeArgs,
    tls: Option<&crate::tls::ServerTls>,
    files: Option<Arc<FileSet>>,
) -> Result<ServeConfig, Failure> {
    let cpus = match &a.cpus {
        Some(crate::args::CpuList(c)) => {
            let allowed =
                xload_engine::pin::allowed_cpus().map_err(|e| Failure::Run(e.to_string()))?;
            if let Some(x) = c.iter().find(|x| !allowed.contains(x)) {
                return Err(Failure::Usage(format!(
                    "--cpus: CPU {x} is not available to this process (allowed: {allowed:?})"
                )));
            }
            c.iter().map(|&x| Some(x)).collect()
        }
        None => vec![
            None;
            xload_engine::pin::allowed_cpus()
                .map(|v| v.len())
                .unwrap_or(1)
                .max(1)
        ],
    };
    let cfg = ServeConfig {
        listen: a.listen,
        body_size: a.body_size,
        cpus,
        delay: a.delay,
        pool: a.pool,
        idle_timeout: (!a.idle_timeout.is_zero()).then_some(a.idle_timeout),
        header_timeout: (!a.header_timeout.is_zero()).then_some(a.header_timeout),
        send_timeout: (!a.send_timeout.is_zero()).then_some(a.send_timeout),
        tls: tls.map(|t| Arc::clone(&t.config)),
        files,
        h2: a.h2,
    };
    cfg.check().map_err(|e| Failure::Usage(e.to_string()))?;
    Ok(cfg)
}

/// Reads `--files DIR` and says what it holds.
fn read_files(dir: &std::path::Path) -> Result<FileSet, Failure> {
    let set = FileSet::read(dir).map_err(|e| match e.is_usage() {
        true => Failure::Usage(format!("--files: {e}")),
        false => Failure::Run(format!("--files: {e}")),
    })?;
    if set.files.is_empty() {
        return Err(Failure::Usage(format!(
            "--files: {} holds no regular file",
            dir.display()
        )));
    }
    crate::outln!(
        "xload serve: --files {}: {} files, {} in memory",
        dir.display(),
        set.files.len(),
        xload_sys::fmt::fmt_bytes(set.bytes() as f64)
    );
    Ok(set)
}

/// The responder's TLS config offering h2 first and HTTP/1.1 for the rest:
/// the client's ALPN chooses.
pub(crate) fn offer_h2(config: &Arc<rustls::ServerConfig>) -> Arc<rustls::ServerConfig> {
    let mut c = (**config).clone();
    c.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(c)
}

pub(crate) fn main_serve(a: &ServeArgs, stop: Arc<AtomicBool>) -> Result<i32, Failure> {
    let mut tls = match a.tls {
        true => Some(crate::tls::server(a.cert.as_deref(), a.key.as_deref())?),
        false => None,
    };
    if let (true, Some(t)) = (a.h2, tls.as_mut()) {
        t.config = offer_h2(&t.config);
    }
    if let Some(app) = a.app {
        return serve_app(a, app, tls, stop);
    }
    let files = match &a.files {
        Some(dir) => Some(Arc::new(read_files(dir)?)),
        None => None,
    };
    let cfg = config(a, tls.as_ref(), files)?;
    crate::fd_limit::raise_fd_soft_limit();
    let workers = cfg.cpus.len();
    let server = match &a.unix_socket {
        Some(path) => Server::start_unix(cfg, path),
        None => Server::start(cfg),
    }
    .map_err(|e| Failure::Run(format!("serve: {e}")))?;
    let at = match &server.unix {
        Some(path) => format!("unix:{}", path.display()),
        None => server.addr.to_string(),
    };
    crate::outln!(
        "xload serve: listening on {}://{}/ ({}{workers} worker{}, io_uring {}{}); /stats has the counters; Ctrl-C stops",
        if tls.is_some() { "https" } else { "http" },
        at,
        match (a.h2, tls.is_some()) {
            (true, true) => "h2 or http/1.1 by ALPN, ",
            (true, false) => "HTTP/2 with prior knowledge, ",
            _ => "",
        },
        if workers == 1 { "" } else { "s" },
        server.mode,
        if server.registered_sockets { ", registered sockets" } else { "" }
    );
    if let Some(t) = &tls {
        crate::outln!(
            "xload serve: TLS 1.2/1.3, {} certificate, SHA-256 fingerprint {}",
            if t.self_signed {
                "self-signed"
            } else {
                "given"
            },
            t.fingerprint
        );
    }
    let mut metrics = match a.metrics_listen {
        Some(addr) => Some(
            crate::metrics::Endpoint::serving(
                addr,
                Arc::default(),
                crate::metrics::serve_page(Arc::clone(&server.stats)),
            )
            .map_err(Failure::Usage)?,
        ),
        None => None,
    };
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) && a.run_for.is_none_or(|d| started.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Some(m) = metrics.as_mut() {
        m.stop();
    }
    let stats = Arc::clone(&server.stats);
    server.stop().map_err(|e| Failure::Run(e.to_string()))?;
    crate::outln!(
        "xload serve: {} requests on {} connection{} ({} bad, {}{} abandoned, {} closed idle, {} header and {} send timeouts) in {:.1}s",
        stats.requests(),
        stats.connections(),
        if stats.connections() == 1 { "" } else { "s" },
        stats.bad_requests(),
        match a.files {
            Some(_) => format!("{} not found, ", stats.not_found()),
            None => String::new(),
        },
        stats.abandoned(),
        stats.idle_closed(),
        stats.header_timeouts(),
        stats.send_timeouts(),
        started.elapsed().as_secs_f64()
    );
    Ok(0)
}

/// `xload serve --app NAME`: the stateful responder of [`crate::app`].
fn serve_app(
    a: &ServeArgs,
    app: crate::app::App,
    tls: Option<crate::tls::ServerTls>,
    stop: Arc<AtomicBool>,
) -> Result<i32, Failure> {
    let files = match (app, &a.files) {
        (crate::app::App::Support, Some(dir)) => Some(Arc::new(read_files(dir)?)),
        (crate::app::App::Support, None) => {
            return Err(Failure::Usage(
                "--app support serves downloads: give it --files DIR (xload files generate DIR --count N writes one)".into(),
            ))
        }
        (_, Some(_)) => {
            return Err(Failure::Usage(format!(
                "--files: --app {} serves no files (only --app support does)",
                app.name()
            )))
        }
        (_, None) => None,
    };
    let listener = std::net::TcpListener::bind(a.listen)
        .map_err(|e| Failure::Run(format!("serve: cannot listen on {}: {e}", a.listen)))?;
    // std listens with a backlog of 128: the burst of connections that N
    // sessions starting within one think time open overflows it, and each
    // overflowed SYN costs its session a 1 s retransmit (a latency tail of
    // the first class that is the listener's, not the app's). Listening
    // again raises it; the kernel caps it at net.core.somaxconn.
    // SAFETY: a valid listening socket of ours.
    if unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&listener), 65535) } != 0 {
        return Err(Failure::Run(format!(
            "serve: listen on {}: {}",
            a.listen,
            std::io::Error::last_os_error()
        )));
    }
    let addr = listener
        .local_addr()
        .map_err(|e| Failure::Run(format!("serve: {e}")))?;
    crate::fd_limit::raise_fd_soft_limit();
    let server = Arc::new(crate::app::AppServer::new(
        app,
        a.drop_cookie.unwrap_or(0),
        a.delay,
        files,
    ));
    crate::outln!(
        "xload serve: --app {} listening on {}://{addr}/; /stats has the counters; Ctrl-C stops",
        app.name(),
        if tls.is_some() { "https" } else { "http" },
    );
    let started = Instant::now();
    let done = Arc::new(AtomicBool::new(false));
    let runner = {
        let (server, done, config) = (
            Arc::clone(&server),
            Arc::clone(&done),
            tls.map(|t| t.config),
        );
        std::thread::spawn(move || crate::app::run(server, listener, config, done))
    };
    while !stop.load(Ordering::Relaxed) && a.run_for.is_none_or(|d| started.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(50));
    }
    done.store(true, Ordering::Relaxed);
    runner
        .join()
        .map_err(|_| Failure::Run("serve --app: the acceptor panicked".into()))??;
    crate::outln!("xload serve: {}", server.stats_json().trim_end());
    Ok(0)
}
