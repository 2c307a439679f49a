//! `/proc/net/dev`: per-interface packet drops of this network namespace.

use serde::{Deserialize, Serialize};

use super::parse_u64;
use crate::error::{ParseErrorKind, ProbeError};

const WHAT: &str = "/proc/net/dev";

/// The drop counters of one interface (cumulative since it came up).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetDevDrops {
    /// Interface name (`eth0`).
    pub dev: String,
    /// Received packets: `drop` column (rx_dropped + rx_missed_errors: the
    /// NIC's ring or the stack's backlog had no room).
    pub rx_dropped: u64,
    /// Receive FIFO overruns (rx_fifo_errors).
    pub rx_fifo: u64,
    /// Transmitted packets: `drop` column (tx_dropped).
    pub tx_dropped: u64,
}

/// Parses /proc/net/dev: two header lines, then `name: 8 receive columns 8
/// transmit columns`.
pub fn parse_net_dev(text: &str) -> Result<Vec<NetDevDrops>, ProbeError> {
    if text.trim().is_empty() {
        return Err(ProbeError::parse(WHAT, 0, ParseErrorKind::Empty));
    }
    let mut out = Vec::new();
    for (idx, line) in text.lines().enumerate().skip(2) {
        let line_no = idx + 1;
        let Some((name, rest)) = line.split_once(':') else {
            if line.trim().is_empty() {
                continue;
            }
            return Err(ProbeError::parse(
                WHAT,
                line_no,
                ParseErrorKind::BadLine(line.trim().into()),
            ));
        };
        let cols: Vec<&str> = rest.split_whitespace().collect();
        if cols.len() < 12 {
            return Err(ProbeError::parse(
                WHAT,
                line_no,
                ParseErrorKind::TooFewColumns {
                    expected: 12,
                    found: cols.len(),
                },
            ));
        }
        out.push(NetDevDrops {
            dev: name.trim().to_string(),
            rx_dropped: parse_u64(WHAT, line_no, cols[3])?,
            rx_fifo: parse_u64(WHAT, line_no, cols[4])?,
            tx_dropped: parse_u64(WHAT, line_no, cols[11])?,
        });
    }
    Ok(out)
}

/// The `procs_running` line of /proc/stat: tasks runnable right now (the
/// run queue, all CPUs); None on a kernel without it.
pub fn parse_procs_running(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("procs_running "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: &str = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  123456     789    0    0    0     0          0         0   123456     789    0    0    0     0       0          0
  eth0: 9999999   88888    1   17    2     0          0         5  7777777   66666    0    3    0     0       0          0
";

    #[test]
    fn net_dev_gives_rx_and_tx_drops_per_interface() {
        let d = parse_net_dev(DEV).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(
            d[1],
            NetDevDrops {
                dev: "eth0".into(),
                rx_dropped: 17,
                rx_fifo: 2,
                tx_dropped: 3
            }
        );
    }

    #[test]
    fn net_dev_rejects_truncated_and_garbled_lines() {
        let cut = DEV.rsplit_once("66666").unwrap().0;
        assert!(parse_net_dev(cut).is_err());
        assert!(parse_net_dev(&DEV.replace("17", "x7")).is_err());
        assert!(parse_net_dev("").is_err());
    }

    #[test]
    fn procs_running_is_read_from_proc_stat() {
        let stat = "cpu  1 2 3 4\ncpu0 1 2 3 4\nprocs_running 7\nprocs_blocked 0\n";
        assert_eq!(parse_procs_running(stat), Some(7));
        assert_eq!(parse_procs_running("cpu0 1 2 3 4\n"), None);
    }
}
