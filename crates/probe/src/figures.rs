//! The figures the verdict rules read (a CPU's and a worker thread's use
//! over the window) and the limits they judge them by. Its own module so
//! that the rules (verdict) and their evidence (finding) both use it
//! without using each other.

use serde::{Deserialize, Serialize};

/// A CPU at or above this busy percentage (usr+nice+sys+irq+softirq) is saturated.
pub const CPU_SATURATED_PCT: f64 = 90.0;
/// Fewer /proc CPU ticks than this in the window: no CPU verdict (at
/// USER_HZ 100, 0.2 s; one tick is then 5% of a CPU).
pub(crate) const MIN_CPU_TICKS: f64 = 20.0;
/// Softirq dominating a CPU counts only when the CPU is at least this busy.
pub const SOFTIRQ_DOMINANT_MIN_BUSY_PCT: f64 = 70.0;
/// Steal at or above this percentage means the hypervisor took the CPU away.
pub const STEAL_PCT: f64 = 10.0;
/// Open fds at or above this fraction of the soft limit count as exhausted.
pub const FD_NEAR_LIMIT_FRACTION: f64 = 0.9;
/// Open loop: p99 schedule lag above this means the client fell behind its schedule.
pub const SCHEDULE_LAG_P99_LIMIT_US: u64 = 1_000;
/// Open loop: a larger fraction of late sends means the client fell behind.
pub const LATE_SEND_RATIO_LIMIT: f64 = 0.01;
/// Share of the client's CPU in TLS handshakes from which a saturated
/// client's verdict names TLS as its cost (and a note says it below that,
/// from [`TLS_NOTE_SHARE`]).
pub(crate) const TLS_DOMINANT_SHARE: f64 = 0.5;
pub(crate) const TLS_NOTE_SHARE: f64 = 0.2;
/// Fewer late sends than this (a scheduling hiccup or two in a short, slow
/// run) are no verdict on the client, whatever their share.
pub(crate) const LATE_SENDS_MIN: u64 = 5;
/// Seconds a closed connection holds its local port in TIME_WAIT (Linux TCP_TIMEWAIT_LEN).
pub const TIME_WAIT_S: f64 = 60.0;
/// How many IRQs the summaries list, busiest first.
pub const TOP_IRQS: usize = 5;

/// One CPU's time over a window, in percent of the ticks it accounted (the eight
/// fields sum to 100; guest time is inside usr/nice, as the kernel counts it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    /// CPU number.
    pub cpu: usize,
    /// User mode, %.
    pub usr: f64,
    /// Niced user mode, %.
    pub nice: f64,
    /// Kernel mode, %.
    pub sys: f64,
    /// Hard interrupts, %.
    pub irq: f64,
    /// Soft interrupts, %.
    pub softirq: f64,
    /// Stolen by the hypervisor, %.
    pub steal: f64,
    /// Idle with I/O outstanding, %.
    pub iowait: f64,
    /// Idle, %.
    pub idle: f64,
    /// usr + nice + sys + irq + softirq, %.
    pub busy: f64,
    /// Clock ticks this CPU accounted in the window (the 100% base).
    pub ticks: u64,
}

/// CPU use of one worker thread over the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerCpu {
    /// Thread id.
    pub tid: i32,
    /// Thread name.
    pub comm: String,
    /// CPU it last ran on.
    pub cpu: usize,
    /// User time, % of one CPU over the window.
    pub usr_pct: f64,
    /// Kernel time, % of one CPU over the window.
    pub sys_pct: f64,
    /// usr + sys, % of one CPU.
    pub busy_pct: f64,
}
