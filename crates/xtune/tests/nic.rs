//! The NIC's own settings (channels, rings, coalescing, offloads) over
//! ethtool netlink, end to end: applied, verified, undone and rolled back in
//! fresh network namespaces on a 4-queue veth pair, checked with the
//! `ethtool` command; and what xtune reads from this machine's NICs compared
//! read-only with `ethtool -l/-g/-c/-k`. Root tests skip with a reason.

mod util;

use std::process::Command;

use util::{code, stderr, stdout, xtune, Netns, TempDir};
use xtune::cpuset::CpuSet;
use xtune::ethtool::{Ethtool, Group};
use xtune::report::{Report, Verdict};

/// Why the ethtool command cannot be used here, or None.
fn ethtool_skip_reason() -> Option<String> {
    match Command::new("ethtool").arg("--version").output() {
        Ok(o) if o.status.success() => None,
        _ => Some("`ethtool` is not installed (scripts/test installs it)".into()),
    }
}

macro_rules! skip_unless_root_and_ethtool {
    () => {
        skip_unless_root!();
        if let Some(reason) = ethtool_skip_reason() {
            eprintln!("SKIPPED: {reason}");
            return;
        }
    };
}

fn json_report(out: &std::process::Output) -> Report {
    serde_json::from_str(&stdout(out))
        .unwrap_or_else(|e| panic!("not a report ({e}): {}{}", stdout(out), stderr(out)))
}

fn verdict(r: &Report, knob: &str) -> Verdict {
    r.knobs
        .iter()
        .find(|k| k.knob == knob)
        .unwrap_or_else(|| panic!("no knob {knob} in {:?}", r.knobs))
        .verdict
}

/// What `ethtool` shows of `xa`, and its queues and their steering masks:
/// everything the profiles below change.
fn nic_state(ns: &Netns) -> Vec<(String, String)> {
    let mut v = vec![
        ("ethtool -l".to_string(), ns.exec(&["ethtool", "-l", "xa"])),
        ("ethtool -k".to_string(), ns.exec(&["ethtool", "-k", "xa"])),
        (
            "queues".to_string(),
            ns.exec(&["ls", "/sys/class/net/xa/queues"]),
        ),
    ];
    for q in ns
        .exec(&["ls", "/sys/class/net/xa/queues"])
        .split_whitespace()
    {
        let file = if q.starts_with("rx-") {
            "rps_cpus"
        } else {
            "xps_cpus"
        };
        let path = format!("/sys/class/net/xa/queues/{q}/{file}");
        let value = ns.read(&path);
        v.push((path, value));
    }
    v
}

