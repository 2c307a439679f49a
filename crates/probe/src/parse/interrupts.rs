//! `/proc/interrupts`: interrupt counts per IRQ per CPU, with device/queue names.

use serde::{Deserialize, Serialize};

use super::parse_cpu_header;
use crate::error::{ParseErrorKind, ProbeError};

const WHAT: &str = "/proc/interrupts";

/// One line of /proc/interrupts.
///
/// Device lines (`41:`) carry one count per header column, then the chip, the hardware
/// IRQ number with its trigger, and the handler names — e.g.
/// `IR-PCI-MSI 524288-edge      eth0-TxRx-0` (kernels ≥ 3.19),
/// `PCI-MSI-edge      eth0-TxRx-0` (older: chip and trigger in one token, no hwirq) or
/// `GICv3  27 Level     arch_timer` (arm64). Summary lines (`LOC:`, `NMI:`, `RES:` ...)
/// carry one count per column and a description; `ERR:` and `MIS:` carry a single
/// global count.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqLine {
    /// The label before the colon: an IRQ number (`"41"`) or a summary name (`"LOC"`).
    pub irq: String,
    /// Counts per header column (one value for `ERR`/`MIS`).
    pub counts: Vec<u64>,
    /// Interrupt chip (device lines only), e.g. `IR-PCI-MSI`, `IO-APIC`.
    pub chip: Option<String>,
    /// Hardware IRQ number with trigger, e.g. `524288-edge`, `27 Level` (device lines on
    /// kernels that print it).
    pub hwirq: Option<String>,
    /// Handler names (device/queue, e.g. `eth0-TxRx-0`) or the summary description.
    pub name: String,
}

impl IrqLine {
    /// Sum over CPUs.
    pub fn total(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, c| a.saturating_add(*c))
    }

    /// True for numbered device IRQs, false for architecture summary lines.
    pub fn is_device(&self) -> bool {
        !self.irq.is_empty() && self.irq.bytes().all(|b| b.is_ascii_digit())
    }
}

/// /proc/interrupts as parsed: the header's CPU numbers (online CPUs) and the lines.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interrupts {
    /// CPU number of each count column.
    pub cpus: Vec<usize>,
    /// Every line, in file order.
    pub lines: Vec<IrqLine>,
}

/// Parses /proc/interrupts. Device lines must carry one count per header column;
/// summary lines one per column or a single global count.
pub fn parse_interrupts(text: &str) -> Result<Interrupts, ProbeError> {
    let mut lines = text.lines().enumerate();
    let Some((_, header)) = lines.find(|(_, l)| !l.trim().is_empty()) else {
        return Err(ProbeError::parse(WHAT, 0, ParseErrorKind::Empty));
    };
    let cpus = parse_cpu_header(WHAT, header)?;
    let ncpus = cpus.len();
    let mut out = Vec::new();
    for (idx, line) in lines {
        let line_no = idx + 1;
        if line.trim().is_empty() {
            continue;
        }
        let (label, rest) = line.split_once(':').ok_or_else(|| {
            ProbeError::parse(WHAT, line_no, ParseErrorKind::BadLine(line.trim().into()))
        })?;
        let irq = label.trim();
        if irq.is_empty() || irq.contains(char::is_whitespace) {
            return Err(ProbeError::parse(
                WHAT,
                line_no,
                ParseErrorKind::BadLine(line.trim().into()),
            ));
        }
        let tokens: Vec<&str> = rest.split_whitespace().collect();
        let counts: Vec<u64> = tokens
            .iter()
            .take(ncpus)
            .map_while(|t| t.parse::<u64>().ok())
            .collect();
        let is_device = irq.bytes().all(|b| b.is_ascii_digit());
        let complete = counts.len() == ncpus || (!is_device && counts.len() == 1);
        if !complete {
            return Err(ProbeError::parse(
                WHAT,
                line_no,
                ParseErrorKind::TooFewColumns {
                    expected: ncpus,
                    found: counts.len(),
                },
            ));
        }
        let desc = tokens.get(counts.len()..).unwrap_or(&[]);
        let (chip, hwirq, name) = if is_device {
            split_device_desc(desc)
        } else {
            (None, None, desc.join(" "))
        };
        out.push(IrqLine {
            irq: irq.to_owned(),
            counts,
            chip,
            hwirq,
            name,
        });
    }
    Ok(Interrupts { cpus, lines: out })
}

/// Splits `chip [hwirq[-trigger] [Level|Edge]] names...` of a device line.
fn split_device_desc(desc: &[&str]) -> (Option<String>, Option<String>, String) {
    let Some((chip, rest)) = desc.split_first() else {
        return (None, None, String::new());
    };
    let mut rest = rest;
    let mut hwirq = None;
    // An IRQ without a domain prints blanks for the hwirq, leaving `-edge` on its own.
    if let Some((first, after)) = rest.split_first() {
        if first.starts_with('-') {
            rest = after;
        }
    }
    if let Some((first, after)) = rest.split_first() {
        if first.starts_with(|c: char| c.is_ascii_digit()) {
            let mut hw = (*first).to_owned();
            rest = after;
            // arm64 with GENERIC_IRQ_SHOW_LEVEL prints the trigger as its own word.
            if let Some((trigger, after)) = rest.split_first() {
                if *trigger == "Level" || *trigger == "Edge" {
                    hw.push(' ');
                    hw.push_str(trigger);
                    rest = after;
                }
            }
            hwirq = Some(hw);
        }
    }
    (Some((*chip).to_owned()), hwirq, rest.join(" "))
}
