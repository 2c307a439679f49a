//! The host's budget for connections (fd limit, ephemeral ports, listen queues) and the
//! preflight warnings that compare a planned run against it.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::ProbeError;
use crate::parse::{parse_limits_nofile, parse_port_range, parse_reserved_ports, parse_sysctl_u64};

/// File descriptors a run needs beyond one per connection: stdio, the io_uring or epoll
/// instance per worker, timers, the report file.
pub const FD_SLACK: u64 = 64;

/// Port range the preflight suggests when the current one is too small.
pub const SUGGESTED_PORT_RANGE: (u16, u16) = (1024, 65000);

/// What this host and process allow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// RLIMIT_NOFILE soft limit (`u64::MAX` = unlimited).
    pub fd_soft: u64,
    /// RLIMIT_NOFILE hard limit (`u64::MAX` = unlimited).
    pub fd_hard: u64,
    /// net.ipv4.ip_local_port_range, inclusive.
    pub port_range: (u16, u16),
    /// Ports of net.ipv4.ip_local_reserved_ports that fall inside `port_range`.
    pub reserved_ports_in_range: u32,
    /// net.core.somaxconn: the cap on any listen() backlog (accept queue).
    pub somaxconn: u64,
    /// net.ipv4.tcp_max_syn_backlog: SYN queue length per listener.
    pub tcp_max_syn_backlog: u64,
    /// net.ipv4.tcp_tw_reuse: 0 off, 1 on, 2 loopback only.
    pub tw_reuse: u8,
}

impl Budget {
    /// Local ports connect() can pick toward one destination address:port.
    pub fn ports_available(&self) -> u32 {
        let (low, high) = self.port_range;
        (u32::from(high.saturating_sub(low)) + 1).saturating_sub(self.reserved_ports_in_range)
    }

    /// Whether TIME_WAIT sockets may be reused for new outgoing connections to this
    /// kind of target.
    pub fn tw_reuse_applies(&self, target_is_loopback: bool) -> bool {
        self.tw_reuse == 1 || (self.tw_reuse == 2 && target_is_loopback)
    }
}

/// Reads the budget of this process and its network namespace from /proc.
pub fn read_budget() -> Result<Budget, ProbeError> {
    read_budget_from(Path::new("/proc"))
}

/// Reads the budget from a proc root (`self/limits`, `sys/net/...`).
pub fn read_budget_from(root: &Path) -> Result<Budget, ProbeError> {
    let read = |rel: &str| -> Result<String, ProbeError> {
        let path = root.join(rel);
        fs::read_to_string(&path).map_err(|source| ProbeError::Io { path, source })
    };
    let fd = parse_limits_nofile(&read("self/limits")?)?;
    let port_range = parse_port_range(&read("sys/net/ipv4/ip_local_port_range")?)?;
    // Absent on kernels before 2.6.35: nothing reserved.
    let reserved_ports_in_range =
        match fs::read_to_string(root.join("sys/net/ipv4/ip_local_reserved_ports")) {
            Ok(text) => parse_reserved_ports(&text, port_range)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(source) => {
                return Err(ProbeError::Io {
                    path: root.join("sys/net/ipv4/ip_local_reserved_ports"),
                    source,
                })
            }
        };
    let somaxconn = parse_sysctl_u64("net.core.somaxconn", &read("sys/net/core/somaxconn")?)?;
    let tcp_max_syn_backlog = parse_sysctl_u64(
        "net.ipv4.tcp_max_syn_backlog",
        &read("sys/net/ipv4/tcp_max_syn_backlog")?,
    )?;
    let tw_reuse = parse_sysctl_u64("net.ipv4.tcp_tw_reuse", &read("sys/net/ipv4/tcp_tw_reuse")?)?;
    let tw_reuse = u8::try_from(tw_reuse).map_err(|_| ProbeError::Parse {
        what: "net.ipv4.tcp_tw_reuse",
        line: 1,
        kind: crate::error::ParseErrorKind::OutOfRange(tw_reuse.to_string()),
    })?;
    Ok(Budget {
        fd_soft: fd.soft,
        fd_hard: fd.hard,
        port_range,
        reserved_ports_in_range,
        somaxconn,
        tcp_max_syn_backlog,
        tw_reuse,
    })
}

/// Warnings (never failures) for a run of `connections` against this budget, each with
/// the exact command that fixes it. somaxconn and the SYN backlog only matter when the
/// target listens on this host (loopback).
pub fn preflight(connections: usize, target_is_loopback: bool, budget: &Budget) -> Vec<String> {
    preflight_sources(connections, 1, target_is_loopback, budget)
}

