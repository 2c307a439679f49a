//! `xload capacity`: the lab of docs/capacity.md. Two network namespaces
//! joined by a veth pair, nginx in the server one, both reached with
//! `--rsh 'ip netns exec {host}'`; the profiles are applied with xtune.
//! Needs root, `ip` and nginx (skipped with a note otherwise); the
//! namespaces and nginx are removed on drop, even when a test fails. Steps
//! are short (about a second) and few; the lab tests run one at a time.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::netns::ip;
use support::nginx::nginx_binary;
use support::run::{exit_code, xload_bin, XloadChild};
use support::TempDir;

/// One lab at a time: their loads would disturb each other's evidence.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const SERVER_IP: &str = "10.79.0.1";
const CLIENT_IP: &str = "10.79.0.2";
const PORT: u16 = 8080;

/// The xtune binary beside xload's, built when this test run did not build it.
fn xtune_bin() -> PathBuf {
    let path = Path::new(xload_bin()).with_file_name("xtune");
    if !path.is_file() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-p", "xtune", "--bin", "xtune"]);
        if xload_bin().contains("/release/") {
            cmd.arg("--release");
        }
        let ok = cmd
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok && path.is_file(),
            "cannot build xtune at {}",
            path.display()
        );
    }
    path
}

/// A server namespace with nginx, a client namespace, a veth between them.
struct Lab {
    dir: TempDir,
    server: String,
    client: String,
    server_dev: String,
    client_dev: String,
    nginx: Option<XloadChild>,
    nginx_bin: PathBuf,
}

