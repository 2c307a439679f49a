//! End-to-end tests of the xtune binary. Kernel tests run in fresh network
//! namespaces (deleted on drop) with a 4-queue veth pair; they need root and
//! are skipped with a printed reason otherwise. Remote tests use a fake ssh.

mod util;

use util::{code, stderr, stdout, xtune, xtune_env, Netns, TempDir};
use xtune::cpuset::CpuSet;
use xtune::report::{MultiReport, Report, Verdict};

const SYSCTLS: &[&str] = &[
    "/proc/sys/net/core/somaxconn",
    "/proc/sys/net/ipv4/tcp_rmem",
    "/proc/sys/net/ipv4/ip_local_port_range",
    "/proc/sys/net/ipv4/tcp_fin_timeout",
    "/proc/sys/net/ipv4/tcp_max_syn_backlog",
];

/// A profile touching every per-namespace kind of knob.
const LAB: &str = r#"
description = "netns test profile"
[sysctl]
"net.core.somaxconn" = 8192
"net.ipv4.tcp_rmem" = [4096, 131072, 6291456]
"net.ipv4.ip_local_port_range" = "1024 65000"
"net.ipv4.tcp_fin_timeout" = 17
"net.ipv4.tcp_max_syn_backlog" = 16384
[nic.xa]
txqueuelen = 4242
[rps]
xa = "all"
[xps]
xa = "spread"
[rfs.flow_cnt]
xa = 1000
"#;

fn queue_files() -> Vec<String> {
    let mut v = Vec::new();
    for q in 0..4 {
        v.push(format!("/sys/class/net/xa/queues/rx-{q}/rps_cpus"));
        v.push(format!("/sys/class/net/xa/queues/rx-{q}/rps_flow_cnt"));
        v.push(format!("/sys/class/net/xa/queues/tx-{q}/xps_cpus"));
    }
    v.push("/sys/class/net/xa/tx_queue_len".into());
    v
}

fn all_files() -> Vec<String> {
    SYSCTLS
        .iter()
        .map(|s| s.to_string())
        .chain(queue_files())
        .collect()
}

fn read_all(ns: &Netns) -> Vec<(String, String)> {
    all_files()
        .into_iter()
        .map(|f| (f.clone(), ns.read(&f)))
        .collect()
}

fn json_report(out: &std::process::Output) -> Report {
    serde_json::from_str(&stdout(out))
        .unwrap_or_else(|e| panic!("not a report ({e}): {}", stdout(out)))
}

