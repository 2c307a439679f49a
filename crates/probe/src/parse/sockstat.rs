//! `/proc/net/sockstat`: socket counts (the numbers behind `ss -s`).

use serde::{Deserialize, Serialize};

use super::parse_u64;
use crate::error::{ParseErrorKind, ProbeError};

const WHAT: &str = "/proc/net/sockstat";

/// Socket counts of this network namespace (gauges, not counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SockStat {
    /// `sockets: used` — all sockets of all families.
    pub sockets_used: u64,
    /// `TCP: inuse` — TCP sockets in a state other than TIME_WAIT/CLOSE (incl. listeners).
    pub tcp_inuse: u64,
    /// `TCP: orphan` — TCP sockets no longer attached to a file descriptor.
    pub tcp_orphan: u64,
    /// `TCP: tw` — sockets in TIME_WAIT (each holds a local port).
    pub tcp_tw: u64,
    /// `TCP: alloc` — allocated TCP sockets.
    pub tcp_alloc: u64,
    /// `TCP: mem` — pages of memory used by TCP buffers (compare with net.ipv4.tcp_mem).
    pub tcp_mem_pages: u64,
    /// `UDP: inuse`.
    pub udp_inuse: u64,
    /// `UDP: mem` — pages.
    pub udp_mem_pages: u64,
}

/// Parses /proc/net/sockstat. The `sockets:` and `TCP:` lines are required; each line
/// is `PROTO: key value key value ...`.
pub fn parse_sockstat(text: &str) -> Result<SockStat, ProbeError> {
    if text.trim().is_empty() {
        return Err(ProbeError::parse(WHAT, 0, ParseErrorKind::Empty));
    }
    let mut out = SockStat::default();
    let (mut seen_sockets, mut seen_tcp) = (false, false);
    for (idx, line) in text.lines().enumerate() {
        let line_no = idx + 1;
        if line.trim().is_empty() {
            continue;
        }
        let (proto, rest) = line.split_once(':').ok_or_else(|| {
            ProbeError::parse(WHAT, line_no, ParseErrorKind::BadLine(line.trim().into()))
        })?;
        let tokens: Vec<&str> = rest.split_whitespace().collect();
        if tokens.is_empty() || !tokens.len().is_multiple_of(2) {
            return Err(ProbeError::parse(
                WHAT,
                line_no,
                ParseErrorKind::BadLine(line.trim().into()),
            ));
        }
        for pair in tokens.chunks_exact(2) {
            let (Some(key), Some(value)) = (pair.first(), pair.get(1)) else {
                continue;
            };
            let value = parse_u64(WHAT, line_no, value)?;
            match (proto.trim(), *key) {
                ("sockets", "used") => {
                    out.sockets_used = value;
                    seen_sockets = true;
                }
                ("TCP", "inuse") => {
                    out.tcp_inuse = value;
                    seen_tcp = true;
                }
                ("TCP", "orphan") => out.tcp_orphan = value,
                ("TCP", "tw") => out.tcp_tw = value,
                ("TCP", "alloc") => out.tcp_alloc = value,
                ("TCP", "mem") => out.tcp_mem_pages = value,
                ("UDP", "inuse") => out.udp_inuse = value,
                ("UDP", "mem") => out.udp_mem_pages = value,
                _ => {}
            }
        }
    }
    if !seen_sockets {
        return Err(ProbeError::parse(
            WHAT,
            0,
            ParseErrorKind::MissingField("sockets: used"),
        ));
    }
    if !seen_tcp {
        return Err(ProbeError::parse(
            WHAT,
            0,
            ParseErrorKind::MissingField("TCP: inuse"),
        ));
    }
    Ok(out)
}
