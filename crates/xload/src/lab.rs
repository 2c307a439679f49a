//! `xload lab`: the HTTP veth lab as a command. It builds a network namespace
//! with the server end of a veth pair (the generator end stays here), starts
//! nginx and/or `xload serve` in it, prints where everything is as one JSON
//! line, holds the lab until Ctrl-C, SIGTERM, `--for` or (with `--stdin`)
//! the end of standard input, and removes it all. benches/compare drives it.
//! A lab whose `xload lab` was killed outright (SIGKILL) is removed by the
//! next `xload lab`, or by `xload lab --clean` alone: its namespace's name
//! says which process owned it ([`xload_xdp::lab::remove_orphans`]).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use xload_xdp::lab::{LabServer, ServerLab, ServerLabOptions};

use crate::args::parse_duration;
use crate::Failure;

/// Port of nginx and of `xload serve` in the lab (the namespace is private).
const NGINX_PORT: u16 = 80;
const SERVE_PORT: u16 = 8080;

#[derive(Debug, Clone, Args)]
pub(crate) struct LabArgs {
    /// CPU of the server: servers started here and the server end's receive (RPS).
    #[arg(long = "server-cpu", default_value_t = 1)]
    pub server_cpu: usize,

    /// CPU of the generator end's receive (RPS); pin the generator there too.
    #[arg(long = "client-cpu", default_value_t = 0)]
    pub client_cpu: usize,

    /// Start nginx (one process, stub_status at /stub) on port 80 of the server address.
    #[arg(long = "nginx")]
    pub nginx: bool,

    /// Start `xload serve --body-size 0` (this binary) on port 8080 of the server address.
    #[arg(long = "serve")]
    pub serve: bool,

    /// Also end when standard input closes (a parent that dies takes the lab with it).
    #[arg(long = "stdin")]
    pub stdin: bool,

    /// Remove the lab after this long (default: until Ctrl-C).
    #[arg(long = "for", value_parser = parse_duration)]
    pub run_for: Option<Duration>,

    /// Only remove labs left by an `xload lab` that was killed (its owner
    /// process is gone): their servers, namespace and veth pair. Every
    /// `xload lab` does this first.
    #[arg(long = "clean", conflicts_with_all = ["nginx", "serve", "stdin", "run_for"])]
    pub clean: bool,
}

pub(crate) fn main_lab(a: &LabArgs, stop: Arc<AtomicBool>) -> Result<i32, Failure> {
    let allowed = xload_engine::pin::allowed_cpus().map_err(|e| Failure::Run(e.to_string()))?;
    for (what, cpu) in [
        ("--server-cpu", a.server_cpu),
        ("--client-cpu", a.client_cpu),
    ] {
        if !allowed.contains(&cpu) {
            return Err(Failure::Usage(format!(
                "{what} {cpu}: not available to this process (allowed: {allowed:?})"
            )));
        }
    }
    if let Some(why) = xload_xdp::lab::unsupported_netns() {
        return Err(Failure::Run(format!("lab: {why}")));
    }
    let removed = remove_orphans()?;
    if a.clean {
        if removed == 0 {
            eprintln!("xload lab: no lab left by a killed xload lab");
        }
        return Ok(0);
    }
    let nginx = match a.nginx {
        true => Some(nginx_binary().ok_or_else(|| {
            Failure::Run("lab: --nginx: no nginx ($NGINX, /usr/sbin/nginx or PATH)".into())
        })?),
        false => None,
    };
    let mut lab = ServerLab::new(ServerLabOptions {
        server_cpu: a.server_cpu,
        client_cpu: a.client_cpu,
    })
    .map_err(|e| Failure::Run(format!("lab: {e}")))?;
    let nginx = match &nginx {
        Some(bin) => Some(
            lab.start_nginx(bin, NGINX_PORT)
                .map_err(|e| Failure::Run(format!("lab: nginx: {e}")))?,
        ),
        None => None,
    };
    let serve = match a.serve {
        true => Some(start_serve(&mut lab)?),
        false => None,
    };
    crate::outln!("{}", describe(&lab, nginx.as_ref(), serve.as_ref()));
    eprintln!(
        "xload lab: namespace {}, generator end {} ({}) here, server end {} ({}) inside; \
         user-space address {}; Ctrl-C removes it",
        lab.ns, lab.dev_gen, lab.ip_gen, lab.dev_srv, lab.ip_srv, lab.ip_user
    );
    if a.stdin {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut sink = [0u8; 256];
            let mut input = std::io::stdin();
            while matches!(input.read(&mut sink), Ok(n) if n > 0) {}
            stop.store(true, Ordering::Relaxed);
        });
    }
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) && a.run_for.is_none_or(|d| started.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(lab);
    eprintln!("xload lab: removed");
    Ok(0)
}

/// Removes the labs whose owner is gone, saying each on stderr; how many.
fn remove_orphans() -> Result<usize, Failure> {
    let removed = xload_xdp::lab::remove_orphans()
        .map_err(|e| Failure::Run(format!("lab: removing a killed lab: {e}")))?;
    for o in &removed {
        let servers = match o.killed.len() {
            0 => String::new(),
            n => format!(", {n} server process(es) killed"),
        };
        eprintln!(
            "xload lab: removed {}, left by xload lab pid {} (gone){servers}",
            o.ns, o.owner
        );
    }
    Ok(removed.len())
}

fn start_serve(lab: &mut ServerLab) -> Result<LabServer, Failure> {
    let exe = std::env::current_exe().map_err(|e| Failure::Run(format!("lab: {e}")))?;
    let args: Vec<String> = [
        "serve",
        "--listen",
        &format!("{}:{SERVE_PORT}", lab.ip_srv),
        "--cpus",
        &lab.options.server_cpu.to_string(),
        "--body-size",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    lab.start_command(&exe, &args, SERVE_PORT, None)
        .map_err(|e| Failure::Run(format!("lab: xload serve: {e}")))
}

/// The one JSON line scripts read: names, addresses, servers.
fn describe(lab: &ServerLab, nginx: Option<&LabServer>, serve: Option<&LabServer>) -> String {
    let server = |s: Option<&LabServer>, path: &str| match s {
        Some(s) => serde_json::json!({"pid": s.pid, "url": format!("http://{}{path}", s.addr)}),
        None => serde_json::Value::Null,
    };
    serde_json::json!({
        "ns": lab.ns,
        "dev_gen": lab.dev_gen,
        "dev_srv": lab.dev_srv,
        "mac_gen": lab.mac_gen.to_string(),
        "mac_srv": lab.mac_srv.to_string(),
        "ip_gen": lab.ip_gen.to_string(),
        "ip_srv": lab.ip_srv.to_string(),
        "ip_user": lab.ip_user.to_string(),
        "server_cpu": lab.options.server_cpu,
        "client_cpu": lab.options.client_cpu,
        "nginx": server(nginx, "/"),
        "serve": server(serve, "/"),
    })
    .to_string()
}

/// `$NGINX` if set, else `/usr/sbin/nginx`, else `nginx` on PATH.
fn nginx_binary() -> Option<PathBuf> {
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
