//! A private nginx for tests: its own config, pid, logs and temp paths in a
//! temp dir, listening on a free `127.0.0.1` port, killed on drop.
//!
//! nginx runs as one process (`master_process off`, `daemon off`): that single
//! process is the worker, so pinning it with `sched_setaffinity` before exec
//! does what `worker_cpu_affinity` does with a master, and killing it leaves
//! no orphaned worker behind even if the test panics.
//!
//! Locations: `= /` answers `200` with an empty body, `= /small` answers `200`
//! with [`SMALL_BODY`], `/stub` is stub_status (the harness's own stub_status
//! requests are subtracted from the counters it reports), anything else 404.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::run::{free_port, TempDir};

/// Body of `GET /small`.
pub(crate) const SMALL_BODY: &str = "hello from nginx, a small body\n";

/// How long [`Nginx::start`] waits for the port to answer.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Options for [`Nginx::start`]; `NginxOptions::default()` fits most tests.
#[derive(Debug, Clone)]
pub(crate) struct NginxOptions {
    /// Pin nginx to this CPU (what `worker_cpu_affinity` does for a worker).
    pub cpu: Option<usize>,
    /// `worker_connections` (also sets `worker_rlimit_nofile` to twice it).
    pub worker_connections: usize,
    /// `keepalive_requests`: requests per keep-alive connection before nginx closes it.
    pub keepalive_requests: u64,
    /// Serve the files under this directory (`root`) instead of 404 for the
    /// paths no other location takes.
    pub root: Option<PathBuf>,
    /// Serve HTTPS on the port (stub_status then moves to a plain port of its own).
    pub tls: Option<NginxTls>,
    /// Listen on this Unix socket too (`listen unix:PATH`), beside the port.
    pub unix: Option<PathBuf>,
    /// Speak HTTP/2 on the port (`listen ... http2`: h2c with prior
    /// knowledge, or ALPN h2 with `tls`; stub_status then moves to a plain
    /// HTTP/1.1 port of its own).
    pub http2: bool,
}

/// `ssl_certificate`, `ssl_certificate_key` (PEM text) and `ssl_protocols`.
#[derive(Debug, Clone)]
pub(crate) struct NginxTls {
    pub cert_pem: String,
    pub key_pem: String,
    /// e.g. "TLSv1.2 TLSv1.3".
    pub protocols: String,
}

impl Default for NginxOptions {
    fn default() -> Self {
        NginxOptions {
            cpu: None,
            worker_connections: 4096,
            keepalive_requests: 1_000_000_000,
            root: None,
            tls: None,
            unix: None,
            http2: false,
        }
    }
}

/// The counters of one stub_status page, as nginx printed them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StubStatus {
    pub active: u64,
    pub accepts: u64,
    pub handled: u64,
    pub requests: u64,
    pub reading: u64,
    pub writing: u64,
    pub waiting: u64,
}

/// Parses nginx's stub_status page; None if it does not have that shape.
pub(crate) fn parse_stub_status(page: &str) -> Option<StubStatus> {
    let number_after = |label: &str| -> Option<u64> {
        let at = page.find(label)? + label.len();
        page[at..].split_whitespace().next()?.parse().ok()
    };
    let header = "server accepts handled requests";
    let at = page.find(header)? + header.len();
    let mut totals = page[at..].split_whitespace().map(str::parse::<u64>);
    let (accepts, handled, requests) = (
        totals.next()?.ok()?,
        totals.next()?.ok()?,
        totals.next()?.ok()?,
    );
    Some(StubStatus {
        active: number_after("Active connections:")?,
        accepts,
        handled,
        requests,
        reading: number_after("Reading:")?,
        writing: number_after("Writing:")?,
        waiting: number_after("Waiting:")?,
    })
}

/// Where nginx is: `$NGINX` if set, else `/usr/sbin/nginx`, else `nginx` on PATH.
pub(crate) fn nginx_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("NGINX") {
        return Some(PathBuf::from(path));
    }
    let sbin = Path::new("/usr/sbin/nginx");
    if sbin.is_file() {
        return Some(sbin.to_path_buf());
    }
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join("nginx"))
        .find(|candidate| candidate.is_file())
}

