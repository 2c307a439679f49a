//! What the planner needs to know about the host before it can say what to
//! write: CPUs (online, isolated), network devices with their queues and
//! interrupts, cpufreq, irqbalance, and which sysctls exist. Read once through
//! [`Fs`]; everything after this is pure.

use std::collections::{BTreeMap, BTreeSet};

use crate::cpuset::CpuSet;
use crate::ethtool::{group_path, Group, GroupState};
use crate::fs::{trim_value, Fs, FsError};
use crate::profile::Profile;

/// Files in `/proc/irq/N/` that are not action (handler) names.
const IRQ_FILES: &[&str] = &[
    "affinity_hint",
    "effective_affinity",
    "effective_affinity_list",
    "node",
    "smp_affinity",
    "smp_affinity_list",
    "spurious",
];

/// Where distributions keep irqbalance's environment file.
pub const IRQBALANCE_CONFIGS: &[&str] = &["/etc/default/irqbalance", "/etc/sysconfig/irqbalance"];

/// Host facts read before planning.
#[derive(Clone, Debug, Default)]
pub struct Topology {
    /// `/sys/devices/system/cpu/online`.
    pub online: CpuSet,
    /// `/sys/devices/system/cpu/isolated` (isolcpus=); the kernel keeps RPS off them.
    pub isolated: CpuSet,
    /// Every device in `/sys/class/net`.
    pub devices: BTreeMap<String, DeviceInfo>,
    /// Online CPUs with a cpufreq scaling governor file.
    pub cpufreq_cpus: Vec<u32>,
    /// Governors the first cpufreq CPU offers.
    pub governors_available: BTreeSet<String>,
    /// Running irqbalance processes.
    pub irqbalance: Vec<ProcInfo>,
    /// irqbalance environment file: the one that exists, else (when the
    /// daemon runs without one) the first whose directory exists. None when
    /// irqbalance is not installed.
    pub irqbalance_config: Option<String>,
    /// Sysctls named by the profile that exist here (`net.core.somaxconn`).
    pub present_sysctls: BTreeSet<String>,
    /// Of those, the ones the kernel shows read-only here (in a network
    /// namespace: `net.core.rmem_max` and others it only lets the host set).
    pub readonly_sysctls: BTreeSet<String>,
    /// Profile sysctl names that are directories of /proc/sys (a group such
    /// as `net.ipv4.conf.eth0`), not settings.
    pub sysctl_groups: BTreeSet<String>,
    /// `fs.nr_open`, the ceiling of any nofile limit.
    pub nr_open: Option<u64>,
    /// xtune's own RLIMIT_NOFILE (soft, hard), what a shell started alike gets.
    pub nofile: Option<(u64, u64)>,
}

/// One network device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Interface name.
    pub name: String,
    /// Backed by hardware (has a `device` link), as opposed to lo, veth, bridges.
    pub hardware: bool,
    /// `rx-N` queue directory names in numeric order.
    pub rx_queues: Vec<String>,
    /// `tx-N` queue directory names in numeric order.
    pub tx_queues: Vec<String>,
    /// Data-path interrupts of the device, ascending.
    pub irqs: Vec<u32>,
    /// CPUs local to the device's NUMA node, when sysfs says (None when
    /// the device has no node: `numa_node` is -1).
    pub local_cpus: Option<CpuSet>,
    /// The device's NUMA node (`device/numa_node`), None for -1 or absent.
    pub numa_node: Option<u32>,
    /// The NIC's own settings, each group as read over ethtool netlink
    /// (`EOPNOTSUPP` for a group the driver lacks). Read only for the
    /// groups a profile sets.
    pub ethtool: BTreeMap<Group, Result<GroupState, FsError>>,
}

/// A running process.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcInfo {
    /// Process id.
    pub pid: u32,
    /// argv.
    pub cmdline: Vec<String>,
    /// systemd unit when the process runs in one (`irqbalance.service`).
    pub unit: Option<String>,
}

