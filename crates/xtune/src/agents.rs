//! Other agents that rewrite tuning behind xtune's back: irqbalance (moves
//! IRQs every 10 s), sysctl.d files (re-applied by systemd-sysctl at boot and
//! by `sysctl --system`), TuneD, power-profiles-daemon. Verify names them next
//! to a drifted knob, so the user knows what to stop rather than re-applying.

use crate::fs::Fs;
use crate::host::{find_processes, ProcInfo};

/// Directories systemd-sysctl and `sysctl --system` read, in their order.
pub const SYSCTL_D_DIRS: &[&str] = &[
    "/etc/sysctl.d",
    "/run/sysctl.d",
    "/usr/local/lib/sysctl.d",
    "/usr/lib/sysctl.d",
    "/lib/sysctl.d",
];

/// One `key = value` line of a sysctl.d file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SysctlDSetting {
    /// File.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// Dotted key.
    pub key: String,
    /// Value as written.
    pub value: String,
}

/// Agents found on the host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Agents {
    /// Running irqbalance.
    pub irqbalance: Vec<ProcInfo>,
    /// TuneD active, with its profile when known.
    pub tuned: Option<String>,
    /// power-profiles-daemon running.
    pub power_profiles_daemon: bool,
    /// Every sysctl.d setting.
    pub sysctl_d: Vec<SysctlDSetting>,
}

impl Agents {
    /// Looks for every agent.
    pub fn scan(fs: &dyn Fs) -> Agents {
        let tuned_running =
            !find_processes(fs, "tuned").is_empty() || fs.exists("/run/tuned/tuned.pid");
        let tuned = tuned_running.then(|| {
            fs.read("/etc/tuned/active_profile")
                .map(|p| p.trim().to_string())
                .unwrap_or_default()
        });
        let mut sysctl_d = Vec::new();
        // sysctl.d(5): of files with one name, only the one in the first
        // directory applies (and /lib is often /usr/lib by a symlink).
        let mut seen = std::collections::BTreeSet::new();
        for dir in SYSCTL_D_DIRS {
            for name in fs.list(dir).unwrap_or_default() {
                if name.ends_with(".conf") && seen.insert(name.clone()) {
                    let path = format!("{dir}/{name}");
                    if let Ok(text) = fs.read(&path) {
                        sysctl_d.extend(parse_sysctl_conf(&path, &text));
                    }
                }
            }
        }
        if let Ok(text) = fs.read("/etc/sysctl.conf") {
            sysctl_d.extend(parse_sysctl_conf("/etc/sysctl.conf", &text));
        }
        Agents {
            irqbalance: find_processes(fs, "irqbalance"),
            tuned,
            power_profiles_daemon: !find_processes(fs, "power-profiles-daemon").is_empty(),
            sysctl_d,
        }
    }

    /// Who may rewrite `knob`, in words; None when no agent is known.
    pub fn explain(&self, knob: &str) -> Option<String> {
        let mut who = Vec::new();
        if let Some(key) = knob.strip_prefix("sysctl:") {
            for s in self.sysctl_d.iter().filter(|s| s.key == key) {
                who.push(format!(
                    "{}:{} sets {} = {} (re-applied at boot by systemd-sysctl / sysctl --system)",
                    s.file, s.line, s.key, s.value
                ));
            }
        }
        if knob.starts_with("irq:") && !self.irqbalance.is_empty() {
            let pids: Vec<String> = self.irqbalance.iter().map(|p| p.pid.to_string()).collect();
            who.push(format!(
                "irqbalance is running (pid {}) and moves IRQs; set [irqbalance] stop = true",
                pids.join(", ")
            ));
        }
        if knob.starts_with("governor:") && self.power_profiles_daemon {
            who.push("power-profiles-daemon is running and sets the governor".into());
        }
        if let Some(profile) = &self.tuned {
            if knob.starts_with("sysctl:")
                || knob.starts_with("irq:")
                || knob.starts_with("governor:")
            {
                let p = if profile.is_empty() {
                    String::new()
                } else {
                    format!(" (profile {profile})")
                };
                who.push(format!("TuneD is active{p} and re-applies its own values"));
            }
        }
        (!who.is_empty()).then(|| who.join("; "))
    }
}

