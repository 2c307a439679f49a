//! Tuning profiles: TOML in, checked [`Profile`] out.
//!
//! Loading is the "lowargs → hiargs" step: every file of an `extends` chain is
//! read and checked on its own (so an error names the file that holds it), then
//! the layers are merged, the child winning key by key. Unknown keys, wrong
//! types and bad values are errors here, long before anything is written.
//!
//! The schema is declared once: `SECTIONS` pairs each top-level key with its
//! reader, [`NIC_KNOBS`] each `[nic.DEV]` setting with its sysfs file, and one
//! `DevicePolicy` impl per `[irq]`/`[rps]`/`[xps]` reads and writes its words.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use toml::{Table, Value};

use crate::cpuset::CpuSet;
use crate::ethtool::{self, Group};

/// The largest profile read, from a file or standard input.
pub const PROFILE_LIMIT: u64 = xload_sys::input::TEXT_LIMIT;

/// Keys of the sections with fixed keys.
const RFS_KEYS: &[&str] = &["flow_entries", "flow_cnt"];
const CPU_KEYS: &[&str] = &["governor"];
const IRQBALANCE_KEYS: &[&str] = &["stop", "ban"];
const LIMITS_KEYS: &[&str] = &["nofile"];
const HOST_KEYS: &[&str] = &["host", "profile"];

/// A checked, merged profile.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    /// File stem of the profile given on the command line (`loadgen`).
    pub name: String,
    /// Files read, the given one first, then its ancestors.
    pub sources: Vec<PathBuf>,
    /// Free text from `description`.
    pub description: Option<String>,
    /// `[sysctl]`: key (dotted) and value, in profile order.
    pub sysctl: Vec<(String, SysctlValue)>,
    /// `[nic.DEV]`: sysfs settings of the device itself.
    pub nic: Vec<(DeviceSel, NicSettings)>,
    /// `[irq]`: interrupt affinity per device.
    pub irq: Vec<(DeviceSel, IrqPolicy)>,
    /// `[rps]`: receive packet steering per device.
    pub rps: Vec<(DeviceSel, RpsPolicy)>,
    /// `[xps]`: transmit packet steering per device.
    pub xps: Vec<(DeviceSel, XpsPolicy)>,
    /// `[rfs]`: receive flow steering.
    pub rfs: Rfs,
    /// `[cpu]`.
    pub cpu: CpuSection,
    /// `[irqbalance]`.
    pub irqbalance: IrqbalanceSection,
    /// `[limits]`: advice only.
    pub limits: Limits,
    /// `[hosts]`: role → host (and optional per-role profile).
    pub hosts: Vec<(String, HostSpec)>,
}

/// A sysctl value as written in the profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SysctlValue {
    /// `somaxconn = 4096`
    Int(i64),
    /// `tcp_congestion_control = "bbr"`, `ip_local_port_range = "1024 65535"`
    Text(String),
    /// `tcp_rmem = [4096, 131072, 33554432]`
    Vector(Vec<i64>),
}

impl SysctlValue {
    /// The text written to `/proc/sys`.
    pub fn to_write_string(&self) -> String {
        match self {
            SysctlValue::Int(v) => v.to_string(),
            SysctlValue::Text(s) => s.clone(),
            SysctlValue::Vector(v) => v
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    fn to_toml(&self) -> Value {
        match self {
            SysctlValue::Int(v) => Value::Integer(*v),
            SysctlValue::Text(s) => Value::String(s.clone()),
            SysctlValue::Vector(v) => Value::Array(v.iter().map(|x| Value::Integer(*x)).collect()),
        }
    }
}

/// Which network devices a section entry names.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceSel {
    /// `"*"`: every device backed by hardware (with a `device` link in sysfs),
    /// so shipped profiles need not know the NIC's name.
    AllHardware,
    /// One device by name.
    Named(String),
}

impl fmt::Display for DeviceSel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSel::AllHardware => f.write_str("*"),
            DeviceSel::Named(n) => f.write_str(n),
        }
    }
}

/// `[nic.DEV]` settings (all optional; merged field by field).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NicSettings {
    /// `/sys/class/net/DEV/tx_queue_len` (packets).
    pub txqueuelen: Option<u64>,
    /// `/sys/class/net/DEV/gro_flush_timeout` (nanoseconds).
    pub gro_flush_timeout_ns: Option<u64>,
    /// `/sys/class/net/DEV/napi_defer_hard_irqs`.
    pub napi_defer_hard_irqs: Option<u64>,
    /// `/sys/class/net/DEV/threaded` (NAPI in kernel threads).
    pub threaded_napi: Option<bool>,
    /// `channels`, `ring`, `coalesce`, `features`: the NIC's own settings
    /// (ethtool netlink), in profile order.
    pub ethtool: Vec<EthSetting>,
}

/// One setting of the NIC itself: `channels = { combined = 4 }` gives
/// group `channels`, key `combined`, value 4.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EthSetting {
    /// `channels`, `ring`, `coalesce` or `features`.
    pub group: Group,
    /// Field (`combined`, `rx_usecs`) or feature name as the profile spells it.
    pub key: String,
    /// What it is set to.
    pub value: EthValue,
    /// `required = true` in the same table: the device must support it, else
    /// the apply fails (by default an unsupported setting is advice).
    pub required: bool,
}

/// The value of an [`EthSetting`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EthValue {
    /// A number.
    Count(u64),
    /// `"max"`: the device's pre-set maximum.
    Max,
    /// `"cpus"`: one per online, non-isolated CPU (at most the maximum).
    Cpus,
    /// `"numa-local"`: one per online, non-isolated CPU of the device's
    /// NUMA node (every CPU when the device has no node), at most the maximum.
    NumaLocal,
    /// `rss.equal = "channels"`: spread over every rx channel there is
    /// after the plan's channel change.
    Channels,
    /// `true`/`false`.
    Switch(bool),
    /// Flow-hash fields in `ethtool`'s letters, in bit order (`sdfn`).
    Hash(String),
}

impl EthValue {
    fn to_toml(&self) -> Value {
        match self {
            EthValue::Count(n) => int_value(*n),
            EthValue::Max => Value::String("max".into()),
            EthValue::Cpus => Value::String("cpus".into()),
            EthValue::NumaLocal => Value::String("numa-local".into()),
            EthValue::Channels => Value::String("channels".into()),
            EthValue::Switch(b) => Value::Boolean(*b),
            EthValue::Hash(h) => Value::String(h.clone()),
        }
    }
}

/// A `[nic.DEV]` setting's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NicValue {
    /// A non-negative integer.
    Count(u64),
    /// `true` or `false`, written `1` or `0`.
    Switch(bool),
}

impl NicValue {
    /// The text written to sysfs.
    pub fn text(self) -> String {
        match self {
            NicValue::Count(n) => n.to_string(),
            NicValue::Switch(b) => u8::from(b).to_string(),
        }
    }

