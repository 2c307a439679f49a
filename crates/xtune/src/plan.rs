//! Plan: each desired knob with its current value and the verdict on it.
//!
//! [`observe`] is the only I/O here (one read per knob); [`Plan::from_parts`]
//! and everything after it are pure, so the diff a user sees and the writes
//! apply makes come from the same list.

use crate::fs::Fs;
use crate::host::find_processes;
use crate::knob::{compare, Comparison, Current, Desired, Target};
use crate::report::{KnobLine, Verdict};

/// One knob of the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// What the profile wants.
    pub desired: Desired,
    /// What was read.
    pub current: Current,
    /// Judged by meaning.
    pub cmp: Comparison,
}

impl Item {
    /// True when apply must write this knob.
    pub fn needs_change(&self) -> bool {
        !self.cmp.matches && is_writable(&self.desired.target)
    }

    /// The verdict on this knob as read, the one rule every command uses:
    /// absent hardware is not applicable, advice stays advice (xtune's own
    /// limit meeting it says nothing of the load generator's), a value with
    /// the wanted meaning is ok, and anything else is `otherwise` (`change`
    /// for diff and apply, `drift` for verify).
    pub fn verdict(&self, otherwise: Verdict) -> Verdict {
        match &self.desired.target {
            Target::Unavailable { .. } => Verdict::NotApplicable,
            Target::Advice => Verdict::Advice,
            _ if self.cmp.matches => Verdict::Ok,
            _ => otherwise,
        }
    }

    /// A report line for this knob with `verdict`.
    pub fn line(&self, verdict: Verdict) -> KnobLine {
        KnobLine {
            knob: self.desired.knob.clone(),
            wanted: self.cmp.wanted.clone(),
            actual: self.cmp.actual.clone(),
            verdict,
            reason: self.cmp.reason.clone(),
            agent: None,
            errno: None,
            path: match &self.desired.target {
                Target::File { path, .. } | Target::IrqbalanceConfig { path } => Some(path.clone()),
                _ => None,
            },
        }
    }
}

/// A profile planned against one host state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Every knob, in write order.
    pub items: Vec<Item>,
    /// Notes from building the knob list.
    pub notes: Vec<String>,
}

impl Plan {
    /// Pairs desired knobs with what was read and judges each. Pure.
    pub fn from_parts(desired: Vec<Desired>, current: Vec<Current>, notes: Vec<String>) -> Plan {
        let items = desired
            .into_iter()
            .zip(current)
            .map(|(desired, current)| {
                let cmp = compare(&desired, &current);
                Item {
                    desired,
                    current,
                    cmp,
                }
            })
            .collect();
        Plan { items, notes }
    }

    /// Knobs apply would write.
    pub fn changes(&self) -> impl Iterator<Item = &Item> {
        self.items.iter().filter(|i| i.needs_change())
    }
}

/// True for knobs xtune writes (not advice, not absent hardware).
pub fn is_writable(t: &Target) -> bool {
    matches!(
        t,
        Target::File { .. } | Target::IrqbalanceService | Target::IrqbalanceConfig { .. }
    )
}

/// Reads the current state of every knob.
pub fn observe(fs: &dyn Fs, desired: &[Desired]) -> Vec<Current> {
    desired.iter().map(|d| observe_one(fs, d)).collect()
}

/// Reads the current state of one knob.
pub fn observe_one(fs: &dyn Fs, d: &Desired) -> Current {
    match &d.target {
        Target::File { path, .. } => {
            let effective = d.knob.strip_prefix("irq:").and_then(|irq| {
                fs.read(&format!("/proc/irq/{irq}/effective_affinity_list"))
                    .ok()
            });
            Current::File {
                raw: fs.read(path),
                effective,
            }
        }
        Target::IrqbalanceService => Current::Service(find_processes(fs, "irqbalance")),
        Target::IrqbalanceConfig { path } => Current::Config(fs.read(path).ok()),
        Target::Unavailable { .. } | Target::Advice => Current::Nothing,
    }
}
