//! `/proc/stat`: per-CPU time counters.

use serde::{Deserialize, Serialize};

use super::parse_u64;
use crate::error::{ParseErrorKind, ProbeError};

const WHAT: &str = "/proc/stat";

/// One `cpuN` line of /proc/stat. Every field is in clock ticks (USER_HZ, see
/// [`crate::ticks_per_s`]) since boot.
///
/// Kernels before 2.6.33 print fewer columns (2.4: the first four; 2.6.0: + iowait, irq,
/// softirq; 2.6.11: + steal; 2.6.24: + guest); absent columns read as 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTimes {
    /// CPU number (from `cpuN`; offline CPUs have no line, so numbers may skip).
    pub cpu: usize,
    /// Normal processes in user mode (includes `guest`).
    pub user: u64,
    /// Niced processes in user mode (includes `guest_nice`).
    pub nice: u64,
    /// Kernel mode.
    pub system: u64,
    /// Idle.
    pub idle: u64,
    /// Idle while I/O was outstanding.
    pub iowait: u64,
    /// Hard interrupts.
    pub irq: u64,
    /// Soft interrupts (NET_RX, NET_TX, timers, ...).
    pub softirq: u64,
    /// Time the hypervisor ran something else while this vCPU wanted to run.
    pub steal: u64,
    /// Running a guest (already counted in `user`).
    pub guest: u64,
    /// Running a niced guest (already counted in `nice`).
    pub guest_nice: u64,
}

impl CpuTimes {
    /// All ticks this CPU accounted: every column except guest/guest_nice, which the
    /// kernel already counts inside user/nice.
    pub fn total(&self) -> u64 {
        [
            self.user,
            self.nice,
            self.system,
            self.idle,
            self.iowait,
            self.irq,
            self.softirq,
            self.steal,
        ]
        .iter()
        .fold(0u64, |acc, v| acc.saturating_add(*v))
    }
}

/// Parses the per-CPU lines of /proc/stat (the aggregate `cpu` line and the other
/// lines are skipped). At least one `cpuN` line with four or more columns is required.
pub fn parse_stat(text: &str) -> Result<Vec<CpuTimes>, ProbeError> {
    if text.trim().is_empty() {
        return Err(ProbeError::parse(WHAT, 0, ParseErrorKind::Empty));
    }
    let mut cpus = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        let line_no = idx + 1;
        let mut tokens = line.split_whitespace();
        let Some(name) = tokens.next() else { continue };
        let Some(digits) = name.strip_prefix("cpu") else {
            continue;
        };
        if digits.is_empty() {
            continue; // the aggregate line
        }
        let cpu = digits
            .parse::<usize>()
            .map_err(|_| ProbeError::parse(WHAT, line_no, ParseErrorKind::BadLine(name.into())))?;
        let mut cols = [0u64; 10];
        let mut found = 0;
        for token in tokens {
            let value = parse_u64(WHAT, line_no, token)?;
            // Columns beyond the ten known ones (a future kernel) are ignored.
            if let Some(slot) = cols.get_mut(found) {
                *slot = value;
            }
            found += 1;
        }
        if found < 4 {
            return Err(ProbeError::parse(
                WHAT,
                line_no,
                ParseErrorKind::TooFewColumns { expected: 4, found },
            ));
        }
        let [user, nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice] = cols;
        cpus.push(CpuTimes {
            cpu,
            user,
            nice,
            system,
            idle,
            iowait,
            irq,
            softirq,
            steal,
            guest,
            guest_nice,
        });
    }
    if cpus.is_empty() {
        return Err(ProbeError::parse(
            WHAT,
            0,
            ParseErrorKind::MissingField("cpuN lines"),
        ));
    }
    Ok(cpus)
}
