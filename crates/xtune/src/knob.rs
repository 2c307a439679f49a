//! Knobs: what the profile wants, where it lives, and how a value read back
//! is judged by meaning.
//!
//! [`build`] turns a checked profile and the host [`Topology`] into a list of
//! [`Desired`] knobs, each with a stable identity (`sysctl:net.core.somaxconn`,
//! `rps:eth0:rx-0`, `irq:45`, `governor:cpu1`), the stage it is written in,
//! where it lives and the meaning it must have. [`compare`] judges a value read
//! back against that meaning. Both are pure.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::cpuset::CpuSet;
use crate::fs::{trim_value, FsError};
use crate::host::{governor_path, sysctl_path, DeviceInfo, ProcInfo, Topology};
use crate::profile::{DeviceSel, IrqPolicy, Profile, RpsPolicy, SysctlValue, XpsPolicy};

/// The sysctl the kernel rounds up to a power of two.
pub const RPS_SOCK_FLOW_ENTRIES: &str = "net.core.rps_sock_flow_entries";

/// Write order. NIC settings first (they can change queues and IRQs), then
/// IRQ affinity, steering masks, sysctls, and last the CPU governor and irqbalance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// `/sys/class/net/DEV/*`.
    Nic,
    /// `/proc/irq/N/smp_affinity`.
    Irq,
    /// RPS / XPS / RFS.
    Steering,
    /// `/proc/sys`.
    Sysctl,
    /// cpufreq governor.
    Cpu,
    /// irqbalance config and service.
    Irqbalance,
    /// Reported, never written.
    Advice,
}

/// One knob the profile sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    /// Stable identity, e.g. `rps:eth0:rx-0`.
    pub knob: String,
    /// When it is written.
    pub stage: Stage,
    /// Where it lives and what is written.
    pub target: Target,
    /// The meaning a value read back must have.
    pub wanted: Wanted,
}

/// Where a knob lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A kernel file; `value` is written as `echo value > path`.
    File {
        /// Host path.
        path: String,
        /// Text written.
        value: String,
    },
    /// The irqbalance daemon must not run.
    IrqbalanceService,
    /// `IRQBALANCE_BANNED_CPULIST` in irqbalance's environment file.
    IrqbalanceConfig {
        /// `/etc/default/irqbalance` or `/etc/sysconfig/irqbalance`.
        path: String,
    },
    /// The knob does not exist on this host (no cpufreq in a VM); reported, not a drift.
    Unavailable {
        /// Why.
        reason: String,
    },
    /// Advice only (limits).
    Advice,
}

/// The meaning a knob must have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wanted {
    /// Whole value, whitespace-trimmed (sysfs integers, governor names).
    Exact(String),
    /// Whitespace-separated elements, integers compared as numbers
    /// (`4096\t131072\t6291456` equals `4096 131072 6291456`).
    Words(Vec<String>),
    /// A CPU set; both sides are cut to `keep` (online, and for RPS not
    /// isolated) because the kernel drops the other CPUs from the mask.
    Cpus {
        /// Requested CPUs.
        set: CpuSet,
        /// CPUs the kernel keeps in the mask.
        keep: CpuSet,
        /// The file holds a hex mask (else a list).
        hex: bool,
    },
    /// An integer the kernel rounds up to a power of two.
    PowerOfTwo(u64),
    /// A set of ports (`ip_local_reserved_ports`): the kernel prints it
    /// sorted with runs merged (`9000-9010,8080` reads `8080,9000-9010`).
    /// Merged, sorted ranges.
    Ports(Vec<(u32, u32)>),
    /// A set of names in any order (`tcp_allowed_congestion_control`, which
    /// the kernel lists in its own order). Sorted, deduplicated.
    Names(Vec<String>),
    /// irqbalance not running.
    Stopped,
    /// irqbalance banned CPU list.
    BannedCpus(CpuSet),
    /// Open-file limit advice.
    Nofile {
        /// Limit the profile asks for.
        wanted: u64,
        /// xtune's own soft and hard limit.
        own: Option<(u64, u64)>,
        /// `fs.nr_open`.
        nr_open: Option<u64>,
    },
}

/// A knob's current state as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Current {
    /// A kernel file; `effective` is the IRQ's effective affinity when readable.
    File {
        /// Raw content or the read error.
        raw: Result<String, FsError>,
        /// `effective_affinity_list` of an IRQ.
        effective: Option<String>,
    },
    /// Running irqbalance processes.
    Service(Vec<ProcInfo>),
    /// irqbalance environment file content (None: absent).
    Config(Option<String>),
    /// Nothing to read (unavailable or advice knobs).
    Nothing,
}

/// The verdict of [`compare`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comparison {
    /// The value means what the profile wants.
    pub matches: bool,
    /// Actual value for display (`3 (0-1)`).
    pub actual: String,
    /// Wanted value for display.
    pub wanted: String,
    /// Why it matches despite different text, or why it does not.
    pub reason: String,
}

/// Why the profile cannot be planned on this host. Nothing has been written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A named device is absent.
    #[error("[{section}] names device `{device}`, which does not exist here (devices: {present})")]
    NoDevice {
        /// Profile section.
        section: &'static str,
        /// Device name.
        device: String,
        /// Devices that do exist.
        present: String,
    },
    /// A sysctl this kernel does not have.
    #[error("sysctl {key} does not exist on this kernel (no {path})")]
    UnknownSysctl {
        /// Dotted name.
        key: String,
        /// Path looked for.
        path: String,
    },
    /// A sysctl name that is a group (a directory of /proc/sys), not a setting.
    #[error("sysctl {key} is a group of settings, not one ({path} is a directory): name one of its entries")]
    SysctlGroup {
        /// Dotted name.
        key: String,
        /// The directory.
        path: String,
    },
    /// Global knobs asked for inside a network namespace.
    #[error("refusing to apply host-wide settings inside network namespace `{netns}`: {} (they are not per namespace on this kernel; apply them on the host, or pass --skip-global to leave them out)", knobs.join(", "))]
    GlobalInNetns {
        /// Namespace name.
        netns: String,
        /// The global knobs.
        knobs: Vec<String>,
    },
    /// A CPU list with no online, usable CPU.
    #[error(
        "{knob}: none of CPUs {requested} is online{isolated}; the kernel would reject the mask"
    )]
    NoUsableCpus {
        /// Knob.
        knob: String,
        /// CPUs asked for.
        requested: CpuSet,
        /// " and not isolated" for RPS.
        isolated: &'static str,
    },
    /// A governor cpufreq does not offer.
    #[error("cpu governor `{governor}` is not available here (available: {available})")]
    GovernorUnavailable {
        /// Asked for.
        governor: String,
        /// Offered.
        available: String,
    },
}

