//! Runs of `xload pps` and `xload pps-rx`: validate, set up, send/receive,
//! measure the counters around the run, and build the reports.
//!
//! One command on one host: `xload pps --dev A --peer-ns NS --rx-dev B ...`
//! starts the receiver itself, on a helper thread that entered namespace NS
//! (its worker threads inherit it), so the sender knows exactly what was
//! delivered. That is what `--find-zero-loss` needs: each trial compares
//! TX completions with frames delivered at the peer.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::clock;
use crate::frame::{FrameError, FrameSpec, FrameTemplate, MacAddr, ETH_HEADER_LEN, FCS_LEN};
use crate::netdev::{self, LinkInfo, NetdevError};
use crate::program::RxMode;
use crate::report::{
    self, InterfaceReport, LatencyUs, RxFacts, RxReport, Trial, TxQueueReport, TxReport,
    VerdictInput, ZeroLoss,
};
use crate::rx::{Receiver, RxError, RxPlan, RxRun};
use crate::seq::{SeqFault, SeqTracker};
use crate::tx::{self, FlowSent, TxError, TxPlan, TxQueuePlan, TxQueueResult};
use crate::xsk::{BindMode, XdpStatistics};

/// Receiver started by the sender (same host).
#[derive(Debug, Clone)]
pub struct PeerConfig {
    /// Namespace of the receiving interface (`None` = the sender's).
    pub netns: Option<String>,
    pub dev: String,
    pub mode: RxMode,
    /// Queues to receive on (default: all RX queues of `dev`).
    pub queues: Option<Vec<u32>>,
    /// CPUs for the receiver threads (default: the allowed CPUs, last first).
    pub cpus: Option<Vec<usize>>,
    pub drop_every: u32,
    pub force_generic: bool,
}

/// `--find-zero-loss` parameters.
#[derive(Debug, Clone, Copy)]
pub struct SearchConfig {
    pub trial: Duration,
    /// Stop when the bracket is narrower than this share of its top.
    pub resolution_pct: f64,
    pub max_trials: u32,
}

/// A validated `xload pps` run.
#[derive(Debug, Clone)]
pub struct PpsConfig {
    pub dev: String,
    pub dst_mac: Option<MacAddr>,
    pub src_mac: Option<MacAddr>,
    pub dst_ip: IpAddr,
    pub src_ip: Option<IpAddr>,
    pub dst_port: u16,
    /// First UDP source port; flow i uses `src_port + i`.
    pub src_port: u16,
    pub flows: u32,
    /// Frame size on the wire including FCS.
    pub wire_size: usize,
    pub rate_per_s: Option<f64>,
    pub queues: Vec<u32>,
    pub cpus: Option<Vec<usize>>,
    pub duration: Duration,
    /// Stop after this many frames in total.
    pub count: Option<u64>,
    pub batch: u32,
    pub bind_mode: BindMode,
    pub fault: SeqFault,
    pub peer: Option<PeerConfig>,
    pub search: Option<SearchConfig>,
}

/// A validated `xload pps-rx` run.
#[derive(Debug, Clone)]
pub struct PpsRxConfig {
    pub dev: String,
    pub queues: Option<Vec<u32>>,
    pub cpus: Option<Vec<usize>>,
    pub mode: RxMode,
    pub dst_port: u16,
    pub duration: Duration,
    pub drop_every: u32,
    pub bind_mode: BindMode,
    pub force_generic: bool,
    pub verify_checksums: bool,
}

