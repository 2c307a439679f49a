//! A saturated resource as typed evidence. The verdict rules build these from
//! the window's figures; the verdict line's short form and the report's full
//! reason are both written from the same values, never parsed back.

use crate::figures::{
    CpuUsage, WorkerCpu, CPU_SATURATED_PCT, LATE_SEND_RATIO_LIMIT, SCHEDULE_LAG_P99_LIMIT_US,
};

/// Which CPU rule a CPU finding broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CpuRule {
    /// At or above [`CPU_SATURATED_PCT`] busy.
    Busy,
    /// Softirq above usr+nice+sys on a busy CPU.
    SoftirqDominant,
    /// Steal at or above the steal limit.
    Steal,
}

/// One saturated resource and its evidence.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Finding {
    /// A CPU broke `rule`; `workers_pct` is set when xload's pinned workers
    /// used less than half of its task time (another load shares the CPU).
    Cpu {
        usage: CpuUsage,
        rule: CpuRule,
        workers_pct: Option<f64>,
    },
    /// A worker thread used a whole CPU.
    Worker(WorkerCpu),
    /// File descriptors ran out (or nearly): open, soft limit (`u64::MAX` =
    /// unlimited), sockets refused, and the limit that would do.
    FdLimit {
        open: usize,
        soft: u64,
        errors: u64,
        needed: u64,
    },
    /// Connects failed for lack of a local port.
    Ports {
        errors: u64,
        range: (u16, u16),
        available: u32,
        time_wait: u64,
    },
    /// Open loop: the p99 send lag was over its limit.
    ScheduleLag { p99_us: u64 },
    /// Open loop: too many sends were late (a fraction, 0..1).
    LateSends { ratio: f64 },
    /// io_uring completion-queue overflows.
    CqOverflow(u64),
    /// https: the client's CPU was saturated and TLS handshakes took
    /// `share` (0..1) of the process's CPU, `each_us` per handshake.
    TlsHandshakes {
        share: f64,
        each_us: f64,
        per_s: f64,
    },
    /// A listener's accept queue overflowed (host verdict).
    AcceptQueue { overflows: i64, drops: i64 },
}

impl Finding {
    /// The CPU this finding is about, if it is about one.
    pub(crate) fn cpu(&self) -> Option<usize> {
        match self {
            Finding::Cpu { usage, .. } => Some(usage.cpu),
            _ => None,
        }
    }

    /// The short form for the verdict line: `cpu0 99% (sys 61%, softirq 30%)`.
    pub(crate) fn short(&self) -> String {
        match self {
            Finding::Cpu {
                usage: c,
                rule,
                workers_pct,
            } => {
                let mut s = match rule {
                    CpuRule::Busy | CpuRule::SoftirqDominant => format!(
                        "cpu{} {}% ({})",
                        c.cpu,
                        floor(c.busy),
                        components(c, 2).join(", ")
                    ),
                    CpuRule::Steal => format!("cpu{} steal {}%", c.cpu, floor(c.steal)),
                };
                if let Some(ours) = workers_pct {
                    // "cpu1 100%" alone reads as this generator's own load.
                    s.push_str(&format!(" of which xload's workers {}%", floor(*ours)));
                }
                s
            }
            Finding::Worker(w) => format!("worker {} {}%", w.tid, floor(w.busy_pct)),
            Finding::FdLimit {
                open, soft, errors, ..
            } => format!(
                "fd limit ({open} of {} open, {errors} errors)",
                soft_text(*soft)
            ),
            Finding::Ports { errors, .. } => format!("ephemeral ports ({errors} errors)"),
            Finding::ScheduleLag { p99_us } => {
                format!("schedule lag p99 {:.1} ms", *p99_us as f64 / 1000.0)
            }
            Finding::LateSends { ratio } => format!("late sends {:.1}%", ratio * 100.0),
            Finding::CqOverflow(n) => format!("io_uring CQ overflow ({n})"),
            Finding::TlsHandshakes { share, each_us, .. } => format!(
                "TLS handshakes {}% of xload's CPU ({:.0} µs each)",
                floor(share * 100.0),
                each_us
            ),
            Finding::AcceptQueue { overflows, drops } => {
                format!("accept queue (ListenOverflows +{overflows}, ListenDrops +{drops})")
            }
        }
    }

