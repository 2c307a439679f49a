//! Window figures (per-CPU usage, worker CPU, softirq/IRQ/TCP deltas) between two
//! samples, and the saturation verdict built from them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::budget::{Budget, FD_SLACK};
use crate::figures::{
    CpuUsage, WorkerCpu, CPU_SATURATED_PCT, FD_NEAR_LIMIT_FRACTION, LATE_SENDS_MIN,
    LATE_SEND_RATIO_LIMIT, MIN_CPU_TICKS, SCHEDULE_LAG_P99_LIMIT_US, SOFTIRQ_DOMINANT_MIN_BUSY_PCT,
    STEAL_PCT, TIME_WAIT_S, TLS_DOMINANT_SHARE, TLS_NOTE_SHARE, TOP_IRQS,
};
use crate::finding::{floor, CpuRule, Finding};
use crate::parse::{CpuTimes, IrqLine, SockStat, Softirqs, TcpCounters};
use crate::sampler::Sample;

/// Per-CPU usage between two /proc/stat readings, matched by CPU number. CPUs that
/// accounted no ticks in the window (offline, or a window shorter than a tick) are left
/// out. Counters that went backwards (iowait can) count as 0. The base is the ticks
/// the CPU accounted; [`cpu_usage_over`] takes the window's own length instead.
pub fn cpu_usage(start: &[CpuTimes], end: &[CpuTimes]) -> Vec<CpuUsage> {
    cpu_usage_over(start, end, None)
}

/// Per-CPU usage between two samples, over the time that passed between them.
pub fn sample_cpu_usage(start: &Sample, end: &Sample) -> Vec<CpuUsage> {
    let wall_s = end.at.saturating_duration_since(start.at).as_secs_f64();
    cpu_usage_over(
        &start.cpus,
        &end.cpus,
        Some(wall_s * end.ticks_per_s.max(1) as f64),
    )
}

/// [`cpu_usage`] over a window of `wall_ticks` clock ticks, when known.
///
/// On a tickless kernel /proc/stat's idle and iowait are measured exactly (the
/// time between entering and leaving idle), but user, system and softirq are
/// sampled by the scheduler tick, which on a CPU that sleeps and wakes every
/// few microseconds lands unevenly: the ticks miss or add busy time. On a
/// 2-vCPU VM a thread busy 20 µs of every 70 µs (27.9% by its own CPU time)
/// showed 16% busy by ticks and 27.8% by the window less idle; an open loop
/// spinning on two CPUs for 2 s showed 3.9 s of busy ticks. So with the
/// window's length known, busy is the window less idle, iowait and steal,
/// split between usr, nice, sys, irq and softirq in their ticks' proportions.
/// Steal that hit the CPU while it slept (a halted vCPU woken late, common when
/// it sleeps and wakes often) is also inside the idle time, so busy lies
/// between the window less idle, iowait and steal and the window less idle
/// and iowait: the busy ticks are taken, kept within those bounds, and steal
/// is shown as what the window leaves for it. Under heavy steal busy can still
/// read low; the verdict names steal, and raises a CPU to what the workers
/// pinned to it used. When the counters disagree with the window (samples not
/// read when their instants say, a CPU offline for part of it), the ticks
/// counted are the base, as in [`cpu_usage`].
pub fn cpu_usage_over(
    start: &[CpuTimes],
    end: &[CpuTimes],
    wall_ticks: Option<f64>,
) -> Vec<CpuUsage> {
    let mut out = Vec::with_capacity(end.len());
    for e in end {
        let Some(s) = start.iter().find(|s| s.cpu == e.cpu) else {
            continue;
        };
        let d = |a: u64, b: u64| b.saturating_sub(a) as f64;
        let usr = d(s.user, e.user);
        let nice = d(s.nice, e.nice);
        let sys = d(s.system, e.system);
        let idle = d(s.idle, e.idle);
        let iowait = d(s.iowait, e.iowait);
        let irq = d(s.irq, e.irq);
        let softirq = d(s.softirq, e.softirq);
        let steal = d(s.steal, e.steal);
        let busy_ticks = usr + nice + sys + irq + softirq;
        let counted = busy_ticks + idle + iowait + steal;
        if counted == 0.0 {
            continue;
        }
        // The window, when the counters agree with it: a sample pair read at
        // other times than `wall_ticks` says (fixtures), or a CPU offline for
        // part of the window, falls back to the ticks counted.
        let window = wall_ticks.filter(|&w| {
            w >= 1.0
                && counted >= 0.5 * w
                && counted <= 2.0 * w + 2.0
                && idle + iowait <= 1.1 * w + 1.0
        });
        let (base, busy, steal) = match window {
            Some(w) => {
                // At least the window less idle, iowait and steal; at most the
                // window less idle and iowait (steal may be inside idle); the
                // busy ticks themselves (each one tick of busy time) where
                // they fall between.
                let lower = (w - idle - iowait - steal).max(0.0);
                let upper = (w - idle - iowait).max(0.0);
                let busy = busy_ticks.min(upper).max(lower);
                // Steal shown is what the window leaves for it: steal inside
                // idle is already counted as idle.
                let base = w.max(busy + idle + iowait);
                (base, busy, steal.min(base - busy - idle - iowait).max(0.0))
            }
            None => (counted, busy_ticks, steal),
        };
        // Busy time split in the ticks' proportions; when no tick saw it
        // (brief wake-ups: mostly the kernel's), it counts as sys.
        let share = |v: f64, is_sys: bool| {
            if busy_ticks > 0.0 {
                v * busy / busy_ticks
            } else if is_sys {
                busy
            } else {
                0.0
            }
        };
        let pct = |v: f64| round1(v * 100.0 / base);
        out.push(CpuUsage {
            cpu: e.cpu,
            usr: pct(share(usr, false)),
            nice: pct(share(nice, false)),
            sys: pct(share(sys, true)),
            irq: pct(share(irq, false)),
            softirq: pct(share(softirq, false)),
            steal: pct(steal),
            iowait: pct(iowait),
            idle: pct(idle),
            busy: pct(busy),
            ticks: base.round() as u64,
        });
    }
    out
}