    fn to_toml(self) -> Value {
        match self {
            NicValue::Count(n) => int_value(n),
            NicValue::Switch(b) => Value::Boolean(b),
        }
    }

    fn count(self) -> Option<u64> {
        match self {
            NicValue::Count(n) => Some(n),
            NicValue::Switch(_) => None,
        }
    }

    fn switch(self) -> Option<bool> {
        match self {
            NicValue::Switch(b) => Some(b),
            NicValue::Count(_) => None,
        }
    }
}

/// One `[nic.DEV]` setting, declared once: its profile key, the file under
/// `/sys/class/net/DEV` it is written to, its type and its field of
/// [`NicSettings`]. The parser, the merge, the TOML writer and the knob
/// builder (`nic:DEV:KEY`) all read [`NIC_KNOBS`].
pub struct NicKnob {
    /// Key in `[nic.DEV]`, and the last part of the knob's identity.
    pub key: &'static str,
    /// File name in `/sys/class/net/DEV`.
    pub file: &'static str,
    /// `true`/`false` (else a non-negative integer).
    pub switch: bool,
    get: fn(&NicSettings) -> Option<NicValue>,
    set: fn(&mut NicSettings, NicValue),
}

impl NicKnob {
    /// The value `s` gives this setting, if any.
    pub fn value(&self, s: &NicSettings) -> Option<NicValue> {
        (self.get)(s)
    }
}

/// Every `[nic.DEV]` setting, in write order.
pub const NIC_KNOBS: &[NicKnob] = &[
    NicKnob {
        key: "txqueuelen",
        file: "tx_queue_len",
        switch: false,
        get: |s| s.txqueuelen.map(NicValue::Count),
        set: |s, v| s.txqueuelen = v.count(),
    },
    NicKnob {
        key: "gro_flush_timeout_ns",
        file: "gro_flush_timeout",
        switch: false,
        get: |s| s.gro_flush_timeout_ns.map(NicValue::Count),
        set: |s, v| s.gro_flush_timeout_ns = v.count(),
    },
    NicKnob {
        key: "napi_defer_hard_irqs",
        file: "napi_defer_hard_irqs",
        switch: false,
        get: |s| s.napi_defer_hard_irqs.map(NicValue::Count),
        set: |s, v| s.napi_defer_hard_irqs = v.count(),
    },
    NicKnob {
        key: "threaded_napi",
        file: "threaded",
        switch: true,
        get: |s| s.threaded_napi.map(NicValue::Switch),
        set: |s, v| s.threaded_napi = v.switch(),
    },
];

/// `[irq]` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IrqPolicy {
    /// One CPU per interrupt, round robin over the usable CPUs.
    Spread,
    /// Every interrupt of the device on these CPUs.
    Cpus(CpuSet),
    /// Every interrupt on the CPUs of the device's NUMA node.
    NumaLocal,
}

/// `[rps]` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RpsPolicy {
    /// All online, non-isolated CPUs.
    All,
    /// These CPUs.
    Cpus(CpuSet),
    /// Mask 0: receive work stays on the interrupted CPU.
    Off,
}

/// `[xps]` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum XpsPolicy {
    /// Transmit queues assigned to CPUs round robin.
    Spread,
    /// Mask 0 on every queue.
    Off,
}

/// The value of a per-device section (`[irq]`, `[rps]`, `[xps]`), one
/// string: how the profile spells each policy, read and written in one place.
trait DevicePolicy: Sized {
    /// The policy `s` names, checked.
    fn read(cx: &Cx<'_>, key: &str, s: &str) -> Result<Self, ProfileError>;
    /// The profile text of the policy.
    fn word(&self) -> String;
}

impl DevicePolicy for IrqPolicy {
    fn read(cx: &Cx<'_>, key: &str, s: &str) -> Result<Self, ProfileError> {
        Ok(match s {
            "spread" => IrqPolicy::Spread,
            "numa-local" => IrqPolicy::NumaLocal,
            other => IrqPolicy::Cpus(cx.cpulist(
                key,
                other,
                "`spread`, `numa-local` or a CPU list such as \"0-3\"",
            )?),
        })
    }

    fn word(&self) -> String {
        match self {
            IrqPolicy::Spread => "spread".into(),
            IrqPolicy::NumaLocal => "numa-local".into(),
            IrqPolicy::Cpus(c) => c.to_list(),
        }
    }
}

impl DevicePolicy for RpsPolicy {
    fn read(cx: &Cx<'_>, key: &str, s: &str) -> Result<Self, ProfileError> {
        Ok(match s {
            "all" => RpsPolicy::All,
            "off" => RpsPolicy::Off,
            other => RpsPolicy::Cpus(cx.cpulist(
                key,
                other,
                "`all`, `off` or a CPU list such as \"0-3\"",
            )?),
        })
    }

    fn word(&self) -> String {
        match self {
            RpsPolicy::All => "all".into(),
            RpsPolicy::Off => "off".into(),
            RpsPolicy::Cpus(c) => c.to_list(),
        }
    }
}

impl DevicePolicy for XpsPolicy {
    fn read(cx: &Cx<'_>, key: &str, s: &str) -> Result<Self, ProfileError> {
        match s {
            "spread" => Ok(XpsPolicy::Spread),
            "off" => Ok(XpsPolicy::Off),
            other => Err(cx.bad(key, format!("`{other}`: expected `spread` or `off`"))),
        }
    }

    fn word(&self) -> String {
        match self {
            XpsPolicy::Spread => "spread".into(),
            XpsPolicy::Off => "off".into(),
        }
    }
}

/// A per-device section as TOML.
fn policy_table<P: DevicePolicy>(entries: &[(DeviceSel, P)]) -> Value {
    Value::Table(
        entries
            .iter()
            .map(|(d, p)| (d.to_string(), Value::String(p.word())))
            .collect(),
    )
}

/// `[rfs]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rfs {
    /// `net.core.rps_sock_flow_entries` (the kernel rounds up to a power of two).
    pub flow_entries: Option<u64>,
    /// Per-device `rps_flow_cnt` for every rx queue (rounded up to a power of two).
    pub flow_cnt: Vec<(DeviceSel, u64)>,
}

/// `[cpu]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuSection {
    /// cpufreq scaling governor for every online CPU.
    pub governor: Option<String>,
}

/// `[irqbalance]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IrqbalanceSection {
    /// `true`: stop the daemon (restarted on rollback).
    pub stop: Option<bool>,
    /// CPUs irqbalance must leave alone (`IRQBALANCE_BANNED_CPULIST`).
    pub ban: Option<CpuSet>,
}

/// `[limits]`: reported as advice, a tool cannot raise another process's limits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Open files for the load generator (`ulimit -n`, `LimitNOFILE=`).
    pub nofile: Option<u64>,
}

/// One `[hosts]` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostSpec {
    /// ssh destination, or `local` for this machine.
    pub host: String,
    /// Profile for this role (resolved against the profile's directory);
    /// `None` means the profile that holds the `[hosts]` table.
    pub profile: Option<PathBuf>,
}