/// As [`preflight`], for connections spread over `sources` local addresses
/// (`--source`): each has its own ephemeral ports toward the target.
pub fn preflight_sources(
    connections: usize,
    sources: usize,
    target_is_loopback: bool,
    budget: &Budget,
) -> Vec<String> {
    let mut warnings = Vec::new();
    let c = connections as u64;
    let sources = sources.max(1) as u64;
    let per_source = c.div_ceil(sources);

    let ports = u64::from(budget.ports_available());
    if per_source > ports && sources > 1 {
        warnings.push(format!(
            "-c {c} over {sources} source addresses needs {per_source} local ports per address but \
             net.ipv4.ip_local_port_range gives {ports}: give more --source addresses (or widen the range)"
        ));
    } else if sources == 1 && c > ports {
        let reserved = match budget.reserved_ports_in_range {
            0 => String::new(),
            n => format!(" ({n} of them reserved)"),
        };
        // The usual range first; the whole non-privileged range only when needed.
        let size = |(low, high): (u16, u16)| u64::from(high.saturating_sub(low)) + 1;
        let current = size(budget.port_range);
        let fix = [SUGGESTED_PORT_RANGE, (1024, 65535)]
            .into_iter()
            .find(|r| c <= size(*r) && size(*r) > current);
        match fix {
            Some((low, high)) => warnings.push(format!(
                "-c {c} needs {c} local ports but net.ipv4.ip_local_port_range gives {ports}{reserved}: \
                 sysctl -w net.ipv4.ip_local_port_range='{low} {high}' (tuning/loadgen.toml sets it)"
            )),
            None => warnings.push(format!(
                "-c {c} needs {c} local ports toward one address:port but net.ipv4.ip_local_port_range gives \
                 {ports}{reserved} and no range gives more than 64512: spread the connections over several \
                 target addresses or ports, or over several source addresses (--source 127.0.0.2-127.0.0.9 \
                 toward a local target)"
            )),
        }
    }

    if target_is_loopback {
        let want = c.next_power_of_two().max(4096);
        if c > budget.somaxconn {
            warnings.push(format!(
                "-c {c} may overflow the local server's accept queue: net.core.somaxconn is {}: \
                 sysctl -w net.core.somaxconn={want} (tuning/loopback-lab.toml sets it; the server's \
                 listen() backlog must be as large)",
                budget.somaxconn
            ));
        }
        if c > budget.tcp_max_syn_backlog {
            warnings.push(format!(
                "-c {c} may overflow the local server's SYN queue: net.ipv4.tcp_max_syn_backlog is {}: \
                 sysctl -w net.ipv4.tcp_max_syn_backlog={want} (tuning/loopback-lab.toml sets it)",
                budget.tcp_max_syn_backlog
            ));
        }
    }

    let needed = c.saturating_add(FD_SLACK);
    if budget.fd_soft < needed {
        if budget.fd_hard >= needed {
            warnings.push(format!(
                "-c {c} needs about {needed} file descriptors but the soft limit is {}: \
                 ulimit -n {needed} (the hard limit allows up to {})",
                budget.fd_soft,
                limit_text(budget.fd_hard)
            ));
        } else {
            warnings.push(format!(
                "-c {c} needs about {needed} file descriptors but the hard limit is {}: as root, \
                 ulimit -Hn {needed} && ulimit -n {needed} (LimitNOFILE={needed} for a systemd unit, \
                 nofile in /etc/security/limits.conf; above 1048576 also sysctl -w fs.nr_open={needed})",
                budget.fd_hard
            ));
        }
    }
    warnings
}

fn limit_text(limit: u64) -> String {
    if limit == u64::MAX {
        "unlimited".to_owned()
    } else {
        limit.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> Budget {
        Budget {
            fd_soft: 200_000,
            fd_hard: 200_000,
            port_range: (32768, 60999),
            reserved_ports_in_range: 0,
            somaxconn: 200_000,
            tcp_max_syn_backlog: 200_000,
            tw_reuse: 2,
        }
    }

    #[test]
    fn source_addresses_each_bring_their_own_ports() {
        let b = budget();
        // 100k toward one address: no port range is wide enough.
        let w = preflight_sources(100_000, 1, true, &b);
        assert!(w[0].contains("--source 127.0.0.2-127.0.0.9"), "{w:?}");
        // Over four sources: 25k each fits the 28k of the range.
        assert!(preflight_sources(100_000, 4, true, &b).is_empty());
        // Over three: 33,334 each does not.
        let w = preflight_sources(100_000, 3, true, &b);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("needs 33334 local ports per address"),
            "{w:?}"
        );
    }
}