impl PlanError {
    /// Exit code: 2 when the request contradicts itself (global knobs in a
    /// namespace), 1 when this host cannot do it.
    pub fn exit_code(&self) -> i32 {
        match self {
            PlanError::GlobalInNetns { .. } => 2,
            _ => 1,
        }
    }
}

/// The kind of target a plan is made for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetCtx {
    /// Network namespace name, when inside one.
    pub netns: Option<String>,
    /// `net.*` sysctls of the profile that exist in the host's (initial) namespace,
    /// read before entering `netns`: present there but absent inside means global.
    pub host_net_sysctls: BTreeSet<String>,
    /// Leave global knobs out (with a note) instead of refusing.
    pub skip_global: bool,
}

/// Output of [`build`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Build {
    /// Knobs in write order.
    pub desired: Vec<Desired>,
    /// Things the user should know (skipped devices, single-queue XPS...).
    pub notes: Vec<String>,
}

/// Expands the profile into knobs for this host. Pure.
pub fn build(profile: &Profile, topo: &Topology, ctx: &TargetCtx) -> Result<Build, PlanError> {
    let mut b = Build::default();
    let usable = topo.usable_cpus();

    // Global knobs in a network namespace: refuse, or leave out with a note.
    let mut global: Vec<String> = Vec::new();
    let mut skip_sysctl: BTreeSet<String> = BTreeSet::new();
    let mut skip_irq = false;
    let mut skip_cpu = false;
    let mut skip_irqbalance = false;
    let mut skip_flow_entries = false;
    if let Some(netns) = &ctx.netns {
        for (key, _) in &profile.sysctl {
            if is_global_in_netns(key, topo, ctx) {
                global.push(format!("sysctl {key}"));
                skip_sysctl.insert(key.clone());
            }
        }
        if profile.rfs.flow_entries.is_some()
            && is_global_in_netns(RPS_SOCK_FLOW_ENTRIES, topo, ctx)
        {
            global.push(format!("[rfs] flow_entries ({RPS_SOCK_FLOW_ENTRIES})"));
            skip_flow_entries = true;
        }
        if !profile.irq.is_empty() {
            global.push("[irq] (interrupt affinity is host-wide)".into());
            skip_irq = true;
        }
        if profile.cpu.governor.is_some() {
            global.push("[cpu] governor".into());
            skip_cpu = true;
        }
        if profile.irqbalance.stop.is_some() || profile.irqbalance.ban.is_some() {
            global.push("[irqbalance]".into());
            skip_irqbalance = true;
        }
        if !global.is_empty() {
            if !ctx.skip_global {
                return Err(PlanError::GlobalInNetns {
                    netns: netns.clone(),
                    knobs: global,
                });
            }
            b.notes.push(format!(
                "left out in netns {netns} (host-wide, not per namespace): {}",
                global.join(", ")
            ));
        }
    }

    // NIC-level settings.
    let nic = expand(&profile.nic, topo, "nic", &mut b.notes, |_| true)?;
    for (dev, s) in nic {
        let base = format!("/sys/class/net/{}", dev.name);
        let mut add = |name: &str, file: &str, value: String| {
            b.desired.push(Desired {
                knob: format!("nic:{}:{name}", dev.name),
                stage: Stage::Nic,
                target: Target::File {
                    path: format!("{base}/{file}"),
                    value: value.clone(),
                },
                wanted: Wanted::Exact(value),
            });
        };
        if let Some(v) = s.txqueuelen {
            add("txqueuelen", "tx_queue_len", v.to_string());
        }
        if let Some(v) = s.gro_flush_timeout_ns {
            add("gro_flush_timeout_ns", "gro_flush_timeout", v.to_string());
        }
        if let Some(v) = s.napi_defer_hard_irqs {
            add(
                "napi_defer_hard_irqs",
                "napi_defer_hard_irqs",
                v.to_string(),
            );
        }
        if let Some(v) = s.threaded_napi {
            add("threaded_napi", "threaded", u8::from(v).to_string());
        }
    }

    // IRQ affinity.
    if !skip_irq {
        let irq = expand(&profile.irq, topo, "irq", &mut b.notes, |d| {
            !d.irqs.is_empty()
        })?;
        for (dev, policy) in irq {
            if dev.irqs.is_empty() {
                b.notes.push(format!(
                    "irq: {} has no interrupts of its own; nothing to pin",
                    dev.name
                ));
                continue;
            }
            let usable_list: Vec<u32> = usable.iter().collect();
            for (i, irq) in dev.irqs.iter().enumerate() {
                let knob = format!("irq:{irq}");
                let set = match &policy {
                    IrqPolicy::Spread => {
                        if usable_list.is_empty() {
                            return Err(PlanError::NoUsableCpus {
                                knob,
                                requested: topo.online.clone(),
                                isolated: " and not isolated",
                            });
                        }
                        CpuSet::from_cpus([usable_list[i % usable_list.len()]])
                    }
                    IrqPolicy::Cpus(c) => c.clone(),
                    IrqPolicy::NumaLocal => match &dev.local_cpus {
                        Some(local) if !local.intersection(&usable).is_empty() => {
                            local.intersection(&usable)
                        }
                        _ => {
                            if i == 0 {
                                b.notes.push(format!(
                                    "irq: {} reports no NUMA node CPUs; numa-local means all usable CPUs ({usable})",
                                    dev.name
                                ));
                            }
                            usable.clone()
                        }
                    },
                };
                let write = set.intersection(&topo.online);
                if write.is_empty() {
                    return Err(PlanError::NoUsableCpus {
                        knob,
                        requested: set,
                        isolated: "",
                    });
                }
                b.desired.push(Desired {
                    knob,
                    stage: Stage::Irq,
                    target: Target::File {
                        path: format!("/proc/irq/{irq}/smp_affinity"),
                        value: write.to_hex_mask(),
                    },
                    wanted: Wanted::Cpus {
                        set,
                        keep: topo.online.clone(),
                        hex: true,
                    },
                });
            }
        }
    }

    // RPS.
    let rps = expand(&profile.rps, topo, "rps", &mut b.notes, |d| {
        !d.rx_queues.is_empty()
    })?;
    for (dev, policy) in rps {
        let set = match &policy {
            RpsPolicy::All => usable.clone(),
            RpsPolicy::Off => CpuSet::new(),
            RpsPolicy::Cpus(c) => c.clone(),
        };
        let write = set.intersection(&usable);
        if write.is_empty() && !set.is_empty() {
            return Err(PlanError::NoUsableCpus {
                knob: format!("rps:{}", dev.name),
                requested: set,
                isolated: " and not isolated",
            });
        }
        if dev.rx_queues.is_empty() {
            b.notes.push(format!("rps: {} has no rx queues", dev.name));
        }
        for q in &dev.rx_queues {
            b.desired.push(Desired {
                knob: format!("rps:{}:{q}", dev.name),
                stage: Stage::Steering,
                target: Target::File {
                    path: format!("/sys/class/net/{}/queues/{q}/rps_cpus", dev.name),
                    value: write.to_hex_mask(),
                },
                wanted: Wanted::Cpus {
                    set: set.clone(),
                    keep: usable.clone(),
                    hex: true,
                },
            });
        }
    }

    // XPS.
    let xps = expand(&profile.xps, topo, "xps", &mut b.notes, |d| {
        d.tx_queues.len() > 1
    })?;
    for (dev, policy) in xps {
        if dev.tx_queues.len() <= 1 {
            b.notes.push(format!(
                "xps: {} has {} tx queue(s); XPS applies to multi-queue devices only",
                dev.name,
                dev.tx_queues.len()
            ));
            continue;
        }
        let cpus: Vec<u32> = usable.iter().collect();
        let nq = dev.tx_queues.len();
        for (i, q) in dev.tx_queues.iter().enumerate() {
            let set = match policy {
                XpsPolicy::Off => CpuSet::new(),
                XpsPolicy::Spread if cpus.is_empty() => CpuSet::new(),
                XpsPolicy::Spread if nq >= cpus.len() => CpuSet::from_cpus([cpus[i % cpus.len()]]),
                XpsPolicy::Spread => cpus
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| j % nq == i)
                    .map(|(_, c)| *c)
                    .collect(),
            };
            b.desired.push(Desired {
                knob: format!("xps:{}:{q}", dev.name),
                stage: Stage::Steering,
                target: Target::File {
                    path: format!("/sys/class/net/{}/queues/{q}/xps_cpus", dev.name),
                    value: set.to_hex_mask(),
                },
                wanted: Wanted::Cpus {
                    set,
                    keep: topo.online.clone(),
                    hex: true,
                },
            });
        }
    }

    // RFS: per-queue flow tables, then the global socket flow table.
    let rfs = expand(
        &profile.rfs.flow_cnt,
        topo,
        "rfs.flow_cnt",
        &mut b.notes,
        |d| !d.rx_queues.is_empty(),
    )?;
    for (dev, cnt) in rfs {
        for q in &dev.rx_queues {
            b.desired.push(Desired {
                knob: format!("rfs:{}:{q}", dev.name),
                stage: Stage::Steering,
                target: Target::File {
                    path: format!("/sys/class/net/{}/queues/{q}/rps_flow_cnt", dev.name),
                    value: cnt.to_string(),
                },
                wanted: Wanted::PowerOfTwo(cnt),
            });
        }
    }
    let mut sysctls: Vec<(String, SysctlValue)> = profile.sysctl.clone();
    if let Some(n) = profile.rfs.flow_entries {
        if let Some(pos) = sysctls.iter().position(|(k, _)| k == RPS_SOCK_FLOW_ENTRIES) {
            sysctls.remove(pos);
            b.notes.push(format!(
                "{RPS_SOCK_FLOW_ENTRIES} is set in both [rfs] flow_entries and [sysctl]; [rfs] wins"
            ));
        }
        if !skip_flow_entries {
            let d = sysctl_desired(
                RPS_SOCK_FLOW_ENTRIES,
                &SysctlValue::Int(i64::try_from(n).unwrap_or(i64::MAX)),
                topo,
                Stage::Steering,
            )?;
            b.desired.push(d);
        }
    }

    // Sysctls, in profile order.
    for (key, value) in &sysctls {
        if skip_sysctl.contains(key) {
            continue;
        }
        b.desired
            .push(sysctl_desired(key, value, topo, Stage::Sysctl)?);
    }

    // Governor.
    if let (Some(g), false) = (&profile.cpu.governor, skip_cpu) {
        if topo.cpufreq_cpus.is_empty() {
            b.desired.push(Desired {
                knob: "governor:*".into(),
                stage: Stage::Cpu,
                target: Target::Unavailable {
                    reason: "no cpufreq on this host (a VM, or frequency under firmware control)"
                        .into(),
                },
                wanted: Wanted::Exact(g.clone()),
            });
        } else {
            if !topo.governors_available.is_empty() && !topo.governors_available.contains(g) {
                return Err(PlanError::GovernorUnavailable {
                    governor: g.clone(),
                    available: topo
                        .governors_available
                        .iter()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(" "),
                });
            }
            for cpu in &topo.cpufreq_cpus {
                b.desired.push(Desired {
                    knob: format!("governor:cpu{cpu}"),
                    stage: Stage::Cpu,
                    target: Target::File {
                        path: governor_path(*cpu),
                        value: g.clone(),
                    },
                    wanted: Wanted::Exact(g.clone()),
                });
            }
        }
    }

    // irqbalance: the ban list first (written while the daemon may still run),
    // then stopping it.
    if !skip_irqbalance {
        if let Some(ban) = &profile.irqbalance.ban {
            let target = match &topo.irqbalance_config {
                Some(path) => Target::IrqbalanceConfig { path: path.clone() },
                None => Target::Unavailable {
                    reason: "irqbalance is not installed (not running, no /etc/default/irqbalance or /etc/sysconfig/irqbalance)".into(),
                },
            };
            b.desired.push(Desired {
                knob: "irqbalance:banned_cpus".into(),
                stage: Stage::Irqbalance,
                target,
                wanted: Wanted::BannedCpus(ban.clone()),
            });
        }
        if profile.irqbalance.stop == Some(true) {
            b.desired.push(Desired {
                knob: "irqbalance:service".into(),
                stage: Stage::Irqbalance,
                target: Target::IrqbalanceService,
                wanted: Wanted::Stopped,
            });
        }
    }

    if let Some(n) = profile.limits.nofile {
        b.desired.push(Desired {
            knob: "limits:nofile".into(),
            stage: Stage::Advice,
            target: Target::Advice,
            wanted: Wanted::Nofile {
                wanted: n,
                own: topo.nofile,
                nr_open: topo.nr_open,
            },
        });
    }

    // Stable write order by stage; within a stage, profile order.
    b.desired.sort_by_key(|d| d.stage);
    Ok(b)
}