/// Interrupts of one IRQ line over a window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqDelta {
    /// IRQ number or summary label (`LOC`, `RES`, ...).
    pub irq: String,
    /// Device/queue name or description.
    pub name: String,
    /// Interrupts in the window, all CPUs.
    pub total: u64,
    /// Interrupts per header column (empty when the online CPUs changed in the window).
    pub per_cpu: Vec<u64>,
}

impl IrqDelta {
    /// True for numbered device IRQs (NIC queues, disks), false for summary lines.
    pub fn is_device(&self) -> bool {
        !self.irq.is_empty() && self.irq.bytes().all(|b| b.is_ascii_digit())
    }
}

/// IRQ lines that fired in the window, busiest first.
pub fn irq_deltas(
    start: &[IrqLine],
    start_cpus: &[usize],
    end: &[IrqLine],
    end_cpus: &[usize],
) -> Vec<IrqDelta> {
    let same_columns = start_cpus == end_cpus;
    let mut out: Vec<IrqDelta> = end
        .iter()
        .map(|e| {
            let s = start.iter().find(|s| s.irq == e.irq);
            let total = e.total().saturating_sub(s.map_or(0, IrqLine::total));
            let per_cpu = match s {
                Some(s) if same_columns && s.counts.len() == e.counts.len() => e
                    .counts
                    .iter()
                    .zip(&s.counts)
                    .map(|(b, a)| b.saturating_sub(*a))
                    .collect(),
                None if same_columns => e.counts.clone(),
                _ => Vec::new(),
            };
            IrqDelta {
                irq: e.irq.clone(),
                name: e.name.clone(),
                total,
                per_cpu,
            }
        })
        .filter(|d| d.total > 0)
        .collect();
    out.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.irq.cmp(&b.irq)));
    out
}

/// Counter deltas by kernel name, for counters both samples have.
pub fn tcp_deltas(start: &TcpCounters, end: &TcpCounters) -> BTreeMap<String, i64> {
    start
        .counters()
        .iter()
        .zip(end.counters().iter())
        .filter_map(|((name, s), (_, e))| {
            let (s, e) = ((*s)?, (*e)?);
            Some((
                (*name).to_owned(),
                i128_to_i64(i128::from(e) - i128::from(s)),
            ))
        })
        .collect()
}

/// Softirq count deltas per CPU number: (NET_RX, NET_TX).
pub fn net_softirq_deltas(start: &Softirqs, end: &Softirqs) -> (Vec<u64>, Vec<u64>) {
    let sub = |a: Vec<u64>, b: Vec<u64>| -> Vec<u64> {
        b.iter()
            .enumerate()
            .map(|(i, v)| v.saturating_sub(a.get(i).copied().unwrap_or(0)))
            .collect()
    };
    (
        sub(start.net_rx_by_cpu(), end.net_rx_by_cpu()),
        sub(start.net_tx_by_cpu(), end.net_tx_by_cpu()),
    )
}