/// Why a run failed; [`PpsError::exit_code`] maps it to the CLI contract.
#[derive(Debug, thiserror::Error)]
pub enum PpsError {
    /// Malformed or contradictory arguments (exit 2).
    #[error("{0}")]
    BadArgs(String),
    #[error(transparent)]
    Netdev(#[from] NetdevError),
    #[error("interface {0} is down (bring it up with: ip link set {0} up)")]
    Down(String),
    #[error("{dev} has {have} TX queues; queue {queue} does not exist")]
    NoQueue { dev: String, queue: u32, have: u32 },
    #[error("frame of {frame} B does not fit the MTU {mtu} of {dev}")]
    Mtu { dev: String, frame: usize, mtu: u32 },
    #[error("{dev} has no MAC address; pass --src-mac")]
    NoMac { dev: String },
    #[error(transparent)]
    Tx(#[from] TxError),
    #[error("receiver: {0}")]
    Rx(#[from] RxError),
    #[error("nothing was sent ({0})")]
    NothingSent(String),
    /// This process's CPU affinity mask could not be read.
    #[error("sched_getaffinity: {0}")]
    Affinity(std::io::Error),
}

impl PpsError {
    /// 2 for bad arguments, 1 for everything that stopped the run.
    pub fn exit_code(&self) -> i32 {
        match self {
            // A device without a MAC needs the option that gives one: an
            // argument missing, as on the receiving side (--dst-mac).
            PpsError::BadArgs(_) | PpsError::NoMac { .. } => 2,
            _ => 1,
        }
    }
}

impl From<FrameError> for PpsError {
    fn from(e: FrameError) -> Self {
        PpsError::BadArgs(e.to_string())
    }
}

/// A random non-zero run tag.
pub fn random_run_tag() -> u16 {
    let mut b = [0u8; 2];
    // SAFETY: b is valid for 2 bytes of writes.
    let r = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 2, 0) };
    let mut t = if r == 2 {
        u16::from_ne_bytes(b)
    } else {
        (clock::monotonic_ns() ^ u64::from(std::process::id())) as u16
    };
    if t == 0 {
        t = 1;
    }
    t
}

fn default_src_ip(dst: IpAddr) -> IpAddr {
    match dst {
        // RFC 2544 / RFC 5180 benchmarking ranges.
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1)),
    }
}

fn check_up(link: &LinkInfo) -> Result<(), PpsError> {
    if !link.is_up() {
        return Err(PpsError::Down(link.name.clone()));
    }
    Ok(())
}

/// CPUs for `n` threads: the given list cycled, or the allowed CPUs (an
/// error when the affinity mask cannot be read, as for the HTTP engine).
fn cpus_for(n: usize, given: &Option<Vec<usize>>, reverse: bool) -> Result<Vec<usize>, PpsError> {
    let mut base = match given {
        Some(c) if !c.is_empty() => c.clone(),
        _ => xload_sys::cpu::allowed_cpus().map_err(PpsError::Affinity)?,
    };
    if reverse && given.is_none() {
        base.reverse();
    }
    Ok((0..n).map(|i| base[i % base.len()]).collect())
}

struct TxRunData {
    results: Vec<TxQueueResult>,
    link_before: LinkInfo,
    link_after: LinkInfo,
    cpu_usage: Vec<clock::CpuUsage>,
    wall_ns: u64,
}

struct Sender<'a> {
    cfg: &'a PpsConfig,
    link: LinkInfo,
    src_mac: MacAddr,
    dst_mac: MacAddr,
    src_ip: IpAddr,
    cpus: Vec<usize>,
    stop: &'a Arc<AtomicBool>,
}

impl Sender<'_> {
    /// One transmit run at `rate` (total) for `duration`.
    fn run(
        &self,
        rate: Option<f64>,
        duration: Duration,
        count: Option<u64>,
    ) -> Result<TxRunData, PpsError> {
        let run_tag = random_run_tag();
        let nq = self.cfg.queues.len();
        let mut queues: Vec<TxQueuePlan> = self
            .cfg
            .queues
            .iter()
            .enumerate()
            .map(|(i, &q)| TxQueuePlan {
                queue: q,
                cpu: Some(self.cpus[i]),
                flows: Vec::new(),
                rate_per_s: rate.map(|r| r / nq as f64),
                max_frames: count.map(|c| c / nq as u64 + u64::from((i as u64) < c % nq as u64)),
            })
            .collect();
        for f in 0..self.cfg.flows {
            let t = FrameTemplate::new(&FrameSpec {
                src_mac: self.src_mac,
                dst_mac: self.dst_mac,
                src_ip: self.src_ip,
                dst_ip: self.cfg.dst_ip,
                src_port: self.cfg.src_port.wrapping_add(f as u16),
                dst_port: self.cfg.dst_port,
                wire_size: self.cfg.wire_size,
                run_tag,
            })?;
            queues[f as usize % nq].flows.push(t);
        }
        let plan = TxPlan {
            ifindex: self.link.ifindex,
            bind_mode: self.cfg.bind_mode,
            queues,
            batch: self.cfg.batch,
            fault: self.cfg.fault,
            duration,
            run_tag,
        };
        let link_before = netdev::link_by_index(self.link.ifindex)?;
        let cpu_before = clock::sample_cpus();
        let t0 = clock::monotonic_ns();
        let results = tx::run_tx(&plan, self.stop)?;
        let wall_ns = clock::monotonic_ns() - t0;
        let mut cpus = self.cpus.clone();
        cpus.sort_unstable();
        cpus.dedup();
        let cpu_usage = clock::cpu_usage(&cpu_before, &clock::sample_cpus(), &cpus);
        let link_after = netdev::link_by_index(self.link.ifindex)?;
        if let Some(e) = results.iter().find_map(|r| r.error.clone()) {
            if results.iter().all(|r| r.sent == 0) {
                return Err(PpsError::NothingSent(e));
            }
        }
        Ok(TxRunData {
            results,
            link_before,
            link_after,
            cpu_usage,
            wall_ns,
        })
    }
}

