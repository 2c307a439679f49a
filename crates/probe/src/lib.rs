//! xload-probe: what the host did during a load test, and whether the load generator
//! (rather than the server) was the limit.
//!
//! The probe reads /proc directly — /proc/stat, /proc/softirqs, /proc/interrupts,
//! /proc/net/{snmp,netstat,sockstat}, /proc/self/{stat,task,fd,limits} and a few sysctls —
//! and never runs an external command, so it can sample every second of a run at
//! negligible cost and works the same in a minimal container or network namespace.
//!
//! Main design choice: every parser is a plain function from `&str` to a typed value or
//! a [`ProbeError`] naming the file, line and cause ([`parse`]); the [`Sampler`] only
//! reads files (from `/proc` or from a fixture tree with the same layout) and the
//! verdict ([`summarize`], [`summarize_host`]) is a pure function of two [`Sample`]s.
//! So layouts from 1 to 96+ CPUs and from old kernels are unit-tested on captured text,
//! and garbled or truncated input is an error, never a panic.
//!
//! Used by `xload` (preflight warnings, the `client` section and the one-line verdict of
//! every report) and by `xtune observe` ([`observe`]).

mod budget;
mod error;
mod figures;
mod finding;
pub mod observe;
pub mod parse;
mod placement;
mod sampler;
mod verdict;
pub mod watch;

pub use budget::{
    preflight, preflight_sources, read_budget, read_budget_from, Budget, FD_SLACK,
    SUGGESTED_PORT_RANGE,
};
pub use error::{ParseErrorKind, ProbeError};
pub use figures::{
    CpuUsage, WorkerCpu, CPU_SATURATED_PCT, FD_NEAR_LIMIT_FRACTION, LATE_SEND_RATIO_LIMIT,
    SCHEDULE_LAG_P99_LIMIT_US, SOFTIRQ_DOMINANT_MIN_BUSY_PCT, STEAL_PCT, TIME_WAIT_S, TOP_IRQS,
};
pub use parse::{CpuTimes, IrqLine, NetDevDrops, SockStat, Softirqs, TcpCounters, ThreadTimes};
pub use placement::Placement;
pub use sampler::{ticks_per_s, Sample, Sampler};
pub use verdict::{
    cpu_usage, cpu_usage_over, irq_deltas, net_softirq_deltas, sample_cpu_usage, summarize,
    summarize_host, tcp_deltas, ClientSummary, CpuShare, HostSummary, IrqDelta, VerdictInput,
};