/// Why a profile could not be loaded. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file could not be read (missing, permission).
    #[error("cannot read profile {}: {source}", path.display())]
    Read {
        /// File that could not be read.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// TOML syntax error.
    #[error("{}: TOML syntax error: {message}", path.display())]
    Syntax {
        /// File with the error.
        path: PathBuf,
        /// Parser message with line and column.
        message: String,
    },
    /// A key the format does not know.
    #[error("{}: unknown key `{key}`{hint}", path.display())]
    UnknownKey {
        /// File with the key.
        path: PathBuf,
        /// Full dotted key.
        key: String,
        /// ", did you mean ...?" or empty.
        hint: String,
    },
    /// A value of the wrong TOML type.
    #[error("{}: `{key}` must be {expected}, found {found}", path.display())]
    WrongType {
        /// File with the key.
        path: PathBuf,
        /// Full dotted key.
        key: String,
        /// What the format wants.
        expected: &'static str,
        /// TOML type found.
        found: &'static str,
    },
    /// A value of the right type that means nothing valid.
    #[error("{}: `{key}`: {reason}", path.display())]
    BadValue {
        /// File with the key.
        path: PathBuf,
        /// Full dotted key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// `extends` leads back to a file already being loaded.
    #[error("extends cycle: {chain}")]
    Cycle {
        /// `a.toml -> b.toml -> a.toml`.
        chain: String,
    },
}

impl Profile {
    /// Loads `path` and everything it extends.
    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let mut stack = Vec::new();
        let mut profile = load_chain(path, &mut stack)?;
        profile.name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "profile".into());
        Ok(profile)
    }

    /// Parses profile text that did not come from a file (stdin); `extends`
    /// is resolved against `base_dir`.
    pub fn from_text(text: &str, label: &str, base_dir: &Path) -> Result<Profile, ProfileError> {
        let pseudo = base_dir.join(format!("<{label}>"));
        let table = parse_toml(&pseudo, text)?;
        let mut stack = vec![pseudo.clone()];
        let mut profile = layer_from_table(&pseudo, base_dir, table, &mut stack)?;
        profile.name = label.to_string();
        Ok(profile)
    }

    /// True when the profile asks for nothing.
    pub fn is_empty(&self) -> bool {
        self.sysctl.is_empty()
            && self.nic.is_empty()
            && self.irq.is_empty()
            && self.rps.is_empty()
            && self.xps.is_empty()
            && self.rfs == Rfs::default()
            && self.cpu == CpuSection::default()
            && self.irqbalance == IrqbalanceSection::default()
            && self.limits == Limits::default()
    }

    /// The merged profile as TOML without `extends` or `[hosts]`: what a remote
    /// xtune reads from stdin, so the profile need not exist on the remote host.
    pub fn to_toml_string(&self) -> String {
        let mut top = Table::new();
        if let Some(d) = &self.description {
            top.insert("description".into(), Value::String(d.clone()));
        }
        if !self.sysctl.is_empty() {
            let mut t = Table::new();
            for (k, v) in &self.sysctl {
                t.insert(k.clone(), v.to_toml());
            }
            top.insert("sysctl".into(), Value::Table(t));
        }
        if !self.nic.is_empty() {
            let mut t = Table::new();
            for (dev, s) in &self.nic {
                let mut d = Table::new();
                for knob in NIC_KNOBS {
                    if let Some(v) = knob.value(s) {
                        d.insert(knob.key.into(), v.to_toml());
                    }
                }
                for g in Group::ALL {
                    let mut gt = Table::new();
                    for e in s.ethtool.iter().filter(|e| e.group == g) {
                        gt.insert(e.key.clone(), e.value.to_toml());
                        if e.required {
                            gt.insert("required".into(), Value::Boolean(true));
                        }
                    }
                    if !gt.is_empty() {
                        d.insert(g.name().into(), Value::Table(gt));
                    }
                }
                t.insert(dev.to_string(), Value::Table(d));
            }
            top.insert("nic".into(), Value::Table(t));
        }
        let policies = [
            ("irq", self.irq.is_empty(), policy_table(&self.irq)),
            ("rps", self.rps.is_empty(), policy_table(&self.rps)),
            ("xps", self.xps.is_empty(), policy_table(&self.xps)),
        ];
        for (section, empty, table) in policies {
            if !empty {
                top.insert(section.into(), table);
            }
        }
        if self.rfs != Rfs::default() {
            let mut t = Table::new();
            if let Some(v) = self.rfs.flow_entries {
                t.insert("flow_entries".into(), int_value(v));
            }
            if !self.rfs.flow_cnt.is_empty() {
                let f = self
                    .rfs
                    .flow_cnt
                    .iter()
                    .map(|(d, v)| (d.to_string(), int_value(*v)))
                    .collect();
                t.insert("flow_cnt".into(), Value::Table(f));
            }
            top.insert("rfs".into(), Value::Table(t));
        }
        if let Some(g) = &self.cpu.governor {
            let mut t = Table::new();
            t.insert("governor".into(), Value::String(g.clone()));
            top.insert("cpu".into(), Value::Table(t));
        }
        if self.irqbalance != IrqbalanceSection::default() {
            let mut t = Table::new();
            if let Some(s) = self.irqbalance.stop {
                t.insert("stop".into(), Value::Boolean(s));
            }
            if let Some(b) = &self.irqbalance.ban {
                t.insert("ban".into(), Value::String(b.to_list()));
            }
            top.insert("irqbalance".into(), Value::Table(t));
        }
        if let Some(n) = self.limits.nofile {
            let mut t = Table::new();
            t.insert("nofile".into(), int_value(n));
            top.insert("limits".into(), Value::Table(t));
        }
        toml::to_string(&top).unwrap_or_default()
    }
}

fn int_value(v: u64) -> Value {
    // Values were parsed from TOML integers (i64) and checked non-negative.
    Value::Integer(i64::try_from(v).unwrap_or(i64::MAX))
}