fn is_global_in_netns(key: &str, topo: &Topology, ctx: &TargetCtx) -> bool {
    if !key.starts_with("net.") {
        return true; // kernel.*, vm.*, fs.*: never per network namespace
    }
    // Absent in the namespace, or there but read-only (Linux 6.18 shows
    // net.core.rmem_max and friends as 0444 outside the initial namespace).
    (!topo.present_sysctls.contains(key) || topo.readonly_sysctls.contains(key))
        && ctx.host_net_sysctls.contains(key)
}

/// Sysctls that hold a set of ports, compared as sets.
const PORT_SET_SYSCTLS: &[&str] = &["net.ipv4.ip_local_reserved_ports"];
/// Sysctls that hold a set of names, compared in any order.
const NAME_SET_SYSCTLS: &[&str] = &["net.ipv4.tcp_allowed_congestion_control"];

/// A port set as the kernel reads one (`8080,9000-9010`; empty is none):
/// sorted, merged ranges, or None when it is not one.
fn port_set(s: &str) -> Option<Vec<(u32, u32)>> {
    let mut ranges = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
            None => {
                let p: u32 = part.parse().ok()?;
                (p, p)
            }
        };
        if a > b || b > 65_535 {
            return None;
        }
        ranges.push((a, b));
    }
    ranges.sort_unstable();
    let mut merged: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match merged.last_mut() {
            Some(last) if a <= last.1 + 1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    Some(merged)
}

