//! What `xtune observe` shows: the probe's samplers on any host (typically the server
//! under test), as a compact per-interval table or JSON, with a summary naming the
//! saturated resource. Every CPU is judged, since on a server there are no generator
//! CPUs. The command line and exit codes are the binary's.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::ProbeError;
use crate::figures::CpuUsage;
use crate::parse::{NetDevDrops, SockStat};
use crate::sampler::{Sample, Sampler};
use crate::verdict::{
    irq_deltas, net_softirq_deltas, sample_cpu_usage, summarize_host, tcp_deltas, HostSummary,
    IrqDelta,
};
use crate::watch::{drop_deltas, Extras, ProcessSel, Watch};

/// JSON schema name of [`ObserveReport`].
pub const SCHEMA: &str = "xtune-observe/1";
/// IRQ lines shown per interval.
pub const TOP_IRQS_PER_INTERVAL: usize = 3;

/// What to observe and how to print it.
#[derive(Debug, Clone, PartialEq)]
pub struct ObserveArgs {
    /// How long to observe.
    pub for_duration: Duration,
    /// Length of one table row.
    pub interval: Duration,
    /// Print the JSON report at the end instead of the table as it goes.
    pub json: bool,
    /// Follow this server process's CPU (a pid, or a name in this network namespace).
    pub process: Option<ProcessSel>,
}

/// One interval of the observation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ObserveInterval {
    /// Seconds from the start of the observation to the end of this interval.
    pub t_s: f64,
    /// Length of this interval, seconds.
    pub window_s: f64,
    /// Every CPU, percent of its ticks (fields sum to 100 per CPU).
    pub cpus: Vec<CpuUsage>,
    /// NET_RX softirqs per CPU number in the interval.
    pub net_rx: Vec<u64>,
    /// NET_TX softirqs per CPU number in the interval.
    pub net_tx: Vec<u64>,
    /// The busiest device IRQs in the interval.
    pub irqs: Vec<IrqDelta>,
    /// TCP counter deltas by kernel name.
    pub tcp: BTreeMap<String, i64>,
    /// Wall-clock end of this interval, µs since the epoch (0 in reports from
    /// before it was kept).
    #[serde(default)]
    pub end_unix_us: i64,
    /// Runnable tasks at the end of the interval (/proc/stat procs_running).
    #[serde(default)]
    pub procs_running: Option<u64>,
    /// Socket counts at the end of the interval.
    #[serde(default)]
    pub sockstat: SockStat,
    /// Interfaces that dropped packets in the interval, with the deltas.
    #[serde(default)]
    pub nic_drops: Vec<NetDevDrops>,
    /// CPU of the followed process, percent of one CPU.
    #[serde(default)]
    pub process_cpu_pct: Option<f64>,
}

/// What `xtune observe --json` prints.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ObserveReport {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Requested interval, seconds.
    pub interval_s: f64,
    /// Measured length of the whole observation, seconds.
    pub duration_s: f64,
    /// Clock ticks per second behind the CPU figures.
    pub ticks_per_s: u64,
    /// One entry per interval.
    pub intervals: Vec<ObserveInterval>,
    /// The whole observation, with the verdict.
    pub summary: HostSummary,
    /// Wall-clock time of the first sample, µs since the epoch.
    #[serde(default)]
    pub started_unix_us: i64,
    /// The followed process and the pids it stood for.
    #[serde(default)]
    pub process: Option<FollowedProcess>,
}

/// The process `--process` named, as found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FollowedProcess {
    /// As given.
    pub selection: ProcessSel,
    /// The pids behind it at the end (empty: none found).
    pub pids: Vec<i32>,
}