fn load_chain(path: &Path, stack: &mut Vec<PathBuf>) -> Result<Profile, ProfileError> {
    let canonical = path.canonicalize().map_err(|source| ProfileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if stack.contains(&canonical) {
        let mut chain: Vec<String> = stack.iter().map(|p| display_name(p)).collect();
        chain.push(display_name(&canonical));
        return Err(ProfileError::Cycle {
            chain: chain.join(" -> "),
        });
    }
    let text = xload_sys::input::read_to_string(&canonical, "a profile", PROFILE_LIMIT);
    let text = text.map_err(|source| ProfileError::Read {
        path: canonical.clone(),
        source,
    })?;
    let table = parse_toml(&canonical, &text)?;
    stack.push(canonical.clone());
    let dir = canonical
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let result = layer_from_table(&canonical, &dir, table, stack);
    stack.pop();
    result
}

fn display_name(p: &Path) -> String {
    p.file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

fn parse_toml(path: &Path, text: &str) -> Result<Table, ProfileError> {
    text.parse::<Table>().map_err(|e| {
        // One line: where, then what (the parser's own text draws the line
        // with a caret over several lines).
        let what = e.message().trim().replace('\n', "; ");
        let message = match e.span() {
            Some(span) => {
                let before = &text[..span.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                let source = text.lines().nth(line - 1).unwrap_or("").trim();
                format!("line {line}, column {column} (`{source}`): {what}")
            }
            None => what,
        };
        ProfileError::Syntax {
            path: path.to_path_buf(),
            message,
        }
    })
}

/// One file's own settings, and the files it extends.
#[derive(Default)]
struct Layer {
    own: Profile,
    parents: Vec<String>,
}

/// Reads one top-level key's value into a layer.
type ReadSection = fn(&Cx<'_>, Value, &mut Layer) -> Result<(), ProfileError>;

/// Every top-level key a profile may hold, declared once with its reader.
const SECTIONS: &[(&str, ReadSection)] = &[
    ("extends", read_extends),
    ("description", |cx, v, l| {
        l.own.description = Some(cx.string("description", v)?);
        Ok(())
    }),
    ("sysctl", |cx, v, l| {
        flatten_sysctl(cx, "", cx.table("sysctl", v)?, &mut l.own.sysctl)
    }),
    ("nic", read_nic),
    ("irq", |cx, v, l| read_devices(cx, "irq", v, &mut l.own.irq)),
    ("rps", |cx, v, l| read_devices(cx, "rps", v, &mut l.own.rps)),
    ("xps", |cx, v, l| read_devices(cx, "xps", v, &mut l.own.xps)),
    ("rfs", read_rfs),
    ("cpu", read_cpu),
    ("irqbalance", read_irqbalance),
    ("limits", read_limits),
    ("hosts", read_hosts),
];

/// Checks one file's table, loads what it extends, and merges (child wins).
fn layer_from_table(
    path: &Path,
    dir: &Path,
    table: Table,
    stack: &mut Vec<PathBuf>,
) -> Result<Profile, ProfileError> {
    let cx = Cx { path, dir };
    let top: Vec<&str> = SECTIONS.iter().map(|(k, _)| *k).collect();
    for key in table.keys() {
        cx.known(key, key, &top)?;
    }
    // Check this file completely before following extends, so a file's own
    // errors are reported even when its parent is missing.
    let mut layer = Layer::default();
    layer.own.sources = vec![path.to_path_buf()];
    for (key, value) in table {
        if let Some((_, read)) = SECTIONS.iter().find(|(k, _)| *k == key) {
            read(&cx, value, &mut layer)?;
        }
    }
    let Layer { own, parents } = layer;
    let mut merged = Profile::default();
    for parent in parents {
        let parent_path = dir.join(&parent);
        if !parent_path.exists() {
            return Err(ProfileError::BadValue {
                path: path.to_path_buf(),
                key: "extends".into(),
                reason: format!("`{parent}`: no such file ({})", parent_path.display()),
            });
        }
        let layer = load_chain(&parent_path, stack)?;
        merged = merge(merged, layer);
    }
    let mut own_sources = own.sources.clone();
    let merged_sources = std::mem::take(&mut merged.sources);
    let mut result = merge(merged, own);
    own_sources.extend(merged_sources);
    result.sources = own_sources;
    Ok(result)
}

/// `extends = "base.toml"` or a list of files.
fn read_extends(cx: &Cx<'_>, value: Value, l: &mut Layer) -> Result<(), ProfileError> {
    match value {
        Value::String(s) => l.parents.push(s),
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::String(s) => l.parents.push(s),
                    other => return Err(cx.wrong("extends", "a file name", &other)),
                }
            }
        }
        other => return Err(cx.wrong("extends", "a file name or a list of them", &other)),
    }
    Ok(())
}

/// `[nic.DEV]`: the settings of [`NIC_KNOBS`] and the ethtool groups.
fn read_nic(cx: &Cx<'_>, value: Value, l: &mut Layer) -> Result<(), ProfileError> {
    let mut keys: Vec<&str> = NIC_KNOBS.iter().map(|n| n.key).collect();
    keys.extend(Group::ALL.iter().map(|g| g.name()));
    for (dev, v) in cx.table("nic", value)? {
        let sel = cx.device(&format!("nic.{dev}"), &dev)?;
        let key = format!("nic.{dev}");
        let mut s = NicSettings::default();
        for (k, v) in cx.table(&key, v)? {
            let full = format!("{key}.{k}");
            cx.known(&full, &k, &keys)?;
            if let Some(group) = Group::from_name(&k) {
                read_eth_group(cx, &full, group, v, &mut s.ethtool)?;
                continue;
            }
            let Some(knob) = NIC_KNOBS.iter().find(|n| n.key == k) else {
                continue; // refused by known() above
            };
            let value = if knob.switch {
                NicValue::Switch(cx.bool(&full, v)?)
            } else {
                NicValue::Count(cx.uint(&full, v)?)
            };
            (knob.set)(&mut s, value);
        }
        upsert(&mut l.own.nic, sel, s);
    }
    Ok(())
}

/// `channels = { … }`, `ring`, `coalesce`, `features`: one group's table.
fn read_eth_group(
    cx: &Cx<'_>,
    full: &str,
    group: Group,
    v: Value,
    out: &mut Vec<EthSetting>,
) -> Result<(), ProfileError> {
    let table = cx.table(full, v)?;
    let required = match table.get("required") {
        Some(r) => cx.bool(&format!("{full}.required"), r.clone())?,
        None => false,
    };
    let mut fields: Vec<&str> = group.fields().iter().map(|f| f.name).collect();
    let hash_keys: Vec<String> = ethtool::FLOW_TYPES
        .iter()
        .map(|(n, _)| format!("hash_{n}"))
        .collect();
    if group == Group::Rss {
        fields.push("equal");
        fields.extend(hash_keys.iter().map(|k| k.as_str()));
    }
    fields.push("required");
    for (k, v) in table {
        if k == "required" {
            continue;
        }
        let key = format!("{full}.{k}");
        let value = if group == Group::Features {
            if k.is_empty()
                || !k
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Err(cx.bad(&key, format!("`{k}` is not a feature name")));
            }
            EthValue::Switch(cx.bool(&key, v)?)
        } else if group == Group::Rss {
            cx.known(&key, &k, &fields)?;
            match (k.as_str(), v) {
                ("equal", Value::String(w)) if w == "channels" => EthValue::Channels,
                ("equal", Value::Integer(n)) if n > 0 => EthValue::Count(n as u64),
                ("equal", other) => {
                    return Err(cx.wrong(&key, "a queue count (1 or more) or \"channels\"", &other))
                }
                (_, Value::String(letters)) => {
                    let bits =
                        ethtool::parse_hash_letters(&letters).map_err(|why| cx.bad(&key, why))?;
                    if letters.trim() == "none" || letters.contains("+0x") {
                        return Err(cx.bad(
                            &key,
                            "name the fields to hash in ethtool's letters, e.g. \"sdfn\"".into(),
                        ));
                    }
                    EthValue::Hash(ethtool::hash_letters(u64::from(bits)))
                }
                (_, other) => {
                    return Err(cx.wrong(&key, "ethtool's field letters, e.g. \"sdfn\"", &other))
                }
            }
        } else {
            cx.known(&key, &k, &fields)?;
            let switch = group.fields().iter().any(|f| f.name == k && f.switch);
            match v {
                _ if switch => EthValue::Switch(cx.bool(&key, v)?),
                Value::String(w) if w == "max" && group != Group::Coalesce => EthValue::Max,
                Value::String(w) if w == "cpus" && group == Group::Channels => EthValue::Cpus,
                Value::String(w) if w == "numa-local" && group == Group::Channels => {
                    EthValue::NumaLocal
                }
                Value::Integer(_) => EthValue::Count(cx.uint(&key, v)?),
                other => {
                    let expected = match group {
                        Group::Channels => "a count, \"max\", \"cpus\" or \"numa-local\"",
                        Group::Ring => "a count or \"max\"",
                        _ => "a non-negative integer",
                    };
                    return Err(cx.wrong(&key, expected, &other));
                }
            }
        };
        if let EthValue::Count(n) = value {
            if n > u64::from(u32::MAX) {
                return Err(cx.bad(&key, format!("{n} is larger than the kernel's 32 bits")));
            }
        }
        let setting = EthSetting {
            group,
            key: k,
            value,
            required,
        };
        match out
            .iter_mut()
            .find(|e| e.group == group && e.key == setting.key)
        {
            Some(slot) => *slot = setting,
            None => out.push(setting),
        }
    }
    Ok(())
}