/// The config [`Nginx::start`] writes, for a given prefix dir and port
/// (`stub_port`: stub_status's plain port when `options.tls` is set).
pub(crate) fn render_config(
    dir: &Path,
    port: u16,
    stub_port: u16,
    options: &NginxOptions,
) -> String {
    // nginx 1.22 (Debian 12) has `listen ... http2`; `http2 on;` came in 1.25.
    let h2 = if options.http2 { " http2" } else { "" };
    let stub_server = format!(
        "    server {{\n        listen 127.0.0.1:{stub_port};\n        \
         location /stub {{ stub_status; }}\n    }}\n"
    );
    let (listen, stub_server) = match &options.tls {
        None if options.http2 => (format!("listen 127.0.0.1:{port}{h2};"), stub_server),
        None => (format!("listen 127.0.0.1:{port};"), String::new()),
        Some(t) => (
            format!(
                "listen 127.0.0.1:{port} ssl{h2};\n        ssl_certificate {d}/cert.pem;\n        \
                 ssl_certificate_key {d}/key.pem;\n        ssl_protocols {p};",
                d = dir.display(),
                p = t.protocols
            ),
            stub_server,
        ),
    };
    let listen = match &options.unix {
        Some(path) => format!("{listen}\n        listen unix:{};", path.display()),
        None => listen,
    };
    let dir = dir.display();
    format!(
        r#"daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
worker_rlimit_nofile {nofile};
events {{
    worker_connections {conns};
}}
http {{
    access_log off;
    default_type text/plain;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    keepalive_requests {keepalive};
    keepalive_timeout 75s;
    server {{
        {listen}
        server_name localhost;
        location = / {{ return 200 ""; }}
        location = /small {{ return 200 "{small}"; }}
        location /stub {{ stub_status; }}
        location / {{ {fallback} }}
    }}
{stub_server}}}
"#,
        nofile = options.worker_connections * 2,
        conns = options.worker_connections,
        keepalive = options.keepalive_requests,
        small = SMALL_BODY.replace('\n', "\\n"),
        fallback = match &options.root {
            Some(root) => format!("root {};", root.display()),
            None => "return 404;".to_string(),
        },
    )
}

/// A running private nginx; killed (SIGTERM, then SIGKILL) on drop.
pub(crate) struct Nginx {
    child: Child,
    port: u16,
    /// Where stub_status answers (plain HTTP; `port` unless it speaks TLS).
    stub_port: u16,
    tls: bool,
    dir: TempDir,
    /// Connections and completed requests the harness itself made to `/stub`.
    own_connections: AtomicU64,
    own_requests: AtomicU64,
}

impl Nginx {
    /// Starts nginx, or returns None (after saying why on stderr) when nginx
    /// is not installed. Panics when nginx is installed but does not start:
    /// that is a failure to see, not a reason to skip.
    pub(crate) fn start(options: NginxOptions) -> Option<Nginx> {
        let Some(binary) = nginx_binary() else {
            eprintln!("nginx not installed (no $NGINX, /usr/sbin/nginx or nginx on PATH): skipping the nginx part");
            return None;
        };
        let mut last_failure = String::new();
        // A free port can be taken between probing and nginx's bind: retry.
        for _attempt in 0..5 {
            match Self::start_once(&binary, &options) {
                Ok(nginx) => return Some(nginx),
                Err(failure) => last_failure = failure,
            }
        }
        panic!("nginx ({}) did not start: {last_failure}", binary.display());
    }