fn sent_of(d: &TxRunData) -> u64 {
    d.results.iter().map(|r| r.sent).sum()
}

/// Completed frames per second of sending time (slowest queue's window).
fn pps_of(d: &TxRunData) -> f64 {
    sent_of(d) as f64 * 1e9 / send_ns_of(d) as f64
}

fn send_ns_of(d: &TxRunData) -> u64 {
    d.results
        .iter()
        .map(|r| r.send_ns)
        .max()
        .unwrap_or(d.wall_ns)
        .max(1)
}

/// Runs `xload pps`.
pub fn run_pps(cfg: &PpsConfig, stop: &Arc<AtomicBool>) -> Result<TxReport, PpsError> {
    let src_ip = check_config(cfg)?;
    let (link, src_mac) = tx_link(cfg)?;
    let speed_tx = netdev::link_speed_mbps(&cfg.dev);

    // The local receiver, started before the first frame leaves.
    let receiver = match &cfg.peer {
        Some(p) => Some(start_peer(p, cfg.dst_port)?),
        None => None,
    };
    let dst_mac = dst_mac_of(cfg, receiver.as_ref())?;
    let sender = Sender {
        cfg,
        link: link.clone(),
        src_mac,
        dst_mac,
        src_ip,
        cpus: cpus_for(cfg.queues.len(), &cfg.cpus, false)?,
        stop,
    };
    let sending = send_all(&sender, receiver.as_ref())?;
    let interrupted = stop.load(Ordering::Relaxed);
    let rx_report = finish_receiver(receiver, cfg, &sending)?;
    tx_report(cfg, sending, speed_tx, rx_report, interrupted)
}

/// Checks the configuration before any interface is touched; the source
/// address to send from.
fn check_config(cfg: &PpsConfig) -> Result<IpAddr, PpsError> {
    if cfg.queues.is_empty() {
        return Err(PpsError::BadArgs("--queues is empty".into()));
    }
    if (cfg.flows as usize) < cfg.queues.len() {
        return Err(PpsError::BadArgs(format!(
            "--flows {} is less than the {} queues: every queue needs a flow",
            cfg.flows,
            cfg.queues.len()
        )));
    }
    if cfg.search.is_some() && cfg.peer.is_none() {
        return Err(PpsError::BadArgs(
            "--find-zero-loss needs the receiver: add --rx-dev (and --peer-ns if it lives in another namespace)".into(),
        ));
    }
    let src_ip = cfg.src_ip.unwrap_or_else(|| default_src_ip(cfg.dst_ip));
    // Catch size/family errors before touching any interface.
    FrameTemplate::new(&FrameSpec {
        src_mac: MacAddr::default(),
        dst_mac: MacAddr::default(),
        src_ip,
        dst_ip: cfg.dst_ip,
        src_port: cfg.src_port,
        dst_port: cfg.dst_port,
        wire_size: cfg.wire_size,
        run_tag: 1,
    })?;
    if cfg.dst_mac.is_none() && cfg.peer.is_none() {
        return Err(PpsError::BadArgs(
            "--dst-mac is required (or --rx-dev, to read it from the receiving interface)".into(),
        ));
    }
    Ok(src_ip)
}