/// A section of `DEV = "policy"` entries (`[irq]`, `[rps]`, `[xps]`).
fn read_devices<P: DevicePolicy>(
    cx: &Cx<'_>,
    section: &str,
    value: Value,
    out: &mut Vec<(DeviceSel, P)>,
) -> Result<(), ProfileError> {
    for (dev, v) in cx.table(section, value)? {
        let key = format!("{section}.{dev}");
        let sel = cx.device(&key, &dev)?;
        let s = cx.string(&key, v)?;
        upsert(out, sel, P::read(cx, &key, &s)?);
    }
    Ok(())
}

/// `[rfs]`: `flow_entries` and the per-device `flow_cnt` table.
fn read_rfs(cx: &Cx<'_>, value: Value, l: &mut Layer) -> Result<(), ProfileError> {
    for (k, v) in cx.table("rfs", value)? {
        let full = format!("rfs.{k}");
        cx.known(&full, &k, RFS_KEYS)?;
        if k == "flow_entries" {
            let n = cx.uint(&full, v)?;
            check_flow_table(cx, &full, n, MAX_SOCK_FLOW_ENTRIES, 4, "")?;
            l.own.rfs.flow_entries = Some(n);
        } else {
            for (dev, n) in cx.table(&full, v)? {
                let key = format!("{full}.{dev}");
                let sel = cx.device(&key, &dev)?;
                let n = cx.uint(&key, n)?;
                check_flow_table(cx, &key, n, MAX_FLOW_CNT, 8, " for every rx queue")?;
                upsert(&mut l.own.rfs.flow_cnt, sel, n);
            }
        }
    }
    Ok(())
}

/// `[cpu] governor`.
fn read_cpu(cx: &Cx<'_>, value: Value, l: &mut Layer) -> Result<(), ProfileError> {
    for (k, v) in cx.table("cpu", value)? {
        let full = format!("cpu.{k}");
        cx.known(&full, &k, CPU_KEYS)?;
        let g = cx.string(&full, v)?;
        if g.is_empty()
            || !g
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(cx.bad(&full, format!("`{g}` is not a governor name")));
        }
        l.own.cpu.governor = Some(g);
    }
    Ok(())
}

/// `[irqbalance] stop` and `ban`.
fn read_irqbalance(cx: &Cx<'_>, value: Value, l: &mut Layer) -> Result<(), ProfileError> {
    for (k, v) in cx.table("irqbalance", value)? {
        let full = format!("irqbalance.{k}");
        cx.known(&full, &k, IRQBALANCE_KEYS)?;
        if k == "stop" {
            l.own.irqbalance.stop = Some(cx.bool(&full, v)?);
        } else {
            let s = cx.string(&full, v)?;
            let set = cx.cpulist(&full, &s, "a CPU list such as \"0-3\"")?;
            l.own.irqbalance.ban = Some(set);
        }
    }
    Ok(())
}

/// `[limits] nofile`.
fn read_limits(cx: &Cx<'_>, value: Value, l: &mut Layer) -> Result<(), ProfileError> {
    for (k, v) in cx.table("limits", value)? {
        let full = format!("limits.{k}");
        cx.known(&full, &k, LIMITS_KEYS)?;
        let n = cx.uint(&full, v)?;
        if n == 0 {
            return Err(cx.bad(&full, "must be at least 1".into()));
        }
        l.own.limits.nofile = Some(n);
    }
    Ok(())
}

/// `[hosts]`: `ROLE = "host"` or `ROLE = { host, profile }`.
fn read_hosts(cx: &Cx<'_>, value: Value, l: &mut Layer) -> Result<(), ProfileError> {
    for (role, v) in cx.table("hosts", value)? {
        let key = format!("hosts.{role}");
        if role.is_empty()
            || !role
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(cx.bad(&key, "a role is letters, digits, `-` and `_`".into()));
        }
        let spec = match v {
            Value::String(host) => HostSpec {
                host,
                profile: None,
            },
            Value::Table(t) => {
                let mut host = None;
                let mut profile = None;
                for (k, v) in t {
                    let full = format!("{key}.{k}");
                    cx.known(&full, &k, HOST_KEYS)?;
                    let s = cx.string(&full, v)?;
                    if k == "host" {
                        host = Some(s);
                    } else {
                        profile = Some(cx.dir.join(s));
                    }
                }
                let host = host.ok_or_else(|| cx.bad(&key, "missing `host`".into()))?;
                HostSpec { host, profile }
            }
            other => return Err(cx.wrong(&key, "a host name or a table {host, profile}", &other)),
        };
        if spec.host.is_empty() || spec.host.starts_with('-') {
            return Err(cx.bad(&key, format!("`{}` is not a host", spec.host)));
        }
        upsert(&mut l.own.hosts, role, spec);
    }
    Ok(())
}