/// What the run itself knows that /proc does not.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VerdictInput {
    /// CPUs the workers were pinned to, or all CPUs they were allowed on. Empty = all.
    pub generator_cpus: Vec<usize>,
    /// Thread ids of the workers.
    pub worker_tids: Vec<i32>,
    /// Unpinned workers: the clock ticks they used on each CPU, sampled over
    /// the window ([`crate::Placement`]). Their CPUs are then the ones
    /// judged, not every CPU they were allowed on. None: not sampled.
    pub worker_cpu_ticks: Option<BTreeMap<usize, u64>>,
    /// Each worker was pinned to one CPU: its CPU time was spent on that CPU,
    /// whose busy share is then at least what the workers on it used.
    pub workers_pinned: bool,
    /// Connections the run used.
    pub connections: usize,
    /// New connections per second when keep-alive is off (each leaves a TIME_WAIT).
    pub no_keepalive_conn_per_s: Option<f64>,
    /// Open loop: p99 of (actual send − intended send), µs.
    pub schedule_lag_p99_us: Option<u64>,
    /// Open loop: fraction of sends later than their slot allows (0..1),
    /// leaving out those that waited for a free connection.
    pub late_send_ratio: Option<f64>,
    /// Open loop: how many sends were late, leaving out those that waited for
    /// a free connection (a handful is a hiccup, not a verdict).
    pub late_sends: Option<u64>,
    /// Open loop: fraction of sends late because every connection was busy
    /// when they came due (0..1): the server's pace, not this client's.
    pub late_waiting_ratio: Option<f64>,
    /// Open loop: of those, the fraction of sends intended once connections
    /// were free again that waited behind the backlog, drained at the 2×
    /// catch-up limit (0..1).
    pub late_catch_up_ratio: Option<f64>,
    /// io_uring completion-queue overflows.
    pub cq_overflows: u64,
    /// Socket/connect failures for lack of descriptors (EMFILE, ENFILE).
    pub fd_errors: u64,
    /// connect() failures for lack of a local port (EADDRNOTAVAIL).
    pub port_errors: u64,
    /// Whether the target listens on this host (decides whether tcp_tw_reuse=2 applies).
    pub target_is_loopback: bool,
    /// https: handshakes completed in the window, and the seconds the TLS
    /// library's handshake computation took over them (0 over plain http).
    pub tls_handshakes: u64,
    pub tls_handshake_cpu_s: f64,
}

/// The `client` section of a report: what the generator host did during the measured
/// window and whether it, rather than the server, was the limit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientSummary {
    /// Length of the window, seconds.
    pub window_s: f64,
    /// CPU time (user + sys) this process used in the window, seconds.
    pub cpu_s: f64,
    /// Per worker thread.
    pub workers: Vec<WorkerCpu>,
    /// The CPUs the verdict judged.
    pub generator_cpus: Vec<usize>,
    /// Unpinned workers: the CPUs they ran on over the window and the share
    /// of one CPU they used on each (%), busiest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers_ran_on: Vec<CpuShare>,
    /// Every CPU over the window.
    pub cpus: Vec<CpuUsage>,
    /// NET_RX softirqs per CPU number in the window.
    pub net_rx: Vec<u64>,
    /// NET_TX softirqs per CPU number in the window.
    pub net_tx: Vec<u64>,
    /// The busiest device IRQs in the window.
    pub irqs: Vec<IrqDelta>,
    /// TCP counter deltas by kernel name.
    pub tcp: BTreeMap<String, i64>,
    /// Socket counts at the end of the window.
    pub sockstat: SockStat,
    /// Open fds at the end of the window.
    pub fds_open: usize,
    /// The fd soft limit.
    pub fd_soft: u64,
    /// https: this process's CPU per completed handshake in the window, µs
    /// (all of it: connects, requests and TLS; in new-connection mode what
    /// one handshake costs the client), and the share of its CPU spent in
    /// the TLS library's handshake computation (0..1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_handshake: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_handshake_share: Option<f64>,
    /// Whether the client was a limit.
    pub saturated: bool,
    /// Whether the window allowed a verdict: false when it was too short
    /// for CPU figures and nothing else was found (`saturated` is then
    /// false for want of evidence, not a finding).
    #[serde(default = "yes")]
    pub judged: bool,
    /// Why, one sentence per saturated resource with its evidence.
    pub reasons: Vec<String>,
    /// Evidence that does not make the client saturated but deserves a look.
    pub notes: Vec<String>,
    /// The one line for the text report.
    pub verdict: String,
}