/// The sending interface, checked (up, has the queues, MTU fits the frame),
/// and the source MAC to use on it.
fn tx_link(cfg: &PpsConfig) -> Result<(LinkInfo, MacAddr), PpsError> {
    let link = netdev::link_by_name(&cfg.dev)?;
    check_up(&link)?;
    for &q in &cfg.queues {
        if q >= link.num_tx_queues {
            return Err(PpsError::NoQueue {
                dev: cfg.dev.clone(),
                queue: q,
                have: link.num_tx_queues,
            });
        }
    }
    let frame_len = cfg.wire_size - FCS_LEN;
    if frame_len > link.mtu as usize + ETH_HEADER_LEN {
        return Err(PpsError::Mtu {
            dev: cfg.dev.clone(),
            frame: frame_len,
            mtu: link.mtu,
        });
    }
    let src_mac = match cfg.src_mac.or(link.mac.map(MacAddr)) {
        Some(m) => m,
        None => {
            return Err(PpsError::NoMac {
                dev: cfg.dev.clone(),
            })
        }
    };
    Ok((link, src_mac))
}

/// The destination MAC: given, or read from the receiving interface.
fn dst_mac_of(cfg: &PpsConfig, receiver: Option<&Receiver>) -> Result<MacAddr, PpsError> {
    Ok(match (cfg.dst_mac, receiver) {
        (Some(m), _) => m,
        (None, Some(r)) => match r.link_before.mac {
            Some(m) => MacAddr(m),
            None => {
                return Err(PpsError::BadArgs(
                    "the receiving interface has no MAC address: pass --dst-mac".into(),
                ))
            }
        },
        (None, None) => unreachable!("checked by check_config"),
    })
}

/// What the sending phase produced: the run reported on (the best trial of
/// a zero-loss search), and every flow and frame sent over all trials.
struct Sending {
    data: TxRunData,
    zero_loss: Option<ZeroLoss>,
    all_flows: Vec<FlowSent>,
    sent_total: u64,
}

/// Sends: one run at the configured rate, or the zero-loss search.
fn send_all(sender: &Sender<'_>, receiver: Option<&Receiver>) -> Result<Sending, PpsError> {
    let cfg = sender.cfg;
    let mut zero_loss = None;
    let mut all_flows: Vec<FlowSent> = Vec::new();
    let mut sent_total = 0u64;
    let data = match (cfg.search, receiver) {
        (Some(search), Some(rx)) => {
            let (z, best) = find_zero_loss(sender, rx, &search, &mut all_flows, &mut sent_total)?;
            zero_loss = Some(z);
            best
        }
        _ => {
            let d = sender.run(cfg.rate_per_s, cfg.duration, cfg.count)?;
            for r in &d.results {
                all_flows.extend_from_slice(&r.flows);
            }
            sent_total = sent_of(&d);
            if let Some(rx) = receiver {
                rx.settle(
                    Duration::from_millis(100),
                    Duration::from_secs(2),
                    Some(sent_total),
                );
            }
            d
        }
    };
    Ok(Sending {
        data,
        zero_loss,
        all_flows,
        sent_total,
    })
}

/// Stops the local receiver (in its namespace) and builds its report.
fn finish_receiver(
    receiver: Option<Receiver>,
    cfg: &PpsConfig,
    sending: &Sending,
) -> Result<Option<RxReport>, PpsError> {
    let (Some(rx), Some(p)) = (receiver, &cfg.peer) else {
        return Ok(None);
    };
    let netns = p.netns.clone();
    let run = netdev::in_netns(netns.as_deref(), move || rx.finish())??;
    let speed_rx = netdev::in_netns(netns.as_deref(), || netdev::link_speed_mbps(&p.dev))?;
    let active_s = send_ns_of(&sending.data) as f64 / 1e9;
    Ok(Some(rx_report(
        run,
        netns,
        Some(&sending.all_flows),
        Some(sending.sent_total),
        if sending.zero_loss.is_some() {
            None
        } else {
            Some(active_s)
        },
        speed_rx,
    )))
}