/// Child wins, key by key; new keys go after the parent's.
fn merge(mut base: Profile, child: Profile) -> Profile {
    if child.description.is_some() {
        base.description = child.description;
    }
    for (k, v) in child.sysctl {
        upsert(&mut base.sysctl, k, v);
    }
    for (dev, s) in child.nic {
        match base.nic.iter_mut().find(|(d, _)| *d == dev) {
            Some((_, b)) => {
                for knob in NIC_KNOBS {
                    if let Some(v) = knob.value(&s) {
                        (knob.set)(b, v);
                    }
                }
                for e in s.ethtool {
                    match b
                        .ethtool
                        .iter_mut()
                        .find(|o| o.group == e.group && o.key == e.key)
                    {
                        Some(slot) => *slot = e,
                        None => b.ethtool.push(e),
                    }
                }
            }
            None => base.nic.push((dev, s)),
        }
    }
    for (k, v) in child.irq {
        upsert(&mut base.irq, k, v);
    }
    for (k, v) in child.rps {
        upsert(&mut base.rps, k, v);
    }
    for (k, v) in child.xps {
        upsert(&mut base.xps, k, v);
    }
    if child.rfs.flow_entries.is_some() {
        base.rfs.flow_entries = child.rfs.flow_entries;
    }
    for (k, v) in child.rfs.flow_cnt {
        upsert(&mut base.rfs.flow_cnt, k, v);
    }
    if child.cpu.governor.is_some() {
        base.cpu.governor = child.cpu.governor;
    }
    if child.irqbalance.stop.is_some() {
        base.irqbalance.stop = child.irqbalance.stop;
    }
    if child.irqbalance.ban.is_some() {
        base.irqbalance.ban = child.irqbalance.ban;
    }
    if child.limits.nofile.is_some() {
        base.limits.nofile = child.limits.nofile;
    }
    for (k, v) in child.hosts {
        upsert(&mut base.hosts, k, v);
    }
    base.sources.extend(child.sources);
    base
}

fn upsert<K: PartialEq, V>(list: &mut Vec<(K, V)>, key: K, value: V) {
    match list.iter_mut().find(|(k, _)| *k == key) {
        Some((_, v)) => *v = value,
        None => list.push((key, value)),
    }
}

/// The largest `rps_sock_flow_entries` a profile may ask for (4 bytes each:
/// 16 MiB). The kernel docs suggest 32768 for a moderately loaded server.
pub const MAX_SOCK_FLOW_ENTRIES: u64 = 1 << 22;
/// The largest `rps_flow_cnt` per rx queue (8 bytes each: 8 MiB per queue).
/// The kernel docs suggest rps_sock_flow_entries ÷ the rx queues.
pub const MAX_FLOW_CNT: u64 = 1 << 20;

/// Refuses an RFS table size over `max`: the kernel allocates the table at
/// once (a typo such as 1073741824 for one queue asks for 8 GiB, stalls the
/// kernel in the allocation and can bring the host down to the OOM killer).
fn check_flow_table(
    cx: &Cx<'_>,
    key: &str,
    n: u64,
    max: u64,
    bytes_per_entry: u64,
    each: &str,
) -> Result<(), ProfileError> {
    if n <= max {
        return Ok(());
    }
    let mib = n.next_power_of_two().saturating_mul(bytes_per_entry) >> 20;
    Err(cx.bad(
        key,
        format!(
            "{n} entries is over the {max} xtune allows: the kernel allocates {bytes_per_entry} bytes per entry \
             (rounded up to a power of two){each} at once, {mib} MiB here; the kernel docs suggest 32768 \
             rps_sock_flow_entries and that divided by the rx queues for rps_flow_cnt"
        ),
    ))
}

fn flatten_sysctl(
    cx: &Cx<'_>,
    prefix: &str,
    table: Table,
    out: &mut Vec<(String, SysctlValue)>,
) -> Result<(), ProfileError> {
    for (k, v) in table {
        let name = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        let key = format!("sysctl.{name}");
        let value = match v {
            Value::Table(t) => {
                flatten_sysctl(cx, &name, t, out)?;
                continue;
            }
            Value::Integer(i) => SysctlValue::Int(i),
            Value::String(s) => {
                if s.trim().is_empty() {
                    return Err(cx.bad(&key, "empty value".into()));
                }
                if s.contains('\n') {
                    return Err(cx.bad(&key, "a value is one line".into()));
                }
                SysctlValue::Text(s)
            }
            Value::Array(items) => {
                let mut ints = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Value::Integer(i) => ints.push(i),
                        other => {
                            return Err(cx.wrong(&key, "an array of integers", &other));
                        }
                    }
                }
                if ints.is_empty() {
                    return Err(cx.bad(&key, "empty array".into()));
                }
                SysctlValue::Vector(ints)
            }
            Value::Boolean(_) => return Err(ProfileError::WrongType {
                path: cx.path.to_path_buf(),
                key,
                expected:
                    "an integer, a string or an array of integers (write 0 or 1, not false or true)",
                found: "boolean",
            }),
            other => {
                return Err(cx.wrong(&key, "an integer, a string or an array of integers", &other))
            }
        };
        check_sysctl_name(cx, &key, &name)?;
        if let ("net.core.rps_sock_flow_entries", SysctlValue::Int(n)) = (name.as_str(), &value) {
            check_flow_table(
                cx,
                &key,
                u64::try_from(*n).unwrap_or(0),
                MAX_SOCK_FLOW_ENTRIES,
                4,
                "",
            )?;
        }
        if out.iter().any(|(k, _)| *k == name) {
            // TOML refuses a key given twice; a dotted and a quoted spelling
            // of one sysctl get past it and would silently keep the last.
            return Err(cx.bad(
                &key,
                "given twice in this file (once as a dotted key, once quoted): keep one".into(),
            ));
        }
        upsert(out, name, value);
    }
    Ok(())
}

fn check_sysctl_name(cx: &Cx<'_>, key: &str, name: &str) -> Result<(), ProfileError> {
    let ok = !name.is_empty()
        && name.split('.').all(|part| {
            !part.is_empty()
                && part != ".."
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-/".contains(&b))
        });
    if ok && name.contains('.') {
        Ok(())
    } else {
        Err(cx.bad(
            key,
            format!("`{name}` is not a sysctl name such as net.core.somaxconn"),
        ))
    }
}

/// Error-building context: the file being checked, and its directory
/// (where the files it names are).
struct Cx<'a> {
    path: &'a Path,
    dir: &'a Path,
}