/// Wall clock now, µs since the epoch.
fn unix_now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// Why an observation could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// The options make no sense (a zero interval or length).
    #[error("{0}")]
    BadArgs(String),
    /// Reading /proc failed.
    #[error(transparent)]
    Probe(#[from] ProbeError),
    /// Writing the output failed.
    #[error("writing output: {0}")]
    Write(#[from] std::io::Error),
}

/// Observes through `sampler` for `args.for_duration`, one row per `args.interval`
/// (the last one shortened to end on time), writing the table as it goes — or the JSON
/// report at the end with `--json` — to `out`. Returns the report either way.
pub fn observe(
    args: &ObserveArgs,
    sampler: &mut Sampler,
    out: &mut dyn Write,
) -> Result<ObserveReport, ObserveError> {
    if args.interval.is_zero() {
        return Err(ObserveError::BadArgs(
            "--interval must be longer than 0".into(),
        ));
    }
    if args.for_duration.is_zero() {
        return Err(ObserveError::BadArgs("--for must be longer than 0".into()));
    }
    let count = args
        .for_duration
        .as_nanos()
        .div_ceil(args.interval.as_nanos())
        .max(1);
    let mut watch = Watch::new(sampler.root().to_path_buf(), args.process.clone());
    let started_unix_us = unix_now_us();
    let first = sampler.sample()?;
    let mut prev_extras = watch.read();
    let t0 = first.at;
    if !args.json {
        writeln!(
            out,
            "observing {} CPUs every {:?} for {:?} (usr includes nice; soft = softirq; iowt = iowait, idle waiting for I/O)",
            first.cpus.len(),
            args.interval,
            args.for_duration
        )?;
        writeln!(
            out,
            "{:>7}  {:<6}{:>6}{:>6}{:>6}{:>6}{:>6}{:>11}",
            "t", "cpu", "usr", "sys", "soft", "iowt", "idle", "NET_RX/s"
        )?;
    }
    let mut intervals = Vec::new();
    let mut prev = first.clone();
    for k in 1..=count {
        let offset = args
            .interval
            .saturating_mul(u32::try_from(k).unwrap_or(u32::MAX))
            .min(args.for_duration);
        sleep_until(t0 + offset);
        let cur = sampler.sample()?;
        let extras = watch.read();
        let mut interval = interval_figures(&prev, &cur, t0);
        add_extras(&mut interval, &prev_extras, &extras, cur.ticks_per_s);
        interval.end_unix_us = unix_now_us();
        prev_extras = extras;
        if !args.json {
            print_interval(out, &interval)?;
        }
        intervals.push(interval);
        prev = cur;
    }
    let summary = summarize_host(&first, &prev);
    let report = ObserveReport {
        schema: SCHEMA.to_owned(),
        interval_s: args.interval.as_secs_f64(),
        duration_s: prev.at.saturating_duration_since(t0).as_secs_f64(),
        ticks_per_s: prev.ticks_per_s,
        intervals,
        summary,
        started_unix_us,
        process: args.process.clone().map(|selection| FollowedProcess {
            selection,
            pids: watch.pids().to_vec(),
        }),
    };
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report).map_err(std::io::Error::from)?;
        writeln!(out)?;
    } else {
        print_summary(out, &report)?;
    }
    out.flush()?;
    Ok(report)
}

fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline > now {
        std::thread::sleep(deadline - now);
    }
}

fn interval_figures(prev: &Sample, cur: &Sample, t0: Instant) -> ObserveInterval {
    let (net_rx, net_tx) = net_softirq_deltas(&prev.softirqs, &cur.softirqs);
    let mut irqs: Vec<IrqDelta> = irq_deltas(
        &prev.interrupts,
        &prev.irq_cpus,
        &cur.interrupts,
        &cur.irq_cpus,
    )
    .into_iter()
    .filter(IrqDelta::is_device)
    .collect();
    irqs.truncate(TOP_IRQS_PER_INTERVAL);
    ObserveInterval {
        t_s: cur.at.saturating_duration_since(t0).as_secs_f64(),
        window_s: cur.at.saturating_duration_since(prev.at).as_secs_f64(),
        cpus: sample_cpu_usage(prev, cur),
        net_rx,
        net_tx,
        irqs,
        tcp: tcp_deltas(&prev.tcp, &cur.tcp),
        sockstat: cur.sockstat,
        ..ObserveInterval::default()
    }
}

/// The extras of an interval: drops, run queue, sockets, the process's CPU.
fn add_extras(iv: &mut ObserveInterval, prev: &Extras, cur: &Extras, ticks_per_s: u64) {
    iv.procs_running = cur.procs_running;
    iv.nic_drops = drop_deltas(&prev.net_dev, &cur.net_dev);
    iv.process_cpu_pct = match (prev.process_ticks, cur.process_ticks) {
        (Some(a), Some(b)) if iv.window_s > 0.0 && ticks_per_s > 0 => {
            Some(b.saturating_sub(a) as f64 / ticks_per_s as f64 / iv.window_s * 100.0)
        }
        _ => None,
    };
}

