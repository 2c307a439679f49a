//! [`build`]: the profile expanded against the host into knobs, in write order.

use std::collections::{BTreeMap, BTreeSet};

use super::compare::{name_set, port_set};
use super::{Build, Desired, PlanError, Stage, Target, TargetCtx, Wanted, RPS_SOCK_FLOW_ENTRIES};
use crate::cpuset::CpuSet;
use crate::ethtool::{self, Group, GroupState};
use crate::host::{governor_path, sysctl_path, DeviceInfo, Topology};
use crate::profile::{
    DeviceSel, EthSetting, EthValue, IrqPolicy, Profile, RpsPolicy, SysctlValue, XpsPolicy,
    NIC_KNOBS,
};

/// Expands the profile into knobs for this host. Pure.
pub fn build(profile: &Profile, topo: &Topology, ctx: &TargetCtx) -> Result<Build, PlanError> {
    let mut k = Builder {
        profile,
        topo,
        queues_after: BTreeMap::new(),
        usable: topo.usable_cpus(),
        b: Build::default(),
    };
    let skip = k.leave_out_host_wide(ctx)?;
    k.nic()?;
    if !skip.irq {
        k.irq()?;
    }
    k.rps()?;
    k.xps()?;
    k.rfs_flow_cnt()?;
    let sysctls = k.rfs_flow_entries(skip.flow_entries)?;
    k.sysctls(&sysctls, &skip.sysctl)?;
    if !skip.cpu {
        k.governor()?;
    }
    if !skip.irqbalance {
        k.irqbalance();
    }
    k.limits();
    // Stable write order by stage; within a stage, profile order.
    k.b.desired.sort_by_key(|d| d.stage);
    Ok(k.b)
}

/// Host-wide knobs left out of a plan inside a network namespace.
#[derive(Default)]
struct HostWide {
    sysctl: BTreeSet<String>,
    flow_entries: bool,
    irq: bool,
    cpu: bool,
    irqbalance: bool,
}

/// The knobs of one profile on one host, section by section.
struct Builder<'a> {
    profile: &'a Profile,
    topo: &'a Topology,
    /// Devices whose channel count this plan changes: their rx and tx queue
    /// directories as they will be after the change.
    queues_after: BTreeMap<String, (Vec<String>, Vec<String>)>,
    /// Online CPUs that are not isolated.
    usable: CpuSet,
    b: Build,
}