impl Cx<'_> {
    fn known(&self, full: &str, key: &str, allowed: &[&str]) -> Result<(), ProfileError> {
        if allowed.contains(&key) {
            return Ok(());
        }
        let hint = allowed
            .iter()
            .map(|a| {
                let common = a
                    .bytes()
                    .zip(key.bytes())
                    .take_while(|(x, y)| x == y)
                    .count();
                (
                    xload_sys::edit::edit_distance(a, key),
                    usize::MAX - common,
                    *a,
                )
            })
            .filter(|(d, _, _)| *d <= if key.len() >= 8 { 3 } else { 2 })
            .min()
            .map(|(_, _, a)| format!(", did you mean `{a}`?"))
            .unwrap_or_else(|| format!(" (expected one of: {})", allowed.join(", ")));
        Err(ProfileError::UnknownKey {
            path: self.path.to_path_buf(),
            key: full.to_string(),
            hint,
        })
    }

    fn wrong(&self, key: &str, expected: &'static str, found: &Value) -> ProfileError {
        ProfileError::WrongType {
            path: self.path.to_path_buf(),
            key: key.to_string(),
            expected,
            found: found.type_str(),
        }
    }

    fn bad(&self, key: &str, reason: String) -> ProfileError {
        ProfileError::BadValue {
            path: self.path.to_path_buf(),
            key: key.to_string(),
            reason,
        }
    }

    fn table(&self, key: &str, v: Value) -> Result<Table, ProfileError> {
        match v {
            Value::Table(t) => Ok(t),
            other => Err(self.wrong(key, "a table", &other)),
        }
    }

    fn string(&self, key: &str, v: Value) -> Result<String, ProfileError> {
        match v {
            Value::String(s) => Ok(s),
            other => Err(self.wrong(key, "a string", &other)),
        }
    }

    fn bool(&self, key: &str, v: Value) -> Result<bool, ProfileError> {
        match v {
            Value::Boolean(b) => Ok(b),
            other => Err(self.wrong(key, "true or false", &other)),
        }
    }

    fn uint(&self, key: &str, v: Value) -> Result<u64, ProfileError> {
        match v {
            Value::Integer(i) => {
                u64::try_from(i).map_err(|_| self.bad(key, format!("{i} is negative")))
            }
            other => Err(self.wrong(key, "a non-negative integer", &other)),
        }
    }

    fn cpulist(&self, key: &str, s: &str, expected: &str) -> Result<CpuSet, ProfileError> {
        let set = CpuSet::parse_list(s)
            .map_err(|e| self.bad(key, format!("expected {expected}; {e}")))?;
        if set.is_empty() {
            return Err(self.bad(key, format!("expected {expected}; the list is empty")));
        }
        Ok(set)
    }

    fn device(&self, key: &str, dev: &str) -> Result<DeviceSel, ProfileError> {
        if dev == "*" {
            return Ok(DeviceSel::AllHardware);
        }
        let ok = !dev.is_empty()
            && dev.len() <= 15
            && dev != "."
            && dev != ".."
            && !dev.contains('/')
            && !dev.chars().any(char::is_whitespace);
        if ok {
            Ok(DeviceSel::Named(dev.to_string()))
        } else {
            Err(self.bad(key, format!("`{dev}` is not a network device name")))
        }
    }
}

