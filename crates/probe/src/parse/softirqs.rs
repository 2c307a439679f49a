//! `/proc/softirqs`: soft-interrupt counts per CPU.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{parse_cpu_header, parse_u64};
use crate::error::{ParseErrorKind, ProbeError};

const WHAT: &str = "/proc/softirqs";

/// Soft-interrupt counts since boot. Columns follow the header (one per possible CPU).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Softirqs {
    /// CPU number of each column.
    pub cpus: Vec<usize>,
    /// NET_RX count per column: packet receive processing.
    pub net_rx: Vec<u64>,
    /// NET_TX count per column: transmit completion processing.
    pub net_tx: Vec<u64>,
    /// Every row by name (`TIMER`, `SCHED`, `BLOCK_IOPOLL` on kernels before 4.4,
    /// `IRQ_POLL` after, ...), including NET_RX and NET_TX.
    pub rows: BTreeMap<String, Vec<u64>>,
}

/// Parses /proc/softirqs. Each row must have one count per header column; NET_RX and
/// NET_TX rows are required.
pub fn parse_softirqs(text: &str) -> Result<Softirqs, ProbeError> {
    let mut lines = text.lines().enumerate();
    let Some((_, header)) = lines.find(|(_, l)| !l.trim().is_empty()) else {
        return Err(ProbeError::parse(WHAT, 0, ParseErrorKind::Empty));
    };
    let cpus = parse_cpu_header(WHAT, header)?;
    let mut rows = BTreeMap::new();
    for (idx, line) in lines {
        let line_no = idx + 1;
        let mut tokens = line.split_whitespace();
        let Some(name) = tokens.next() else { continue };
        let name = name.strip_suffix(':').ok_or_else(|| {
            ProbeError::parse(WHAT, line_no, ParseErrorKind::BadLine(name.into()))
        })?;
        let counts = tokens
            .map(|t| parse_u64(WHAT, line_no, t))
            .collect::<Result<Vec<_>, _>>()?;
        if counts.len() != cpus.len() {
            return Err(ProbeError::parse(
                WHAT,
                line_no,
                ParseErrorKind::TooFewColumns {
                    expected: cpus.len(),
                    found: counts.len(),
                },
            ));
        }
        rows.insert(name.to_owned(), counts);
    }
    let net_rx = rows
        .get("NET_RX")
        .cloned()
        .ok_or_else(|| ProbeError::parse(WHAT, 0, ParseErrorKind::MissingField("NET_RX")))?;
    let net_tx = rows
        .get("NET_TX")
        .cloned()
        .ok_or_else(|| ProbeError::parse(WHAT, 0, ParseErrorKind::MissingField("NET_TX")))?;
    Ok(Softirqs {
        cpus,
        net_rx,
        net_tx,
        rows,
    })
}

impl Softirqs {
    /// NET_RX counts indexed by CPU number (length = highest CPU + 1; absent CPUs 0).
    pub fn net_rx_by_cpu(&self) -> Vec<u64> {
        by_cpu(&self.cpus, &self.net_rx)
    }

    /// NET_TX counts indexed by CPU number (length = highest CPU + 1; absent CPUs 0).
    pub fn net_tx_by_cpu(&self) -> Vec<u64> {
        by_cpu(&self.cpus, &self.net_tx)
    }
}

fn by_cpu(cpus: &[usize], counts: &[u64]) -> Vec<u64> {
    let len = cpus.iter().max().map_or(0, |m| m + 1);
    let mut out = vec![0; len];
    for (cpu, count) in cpus.iter().zip(counts) {
        if let Some(slot) = out.get_mut(*cpu) {
            *slot = *count;
        }
    }
    out
}
