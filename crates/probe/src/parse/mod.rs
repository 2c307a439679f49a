//! Parsers for /proc text: plain functions over `&str`, no I/O, no panics.
//!
//! Each parser accepts the layouts of older kernels (fewer columns, renamed rows) and
//! rejects truncated or garbled text with a [`ProbeError::Parse`] naming the line.

mod interrupts;
mod limits;
mod netdev;
mod snmp;
mod sockstat;
mod softirqs;
mod stat;
mod sysctl;
mod task;

pub use interrupts::{parse_interrupts, Interrupts, IrqLine};
pub use limits::{parse_limits_nofile, FdLimits};
pub use netdev::{parse_net_dev, parse_procs_running, NetDevDrops};
pub use snmp::{parse_snmp_table, tcp_counters, SnmpRow, TcpCounters};
pub use sockstat::{parse_sockstat, SockStat};
pub use softirqs::{parse_softirqs, Softirqs};
pub use stat::{parse_stat, CpuTimes};
pub use sysctl::{parse_port_range, parse_reserved_ports, parse_sysctl_u64};
pub use task::{parse_task_stat, ThreadTimes};

use crate::error::{ParseErrorKind, ProbeError};

/// Parses one unsigned decimal token.
fn parse_u64(what: &'static str, line: usize, token: &str) -> Result<u64, ProbeError> {
    token
        .parse::<u64>()
        .map_err(|_| ProbeError::parse(what, line, ParseErrorKind::BadNumber(token.to_owned())))
}

/// Parses one signed decimal token.
fn parse_i64(what: &'static str, line: usize, token: &str) -> Result<i64, ProbeError> {
    token
        .parse::<i64>()
        .map_err(|_| ProbeError::parse(what, line, ParseErrorKind::BadNumber(token.to_owned())))
}

/// Parses a `CPU<n>` column name from a /proc/softirqs or /proc/interrupts header.
fn parse_cpu_column(what: &'static str, line: usize, token: &str) -> Result<usize, ProbeError> {
    let digits = token
        .strip_prefix("CPU")
        .ok_or_else(|| ProbeError::parse(what, line, ParseErrorKind::BadHeader))?;
    digits
        .parse::<usize>()
        .map_err(|_| ProbeError::parse(what, line, ParseErrorKind::BadHeader))
}

/// Parses the `CPU0 CPU1 ...` header line shared by /proc/softirqs and /proc/interrupts.
fn parse_cpu_header(what: &'static str, header: &str) -> Result<Vec<usize>, ProbeError> {
    let cpus = header
        .split_whitespace()
        .map(|t| parse_cpu_column(what, 1, t))
        .collect::<Result<Vec<_>, _>>()?;
    if cpus.is_empty() {
        return Err(ProbeError::parse(what, 1, ParseErrorKind::BadHeader));
    }
    Ok(cpus)
}