impl Topology {
    /// Reads what planning `profile` needs.
    pub fn read(fs: &dyn Fs, profile: &Profile) -> Topology {
        let online = read_cpulist(fs, "/sys/devices/system/cpu/online").unwrap_or_default();
        let isolated = read_cpulist(fs, "/sys/devices/system/cpu/isolated").unwrap_or_default();
        let irq_names = irq_action_names(fs);
        let mut devices = BTreeMap::new();
        let mut groups: BTreeSet<Group> = profile
            .nic
            .iter()
            .flat_map(|(_, s)| s.ethtool.iter().map(|e| e.group))
            .collect();
        if groups.contains(&Group::Rss) {
            // Whether the table is the driver's spread depends on the channels.
            groups.insert(Group::Channels);
        }
        for name in fs.list("/sys/class/net").unwrap_or_default() {
            let mut info = read_device(fs, &name, &irq_names);
            for g in &groups {
                let state = fs
                    .read(&group_path(&name, *g))
                    .map(|t| GroupState::parse(&t));
                info.ethtool.insert(*g, state);
            }
            devices.insert(name, info);
        }
        let mut cpufreq_cpus = Vec::new();
        for cpu in online.iter() {
            if fs.exists(&governor_path(cpu)) {
                cpufreq_cpus.push(cpu);
            }
        }
        let governors_available = cpufreq_cpus
            .first()
            .and_then(|cpu| {
                fs.read(&format!(
                    "/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_available_governors"
                ))
                .ok()
            })
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        let mut present_sysctls = BTreeSet::new();
        let mut readonly_sysctls = BTreeSet::new();
        let mut sysctl_groups = BTreeSet::new();
        let mut names: Vec<&str> = profile.sysctl.iter().map(|(k, _)| k.as_str()).collect();
        names.push("net.core.rps_sock_flow_entries");
        for name in names {
            if fs.is_dir(&sysctl_path(name)) {
                sysctl_groups.insert(name.to_string());
            } else if fs.exists(&sysctl_path(name)) {
                present_sysctls.insert(name.to_string());
                if fs.read_only(&sysctl_path(name)) {
                    readonly_sysctls.insert(name.to_string());
                }
            }
        }
        let nr_open = fs
            .read("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse().ok());
        let irqbalance = find_processes(fs, "irqbalance");
        let irqbalance_config = IRQBALANCE_CONFIGS
            .iter()
            .find(|p| fs.exists(p))
            .or_else(|| {
                if irqbalance.is_empty() {
                    return None;
                }
                IRQBALANCE_CONFIGS
                    .iter()
                    .find(|p| p.rsplit_once('/').is_some_and(|(dir, _)| fs.exists(dir)))
            })
            .map(|p| p.to_string());
        Topology {
            online,
            isolated,
            devices,
            cpufreq_cpus,
            governors_available,
            irqbalance,
            irqbalance_config,
            present_sysctls,
            sysctl_groups,
            readonly_sysctls,
            nr_open,
            nofile: own_nofile(),
        }
    }

    /// Online CPUs that are not isolated: where spread work may go.
    pub fn usable_cpus(&self) -> CpuSet {
        self.online.difference(&self.isolated)
    }
}

/// `/proc/sys/...` path of a dotted sysctl name; `/` inside a component stands
/// for a `.` in the file name, as sysctl(8) writes `net.ipv4.conf.eth0/100.rp_filter`.
pub fn sysctl_path(name: &str) -> String {
    let parts: Vec<String> = name.split('.').map(|p| p.replace('/', ".")).collect();
    format!("/proc/sys/{}", parts.join("/"))
}

/// The scaling governor file of a CPU.
pub fn governor_path(cpu: u32) -> String {
    format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor")
}

fn read_cpulist(fs: &dyn Fs, path: &str) -> Option<CpuSet> {
    fs.read(path)
        .ok()
        .and_then(|s| CpuSet::parse_list(trim_value(&s)).ok())
}

/// IRQ number → action names from `/proc/irq/N/<action>/` directories.
fn irq_action_names(fs: &dyn Fs) -> BTreeMap<u32, Vec<String>> {
    let mut out = BTreeMap::new();
    for entry in fs.list("/proc/irq").unwrap_or_default() {
        let Ok(irq) = entry.parse::<u32>() else {
            continue;
        };
        out.insert(irq, irq_actions(fs, irq));
    }
    out
}

/// The handlers registered on `irq` (the directories of `/proc/irq/N`, named
/// after their devices: `eth0-TxRx-3`, `virtio2-input.0`), sorted; empty when
/// it has none or does not exist.
pub fn irq_actions(fs: &dyn Fs, irq: u32) -> Vec<String> {
    let mut names: Vec<String> = fs
        .list(&format!("/proc/irq/{irq}"))
        .unwrap_or_default()
        .into_iter()
        .filter(|n| !IRQ_FILES.contains(&n.as_str()))
        .collect();
    names.sort();
    names
}

/// The IRQ number of a `/proc/irq/N/...` path.
pub fn irq_of_path(path: &str) -> Option<u32> {
    path.strip_prefix("/proc/irq/")?
        .split('/')
        .next()?
        .parse()
        .ok()
}

fn queue_sort(mut qs: Vec<String>) -> Vec<String> {
    qs.sort_by_key(|q| {
        q.rsplit('-')
            .next()
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(u32::MAX)
    });
    qs
}

fn read_device(fs: &dyn Fs, name: &str, irq_names: &BTreeMap<u32, Vec<String>>) -> DeviceInfo {
    let base = format!("/sys/class/net/{name}");
    let queues = fs.list(&format!("{base}/queues")).unwrap_or_default();
    let rx_queues = queue_sort(
        queues
            .iter()
            .filter(|q| q.starts_with("rx-"))
            .cloned()
            .collect(),
    );
    let tx_queues = queue_sort(
        queues
            .iter()
            .filter(|q| q.starts_with("tx-"))
            .cloned()
            .collect(),
    );
    let hardware = fs.exists(&format!("{base}/device"));
    let mut irqs: Vec<u32> = Vec::new();
    let mut local_cpus = None;
    let mut numa_node: Option<i64> = None;
    if hardware {
        // PCI NICs have msi_irqs on the device; virtio-net's device is the
        // virtio bus device, whose parent is the PCI function that owns the IRQs.
        for dir in [format!("{base}/device"), format!("{base}/device/..")] {
            if irqs.is_empty() {
                if let Ok(list) = fs.list(&format!("{dir}/msi_irqs")) {
                    irqs = list.iter().filter_map(|s| s.parse().ok()).collect();
                }
            }
            if irqs.is_empty() {
                if let Some(irq) = fs
                    .read(&format!("{dir}/irq"))
                    .ok()
                    .and_then(|s| s.trim().parse::<u32>().ok())
                    .filter(|&i| i != 0)
                {
                    irqs.push(irq);
                }
            }
            if numa_node.is_none() {
                numa_node = fs
                    .read(&format!("{dir}/numa_node"))
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
            }
            if local_cpus.is_none() {
                local_cpus =
                    read_cpulist(fs, &format!("{dir}/local_cpulist")).filter(|s| !s.is_empty());
            }
        }
        match numa_node {
            // No node: every CPU is as near as any other.
            Some(n) if n < 0 => local_cpus = None,
            Some(n) if local_cpus.is_none() => {
                local_cpus = read_cpulist(fs, &format!("/sys/devices/system/node/node{n}/cpulist"))
                    .filter(|s| !s.is_empty());
            }
            _ => {}
        }
    }
    if irqs.is_empty() {
        // Drivers name their vectors after the interface: eth0-TxRx-3, eth0-rx-1.
        irqs = irq_names
            .iter()
            .filter(|(_, names)| {
                names.iter().any(|n| {
                    n == name
                        || n.starts_with(&format!("{name}-"))
                        || n.starts_with(&format!("{name}@"))
                })
            })
            .map(|(irq, _)| *irq)
            .collect();
    }
    // Configuration vectors (virtio "-config", "-ctrl") carry no packets.
    let data: Vec<u32> = irqs
        .iter()
        .copied()
        .filter(|irq| {
            irq_names.get(irq).is_none_or(|names| {
                !names
                    .iter()
                    .any(|n| n.ends_with("-config") || n.ends_with("-ctrl"))
            })
        })
        .collect();
    let mut irqs = if data.is_empty() { irqs } else { data };
    irqs.sort_unstable();
    irqs.dedup();
    DeviceInfo {
        name: name.to_string(),
        hardware,
        rx_queues,
        tx_queues,
        irqs,
        local_cpus,
        numa_node: numa_node.and_then(|n| u32::try_from(n).ok()),
        ethtool: BTreeMap::new(),
    }
}

/// Processes whose `comm` is `comm`.
pub fn find_processes(fs: &dyn Fs, comm: &str) -> Vec<ProcInfo> {
    let mut out = Vec::new();
    for entry in fs.list("/proc").unwrap_or_default() {
        let Ok(pid) = entry.parse::<u32>() else {
            continue;
        };
        let Ok(c) = fs.read(&format!("/proc/{pid}/comm")) else {
            continue;
        };
        if c.trim() != comm || is_zombie(fs, pid) {
            continue;
        }
        let mut cmdline: Vec<String> = fs
            .read(&format!("/proc/{pid}/cmdline"))
            .map(|s| {
                s.split('\0')
                    .filter(|a| !a.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        // A program started by a relative path (`./irqbalance`) is restarted
        // by its absolute one: xtune's working directory is not the daemon's.
        if let Some(prog) = cmdline.first_mut() {
            if !prog.starts_with('/') && prog.contains('/') {
                if let Some(exe) = fs.read_link(&format!("/proc/{pid}/exe")) {
                    // A binary replaced since (a package upgrade) reads as
                    // "PATH (deleted)": the new one is at PATH.
                    *prog = exe.trim_end_matches(" (deleted)").to_string();
                }
            }
        }
        let unit = fs.read(&format!("/proc/{pid}/cgroup")).ok().and_then(|cg| {
            cg.lines()
                .filter_map(|l| l.rsplit('/').next())
                // Only the daemon's own unit: a process started from a shell
                // inside some other service must never make xtune stop that service.
                .find(|last| last.ends_with(".service") && last.contains(comm))
                .map(str::to_string)
        });
        out.push(ProcInfo { pid, cmdline, unit });
    }
    out
}

/// A zombie has exited and only waits for its parent to reap it.
pub fn is_zombie(fs: &dyn Fs, pid: u32) -> bool {
    fs.read(&format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // pid (comm) STATE ...; comm may contain spaces and parentheses.
            let after = stat.rsplit_once(')')?.1;
            after.split_whitespace().next().map(|s| s == "Z")
        })
        .unwrap_or(false)
}

fn own_nofile() -> Option<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct into `lim`, which lives for the call.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    (rc == 0).then_some((lim.rlim_cur, lim.rlim_max))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RootFs;
    use crate::testutil::{fake_host, TempDir};

    #[test]
    fn sysctl_names_map_to_proc_paths_with_slash_for_dot() {
        assert_eq!(
            sysctl_path("net.core.somaxconn"),
            "/proc/sys/net/core/somaxconn"
        );
        assert_eq!(
            sysctl_path("net.ipv4.conf.eth0/100.rp_filter"),
            "/proc/sys/net/ipv4/conf/eth0.100/rp_filter"
        );
    }

    #[test]
    fn virtio_device_irqs_come_from_the_pci_parent_without_config_vectors() {
        let t = fake_host("host-virtio", 2, &[], &[("eth0", 1, 1)]);
        // /sys/class/net/eth0/device -> ../../devices/pci0000:00/0000:00:03.0/virtio2
        t.mkdir("/sys/devices/pci0000:00/0000:00:03.0/virtio2");
        for irq in ["37", "38", "39"] {
            t.put(
                &format!("/sys/devices/pci0000:00/0000:00:03.0/msi_irqs/{irq}"),
                "msix\n",
            );
        }
        t.put(
            "/sys/devices/pci0000:00/0000:00:03.0/local_cpulist",
            "0-1\n",
        );
        t.symlink(
            "/sys/class/net/eth0/device",
            "../../../devices/pci0000:00/0000:00:03.0/virtio2",
        );
        t.mkdir("/proc/irq/37/virtio2-config");
        t.mkdir("/proc/irq/38/virtio2-input.0");
        t.mkdir("/proc/irq/39/virtio2-output.0");
        t.put("/proc/irq/38/smp_affinity", "3\n");
        let fs = RootFs::new(t.path());
        let topo = Topology::read(&fs, &Profile::default());
        let eth0 = &topo.devices["eth0"];
        assert!(eth0.hardware);
        assert_eq!(eth0.irqs, vec![38, 39]);
        assert_eq!(eth0.local_cpus, Some(CpuSet::parse_list("0-1").unwrap()));
        assert_eq!(eth0.rx_queues, vec!["rx-0"]);
        assert_eq!(topo.online, CpuSet::parse_list("0-1").unwrap());
    }

    #[test]
    fn irqs_named_after_the_interface_are_found_without_a_device_link() {
        let t = fake_host("host-named", 4, &[], &[("eth1", 2, 2)]);
        t.mkdir("/proc/irq/50/eth1-TxRx-0");
        t.mkdir("/proc/irq/51/eth1-TxRx-1");
        t.mkdir("/proc/irq/52/eth10-TxRx-0");
        let fs = RootFs::new(t.path());
        let topo = Topology::read(&fs, &Profile::default());
        assert_eq!(topo.devices["eth1"].irqs, vec![50, 51]);
        assert!(!topo.devices["eth1"].hardware);
    }

    #[test]
    fn a_sysctl_name_that_is_a_directory_is_a_group_not_a_setting() {
        let t = fake_host(
            "host-group",
            2,
            &[("net.ipv4.conf.va0.forwarding", "0")],
            &[],
        );
        let fs = RootFs::new(t.path());
        let p = Profile::from_text(
            "[sysctl]\n\"net.ipv4.conf.va0\" = 1\n\"net.ipv4.conf.va0.forwarding\" = 1\n",
            "p",
            t.path(),
        )
        .unwrap();
        let topo = Topology::read(&fs, &p);
        assert!(topo.sysctl_groups.contains("net.ipv4.conf.va0"));
        assert!(!topo.present_sysctls.contains("net.ipv4.conf.va0"));
        assert!(topo
            .present_sysctls
            .contains("net.ipv4.conf.va0.forwarding"));
    }

    #[test]
    fn queues_sort_numerically() {
        let t = TempDir::new("host-queues");
        for q in ["rx-0", "rx-1", "rx-10", "rx-2", "tx-0"] {
            t.mkdir(&format!("/sys/class/net/x/queues/{q}"));
        }
        let fs = RootFs::new(t.path());
        let topo = Topology::read(&fs, &Profile::default());
        assert_eq!(
            topo.devices["x"].rx_queues,
            vec!["rx-0", "rx-1", "rx-2", "rx-10"]
        );
    }

    #[test]
    fn irqbalance_process_and_its_unit_are_found() {
        let t = fake_host("host-irqb", 2, &[], &[]);
        t.put("/proc/812/comm", "irqbalance\n");
        t.put("/proc/812/cmdline", "/usr/sbin/irqbalance\0--foreground\0");
        t.put("/proc/812/cgroup", "0::/system.slice/irqbalance.service\n");
        t.put("/proc/9/comm", "bash\n");
        t.put("/proc/813/comm", "irqbalance\n");
        t.put("/proc/813/cgroup", "0::/system.slice/ci-runner.service\n");
        t.put("/proc/814/comm", "irqbalance\n");
        t.put("/proc/814/stat", "814 (irqbalance) Z 1 814 814 0 -1\n");
        let fs = RootFs::new(t.path());
        let p = find_processes(&fs, "irqbalance");
        assert_eq!(
            p,
            vec![
                ProcInfo {
                    pid: 812,
                    cmdline: vec!["/usr/sbin/irqbalance".into(), "--foreground".into()],
                    unit: Some("irqbalance.service".into())
                },
                ProcInfo {
                    pid: 813,
                    cmdline: vec![],
                    unit: None
                }
            ]
        );
    }

    #[test]
    fn a_daemon_started_by_a_relative_path_is_recorded_by_its_absolute_one() {
        let t = fake_host("host-relexe", 2, &[], &[]);
        t.put("/proc/900/comm", "irqbalance\n");
        t.put("/proc/900/cmdline", "./irqbalance\0--foreground\0");
        t.symlink("/proc/900/exe", "/opt/irqb/irqbalance");
        t.put("/proc/901/comm", "irqbalance\n");
        t.put("/proc/901/cmdline", "irqbalance\0"); // found on PATH: kept
        let fs = RootFs::new(t.path());
        let p = find_processes(&fs, "irqbalance");
        assert_eq!(p[0].cmdline, vec!["/opt/irqb/irqbalance", "--foreground"]);
        assert_eq!(p[1].cmdline, vec!["irqbalance"]);
    }
}
