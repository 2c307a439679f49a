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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knob::{Stage, Wanted};

    fn item(target: Target, matches: bool) -> Item {
        Item {
            desired: Desired {
                knob: "k".into(),
                stage: Stage::Sysctl,
                target,
                wanted: Wanted::Exact("x".into()),
            },
            current: Current::Nothing,
            cmp: Comparison {
                matches,
                actual: "a".into(),
                wanted: "w".into(),
                reason: String::new(),
            },
        }
    }

    #[test]
    fn one_verdict_rule_for_every_target_and_command() {
        let file = || Target::File {
            path: "/proc/sys/k".into(),
            value: "1".into(),
        };
        let absent = || Target::Unavailable {
            reason: "no cpufreq".into(),
        };
        let config = || Target::IrqbalanceConfig {
            path: "/etc/default/irqbalance".into(),
        };
        // (target, matches, verdict under diff/apply, under verify, written by apply)
        let table = [
            (file(), true, Verdict::Ok, Verdict::Ok, false),
            (file(), false, Verdict::Change, Verdict::Drift, true),
            (config(), false, Verdict::Change, Verdict::Drift, true),
            (
                Target::IrqbalanceService,
                true,
                Verdict::Ok,
                Verdict::Ok,
                false,
            ),
            (
                Target::IrqbalanceService,
                false,
                Verdict::Change,
                Verdict::Drift,
                true,
            ),
            // Advice stays advice, met or not: xtune's own limit says
            // nothing of the load generator's, and it is never written.
            (
                Target::Advice,
                true,
                Verdict::Advice,
                Verdict::Advice,
                false,
            ),
            (
                Target::Advice,
                false,
                Verdict::Advice,
                Verdict::Advice,
                false,
            ),
            // Absent hardware is not applicable, never drift.
            (
                absent(),
                false,
                Verdict::NotApplicable,
                Verdict::NotApplicable,
                false,
            ),
            (
                absent(),
                true,
                Verdict::NotApplicable,
                Verdict::NotApplicable,
                false,
            ),
        ];
        for (target, matches, change, verify, written) in table {
            let i = item(target.clone(), matches);
            assert_eq!(i.verdict(Verdict::Change), change, "{target:?} {matches}");
            assert_eq!(i.verdict(Verdict::Drift), verify, "{target:?} {matches}");
            assert_eq!(i.needs_change(), written, "{target:?} {matches}");
        }
    }

    #[test]
    fn a_plan_lists_only_what_apply_would_write() {
        let plan = Plan {
            items: vec![
                item(Target::Advice, false),
                item(
                    Target::File {
                        path: "/p".into(),
                        value: "1".into(),
                    },
                    false,
                ),
                item(Target::IrqbalanceService, true),
            ],
            notes: Vec::new(),
        };
        let changes: Vec<&Item> = plan.changes().collect();
        assert_eq!(changes.len(), 1);
        assert!(matches!(changes[0].desired.target, Target::File { .. }));
    }
}