impl Lab {
    fn new(tag: &str) -> Option<Lab> {
        let Some(nginx_bin) = nginx_binary() else {
            eprintln!("note: skipped, nginx is not installed");
            return None;
        };
        let prefix = format!("xc{:x}{tag}", std::process::id() & 0xfff);
        let lab = Lab {
            dir: TempDir::new("capacity"),
            server: format!("{prefix}s"),
            client: format!("{prefix}c"),
            server_dev: format!("{prefix}vs"),
            client_dev: format!("{prefix}vc"),
            nginx: None,
            nginx_bin,
        };
        if let Err(e) = ip(&["netns", "add", &lab.server]) {
            eprintln!("note: skipped, cannot make network namespaces: {e}");
            return None;
        }
        ip(&["netns", "add", &lab.client]).expect("client namespace");
        ip(&[
            "link",
            "add",
            &lab.client_dev,
            "type",
            "veth",
            "peer",
            "name",
            &lab.server_dev,
        ])
        .expect("veth");
        for (ns, dev, addr) in [
            (&lab.server, &lab.server_dev, SERVER_IP),
            (&lab.client, &lab.client_dev, CLIENT_IP),
        ] {
            ip(&["link", "set", dev, "netns", ns]).expect("move veth end");
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev]).expect("address");
            ip(&["-n", ns, "link", "set", dev, "up"]).expect("up");
            ip(&["-n", ns, "link", "set", "lo", "up"]).expect("lo up");
        }
        lab.dir.mkdir("tmp");
        Some(lab)
    }

    /// (Re)starts nginx: one process, `worker_connections` as given, the
    /// listen backlog asked large (the kernel caps it at somaxconn, read now).
    fn start_nginx(&mut self, worker_connections: usize) {
        self.stop_nginx();
        let d = self.dir.path().display().to_string();
        let conf = format!(
            "daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid; error_log {d}/error.log;\n\
             events {{ worker_connections {worker_connections}; }}\n\
             http {{ access_log off; keepalive_requests 1000000;\n\
             client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp; uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;\n\
             server {{ listen {SERVER_IP}:{PORT} backlog=4096; location / {{ return 200 \"ok\\n\"; }} }} }}\n"
        );
        let path = self.dir.file("nginx.conf", &conf);
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.server]);
        cmd.arg(&self.nginx_bin).args(["-c", &path]);
        self.nginx = Some(XloadChild::spawn(cmd));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out = Command::new("ip")
                .args(["netns", "exec", &self.server, "ss", "-ltnH"])
                .output()
                .expect("ss");
            if String::from_utf8_lossy(&out.stdout).contains(&format!("{SERVER_IP}:{PORT}")) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "nginx did not listen: {}",
                self.dir.get("error.log")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stop_nginx(&mut self) {
        if let Some(n) = self.nginx.take() {
            n.signal(libc::SIGKILL);
            let _ = n.wait_timeout(Duration::from_secs(5));
        }
    }

    /// `xtune apply --netns NS` of a profile written to the lab's directory.
    fn apply(&self, ns: &str, name: &str, profile: &str) -> String {
        let path = self.dir.file(name, profile);
        let out = Command::new(xtune_bin())
            .args([
                "apply",
                "--netns",
                ns,
                "--state-dir",
                &self.dir.join_str("state"),
                &path,
            ])
            .output()
            .expect("xtune");
        assert!(
            out.status.success(),
            "xtune apply: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        path
    }

    fn plan(
        &self,
        name: &str,
        server_profile: &str,
        client_profile: Option<&str>,
        procedure: &str,
    ) -> String {
        let client = client_profile.map_or(String::new(), |p| format!("profile = \"{p}\"\n"));
        let text = format!(
            "target = \"http://{SERVER_IP}:{PORT}/\"\nrsh = \"ip netns exec {{host}}\"\n\n\
             [server]\nhost = \"{}\"\nprofile = \"{server_profile}\"\nprocess = \"nginx\"\n\n\
             [[clients]]\nhost = \"{}\"\n{client}\n[procedure]\n{procedure}",
            self.server, self.client
        );
        self.dir.file(name, &text)
    }

    /// `xload capacity ARGS`: (exit code, stdout, stderr).
    fn capacity(&self, args: &[&str]) -> (i32, String, String) {
        let mut cmd = Command::new(xload_bin());
        cmd.arg("capacity").args(args);
        cmd.args(["--remote-xload", xload_bin(), "--remote-xtune"])
            .arg(xtune_bin());
        let out = XloadChild::spawn(cmd).wait_timeout(Duration::from_secs(120));
        assert!(!out.timed_out, "xload capacity hangs: {out:?}");
        (exit_code(out.status), out.stdout, out.stderr)
    }

    fn json(&self, name: &str) -> Value {
        serde_json::from_str(&self.dir.get(name)).expect("JSON report")
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.stop_nginx();
        for ns in [&self.server, &self.client] {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

fn steps(r: &Value) -> &Vec<Value> {
    r["steps"].as_array().expect("steps")
}

#[test]
fn somaxconn_64_overflows_the_listen_queue_4096_does_not_and_compare_shows_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut lab) = Lab::new("q") else { return };
    // nginx holds 128 connections; 384 opened at once leave 256 waiting in
    // the accept queue, far more than a backlog of 64 holds.
    let procedure = "levels = [16, 384]\nduration = \"1s\"\nwarmup = \"300ms\"\ncooldown = \"200ms\"\nconfirmations = 1\nmax_trials = 0\nargs = [\"--connect-rate\", \"0\", \"-t\", \"2\"]\n";
    let p64 = lab.apply(
        &lab.server,
        "s64.toml",
        "[sysctl]\nnet.core.somaxconn = 64\n",
    );
    lab.start_nginx(128);
    let plan = lab.plan("round1.toml", &p64, None, procedure);
    let (r1, h1) = (lab.dir.join_str("r1.json"), lab.dir.join_str("r1.html"));
    let (code, stdout, stderr) = lab.capacity(&[&plan, "--json", &r1, "--html", &h1]);
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    let r = lab.json("r1.json");
    assert_eq!(r["schema"], "xload-capacity/1");
    let overflow = steps(&r)
        .iter()
        .find(|s| s["verdict"]["limit"] == "listen_queue")
        .unwrap_or_else(|| panic!("no step names the listen queue: {stderr}"));
    assert_eq!(overflow["level"], 384.0);
    let delta = overflow["server"]["tcp"]["ListenOverflows"]
        .as_i64()
        .unwrap_or(0);
    let text = overflow["verdict"]["text"].as_str().unwrap();
    assert!(
        delta > 0 && text.contains(&format!("ListenOverflows +{delta}")),
        "{text}"
    );
    assert!(overflow["verdict"]["change"]
        .as_str()
        .unwrap()
        .contains("net.core.somaxconn"));
    assert_eq!(r["maximum"]["level"], 16.0);
    assert_eq!(r["maximum"]["confirmed"], true);
    assert_eq!(r["tuning"][0]["knobs"][0]["actual"], "64");
    // Every step has per-second evidence of both hosts and the server process's CPU.
    for s in steps(&r) {
        assert!(s["server"]["seconds"].as_u64().unwrap() >= 1, "{s}");
        assert!(s["server"]["process_cpu_pct"].as_f64().is_some(), "{s}");
        assert!(s["clients"][0]["evidence"]["seconds"].as_u64().unwrap() >= 1);
        assert!(s["clients"][0]["verdict"].as_str().is_some());
    }
    let html = lab.dir.get("r1.html");
    assert!(html.contains("<svg") && html.contains("listen queue overflow"));
    assert!(!html.contains("<script") && !html.contains("src=") && !html.contains("href="));
    assert!(stdout.contains("| 384 | step |"), "{stdout}");

    // Round 2: the accept queue as large as nginx asks.
    let p4096 = lab.apply(
        &lab.server,
        "s4096.toml",
        "[sysctl]\nnet.core.somaxconn = 4096\n",
    );
    lab.start_nginx(128);
    let plan = lab.plan("round2.toml", &p4096, None, procedure);
    let r2 = lab.dir.join_str("r2.json");
    let (code, stdout, stderr) = lab.capacity(&[&plan, "--json", &r2]);
    assert!(code == 0 || code == 3, "{stderr}\n{stdout}");
    let r = lab.json("r2.json");
    for s in steps(&r) {
        assert_ne!(s["verdict"]["limit"], "listen_queue", "{stderr}");
        assert_eq!(
            s["server"]["tcp"]["ListenOverflows"].as_i64().unwrap_or(0),
            0
        );
    }
    let (code, log, stderr) = lab.capacity(&[
        "--compare",
        &r1,
        &r2,
        "--html",
        &lab.dir.join_str("log.html"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(log.contains("sysctl:net.core.somaxconn 64 → 4096"), "{log}");
    assert!(
        log.contains("| R1 |") && log.contains("| R2 |") && log.contains("16 connections"),
        "{log}"
    );
    assert!(lab.dir.get("log.html").contains("Tuning log"));
}

#[test]
fn receive_steered_to_one_cpu_names_that_cpus_softirq() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("note: skipped, one CPU: nothing to steer between");
        return;
    }
    let Some(mut lab) = Lab::new("r") else { return };
    lab.start_nginx(1024);
    // Both ends' receive on one CPU, then on another: the verdict follows.
    for cpu in [0, 1] {
        let rps = |dev: &str| format!("[rps]\n{dev} = \"{cpu}\"\n");
        let sp = lab.apply(
            &lab.server,
            &format!("srps{cpu}.toml"),
            &rps(&lab.server_dev),
        );
        let cp = lab.apply(
            &lab.client,
            &format!("crps{cpu}.toml"),
            &rps(&lab.client_dev),
        );
        let plan = lab.plan(
            &format!("rps{cpu}.toml"),
            &sp,
            Some(&cp),
            "levels = [16, 32]\nduration = \"1500ms\"\nwarmup = \"300ms\"\ncooldown = \"200ms\"\nconfirmations = 0\nargs = [\"-t\", \"2\"]\n",
        );
        let out = lab.dir.join_str(&format!("rps{cpu}.json"));
        let (code, stdout, stderr) = lab.capacity(&[&plan, "--json", &out]);
        assert_eq!(code, 0, "{stderr}\n{stdout}");
        let r = lab.json(&format!("rps{cpu}.json"));
        let named: Vec<&Value> = steps(&r)
            .iter()
            .filter(|s| s["verdict"]["limit"] == "softirq_one_cpu")
            .collect();
        assert!(
            named.iter().any(|s| s["verdict"]["cpu"] == cpu),
            "receive steered to cpu{cpu}, verdicts: {}",
            steps(&r)
                .iter()
                .map(|s| s["verdict"]["text"].to_string())
                .collect::<Vec<_>>()
                .join("; ")
        );
        assert!(named
            .iter()
            .all(|s| s["verdict"]["change"].as_str().unwrap().contains("rps")));
        assert_eq!(r["tuning"][1]["role"], "client");
    }
}

#[test]
fn drift_refuses_the_run_and_allow_drift_runs_and_says_so() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut lab) = Lab::new("d") else { return };
    let profile = lab.apply(
        &lab.server,
        "s64.toml",
        "[sysctl]\nnet.core.somaxconn = 64\n",
    );
    // Someone changed it since.
    let ok = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.server,
            "sh",
            "-c",
            "echo 128 > /proc/sys/net/core/somaxconn",
        ])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "sysctl in the namespace");
    lab.start_nginx(1024);
    let plan = lab.plan(
        "drift.toml",
        &profile,
        None,
        "levels = [8]\nduration = \"500ms\"\nwarmup = \"0s\"\nconfirmations = 0\n",
    );
    let (code, stdout, stderr) = lab.capacity(&[&plan]);
    assert_eq!(code, 1, "{stderr}\n{stdout}");
    assert!(
        stderr.contains(&format!("server {}", lab.server)),
        "{stderr}"
    );
    assert!(
        stderr.contains("sysctl:net.core.somaxconn wanted 64, actual 128"),
        "{stderr}"
    );
    assert!(stderr.contains("--allow-drift"), "{stderr}");
    assert!(stdout.is_empty(), "nothing measured: {stdout}");

    let json = lab.dir.join_str("d.json");
    let html = lab.dir.join_str("d.html");
    let (code, stdout, stderr) =
        lab.capacity(&[&plan, "--allow-drift", "--json", &json, "--html", &html]);
    assert_eq!(code, 0, "{stderr}\n{stdout}");
    assert!(stderr.contains("running with drift"), "{stderr}");
    let r = lab.json("d.json");
    let drift = r["drift"][0].as_str().unwrap();
    assert!(
        drift.contains("sysctl:net.core.somaxconn") && drift.contains(&lab.server),
        "{drift}"
    );
    // First thing the reader sees: right after the headline.
    let md_head: Vec<&str> = stdout.lines().take(6).collect();
    assert!(
        md_head.iter().any(|l| l.contains("Run with drift")),
        "{stdout}"
    );
    let page = lab.dir.get("d.html");
    let (drift_at, steps_at) = (page.find("Run with drift"), page.find("Verdict per step"));
    assert!(
        drift_at.is_some() && drift_at < steps_at,
        "the drift comes first"
    );
}