fn per_s(count: u64, window_s: f64) -> f64 {
    if window_s > 0.0 {
        count as f64 / window_s
    } else {
        0.0
    }
}

fn print_interval(out: &mut dyn Write, iv: &ObserveInterval) -> std::io::Result<()> {
    for (i, c) in iv.cpus.iter().enumerate() {
        let t = if i == 0 {
            format!("{:.1}s", iv.t_s)
        } else {
            String::new()
        };
        let rx = per_s(iv.net_rx.get(c.cpu).copied().unwrap_or(0), iv.window_s);
        writeln!(
            out,
            "{t:>7}  {:<6}{:>6.1}{:>6.1}{:>6.1}{:>6.1}{:>6.1}{:>11.0}",
            format!("cpu{}", c.cpu),
            c.usr + c.nice,
            c.sys,
            c.softirq,
            c.iowait,
            c.idle,
            rx
        )?;
    }
    if !iv.irqs.is_empty() {
        let list: Vec<String> = iv
            .irqs
            .iter()
            .map(|d| format!("{} {} {:.0}", d.irq, d.name, per_s(d.total, iv.window_s)))
            .collect();
        writeln!(out, "{:>7}  IRQs/s: {}", "", list.join(", "))?;
    }
    let tcp = nonzero(&iv.tcp);
    if !tcp.is_empty() {
        writeln!(out, "{:>7}  TCP: {tcp}", "")?;
    }
    for d in &iv.nic_drops {
        writeln!(
            out,
            "{:>7}  drops {}: rx {} (fifo {}), tx {}",
            "", d.dev, d.rx_dropped, d.rx_fifo, d.tx_dropped
        )?;
    }
    let mut gauges = vec![format!(
        "TCP inuse {}, tw {}",
        iv.sockstat.tcp_inuse, iv.sockstat.tcp_tw
    )];
    if let Some(n) = iv.procs_running {
        gauges.push(format!("run queue {n}"));
    }
    if let Some(p) = iv.process_cpu_pct {
        gauges.push(format!("process {p:.1}% of a CPU"));
    }
    writeln!(out, "{:>7}  {}", "", gauges.join("; "))?;
    Ok(())
}

fn nonzero(tcp: &BTreeMap<String, i64>) -> String {
    tcp.iter()
        .filter(|(_, v)| **v != 0)
        .map(|(k, v)| format!("{k} {v:+}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_summary(out: &mut dyn Write, report: &ObserveReport) -> std::io::Result<()> {
    let s = &report.summary;
    writeln!(out, "summary over {:.1}s:", s.window_s)?;
    for c in &s.cpus {
        writeln!(
            out,
            "  cpu{:<3} usr {:>5.1}%  sys {:>5.1}%  irq {:>4.1}%  soft {:>5.1}%  steal {:>4.1}%  iowait {:>5.1}%  idle {:>5.1}%  \
             NET_RX {}  NET_TX {}",
            c.cpu,
            c.usr + c.nice,
            c.sys,
            c.irq,
            c.softirq,
            c.steal,
            c.iowait,
            c.idle,
            s.net_rx.get(c.cpu).copied().unwrap_or(0),
            s.net_tx.get(c.cpu).copied().unwrap_or(0),
        )?;
    }
    if !s.irqs.is_empty() {
        let list: Vec<String> = s
            .irqs
            .iter()
            .map(|d| format!("{} {} {}", d.irq, d.name, d.total))
            .collect();
        writeln!(out, "  top IRQs: {}", list.join(", "))?;
    }
    let tcp = nonzero(&s.tcp);
    if !tcp.is_empty() {
        writeln!(out, "  TCP: {tcp}")?;
    }
    writeln!(
        out,
        "  sockets: {} used; TCP inuse {}, orphan {}, tw {}, mem {} pages",
        s.sockstat.sockets_used,
        s.sockstat.tcp_inuse,
        s.sockstat.tcp_orphan,
        s.sockstat.tcp_tw,
        s.sockstat.tcp_mem_pages
    )?;
    for n in &s.notes {
        writeln!(out, "  note: {n}")?;
    }
    for r in &s.reasons {
        writeln!(out, "  saturated: {r}")?;
    }
    writeln!(out, "{}", s.verdict)
}