fn port_text(set: &[(u32, u32)]) -> String {
    let parts: Vec<String> = set
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    parts.join(",")
}

fn name_set(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.split_whitespace().map(str::to_string).collect();
    v.sort();
    v.dedup();
    v
}

fn sysctl_desired(
    key: &str,
    value: &SysctlValue,
    topo: &Topology,
    stage: Stage,
) -> Result<Desired, PlanError> {
    let path = sysctl_path(key);
    if topo.sysctl_groups.contains(key) {
        return Err(PlanError::SysctlGroup {
            key: key.to_string(),
            path,
        });
    }
    if !topo.present_sysctls.contains(key) {
        return Err(PlanError::UnknownSysctl {
            key: key.to_string(),
            path,
        });
    }
    let write = value.to_write_string();
    let wanted = match value {
        SysctlValue::Int(n) if key == RPS_SOCK_FLOW_ENTRIES && *n >= 0 => {
            Wanted::PowerOfTwo(*n as u64)
        }
        _ if PORT_SET_SYSCTLS.contains(&key) => match port_set(&write) {
            Some(set) => Wanted::Ports(set),
            None => Wanted::Words(write.split_whitespace().map(str::to_string).collect()),
        },
        _ if NAME_SET_SYSCTLS.contains(&key) => Wanted::Names(name_set(&write)),
        _ => Wanted::Words(write.split_whitespace().map(str::to_string).collect()),
    };
    Ok(Desired {
        knob: format!("sysctl:{key}"),
        stage,
        target: Target::File { path, value: write },
        wanted,
    })
}

/// Resolves a section's device entries: `*` first (hardware devices that
/// `applies` to), then named devices, which win over `*`.
fn expand<'t, T: Clone>(
    entries: &[(DeviceSel, T)],
    topo: &'t Topology,
    section: &'static str,
    notes: &mut Vec<String>,
    applies: impl Fn(&DeviceInfo) -> bool,
) -> Result<Vec<(&'t DeviceInfo, T)>, PlanError> {
    let mut out: Vec<(&DeviceInfo, T)> = Vec::new();
    let why_not = match section {
        "irq" => "no interrupts found for it",
        "xps" => "one tx queue (XPS applies to multi-queue devices only)",
        _ => "no rx queues",
    };
    for (_, v) in entries.iter().filter(|(s, _)| *s == DeviceSel::AllHardware) {
        let hardware: Vec<&DeviceInfo> = topo.devices.values().filter(|d| d.hardware).collect();
        if hardware.is_empty() {
            notes.push(format!(
                "[{section}] \"*\" matches no hardware network device here"
            ));
        }
        for d in hardware {
            if applies(d) {
                out.push((d, v.clone()));
            } else {
                notes.push(format!(
                    "[{section}] \"*\" leaves out {}: {why_not}",
                    d.name
                ));
            }
        }
    }
    for (sel, v) in entries {
        let DeviceSel::Named(name) = sel else {
            continue;
        };
        let Some(d) = topo.devices.get(name) else {
            return Err(PlanError::NoDevice {
                section,
                device: name.clone(),
                present: topo.devices.keys().cloned().collect::<Vec<_>>().join(", "),
            });
        };
        match out.iter_mut().find(|(o, _)| o.name == *name) {
            Some(slot) => slot.1 = v.clone(),
            None => out.push((d, v.clone())),
        }
    }
    Ok(out)
}