/// A share of one CPU's time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuShare {
    pub cpu: usize,
    /// % of one CPU over the window.
    pub busy_pct: f64,
}

/// The CPUs the verdict judges, and for unpinned workers the CPUs they ran
/// on. Unpinned workers are judged on the CPUs they ran on: a server busy on
/// another CPU they were allowed on is not the client's saturation. When
/// they used too little CPU to place, the CPUs they last ran on.
fn generator_cpus(
    input: &VerdictInput,
    workers: &[WorkerCpu],
    cpus: &[CpuUsage],
    window_s: f64,
    ticks_per_s: f64,
) -> (Vec<CpuShare>, Vec<usize>) {
    let placed = input
        .worker_cpu_ticks
        .as_ref()
        .filter(|_| !input.workers_pinned);
    let mut workers_ran_on = placed.map_or_else(Vec::new, |t| ran_on(t, window_s, ticks_per_s));
    if workers_ran_on.is_empty() && placed.is_some() {
        // Too little CPU in the window to place them by ticks: where they
        // last ran, at the 0% they measured.
        let mut last: Vec<usize> = workers.iter().map(|w| w.cpu).collect();
        last.sort_unstable();
        last.dedup();
        workers_ran_on = last
            .into_iter()
            .map(|cpu| CpuShare { cpu, busy_pct: 0.0 })
            .collect();
    }
    let generator_cpus: Vec<usize> = if !workers_ran_on.is_empty() {
        let mut v: Vec<usize> = workers_ran_on.iter().map(|c| c.cpu).collect();
        v.sort_unstable();
        v
    } else if input.generator_cpus.is_empty() {
        cpus.iter().map(|c| c.cpu).collect()
    } else {
        input.generator_cpus.clone()
    };
    (workers_ran_on, generator_cpus)
}

/// The verdict line, ending with where unpinned workers ran.
fn with_placement(line: String, workers_ran_on: &[CpuShare]) -> String {
    if workers_ran_on.is_empty() {
        return line;
    }
    let on: Vec<String> = workers_ran_on
        .iter()
        .map(|c| format!("cpu{} {}%", c.cpu, floor(c.busy_pct)))
        .collect();
    format!("{line} [unpinned workers ran on {}]", on.join(", "))
}

/// A CPU counts as one the unpinned workers ran on when it had at least
/// this share of their CPU time.
const RAN_ON_MIN_SHARE: f64 = 0.10;

/// The CPUs unpinned workers ran on (each with at least
/// [`RAN_ON_MIN_SHARE`] of their time), busiest first.
fn ran_on(ticks: &BTreeMap<usize, u64>, window_s: f64, ticks_per_s: f64) -> Vec<CpuShare> {
    let total: u64 = ticks.values().sum();
    let mut out: Vec<CpuShare> = ticks
        .iter()
        .filter(|(_, &n)| total > 0 && n as f64 >= RAN_ON_MIN_SHARE * total as f64)
        .map(|(&cpu, &n)| CpuShare {
            cpu,
            busy_pct: if window_s > 0.0 {
                round1(n as f64 / ticks_per_s / window_s * 100.0)
            } else {
                0.0
            },
        })
        .collect();
    out.sort_by(|a, b| b.busy_pct.total_cmp(&a.busy_pct).then(a.cpu.cmp(&b.cpu)));
    out
}

fn yes() -> bool {
    true
}