#[test]
fn apply_in_netns_reads_back_and_verify_exits_0() {
    skip_unless_root!();
    let ns = Netns::new("apply");
    let dir = TempDir::new("apply");
    let prof = dir.file("lab.toml", LAB);
    let state = dir.join_str("state");
    let out = xtune(&["apply", &prof, "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(ns.read("/proc/sys/net/core/somaxconn"), "8192\n");
    assert_eq!(
        ns.read("/proc/sys/net/ipv4/tcp_rmem"),
        "4096\t131072\t6291456\n"
    );
    assert_eq!(
        ns.read("/proc/sys/net/ipv4/ip_local_port_range"),
        "1024\t65000\n"
    );
    assert_eq!(ns.read("/proc/sys/net/ipv4/tcp_fin_timeout"), "17\n");
    assert_eq!(ns.read("/sys/class/net/xa/tx_queue_len"), "4242\n");
    assert_eq!(
        ns.read("/sys/class/net/xa/queues/rx-2/rps_flow_cnt"),
        "1024\n",
        "kernel rounds 1000 up"
    );
    assert_eq!(dir.count_json("state"), 1, "one snapshot");

    let out = xtune(&[
        "verify",
        &prof,
        "--netns",
        &ns.name,
        "--state-dir",
        &state,
        "--json",
    ]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let r = json_report(&out);
    assert!(r.ok);
    assert_eq!(r.knobs.len(), 5 + 1 + 4 + 4 + 4);
    assert!(
        r.knobs.iter().all(|k| k.verdict == Verdict::Ok),
        "{:?}",
        r.knobs
    );

    // Applying again writes nothing and takes no snapshot.
    let out = xtune(&["apply", &prof, "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 0);
    assert!(
        stdout(&out).contains("nothing to change"),
        "{}",
        stdout(&out)
    );
    assert_eq!(dir.count_json("state"), 1);
}

#[test]
fn a_port_set_is_compared_as_a_set() {
    // The kernel prints 9000-9010,8080 back as 8080,9000-9010.
    skip_unless_root!();
    let ns = Netns::new("ports");
    let dir = TempDir::new("ports");
    let prof = dir.file(
        "p.toml",
        "[sysctl]\n\"net.ipv4.ip_local_reserved_ports\" = \"9000-9010,8080\"\n",
    );
    let state = dir.join_str("state");
    let path = "/proc/sys/net/ipv4/ip_local_reserved_ports";
    let before = ns.read(path);
    let run = |cmd: &str| {
        let mut a = vec![cmd];
        if cmd != "rollback" {
            a.push(&prof);
        }
        a.extend(["--netns", &ns.name, "--state-dir", &state, "--json"]);
        xtune(&a)
    };
    let out = run("apply");
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(ns.read(path), "8080,9000-9010\n");
    let out = run("verify");
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let out = run("apply");
    assert_eq!(code(&out), 0);
    assert_eq!(json_report(&out).snapshot, None, "nothing to change");
    let out = run("rollback");
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(ns.read(path), before);
}

#[test]
fn rps_and_xps_masks_on_a_four_queue_veth() {
    skip_unless_root!();
    let ns = Netns::new("masks");
    let dir = TempDir::new("masks");
    let prof = dir.file("m.toml", "[rps]\nxa = \"all\"\n[xps]\nxa = \"spread\"\n");
    let out = xtune(&[
        "apply",
        &prof,
        "--netns",
        &ns.name,
        "--state-dir",
        &dir.join_str("s"),
    ]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let online = util::online_cpus();
    let all = CpuSet::from_cpus(online.iter().copied());
    for q in 0..4 {
        let rps = ns.read(&format!("/sys/class/net/xa/queues/rx-{q}/rps_cpus"));
        assert_eq!(
            CpuSet::parse_hex_mask(&rps).unwrap(),
            all,
            "rx-{q}: {rps:?}"
        );
    }
    // Spread: with at least as many queues as CPUs, queue i gets CPU i mod n;
    // with fewer, queue i gets every CPU j with j mod 4 == i.
    for q in 0..4usize {
        let xps =
            CpuSet::parse_hex_mask(&ns.read(&format!("/sys/class/net/xa/queues/tx-{q}/xps_cpus")))
                .unwrap();
        let want: CpuSet = if 4 >= online.len() {
            CpuSet::from_cpus([online[q % online.len()]])
        } else {
            online
                .iter()
                .enumerate()
                .filter(|(j, _)| j % 4 == q)
                .map(|(_, c)| *c)
                .collect()
        };
        assert_eq!(xps, want, "tx-{q}");
    }
    // Every CPU is served by some tx queue.
    let mut union = CpuSet::new();
    for q in 0..4 {
        let x =
            CpuSet::parse_hex_mask(&ns.read(&format!("/sys/class/net/xa/queues/tx-{q}/xps_cpus")))
                .unwrap();
        union = CpuSet::from_cpus(union.iter().chain(x.iter()));
    }
    assert_eq!(union, all);
}

#[test]
fn value_changed_behind_xtunes_back_makes_verify_exit_3_naming_it() {
    skip_unless_root!();
    let ns = Netns::new("drift");
    let dir = TempDir::new("drift");
    let prof = dir.file("lab.toml", LAB);
    let state = dir.join_str("state");
    assert_eq!(
        code(&xtune(&[
            "apply",
            &prof,
            "--netns",
            &ns.name,
            "--state-dir",
            &state
        ])),
        0
    );
    ns.write("/proc/sys/net/core/somaxconn", "100");
    ns.write("/sys/class/net/xa/queues/rx-3/rps_cpus", "1");

    let out = xtune(&["verify", &prof, "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 3, "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    let drift: Vec<&str> = text.lines().filter(|l| l.contains("DRIFT")).collect();
    assert_eq!(drift.len(), 2, "{text}");
    assert!(
        drift
            .iter()
            .any(|l| l.starts_with("sysctl:net.core.somaxconn") && l.contains("100")),
        "{text}"
    );
    assert!(drift.iter().any(|l| l.starts_with("rps:xa:rx-3")), "{text}");

    let out = xtune(&[
        "verify",
        &prof,
        "--netns",
        &ns.name,
        "--state-dir",
        &state,
        "--json",
    ]);
    assert_eq!(code(&out), 3);
    let r = json_report(&out);
    assert!(!r.ok);
    assert_eq!(r.exit_code, 3);
    let k = r
        .knobs
        .iter()
        .find(|k| k.knob == "sysctl:net.core.somaxconn")
        .unwrap();
    assert_eq!(
        (k.verdict, k.actual.as_str(), k.wanted.as_str()),
        (Verdict::Drift, "100", "8192")
    );
    assert_eq!(r.counts.get("drift"), Some(&2));
}

#[test]
fn settle_catches_a_value_rewritten_after_the_first_pass() {
    skip_unless_root!();
    let ns = Netns::new("settle");
    let dir = TempDir::new("settle");
    let prof = dir.file("s.toml", "[sysctl]\n\"net.ipv4.tcp_fin_timeout\" = 21\n");
    let state = dir.join_str("state");
    assert_eq!(
        code(&xtune(&[
            "apply",
            &prof,
            "--netns",
            &ns.name,
            "--state-dir",
            &state
        ])),
        0
    );
    // An "agent" inside the namespace rewrites the value 800 ms from now.
    let mut agent = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.name,
            "sh",
            "-c",
            "sleep 0.8; echo 44 > /proc/sys/net/ipv4/tcp_fin_timeout",
        ])
        .spawn()
        .unwrap();
    let out = xtune(&[
        "verify",
        &prof,
        "--netns",
        &ns.name,
        "--state-dir",
        &state,
        "--settle",
        "2500ms",
        "--json",
    ]);
    let _ = agent.wait();
    assert_eq!(code(&out), 3, "{}", stdout(&out));
    let r = json_report(&out);
    assert_eq!(r.settle_s, Some(2.5));
    let k = &r.knobs[0];
    assert_eq!(k.verdict, Verdict::Drift);
    assert!(
        k.reason.contains("was 21 before the 2500ms settle window"),
        "{}",
        k.reason
    );
}

#[test]
fn rollback_restores_every_original_byte_for_byte() {
    skip_unless_root!();
    let ns = Netns::new("rollback");
    let dir = TempDir::new("rollback");
    let prof = dir.file("lab.toml", LAB);
    let state = dir.join_str("state");
    let before = read_all(&ns);
    assert_eq!(
        code(&xtune(&[
            "apply",
            &prof,
            "--netns",
            &ns.name,
            "--state-dir",
            &state
        ])),
        0
    );
    let during = read_all(&ns);
    let changed = before.iter().zip(&during).filter(|(a, b)| a != b).count();
    assert!(changed >= 12, "apply changed only {changed} files");

    let out = xtune(&["snapshots", "--state-dir", &state, "--json"]);
    assert_eq!(code(&out), 0);
    let listing: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let id = listing["snapshots"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(listing["snapshots"][0]["state"], "applied");

    // A snapshot of a namespace is not rolled back on the host.
    let out = xtune(&["rollback", &id, "--state-dir", &state]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("add --netns {}", ns.name)),
        "{}",
        stderr(&out)
    );

    let out = xtune(&["rollback", "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        read_all(&ns),
        before,
        "every original restored byte for byte"
    );
    let out = xtune(&["rollback", "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 1, "nothing left to roll back");
    assert!(
        stderr(&out).contains("no snapshot to roll back"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn third_write_rejected_by_the_kernel_exits_1_and_undoes_the_first_two() {
    skip_unless_root!();
    let ns = Netns::new("fault");
    let dir = TempDir::new("fault");
    // Writes in order: somaxconn, tcp_fin_timeout, then a port range the
    // kernel rejects (low > high: EINVAL), then one never attempted.
    let prof = dir.file(
        "bad.toml",
        "[sysctl]\n\"net.core.somaxconn\" = 9999\n\"net.ipv4.tcp_fin_timeout\" = 19\n\"net.ipv4.ip_local_port_range\" = \"60000 1000\"\n\"net.ipv4.tcp_max_syn_backlog\" = 12345\n",
    );
    let state = dir.join_str("state");
    let before = read_all(&ns);
    let out = xtune(&[
        "apply",
        &prof,
        "--netns",
        &ns.name,
        "--state-dir",
        &state,
        "--json",
    ]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let r = json_report(&out);
    let err = r.error.clone().unwrap();
    assert!(
        err.contains("sysctl:net.ipv4.ip_local_port_range") && err.contains("EINVAL"),
        "{err}"
    );
    assert!(stderr(&out).contains("EINVAL"), "{}", stderr(&out));
    let verdicts: Vec<(String, Verdict)> = r
        .knobs
        .iter()
        .map(|k| (k.knob.clone(), k.verdict))
        .collect();
    assert_eq!(
        verdicts,
        vec![
            ("sysctl:net.core.somaxconn".into(), Verdict::Undone),
            ("sysctl:net.ipv4.tcp_fin_timeout".into(), Verdict::Undone),
            (
                "sysctl:net.ipv4.ip_local_port_range".into(),
                Verdict::Failed
            ),
            (
                "sysctl:net.ipv4.tcp_max_syn_backlog".into(),
                Verdict::Change
            ),
        ]
    );
    assert_eq!(r.knobs[2].errno.as_deref(), Some("EINVAL"));
    assert_eq!(read_all(&ns), before, "every earlier write undone");
    // The undone snapshot is kept for the record but is not rolled back again.
    let out = xtune(&["rollback", "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 1);
}

#[test]
fn parse_errors_exit_2_with_a_clear_message_and_write_nothing() {
    let dir = TempDir::new("parse");
    dir.file(
        "cycle-a.toml",
        "extends = \"cycle-b.toml\"\n[sysctl]\n\"net.core.somaxconn\" = 1\n",
    );
    dir.file("cycle-b.toml", "extends = \"cycle-a.toml\"\n");
    let cases: Vec<(String, &str)> = vec![
        (
            dir.file("unknown.toml", "[sysctl]\n\"net.core.somaxconn\" = 7777\n[rps]\nxa = \"all\"\n[rpss]\nxa = \"all\"\n"),
            "unknown key `rpss`, did you mean `rps`?",
        ),
        (
            dir.file("type.toml", "[sysctl]\n\"net.core.somaxconn\" = 7777\n[rps]\nxa = 3\n"),
            "`rps.xa` must be a string, found integer",
        ),
        (dir.join_str("cycle-a.toml"), "extends cycle: cycle-a.toml -> cycle-b.toml -> cycle-a.toml"),
        (dir.join_str("missing.toml"), "cannot read profile"),
    ];
    let netns = util::root_skip_reason()
        .is_none()
        .then(|| Netns::new("parse"));
    let state = dir.join_str("state");
    for (prof, want) in &cases {
        for cmd in ["apply", "verify", "diff"] {
            let mut args = vec![cmd, prof.as_str(), "--state-dir", state.as_str()];
            if let Some(ns) = &netns {
                args.extend(["--netns", ns.name.as_str()]);
            }
            let out = xtune(&args);
            assert_eq!(code(&out), 2, "{cmd} {prof}: {}", stderr(&out));
            assert!(
                stderr(&out).contains(want),
                "{cmd} {prof}: {}",
                stderr(&out)
            );
            assert!(
                stdout(&out).is_empty(),
                "no report for a bad profile: {}",
                stdout(&out)
            );
        }
    }
    assert_eq!(dir.count_json("state"), 0, "no snapshot");
    match &netns {
        Some(ns) => assert_ne!(
            ns.read("/proc/sys/net/core/somaxconn"),
            "7777\n",
            "nothing written"
        ),
        None => eprintln!("(not root: checked exit codes and messages, not the namespace)"),
    }
}

#[test]
fn global_sysctls_inside_a_netns_are_refused_not_pretended() {
    skip_unless_root!();
    let ns = Netns::new("global");
    let dir = TempDir::new("global");
    // On this kernel netdev_max_backlog and rps_sock_flow_entries are host-wide
    // (absent from a namespace's /proc/sys/net); somaxconn is per namespace.
    let prof = dir.file(
        "g.toml",
        "[sysctl]\n\"net.core.somaxconn\" = 7001\n\"net.core.netdev_max_backlog\" = 7002\n[rfs]\nflow_entries = 4096\n",
    );
    let state = dir.join_str("state");
    let host_before = std::fs::read_to_string("/proc/sys/net/core/netdev_max_backlog").unwrap();
    let host_rfs_before =
        std::fs::read_to_string("/proc/sys/net/core/rps_sock_flow_entries").unwrap();
    let out = xtune(&["apply", &prof, "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("refusing") && e.contains("net.core.netdev_max_backlog"),
        "{e}"
    );
    assert!(e.contains("net.core.rps_sock_flow_entries"), "{e}");
    assert!(!e.contains("somaxconn"), "somaxconn is per namespace: {e}");
    assert_ne!(ns.read("/proc/sys/net/core/somaxconn"), "7001\n");

    let out = xtune(&[
        "apply",
        &prof,
        "--netns",
        &ns.name,
        "--state-dir",
        &state,
        "--skip-global",
    ]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("left out in netns"),
        "{}",
        stdout(&out)
    );
    assert_eq!(ns.read("/proc/sys/net/core/somaxconn"), "7001\n");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/core/netdev_max_backlog").unwrap(),
        host_before
    );
    assert_eq!(
        std::fs::read_to_string("/proc/sys/net/core/rps_sock_flow_entries").unwrap(),
        host_rfs_before
    );
    assert_ne!(
        std::fs::read_to_string("/proc/sys/net/core/somaxconn").unwrap(),
        "7001\n",
        "host untouched"
    );

    // Present in the namespace but read-only there (Linux 6.18: rmem_max
    // and friends, mode 0444): host-wide too, not a write to fail on.
    let mode = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.name, "stat", "-c", "%a"])
        .arg("/proc/sys/net/core/rmem_max")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    if mode == "444" {
        let ro = dir.file(
            "ro.toml",
            "[sysctl]\n\"net.core.somaxconn\" = 7003\n\"net.core.rmem_max\" = 16777216\n",
        );
        let out = xtune(&["apply", &ro, "--netns", &ns.name, "--state-dir", &state]);
        assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
        assert!(
            stderr(&out).contains("net.core.rmem_max"),
            "{}",
            stderr(&out)
        );
        let args = ["apply", &ro, "--netns", &ns.name, "--state-dir", &state];
        let out = xtune(&[&args[..], &["--skip-global"]].concat());
        assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
        assert_eq!(ns.read("/proc/sys/net/core/somaxconn"), "7003\n");
    } else {
        eprintln!("rmem_max in a namespace has mode {mode:?} here: read-only check skipped");
    }
}

#[test]
fn missing_netns_is_an_argument_error() {
    let out = xtune(&["diff", "-", "--netns", "xtune-no-such-ns"]);
    // stdin is empty: an empty profile is valid, so the failure is the namespace.
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("no network namespace `xtune-no-such-ns`"), "{e}");
}

/// A fake host tree for tests that need no kernel and no root.
/// xtune on the fake tree `root` with its own state dir, JSON report.
fn xtune_in_tree(root: &str, state: &str, args: &[&str]) -> std::process::Output {
    let mut all = args.to_vec();
    all.extend(["--root", root, "--state-dir", state, "--json"]);
    xtune(&all)
}

fn fake_tree(dir: &TempDir) -> String {
    dir.file("root/proc/sys/net/core/somaxconn", "4096\n");
    dir.file("root/proc/sys/net/ipv4/tcp_fin_timeout", "60\n");
    dir.file("root/sys/devices/system/cpu/online", "0-1\n");
    dir.join_str("root")
}

/// A stand-in for ssh: logs the host, then runs the remote command locally.
fn fake_ssh(dir: &TempDir) -> String {
    let log = dir.join_str("ssh.log");
    let path = dir.file(
        "fake-ssh",
        &format!(
            "#!/bin/sh\nhost=\"$1\"; shift\necho \"$host $*\" >> '{log}'\nexec sh -c \"$*\"\n"
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn a_snapshot_from_before_a_reboot_leaves_kernel_values_to_the_boot() {
    let dir = TempDir::new("reboot");
    let root = fake_tree(&dir);
    let boot = dir.file("root/proc/sys/kernel/random/boot_id", "aaaa-1\n");
    let fin = dir.join_str("root/proc/sys/net/ipv4/tcp_fin_timeout");
    let prof = dir.file("p.toml", "[sysctl]\n\"net.ipv4.tcp_fin_timeout\" = 15\n");
    let state = dir.join_str("state");
    let run = |args: &[&str]| xtune_in_tree(&root, &state, args);
    let out = run(&["apply", &prof]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(std::fs::read_to_string(&fin).unwrap(), "15\n");

    // The host reboots: a new boot id, the kernel's default back.
    std::fs::write(&boot, "bbbb-2\n").unwrap();
    std::fs::write(&fin, "60\n").unwrap();
    let out = run(&["verify", &prof]);
    let notes = json_report(&out).notes.join("\n");
    assert!(notes.contains("before the host last booted"), "{notes}");
    let out = run(&["snapshots"]);
    let listing: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(listing["snapshots"][0]["earlier_boot"], true, "{listing}");
    // Someone tunes it by hand after the reboot: the rollback leaves the
    // kernel value as it is (the reboot already undid the apply), says so,
    // and the snapshot is done with.
    std::fs::write(&fin, "20\n").unwrap();
    let out = run(&["rollback"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let r = json_report(&out);
    assert!(
        r.notes.join("\n").contains("has rebooted since snapshot"),
        "{:?}",
        r.notes
    );
    let line = serde_json::to_value(&r.knobs[0]).unwrap();
    assert_eq!(line["verdict"], "not_applicable", "{line}");
    assert!(
        line["reason"].as_str().unwrap().contains("reboot"),
        "{line}"
    );
    assert_eq!(
        std::fs::read_to_string(&fin).unwrap(),
        "20\n",
        "nothing written"
    );
    let out = run(&["rollback"]);
    assert_eq!(code(&out), 1, "nothing left to roll back: {}", stdout(&out));

    // A snapshot of this boot rolls back as usual.
    let out = run(&["apply", &prof]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(std::fs::read_to_string(&fin).unwrap(), "15\n");
    let out = run(&["snapshots"]);
    let listing: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let fresh: Vec<&serde_json::Value> = listing["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["state"] == "applied")
        .collect();
    assert_eq!(fresh.len(), 1, "{listing}");
    assert_eq!(fresh[0]["earlier_boot"], false, "{listing}");
    let out = run(&["rollback"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(std::fs::read_to_string(&fin).unwrap(), "20\n");
}

#[test]
fn ssh_runs_the_same_command_remotely_with_the_profile_on_stdin() {
    let dir = TempDir::new("ssh");
    let root = fake_tree(&dir);
    let ssh = fake_ssh(&dir);
    dir.file("base.toml", "[sysctl]\n\"net.core.somaxconn\" = 1024\n");
    let prof = dir.file(
        "p.toml",
        "extends = \"base.toml\"\n[sysctl]\n\"net.ipv4.tcp_fin_timeout\" = 15\n",
    );
    let state = dir.join_str("state");
    let env = [
        ("XTUNE_SSH", ssh.as_str()),
        ("XTUNE_REMOTE_BIN", util::xtune_bin()),
    ];
    // Run from another directory: the remote side cannot see base.toml, so the
    // merged profile must travel on stdin.
    let out = xtune_env(
        &[
            "verify",
            &prof,
            "--ssh",
            "gen1",
            "--root",
            &root,
            "--state-dir",
            &state,
        ],
        &env,
    );
    assert_eq!(code(&out), 3, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("xtune verify p on"),
        "{}",
        stdout(&out)
    );
    let log = std::fs::read_to_string(dir.join_str("ssh.log")).unwrap();
    assert!(log.starts_with("gen1 "), "{log}");
    assert!(
        log.contains("'verify' '-'") || log.contains("verify -"),
        "{log}"
    );

    let out = xtune_env(
        &[
            "apply",
            &prof,
            "--ssh",
            "gen1",
            "--root",
            &root,
            "--state-dir",
            &state,
        ],
        &env,
    );
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dir.join_str("root/proc/sys/net/core/somaxconn")).unwrap(),
        "1024\n"
    );
    let out = xtune_env(
        &[
            "verify",
            &prof,
            "--ssh",
            "gen1",
            "--root",
            &root,
            "--state-dir",
            &state,
            "--json",
        ],
        &env,
    );
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert_eq!(json_report(&out).profile.as_deref(), Some("p"));
    let out = xtune_env(
        &[
            "rollback",
            "--ssh",
            "gen1",
            "--root",
            &root,
            "--state-dir",
            &state,
        ],
        &env,
    );
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dir.join_str("root/proc/sys/net/core/somaxconn")).unwrap(),
        "4096\n"
    );

    // ssh failing (exit 255, no report): its message is passed through, and
    // the exit is xtune's "could not be done" (1), not ssh's 255.
    let fail = dir.file(
        "fail-ssh",
        "#!/bin/sh\necho 'ssh: connect to host gen1 port 22: Connection refused' >&2\nexit 255\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fail, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = xtune_env(
        &["verify", &prof, "--ssh", "gen1"],
        &[("XTUNE_SSH", fail.as_str())],
    );
    assert_eq!(code(&out), 1);
    assert!(stderr(&out).contains("Connection refused"));
    assert!(stderr(&out).contains("exit 255"), "{}", stderr(&out));
}

#[test]
fn on_client_and_server_prints_one_combined_report() {
    let dir = TempDir::new("on");
    let root = fake_tree(&dir);
    let ssh = fake_ssh(&dir);
    let prof = dir.file(
        "p.toml",
        "[sysctl]\n\"net.core.somaxconn\" = 4096\n\"net.ipv4.tcp_fin_timeout\" = 15\n",
    );
    let env = [
        ("XTUNE_SSH", ssh.as_str()),
        ("XTUNE_REMOTE_BIN", util::xtune_bin()),
    ];
    let args = [
        "verify",
        &prof,
        "--on",
        "client=gen1",
        "--on",
        "server=srv1",
        "--root",
        &root,
        "--json",
    ];
    let out = xtune_env(&args, &env);
    assert_eq!(code(&out), 3, "{}{}", stdout(&out), stderr(&out));
    let m: MultiReport = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(m.hosts.len(), 2);
    assert_eq!(
        (m.hosts[0].role.as_str(), m.hosts[0].host.as_str()),
        ("client", "gen1")
    );
    assert_eq!(
        (m.hosts[1].role.as_str(), m.hosts[1].host.as_str()),
        ("server", "srv1")
    );
    for h in &m.hosts {
        let r = h.report.as_ref().unwrap();
        assert_eq!(r.counts.get("drift"), Some(&1), "{r:?}");
        assert_eq!(h.exit_code, 3);
    }
    let text = stdout(&xtune_env(&args[..args.len() - 1], &env));
    assert!(text.contains("== client (gen1) exit 3"), "{text}");
    assert!(text.contains("== server (srv1) exit 3"), "{text}");
    assert!(
        text.contains("combined: client=drift server=drift (exit 3)"),
        "{text}"
    );

    // [hosts] in the profile does the same without --on, each role with its own profile.
    dir.file("server.toml", "[sysctl]\n\"net.core.somaxconn\" = 4096\n");
    let hosts = dir.file(
        "both.toml",
        "[sysctl]\n\"net.ipv4.tcp_fin_timeout\" = 15\n[hosts]\nclient = \"gen1\"\nserver = { host = \"srv1\", profile = \"server.toml\" }\n",
    );
    let out = xtune_env(&["verify", &hosts, "--root", &root, "--json"], &env);
    let m: MultiReport = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(m.exit_code, 3);
    assert_eq!(m.hosts[0].exit_code, 3, "client drifts on tcp_fin_timeout");
    assert_eq!(m.hosts[1].exit_code, 0, "server profile matches");
    assert_eq!(
        m.hosts[1].report.as_ref().unwrap().profile.as_deref(),
        Some("server")
    );
}

#[test]
fn export_writes_a_sysctl_d_file() {
    let dir = TempDir::new("export");
    let prof = dir.file("p.toml", "[sysctl]\n\"net.core.somaxconn\" = 65535\n\"net.ipv4.tcp_rmem\" = [4096, 131072, 6291456]\n[rps]\nlo = \"all\"\n");
    let out = xtune(&["export", &prof, "--sysctl-d"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("\nnet.core.somaxconn = 65535\n"), "{text}");
    assert!(
        text.contains("\nnet.ipv4.tcp_rmem = 4096 131072 6291456\n"),
        "{text}"
    );
    assert!(text.contains("#   [rps] lo"), "{text}");
    let file = dir.join_str("90-xtune.conf");
    assert_eq!(
        code(&xtune(&["export", &prof, "--sysctl-d", "-o", &file])),
        0
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    assert_eq!(code(&xtune(&["export", &prof])), 2, "a format is required");
}

#[test]
fn shipped_profiles_parse_and_plan_on_this_machine() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tuning");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        seen += 1;
        let p = xtune::profile::Profile::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(!p.is_empty(), "{} asks for nothing", path.display());
        // diff reads only; it must plan every shipped profile on a stock kernel.
        let out = xtune(&["diff", path.to_str().unwrap(), "--json"]);
        assert_eq!(
            code(&out),
            0,
            "{}: {}{}",
            path.display(),
            stdout(&out),
            stderr(&out)
        );
        let r = json_report(&out);
        assert!(r.knobs.iter().all(|k| k.verdict != Verdict::Failed));
    }
    assert!(seen >= 4, "base, loadgen, server, loopback-lab");
}

#[test]
fn verify_names_the_sysctl_d_file_that_sets_a_drifted_key() {
    let dir = TempDir::new("agent");
    let root = fake_tree(&dir);
    dir.file(
        "root/etc/sysctl.d/99-site.conf",
        "# site\nnet.core.somaxconn = 4096\n",
    );
    let prof = dir.file("p.toml", "[sysctl]\n\"net.core.somaxconn\" = 65535\n");
    let out = xtune(&[
        "verify",
        &prof,
        "--root",
        &root,
        "--state-dir",
        &dir.join_str("s"),
        "--json",
    ]);
    assert_eq!(code(&out), 3, "{}", stdout(&out));
    let r = json_report(&out);
    let agent = r.knobs[0].agent.clone().unwrap_or_default();
    assert!(
        agent.contains("/etc/sysctl.d/99-site.conf:2 sets net.core.somaxconn = 4096"),
        "{agent}"
    );
}

/// Pids of live processes whose comm is `irqbalance`.
fn irqbalance_pids() -> Vec<u32> {
    let fs = xtune::fs::RootFs::new("/");
    xtune::host::find_processes(&fs, "irqbalance")
        .iter()
        .map(|p| p.pid)
        .collect()
}

struct KillOnDrop(Vec<u32>);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in irqbalance_pids()
            .into_iter()
            .filter(|p| !self.0.contains(p))
        {
            // SAFETY: kill(2) on a pid of a stand-in process this test started.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
    }
}

#[test]
fn irqbalance_is_stopped_and_restarted_on_rollback() {
    let already = irqbalance_pids();
    if !already.is_empty() {
        eprintln!("SKIPPED irqbalance test: a real irqbalance runs here (pid {already:?}); xtune would stop it");
        return;
    }
    let sleep = ["/bin/sleep", "/usr/bin/sleep"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let Some(sleep) = sleep else {
        eprintln!("SKIPPED irqbalance test: no sleep binary to stand in for the daemon");
        return;
    };
    let dir = TempDir::new("irqb");
    // A stand-in daemon: `sleep` copied under the name irqbalance, detached
    // (double fork) so that, as for the real daemon, xtune is not its parent.
    let fake = dir.join_str("irqbalance");
    std::fs::copy(sleep, &fake).unwrap();
    let _guard = KillOnDrop(Vec::new());
    let status = std::process::Command::new("sh")
        .args(["-c", &format!("'{fake}' 30 </dev/null >/dev/null 2>&1 &")])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while irqbalance_pids().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let started = irqbalance_pids();
    assert_eq!(started.len(), 1, "stand-in daemon running");

    let prof = dir.file("p.toml", "[irqbalance]\nstop = true\n");
    let state = dir.join_str("state");
    let out = xtune(&["verify", &prof, "--state-dir", &state]);
    assert_eq!(code(&out), 3, "{}", stdout(&out));
    assert!(
        stdout(&out).contains(&format!("running (pid {})", started[0])),
        "{}",
        stdout(&out)
    );

    let out = xtune(&["apply", &prof, "--state-dir", &state]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(irqbalance_pids().is_empty(), "stopped");
    assert_eq!(code(&xtune(&["verify", &prof, "--state-dir", &state])), 0);

    let out = xtune(&["rollback", "--state-dir", &state]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while irqbalance_pids().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let again = irqbalance_pids();
    assert_eq!(again.len(), 1, "restarted from its recorded command line");
    let cmdline = std::fs::read_to_string(format!("/proc/{}/cmdline", again[0])).unwrap();
    assert_eq!(cmdline, format!("{fake}\x0030\x00"));
}

#[test]
fn rollback_keeps_the_stack_in_order_and_stops_at_an_unreadable_snapshot() {
    let dir = TempDir::new("stack");
    let root = fake_tree(&dir);
    let state = dir.join_str("state");
    let somaxconn = dir.path().join("root/proc/sys/net/core/somaxconn");
    let a = dir.file("a.toml", "[sysctl]\n\"net.core.somaxconn\" = 8192\n");
    let b = dir.file("b.toml", "[sysctl]\n\"net.core.somaxconn\" = 9000\n");
    let run = |args: &[&str]| xtune_in_tree(&root, &state, args);
    let out = run(&["apply", &a]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let id_a = json_report(&out).snapshot.unwrap();
    let out = run(&["apply", &b]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let id_b = json_report(&out).snapshot.unwrap();
    assert_eq!(std::fs::read_to_string(&somaxconn).unwrap(), "9000\n");

    // The older one by id, past the newer: refused, nothing written.
    let out = run(&["rollback", &id_a]);
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
    assert!(stderr(&out).contains(&id_b), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&somaxconn).unwrap(), "9000\n");

    // The newest snapshot unreadable: no silent rollback of the one before.
    let file_b = std::path::Path::new(&state).join(format!("{id_b}.json"));
    let good = std::fs::read(&file_b).unwrap();
    std::fs::write(&file_b, &good[..good.len() / 2]).unwrap();
    let out = run(&["rollback"]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains("not an xtune snapshot"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("move it out of"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&somaxconn).unwrap(), "9000\n");
    // Nor an apply that a rollback could not undo past it.
    let c = dir.file("c.toml", "[sysctl]\n\"net.core.somaxconn\" = 9100\n");
    let out = run(&["apply", &c]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains("nothing was written"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(&somaxconn).unwrap(), "9000\n");

    // Repaired: the stack unwinds newest first, back to the original.
    std::fs::write(&file_b, &good).unwrap();
    let out = run(&["rollback"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(json_report(&out).snapshot.as_deref(), Some(id_b.as_str()));
    assert_eq!(std::fs::read_to_string(&somaxconn).unwrap(), "8192\n");
    let out = run(&["rollback"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(std::fs::read_to_string(&somaxconn).unwrap(), "4096\n");
    let out = run(&["rollback"]);
    assert_eq!(code(&out), 1, "nothing left: {}", stderr(&out));
}

#[test]
fn parallel_applies_stack_and_roll_back_to_the_original() {
    // Eight applies at once on one state dir (eight shells, or `--on` roles
    // on one host): each gets its own snapshot, and eight rollbacks leave
    // every value as it was.
    let dir = TempDir::new("parallel");
    let root = fake_tree(&dir);
    let state = dir.join_str("state");
    let n = 8;
    let mut profiles = Vec::new();
    for i in 0..n {
        dir.file(&format!("root/proc/sys/net/core/t{i}"), "1\n");
        profiles.push(dir.file(
            &format!("p{i}.toml"),
            &format!(
                "[sysctl]\n\"net.core.t{i}\" = {}\n\"net.core.somaxconn\" = {}\n",
                100 + i,
                5000 + i
            ),
        ));
    }
    let args = |cmd: &str, p: Option<&str>| -> Vec<String> {
        let mut a = vec![cmd.to_string()];
        a.extend(p.map(String::from));
        a.extend(["--root", &root, "--state-dir", &state, "--json"].map(String::from));
        a
    };
    let outs: Vec<std::process::Output> = std::thread::scope(|s| {
        let hs: Vec<_> = profiles
            .iter()
            .map(|p| {
                let a = args("apply", Some(p));
                s.spawn(move || {
                    let a: Vec<&str> = a.iter().map(String::as_str).collect();
                    xtune(&a)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut ids = std::collections::BTreeSet::new();
    for out in &outs {
        assert_eq!(code(out), 0, "{}{}", stdout(out), stderr(out));
        ids.insert(json_report(out).snapshot.expect("a snapshot"));
    }
    assert_eq!(ids.len(), n, "one snapshot each: {ids:?}");
    for _ in 0..n {
        let a = args("rollback", None);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let out = xtune(&a);
        assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    }
    let read = |rel: &str| std::fs::read_to_string(dir.path().join(rel)).unwrap();
    assert_eq!(read("root/proc/sys/net/core/somaxconn"), "4096\n");
    for i in 0..n {
        assert_eq!(read(&format!("root/proc/sys/net/core/t{i}")), "1\n", "t{i}");
    }
}

#[test]
fn a_snapshot_left_pending_is_named_by_apply_and_verify() {
    let dir = TempDir::new("pending");
    let root = fake_tree(&dir);
    let state = dir.join_str("state");
    let a = dir.file("a.toml", "[sysctl]\n\"net.core.somaxconn\" = 8192\n");
    let run = |args: &[&str]| xtune_in_tree(&root, &state, args);
    let out = run(&["apply", &a]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let id = json_report(&out).snapshot.unwrap();
    // As an apply killed between its writes leaves it.
    let file = std::path::Path::new(&state).join(format!("{id}.json"));
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("\"applied\"", "\"pending\"")).unwrap();
    for cmd in ["verify", "apply"] {
        let out = run(&[cmd, &a]);
        let r = json_report(&out);
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains(&id) && n.contains("still pending")),
            "{cmd}: {:?}",
            r.notes
        );
    }
    let out = run(&["rollback"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(json_report(&out).snapshot.as_deref(), Some(id.as_str()));
    let out = run(&["verify", &a]);
    assert!(json_report(&out)
        .notes
        .iter()
        .all(|n| !n.contains("pending")));
}

#[test]
fn a_reader_that_goes_away_is_not_a_panic() {
    let dir = TempDir::new("pipe");
    let root = fake_tree(&dir);
    let prof = dir.file("p.toml", "[sysctl]\n\"net.core.somaxconn\" = 4096\n");
    let mut child = std::process::Command::new(util::xtune_bin())
        .args(["verify", &prof, "--root", &root, "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // `| head` that exits before xtune writes
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

#[test]
fn a_profile_error_in_json_names_the_target_it_was_for() {
    let dir = TempDir::new("json-target");
    let bad = dir.file("bad.toml", "[sysctl\n");
    for (extra, want) in [(vec!["--netns", "lab1"], "netns:lab1"), (vec![], "host")] {
        let mut args = vec!["apply", bad.as_str(), "--json"];
        args.extend(extra);
        let out = xtune(&args);
        assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
        let r = json_report(&out);
        assert_eq!(r.target, want, "{}", stdout(&out));
        assert!(r.error.unwrap_or_default().contains("TOML syntax error"));
    }
}

#[test]
fn a_namespace_created_again_under_its_name_is_not_rolled_back_into() {
    skip_unless_root!();
    let ns = Netns::new("again");
    let dir = TempDir::new("again");
    let prof = dir.file("p.toml", "[sysctl]\n\"net.ipv4.tcp_fin_timeout\" = 17\n");
    let state = dir.join_str("state");
    let path = "/proc/sys/net/ipv4/tcp_fin_timeout";
    let out = xtune(&["apply", &prof, "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    // Deleted and made again: a new namespace with the kernel's defaults.
    for args in [["netns", "del", &ns.name], ["netns", "add", &ns.name]] {
        let st = std::process::Command::new("ip")
            .args(args)
            .status()
            .unwrap();
        assert!(st.success());
    }
    ns.exec(&["sysctl", "-qw", "net.ipv4.tcp_fin_timeout=33"]);
    let out = xtune(&[
        "rollback",
        "--netns",
        &ns.name,
        "--state-dir",
        &state,
        "--json",
    ]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    let e = json_report(&out).error.unwrap_or_default();
    assert!(
        e.contains("deleted and created again") && e.contains("Move "),
        "{e}"
    );
    assert_eq!(
        ns.read(path),
        "33\n",
        "nothing written into the new namespace"
    );
    // The snapshot is kept.
    assert_eq!(dir.count_json("state"), 1);
}

#[test]
fn a_command_line_error_with_json_still_prints_a_report() {
    let out = xtune(&["verify", "--json"]);
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
    let r = json_report(&out);
    assert_eq!(
        (r.command.as_str(), r.exit_code, r.ok),
        ("verify", 2, false)
    );
    assert!(
        r.error.unwrap_or_default().contains("required"),
        "{}",
        stdout(&out)
    );
    // Without --json, stdout stays empty.
    let out = xtune(&["verify"]);
    assert_eq!(code(&out), 2);
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
}

#[test]
fn export_refuses_json_it_would_not_write() {
    let dir = TempDir::new("export-json");
    let prof = dir.file("p.toml", "[sysctl]\n\"net.core.somaxconn\" = 4096\n");
    let out = xtune(&["export", &prof, "--sysctl-d", "--json"]);
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains("leave out --json"),
        "{}",
        stderr(&out)
    );
    let r = json_report(&out);
    assert_eq!(r.exit_code, 2);
}

#[test]
fn rollback_refuses_a_snapshot_entry_whose_path_is_not_its_knobs() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("snap-path");
    let root = fake_tree(&dir);
    let state = dir.join_str("state");
    let fin = dir.path().join("root/proc/sys/net/ipv4/tcp_fin_timeout");
    let victim = dir.path().join("root/etc/victim");
    dir.file("root/etc/victim", "keep me\n");
    let prof = dir.file("p.toml", "[sysctl]\n\"net.ipv4.tcp_fin_timeout\" = 15\n");
    let run = |args: &[&str]| xtune_in_tree(&root, &state, args);
    let out = run(&["apply", &prof]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let id = json_report(&out).snapshot.unwrap();
    let file = std::path::Path::new(&state).join(format!("{id}.json"));
    // Only root reads what a host was tuned from.
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(std::path::Path::new(&state)), 0o700, "state dir");
    assert_eq!(mode(&file), 0o600, "snapshot file");

    // An edited snapshot points the sysctl's original at another file.
    let good = std::fs::read_to_string(&file).unwrap();
    let mut snap: serde_json::Value = serde_json::from_str(&good).unwrap();
    snap["entries"][0]["original"]["path"] = "/etc/victim".into();
    std::fs::write(&file, serde_json::to_string(&snap).unwrap()).unwrap();
    for args in [vec!["rollback"], vec!["rollback", id.as_str()]] {
        let out = run(&args);
        assert_ne!(code(&out), 0, "{args:?}: {}{}", stdout(&out), stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("sysctl:net.ipv4.tcp_fin_timeout")
                && err.contains("/etc/victim")
                && err.contains("/proc/sys/net/ipv4/tcp_fin_timeout"),
            "{args:?}: names the knob, the path and the knob's own path: {err}"
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");
        assert_eq!(std::fs::read_to_string(&fin).unwrap(), "15\n");
    }
    // A path that climbs out through a sysctl name is no better.
    snap["entries"][0]["knob"] = "sysctl:net.//.//.//.etc.victim".into();
    snap["entries"][0]["original"]["path"] = "/proc/sys/net/../../../etc/victim".into();
    std::fs::write(&file, serde_json::to_string(&snap).unwrap()).unwrap();
    let out = run(&["rollback", &id]);
    assert_ne!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");

    // Repaired, it restores as before.
    std::fs::write(&file, good).unwrap();
    let out = run(&["rollback"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(std::fs::read_to_string(&fin).unwrap(), "60\n");
    assert_eq!(mode(&file), 0o600, "snapshot file rewritten");
}

/// Holds the store lock of `state` (as an xtune mid-apply would) until dropped.
fn hold_store_lock(state: &std::path::Path) -> std::fs::File {
    use std::os::fd::AsRawFd;
    std::fs::create_dir_all(state).unwrap();
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(state.join(".lock"))
        .unwrap();
    // SAFETY: flock on a descriptor owned here.
    assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
    f
}

/// Waits for `child` at most `secs` (killed after), returning its output.
fn wait_bounded(mut child: std::process::Child, secs: u64) -> std::process::Output {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Two applies on one target with different state dirs: the second waits
/// for the first (the lock is the target's, not the store's), so its
/// snapshot holds what the first wrote and the two roll back in turn.
/// `target` is the arguments naming the target (`--root`, `--netns`),
/// `read` the value of the knob on it.
fn applies_with_two_state_dirs_take_turns(
    dir: &TempDir,
    target: &[String],
    read: &dyn Fn() -> String,
) {
    let s1 = dir.path().join("state1");
    let s2 = dir.path().join("state2");
    let p1 = dir.file("p1.toml", "[sysctl]\n\"net.ipv4.tcp_fin_timeout\" = 15\n");
    let p2 = dir.file("p2.toml", "[sysctl]\n\"net.ipv4.tcp_fin_timeout\" = 17\n");
    let before = read();
    let spawn = |args: &[&str], state: &std::path::Path| {
        std::process::Command::new(util::xtune_bin())
            .args(args)
            .args(target)
            .args(["--state-dir", state.to_str().unwrap(), "--json"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // The first apply holds the target and waits for its own store.
    let held = hold_store_lock(&s1);
    let a = spawn(&["apply", &p1], &s1);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mut b = spawn(&["apply", &p2], &s2);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let b_done = b.try_wait().unwrap().is_some();
    drop(held);
    let (a, b) = (wait_bounded(a, 60), wait_bounded(b, 60));
    assert!(
        !b_done,
        "the second apply did not wait for the first: {}{}",
        stdout(&b),
        stderr(&b)
    );
    assert_eq!(code(&a), 0, "{}{}", stdout(&a), stderr(&a));
    assert_eq!(code(&b), 0, "{}{}", stdout(&b), stderr(&b));
    assert!(stderr(&b).contains("waiting"), "{}", stderr(&b));
    assert_eq!(read(), "17");
    // Each rolls back to what it found: 17 -> 15 -> the original.
    let rollback = |state: &std::path::Path| wait_bounded(spawn(&["rollback"], state), 60);
    let out = rollback(&s2);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(read(), "15");
    let out = rollback(&s1);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(read(), before);
}

#[test]
fn two_state_dirs_on_one_host_take_turns() {
    let dir = TempDir::new("lock-host");
    let root = fake_tree(&dir);
    let fin = dir.path().join("root/proc/sys/net/ipv4/tcp_fin_timeout");
    let read = || std::fs::read_to_string(&fin).unwrap().trim().to_string();
    applies_with_two_state_dirs_take_turns(&dir, &["--root".into(), root], &read);
}

#[test]
fn two_state_dirs_on_one_namespace_take_turns() {
    skip_unless_root!();
    let dir = TempDir::new("lock-netns");
    let ns = Netns::new("lock");
    let read = || {
        ns.read("/proc/sys/net/ipv4/tcp_fin_timeout")
            .trim()
            .to_string()
    };
    applies_with_two_state_dirs_take_turns(&dir, &["--netns".into(), ns.name.clone()], &read);
}

#[test]
fn a_profile_that_is_not_a_regular_file_of_at_most_16_mib_is_refused_promptly() {
    use std::os::unix::ffi::OsStrExt;
    let dir = TempDir::new("input-profile");
    let root = fake_tree(&dir);
    let state = dir.join_str("state");
    let fifo = dir.join("fifo.toml");
    let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path owned here.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let sub = dir.join("a-directory.toml");
    std::fs::create_dir_all(&sub).unwrap();
    let big = dir.join("big.toml");
    std::fs::File::create(&big)
        .unwrap()
        .set_len((16 << 20) + 1)
        .unwrap();
    let extends = dir.file(
        "child.toml",
        &format!(
            "extends = \"{}\"\n[sysctl]\n\"net.core.somaxconn\" = 1\n",
            fifo.display()
        ),
    );
    // The FIFO first: a build without the check hangs on it (killed here).
    let cases = [
        (fifo.display().to_string(), "not a regular file"),
        (extends, "not a regular file"),
        (sub.display().to_string(), "not a regular file"),
        (big.display().to_string(), "16 MiB"),
        ("/dev/zero".to_string(), "not a regular file"),
    ];
    for (profile, why) in cases {
        let child = std::process::Command::new(util::xtune_bin())
            .args(["apply", &profile, "--root", &root, "--state-dir", &state])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_bounded(child, 10);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{profile}: {}{err}", stdout(&out));
        assert!(err.contains(why), "{profile}: says {why:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // The profile on stdin is read up to the same limit.
    let child = std::process::Command::new(util::xtune_bin())
        .args(["apply", "-", "--root", &root, "--state-dir", &state])
        .stdin(std::fs::File::open("/dev/zero").unwrap())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_bounded(child, 10);
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
    assert!(stderr(&out).contains("16 MiB"), "{}", stderr(&out));
    assert_eq!(dir.get("root/proc/sys/net/core/somaxconn"), "4096\n");
}

#[test]
fn snapshots_with_only_an_unreadable_file_does_not_say_there_are_none() {
    let dir = TempDir::new("snap-list-bad");
    let state = dir.path().join("state");
    dir.file("state/20261205-000000-000-host.json", "{");
    let out = xtune(&["snapshots", "--state-dir", state.to_str().unwrap()]);
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(
        code(&out),
        1,
        "an unreadable snapshot is a failure: {text}{err}"
    );
    assert!(!text.contains("no snapshots"), "{text}");
    assert!(
        text.contains("1 unreadable") && err.contains("20261205-000000-000-host.json"),
        "{text}{err}"
    );
    // JSON says the same by its errors, with the same exit code.
    let out = xtune(&[
        "snapshots",
        "--state-dir",
        state.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code(&out), 1);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["errors"].as_array().map(Vec::len), Some(1), "{v}");
}

#[test]
fn a_state_dir_that_is_a_file_is_an_argument_error_naming_it() {
    let dir = TempDir::new("state-file");
    let root = fake_tree(&dir);
    let file = dir.file("not-a-dir", "x\n");
    let under = format!("{file}/state");
    let prof = dir.file("p.toml", "[sysctl]\n\"net.core.somaxconn\" = 8192\n");
    for state in [&file, &under] {
        for args in [
            vec!["apply", prof.as_str()],
            vec!["rollback"],
            vec!["snapshots"],
            vec!["verify", prof.as_str()],
        ] {
            let mut all = args.clone();
            all.extend(["--root", &root, "--state-dir", state]);
            let out = xtune(&all);
            let err = stderr(&out);
            assert_eq!(code(&out), 2, "{all:?}: {}{err}", stdout(&out));
            assert!(
                err.contains("--state-dir")
                    && err.contains(&file)
                    && err.contains("not a directory"),
                "{all:?}: {err}"
            );
            assert!(!err.contains("os error"), "{all:?}: {err}");
        }
    }
    assert_eq!(dir.get("root/proc/sys/net/core/somaxconn"), "4096\n");
}