/// Judges `current` against `desired` by meaning. Pure.
pub fn compare(desired: &Desired, current: &Current) -> Comparison {
    match (&desired.wanted, current) {
        (
            Wanted::Nofile {
                wanted,
                own,
                nr_open,
            },
            _,
        ) => nofile_advice(*wanted, *own, *nr_open),
        (wanted, _) if matches!(desired.target, Target::Unavailable { .. }) => {
            let reason = match &desired.target {
                Target::Unavailable { reason } => reason.clone(),
                _ => String::new(),
            };
            Comparison {
                matches: true,
                actual: "-".into(),
                wanted: wanted_text(wanted),
                reason,
            }
        }
        (Wanted::Stopped, Current::Service(procs)) => Comparison {
            matches: procs.is_empty(),
            actual: if procs.is_empty() {
                "not running".into()
            } else {
                format!(
                    "running (pid {})",
                    procs
                        .iter()
                        .map(|p| p.pid.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
            wanted: "not running".into(),
            reason: String::new(),
        },
        (Wanted::BannedCpus(set), Current::Config(content)) => {
            let actual = content.as_deref().and_then(banned_cpulist);
            let parsed = actual.as_deref().map(CpuSet::parse_list);
            let (matches, actual_text, reason) = match parsed {
                None => (false, "unset".to_string(), String::new()),
                Some(Ok(a)) => (a == *set, a.to_string(), String::new()),
                Some(Err(e)) => (false, actual.unwrap_or_default(), e.to_string()),
            };
            Comparison {
                matches,
                actual: actual_text,
                wanted: set.to_string(),
                reason,
            }
        }
        (wanted, Current::File { raw, effective }) => match raw {
            Err(e) => Comparison {
                matches: false,
                actual: format!("unreadable: {}", e.errno_name()),
                wanted: wanted_text(wanted),
                reason: e.to_string(),
            },
            Ok(raw) => compare_value(wanted, trim_value(raw), effective.as_deref()),
        },
        (wanted, _) => Comparison {
            matches: false,
            actual: "-".into(),
            wanted: wanted_text(wanted),
            reason: "no value read".into(),
        },
    }
}

/// An integer as the kernel's sysctl parser reads it (`strtoul` base 0):
/// `0x` hex, a leading `0` octal, else decimal, with an optional sign.
fn kernel_int(s: &str) -> Option<i128> {
    let (neg, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let v = if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        i128::from_str_radix(hex, 16).ok()?
    } else if digits.len() > 1 && digits.starts_with('0') {
        if !digits.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
            return None;
        }
        i128::from_str_radix(digits, 8).ok()?
    } else {
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()?
    };
    Some(if neg { -v } else { v })
}

/// Compares one value read from a kernel file with what it must mean.
pub fn compare_value(wanted: &Wanted, actual: &str, effective: Option<&str>) -> Comparison {
    let wanted_display = wanted_text(wanted);
    let same_text = |a: &str| Comparison {
        matches: a.trim() == wanted_display.trim(),
        actual: a.trim().to_string(),
        wanted: wanted_display.clone(),
        reason: String::new(),
    };
    match wanted {
        Wanted::Exact(w) => {
            let a = actual.trim();
            Comparison {
                matches: a == w.trim(),
                actual: a.to_string(),
                wanted: w.clone(),
                reason: String::new(),
            }
        }
        Wanted::Words(w) => {
            let a: Vec<&str> = actual.split_whitespace().collect();
            let matches = a.len() == w.len()
                && a.iter()
                    .zip(w)
                    // Read: the kernel prints decimal. Wanted: as the kernel parses a write.
                    .all(|(x, y)| match (x.parse::<i128>().ok(), kernel_int(y)) {
                        (Some(p), Some(q)) => p == q,
                        _ => *x == y.as_str(),
                    });
            let display = a.join(" ");
            let reason = if matches && display != actual.trim() {
                "same elements (kernel separates with tabs)".to_string()
            } else if !matches && a.len() != w.len() {
                format!("{} elements, wanted {}", a.len(), w.len())
            } else {
                String::new()
            };
            Comparison {
                matches,
                actual: display,
                wanted: wanted_display,
                reason,
            }
        }
        Wanted::Cpus { set, keep, hex } => {
            let parsed = if *hex {
                CpuSet::parse_hex_mask(actual)
            } else {
                CpuSet::parse_list(actual)
            };
            let a = match parsed {
                Ok(a) => a,
                Err(e) => {
                    return Comparison {
                        matches: false,
                        actual: actual.trim().to_string(),
                        wanted: wanted_display,
                        reason: e.to_string(),
                    }
                }
            };
            let want_kept = set.intersection(keep);
            let actual_kept = a.intersection(keep);
            let matches = want_kept == actual_kept;
            let dropped = set.difference(keep);
            let mut reason = Vec::new();
            if !dropped.is_empty() {
                reason.push(format!(
                    "CPUs {dropped} offline or isolated: the kernel leaves them out"
                ));
            }
            if let Some(eff) = effective {
                if let Ok(e) = CpuSet::parse_list(trim_value(eff)) {
                    if matches && !e.is_empty() && !e.is_subset(&want_kept) {
                        // x86 moves an interrupt from its own handler: the
                        // effective target follows at the next interrupt.
                        reason.push(format!("effective {e} until the interrupt next fires"));
                    } else {
                        reason.push(format!("effective {e}"));
                    }
                }
            }
            Comparison {
                matches,
                actual: if *hex {
                    format!("{} ({})", actual.trim(), a)
                } else {
                    a.to_string()
                },
                wanted: wanted_display,
                reason: reason.join("; "),
            }
        }
        Wanted::PowerOfTwo(n) => {
            let expect = round_pow2(*n);
            match actual.trim().parse::<u64>() {
                Ok(a) => Comparison {
                    matches: a == expect,
                    actual: a.to_string(),
                    wanted: wanted_display,
                    reason: if expect != *n && a == expect {
                        format!("kernel rounds {n} up to {expect}")
                    } else if expect != *n {
                        format!("kernel stores {n} as {expect}")
                    } else {
                        String::new()
                    },
                },
                Err(_) => Comparison {
                    matches: false,
                    actual: actual.trim().to_string(),
                    wanted: wanted_display,
                    reason: "not an integer".into(),
                },
            }
        }
        Wanted::Ports(set) => match port_set(actual.trim()) {
            Some(a) => Comparison {
                matches: a == *set,
                actual: port_text(&a),
                wanted: wanted_display,
                reason: String::new(),
            },
            None => Comparison {
                matches: false,
                actual: actual.trim().to_string(),
                wanted: wanted_display,
                reason: "not a port list".into(),
            },
        },
        Wanted::Names(names) => {
            let a = name_set(actual);
            let matches = a == *names;
            let reason = if matches
                && actual.split_whitespace().collect::<Vec<_>>().join(" ") != names.join(" ")
            {
                "same names (the kernel lists them in its own order)".to_string()
            } else {
                String::new()
            };
            Comparison {
                matches,
                actual: actual.split_whitespace().collect::<Vec<_>>().join(" "),
                wanted: wanted_display,
                reason,
            }
        }
        Wanted::Stopped | Wanted::BannedCpus(_) | Wanted::Nofile { .. } => same_text(actual),
    }
}

/// What the kernel stores for a flow table size: the next power of two (0 stays 0).
pub fn round_pow2(n: u64) -> u64 {
    if n == 0 {
        0
    } else {
        n.checked_next_power_of_two().unwrap_or(u64::MAX)
    }
}

/// Display form of a wanted value.
pub fn wanted_text(w: &Wanted) -> String {
    match w {
        Wanted::Exact(s) => s.clone(),
        Wanted::Words(ws) => ws.join(" "),
        Wanted::Cpus { set, keep, .. } => {
            let kept = set.intersection(keep);
            if kept.is_empty() {
                "none".into()
            } else {
                kept.to_string()
            }
        }
        Wanted::PowerOfTwo(n) => {
            let r = round_pow2(*n);
            if r == *n {
                n.to_string()
            } else {
                format!("{n} (={r})")
            }
        }
        Wanted::Ports(set) => port_text(set),
        Wanted::Names(names) => names.join(" "),
        Wanted::Stopped => "not running".into(),
        Wanted::BannedCpus(s) => s.to_string(),
        Wanted::Nofile { wanted, .. } => format!(">= {wanted}"),
    }
}

fn nofile_advice(wanted: u64, own: Option<(u64, u64)>, nr_open: Option<u64>) -> Comparison {
    let mut reason = format!(
        "a tool cannot raise another process's limit: run `ulimit -n {wanted}` in the shell that starts the load generator, or set LimitNOFILE={wanted} in its systemd unit"
    );
    if let Some(max) = nr_open {
        if wanted > max {
            reason.push_str(&format!(
                "; {wanted} is above fs.nr_open ({max}): add fs.nr_open = {wanted} to [sysctl] first"
            ));
        }
    }
    let (matches, actual) = match own {
        Some((soft, hard)) => (soft >= wanted, format!("soft {soft}, hard {hard}")),
        None => (false, "unknown".into()),
    };
    Comparison {
        matches,
        actual,
        wanted: format!(">= {wanted}"),
        reason,
    }
}

/// The `IRQBALANCE_BANNED_CPULIST` value in an irqbalance environment file.
pub fn banned_cpulist(content: &str) -> Option<String> {
    content.lines().rev().find_map(|l| {
        let l = l.trim();
        let l = l.strip_prefix("export ").unwrap_or(l);
        l.strip_prefix("IRQBALANCE_BANNED_CPULIST=")
            .map(|v| v.trim().trim_matches('"').trim_matches('\'').to_string())
    })
}

/// `content` with `IRQBALANCE_BANNED_CPULIST` set to `cpus` (replacing the
/// existing assignment, or appended).
pub fn with_banned_cpulist(content: Option<&str>, cpus: &CpuSet) -> String {
    let line = format!("IRQBALANCE_BANNED_CPULIST={}", cpus.to_list());
    let mut out = String::new();
    let mut replaced = false;
    for l in content.unwrap_or("").lines() {
        let t = l.trim();
        let t = t.strip_prefix("export ").unwrap_or(t);
        if t.starts_with("IRQBALANCE_BANNED_CPULIST=") {
            if !replaced {
                out.push_str(&line);
                out.push('\n');
                replaced = true;
            }
        } else {
            out.push_str(l);
            out.push('\n');
        }
    }
    if !replaced {
        out.push_str("# set by xtune\n");
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{NicSettings, Rfs};

    fn set(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn cpus(s: &str, keep: &str) -> Wanted {
        Wanted::Cpus {
            set: set(s),
            keep: set(keep),
            hex: true,
        }
    }

    #[test]
    fn verify_by_meaning_table() {
        // (wanted, value read back, matches)
        let words = |s: &str| Wanted::Words(s.split_whitespace().map(str::to_string).collect());
        let table: Vec<(Wanted, &str, bool)> = vec![
            // CPU masks: hex with and without comma groups, the meaning is the set.
            (cpus("0-7", "0-63"), "ff\n", true),
            (cpus("0-7", "0-63"), "00000000,000000ff\n", true),
            (cpus("0-7", "0-63"), "000000ff", true),
            (cpus("32", "0-63"), "00000001,00000000", true),
            (cpus("0-7", "0-63"), "7f", false),
            (cpus("0-1", "0-1"), "3", true),
            (cpus("0", "0-1"), "3", false),
            // CPUs the kernel drops (offline, isolated) do not count.
            (cpus("0-3", "0-1"), "3", true),
            (cpus("0-3", "0-1"), "1", false),
            // Empty mask.
            (cpus("", "0-1"), "0", true),
            (cpus("", "0-7"), "00000000,00000000", true),
            (
                Wanted::Cpus {
                    set: set("0-3,6"),
                    keep: set("0-7"),
                    hex: false,
                },
                "0-3,6\n",
                true,
            ),
            (
                Wanted::Cpus {
                    set: set("0-3"),
                    keep: set("0-7"),
                    hex: false,
                },
                "0,1,2,3",
                true,
            ),
            // Vector sysctls: tabs vs spaces, element by element.
            (
                words("4096 131072 6291456"),
                "4096\t131072\t6291456\n",
                true,
            ),
            (words("4096 131072 6291456"), "4096 131072 6291456", true),
            (words("1024 65535"), "1024\t65535\n", true),
            (words("1024 65535"), "1024\t65534\n", false),
            (words("1024 65535"), "1024\n", false),
            (words("4096"), "04096\n", true),
            // Integers written in another base, as the kernel parses them.
            (words("0x2000"), "8192\n", true),
            (words("0X2000"), "8192\n", true),
            (words("0755"), "493\n", true),
            (words("0755"), "755\n", false),
            (words("-0x10"), "-16\n", true),
            (words("0x"), "0\n", false),
            (words("08"), "8\n", false),
            (words("0"), "0\n", true),
            (words("bbr"), "bbr\n", true),
            (words("bbr"), "cubic\n", false),
            // Power-of-two rounding of flow tables.
            (Wanted::PowerOfTwo(1000), "1024\n", true),
            (Wanted::PowerOfTwo(1000), "1000\n", false),
            (Wanted::PowerOfTwo(32768), "32768\n", true),
            (Wanted::PowerOfTwo(32769), "65536\n", true),
            (Wanted::PowerOfTwo(0), "0\n", true),
            (Wanted::PowerOfTwo(1), "1\n", true),
            // Port sets: as the kernel prints them, sorted and merged.
            (
                Wanted::Ports(port_set("9000-9010,8080").unwrap()),
                "8080,9000-9010\n",
                true,
            ),
            (
                Wanted::Ports(port_set("8080,8081").unwrap()),
                "8080-8081\n",
                true,
            ),
            (
                Wanted::Ports(port_set("8080,8082").unwrap()),
                "8080-8082\n",
                false,
            ),
            (Wanted::Ports(port_set("8080").unwrap()), "\n", false),
            (Wanted::Ports(port_set("").unwrap()), "\n", true),
            // Name sets: in any order.
            (
                Wanted::Names(name_set("cubic reno bbr")),
                "reno cubic bbr\n",
                true,
            ),
            (
                Wanted::Names(name_set("cubic reno")),
                "reno cubic bbr\n",
                false,
            ),
            // Exact sysfs values ignore the trailing newline only.
            (Wanted::Exact("performance".into()), "performance\n", true),
            (Wanted::Exact("performance".into()), "powersave\n", false),
        ];
        for (wanted, actual, expect) in table {
            let c = compare_value(&wanted, actual, None);
            assert_eq!(c.matches, expect, "{wanted:?} vs {actual:?}: {c:?}");
        }
    }

    #[test]
    fn rounding_and_filtering_are_explained_in_the_reason() {
        let c = compare_value(&Wanted::PowerOfTwo(1000), "1024\n", None);
        assert_eq!(c.reason, "kernel rounds 1000 up to 1024");
        let c = compare_value(&cpus("0-3", "0-1"), "3\n", Some("1\n"));
        assert!(c.matches);
        assert_eq!(c.actual, "3 (0-1)");
        assert!(
            c.reason.contains("CPUs 2-3 offline or isolated"),
            "{}",
            c.reason
        );
        assert!(c.reason.contains("effective 1"), "{}", c.reason);
        // Affinity written (CPU 0) but the interrupt has not fired since: the
        // effective target is still CPU 1. The mask means what was wanted.
        let c = compare_value(&cpus("0", "0-1"), "1\n", Some("1\n"));
        assert!(c.matches);
        assert_eq!(c.reason, "effective 1 until the interrupt next fires");
    }

    fn topo(cpus: &str, devices: &[(&str, bool, usize, usize, &[u32])]) -> Topology {
        let mut t = Topology {
            online: set(cpus),
            ..Topology::default()
        };
        for (name, hw, rx, tx, irqs) in devices {
            t.devices.insert(
                name.to_string(),
                DeviceInfo {
                    name: name.to_string(),
                    hardware: *hw,
                    rx_queues: (0..*rx).map(|i| format!("rx-{i}")).collect(),
                    tx_queues: (0..*tx).map(|i| format!("tx-{i}")).collect(),
                    irqs: irqs.to_vec(),
                    local_cpus: None,
                },
            );
        }
        t
    }

    fn knobs(b: &Build) -> Vec<(String, String)> {
        b.desired
            .iter()
            .map(|d| {
                let v = match &d.target {
                    Target::File { value, .. } => value.clone(),
                    other => format!("{other:?}"),
                };
                (d.knob.clone(), v)
            })
            .collect()
    }

    #[test]
    fn build_orders_stages_and_expands_devices() {
        let mut t = topo(
            "0-3",
            &[("eth0", true, 2, 4, &[40, 41]), ("lo", false, 1, 1, &[])],
        );
        t.present_sysctls.insert("net.core.somaxconn".into());
        t.present_sysctls.insert(RPS_SOCK_FLOW_ENTRIES.into());
        let p = Profile {
            sysctl: vec![("net.core.somaxconn".into(), SysctlValue::Int(4096))],
            nic: vec![(
                DeviceSel::Named("eth0".into()),
                NicSettings {
                    txqueuelen: Some(5000),
                    ..NicSettings::default()
                },
            )],
            irq: vec![(DeviceSel::AllHardware, IrqPolicy::Spread)],
            rps: vec![
                (DeviceSel::AllHardware, RpsPolicy::All),
                (DeviceSel::Named("lo".into()), RpsPolicy::Cpus(set("1-2"))),
            ],
            xps: vec![(DeviceSel::Named("eth0".into()), XpsPolicy::Spread)],
            rfs: Rfs {
                flow_entries: Some(1000),
                flow_cnt: vec![(DeviceSel::Named("lo".into()), 2048)],
            },
            ..Profile::default()
        };
        let b = build(&p, &t, &TargetCtx::default()).unwrap();
        let got = knobs(&b);
        let want: Vec<(String, String)> = [
            ("nic:eth0:txqueuelen", "5000"),
            ("irq:40", "1"),
            ("irq:41", "2"),
            ("rps:eth0:rx-0", "f"),
            ("rps:eth0:rx-1", "f"),
            ("rps:lo:rx-0", "6"),
            ("xps:eth0:tx-0", "1"),
            ("xps:eth0:tx-1", "2"),
            ("xps:eth0:tx-2", "4"),
            ("xps:eth0:tx-3", "8"),
            ("rfs:lo:rx-0", "2048"),
            ("sysctl:net.core.rps_sock_flow_entries", "1000"),
            ("sysctl:net.core.somaxconn", "4096"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn xps_spread_with_fewer_queues_than_cpus_groups_cpus() {
        let t = topo("0-3", &[("v", false, 1, 2, &[])]);
        let p = Profile {
            xps: vec![(DeviceSel::Named("v".into()), XpsPolicy::Spread)],
            ..Profile::default()
        };
        let got = knobs(&build(&p, &t, &TargetCtx::default()).unwrap());
        assert_eq!(
            got,
            vec![
                ("xps:v:tx-0".into(), "5".into()),
                ("xps:v:tx-1".into(), "a".into())
            ]
        );
    }

    #[test]
    fn isolated_cpus_are_left_out_of_rps_all_and_spread() {
        let mut t = topo("0-3", &[("eth0", true, 1, 1, &[40, 41, 42])]);
        t.isolated = set("2-3");
        let p = Profile {
            irq: vec![(DeviceSel::Named("eth0".into()), IrqPolicy::Spread)],
            rps: vec![(DeviceSel::Named("eth0".into()), RpsPolicy::All)],
            ..Profile::default()
        };
        let got = knobs(&build(&p, &t, &TargetCtx::default()).unwrap());
        assert_eq!(
            got,
            vec![
                ("irq:40".into(), "1".into()),
                ("irq:41".into(), "2".into()),
                ("irq:42".into(), "1".into()),
                ("rps:eth0:rx-0".into(), "3".into())
            ]
        );
    }

    #[test]
    fn missing_device_and_missing_sysctl_fail_planning() {
        let t = topo("0-1", &[("lo", false, 1, 1, &[])]);
        let p = Profile {
            rps: vec![(DeviceSel::Named("eth9".into()), RpsPolicy::All)],
            ..Profile::default()
        };
        let e = build(&p, &t, &TargetCtx::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "[rps] names device `eth9`, which does not exist here (devices: lo)"
        );
        let p = Profile {
            sysctl: vec![("net.core.nope".into(), SysctlValue::Int(1))],
            ..Profile::default()
        };
        let e = build(&p, &t, &TargetCtx::default()).unwrap_err();
        assert!(matches!(e, PlanError::UnknownSysctl { .. }));
        assert_eq!(e.exit_code(), 1);
        let mut t = t;
        t.sysctl_groups.insert("net.ipv4.conf.lo".into());
        let p = Profile {
            sysctl: vec![("net.ipv4.conf.lo".into(), SysctlValue::Int(1))],
            ..Profile::default()
        };
        let e = build(&p, &t, &TargetCtx::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "sysctl net.ipv4.conf.lo is a group of settings, not one (/proc/sys/net/ipv4/conf/lo is a directory): name one of its entries"
        );
        assert_eq!(e.exit_code(), 1);
    }

    #[test]
    fn global_knobs_in_a_netns_are_refused_or_left_out() {
        let mut t = topo("0-1", &[("veth0", false, 4, 4, &[])]);
        t.present_sysctls.insert("net.core.somaxconn".into());
        let ctx = TargetCtx {
            netns: Some("lab".into()),
            host_net_sysctls: ["net.core.somaxconn", "net.core.netdev_max_backlog"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            skip_global: false,
        };
        let p = Profile {
            sysctl: vec![
                ("net.core.somaxconn".into(), SysctlValue::Int(4096)),
                ("net.core.netdev_max_backlog".into(), SysctlValue::Int(5000)),
                ("vm.swappiness".into(), SysctlValue::Int(10)),
            ],
            cpu: crate::profile::CpuSection {
                governor: Some("performance".into()),
            },
            ..Profile::default()
        };
        let e = build(&p, &t, &ctx).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("sysctl net.core.netdev_max_backlog"), "{msg}");
        assert!(msg.contains("sysctl vm.swappiness"), "{msg}");
        assert!(msg.contains("[cpu] governor"), "{msg}");
        assert!(!msg.contains("somaxconn"), "{msg}");
        assert_eq!(e.exit_code(), 2);
        let b = build(
            &p,
            &t,
            &TargetCtx {
                skip_global: true,
                ..ctx
            },
        )
        .unwrap();
        assert_eq!(
            knobs(&b),
            vec![("sysctl:net.core.somaxconn".into(), "4096".into())]
        );
        assert!(
            b.notes[0].contains("left out in netns lab"),
            "{:?}",
            b.notes
        );
    }

    #[test]
    fn a_sysctl_read_only_in_the_netns_is_host_wide_and_on_the_host_refused() {
        // Linux 6.18 shows net.core.rmem_max in a namespace, mode 0444.
        let mut t = topo("0-1", &[("veth0", false, 1, 1, &[])]);
        for k in ["net.core.somaxconn", "net.core.rmem_max"] {
            t.present_sysctls.insert(k.into());
        }
        t.readonly_sysctls.insert("net.core.rmem_max".into());
        let p = Profile {
            sysctl: vec![
                ("net.core.somaxconn".into(), SysctlValue::Int(4096)),
                ("net.core.rmem_max".into(), SysctlValue::Int(16777216)),
            ],
            ..Profile::default()
        };
        let ctx = TargetCtx {
            netns: Some("lab".into()),
            host_net_sysctls: ["net.core.somaxconn", "net.core.rmem_max"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            skip_global: false,
        };
        let e = build(&p, &t, &ctx).unwrap_err();
        assert!(matches!(e, PlanError::GlobalInNetns { .. }), "{e}");
        assert!(e.to_string().contains("sysctl net.core.rmem_max"), "{e}");
        let skip = TargetCtx {
            skip_global: true,
            ..ctx
        };
        assert_eq!(
            knobs(&build(&p, &t, &skip).unwrap()),
            vec![("sysctl:net.core.somaxconn".into(), "4096".into())]
        );
        // Read-only on the host itself: planned like any knob (verify and
        // diff judge its value); apply refuses to change it.
        assert_eq!(
            knobs(&build(&p, &t, &TargetCtx::default()).unwrap()).len(),
            2
        );
    }

    #[test]
    fn governor_without_cpufreq_is_not_applicable_not_drift() {
        let t = topo("0-1", &[]);
        let p = Profile {
            cpu: crate::profile::CpuSection {
                governor: Some("performance".into()),
            },
            ..Profile::default()
        };
        let b = build(&p, &t, &TargetCtx::default()).unwrap();
        assert_eq!(b.desired[0].knob, "governor:*");
        let c = compare(&b.desired[0], &Current::Nothing);
        assert!(c.matches);
        assert!(c.reason.contains("no cpufreq"));
    }

    #[test]
    fn banned_cpulist_is_replaced_in_place_or_appended() {
        let before =
            "# irqbalance\nIRQBALANCE_ONESHOT=0\nIRQBALANCE_BANNED_CPULIST=\"3\"\nOPTIONS=x\n";
        let after = with_banned_cpulist(Some(before), &set("0-1"));
        assert_eq!(
            after,
            "# irqbalance\nIRQBALANCE_ONESHOT=0\nIRQBALANCE_BANNED_CPULIST=0-1\nOPTIONS=x\n"
        );
        assert_eq!(banned_cpulist(before).as_deref(), Some("3"));
        let fresh = with_banned_cpulist(None, &set("2"));
        assert_eq!(banned_cpulist(&fresh).as_deref(), Some("2"));
    }

    #[test]
    fn list_sysctls_are_wanted_as_sets() {
        assert_eq!(
            port_set("9000-9010, 8080,9005"),
            Some(vec![(8080, 8080), (9000, 9010)])
        );
        assert_eq!(port_set("10-5"), None);
        assert_eq!(port_set("70000"), None);
        assert_eq!(port_set("x"), None);
        assert_eq!(port_text(&port_set("1,2,3,5").unwrap()), "1-3,5");
    }
}