/// Builds the client summary and verdict for the window `start`..`end`.
pub fn summarize(
    start: &Sample,
    end: &Sample,
    input: &VerdictInput,
    budget: &Budget,
) -> ClientSummary {
    let window_s = end.at.saturating_duration_since(start.at).as_secs_f64();
    let ticks_per_s = end.ticks_per_s.max(1) as f64;
    let mut cpus = sample_cpu_usage(start, end);
    let workers = worker_usage(start, end, &input.worker_tids, window_s, ticks_per_s);
    if input.workers_pinned {
        for c in cpus.iter_mut() {
            let on_it: Vec<&WorkerCpu> = workers.iter().filter(|w| w.cpu == c.cpu).collect();
            raise_busy_to(c, &on_it);
        }
    }
    let (workers_ran_on, generator_cpus) =
        generator_cpus(input, &workers, &cpus, window_s, ticks_per_s);
    let judged: Vec<&CpuUsage> = cpus
        .iter()
        .filter(|c| generator_cpus.contains(&c.cpu))
        .collect();

    let mut findings = cpu_findings(&judged);
    let mut notes = Vec::new();

    let worker_findings = worker_findings(&workers, &findings);
    findings.extend(worker_findings);
    if !workers.is_empty() && input.workers_pinned {
        mark_foreign_load(&mut findings, &workers);
    }

    // /proc counts CPU time in ticks (1/100 s): over a window of a few ticks
    // one tick more or less reads as 0% or 100%. No CPU verdict from that.
    let too_short_for_cpu = window_s * ticks_per_s < MIN_CPU_TICKS;
    if too_short_for_cpu {
        findings.clear();
        notes.push(format!(
            "the measured window ({:.0} ms) is too short for CPU figures: /proc counts CPU time in \
             1/{} s ticks; measure for {:.1} s or more for a CPU verdict",
            window_s * 1000.0,
            ticks_per_s,
            MIN_CPU_TICKS / ticks_per_s
        ));
    }

    let cpu_ticks = end
        .process
        .cpu_ticks()
        .saturating_sub(start.process.cpu_ticks());
    let cpu_s = cpu_ticks as f64 / ticks_per_s;
    let tls = tls_findings(input, cpu_s, window_s, &mut findings, &mut notes);
    budget_findings(end, input, budget, &mut findings, &mut notes);
    open_loop_findings(input, &mut findings, &mut notes);

    // io_uring.
    if input.cq_overflows > 0 {
        findings.push(Finding::CqOverflow(input.cq_overflows));
    }

    // Evidence that is not client saturation.
    for c in cpus
        .iter()
        .filter(|c| !generator_cpus.contains(&c.cpu) && c.busy >= CPU_SATURATED_PCT)
    {
        notes.push(format!(
            "cpu{} {}% busy is not a generator CPU: a local server or other load is saturating it",
            c.cpu,
            floor(c.busy)
        ));
    }
    let tcp = tcp_deltas(&start.tcp, &end.tcp);
    // Closing its connections at the end, the generator may reset each once.
    notes.extend(tcp_notes(&tcp, input.connections as i64));

    let judged_max = judged
        .iter()
        .copied()
        .max_by(|a, b| a.busy.total_cmp(&b.busy));
    let judged = !(too_short_for_cpu && findings.is_empty());
    let verdict = if !judged {
        format!(
            "client: not judged ({:.0} ms window, too short for CPU figures)",
            window_s * 1000.0
        )
    } else {
        with_placement(
            verdict_line("client", &findings, judged_max),
            &workers_ran_on,
        )
    };
    let (net_rx, net_tx) = net_softirq_deltas(&start.softirqs, &end.softirqs);
    let irqs = top_device_irqs(start, end);
    ClientSummary {
        window_s,
        cpu_s,
        workers,
        generator_cpus,
        workers_ran_on,
        cpus,
        net_rx,
        net_tx,
        irqs,
        tcp,
        sockstat: end.sockstat,
        fds_open: end.fds_open,
        fd_soft: budget.fd_soft,
        cpu_us_per_handshake: tls.0,
        tls_handshake_share: tls.1,
        saturated: !findings.is_empty(),
        judged,
        reasons: findings.iter().map(Finding::reason).collect(),
        notes,
        verdict,
    }
}

/// https: the process's CPU per handshake and the TLS handshakes' share of
/// it. When the client's CPU is saturated (a CPU or worker finding) and
/// handshakes took most of it, TLS is named as the client's cost; a
/// smaller but notable share is a note.
fn tls_findings(
    input: &VerdictInput,
    cpu_s: f64,
    window_s: f64,
    findings: &mut Vec<Finding>,
    notes: &mut Vec<String>,
) -> (Option<f64>, Option<f64>) {
    let n = input.tls_handshakes;
    if n == 0 || cpu_s <= 0.0 {
        return (None, None);
    }
    let per_handshake_us = cpu_s * 1e6 / n as f64;
    let share = (input.tls_handshake_cpu_s / cpu_s).clamp(0.0, 1.0);
    let each_us = input.tls_handshake_cpu_s * 1e6 / n as f64;
    let per_s = if window_s > 0.0 {
        n as f64 / window_s
    } else {
        0.0
    };
    let cpu_bound = findings.iter().any(|f| {
        matches!(
            f,
            Finding::Cpu {
                rule: CpuRule::Busy,
                ..
            } | Finding::Worker(_)
        )
    });
    if cpu_bound && share >= TLS_DOMINANT_SHARE {
        findings.push(Finding::TlsHandshakes {
            share,
            each_us,
            per_s,
        });
    } else if share >= TLS_NOTE_SHARE {
        notes.push(format!(
            "TLS handshakes took {}% of xload's CPU ({per_s:.0}/s, {each_us:.0} µs of rustls computation each; \
             {per_handshake_us:.0} µs of xload's CPU per handshake in all)",
            floor(share * 100.0)
        ));
    }
    (Some(per_handshake_us), Some(share))
}