/// Device names a profile mentions by name (for observation).
pub fn named_devices(p: &Profile) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut add = |d: &DeviceSel| {
        if let DeviceSel::Named(n) = d {
            out.insert(n.clone());
        }
    };
    p.nic.iter().for_each(|(d, _)| add(d));
    p.irq.iter().for_each(|(d, _)| add(d));
    p.rps.iter().for_each(|(d, _)| add(d));
    p.xps.iter().for_each(|(d, _)| add(d));
    p.rfs.flow_cnt.iter().for_each(|(d, _)| add(d));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;

    fn write(dir: &TempDir, name: &str, text: &str) -> PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn full_profile_parses_into_typed_knobs() {
        let dir = TempDir::new("profile-full");
        let p = write(
            &dir,
            "p.toml",
            r#"
description = "test"
[sysctl]
net.core.somaxconn = 4096
"net.ipv4.tcp_rmem" = [4096, 131072, 6291456]
net.ipv4.ip_local_port_range = "1024 65535"
[nic.eth0]
txqueuelen = 10000
threaded_napi = true
[irq]
eth0 = "spread"
eth1 = "0-3"
"*" = "numa-local"
[rps]
eth0 = "all"
lo = "off"
eth1 = "1,3"
[xps]
eth0 = "spread"
[rfs]
flow_entries = 32768
flow_cnt = { eth0 = 4096 }
[cpu]
governor = "performance"
[irqbalance]
stop = true
ban = "0-1"
[limits]
nofile = 1048576
[hosts]
client = "gen1"
server = { host = "srv1", profile = "server.toml" }
"#,
        );
        let prof = Profile::load(&p).unwrap();
        assert_eq!(prof.name, "p");
        assert_eq!(
            prof.sysctl,
            vec![
                ("net.core.somaxconn".to_string(), SysctlValue::Int(4096)),
                // Dotted keys sharing a prefix are one TOML table, so they stay
                // together; the quoted key comes after them.
                (
                    "net.ipv4.ip_local_port_range".to_string(),
                    SysctlValue::Text("1024 65535".into())
                ),
                (
                    "net.ipv4.tcp_rmem".to_string(),
                    SysctlValue::Vector(vec![4096, 131072, 6291456])
                ),
            ]
        );
        assert_eq!(prof.nic[0].1.txqueuelen, Some(10000));
        assert_eq!(prof.nic[0].1.threaded_napi, Some(true));
        assert_eq!(
            prof.irq[0],
            (DeviceSel::Named("eth0".into()), IrqPolicy::Spread)
        );
        assert_eq!(
            prof.irq[1].1,
            IrqPolicy::Cpus(CpuSet::parse_list("0-3").unwrap())
        );
        assert_eq!(prof.irq[2], (DeviceSel::AllHardware, IrqPolicy::NumaLocal));
        assert_eq!(prof.rps[1].1, RpsPolicy::Off);
        assert_eq!(prof.rfs.flow_entries, Some(32768));
        assert_eq!(
            prof.rfs.flow_cnt,
            vec![(DeviceSel::Named("eth0".into()), 4096)]
        );
        assert_eq!(prof.cpu.governor.as_deref(), Some("performance"));
        assert_eq!(prof.irqbalance.stop, Some(true));
        assert_eq!(prof.limits.nofile, Some(1048576));
        assert_eq!(prof.hosts[1].1.host, "srv1");
        assert_eq!(
            prof.hosts[1].1.profile,
            Some(dir.path().canonicalize().unwrap().join("server.toml"))
        );
    }

    #[test]
    fn child_wins_key_by_key_over_what_it_extends() {
        let dir = TempDir::new("profile-extends");
        write(
            &dir,
            "base.toml",
            "[sysctl]\nnet.core.somaxconn = 1024\nnet.ipv4.tcp_fin_timeout = 30\n[rps]\neth0 = \"off\"\n[nic.eth0]\ntxqueuelen = 1000\nnapi_defer_hard_irqs = 2\n",
        );
        let child = write(
            &dir,
            "child.toml",
            "extends = \"base.toml\"\n[sysctl]\nnet.core.somaxconn = 65535\nnet.core.rmem_max = 1\n[rps]\neth0 = \"all\"\n[nic.eth0]\ntxqueuelen = 5000\n",
        );
        let p = Profile::load(&child).unwrap();
        assert_eq!(
            p.sysctl,
            vec![
                ("net.core.somaxconn".into(), SysctlValue::Int(65535)),
                ("net.ipv4.tcp_fin_timeout".into(), SysctlValue::Int(30)),
                ("net.core.rmem_max".into(), SysctlValue::Int(1)),
            ]
        );
        assert_eq!(
            p.rps,
            vec![(DeviceSel::Named("eth0".into()), RpsPolicy::All)]
        );
        assert_eq!(p.nic[0].1.txqueuelen, Some(5000));
        assert_eq!(p.nic[0].1.napi_defer_hard_irqs, Some(2));
        assert_eq!(p.sources.len(), 2);
        assert!(p.sources[0].ends_with("child.toml"));
    }

    #[test]
    fn unknown_keys_are_rejected_with_a_suggestion() {
        let dir = TempDir::new("profile-unknown");
        let cases = [
            (
                "[sysctll]\n",
                "unknown key `sysctll`, did you mean `sysctl`?",
            ),
            (
                "[rfs]\nflow_entry = 1\n",
                "unknown key `rfs.flow_entry`, did you mean `flow_entries`?",
            ),
            ("[nic.eth0]\nmtu = 9000\n", "unknown key `nic.eth0.mtu`"),
            (
                "[cpu]\ngovernour = \"performance\"\n",
                "did you mean `governor`?",
            ),
            ("colour = 1\n", "unknown key `colour` (expected one of"),
        ];
        for (text, want) in cases {
            let p = write(&dir, "u.toml", text);
            let e = Profile::load(&p).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(e.contains("u.toml"), "error names the file: {e}");
        }
    }

    #[test]
    fn wrong_types_and_bad_values_are_rejected() {
        let dir = TempDir::new("profile-types");
        let cases = [
            (
                "[sysctl]\nnet.core.somaxconn = true\n",
                "must be an integer, a string or an array of integers (write 0 or 1",
            ),
            ("[sysctl]\nnet.core.somaxconn = 1.5\n", "found float"),
            (
                "[sysctl]\nnet.core.somaxconn = 1111\n\"net.core.somaxconn\" = 2222\n",
                "given twice in this file",
            ),
            (
                "[sysctl]\n\"net.ipv4.tcp_rmem\" = [1, \"2\"]\n",
                "found string",
            ),
            (
                "[rps]\neth0 = 3\n",
                "`rps.eth0` must be a string, found integer",
            ),
            (
                "[rps]\neth0 = \"some\"\n",
                "`rps.eth0`: expected `all`, `off` or a CPU list",
            ),
            ("[irq]\neth0 = \"3-1\"\n", "runs backwards"),
            ("[xps]\neth0 = \"all\"\n", "expected `spread` or `off`"),
            ("[rfs]\nflow_entries = -1\n", "-1 is negative"),
            (
                "[rfs]\nflow_cnt = { eth0 = 1073741824 }\n",
                "1073741824 entries is over the 1048576 xtune allows: the kernel allocates 8 bytes per entry (rounded up to a power of two) for every rx queue at once, 8192 MiB here",
            ),
            (
                "[rfs]\nflow_entries = 8388608\n",
                "8388608 entries is over the 4194304 xtune allows",
            ),
            (
                "[sysctl]\nnet.core.rps_sock_flow_entries = 536870912\n",
                "536870912 entries is over the 4194304 xtune allows",
            ),
            ("[irqbalance]\nstop = \"yes\"\n", "must be true or false"),
            ("[limits]\nnofile = 0\n", "at least 1"),
            ("sysctl = 3\n", "`sysctl` must be a table"),
            ("[sysctl]\nsomaxconn = 3\n", "not a sysctl name"),
            ("[rps]\n\"a/b\" = \"all\"\n", "not a network device name"),
            ("extends = 3\n", "`extends` must be"),
            (
                "[sysctl\n",
                "TOML syntax error: line 1, column 8 (`[sysctl`): unclosed table",
            ),
        ];
        for (text, want) in cases {
            let p = write(&dir, "t.toml", text);
            let e = Profile::load(&p).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn extends_cycle_is_named_with_its_chain() {
        let dir = TempDir::new("profile-cycle");
        write(&dir, "a.toml", "extends = \"b.toml\"\n");
        write(&dir, "b.toml", "extends = \"c.toml\"\n");
        write(&dir, "c.toml", "extends = \"a.toml\"\n");
        let e = Profile::load(&dir.path().join("a.toml")).unwrap_err();
        assert!(matches!(e, ProfileError::Cycle { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            "extends cycle: a.toml -> b.toml -> c.toml -> a.toml"
        );
        write(&dir, "self.toml", "extends = \"self.toml\"\n");
        let e = Profile::load(&dir.path().join("self.toml")).unwrap_err();
        assert!(e.to_string().contains("self.toml -> self.toml"), "{e}");
    }

    #[test]
    fn missing_files_are_named() {
        let dir = TempDir::new("profile-missing");
        let e = Profile::load(&dir.path().join("nope.toml")).unwrap_err();
        assert!(matches!(e, ProfileError::Read { .. }));
        assert!(e.to_string().contains("nope.toml"), "{e}");
        write(&dir, "child.toml", "extends = \"gone.toml\"\n");
        let e = Profile::load(&dir.path().join("child.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("child.toml") && e.contains("gone.toml") && e.contains("no such file"),
            "{e}"
        );
    }

    #[test]
    fn toml_export_reads_back_as_the_same_profile() {
        let dir = TempDir::new("profile-roundtrip");
        let p = write(
            &dir,
            "r.toml",
            "[sysctl]\nnet.core.somaxconn = 4096\n\"net.ipv4.tcp_rmem\" = [1, 2, 3]\nnet.ipv4.tcp_congestion_control = \"cubic\"\n[nic.\"*\"]\ntxqueuelen = 5\n[nic.eth0]\nchannels = { combined = \"numa-local\" }\nrss = { equal = \"channels\", hash_tcp4 = \"nfds\", required = true }\n[nic.eth1]\nrss = { equal = 2 }\n[irq]\neth0 = \"0-1\"\n[rps]\nlo = \"all\"\n[xps]\neth0 = \"off\"\n[rfs]\nflow_entries = 4096\n[rfs.flow_cnt]\nlo = 1024\n[cpu]\ngovernor = \"performance\"\n[irqbalance]\nstop = true\nban = \"1\"\n[limits]\nnofile = 1000\n[hosts]\nx = \"h\"\n",
        );
        let a = Profile::load(&p).unwrap();
        let b = Profile::from_text(&a.to_toml_string(), "r", dir.path()).unwrap();
        assert_eq!(a.sysctl, b.sysctl);
        assert_eq!(a.nic, b.nic);
        assert_eq!(a.nic[1].1.ethtool[2].value, EthValue::Hash("sdfn".into()));
        assert_eq!(a.irq, b.irq);
        assert_eq!(a.rps, b.rps);
        assert_eq!(a.xps, b.xps);
        assert_eq!(a.rfs, b.rfs);
        assert_eq!(a.cpu, b.cpu);
        assert_eq!(a.irqbalance, b.irqbalance);
        assert_eq!(a.limits, b.limits);
        assert!(b.hosts.is_empty(), "hosts are not forwarded");
    }
}