    fn start_once(binary: &Path, options: &NginxOptions) -> Result<Nginx, String> {
        let dir = TempDir::new("nginx");
        let port = free_port();
        let stub_port = match &options.tls {
            None if options.http2 => free_port(),
            None => port,
            Some(t) => {
                std::fs::write(dir.join("cert.pem"), &t.cert_pem).map_err(|e| e.to_string())?;
                std::fs::write(dir.join("key.pem"), &t.key_pem).map_err(|e| e.to_string())?;
                free_port()
            }
        };
        let config_path = dir.join("nginx.conf");
        std::fs::write(
            &config_path,
            render_config(dir.path(), port, stub_port, options),
        )
        .map_err(|e| format!("write {}: {e}", config_path.display()))?;
        let stderr_log = std::fs::File::create(dir.join("stderr.log"))
            .map_err(|e| format!("stderr.log: {e}"))?;
        let mut command = Command::new(binary);
        command
            .arg("-p")
            .arg(format!("{}/", dir.path().display()))
            .arg("-e")
            .arg(dir.join("error.log"))
            .arg("-c")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr_log);
        if let Some(cpu) = options.cpu {
            // SAFETY: the closure runs in the forked child before exec and only
            // calls the async-signal-safe sched_setaffinity(2) on a cpu_set_t
            // built on its own stack; it allocates nothing and takes no lock.
            unsafe {
                command.pre_exec(move || {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = command
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", binary.display()))?;
        let mut nginx = Nginx {
            child,
            port,
            stub_port,
            tls: options.tls.is_some(),
            dir,
            own_connections: AtomicU64::new(0),
            own_requests: AtomicU64::new(0),
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = nginx.child.try_wait() {
                return Err(format!(
                    "exited with {status} before accepting\n{}",
                    nginx.logs()
                ));
            }
            if let Ok(first) = nginx.try_stub_status() {
                // All nginx has counted so far is the harness's probing; a
                // probe that reached another process (a port reused in the
                // gap) was counted above but not by nginx.
                nginx.own_connections.store(first.accepts, Ordering::SeqCst);
                nginx.own_requests.store(first.requests, Ordering::SeqCst);
                return Ok(nginx);
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "not answering on port {port} after {START_TIMEOUT:?}\n{}",
                    nginx.logs()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `http://127.0.0.1:PORT` (`https://` with TLS) followed by `path`
    /// (`/` empty body, `/small`, `/stub`).
    pub(crate) fn url(&self, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}{path}", self.port)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The prefix dir holding the config, pid file and logs.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// nginx's stderr and error log, for failure messages.
    pub(crate) fn logs(&self) -> String {
        let read = |name: &str| std::fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        format!(
            "--- stderr\n{}--- error.log\n{}",
            read("stderr.log"),
            read("error.log")
        )
    }

    fn try_stub_status(&self) -> Result<StubStatus, String> {
        let stub = SocketAddr::from(([127, 0, 0, 1], self.stub_port));
        let mut stream = TcpStream::connect_timeout(&stub, Duration::from_secs(2))
            .map_err(|e| format!("connect: {e}"))?;
        // From here on nginx has counted an accepted connection.
        self.own_connections.fetch_add(1, Ordering::SeqCst);
        let timeout = Some(Duration::from_secs(5));
        stream
            .set_read_timeout(timeout)
            .and_then(|()| stream.set_write_timeout(timeout))
            .map_err(|e| e.to_string())?;
        stream
            .write_all(b"GET /stub HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .map_err(|e| format!("send stub_status request: {e}"))?;
        let mut response = Vec::new();
        stream
            .read_to_end(&mut response)
            .map_err(|e| format!("read stub_status: {e}"))?;
        let text = String::from_utf8_lossy(&response);
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, body)| body)
            .unwrap_or_default();
        let status =
            parse_stub_status(body).ok_or_else(|| format!("not a stub_status page: {text:?}"))?;
        // A complete page means nginx counted this request.
        self.own_requests.fetch_add(1, Ordering::SeqCst);
        Ok(status)
    }

    /// The stub_status counters minus the harness's own `/stub` connections
    /// and requests (including the one that read them). Gauges (`active`,
    /// `reading`, `writing`, `waiting`) include the `/stub` connection itself.
    pub(crate) fn status(&self) -> StubStatus {
        let raw = self
            .try_stub_status()
            .unwrap_or_else(|e| panic!("nginx stub_status: {e}\n{}", self.logs()));
        let own_connections = self.own_connections.load(Ordering::SeqCst);
        let own_requests = self.own_requests.load(Ordering::SeqCst);
        StubStatus {
            accepts: raw.accepts - own_connections,
            handled: raw.handled - own_connections,
            requests: raw.requests - own_requests,
            ..raw
        }
    }

    /// Requests nginx has received from everyone but the harness.
    pub(crate) fn requests(&self) -> u64 {
        self.status().requests
    }

    /// Connections nginx has accepted from everyone but the harness.
    pub(crate) fn accepted(&self) -> u64 {
        self.status().accepts
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SAFETY: kill(2) has no memory-safety preconditions; the pid is our
        // child and has not been reaped, so it cannot have been reused.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