/// The [`TOP_IRQS`] busiest device IRQs between two samples.
fn top_device_irqs(start: &Sample, end: &Sample) -> Vec<IrqDelta> {
    let mut irqs = irq_deltas(
        &start.interrupts,
        &start.irq_cpus,
        &end.interrupts,
        &end.irq_cpus,
    );
    irqs.retain(IrqDelta::is_device);
    irqs.truncate(TOP_IRQS);
    irqs
}

/// Workers that used a whole CPU, unless a finding already names their CPU.
fn worker_findings(workers: &[WorkerCpu], findings: &[Finding]) -> Vec<Finding> {
    workers
        .iter()
        .filter(|w| w.busy_pct >= CPU_SATURATED_PCT)
        .filter(|w| !findings.iter().any(|f| f.cpu() == Some(w.cpu)))
        .map(|w| Finding::Worker(w.clone()))
        .collect()
}

/// A busy CPU that xload's workers hardly used: say so, so that the user
/// looks for the other load instead of at the server. Only for pinned
/// workers: an unpinned one is seen on the last CPU it ran on, and its
/// time on the others would read as somebody else's.
fn mark_foreign_load(findings: &mut [Finding], workers: &[WorkerCpu]) {
    for f in findings.iter_mut() {
        let Finding::Cpu {
            usage: c,
            workers_pct,
            ..
        } = f
        else {
            continue;
        };
        let ours: f64 = workers
            .iter()
            .filter(|w| w.cpu == c.cpu)
            .map(|w| w.busy_pct)
            .sum();
        let task = c.usr + c.nice + c.sys;
        if c.busy >= CPU_SATURATED_PCT && ours < 0.5 * task.max(1.0) {
            *workers_pct = Some(ours);
        }
    }
}

/// File descriptors and ephemeral ports: findings when they ran out (or
/// nearly), a note when TIME_WAIT may use up the ports in a longer run.
fn budget_findings(
    end: &Sample,
    input: &VerdictInput,
    budget: &Budget,
    findings: &mut Vec<Finding>,
    notes: &mut Vec<String>,
) {
    let near_limit = budget.fd_soft != u64::MAX
        && budget.fd_soft > 0
        && end.fds_open as f64 >= FD_NEAR_LIMIT_FRACTION * budget.fd_soft as f64;
    if input.fd_errors > 0 || near_limit {
        let needed = (input.connections as u64)
            .saturating_add(FD_SLACK)
            .max(end.fds_open as u64 * 2);
        findings.push(Finding::FdLimit {
            open: end.fds_open,
            soft: budget.fd_soft,
            errors: input.fd_errors,
            needed,
        });
    }

    // Ephemeral ports.
    let ports = budget.ports_available();
    if input.port_errors > 0 {
        findings.push(Finding::Ports {
            errors: input.port_errors,
            range: budget.port_range,
            available: ports,
            time_wait: end.sockstat.tcp_tw,
        });
    }
    if let Some(rate) = input.no_keepalive_conn_per_s {
        let held = rate * TIME_WAIT_S;
        if held >= f64::from(ports) && !budget.tw_reuse_applies(input.target_is_loopback) {
            notes.push(format!(
                "{rate:.0} new connections/s keep ~{held:.0} local ports in TIME_WAIT for {TIME_WAIT_S:.0} s \
                 when this side closes first; the port range gives {ports} and net.ipv4.tcp_tw_reuse={}: \
                 longer runs may fail to connect (sysctl -w net.ipv4.tcp_tw_reuse=1)",
                budget.tw_reuse
            ));
        }
    }
}