/// Per-queue rates and CPU shares of a run.
fn per_queue_reports(data: &TxRunData) -> Vec<TxQueueReport> {
    data.results
        .iter()
        .map(|r| {
            let wall = r.send_ns.max(1) as f64;
            TxQueueReport {
                result: r.clone(),
                pps: r.sent as f64 * 1e9 / wall,
                // The thread's CPU time covers the drain after sending too:
                // over the send time alone it read up to 800% after an
                // early Ctrl-C.
                thread_cpu_pct: r.cpu_ns as f64 * 100.0 / r.wall_ns.max(r.send_ns).max(1) as f64,
                rate_wait_pct: r.rate_wait_ns as f64 * 100.0 / wall,
            }
        })
        .collect()
}

/// The sender's report: figures, per-queue detail, receiver and verdict.
fn tx_report(
    cfg: &PpsConfig,
    sending: Sending,
    speed_tx: Option<u64>,
    rx_report: Option<RxReport>,
    interrupted: bool,
) -> Result<TxReport, PpsError> {
    let Sending {
        data, zero_loss, ..
    } = sending;
    let sent = sent_of(&data);
    if sent == 0 && !interrupted {
        return Err(PpsError::NothingSent(
            "no TX completion; is the interface's carrier up?".into(),
        ));
    }
    let pps = pps_of(&data);
    let duration_s = send_ns_of(&data) as f64 / 1e9;
    let line_rate_pct = speed_tx.map(|s| pps * 100.0 / report::line_rate_pps(s, cfg.wire_size));
    let mut xstats = XdpStatistics::default();
    for r in &data.results {
        xstats.add(&r.xdp_statistics);
    }
    let delta = data.link_after.stats.since(&data.link_before.stats);
    if !interrupted && delta.tx_packets == 0 && delta.tx_dropped > 0 {
        // Copy mode completes frames the device then drops: "sent" would be a
        // count of nothing.
        return Err(PpsError::NothingSent(format!(
            "the device took none of the {sent} frames (tx_packets +0, tx_dropped +{}): is {}'s carrier up (its peer up, a cable in)?",
            delta.tx_dropped, cfg.dev
        )));
    }
    let per_queue = per_queue_reports(&data);
    let tx_cpu_busy = data
        .cpu_usage
        .iter()
        .map(|c| c.busy_pct)
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
    let rate_target = if zero_loss.is_some() {
        None
    } else {
        cfg.rate_per_s
    };
    let verdict = report::verdict(&VerdictInput {
        rate_target,
        tx_pps: pps,
        line_rate_pct,
        tx_cpu_busy_pct: tx_cpu_busy,
        kicks: data.results.iter().map(|r| r.kicks).sum(),
        kick_backpressure: data.results.iter().map(|r| r.kick_backpressure).sum(),
        starved: data.results.iter().map(|r| r.starved).sum(),
        rate_wait_pct: per_queue
            .iter()
            .map(|q| q.rate_wait_pct)
            .fold(0.0, f64::max),
        tx_thread_cpu_pct: per_queue
            .iter()
            .map(|q| q.thread_cpu_pct)
            .fold(0.0, f64::max),
        tx_dropped: delta.tx_dropped,
        sent,
        rx: rx_report
            .as_ref()
            .filter(|_| zero_loss.is_none())
            .map(rx_facts),
    });
    let zero_copy = data.results.iter().all(|r| r.zero_copy);
    Ok(TxReport {
        schema: "xload-pps/1",
        dev: cfg.dev.clone(),
        queues: cfg.queues.clone(),
        flows: cfg.flows as usize,
        frame_size: cfg.wire_size,
        ip_version: if cfg.dst_ip.is_ipv4() { 4 } else { 6 },
        xsk_mode: if zero_copy { "zerocopy" } else { "copy" },
        duration_s,
        rate_target,
        sent,
        submitted: data.results.iter().map(|r| r.submitted).sum(),
        pps,
        bits_per_s: pps * cfg.wire_size as f64 * 8.0,
        link_speed_mbps: speed_tx,
        line_rate_pct,
        per_queue,
        cpu: data.cpu_usage.clone(),
        xdp_statistics: xstats,
        interface: InterfaceReport {
            dev: cfg.dev.clone(),
            netns: None,
            link_speed_mbps: speed_tx,
            delta,
        },
        delivered: rx_report.as_ref().map(|r| r.delivered),
        lost: rx_report.as_ref().map(|r| r.lost),
        reordered: rx_report.as_ref().map(|r| r.reordered),
        duplicated: rx_report.as_ref().map(|r| r.duplicated),
        rx: rx_report,
        zero_loss,
        interrupted,
        verdict,
    })
}

