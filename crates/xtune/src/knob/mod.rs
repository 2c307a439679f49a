//! Knobs: what the profile wants, where it lives, and how a value read back
//! is judged by meaning.
//!
//! [`build`] turns a checked profile and the host [`Topology`](crate::host::Topology) into a list of
//! [`Desired`] knobs, each with a stable identity (`sysctl:net.core.somaxconn`,
//! `rps:eth0:rx-0`, `irq:45`, `governor:cpu1`), the stage it is written in,
//! where it lives and the meaning it must have. [`compare`] judges a value read
//! back against that meaning. Both are pure.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::cpuset::CpuSet;
use crate::fs::FsError;
use crate::host::ProcInfo;

mod build;
mod compare;
mod place;

pub use build::build;
pub use compare::{
    banned_cpulist, compare, compare_value, round_pow2, wanted_text, with_banned_cpulist,
};
pub use place::{is_irqbalance_config, place_of, Place};

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
    /// A value resolved from what the profile said (`"max"` is the
    /// device's pre-set maximum, `"cpus"` the usable CPUs): compared exactly,
    /// and the meaning is said.
    Meant {
        /// The resolved value.
        value: String,
        /// How it was resolved, e.g. `"max": the device maximum`.
        meaning: String,
    },
    /// A NIC setting that cannot be written here (unsupported operation,
    /// `[fixed]` feature, beyond the maximum): advice naming device and knob.
    NicAdvice {
        /// What the profile asked for.
        wanted: String,
        /// Why it is not written.
        reason: String,
    },
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