/// Open-loop schedule. Sends that waited for a free connection are the
/// server's latency × the connections at work, not this client: when
/// they are over the limit, the lag's p99 is theirs and says nothing of
/// the client (its own late sends are judged below).
fn open_loop_findings(input: &VerdictInput, findings: &mut Vec<Finding>, notes: &mut Vec<String>) {
    let waits_dominate = input
        .late_waiting_ratio
        .is_some_and(|r| r > LATE_SEND_RATIO_LIMIT);
    let enough_late = input.late_sends.is_none_or(|n| n >= LATE_SENDS_MIN);
    if let Some(lag_us) = input
        .schedule_lag_p99_us
        .filter(|l| *l > SCHEDULE_LAG_P99_LIMIT_US && !waits_dominate && enough_late)
    {
        findings.push(Finding::ScheduleLag { p99_us: lag_us });
    }
    if let Some(late) = input
        .late_send_ratio
        .filter(|r| *r > LATE_SEND_RATIO_LIMIT && enough_late)
    {
        findings.push(Finding::LateSends { ratio: late });
    }

    // `late_waiting_ratio` counts the catch-up waits too (both are the
    // server's pace); each note stands on its own share.
    let c = input.late_catch_up_ratio.unwrap_or(0.0);
    if let Some(w) = input
        .late_waiting_ratio
        .map(|w| (w - c).max(0.0))
        .filter(|r| *r > LATE_SEND_RATIO_LIMIT)
    {
        notes.push(format!(
            "open loop: {:.1}% of sends left late because all {} connections had a request in \
             flight: the server's latency × the connections held the rate back, not this client \
             (more connections, -c, keep the rate)",
            w * 100.0,
            input.connections
        ));
    }
    if c > LATE_SEND_RATIO_LIMIT {
        notes.push(format!(
            "open loop: {:.1}% of sends came due after connections were free again and waited \
             behind that backlog, which drains at most at twice the rate (the generator never \
             bursts above 2× --rate): their corrected latency includes that wait",
            c * 100.0
        ));
    }
}

/// The server-side (or any host) view of a window: the same evidence, every CPU judged.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostSummary {
    /// Length of the window, seconds.
    pub window_s: f64,
    /// Every CPU over the window.
    pub cpus: Vec<CpuUsage>,
    /// NET_RX softirqs per CPU number.
    pub net_rx: Vec<u64>,
    /// NET_TX softirqs per CPU number.
    pub net_tx: Vec<u64>,
    /// The busiest device IRQs.
    pub irqs: Vec<IrqDelta>,
    /// TCP counter deltas by kernel name.
    pub tcp: BTreeMap<String, i64>,
    /// Socket counts at the end.
    pub sockstat: SockStat,
    /// Whether a resource of this host was saturated.
    pub saturated: bool,
    /// One sentence per saturated resource.
    pub reasons: Vec<String>,
    /// Evidence worth a look that is not saturation.
    pub notes: Vec<String>,
    /// The one-line verdict (`host: ...`).
    pub verdict: String,
}

/// Judges a host (no generator, e.g. the server under test) over `start`..`end`: CPU
/// saturation, softirq domination and steal on every CPU, and listen-queue overflows.
pub fn summarize_host(start: &Sample, end: &Sample) -> HostSummary {
    let cpus = sample_cpu_usage(start, end);
    let all: Vec<&CpuUsage> = cpus.iter().collect();
    let mut findings = cpu_findings(&all);
    let tcp = tcp_deltas(&start.tcp, &end.tcp);
    let overflows = tcp.get("ListenOverflows").copied().unwrap_or(0);
    let drops = tcp.get("ListenDrops").copied().unwrap_or(0);
    if overflows > 0 || drops > 0 {
        findings.push(Finding::AcceptQueue { overflows, drops });
    }
    let notes = tcp_notes(&tcp, 0)
        .into_iter()
        .filter(|n| !n.starts_with("ListenOverflows"))
        .collect();
    let max = all.iter().copied().max_by(|a, b| a.busy.total_cmp(&b.busy));
    let verdict = verdict_line("host", &findings, max);
    let (net_rx, net_tx) = net_softirq_deltas(&start.softirqs, &end.softirqs);
    let irqs = top_device_irqs(start, end);
    HostSummary {
        window_s: end.at.saturating_duration_since(start.at).as_secs_f64(),
        cpus,
        net_rx,
        net_tx,
        irqs,
        tcp,
        sockstat: end.sockstat,
        saturated: !findings.is_empty(),
        reasons: findings.iter().map(Finding::reason).collect(),
        notes,
        verdict,
    }
}

