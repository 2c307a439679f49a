//! `xload --on`: one run from several generator hosts. The hosts are three
//! network namespaces, each joined by a veth pair to a fourth that runs
//! `xload serve`; `--rsh 'ip netns exec {host}'` reaches them. Needs root
//! and `ip`; the namespaces are removed on drop, even when a test fails.
//! Runs are short: 600 requests at 600 req/s in all.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use support::netns::ip;
use support::run::{exit_code, xload_bin, XloadChild};
use support::TempDir;
use xload_stats::{decode_histogram, new_latency_histogram, Report};

/// The address `xload serve` listens on, inside the server namespace.
const TARGET: &str = "10.77.100.1";
const PORT: u16 = 8080;

/// Three client namespaces and a server namespace, removed on drop.
struct Lab {
    server_ns: String,
    clients: Vec<String>,
    server: Option<XloadChild>,
}

impl Lab {
    /// Builds the lab under names starting with `tag`; None (and a note)
    /// when namespaces cannot be made here (not root, no `ip`).
    fn new(tag: &str) -> Option<Lab> {
        let prefix = format!("xo{:x}{tag}", std::process::id() & 0xfff);
        let mut lab = Lab {
            server_ns: format!("{prefix}s"),
            clients: Vec::new(),
            server: None,
        };
        if let Err(e) = ip(&["netns", "add", &lab.server_ns]) {
            eprintln!("note: skipped, cannot make network namespaces: {e}");
            return None;
        }
        let srv = lab.server_ns.clone();
        ip(&["-n", &srv, "link", "set", "lo", "up"]).expect("lo up");
        ip(&[
            "-n",
            &srv,
            "addr",
            "add",
            &format!("{TARGET}/32"),
            "dev",
            "lo",
        ])
        .expect("target");
        for i in 1..=3 {
            let ns = format!("{prefix}{i}");
            ip(&["netns", "add", &ns]).expect("client namespace");
            lab.clients.push(ns.clone());
            let (c, s) = (format!("{prefix}c{i}"), format!("{prefix}v{i}"));
            ip(&["link", "add", &c, "type", "veth", "peer", "name", &s]).expect("veth");
            ip(&["link", "set", &c, "netns", &ns]).expect("move client end");
            ip(&["link", "set", &s, "netns", &srv]).expect("move server end");
            for (n, dev, addr) in [
                (&ns, &c, format!("10.77.{i}.2/24")),
                (&srv, &s, format!("10.77.{i}.1/24")),
            ] {
                ip(&["-n", n, "addr", "add", &addr, "dev", dev]).expect("address");
                ip(&["-n", n, "link", "set", dev, "up"]).expect("up");
            }
            ip(&["-n", &ns, "link", "set", "lo", "up"]).expect("lo up");
            let gw = format!("10.77.{i}.1");
            ip(&["-n", &ns, "route", "add", "default", "via", &gw]).expect("route");
        }
        let mut serve = Command::new("ip");
        serve.args([
            "netns",
            "exec",
            &srv,
            xload_bin(),
            "serve",
            "--for",
            "60s",
            "--listen",
        ]);
        serve.arg(format!("{TARGET}:{PORT}"));
        lab.server = Some(XloadChild::spawn(serve));
        let deadline = Instant::now() + Duration::from_secs(10);
        while lab.stats().is_none() {
            assert!(Instant::now() < deadline, "xload serve did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(lab)
    }

    fn url(&self) -> String {
        format!("http://{TARGET}:{PORT}/")
    }

    /// `/stats` of the server, fetched from inside its namespace.
    fn stats(&self) -> Option<serde_json::Value> {
        let ns = self.server_ns.clone();
        std::thread::spawn(move || {
            xload_sys::netns::enter(&ns).ok()?;
            let mut s = TcpStream::connect((TARGET, PORT)).ok()?;
            s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
            s.write_all(b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .ok()?;
            let mut text = String::new();
            s.read_to_string(&mut text).ok()?;
            serde_json::from_str(text.split("\r\n\r\n").nth(1)?).ok()
        })
        .join()
        .ok()
        .flatten()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.interrupt();
            let _ = s.wait_timeout(Duration::from_secs(5));
        }
        for ns in self.clients.iter().chain([&self.server_ns]) {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// `xload --on HOSTS --rsh 'ip netns exec {host}' ARGS`: (exit code, stdout, stderr).
fn on(hosts: &str, args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(xload_bin());
    cmd.args([
        "--on",
        hosts,
        "--rsh",
        "ip netns exec {host}",
        "--remote-xload",
        xload_bin(),
    ]);
    cmd.args(args);
    let out = XloadChild::spawn(cmd).wait_timeout(Duration::from_secs(60));
    assert!(!out.timed_out, "xload --on hangs: {out:?}");
    (exit_code(out.status), out.stdout, out.stderr)
}

fn read(path: &std::path::Path) -> Report {
    let text = std::fs::read_to_string(path).expect("report");
    Report::from_json(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn three_hosts_start_together_and_merge_to_what_the_server_served() {
    let Some(lab) = Lab::new("a") else { return };
    let dir = TempDir::new("hosts-on");
    let out = dir.join("m.json");
    let hosts = lab.clients.join(",");
    let (code, stdout, stderr) = on(
        &hosts,
        &[
            "-c",
            "3",
            "--rate",
            "600",
            "-n",
            "600",
            "--start-at",
            "+2s",
            "--run-id",
            "on-3",
            "--keep-reports",
            &dir.path().display().to_string(),
            "--json",
            &out.display().to_string(),
            &lab.url(),
        ],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let m = read(&out);
    // Exactly what the server answered: no request before or after the windows.
    // The responder counts an answer once its send completed: allow it a moment.
    let deadline = Instant::now() + Duration::from_secs(2);
    let served = loop {
        let n = lab.stats().expect("/stats")["requests"].as_u64();
        if n >= Some(600) || Instant::now() > deadline {
            break n;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!((m.requests, served), (600, Some(600)), "{stderr}");
    assert_eq!(m.run.run_id.as_deref(), Some("on-3"));
    assert!(stdout.contains("Hosts (3 of 3 reported)"), "{stdout}");
    let parts: Vec<Report> = lab
        .clients
        .iter()
        .map(|h| read(&dir.join(format!("{h}.json"))))
        .collect();
    for (i, (host, r)) in lab.clients.iter().zip(&parts).enumerate() {
        // A row per host, its progress relayed, its share of the load.
        assert!(stdout.contains(&format!("  {host} ")), "{stdout}");
        assert!(
            stderr.contains(&format!("[{host}] xload progress:")),
            "{stderr}"
        );
        assert_eq!(r.run.segment, Some(format!("{}/3", i + 1)));
        assert_eq!((r.connections, r.requests), (1, 200));
        // Every window opened within 5 ms of the instant (a microsecond
        // early is the rounding of two clock readings).
        let late = r.run.start_error_us.expect("start error");
        assert!((-10..5_000).contains(&late), "{host} began {late} µs late");
        assert!(
            !stderr.contains(&format!("[{host}] xload 1")),
            "no host's text report: {stderr}"
        );
    }
    let starts: Vec<i64> = parts
        .iter()
        .map(|r| r.run.started_at_us().expect("start"))
        .collect();
    let spread = starts.iter().max().unwrap() - starts.iter().min().unwrap();
    assert!(spread < 5_000, "windows began {spread} µs apart");
    let rows = m.extra["hosts"].as_array().expect("host rows");
    assert_eq!(rows.len(), 3);
    assert_eq!(m.extra["partial"], false);
    // Each merged second is the merge of the hosts' raw histograms of that second.
    assert!(!m.timeseries.is_empty());
    for (row, mh) in m.timeseries.iter().zip(&m.timeseries_histograms) {
        let mut raw = new_latency_histogram();
        for p in &parts {
            for h in p
                .timeseries_histograms
                .iter()
                .filter(|h| h.second == row.second)
            {
                raw.add(decode_histogram(&h.histogram).expect("decodes"))
                    .expect("adds");
            }
        }
        assert_eq!(decode_histogram(&mh.histogram).expect("decodes"), raw);
        assert_eq!(
            row.p99_us,
            raw.value_at_quantile(0.99),
            "second {}",
            row.second
        );
        assert_eq!(
            row.p50_us,
            raw.value_at_quantile(0.5),
            "second {}",
            row.second
        );
    }
}

#[test]
fn an_unreachable_host_is_named_and_the_rest_merge_partially() {
    let Some(lab) = Lab::new("b") else { return };
    let missing = format!("{}-missing", lab.clients[0]);
    let hosts = format!("{},{missing}", lab.clients[0]);
    let (code, stdout, stderr) = on(
        &hosts,
        &[
            "-c",
            "2",
            "--rate",
            "200",
            "-n",
            "100",
            "--start-at",
            "+1500ms",
            &lab.url(),
        ],
    );
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("xload: host {missing}: ")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("PARTIAL: 1 of 2 hosts failed ({missing})")),
        "{stderr}"
    );
    assert!(stdout.contains("Hosts (1 of 2 reported)"), "{stdout}");
    assert!(
        stdout.contains(&format!("{missing:<16} FAILED")),
        "{stdout}"
    );
    // The one that ran is merged: its share only.
    assert!(
        stdout.contains("Requests") && stdout.contains("50"),
        "{stdout}"
    );
    // --allow-partial: the same, exit 0; --fail-if judges the merge (exit 3).
    for (gate, want) in [("errors>0", 0), ("rps<1e9", 3)] {
        let (code, _, stderr) = on(
            &hosts,
            &[
                "-c",
                "2",
                "-n",
                "20",
                "--allow-partial",
                "--fail-if",
                gate,
                "--start-at",
                "+1500ms",
                &lab.url(),
            ],
        );
        assert_eq!(code, want, "{gate}: {stderr}");
        assert!(stderr.contains("PARTIAL"), "{stderr}");
        assert_eq!(stderr.contains(gate), want == 3, "{gate}: {stderr}");
    }
}