/// `ethtool -l` "Current hardware settings" value of `label` (`RX:`).
fn current_channels(text: &str, label: &str) -> String {
    let current = text
        .split("Current hardware settings:")
        .nth(1)
        .expect("current settings");
    current
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// `ethtool -k` state of one feature: `on`, `off`, `off [fixed]`...
fn feature(text: &str, name: &str) -> String {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no {name} in ethtool -k"))
        .to_string()
}

const CHANNELS_AND_RPS: &str = r#"
[nic.xa]
channels = { rx = 2, tx = 2 }
features = { gro = true, tso = false, tx-checksumming = false }
[rps]
xa = "all"
[xps]
xa = "spread"
"#;

#[test]
fn channels_4_to_2_with_features_and_rps_planned_on_the_new_queues_roll_back_exactly() {
    skip_unless_root_and_ethtool!();
    let ns = Netns::new("nicch");
    let dir = TempDir::new("nicch");
    let prof = dir.file("nic.toml", CHANNELS_AND_RPS);
    let state = dir.join_str("s");
    let before = nic_state(&ns);
    assert_eq!(current_channels(&before[0].1, "RX:"), "4");
    assert_eq!(feature(&before[1].1, "generic-receive-offload"), "off");

    let out = xtune(&[
        "apply",
        &prof,
        "--netns",
        &ns.name,
        "--state-dir",
        &state,
        "--json",
    ]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let r = json_report(&out);
    // Channels are written first, then features, then the masks of the
    // queues that exist after the change: rx-0 and rx-1, not rx-2/rx-3.
    let order: Vec<&str> = r.knobs.iter().map(|k| k.knob.as_str()).collect();
    let pos = |k: &str| order.iter().position(|o| *o == k).unwrap();
    assert!(pos("nic:xa:channels.rx") < pos("nic:xa:features.rx-gro"));
    assert!(pos("nic:xa:features.rx-gro") < pos("rps:xa:rx-0"));
    assert!(order.contains(&"rps:xa:rx-1") && order.contains(&"xps:xa:tx-1"));
    assert!(
        !order
            .iter()
            .any(|k| k.ends_with("rx-2") || k.ends_with("tx-3")),
        "{order:?}"
    );
    assert_eq!(verdict(&r, "nic:xa:channels.rx"), Verdict::Written);
    assert_eq!(verdict(&r, "nic:xa:features.rx-gro"), Verdict::Written);
    assert_eq!(verdict(&r, "rps:xa:rx-1"), Verdict::Written);

    // What the ethtool command and sysfs say now.
    let l = ns.exec(&["ethtool", "-l", "xa"]);
    assert_eq!(current_channels(&l, "RX:"), "2");
    assert_eq!(current_channels(&l, "TX:"), "2");
    let k = ns.exec(&["ethtool", "-k", "xa"]);
    assert_eq!(feature(&k, "generic-receive-offload"), "on");
    assert_eq!(feature(&k, "tx-tcp-segmentation"), "off");
    assert_eq!(feature(&k, "tx-checksum-ip-generic"), "off");
    assert_eq!(
        ns.exec(&["ls", "/sys/class/net/xa/queues"])
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["rx-0", "rx-1", "tx-0", "tx-1"]
    );
    let all = CpuSet::from_cpus(util::online_cpus());
    for q in 0..2 {
        let rps = ns.read(&format!("/sys/class/net/xa/queues/rx-{q}/rps_cpus"));
        assert_eq!(CpuSet::parse_hex_mask(&rps).unwrap(), all, "rx-{q}");
    }

    // Verified by meaning, and nothing left to write.
    let out = xtune(&["verify", &prof, "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let out = xtune(&["apply", &prof, "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 0);
    assert!(!stdout(&out).contains("written"), "{}", stdout(&out));

    // Drift behind xtune's back is named.
    ns.exec(&["ethtool", "-K", "xa", "gro", "off"]);
    let out = xtune(&["verify", &prof, "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 3, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out)
            .lines()
            .any(|l| l.starts_with("nic:xa:features.rx-gro") && l.contains("DRIFT")),
        "{}",
        stdout(&out)
    );
    ns.exec(&["ethtool", "-K", "xa", "gro", "on"]);

    let out = xtune(&["rollback", "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        nic_state(&ns),
        before,
        "ethtool -l/-k and every mask as before"
    );
}

#[test]
fn ring_and_coalesce_on_veth_are_advice_and_required_fails_writing_nothing() {
    skip_unless_root_and_ethtool!();
    let ns = Netns::new("nicring");
    let dir = TempDir::new("nicring");
    let state = dir.join_str("s");
    let before = nic_state(&ns);
    let prof = dir.file(
        "ring.toml",
        "[nic.xa]\nchannels = { rx = 3 }\nring = { rx = \"max\" }\ncoalesce = { adaptive_rx = true }\nfeatures = { lro = true }\n",
    );
    let out = xtune(&[
        "apply",
        &prof,
        "--netns",
        &ns.name,
        "--state-dir",
        &state,
        "--json",
    ]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let r = json_report(&out);
    assert_eq!(verdict(&r, "nic:xa:channels.rx"), Verdict::Written);
    for (knob, words) in [
        ("nic:xa:ring.rx", ["xa", "ring", "EOPNOTSUPP"]),
        (
            "nic:xa:coalesce.adaptive_rx",
            ["xa", "coalesce", "EOPNOTSUPP"],
        ),
        ("nic:xa:features.rx-lro", ["xa", "rx-lro", "[fixed]"]),
    ] {
        let k = r.knobs.iter().find(|k| k.knob == knob).unwrap();
        assert_eq!(k.verdict, Verdict::Advice, "{knob}");
        for w in words {
            assert!(k.reason.contains(w), "{knob}: {}", k.reason);
        }
    }
    let out = xtune(&["verify", &prof, "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 0, "advice is not drift: {}", stdout(&out));
    let out = xtune(&["rollback", "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(nic_state(&ns), before);

    // required = true: the same ring is a failed apply, and nothing stays written.
    let req = dir.file(
        "req.toml",
        "[nic.xa]\nchannels = { rx = 3 }\nring = { rx = \"max\", required = true }\n",
    );
    let out = xtune(&["apply", &req, "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains("nic:xa:ring.rx") && stderr(&out).contains("EOPNOTSUPP"),
        "{}",
        stderr(&out)
    );
    assert_eq!(nic_state(&ns), before);
    let out = xtune(&["verify", &req, "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 3, "a required knob the device lacks is drift");
}

#[test]
fn rss_on_veth_is_advice_and_required_is_a_failed_apply_that_writes_nothing() {
    skip_unless_root_and_ethtool!();
    let ns = Netns::new("nicrss");
    let dir = TempDir::new("nicrss");
    let state = dir.join_str("s");
    let before = nic_state(&ns);
    let prof = dir.file(
        "rss.toml",
        "[nic.xa]\nchannels = { rx = 2, tx = 2 }\nrss = { equal = \"channels\", hash_tcp4 = \"sdfn\" }\n[rps]\nxa = \"all\"\n",
    );
    let out = xtune(&[
        "apply",
        &prof,
        "--netns",
        &ns.name,
        "--state-dir",
        &state,
        "--json",
    ]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let r = json_report(&out);
    assert_eq!(verdict(&r, "nic:xa:channels.rx"), Verdict::Written);
    assert_eq!(verdict(&r, "rps:xa:rx-1"), Verdict::Written);
    for knob in ["nic:xa:rss.equal", "nic:xa:rss.hash_tcp4"] {
        let k = r.knobs.iter().find(|k| k.knob == knob).unwrap();
        assert_eq!(k.verdict, Verdict::Advice, "{knob}");
        for w in ["xa", "rss", "EOPNOTSUPP"] {
            assert!(k.reason.contains(w), "{knob}: {}", k.reason);
        }
    }
    let out = xtune(&["verify", &prof, "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 0, "advice is not drift: {}", stdout(&out));
    let out = xtune(&["rollback", "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(nic_state(&ns), before);

    // required = true: a failed apply, and the channels and masks planned
    // before it are not left written.
    let req = dir.file(
        "req.toml",
        "[nic.xa]\nchannels = { rx = 2, tx = 2 }\nrss = { hash_udp4 = \"sdfn\", required = true }\n[rps]\nxa = \"all\"\n",
    );
    let out = xtune(&["apply", &req, "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains("nic:xa:rss.hash_udp4") && stderr(&out).contains("EOPNOTSUPP"),
        "{}",
        stderr(&out)
    );
    assert_eq!(nic_state(&ns), before);
    let out = xtune(&["verify", &req, "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 3, "a required knob the device lacks is drift");
}

#[test]
fn a_failed_write_after_the_nic_settings_undoes_them() {
    skip_unless_root_and_ethtool!();
    let ns = Netns::new("nicfail");
    let dir = TempDir::new("nicfail");
    let state = dir.join_str("s");
    let before = nic_state(&ns);
    // A required [fixed] feature: written (the kernel acks it), read back
    // off, so the apply fails after the channels and gro were written.
    let prof = dir.file(
        "fixed.toml",
        "[nic.xa]\nchannels = { rx = 2, tx = 2 }\nfeatures = { gro = true, tx-checksum-ipv4 = true, required = true }\n[rps]\nxa = \"all\"\n",
    );
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
    assert_eq!(verdict(&r, "nic:xa:channels.rx"), Verdict::Undone);
    assert_eq!(verdict(&r, "nic:xa:features.rx-gro"), Verdict::Undone);
    assert_eq!(
        verdict(&r, "nic:xa:features.tx-checksum-ipv4"),
        Verdict::Failed
    );
    assert_eq!(nic_state(&ns), before, "every NIC write undone");

    // A sysctl the kernel rejects, written after the NIC: the same.
    let prof = dir.file(
        "sysctl.toml",
        "[nic.xa]\nchannels = { rx = 1 }\nfeatures = { gro = true }\n[sysctl]\n\"net.ipv4.ip_local_port_range\" = \"60000 1000\"\n",
    );
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
    assert_eq!(verdict(&r, "nic:xa:channels.rx"), Verdict::Undone);
    assert_eq!(
        verdict(&r, "sysctl:net.ipv4.ip_local_port_range"),
        Verdict::Failed
    );
    assert_eq!(nic_state(&ns), before, "every NIC write undone");
}

#[test]
fn bad_nic_keys_are_refused_before_anything_is_read() {
    let dir = TempDir::new("nicbad");
    for (text, words) in [
        ("[nic.xa]\nchannels = { rxx = 2 }\n", "did you mean `rx`"),
        ("[nic.xa]\nring = { rx = \"cpus\" }\n", "\"max\""),
        ("[nic.xa]\ncoalesce = { rx_usecs = -1 }\n", "negative"),
        ("[nic.xa]\nfeatures = { gro = 1 }\n", "gro"),
        (
            "[nic.xa]\nchannels = { combined = 5000000000 }\n",
            "32 bits",
        ),
        (
            "[nic.xa]\nfeatures = { \"a/b\" = true }\n",
            "not a feature name",
        ),
        ("[nic.xa]\nrss = { equal = 0 }\n", "queue count"),
        ("[nic.xa]\nrss = { equal = \"all\" }\n", "\"channels\""),
        ("[nic.xa]\nrss = { hash_tcp4 = \"sdx\" }\n", "`x`"),
        ("[nic.xa]\nrss = { hash_tcp4 = \"none\" }\n", "sdfn"),
        (
            "[nic.xa]\nrss = { hash_tcp5 = \"sd\" }\n",
            "did you mean `hash_tcp4`",
        ),
        (
            "[nic.xa]\nchannels = { combined = \"numa\" }\n",
            "numa-local",
        ),
        ("[nic.xa]\nring = { rx = \"numa-local\" }\n", "\"max\""),
    ] {
        let prof = dir.file("bad.toml", text);
        let out = xtune(&["diff", &prof]);
        assert_eq!(code(&out), 2, "{text}: {}", stderr(&out));
        assert!(stderr(&out).contains(words), "{text}: {}", stderr(&out));
    }
}

/// `ethtool -g/-c/-l` prints each setting as `Label: N` or `Label: n/a`;
/// xtune's reading must say the same (absent is n/a), and the RSS flow-hash
/// fields as `ethtool -n rx-flow-hash` lists them. Read-only: the host's
/// NICs are only read.
#[test]
fn what_xtune_reads_from_this_machines_nics_matches_ethtool() {
    if let Some(reason) = ethtool_skip_reason() {
        eprintln!("SKIPPED: {reason}");
        return;
    }
    let devices: Vec<String> = std::fs::read_dir("/sys/class/net")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("device").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let mut e = match Ethtool::open() {
        Ok(e) => e,
        Err(err) => {
            eprintln!("SKIPPED: no ethtool netlink family here ({err:?})");
            return;
        }
    };
    let mut compared = 0;
    for dev in &devices {
        for (group, opt, labels) in [
            (
                Group::Channels,
                "-l",
                &[
                    ("RX:", "rx"),
                    ("TX:", "tx"),
                    ("Other:", "other"),
                    ("Combined:", "combined"),
                ][..],
            ),
            (
                Group::Ring,
                "-g",
                &[
                    ("RX:", "rx"),
                    ("RX Mini:", "rx_mini"),
                    ("RX Jumbo:", "rx_jumbo"),
                    ("TX:", "tx"),
                ][..],
            ),
            (
                Group::Coalesce,
                "-c",
                &[
                    ("rx-usecs:", "rx_usecs"),
                    ("rx-frames:", "rx_frames"),
                    ("rx-usecs-irq:", "rx_usecs_irq"),
                    ("rx-frames-irq:", "rx_frames_irq"),
                    ("tx-usecs:", "tx_usecs"),
                    ("tx-frames:", "tx_frames"),
                    ("tx-usecs-irq:", "tx_usecs_irq"),
                    ("tx-frames-irq:", "tx_frames_irq"),
                ][..],
            ),
        ] {
            let out = Command::new("ethtool").args([opt, dev]).output().unwrap();
            let mine = e.get(dev, group);
            if !out.status.success() {
                assert!(
                    mine.is_err(),
                    "{dev} {opt}: ethtool failed, xtune read {mine:?}"
                );
                continue;
            }
            let mine = mine.unwrap_or_else(|err| panic!("{dev} {opt}: {err:?}"));
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            // -l and -g: maxima first, then the current settings.
            let (maxima, current) = match text.split_once("Current hardware settings:") {
                Some((m, c)) => (Some(m.to_string()), c.to_string()),
                None => (None, text.clone()),
            };
            let value = |section: &str, label: &str| -> Option<String> {
                section
                    .lines()
                    .find_map(|l| l.trim_start().strip_prefix(label))
                    .map(|v| v.trim().to_string())
            };
            for (label, field) in labels {
                let cli = value(&current, label).unwrap_or_else(|| "n/a".into());
                let got = mine
                    .values
                    .get(*field)
                    .map_or("n/a".to_string(), |v| v.to_string());
                assert_eq!(got, cli, "{dev} {opt} {label}");
                if let Some(m) = &maxima {
                    let cli = value(m, label).unwrap_or_else(|| "n/a".into());
                    let got = mine
                        .values
                        .get(&format!("max_{field}"))
                        .map_or("n/a".to_string(), |v| v.to_string());
                    assert_eq!(got, cli, "{dev} {opt} maximum {label}");
                }
                compared += 1;
            }
            if group == Group::Coalesce {
                // "Adaptive RX: off  TX: n/a"
                let line = text
                    .lines()
                    .find(|l| l.starts_with("Adaptive RX:"))
                    .unwrap_or("");
                let words: Vec<&str> = line.split_whitespace().collect();
                let word = |v: Option<&u64>| match v {
                    None => "n/a",
                    Some(0) => "off",
                    Some(_) => "on",
                };
                if words.len() >= 5 {
                    assert_eq!(word(mine.values.get("adaptive_rx")), words[2], "{dev}");
                    assert_eq!(word(mine.values.get("adaptive_tx")), words[4], "{dev}");
                }
            }
        }
        // RSS flow hashing: `ethtool -n DEV rx-flow-hash TYPE` (the ioctl)
        // lists the fields hashed, or None; xtune reads them over netlink.
        if let Ok(rss) = e.get(dev, Group::Rss) {
            for ty in ["tcp4", "udp4", "tcp6", "udp6"] {
                let out = Command::new("ethtool")
                    .args(["-n", dev, "rx-flow-hash", ty])
                    .output()
                    .unwrap();
                let mine = rss.texts.get(&format!("hash_{ty}"));
                if !out.status.success() {
                    continue;
                }
                let mut letters = String::new();
                let mut known = true;
                for line in String::from_utf8_lossy(&out.stdout).lines().skip(1) {
                    let c = match line.trim() {
                        "" | "None" => continue,
                        "L2DA" => 'm',
                        "VLAN tag" => 'v',
                        "L3 proto" => 't',
                        "IP SA" => 's',
                        "IP DA" => 'd',
                        l if l.starts_with("L4 bytes 0 & 1") => 'f',
                        l if l.starts_with("L4 bytes 2 & 3") => 'n',
                        _ => {
                            known = false;
                            continue;
                        }
                    };
                    letters.push(c);
                }
                if !known {
                    continue; // a field this ethtool names and the test does not
                }
                let letters = xtune::ethtool::parse_hash_letters(if letters.is_empty() {
                    "none"
                } else {
                    &letters
                })
                .unwrap();
                let cli = xtune::ethtool::hash_letters(u64::from(letters));
                assert_eq!(mine, Some(&cli), "{dev} rx-flow-hash {ty}");
                compared += 1;
            }
        }
        // Features: every kernel-named line of `ethtool -k` xtune knows.
        let out = Command::new("ethtool").args(["-k", dev]).output().unwrap();
        let mine = e.get(dev, Group::Features).unwrap();
        for line in String::from_utf8_lossy(&out.stdout).lines().skip(1) {
            let Some((name, rest)) = line.trim().split_once(": ") else {
                continue;
            };
            if let Some(f) = mine.features.get(name) {
                assert_eq!(f.active, rest.starts_with("on"), "{dev} {name}: {rest}");
                assert_eq!(f.fixed, rest.contains("[fixed]"), "{dev} {name}: {rest}");
                compared += 1;
            }
        }
    }
    if devices.is_empty() {
        eprintln!("SKIPPED: no hardware network device here");
    } else {
        assert!(compared > 0, "nothing compared on {devices:?}");
    }
}

#[test]
fn export_systemd_writes_unit_udev_rule_and_profile_under_root() {
    let dir = TempDir::new("nicexport");
    let prof = dir.file(
        "srv.toml",
        "[sysctl]\n\"net.core.somaxconn\" = 4096\n[nic.eth9]\nchannels = { combined = \"cpus\" }\nfeatures = { gro = true }\n[rps]\n\"*\" = \"all\"\n",
    );
    let root = dir.join_str("root");
    let out = xtune(&["export", &prof, "--systemd", "--root", &root]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stderr(&out).contains("not enabled"), "{}", stderr(&out));
    let read = |p: &str| std::fs::read_to_string(format!("{root}{p}")).unwrap();
    let unit = read("/etc/systemd/system/xtune-srv.service");
    assert!(unit.contains("After=network-online.target"), "{unit}");
    assert!(
        unit.contains(&format!(
            "ExecStart={} apply /etc/xtune/srv.toml",
            util::xtune_bin()
        )),
        "{unit}"
    );
    assert!(unit.contains("verify /etc/xtune/srv.toml"), "{unit}");
    let rule = read("/etc/udev/rules.d/90-xtune-srv.rules");
    assert!(rule.contains("KERNEL==\"eth9\""), "{rule}");
    assert!(rule.contains("restart xtune-srv.service"), "{rule}");
    // The profile beside the unit plans like the original.
    let copy = format!("{root}/etc/xtune/srv.toml");
    let a = xtune(&["diff", &prof, "--json"]);
    let b = xtune(&["diff", &copy, "--json"]);
    assert_eq!(code(&a), code(&b));
    assert_eq!(stderr(&a), stderr(&b));
    // Nothing enabled without --enable.
    assert!(!std::path::Path::new(&format!(
        "{root}/etc/systemd/system/multi-user.target.wants"
    ))
    .exists());
    match Command::new("systemd-analyze")
        .args([
            "verify",
            &format!("{root}/etc/systemd/system/xtune-srv.service"),
        ])
        .output()
    {
        Ok(o) => assert!(
            o.status.success(),
            "systemd-analyze verify: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(_) => eprintln!("SKIPPED systemd-analyze verify: systemd is not installed"),
    }
    // Bad combinations are argument errors that write nothing.
    let other = dir.join_str("other");
    for args in [
        vec!["export", &prof, "--systemd", "--sysctl-d", "--root", &other],
        vec!["export", &prof, "--systemd", "-o", "x", "--root", &other],
        vec!["export", &prof, "--enable", "--root", &other],
    ] {
        assert_eq!(code(&xtune(&args)), 2, "{args:?}");
    }
    assert!(!std::path::Path::new(&other).exists());
}

/// The NIC sections the shipped profiles carry commented out are valid
/// profile text once uncommented.
#[test]
fn shipped_nic_examples_parse_when_uncommented() {
    for name in ["server", "loadgen"] {
        let path = format!("{}/../../tuning/{name}.toml", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        let block = text.split("# [nic.\"*\"]").nth(1).expect("a NIC example");
        let mut toml = String::from("[nic.\"*\"]\n");
        for line in block.lines() {
            let l = line.trim_start_matches("# ");
            if ["channels", "rss", "ring", "coalesce", "features"]
                .iter()
                .any(|k| l.starts_with(k))
            {
                toml.push_str(l);
                toml.push('\n');
            }
        }
        let p = xtune::profile::Profile::from_text(&toml, name, std::path::Path::new("/"))
            .unwrap_or_else(|e| panic!("{name}: {e}\n{toml}"));
        assert_eq!(p.nic[0].1.ethtool.len(), 12, "{name}: {toml}");
    }
}

#[test]
fn channels_2_to_4_steer_the_queues_they_create_and_roll_back() {
    skip_unless_root_and_ethtool!();
    let ns = Netns::new("nicgrow");
    ns.exec(&["ethtool", "-L", "xa", "rx", "2", "tx", "2"]);
    let dir = TempDir::new("nicgrow");
    let state = dir.join_str("s");
    let prof = dir.file(
        "grow.toml",
        "[nic.xa]\nchannels = { rx = 4, tx = 4 }\n[rps]\nxa = \"all\"\n",
    );
    let before = nic_state(&ns);
    let out = xtune(&[
        "apply",
        &prof,
        "--netns",
        &ns.name,
        "--state-dir",
        &state,
        "--json",
    ]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(verdict(&json_report(&out), "rps:xa:rx-3"), Verdict::Written);
    let all = CpuSet::from_cpus(util::online_cpus());
    for q in 0..4 {
        let rps = ns.read(&format!("/sys/class/net/xa/queues/rx-{q}/rps_cpus"));
        assert_eq!(CpuSet::parse_hex_mask(&rps).unwrap(), all, "rx-{q}");
    }
    let out = xtune(&["verify", &prof, "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let out = xtune(&["rollback", "--netns", &ns.name, "--state-dir", &state]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(nic_state(&ns), before);
}