impl Builder<'_> {
    /// Global knobs in a network namespace: refused, or with `skip_global`
    /// left out with a note.
    fn leave_out_host_wide(&mut self, ctx: &TargetCtx) -> Result<HostWide, PlanError> {
        let (profile, topo) = (self.profile, self.topo);
        let mut skip = HostWide::default();
        let Some(netns) = &ctx.netns else {
            return Ok(skip);
        };
        let mut global: Vec<String> = Vec::new();
        for (key, _) in &profile.sysctl {
            if is_global_in_netns(key, topo, ctx) {
                global.push(format!("sysctl {key}"));
                skip.sysctl.insert(key.clone());
            }
        }
        if profile.rfs.flow_entries.is_some()
            && is_global_in_netns(RPS_SOCK_FLOW_ENTRIES, topo, ctx)
        {
            global.push(format!("[rfs] flow_entries ({RPS_SOCK_FLOW_ENTRIES})"));
            skip.flow_entries = true;
        }
        if !profile.irq.is_empty() {
            global.push("[irq] (interrupt affinity is host-wide)".into());
            skip.irq = true;
        }
        if profile.cpu.governor.is_some() {
            global.push("[cpu] governor".into());
            skip.cpu = true;
        }
        if profile.irqbalance.stop.is_some() || profile.irqbalance.ban.is_some() {
            global.push("[irqbalance]".into());
            skip.irqbalance = true;
        }
        if !global.is_empty() {
            if !ctx.skip_global {
                return Err(PlanError::GlobalInNetns {
                    netns: netns.clone(),
                    knobs: global,
                });
            }
            self.b.notes.push(format!(
                "left out in netns {netns} (host-wide, not per namespace): {}",
                global.join(", ")
            ));
        }
        Ok(skip)
    }

    /// `[nic.DEV]`: the NIC's own settings over ethtool netlink (every
    /// device's channels first, then rings, coalescing, features), then its
    /// sysfs settings in [`NIC_KNOBS`] order.
    fn nic(&mut self) -> Result<(), PlanError> {
        let nic = expand(
            &self.profile.nic,
            self.topo,
            "nic",
            &mut self.b.notes,
            |_| true,
        )?;
        for group in Group::ALL {
            if group == Group::Rss {
                // RSS and the steering knobs spread over the queues there
                // are once the channel knobs above are written.
                for (dev, s) in &nic {
                    self.predict_queues(dev, s);
                }
            }
            for (dev, s) in &nic {
                for e in s.ethtool.iter().filter(|e| e.group == group) {
                    self.ethtool_setting(dev, e);
                }
            }
        }
        for (dev, s) in nic {
            for knob in NIC_KNOBS {
                let Some(value) = knob.value(&s) else {
                    continue;
                };
                let value = value.text();
                self.b.desired.push(Desired {
                    knob: format!("nic:{}:{}", dev.name, knob.key),
                    stage: Stage::Nic,
                    target: Target::File {
                        path: format!("/sys/class/net/{}/{}", dev.name, knob.file),
                        value: value.clone(),
                    },
                    wanted: Wanted::Exact(value),
                });
            }
        }
        Ok(())
    }

    /// One ethtool setting: a knob through the `ethtool:` door, or advice
    /// naming device and knob when the device cannot take it (and the
    /// profile does not mark it `required`).
    fn ethtool_setting(&mut self, dev: &DeviceInfo, e: &EthSetting) {
        let group = e.group;
        let state: &GroupState = match dev.ethtool.get(&group) {
            Some(Ok(g)) => g,
            other => {
                let why = match other {
                    Some(Err(err)) if err.errno == libc::EOPNOTSUPP => format!(
                        "{} does not support {} settings ({}: EOPNOTSUPP)",
                        dev.name,
                        group.name(),
                        group.cli()
                    ),
                    Some(Err(err)) => format!("{} {}: {err}", dev.name, group.name()),
                    _ => format!("{} {}: not read", dev.name, group.name()),
                };
                let knob = format!("nic:{}:{}.{}", dev.name, group.name(), e.key);
                if e.required {
                    // Planned as any knob: it reads as unreadable, so the
                    // apply fails before writing and verify reports it.
                    push_required(&mut self.b, knob, dev, e, why);
                } else {
                    push_advice(&mut self.b, knob, value_word(group, &e.value), why);
                }
                return;
            }
        };
        if group == Group::Features {
            self.ethtool_features(dev, e, state);
        } else if group == Group::Rss {
            self.ethtool_rss(dev, e, state);
        } else {
            self.ethtool_value(dev, e, state);
        }
    }

    /// A feature switch, for each kernel feature its name stands for.
    fn ethtool_features(&mut self, dev: &DeviceInfo, e: &EthSetting, state: &GroupState) {
        let group = e.group;
        let EthValue::Switch(on) = e.value else {
            return;
        };
        let word = if on { "on" } else { "off" };
        let names = ethtool::kernel_features(&e.key);
        let alias = names.len() > 1;
        for kf in names {
            let knob = format!("nic:{}:features.{kf}", dev.name);
            let f = state.features.get(&kf);
            if f.is_none() && alias {
                continue; // a member of the group this device does not have
            }
            let blocked = match f {
                None => Some(format!(
                    "{}: {kf} is not a feature this kernel knows (ethtool -k)",
                    dev.name
                )),
                Some(f) if f.fixed && f.active != on => Some(format!(
                    "{} {kf} is [fixed] {} (the driver does not let it change)",
                    dev.name,
                    if f.active { "on" } else { "off" }
                )),
                Some(_) => None,
            };
            match blocked {
                Some(why) if !e.required => push_advice(&mut self.b, knob, word.into(), why),
                _ => self.b.desired.push(Desired {
                    knob,
                    stage: Stage::Nic,
                    target: Target::File {
                        path: ethtool::path(&dev.name, group, &kf),
                        value: word.into(),
                    },
                    wanted: Wanted::Exact(word.into()),
                }),
            }
        }
    }

    /// An RSS setting: the indirection table spread evenly over the first N
    /// rx queues (N after this plan's channel change), or the header fields
    /// a flow type hashes.
    fn ethtool_rss(&mut self, dev: &DeviceInfo, e: &EthSetting, state: &GroupState) {
        let knob = format!("nic:{}:rss.{}", dev.name, e.key);
        let field = eth_field(e);
        let resolved: Result<(String, String), String> = match (&e.value, state.texts.get(field)) {
            (_, None) => Err(format!(
                "{} does not support rss {} ({} shows none)",
                dev.name,
                e.key,
                if field == "indir" {
                    "ethtool -x"
                } else {
                    "ethtool -n"
                }
            )),
            (EthValue::Hash(letters), Some(_)) => Ok((letters.clone(), String::new())),
            (v, Some(table)) => {
                let size = table.split(' ').count();
                let rx = self.rx_queues(dev).len() as u64;
                let (n, how) = match v {
                    EthValue::Channels => (rx, format!("\"channels\": {rx} rx queues, ")),
                    EthValue::Count(n) => (*n, String::new()),
                    _ => (0, String::new()),
                };
                if n == 0 || n > rx {
                    Err(format!(
                        "{} rss equal = {n} is beyond its {rx} rx queues",
                        dev.name
                    ))
                } else {
                    let meaning = format!(
                        "equal {n}: {how}the {size}-entry table over queues 0-{}",
                        n - 1
                    );
                    // The driver's own spread reads `default` where the
                    // channel count is known (see crate::ethtool).
                    let default =
                        n == rx && matches!(dev.ethtool.get(&Group::Channels), Some(Ok(_)));
                    let value = if default {
                        "default".to_string()
                    } else {
                        ethtool::table_text(&ethtool::default_indir(size, n as u32))
                    };
                    Ok((value, meaning))
                }
            }
        };
        match resolved {
            Err(why) if !e.required => {
                push_advice(&mut self.b, knob, value_word(e.group, &e.value), why)
            }
            Err(why) => push_required(&mut self.b, knob, dev, e, why),
            Ok((value, meaning)) => self.b.desired.push(Desired {
                knob,
                stage: Stage::Nic,
                target: Target::File {
                    path: ethtool::path(&dev.name, e.group, field),
                    value: value.clone(),
                },
                wanted: if meaning.is_empty() {
                    Wanted::Exact(value)
                } else {
                    Wanted::Meant { value, meaning }
                },
            }),
        }
        // Fewer rx queues after the change: the kernel refuses to drop
        // queues a configured table still names, so the table goes first
        // (it names only queues that stay). More: channels first.
        if self.rx_queues(dev).len() < dev.rx_queues.len() {
            let prefix = format!("nic:{}:channels.", dev.name);
            let first = self
                .b
                .desired
                .iter()
                .position(|d| d.knob.starts_with(&prefix));
            let last = self.b.desired.len() - 1;
            if let Some(i) = first.filter(|_| self.b.desired[last].stage == Stage::Nic) {
                let d = self.b.desired.remove(last);
                self.b.desired.insert(i, d);
            }
        }
    }

    /// A count or switch of channels, rings or coalescing, resolved
    /// against the device's maximum and the usable CPUs.
    fn ethtool_value(&mut self, dev: &DeviceInfo, e: &EthSetting, state: &GroupState) {
        let group = e.group;
        let knob = format!("nic:{}:{}.{}", dev.name, group.name(), e.key);
        let current = state.values.get(&e.key);
        let max = state.values.get(&format!("max_{}", e.key)).copied();
        let usable = self.usable.iter().count() as u64;
        let resolved: Result<(u64, String), String> = match (&e.value, current) {
            (_, None) => Err(format!(
                "{} does not support {} {} ({} shows n/a)",
                dev.name,
                group.name(),
                e.key,
                group.cli()
            )),
            (EthValue::Switch(b), _) => Ok((u64::from(*b), String::new())),
            (EthValue::Count(n), _) => match max {
                Some(m) if *n > m => Err(format!(
                    "{} {} {} = {n} is beyond the device maximum {m}",
                    dev.name,
                    group.name(),
                    e.key
                )),
                _ => Ok((*n, String::new())),
            },
            (EthValue::Max, _) => match max {
                Some(m) => Ok((m, format!("\"max\": the device maximum {m}"))),
                None => Err(format!(
                    "{} reports no maximum for {} {}",
                    dev.name,
                    group.name(),
                    e.key
                )),
            },
            (EthValue::NumaLocal, _) => {
                let (cpus, node) = match &dev.local_cpus {
                    Some(local) if !local.intersection(&self.usable).is_empty() => (
                        local.intersection(&self.usable).iter().count() as u64,
                        match dev.numa_node {
                            Some(n) => format!("of NUMA node {n}"),
                            None => "local to it".to_string(),
                        },
                    ),
                    _ => (usable, "(no NUMA node: all of them)".to_string()),
                };
                let n = max.map_or(cpus, |m| cpus.min(m));
                Ok((
                    n,
                    format!(
                        "\"numa-local\": {cpus} online non-isolated CPUs {node}{}",
                        match max {
                            Some(m) if m < cpus => format!(", capped at the device maximum {m}"),
                            _ => String::new(),
                        }
                    ),
                ))
            }
            (EthValue::Channels | EthValue::Hash(_), _) => Err(format!(
                "{} {} {}: not a {} value",
                dev.name,
                group.name(),
                e.key,
                group.name()
            )),
            (EthValue::Cpus, _) => {
                let n = max.map_or(usable, |m| usable.min(m));
                Ok((
                    n,
                    format!(
                        "\"cpus\": {usable} online non-isolated CPUs{}",
                        match max {
                            Some(m) if m < usable => format!(", capped at the device maximum {m}"),
                            _ => String::new(),
                        }
                    ),
                ))
            }
        };
        match resolved {
            Err(why) if !e.required => {
                push_advice(&mut self.b, knob, value_word(group, &e.value), why)
            }
            Err(why) => push_required(&mut self.b, knob, dev, e, why),
            Ok((n, meaning)) => self.b.desired.push(Desired {
                knob,
                stage: Stage::Nic,
                target: Target::File {
                    path: ethtool::path(&dev.name, group, &e.key),
                    value: n.to_string(),
                },
                wanted: if meaning.is_empty() {
                    Wanted::Exact(n.to_string())
                } else {
                    Wanted::Meant {
                        value: n.to_string(),
                        meaning,
                    }
                },
            }),
        }
    }

    /// The queue directories `dev` will have once the channel knobs of this
    /// plan are written: rx = rx + combined channels, tx = tx + combined.
    fn predict_queues(&mut self, dev: &DeviceInfo, s: &crate::profile::NicSettings) {
        let Some(Ok(state)) = dev.ethtool.get(&Group::Channels) else {
            return;
        };
        let count = |field: &str| -> u64 {
            let path = ethtool::path(&dev.name, Group::Channels, field);
            self.b
                .desired
                .iter()
                .find(|d| matches!(&d.target, Target::File { path: p, .. } if *p == path))
                .and_then(|d| match &d.target {
                    Target::File { value, .. } => value.parse().ok(),
                    _ => None,
                })
                .unwrap_or_else(|| state.values.get(field).copied().unwrap_or(0))
        };
        if !s.ethtool.iter().any(|e| e.group == Group::Channels) {
            return;
        }
        let (rx, tx, combined) = (count("rx"), count("tx"), count("combined"));
        let (nrx, ntx) = ((rx + combined) as usize, (tx + combined) as usize);
        if nrx == dev.rx_queues.len() && ntx == dev.tx_queues.len() || nrx == 0 || ntx == 0 {
            return;
        }
        self.b.notes.push(format!(
            "{}: channels change from {} rx / {} tx queues to {nrx} / {ntx}; RPS, XPS and RFS are planned for the queues after the change",
            dev.name,
            dev.rx_queues.len(),
            dev.tx_queues.len()
        ));
        if !dev.irqs.is_empty() && !self.profile.irq.is_empty() {
            self.b.notes.push(format!(
                "{}: the channel change renumbers its interrupts; [irq] is planned for the ones there now: run `xtune apply` again once it has been applied to pin the new set",
                dev.name
            ));
        }
        self.queues_after.insert(
            dev.name.clone(),
            (
                (0..nrx).map(|i| format!("rx-{i}")).collect(),
                (0..ntx).map(|i| format!("tx-{i}")).collect(),
            ),
        );
    }

    /// The rx queues of `dev` after this plan's channel change.
    fn rx_queues<'d>(&'d self, dev: &'d DeviceInfo) -> &'d [String] {
        self.queues_after
            .get(&dev.name)
            .map_or(&dev.rx_queues, |(rx, _)| rx)
    }

    /// The tx queues of `dev` after this plan's channel change.
    fn tx_queues<'d>(&'d self, dev: &'d DeviceInfo) -> &'d [String] {
        self.queues_after
            .get(&dev.name)
            .map_or(&dev.tx_queues, |(_, tx)| tx)
    }

    /// `[irq]`: the affinity of each of a device's interrupts.
    fn irq(&mut self) -> Result<(), PlanError> {
        let topo = self.topo;
        let irq = expand(&self.profile.irq, topo, "irq", &mut self.b.notes, |d| {
            !d.irqs.is_empty()
        })?;
        for (dev, policy) in irq {
            if dev.irqs.is_empty() {
                self.b.notes.push(format!(
                    "irq: {} has no interrupts of its own; nothing to pin",
                    dev.name
                ));
                continue;
            }
            for (i, irq) in dev.irqs.iter().enumerate() {
                let knob = format!("irq:{irq}");
                let set = self.irq_cpus(&policy, dev, i, &knob)?;
                let write = set.intersection(&topo.online);
                if write.is_empty() {
                    return Err(PlanError::NoUsableCpus {
                        knob,
                        requested: set,
                        isolated: "",
                    });
                }
                self.b.desired.push(Desired {
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
        Ok(())
    }

    /// The CPUs the `i`th interrupt of `dev` goes to under `policy`.
    fn irq_cpus(
        &mut self,
        policy: &IrqPolicy,
        dev: &DeviceInfo,
        i: usize,
        knob: &str,
    ) -> Result<CpuSet, PlanError> {
        let usable = &self.usable;
        Ok(match policy {
            IrqPolicy::Spread => {
                let usable_list: Vec<u32> = usable.iter().collect();
                if usable_list.is_empty() {
                    return Err(PlanError::NoUsableCpus {
                        knob: knob.to_string(),
                        requested: self.topo.online.clone(),
                        isolated: " and not isolated",
                    });
                }
                CpuSet::from_cpus([usable_list[i % usable_list.len()]])
            }
            IrqPolicy::Cpus(c) => c.clone(),
            IrqPolicy::NumaLocal => match &dev.local_cpus {
                Some(local) if !local.intersection(usable).is_empty() => local.intersection(usable),
                _ => {
                    if i == 0 {
                        self.b.notes.push(format!(
                            "irq: {} reports no NUMA node CPUs; numa-local means all usable CPUs ({usable})",
                            dev.name
                        ));
                    }
                    usable.clone()
                }
            },
        })
    }

    /// `[rps]`: the receive steering mask of every rx queue.
    fn rps(&mut self) -> Result<(), PlanError> {
        let rps = expand(
            &self.profile.rps,
            self.topo,
            "rps",
            &mut self.b.notes,
            |d| !d.rx_queues.is_empty(),
        )?;
        let usable = &self.usable;
        for (dev, policy) in rps {
            let set = match &policy {
                RpsPolicy::All => usable.clone(),
                RpsPolicy::Off => CpuSet::new(),
                RpsPolicy::Cpus(c) => c.clone(),
            };
            let write = set.intersection(usable);
            if write.is_empty() && !set.is_empty() {
                return Err(PlanError::NoUsableCpus {
                    knob: format!("rps:{}", dev.name),
                    requested: set,
                    isolated: " and not isolated",
                });
            }
            let rx_queues = self.rx_queues(dev).to_vec();
            if rx_queues.is_empty() {
                self.b
                    .notes
                    .push(format!("rps: {} has no rx queues", dev.name));
            }
            for q in &rx_queues {
                self.b.desired.push(Desired {
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
        Ok(())
    }

    /// `[xps]`: the transmit steering mask of every tx queue of a
    /// multi-queue device.
    fn xps(&mut self) -> Result<(), PlanError> {
        let xps = expand(
            &self.profile.xps,
            self.topo,
            "xps",
            &mut self.b.notes,
            |d| d.tx_queues.len() > 1,
        )?;
        let cpus: Vec<u32> = self.usable.iter().collect();
        for (dev, policy) in xps {
            let tx_queues = self.tx_queues(dev).to_vec();
            let nq = tx_queues.len();
            if nq <= 1 {
                self.b.notes.push(format!(
                    "xps: {} has {nq} tx queue(s); XPS applies to multi-queue devices only",
                    dev.name,
                ));
                continue;
            }
            for (i, q) in tx_queues.iter().enumerate() {
                let set = match policy {
                    XpsPolicy::Off => CpuSet::new(),
                    XpsPolicy::Spread if cpus.is_empty() => CpuSet::new(),
                    XpsPolicy::Spread if nq >= cpus.len() => {
                        CpuSet::from_cpus([cpus[i % cpus.len()]])
                    }
                    XpsPolicy::Spread => cpus
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| j % nq == i)
                        .map(|(_, c)| *c)
                        .collect(),
                };
                self.b.desired.push(Desired {
                    knob: format!("xps:{}:{q}", dev.name),
                    stage: Stage::Steering,
                    target: Target::File {
                        path: format!("/sys/class/net/{}/queues/{q}/xps_cpus", dev.name),
                        value: set.to_hex_mask(),
                    },
                    wanted: Wanted::Cpus {
                        set,
                        keep: self.topo.online.clone(),
                        hex: true,
                    },
                });
            }
        }
        Ok(())
    }

    /// `[rfs] flow_cnt`: the flow table of every rx queue.
    fn rfs_flow_cnt(&mut self) -> Result<(), PlanError> {
        let rfs = expand(
            &self.profile.rfs.flow_cnt,
            self.topo,
            "rfs.flow_cnt",
            &mut self.b.notes,
            |d| !d.rx_queues.is_empty(),
        )?;
        for (dev, cnt) in rfs {
            for q in self.rx_queues(dev).to_vec() {
                self.b.desired.push(Desired {
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
        Ok(())
    }

    /// `[rfs] flow_entries`: the global socket flow table, which wins over
    /// the same sysctl in `[sysctl]`. Returns the profile's sysctls without it.
    fn rfs_flow_entries(
        &mut self,
        host_wide: bool,
    ) -> Result<Vec<(String, SysctlValue)>, PlanError> {
        let mut sysctls = self.profile.sysctl.clone();
        let Some(n) = self.profile.rfs.flow_entries else {
            return Ok(sysctls);
        };
        if let Some(pos) = sysctls.iter().position(|(k, _)| k == RPS_SOCK_FLOW_ENTRIES) {
            sysctls.remove(pos);
            self.b.notes.push(format!(
                "{RPS_SOCK_FLOW_ENTRIES} is set in both [rfs] flow_entries and [sysctl]; [rfs] wins"
            ));
        }
        if !host_wide {
            let value = SysctlValue::Int(i64::try_from(n).unwrap_or(i64::MAX));
            let d = sysctl_desired(RPS_SOCK_FLOW_ENTRIES, &value, self.topo, Stage::Steering)?;
            self.b.desired.push(d);
        }
        Ok(sysctls)
    }

    /// `[sysctl]`, in profile order, but for those left out.
    fn sysctls(
        &mut self,
        sysctls: &[(String, SysctlValue)],
        left_out: &BTreeSet<String>,
    ) -> Result<(), PlanError> {
        for (key, value) in sysctls {
            if !left_out.contains(key) {
                let d = sysctl_desired(key, value, self.topo, Stage::Sysctl)?;
                self.b.desired.push(d);
            }
        }
        Ok(())
    }

    /// `[cpu] governor`: every CPU with cpufreq, or one knob saying there is none.
    fn governor(&mut self) -> Result<(), PlanError> {
        let topo = self.topo;
        let Some(g) = &self.profile.cpu.governor else {
            return Ok(());
        };
        if topo.cpufreq_cpus.is_empty() {
            self.b.desired.push(Desired {
                knob: "governor:*".into(),
                stage: Stage::Cpu,
                target: Target::Unavailable {
                    reason: "no cpufreq on this host (a VM, or frequency under firmware control)"
                        .into(),
                },
                wanted: Wanted::Exact(g.clone()),
            });
            return Ok(());
        }
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
            self.b.desired.push(Desired {
                knob: format!("governor:cpu{cpu}"),
                stage: Stage::Cpu,
                target: Target::File {
                    path: governor_path(*cpu),
                    value: g.clone(),
                },
                wanted: Wanted::Exact(g.clone()),
            });
        }
        Ok(())
    }

    /// `[irqbalance]`: the ban list first (written while the daemon may
    /// still run), then stopping it.
    fn irqbalance(&mut self) {
        let section = &self.profile.irqbalance;
        if let Some(ban) = &section.ban {
            let target = match &self.topo.irqbalance_config {
                Some(path) => Target::IrqbalanceConfig { path: path.clone() },
                None => Target::Unavailable {
                    reason: "irqbalance is not installed (not running, no /etc/default/irqbalance or /etc/sysconfig/irqbalance)".into(),
                },
            };
            self.b.desired.push(Desired {
                knob: "irqbalance:banned_cpus".into(),
                stage: Stage::Irqbalance,
                target,
                wanted: Wanted::BannedCpus(ban.clone()),
            });
        }
        if section.stop == Some(true) {
            self.b.desired.push(Desired {
                knob: "irqbalance:service".into(),
                stage: Stage::Irqbalance,
                target: Target::IrqbalanceService,
                wanted: Wanted::Stopped,
            });
        }
    }

    /// `[limits] nofile`: advice, never written.
    fn limits(&mut self) {
        if let Some(n) = self.profile.limits.nofile {
            self.b.desired.push(Desired {
                knob: "limits:nofile".into(),
                stage: Stage::Advice,
                target: Target::Advice,
                wanted: Wanted::Nofile {
                    wanted: n,
                    own: self.topo.nofile,
                    nr_open: self.topo.nr_open,
                },
            });
        }
    }
}

/// A profile value as written, for advice and for required knobs.
fn value_word(group: Group, v: &EthValue) -> String {
    match v {
        EthValue::Switch(b) if group == Group::Features => if *b { "on" } else { "off" }.into(),
        EthValue::Count(n) => n.to_string(),
        EthValue::Max => "max".into(),
        EthValue::Cpus => "cpus".into(),
        EthValue::NumaLocal => "numa-local".into(),
        EthValue::Channels => "channels".into(),
        EthValue::Hash(h) => h.clone(),
        EthValue::Switch(b) => u8::from(*b).to_string(),
    }
}

/// The door field a setting writes: `rss.equal` is the table `rss/indir`.
fn eth_field(e: &EthSetting) -> &str {
    match (e.group, e.key.as_str()) {
        (Group::Rss, "equal") => "indir",
        (_, k) => k,
    }
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

/// Advice in place of a knob the device cannot take.
fn push_advice(b: &mut Build, knob: String, wanted: String, reason: String) {
    b.desired.push(Desired {
        knob,
        stage: Stage::Advice,
        target: Target::Advice,
        wanted: Wanted::NicAdvice { wanted, reason },
    });
}

/// A `required` setting the device cannot take: planned as any knob, so
/// that the apply fails before writing and verify reports `why`.
fn push_required(b: &mut Build, knob: String, dev: &DeviceInfo, e: &EthSetting, why: String) {
    let value = value_word(e.group, &e.value);
    b.desired.push(Desired {
        knob,
        stage: Stage::Nic,
        target: Target::File {
            path: ethtool::path(&dev.name, e.group, eth_field(e)),
            value: value.clone(),
        },
        wanted: Wanted::Meant {
            value,
            meaning: format!("required: {why}"),
        },
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knob::{compare, Current};
    use crate::profile::{NicSettings, Rfs};

    fn set(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
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
                    numa_node: None,
                    ethtool: Default::default(),
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
        // Each file is the one its identity names: rollback trusts no other.
        for d in &b.desired {
            if let Target::File { path, .. } = &d.target {
                let place = crate::knob::place_of(&d.knob);
                assert_eq!(place, Ok(crate::knob::Place::File(path.clone())));
            }
        }
    }

    /// A profile of `[nic.DEV]` text planned on a fake sysfs root with
    /// ethtool groups as files (what the door reads on a real host).
    fn plan_nic(t: &crate::testutil::TempDir, text: &str) -> Build {
        let fs = crate::fs::RootFs::new(t.path());
        let p = Profile::from_text(text, "t", std::path::Path::new("/")).unwrap();
        let topo = Topology::read(&fs, &p);
        build(&p, &topo, &TargetCtx::default()).unwrap()
    }

    fn knob_value(b: &Build, knob: &str) -> (String, Wanted) {
        let d = b
            .desired
            .iter()
            .find(|d| d.knob == knob)
            .unwrap_or_else(|| panic!("no {knob} in {:?}", knobs(b)));
        let v = match &d.target {
            Target::File { value, .. } => value.clone(),
            other => format!("{other:?}"),
        };
        (v, d.wanted.clone())
    }

    #[test]
    fn numa_local_channels_count_the_usable_cpus_of_the_devices_node() {
        let t = crate::testutil::fake_host("numa-local", 8, &[], &[("eth0", 8, 8), ("eth1", 8, 8)]);
        t.put("/sys/devices/system/cpu/isolated", "3\n");
        // eth0 on node 1 (CPUs 2-5, 3 isolated), with no local_cpulist.
        t.put("/sys/devices/pci0000:00/0000:00:03.0/numa_node", "1\n");
        t.symlink(
            "/sys/class/net/eth0/device",
            "../../../devices/pci0000:00/0000:00:03.0",
        );
        t.put("/sys/devices/system/node/node1/cpulist", "2-5\n");
        // eth1 with no node: -1 means every CPU, whatever local_cpulist says.
        t.put("/sys/devices/pci0000:00/0000:00:04.0/numa_node", "-1\n");
        t.put(
            "/sys/devices/pci0000:00/0000:00:04.0/local_cpulist",
            "0-1\n",
        );
        t.symlink(
            "/sys/class/net/eth1/device",
            "../../../devices/pci0000:00/0000:00:04.0",
        );
        for dev in ["eth0", "eth1"] {
            t.put(
                &format!("ethtool:{dev}/channels"),
                "combined 8\nmax_combined 6\n",
            );
        }
        let b = plan_nic(
            &t,
            "[nic.eth0]\nchannels = { combined = \"numa-local\" }\n[nic.eth1]\nchannels = { combined = \"numa-local\" }\n",
        );
        let (v, w) = knob_value(&b, "nic:eth0:channels.combined");
        assert_eq!(v, "3", "CPUs 2, 4, 5 of node 1");
        let Wanted::Meant { meaning, .. } = w else {
            panic!("{w:?}")
        };
        assert!(
            meaning.contains("3 online non-isolated CPUs of NUMA node 1"),
            "{meaning}"
        );
        // Seven usable CPUs, capped at the device maximum of 6.
        let (v, w) = knob_value(&b, "nic:eth1:channels.combined");
        assert_eq!(v, "6");
        let Wanted::Meant { meaning, .. } = w else {
            panic!("{w:?}")
        };
        assert!(
            meaning.contains("no NUMA node") && meaning.contains("maximum 6"),
            "{meaning}"
        );
        // The queues after the change are the ones steered.
        assert!(
            b.notes
                .iter()
                .any(|n| n.contains("eth0: channels change from 8 rx / 8 tx queues to 3 / 3")),
            "{:?}",
            b.notes
        );
    }

    #[test]
    fn rss_spreads_over_the_rx_queues_after_the_channel_change() {
        let t = crate::testutil::fake_host("rss-plan", 4, &[], &[("eth0", 4, 4), ("eth1", 4, 4)]);
        for dev in ["eth0", "eth1"] {
            t.mkdir(&format!("/sys/class/net/{dev}/device"));
            t.put(
                &format!("ethtool:{dev}/channels"),
                "combined 4\nmax_combined 4\n",
            );
            t.put(
                &format!("ethtool:{dev}/rss"),
                "hfunc 1\nindir_size 8\nindir: 0 1 2 3 0 1 2 3\nhash_tcp4: sd\nhash_udp4: sd\n",
            );
        }
        let b = plan_nic(
            &t,
            "[nic.eth0]\nchannels = { combined = 2 }\nrss = { equal = \"channels\", hash_tcp4 = \"nfds\" }\n[nic.eth1]\nchannels = { combined = 2 }\nrss = { equal = 1 }\n[rps]\neth0 = \"all\"\n",
        );
        let order: Vec<String> = knobs(&b).into_iter().map(|(k, _)| k).collect();
        let pos = |k: &str| order.iter().position(|o| o == k).unwrap();
        // Shrinking: the table first, naming only queues that stay (the
        // kernel refuses to drop queues a configured table names); then
        // the channels, then the steering masks of the queues left.
        assert!(pos("nic:eth0:rss.equal") < pos("nic:eth0:channels.combined"));
        assert!(pos("nic:eth0:rss.hash_tcp4") < pos("nic:eth0:channels.combined"));
        assert!(pos("nic:eth1:rss.equal") < pos("nic:eth1:channels.combined"));
        assert!(pos("nic:eth0:channels.combined") < pos("rps:eth0:rx-0"));
        assert!(!order.iter().any(|k| k == "rps:eth0:rx-2"), "{order:?}");
        // Spread over both queues left: the driver's own spread.
        let (v, w) = knob_value(&b, "nic:eth0:rss.equal");
        assert_eq!(v, "default");
        let Wanted::Meant { meaning, .. } = w else {
            panic!("{w:?}")
        };
        assert!(meaning.contains("\"channels\": 2 rx queues"), "{meaning}");
        assert_eq!(
            knob_value(&b, "nic:eth0:rss.hash_tcp4"),
            ("sdfn".into(), Wanted::Exact("sdfn".into()))
        );
        // Fewer queues than channels: the table itself.
        assert_eq!(knob_value(&b, "nic:eth1:rss.equal").0, "equal 1");
        for d in &b.desired {
            if let Target::File { path, .. } = &d.target {
                let place = crate::knob::place_of(&d.knob);
                assert_eq!(
                    place,
                    Ok(crate::knob::Place::File(path.clone())),
                    "{}",
                    d.knob
                );
            }
        }

        // Growing: channels first, then the table over the new queues.
        let g = crate::testutil::fake_host("rss-grow", 4, &[], &[("eth0", 2, 2)]);
        g.mkdir("/sys/class/net/eth0/device");
        g.put("ethtool:eth0/channels", "combined 2\nmax_combined 4\n");
        g.put("ethtool:eth0/rss", "indir_size 8\nindir: 0 1 0 1 0 1 0 1\n");
        let grow = plan_nic(
            &g,
            "[nic.eth0]\nchannels = { combined = 4 }\nrss = { equal = 3 }\n",
        );
        assert_eq!(
            knobs(&grow),
            [
                ("nic:eth0:channels.combined".to_string(), "4".to_string()),
                ("nic:eth0:rss.equal".to_string(), "equal 3".to_string())
            ]
        );

        // More queues than there will be, and a flow type the driver does
        // not report: advice naming device and knob; required, a knob that
        // fails.
        let b = plan_nic(
            &t,
            "[nic.eth0]\nchannels = { combined = 2 }\nrss = { equal = 3, hash_tcp6 = \"sd\" }\n[nic.eth1]\nrss = { equal = 8, required = true }\n",
        );
        for (knob, words) in [
            (
                "nic:eth0:rss.equal",
                "eth0 rss equal = 3 is beyond its 2 rx queues",
            ),
            (
                "nic:eth0:rss.hash_tcp6",
                "eth0 does not support rss hash_tcp6",
            ),
        ] {
            let (_, w) = knob_value(&b, knob);
            let Wanted::NicAdvice { reason, .. } = w else {
                panic!("{knob}: {w:?}")
            };
            assert!(reason.contains(words), "{knob}: {reason}");
        }
        let (v, w) = knob_value(&b, "nic:eth1:rss.equal");
        assert_eq!(v, "8");
        assert!(
            matches!(w, Wanted::Meant { meaning, .. } if meaning.starts_with("required: eth1 rss equal = 8 is beyond its 4 rx queues"))
        );
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
}
