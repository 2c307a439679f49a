//! `--engine xdp` through the built binary, in a veth lab each test builds
//! and removes (`ServerLab`: the server in a namespace, the generator end
//! here, the lab's spare `.3` as `--src-ip`): nginx's stub_status counts
//! exactly the requests xload reports at 100 and at 1,000 connections, also
//! with 1% of frames lost and 1% reordered each way (the engine's test-only
//! frame faults: this kernel has no netem); a closed port, a silent peer and
//! a server that resets give the other engines' error categories; the XDP
//! program is gone after a run and after Ctrl-C. Load goes only to the
//! lab's server address; every run is bounded (`-n` or `-d`, a hard kill).

mod support;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::run::exit_code;
use support::{read_json, run_xload_with_timeout, spawn_xload, Behavior, TempDir, TestServer};
use xload_xdp::lab::{ServerLab, ServerLabOptions};
use xload_xdp::netdev;

/// Hard kill for one run.
const HARD_TIMEOUT: Duration = Duration::from_secs(60);

fn nginx() -> Option<PathBuf> {
    std::env::var_os("NGINX")
        .map(PathBuf::from)
        .into_iter()
        .chain(["/usr/sbin/nginx", "/usr/bin/nginx"].map(PathBuf::from))
        .find(|p| p.is_file())
}

/// The lab, with nginx on port 80 when `with_nginx`; None (and a printed
/// reason) where this machine cannot build it.
fn lab(with_nginx: bool) -> Option<ServerLab> {
    if let Some(why) = xload_xdp::lab::unsupported() {
        eprintln!("skipped: {why}");
        return None;
    }
    let nginx = match (with_nginx, nginx()) {
        (true, None) => {
            eprintln!("skipped: no nginx");
            return None;
        }
        (_, n) => n,
    };
    let mut lab = ServerLab::new(ServerLabOptions::default()).expect("lab");
    if let (true, Some(path)) = (with_nginx, nginx) {
        lab.start_nginx(&path, 80).expect("nginx in the lab");
    }
    Some(lab)
}

/// nginx's stub_status request counter, read through the kernel's stack
/// (each read counts itself).
fn stub_requests(lab: &ServerLab) -> u64 {
    let addr = SocketAddr::from((lab.ip_srv, 80));
    xload_testkit::nginx_stub_requests(addr, Duration::from_secs(5))
}

/// What one run left behind.
struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
    json: Option<Value>,
}

impl Outcome {
    fn json(&self) -> &Value {
        self.json
            .as_ref()
            .unwrap_or_else(|| panic!("no JSON report\n{}", self.show()))
    }

    fn requests(&self) -> u64 {
        self.json()["requests"].as_u64().expect("requests")
    }

    /// The error counts by category, zeros left out.
    fn errors(&self) -> Vec<(String, u64)> {
        let Some(map) = self.json()["errors"].as_object() else {
            return Vec::new();
        };
        map.iter()
            .filter_map(|(k, v)| v.as_u64().filter(|&n| n > 0).map(|n| (k.clone(), n)))
            .collect()
    }

    fn reason(&self) -> &str {
        self.json()["engine_reason"].as_str().unwrap_or_default()
    }