/// Parses a sysctl.d file: `key = value`, `#`/`;` comments, a leading `-`
/// (ignore errors), and `/` as separator (`net/core/somaxconn`).
pub fn parse_sysctl_conf(file: &str, text: &str) -> Vec<SysctlDSetting> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let k = k.trim().trim_start_matches('-').trim();
        if k.is_empty() || k.contains('*') {
            continue;
        }
        out.push(SysctlDSetting {
            file: file.to_string(),
            line: i + 1,
            key: normalize_key(k),
            value: v.trim().to_string(),
        });
    }
    out
}

/// sysctl.d keys may use `/` as the separator; then `.` inside a component is
/// literal. Converted to the dotted form with `/` for a literal dot.
fn normalize_key(k: &str) -> String {
    let first = k.find(['.', '/']);
    match first.map(|i| &k[i..i + 1]) {
        Some("/") => k
            .chars()
            .map(|c| match c {
                '/' => '.',
                '.' => '/',
                c => c,
            })
            .collect(),
        _ => k.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RootFs;
    use crate::testutil::fake_host;

    #[test]
    fn sysctl_d_lines_are_parsed_with_both_separators() {
        let s = parse_sysctl_conf(
            "/etc/sysctl.d/x.conf",
            "# c\n; c\nnet.core.somaxconn = 128\n-net/ipv4/conf/eth0.100/rp_filter=0\nkernel.*.x = 1\n\nvm.swappiness=10\n",
        );
        let keys: Vec<(&str, &str, usize)> = s
            .iter()
            .map(|x| (x.key.as_str(), x.value.as_str(), x.line))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("net.core.somaxconn", "128", 3),
                ("net.ipv4.conf.eth0/100.rp_filter", "0", 4),
                ("vm.swappiness", "10", 7)
            ]
        );
    }

    #[test]
    fn drifted_knobs_name_the_agent() {
        let t = fake_host("agents", 2, &[], &[]);
        t.put("/etc/sysctl.d/99-local.conf", "net.core.somaxconn = 128\n");
        t.put("/proc/55/comm", "irqbalance\n");
        t.put("/proc/56/comm", "tuned\n");
        t.put("/etc/tuned/active_profile", "throughput-performance\n");
        let a = Agents::scan(&RootFs::new(t.path()));
        let s = a.explain("sysctl:net.core.somaxconn").unwrap();
        assert!(
            s.contains("/etc/sysctl.d/99-local.conf:1 sets net.core.somaxconn = 128"),
            "{s}"
        );
        assert!(
            s.contains("TuneD is active (profile throughput-performance)"),
            "{s}"
        );
        let i = a.explain("irq:40").unwrap();
        assert!(i.contains("irqbalance is running (pid 55)"), "{i}");
        assert_eq!(a.explain("rps:eth0:rx-0"), None);
    }

    #[test]
    fn a_sysctl_d_name_in_two_directories_is_the_first_one_only() {
        let t = fake_host("agents-shadow", 2, &[], &[]);
        t.put(
            "/usr/lib/sysctl.d/50-pid-max.conf",
            "kernel.pid_max = 4194304\n",
        );
        // /lib is /usr/lib on merged-/usr systems: the same file again.
        t.put(
            "/lib/sysctl.d/50-pid-max.conf",
            "kernel.pid_max = 4194304\n",
        );
        // An /etc file of the same name overrides the vendor one.
        t.put("/etc/sysctl.d/50-pid-max.conf", "kernel.pid_max = 65536\n");
        let a = Agents::scan(&RootFs::new(t.path()));
        let s = a.explain("sysctl:kernel.pid_max").unwrap();
        assert_eq!(
            s,
            "/etc/sysctl.d/50-pid-max.conf:1 sets kernel.pid_max = 65536 (re-applied at boot by systemd-sysctl / sysctl --system)"
        );
    }
}