fn start_peer(p: &PeerConfig, dst_port: u16) -> Result<Receiver, PpsError> {
    let plan_for = |link: &LinkInfo| {
        let queues: Vec<u32> = p
            .queues
            .clone()
            .unwrap_or_else(|| (0..link.num_rx_queues.max(1)).collect());
        let cpus = cpus_for(queues.len(), &p.cpus, true)?
            .into_iter()
            .map(Some)
            .collect();
        Ok::<_, PpsError>(RxPlan {
            dev: p.dev.clone(),
            queues,
            cpus,
            mode: p.mode,
            dst_port,
            drop_every: p.drop_every,
            bind_mode: BindMode::Auto,
            force_generic: p.force_generic,
            verify_checksums: true,
            // Started before the sender: a flow's lost first frames count.
            from_first_seen: false,
        })
    };
    let r = netdev::in_netns(p.netns.as_deref(), || -> Result<Receiver, PpsError> {
        let link = netdev::link_by_name(&p.dev)?;
        Ok(Receiver::start(plan_for(&link)?)?)
    })??;
    Ok(r)
}

fn find_zero_loss(
    sender: &Sender<'_>,
    rx: &Receiver,
    search: &SearchConfig,
    all_flows: &mut Vec<FlowSent>,
    sent_total: &mut u64,
) -> Result<(ZeroLoss, TxRunData), PpsError> {
    let mut trials = Vec::new();
    let mut trial = |rate: Option<f64>| -> Result<(Trial, TxRunData), PpsError> {
        let before = rx.delivered_now();
        let matched_before = rx.counters_now().matched_packets;
        let d = sender.run(rate, search.trial, None)?;
        rx.settle(
            Duration::from_millis(100),
            Duration::from_secs(2),
            Some(matched_before + sent_of(&d)),
        );
        let delivered = rx.delivered_now().saturating_sub(before);
        let sent = sent_of(&d);
        for r in &d.results {
            all_flows.extend_from_slice(&r.flows);
        }
        *sent_total += sent;
        let t = Trial {
            rate_target: rate,
            sent,
            delivered,
            lost: sent.saturating_sub(delivered),
            pps: pps_of(&d),
        };
        trials.push(t);
        Ok((t, d))
    };
    let (first, first_data) = trial(None)?;
    let max_pps = first.pps;
    if first.lost == 0 {
        return Ok((
            ZeroLoss {
                rate_pps: max_pps,
                bracket_pps: (max_pps, None),
                trial_s: search.trial.as_secs_f64(),
                resolution_pct: search.resolution_pct,
                trials: vec![first],
                notes: vec!["no loss even at the generator's maximum rate: the path is faster than this generator".into()],
            },
            first_data,
        ));
    }
    // Binary search over offered rates; the bracket reports what was
    // actually sent (a trial can fall short of its offered rate when the
    // generator is starved of CPU, and then proves nothing above it).
    let (mut lo, mut hi) = (0.0f64, max_pps);
    let mut best_ok: Option<(f64, TxRunData)> = None;
    let mut lowest_lossy = first.pps;
    let mut short = 0;
    let mut n = 1;
    while n < search.max_trials
        && hi - lo > hi * search.resolution_pct / 100.0
        && !sender.stop.load(Ordering::Relaxed)
    {
        n += 1;
        let mid = (lo + hi) / 2.0;
        let (t, d) = trial(Some(mid))?;
        if t.pps < mid * 0.95 {
            short += 1;
        }
        if t.lost == 0 {
            lo = mid;
            if best_ok.as_ref().is_none_or(|(p, _)| t.pps > *p) {
                best_ok = Some((t.pps, d));
            }
        } else {
            hi = mid;
            lowest_lossy = lowest_lossy.min(t.pps);
        }
    }
    let mut notes = Vec::new();
    if short > 0 {
        notes.push(format!(
            "{short} trial(s) sent less than 95% of the offered rate (generator short of CPU): rates are what was actually sent"
        ));
    }
    let (rate, data) = match best_ok {
        Some((p, d)) => (p, d),
        None => {
            notes.push("every trial lost frames".into());
            (0.0, first_data)
        }
    };
    Ok((
        ZeroLoss {
            rate_pps: rate,
            bracket_pps: (rate, Some(lowest_lossy.max(rate))),
            trial_s: search.trial.as_secs_f64(),
            resolution_pct: search.resolution_pct,
            trials,
            notes,
        },
        data,
    ))
}