/// Raises a CPU's busy share to the CPU time the workers pinned to it used,
/// when the /proc/stat figures read less (steal inside idle makes them read
/// low, see [`cpu_usage_over`]); a worker's own CPU time is exact. The time
/// added comes out of idle first, then steal, then iowait, and goes to usr
/// and sys in the workers' proportions.
pub(crate) fn raise_busy_to(c: &mut CpuUsage, workers: &[&WorkerCpu]) {
    let used: f64 = workers.iter().map(|w| w.busy_pct).sum::<f64>().min(100.0);
    let mut add = used - c.busy;
    if add < 0.1 {
        return;
    }
    let room = c.idle + c.steal + c.iowait;
    add = add.min(room);
    let mut left = add;
    for field in [&mut c.idle, &mut c.steal, &mut c.iowait] {
        let take = left.min(*field);
        *field = round1(*field - take);
        left -= take;
    }
    let (usr, sys) = workers
        .iter()
        .fold((0.0, 0.0), |(u, s), w| (u + w.usr_pct, s + w.sys_pct));
    let usr_share = if usr + sys > 0.0 {
        usr / (usr + sys)
    } else {
        0.0
    };
    c.usr = round1(c.usr + add * usr_share);
    c.sys = round1(c.sys + add * (1.0 - usr_share));
    c.busy = round1(c.busy + add);
}

/// CPU rules over the judged CPUs: ≥ 90% busy; softirq > usr+nice+sys at ≥ 70% busy;
/// steal ≥ 10%.
fn cpu_findings(judged: &[&CpuUsage]) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut push = |c: &CpuUsage, rule| {
        out.push(Finding::Cpu {
            usage: c.clone(),
            rule,
            workers_pct: None,
        })
    };
    for c in judged {
        let task = c.usr + c.nice + c.sys;
        if c.busy >= CPU_SATURATED_PCT {
            push(c, CpuRule::Busy);
        } else if c.softirq > task && c.busy >= SOFTIRQ_DOMINANT_MIN_BUSY_PCT {
            push(c, CpuRule::SoftirqDominant);
        }
        if c.steal >= STEAL_PCT {
            push(c, CpuRule::Steal);
        }
    }
    out
}

fn verdict_line(who: &str, findings: &[Finding], max: Option<&CpuUsage>) -> String {
    if findings.is_empty() {
        match max {
            Some(c) => format!(
                "{who}: not saturated (max CPU {}% on cpu{})",
                floor(c.busy),
                c.cpu
            ),
            None => format!("{who}: not saturated (no CPU figures)"),
        }
    } else {
        let shorts: Vec<String> = findings.iter().map(Finding::short).collect();
        let consequence = if who == "client" {
            ": results understate the server"
        } else {
            ""
        };
        format!("{who}: SATURATED — {}{consequence}", shorts.join(", "))
    }
}

/// Notes on the TCP counters' changes; `own_resets` resets are the
/// generator's own (closing its connections at the end of the run).
fn tcp_notes(tcp: &BTreeMap<String, i64>, own_resets: i64) -> Vec<String> {
    let get = |k: &str| tcp.get(k).copied().unwrap_or(0);
    let mut notes = Vec::new();
    if get("ListenOverflows") > 0 || get("ListenDrops") > 0 {
        notes.push(format!(
            "ListenOverflows +{}, ListenDrops +{} on this host: a local listener's accept queue overflowed \
             (server-side evidence)",
            get("ListenOverflows"),
            get("ListenDrops")
        ));
    }
    if get("RetransSegs") > 0 {
        notes.push(format!(
            "RetransSegs +{} (TCPTimeouts +{}, TCPSynRetrans +{}): segments were lost or delayed on the path",
            get("RetransSegs"),
            get("TCPTimeouts"),
            get("TCPSynRetrans")
        ));
    }
    if get("AttemptFails") > 0 || get("EstabResets") > own_resets {
        notes.push(format!(
            "AttemptFails +{}, EstabResets +{}: connections were refused or reset",
            get("AttemptFails"),
            get("EstabResets")
        ));
    }
    notes
}

fn worker_usage(
    start: &Sample,
    end: &Sample,
    tids: &[i32],
    window_s: f64,
    ticks_per_s: f64,
) -> Vec<WorkerCpu> {
    if window_s <= 0.0 {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(tids.len());
    for tid in tids {
        let (Some(s), Some(e)) = (
            start.threads.iter().find(|t| t.tid == *tid),
            end.threads.iter().find(|t| t.tid == *tid),
        ) else {
            continue;
        };
        let pct =
            |a: u64, b: u64| round1(b.saturating_sub(a) as f64 / ticks_per_s / window_s * 100.0);
        let usr_pct = pct(s.utime_ticks, e.utime_ticks);
        let sys_pct = pct(s.stime_ticks, e.stime_ticks);
        out.push(WorkerCpu {
            tid: *tid,
            comm: e.comm.clone(),
            cpu: e.last_cpu,
            usr_pct,
            sys_pct,
            busy_pct: round1(usr_pct + sys_pct),
        });
    }
    out
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

fn i128_to_i64(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}