    /// One sentence with the evidence and what to do.
    pub(crate) fn reason(&self) -> String {
        match self {
            Finding::Cpu {
                usage: c,
                rule,
                workers_pct,
            } => {
                let mut s = cpu_reason(c, *rule);
                if let Some(ours) = workers_pct {
                    s.push_str(&format!(
                        "; xload's workers used only {}% of it: other processes or interrupts share this CPU \
                         (stop them or pin xload elsewhere)",
                        floor(*ours)
                    ));
                }
                s
            }
            Finding::Worker(w) => format!(
                "worker thread {} ({}) used {}% of a CPU (usr {}%, sys {}%): its event loop is CPU-bound",
                w.tid,
                w.comm,
                floor(w.busy_pct),
                floor(w.usr_pct),
                floor(w.sys_pct)
            ),
            Finding::FdLimit {
                open,
                soft,
                errors,
                needed,
            } => format!(
                "file descriptors: {open} open of a soft limit of {}, {errors} sockets refused (EMFILE/ENFILE): \
                 ulimit -n {needed}",
                soft_text(*soft)
            ),
            Finding::Ports {
                errors,
                range,
                available,
                time_wait,
            } => format!(
                "ephemeral ports: {errors} connects failed for lack of a local port (EADDRNOTAVAIL); \
                 net.ipv4.ip_local_port_range {}-{} gives {available} and {time_wait} sockets were in TIME_WAIT: \
                 sysctl -w net.ipv4.ip_local_port_range='1024 65000' (tuning/loadgen.toml sets it)",
                range.0, range.1
            ),
            Finding::ScheduleLag { p99_us } => format!(
                "open loop: p99 send lag {:.1} ms behind the intended schedule (limit {} ms): \
                 the client could not keep the rate",
                *p99_us as f64 / 1000.0,
                SCHEDULE_LAG_P99_LIMIT_US / 1000
            ),
            Finding::LateSends { ratio } => format!(
                "open loop: {:.1}% of requests were sent late (limit {:.0}%): the client could not keep the rate",
                ratio * 100.0,
                LATE_SEND_RATIO_LIMIT * 100.0
            ),
            Finding::CqOverflow(n) => format!(
                "io_uring: {n} completion-queue overflows: completions arrived faster than the workers reaped them"
            ),
            Finding::TlsHandshakes {
                share,
                each_us,
                per_s,
            } => format!(
                "TLS handshakes took {}% of xload's CPU in the window ({per_s:.0}/s, {each_us:.0} µs of \
                 rustls computation each): the client's cost is TLS, not HTTP; resume sessions \
                 (--tls-resume) where the service's clients do, keep connections alive, or give the \
                 generator more CPUs",
                floor(share * 100.0)
            ),
            Finding::AcceptQueue { overflows, drops } => format!(
                "accept queue: ListenOverflows +{overflows}, ListenDrops +{drops}: a listener did not accept \
                 fast enough (raise its listen() backlog and net.core.somaxconn, or find what slows accept)"
            ),
        }
    }
}

fn cpu_reason(c: &CpuUsage, rule: CpuRule) -> String {
    match rule {
        CpuRule::Busy => format!(
            "cpu{} {}% busy ({}) — at ≥ {}% it cannot do more work",
            c.cpu,
            floor(c.busy),
            components(c, usize::MAX).join(", "),
            CPU_SATURATED_PCT
        ),
        CpuRule::SoftirqDominant => format!(
            "cpu{}: softirq {}% exceeds usr+sys {}% at {}% busy — packet processing dominates this CPU \
             (spread NET_RX with IRQ affinity or RPS)",
            c.cpu,
            floor(c.softirq),
            floor(c.usr + c.nice + c.sys),
            floor(c.busy)
        ),
        CpuRule::Steal => format!(
            "cpu{}: steal {}% — the hypervisor ran something else while this CPU wanted to run",
            c.cpu,
            floor(c.steal)
        ),
    }
}

fn soft_text(soft: u64) -> String {
    if soft == u64::MAX {
        "unlimited".to_owned()
    } else {
        soft.to_string()
    }
}

/// The non-zero busy components, largest first, as `name N%`.
fn components(c: &CpuUsage, max: usize) -> Vec<String> {
    let mut parts = [
        ("usr", c.usr),
        ("nice", c.nice),
        ("sys", c.sys),
        ("irq", c.irq),
        ("softirq", c.softirq),
    ];
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    parts
        .iter()
        .filter(|(_, v)| floor(*v) >= 1)
        .take(max)
        .map(|(name, v)| format!("{name} {}%", floor(*v)))
        .collect()
}

/// Percent shown in verdicts: floored, so a figure shown as 90% really reached 90%.
pub(crate) fn floor(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        v.floor() as u64
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(cpu: usize, busy: f64, sys: f64, softirq: f64, steal: f64) -> CpuUsage {
        CpuUsage {
            cpu,
            busy,
            sys,
            softirq,
            steal,
            usr: busy - sys - softirq,
            ..Default::default()
        }
    }

    #[test]
    fn a_cpu_finding_names_its_cpu_and_the_foreign_share_in_both_forms() {
        let f = Finding::Cpu {
            usage: cpu(3, 99.5, 61.2, 30.0, 0.0),
            rule: CpuRule::Busy,
            workers_pct: Some(12.7),
        };
        assert_eq!(f.cpu(), Some(3));
        assert_eq!(
            f.short(),
            "cpu3 99% (sys 61%, softirq 30%) of which xload's workers 12%"
        );
        let r = f.reason();
        assert!(
            r.starts_with("cpu3 99% busy (sys 61%, softirq 30%, usr 8%)"),
            "{r}"
        );
        assert!(r.contains("xload's workers used only 12% of it"), "{r}");
        let steal = Finding::Cpu {
            usage: cpu(1, 50.0, 10.0, 0.0, 15.9),
            rule: CpuRule::Steal,
            workers_pct: None,
        };
        assert_eq!(steal.short(), "cpu1 steal 15%");
        assert_eq!(steal.cpu(), Some(1));
    }

    #[test]
    fn other_findings_are_about_no_cpu_and_carry_their_figures() {
        let fd = Finding::FdLimit {
            open: 1000,
            soft: u64::MAX,
            errors: 3,
            needed: 2048,
        };
        assert_eq!(fd.cpu(), None);
        assert_eq!(fd.short(), "fd limit (1000 of unlimited open, 3 errors)");
        assert!(fd.reason().ends_with("ulimit -n 2048"), "{}", fd.reason());
        assert_eq!(
            Finding::ScheduleLag { p99_us: 2_340 }.short(),
            "schedule lag p99 2.3 ms"
        );
        assert_eq!(
            Finding::LateSends { ratio: 0.125 }.short(),
            "late sends 12.5%"
        );
        assert_eq!(Finding::CqOverflow(7).short(), "io_uring CQ overflow (7)");
    }
}