fn rx_facts(r: &RxReport) -> RxFacts {
    RxFacts {
        lost: r.lost.unwrap_or(0),
        delivered: r.delivered,
        ring_full: r.xdp_statistics.rx_ring_full,
        fill_empty: r.xdp_statistics.rx_fill_ring_empty_descs,
        xsk_dropped: r.xdp_statistics.rx_dropped,
        redirect_failed: r.xdp_counters.redirect_failed,
        injected_drops: r.xdp_counters.injected_drops,
        rx_dropped: r.interface.delta.rx_dropped,
        // Count mode: the receiver is the XDP program, i.e. softirq time on
        // the CPUs; xsk mode: the receiving threads' own CPU time (their
        // CPUs may be shared with the sender on one host).
        rx_cpu_busy_pct: match r.mode {
            RxMode::Count => r.cpu.iter().map(|c| c.softirq_pct).reduce(f64::max),
            RxMode::Xsk => r
                .per_queue
                .iter()
                .map(|q| q.thread_cpu_pct)
                .reduce(f64::max),
        },
    }
}

/// Builds the receiver report. `expected` (flows the sender in this
/// process sent, with their final sequence numbers) turns tail loss into
/// counted loss; `sent_total` gives count mode a loss figure.
pub fn rx_report(
    run: RxRun,
    netns: Option<String>,
    expected: Option<&[FlowSent]>,
    sent_total: Option<u64>,
    active_s: Option<f64>,
    speed_mbps: Option<u64>,
) -> RxReport {
    let mut tracker = SeqTracker::new();
    let mut hist: Option<Histogram<u64>> = None;
    let mut xstats = XdpStatistics::default();
    let (mut foreign, mut csum) = (0, 0);
    for q in &run.queues {
        tracker.merge(&q.tracker);
        xstats.add(&q.xdp_statistics);
        foreign += q.foreign;
        csum += q.checksum_errors;
        if let Some(h) = &q.latency_ns {
            match hist.as_mut() {
                Some(acc) => {
                    let _ = acc.add(h);
                }
                None => hist = Some(h.clone()),
            }
        }
    }
    if let Some(exp) = expected {
        for f in exp {
            tracker.expect(f.key, f.next_seq);
        }
    }
    let totals = tracker.totals();
    let c = run.counters;
    let (delivered, lost, reordered, duplicated, flows) = match run.plan.mode {
        RxMode::Xsk => (
            totals.delivered,
            Some(totals.lost),
            Some(totals.reordered),
            Some(totals.duplicated),
            Some(totals.flows),
        ),
        RxMode::Count => {
            let d = c.matched_packets.saturating_sub(c.injected_drops);
            (d, sent_total.map(|s| s.saturating_sub(d)), None, None, None)
        }
    };
    let duration_s = active_s.unwrap_or(run.wall_ns as f64 / 1e9).max(1e-9);
    let pps = delivered as f64 / duration_s;
    let avg_wire = if c.matched_packets > 0 {
        c.matched_bytes as f64 / c.matched_packets as f64 + FCS_LEN as f64
    } else {
        64.0
    };
    let line_rate_pct =
        speed_mbps.map(|s| pps * 100.0 / report::line_rate_pps(s, avg_wire.round() as usize));
    let delta = run.link_after.stats.since(&run.link_before.stats);
    let zero_copy = run.queues.iter().all(|q| q.zero_copy);
    let mut r = RxReport {
        schema: "xload-pps-rx/1",
        dev: run.plan.dev.clone(),
        netns,
        mode: run.plan.mode,
        attach_mode: run.attach_mode,
        xsk_mode: match run.plan.mode {
            RxMode::Xsk => Some(if zero_copy { "zerocopy" } else { "copy" }),
            RxMode::Count => None,
        },
        queues: run.plan.queues.clone(),
        duration_s,
        delivered,
        lost,
        reordered,
        duplicated,
        flows,
        foreign,
        checksum_errors: csum,
        pps,
        bits_per_s: pps * avg_wire * 8.0,
        line_rate_pct,
        latency_us: hist.as_ref().and_then(LatencyUs::from_ns_histogram),
        xdp_counters: c,
        xdp_statistics: xstats,
        interface: InterfaceReport {
            dev: run.plan.dev.clone(),
            netns: None,
            link_speed_mbps: speed_mbps,
            delta,
        },
        per_queue: run.queues,
        cpu: run.cpu_usage,
        verdict: report::rx_verdict(&RxFacts::default(), 0.0),
    };
    r.interface.netns = r.netns.clone();
    r.verdict = report::rx_verdict(&rx_facts(&r), pps);
    r
}

