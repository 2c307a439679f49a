//! `xload lab` through the built binary: it prints where the lab is as one
//! JSON line, nginx and `xload serve` answer from inside the namespace, RPS
//! is set on both ends, and the namespace, the veth pair and the servers are
//! gone after SIGTERM and after its standard input closes. Only the lab's own
//! addresses are contacted.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const XLOAD: &str = env!("CARGO_BIN_EXE_xload");

macro_rules! need_root {
    () => {
        if let Some(why) = xload_xdp::lab::unsupported_netns() {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

/// The lab process; SIGTERM and a bounded wait on drop, so a failing test
/// still removes its namespace.
struct LabProcess {
    child: Child,
    info: serde_json::Value,
}

impl LabProcess {
    fn start(args: &[&str]) -> LabProcess {
        let mut child = Command::new(XLOAD)
            .arg("lab")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn xload lab");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the lab's JSON line");
        if line.is_empty() {
            let mut err = String::new();
            let _ = child
                .stderr
                .take()
                .expect("stderr")
                .read_to_string(&mut err);
            let _ = child.wait();
            panic!("xload lab printed nothing; stderr: {err}");
        }
        let info = serde_json::from_str(&line).expect("the first line is JSON");
        LabProcess { child, info }
    }

    fn field(&self, key: &str) -> String {
        self.info[key].as_str().unwrap_or_default().to_string()
    }

    /// Waits at most `limit` for the exit; true if it exited with 0.
    fn wait_exit(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for LabProcess {
    fn drop(&mut self) {
        // Already reaped (the test killed it): its pid may be another's now.
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        if !self.wait_exit(Duration::from_secs(10)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Status code of `GET path` on the `http://ip:port/` of `url`.
fn get_status(url: &str) -> u16 {
    let hostport = url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = TcpStream::connect(hostport).expect("connect into the lab");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut head = String::new();
    let _ = s.read_to_string(&mut head);
    head.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn netns_exists(ns: &str) -> bool {
    std::path::Path::new("/run/netns").join(ns).exists()
}

fn link_exists(dev: &str) -> bool {
    std::path::Path::new("/sys/class/net").join(dev).exists()
}

fn has_nginx() -> bool {
    std::path::Path::new("/usr/sbin/nginx").is_file() || std::env::var_os("NGINX").is_some()
}

#[test]
fn lab_serves_from_its_namespace_and_is_gone_after_sigterm() {
    need_root!();
    let _one = one_lab_at_a_time();
    let with_nginx = has_nginx();
    let args: &[&str] = if with_nginx {
        &[
            "--nginx",
            "--serve",
            "--server-cpu",
            "1",
            "--client-cpu",
            "0",
        ]
    } else {
        eprintln!("no nginx: checking xload serve only");
        &["--serve"]
    };
    let mut lab = LabProcess::start(args);
    let (ns, gen) = (lab.field("ns"), lab.field("dev_gen"));
    assert!(netns_exists(&ns) && link_exists(&gen), "{}", lab.info);
    let rps = std::fs::read_to_string(format!("/sys/class/net/{gen}/queues/rx-0/rps_cpus"))
        .expect("rps_cpus of the generator end");
    assert_eq!(rps.trim().trim_start_matches('0'), "1", "RPS to CPU 0");
    let serve_url = lab.info["serve"]["url"]
        .as_str()
        .expect("serve url")
        .to_string();
    assert_eq!(get_status(&serve_url), 200);
    if with_nginx {
        let nginx_url = lab.info["nginx"]["url"]
            .as_str()
            .expect("nginx url")
            .to_string();
        assert_eq!(get_status(&nginx_url), 200);
    }
    let pids: Vec<u64> = ["nginx", "serve"]
        .iter()
        .filter_map(|k| lab.info[k]["pid"].as_u64())
        .collect();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(lab.child.id() as libc::pid_t, libc::SIGTERM) };
    assert!(
        lab.wait_exit(Duration::from_secs(10)),
        "exit 0 after SIGTERM"
    );
    assert!(!netns_exists(&ns), "namespace {ns} left behind");
    assert!(!link_exists(&gen), "veth end {gen} left behind");
    for pid in pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "server {pid} left running"
        );
    }
}

#[test]
fn lab_with_stdin_goes_when_its_parent_closes_the_pipe() {
    need_root!();
    let _one = one_lab_at_a_time();
    let mut lab = LabProcess::start(&["--stdin", "--serve"]);
    let ns = lab.field("ns");
    assert!(netns_exists(&ns));
    drop(lab.child.stdin.take());
    assert!(
        lab.wait_exit(Duration::from_secs(10)),
        "exit 0 after stdin closed"
    );
    assert!(!netns_exists(&ns), "namespace {ns} left behind");
}

#[test]
fn lab_rejects_a_cpu_it_does_not_have() {
    let _one = one_lab_at_a_time();
    let out = Command::new(XLOAD)
        .args(["lab", "--server-cpu", "4096"])
        .output()
        .expect("run xload lab");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--server-cpu 4096"));
}

/// A lab namespace this test left without its owner: on drop (the test
/// failed before the lab was removed), the processes inside (the lab's own
/// servers) are killed and the namespace deleted.
struct Orphaned(String);

impl Drop for Orphaned {
    fn drop(&mut self) {
        if !netns_exists(&self.0) {
            return;
        }
        let out = Command::new("ip")
            .args(["netns", "pids", &self.0])
            .output()
            .expect("ip netns pids");
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            if let Ok(pid) = pid.parse::<libc::pid_t>() {
                // SAFETY: kill(2) on a server of this test's own lab.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        std::thread::sleep(Duration::from_millis(200));
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// SIGKILLs the lab (no chance to clean up) and returns what it left.
fn kill_outright(mut lab: LabProcess) -> (Orphaned, String, u64) {
    let (ns, gen) = (lab.field("ns"), lab.field("dev_gen"));
    let serve_pid = lab.info["serve"]["pid"].as_u64().expect("serve pid");
    lab.child.kill().expect("SIGKILL the lab");
    lab.child.wait().expect("reap the lab");
    // What the issue found: everything is still there.
    assert!(netns_exists(&ns) && link_exists(&gen), "{ns} {gen}");
    assert!(std::path::Path::new(&format!("/proc/{serve_pid}")).exists());
    (Orphaned(ns), gen, serve_pid)
}

fn assert_removed(ns: &str, gen: &str, serve_pid: u64) {
    assert!(!netns_exists(ns), "namespace {ns} left behind");
    let deadline = Instant::now() + Duration::from_secs(5);
    while link_exists(gen) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!link_exists(gen), "veth end {gen} left behind");
    // Gone, or a zombie its new parent (init) has yet to reap.
    let state = std::fs::read_to_string(format!("/proc/{serve_pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim().to_string()))
        .and_then(|rest| rest.chars().next());
    assert!(
        matches!(state, None | Some('Z')),
        "server {serve_pid} left running (state {state:?})"
    );
}

/// The tests run `xload lab` one at a time: every `xload lab` (even one that
/// then refuses its arguments) removes every orphan first, and a test that
/// leaves one must see it removed by what it runs, not by a neighbour.
static ORPHANS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_lab_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ORPHANS.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn lab_clean_removes_a_killed_labs_leftovers_and_spares_a_live_lab() {
    need_root!();
    let _one = one_lab_at_a_time();
    let live = LabProcess::start(&["--serve"]);
    let (orphan, gen, serve_pid) = kill_outright(LabProcess::start(&["--serve"]));
    let out = Command::new(XLOAD)
        .args(["lab", "--clean"])
        .output()
        .expect("run xload lab --clean");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains(&orphan.0), "names what it removed: {err}");
    assert_removed(&orphan.0, &gen, serve_pid);
    // The live lab is untouched and still answers.
    assert!(netns_exists(&live.field("ns")), "{err}");
    let url = live.info["serve"]["url"].as_str().expect("url").to_string();
    assert_eq!(get_status(&url), 200);
}

#[test]
fn a_new_lab_removes_a_killed_labs_leftovers_first() {
    need_root!();
    let _one = one_lab_at_a_time();
    let (orphan, gen, serve_pid) = kill_outright(LabProcess::start(&["--serve"]));
    let mut lab = LabProcess::start(&["--serve", "--for", "1s"]);
    assert!(lab.wait_exit(Duration::from_secs(20)), "the new lab ran");
    assert_removed(&orphan.0, &gen, serve_pid);
}