    fn show(&self) -> String {
        format!(
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// `xload URL --engine xdp` on the lab's generator end with `args`.
fn run(lab: &ServerLab, url: &str, args: &[&str], env: Option<(&str, &str)>) -> Outcome {
    let dir = TempDir::new("xdp");
    let json_path = dir.join("report.json");
    let (dev, src) = (lab.dev_gen.clone(), lab.ip_user.to_string());
    let mut full = vec![url, "--engine", "xdp", "--dev", &dev, "--src-ip", &src];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--json", json_path.to_str().expect("utf-8 path")]);
    let (status, stdout, stderr, _) = match env {
        None => run_xload_with_timeout(&full, HARD_TIMEOUT),
        Some((k, v)) => {
            let mut cmd = std::process::Command::new(support::run::xload_bin());
            cmd.args(&full).env(k, v);
            let o = support::run::run_command_with_timeout(cmd, HARD_TIMEOUT);
            (o.status, o.stdout, o.stderr, o.elapsed)
        }
    };
    Outcome {
        code: exit_code(status),
        stdout,
        stderr,
        json: json_path.exists().then(|| read_json(&json_path)),
    }
}

/// The generator end carries no XDP program.
fn assert_detached(lab: &ServerLab, out: &Outcome) {
    let info = netdev::link_by_name(&lab.dev_gen).expect("generator end");
    assert_eq!(
        info.xdp_prog_id,
        None,
        "XDP program still attached\n{}",
        out.show()
    );
}

/// `-n N` at `conns` connections (pipelined `pipeline` deep): exactly N
/// responses, no errors, and nginx counted exactly N requests.
fn reconcile(lab: &ServerLab, conns: u64, n: u64, pipeline: u64, faults: Option<&str>) -> Outcome {
    let url = format!("http://{}/", lab.ip_srv);
    let before = stub_requests(lab);
    let (c, n_arg, p) = (conns.to_string(), n.to_string(), pipeline.to_string());
    let args = ["-c", &c, "-n", &n_arg, "--pipeline", &p, "--timeout", "10s"];
    let out = run(
        lab,
        &url,
        &args,
        faults.map(|f| ("XLOAD_XDP_TEST_FAULTS", f)),
    );
    let after = stub_requests(lab);
    assert_eq!(out.code, 0, "{}", out.show());
    assert_eq!(out.json()["engine"], "xdp", "{}", out.show());
    assert_eq!(out.requests(), n, "{}", out.show());
    assert_eq!(out.errors(), vec![], "{}", out.show());
    assert_eq!(
        out.json()["status"]["200"].as_u64(),
        Some(n),
        "{}",
        out.show()
    );
    // The second stub_status read counts itself.
    assert_eq!(after - before - 1, n, "nginx's count\n{}", out.show());
    assert_detached(lab, &out);
    out
}

#[test]
fn xdp_reconciles_with_nginx_exactly_at_100_and_1000_connections() {
    let Some(lab) = lab(true) else { return };
    let out = reconcile(&lab, 100, 20_000, 1, None);
    let reason = out.reason();
    assert!(
        reason.contains("AF_XDP on") && reason.contains("user-space TCP"),
        "{reason}"
    );
    assert!(
        out.stdout.contains("Engine      xdp: AF_XDP"),
        "{}",
        out.show()
    );
    reconcile(&lab, 1000, 20_000, 1, None);
}

/// A count in the Engine line: the number before `what`.
fn count_before(reason: &str, what: &str) -> u64 {
    let at = reason
        .find(what)
        .unwrap_or_else(|| panic!("no {what:?} in {reason}"));
    reason[..at]
        .split_whitespace()
        .last()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no count before {what:?} in {reason}"))
}

#[test]
fn xdp_completes_every_request_through_1_percent_loss_and_reordering_both_ways() {
    let Some(lab) = lab(true) else { return };
    let out = reconcile(&lab, 20, 5_000, 2, Some("drop=100,hold=100"));
    let reason = out.reason();
    assert!(count_before(reason, "frames dropped") > 50, "{reason}");
    assert!(count_before(reason, "held back") > 50, "{reason}");
    assert!(
        count_before(reason, "timeout and") + count_before(reason, "fast retransmissions") > 0,
        "lost frames were recovered by retransmissions: {reason}"
    );
}

#[test]
fn xdp_faults_give_the_other_engines_categories() {
    let Some(lab) = lab(false) else { return };
    let url = |port: u16| format!("http://{}:{port}/", lab.ip_srv);
    let short = ["-c", "4", "-d", "1s", "--timeout", "300ms"];

    // Nothing listens: RST to every SYN.
    let out = run(&lab, &url(81), &short, None);
    let errors = out.errors();
    assert_eq!(errors.len(), 1, "{errors:?}\n{}", out.show());
    assert_eq!(errors[0].0, "connect_refused", "{}", out.show());
    assert_detached(&lab, &out);

    // A server that resets every connection once it has read a request.
    let listener = netdev::in_netns(Some(&lab.ns), || TcpListener::bind((lab.ip_srv, 0)))
        .expect("enter the lab")
        .expect("bind in the lab");
    let server = TestServer::start_with(listener, Behavior::Reset);
    let out = run(&lab, &url(server.addr().port()), &short, None);
    let errors = out.errors();
    assert_eq!(errors.len(), 1, "{errors:?}\n{}", out.show());
    assert_eq!(errors[0].0, "reset", "{}", out.show());
    assert!(server.requests() >= errors[0].1, "{}", out.show());

    // A silent peer: the server answers ARP, but its SYN-ACKs to the
    // stack's address go nowhere.
    let user = format!("{}/32", lab.ip_user);
    lab.in_ns(&["ip", "route", "add", "blackhole", &user])
        .expect("blackhole route");
    let mut args = short.to_vec();
    args.extend_from_slice(&["--connect-timeout", "300ms"]);
    let out = run(&lab, &url(server.addr().port()), &args, None);
    let errors = out.errors();
    assert_eq!(errors.len(), 1, "{errors:?}\n{}", out.show());
    assert_eq!(errors[0].0, "connect_timeout", "{}", out.show());
    assert_detached(&lab, &out);
}

#[test]
fn xdp_program_is_detached_after_ctrl_c() {
    let Some(lab) = lab(true) else { return };
    let dir = TempDir::new("xdp-sigint");
    let json_path = dir.join("report.json");
    let url = format!("http://{}/", lab.ip_srv);
    let src = lab.ip_user.to_string();
    let child = spawn_xload([
        url.as_str(),
        "--engine",
        "xdp",
        "--dev",
        &lab.dev_gen,
        "--src-ip",
        &src,
        "-c",
        "10",
        "-d",
        "30s",
        "--json",
        json_path.to_str().expect("utf-8 path"),
    ]);
    let attached = |lab: &ServerLab| {
        netdev::link_by_name(&lab.dev_gen)
            .map(|l| l.xdp_prog_id.is_some())
            .unwrap_or(false)
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !attached(&lab) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(attached(&lab), "the program was never attached");
    // Some load first, so the report has responses.
    let deadline = Instant::now() + Duration::from_secs(20);
    while stub_requests(&lab) < 200 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    child.interrupt();
    let output = child.wait_timeout(Duration::from_secs(20));
    let out = Outcome {
        code: exit_code(output.status),
        stdout: output.stdout,
        stderr: output.stderr,
        json: json_path.exists().then(|| read_json(&json_path)),
    };
    assert_eq!(out.code, 130, "{}", out.show());
    assert!(out.requests() > 0, "{}", out.show());
    assert_eq!(out.json()["interrupted"], true, "{}", out.show());
    assert_detached(&lab, &out);
}

#[test]
fn xdp_needs_dev_and_src_ip() {
    let cases: [(&[&str], &str); 4] = [
        (&["--engine", "xdp"], "needs --dev"),
        (&["--engine", "xdp", "--dev", "lo"], "needs --src-ip"),
        (&["--dev", "lo"], "are for --engine xdp"),
        (
            &[
                "--engine",
                "xdp",
                "--dev",
                "no-such-dev0",
                "--src-ip",
                "10.0.0.3",
            ],
            "no-such-dev0",
        ),
    ];
    for (args, want) in cases {
        let mut full = vec!["http://127.0.0.1:9/", "-d", "1s"];
        full.extend_from_slice(args);
        let (status, _, stderr, _) = run_xload_with_timeout(&full, HARD_TIMEOUT);
        assert_eq!(exit_code(status), 2, "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}