/// Runs `xload pps-rx` for `cfg.duration` (or until `stop`).
pub fn run_pps_rx(cfg: &PpsRxConfig, stop: &Arc<AtomicBool>) -> Result<RxReport, PpsError> {
    let link = netdev::link_by_name(&cfg.dev)?;
    check_up(&link)?;
    let queues = cfg
        .queues
        .clone()
        .unwrap_or_else(|| (0..link.num_rx_queues.max(1)).collect());
    let cpus = cpus_for(queues.len(), &cfg.cpus, false)?
        .into_iter()
        .map(Some)
        .collect();
    let rx = Receiver::start(RxPlan {
        dev: cfg.dev.clone(),
        queues,
        cpus,
        mode: cfg.mode,
        dst_port: cfg.dst_port,
        drop_every: cfg.drop_every,
        bind_mode: cfg.bind_mode,
        force_generic: cfg.force_generic,
        verify_checksums: cfg.verify_checksums,
        // Standalone: the sender may have started first.
        from_first_seen: true,
    })?;
    // The active window (first to last frame). In xsk mode the queue
    // threads time the batches they read; count mode has no threads, so its
    // counters are sampled every millisecond (first to last growth).
    let sample = Duration::from_millis(match cfg.mode {
        RxMode::Count => 1,
        RxMode::Xsk => 50,
    });
    let start = clock::monotonic_ns();
    let end = start.saturating_add(cfg.duration.as_nanos() as u64);
    let mut last = rx.delivered_now();
    let (mut first_grow, mut last_grow) = (None, None);
    let mut prev_t = start;
    while clock::monotonic_ns() < end && !stop.load(Ordering::Relaxed) {
        let left = end.saturating_sub(clock::monotonic_ns());
        std::thread::sleep(Duration::from_nanos(left).min(sample));
        let now = clock::monotonic_ns();
        let d = rx.delivered_now();
        if d > last {
            first_grow.get_or_insert(prev_t);
            last_grow = Some(now);
        }
        last = d;
        prev_t = now;
    }
    let sampled_s = match (first_grow, last_grow) {
        (Some(a), Some(b)) if b > a => Some((b - a) as f64 / 1e9),
        _ => None,
    };
    let run = rx.finish()?;
    let active_s = run.rx_window_s().or(sampled_s);
    Ok(rx_report(
        run,
        None,
        None,
        None,
        active_s,
        netdev::link_speed_mbps(&cfg.dev),
    ))
}

#[cfg(test)]
mod cpu_tests {
    use super::cpus_for;

    #[test]
    fn queues_take_the_listed_cpus_in_turn() {
        // Four queues on two CPUs: two each, in queue order.
        assert_eq!(
            cpus_for(4, &Some(vec![0, 1]), false).unwrap(),
            vec![0, 1, 0, 1]
        );
        assert_eq!(cpus_for(3, &Some(vec![1]), false).unwrap(), vec![1, 1, 1]);
        // More CPUs than queues: the first ones.
        assert_eq!(cpus_for(1, &Some(vec![1, 0]), false).unwrap(), vec![1]);
        // A given list is not reversed; the default one is.
        assert_eq!(cpus_for(2, &Some(vec![0, 1]), true).unwrap(), vec![0, 1]);
    }
}
