//! Reports of `xload pps` and `xload pps-rx`: the serialisable model (JSON
//! keys `sent`, `pps` and `delivered`, `lost`, `reordered`, `duplicated`
//! keep their meaning), line-rate arithmetic, the verdict on what limited
//! the rate, and the text rendering.

use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::clock::CpuUsage;
use crate::frame::WIRE_OVERHEAD_LEN;
use crate::netdev::LinkStats;
use crate::program::XdpCounters;
use crate::rx::RxQueueResult;
use crate::tx::TxQueueResult;
use crate::xsk::XdpStatistics;

/// Frames per second a link of `speed_mbps` carries at `wire_size` bytes
/// (frame with FCS) plus preamble, start delimiter and inter-frame gap.
pub fn line_rate_pps(speed_mbps: u64, wire_size: usize) -> f64 {
    speed_mbps as f64 * 1e6 / ((wire_size + WIRE_OVERHEAD_LEN) as f64 * 8.0)
}

/// One-way latency summary in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencyUs {
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub samples: u64,
}

impl LatencyUs {
    pub fn from_ns_histogram(h: &Histogram<u64>) -> Option<LatencyUs> {
        if h.is_empty() {
            return None;
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Some(LatencyUs {
            min: us(h.min()),
            mean: h.mean() / 1000.0,
            p50: us(h.value_at_quantile(0.5)),
            p90: us(h.value_at_quantile(0.9)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
            samples: h.len(),
        })
    }
}

/// Interface counters over the run.
#[derive(Debug, Clone, Serialize)]
pub struct InterfaceReport {
    pub dev: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    pub link_speed_mbps: Option<u64>,
    /// Counter deltas (same values as /sys/class/net/DEV/statistics/*).
    pub delta: LinkStats,
}

/// What limited the rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// One of: `rate-target`, `scheduling`, `line-rate`, `generator-cpu`,
    /// `tx-backpressure`, `receiver-ring-full`, `receiver-cpu`,
    /// `device-drops`, `receiver-queues` (standalone receiver), `loss`, `sender`,
    /// `undetermined`.
    pub limit: &'static str,
    pub summary: String,
    pub reasons: Vec<String>,
}

/// Per-queue line of the sender report.
#[derive(Debug, Clone, Serialize)]
pub struct TxQueueReport {
    #[serde(flatten)]
    pub result: TxQueueResult,
    pub pps: f64,
    /// Thread CPU time over wall time, percent of one CPU.
    pub thread_cpu_pct: f64,
    pub rate_wait_pct: f64,
}

/// Receiver side (standalone `pps-rx`, or the local peer of `pps`).
#[derive(Debug, Clone, Serialize)]
pub struct RxReport {
    pub schema: &'static str,
    pub dev: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// `xsk` or `count`.
    pub mode: crate::program::RxMode,
    /// `native` or `generic` XDP.
    pub attach_mode: crate::program::AttachMode,
    /// `zerocopy`, `copy`, or absent in count mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xsk_mode: Option<&'static str>,
    pub queues: Vec<u32>,
    pub duration_s: f64,
    /// Distinct xload frames received (count mode: matched in XDP minus
    /// test-mode drops).
    pub delivered: u64,
    /// Sequence numbers never received (count mode: only known when the
    /// sender ran in the same process, else null).
    pub lost: Option<u64>,
    pub reordered: Option<u64>,
    pub duplicated: Option<u64>,
    pub flows: Option<u64>,
    /// Non-xload frames on the sockets.
    pub foreign: u64,
    pub checksum_errors: u64,
    /// Delivered frames per second over the active window.
    pub pps: f64,
    pub bits_per_s: f64,
    pub line_rate_pct: Option<f64>,
    pub latency_us: Option<LatencyUs>,
    pub xdp_counters: XdpCounters,
    pub xdp_statistics: XdpStatistics,
    pub interface: InterfaceReport,
    pub per_queue: Vec<RxQueueResult>,
    pub cpu: Vec<CpuUsage>,
    pub verdict: Verdict,
}

/// One trial of the zero-loss search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Trial {
    /// Offered rate (None = as fast as possible).
    pub rate_target: Option<f64>,
    pub sent: u64,
    pub delivered: u64,
    pub lost: u64,
    /// Rate actually sent.
    pub pps: f64,
}

/// Result of `--find-zero-loss`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ZeroLoss {
    /// Highest sent rate of a trial without loss (0 if none).
    pub rate_pps: f64,
    /// [highest sent rate without loss, lowest sent rate with loss]; the
    /// second is null when even the generator's maximum lost nothing.
    pub bracket_pps: (f64, Option<f64>),
    pub trial_s: f64,
    pub resolution_pct: f64,
    pub trials: Vec<Trial>,
    pub notes: Vec<String>,
}

/// `xload pps` report.
#[derive(Debug, Clone, Serialize)]
pub struct TxReport {
    pub schema: &'static str,
    pub dev: String,
    pub queues: Vec<u32>,
    pub flows: usize,
    /// Frame size on the wire including FCS.
    pub frame_size: usize,
    pub ip_version: u8,
    /// `zerocopy` or `copy`.
    pub xsk_mode: &'static str,
    pub duration_s: f64,
    pub rate_target: Option<f64>,
    /// TX completions: frames the kernel took and handed back.
    pub sent: u64,
    pub submitted: u64,
    /// Sent frames per second.
    pub pps: f64,
    /// Layer-2 bits per second (frames with FCS).
    pub bits_per_s: f64,
    pub link_speed_mbps: Option<u64>,
    pub line_rate_pct: Option<f64>,
    pub per_queue: Vec<TxQueueReport>,
    pub cpu: Vec<CpuUsage>,
    pub xdp_statistics: XdpStatistics,
    pub interface: InterfaceReport,
    /// Receiver-side figures when the receiver ran in this process (absent
    /// otherwise); the inner None is a figure its mode cannot know (count
    /// mode has no sequence numbers), written null as by `pps-rx`, so the
    /// keys are there whenever the receiver ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reordered: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicated: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx: Option<RxReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero_loss: Option<ZeroLoss>,
    pub interrupted: bool,
    pub verdict: Verdict,
}

/// Facts the verdict weighs.
#[derive(Debug, Clone, Default)]
pub struct VerdictInput {
    pub rate_target: Option<f64>,
    pub tx_pps: f64,
    pub line_rate_pct: Option<f64>,
    /// Busy % of the sender's CPUs (max over them), or thread CPU %.
    pub tx_cpu_busy_pct: Option<f64>,
    pub kicks: u64,
    pub kick_backpressure: u64,
    pub starved: u64,
    /// Share of the sending time the threads slept on the token bucket.
    pub rate_wait_pct: f64,
    /// Thread CPU time over wall time (max over the sender threads).
    pub tx_thread_cpu_pct: f64,
    pub tx_dropped: u64,
    /// Frames the sockets completed (AF_XDP copy mode completes a frame the
    /// device then drops, so this is not what reached the wire).
    pub sent: u64,
    /// Receiver facts, when known.
    pub rx: Option<RxFacts>,
}

#[derive(Debug, Clone, Default)]
pub struct RxFacts {
    pub lost: u64,
    pub delivered: u64,
    pub ring_full: u64,
    pub fill_empty: u64,
    pub xsk_dropped: u64,
    pub redirect_failed: u64,
    pub injected_drops: u64,
    pub rx_dropped: u64,
    pub rx_cpu_busy_pct: Option<f64>,
}

/// Names what limited the rate, strongest evidence first.
pub fn verdict(v: &VerdictInput) -> Verdict {
    let mut reasons = Vec::new();
    if let Some(rx) = v.rx.as_ref().filter(|rx| rx.lost > 0) {
        return loss_verdict(v, rx, reasons);
    }
    // The sending device dropped what the sockets completed (no carrier, a
    // full device queue): the rate and the count are not what left.
    if v.tx_dropped > 0 && v.tx_dropped.saturating_mul(100) >= v.sent.max(1) {
        reasons.push(format!(
            "tx_dropped {} on the sender: the device dropped {:.1}% of the {} frames the sockets completed",
            v.tx_dropped,
            v.tx_dropped as f64 * 100.0 / v.sent.max(1) as f64,
            v.sent
        ));
        return Verdict {
            limit: "device-drops",
            summary: "the sending device dropped frames it was given (is its carrier up? is its queue full?): fewer left than the rate says".into(),
            reasons,
        };
    }
    if let Some(target) = v.rate_target {
        if let Some(verdict) = rate_verdict(v, target, &mut reasons) {
            return verdict;
        }
    }
    if let Some(pct) = v.line_rate_pct {
        if pct >= 95.0 {
            return Verdict {
                limit: "line-rate",
                summary: format!("the link is full ({pct:.1}% of line rate)"),
                reasons,
            };
        }
    }
    let bp_share = if v.kicks > 0 {
        v.kick_backpressure as f64 / v.kicks as f64
    } else {
        0.0
    };
    if bp_share > 0.10 || v.tx_dropped > 0 {
        reasons.push(format!(
            "{:.0}% of {} sendto kicks hit EAGAIN/EBUSY/ENOBUFS; {} turns found no free frame; tx_dropped {}",
            bp_share * 100.0,
            v.kicks,
            v.starved,
            v.tx_dropped
        ));
        return Verdict {
            limit: "tx-backpressure",
            summary: "the device (or completion ring) pushed back on the sender".into(),
            reasons,
        };
    }
    if let Some(busy) = v.tx_cpu_busy_pct {
        reasons.push(format!("sender CPU busy {busy:.0}%"));
        if busy >= 90.0 && v.tx_thread_cpu_pct >= 50.0 {
            return Verdict {
                limit: "generator-cpu",
                summary: "the generator's CPU was saturated (in copy mode the kernel transmit path runs on it too)".into(),
                reasons,
            };
        }
    }
    if let Some(rx) = &v.rx {
        if let Some(busy) = rx.rx_cpu_busy_pct {
            if busy >= 90.0 {
                reasons.push(format!("receiver CPU busy {busy:.0}%"));
                return Verdict {
                    limit: "receiver-cpu",
                    summary: "the receiver's CPU was saturated".into(),
                    reasons,
                };
            }
        }
    }
    Verdict {
        limit: "undetermined",
        summary: "no resource was clearly saturated".into(),
        reasons,
    }
}

/// The verdict when the receiver counted lost frames: the counter that
/// explains the loss, or loss on the wire.
fn loss_verdict(v: &VerdictInput, rx: &RxFacts, mut reasons: Vec<String>) -> Verdict {
    let lost_pct = rx.lost as f64 * 100.0 / (rx.lost + rx.delivered).max(1) as f64;
    reasons.push(format!("{} frames lost ({lost_pct:.3}%)", rx.lost));
    if rx.injected_drops > 0 {
        reasons.push(format!(
            "{} of them dropped on purpose by the test-mode XDP program",
            rx.injected_drops
        ));
    }
    if rx.ring_full > 0 || rx.xsk_dropped > 0 {
        reasons.push(format!(
            "receiver socket: {} dropped because the RX ring was full, {} for lack of fill buffers (fill ring empty {} times)",
            rx.ring_full, rx.xsk_dropped, rx.fill_empty
        ));
        return Verdict {
            limit: "receiver-ring-full",
            summary: "the receiving application could not drain its AF_XDP ring fast enough".into(),
            reasons,
        };
    }
    if rx.redirect_failed > 0 {
        reasons.push(format!(
            "{} frames arrived on a queue without an AF_XDP socket",
            rx.redirect_failed
        ));
    }
    if rx.rx_dropped > 0 || v.tx_dropped > 0 {
        reasons.push(format!(
            "interface drops: rx_dropped {} on the receiver, tx_dropped {} on the sender",
            rx.rx_dropped, v.tx_dropped
        ));
        return Verdict {
            limit: "device-drops",
            summary:
                "frames were dropped by the devices (queues or rings between sender and receiver)"
                    .into(),
            reasons,
        };
    }
    if rx.injected_drops >= rx.lost {
        return Verdict {
            limit: "loss",
            summary: "loss came from the test-mode drop injection".into(),
            reasons,
        };
    }
    if rx.redirect_failed == 0 {
        reasons.push(
            "no ring, device or socket counter explains it: loss on the wire or in the driver"
                .into(),
        );
    }
    Verdict {
        limit: "loss",
        summary: "frames were lost between sender and receiver".into(),
        reasons,
    }
}

/// With a --rate target: met, or missed because the sender's wake-ups came
/// late; `None` when neither, and the search goes on.
fn rate_verdict(v: &VerdictInput, target: f64, reasons: &mut Vec<String>) -> Option<Verdict> {
    if v.tx_pps >= target * 0.98 {
        return Some(Verdict {
            limit: "rate-target",
            summary: format!(
                "the --rate target ({}) was met; the path was not pushed to its limit",
                fmt_rate(target)
            ),
            reasons: std::mem::take(reasons),
        });
    }
    reasons.push(format!(
        "--rate {} asked, {} reached",
        fmt_rate(target),
        fmt_rate(v.tx_pps)
    ));
    if v.rate_wait_pct >= 20.0 {
        reasons.push(format!(
            "the sender threads slept {:.0}% of the time waiting for tokens and used {:.0}% of a CPU",
            v.rate_wait_pct, v.tx_thread_cpu_pct
        ));
        if let Some(busy) = v.tx_cpu_busy_pct {
            reasons.push(format!("their CPUs were {busy:.0}% busy"));
        }
        return Some(Verdict {
            limit: "scheduling",
            summary: "pacing fell short while the sender was mostly idle: its wake-ups came late (CPU shared with other work)".into(),
            reasons: std::mem::take(reasons),
        });
    }
    None
}

/// Verdict of a standalone receiver.
pub fn rx_verdict(rx: &RxFacts, rx_pps: f64) -> Verdict {
    let mut reasons = Vec::new();
    let socket_drops = rx.ring_full + rx.xsk_dropped;
    if socket_drops > 0 && socket_drops.saturating_mul(1000) < rx.delivered {
        // A handful (under 0.1%), typically while the socket's rings were
        // first filled: no drain problem.
        reasons.push(format!(
            "{} frames dropped with the RX ring full, {} without fill buffers: under 0.1%, not a drain limit",
            rx.ring_full, rx.xsk_dropped
        ));
    } else if socket_drops > 0 {
        reasons.push(format!(
            "{} frames dropped with the RX ring full, {} without fill buffers",
            rx.ring_full, rx.xsk_dropped
        ));
        return Verdict {
            limit: "receiver-ring-full",
            summary: "this receiver could not drain its AF_XDP ring fast enough".into(),
            reasons,
        };
    }
    if rx.rx_dropped > 0 {
        reasons.push(format!("interface rx_dropped {}", rx.rx_dropped));
        return Verdict {
            limit: "device-drops",
            summary: "the receiving device dropped frames".into(),
            reasons,
        };
    }
    // Frames this host's own XDP program matched and then could not hand to
    // a socket, or dropped on purpose: lost here, not upstream.
    if rx.redirect_failed > 0 && rx.redirect_failed.saturating_mul(100) < rx.delivered {
        // Under 1%: the socket was not ready yet while traffic was already
        // flowing (a receiver started after its sender), no lasting limit.
        reasons.push(format!(
            "{} frames could not be redirected to a socket (under 1%: while the socket started)",
            rx.redirect_failed
        ));
    } else if rx.redirect_failed > 0 {
        reasons.push(format!(
            "{} frames arrived on a queue without an AF_XDP socket (the XDP program could not redirect them)",
            rx.redirect_failed
        ));
        return Verdict {
            limit: "receiver-queues",
            summary: "frames reached this host on queues no socket was bound to (bind every RX queue, or steer the flows)".into(),
            reasons,
        };
    }
    if rx.injected_drops > 0 && rx.injected_drops >= rx.lost {
        reasons.push(format!(
            "{} frames dropped on purpose by the test-mode XDP program",
            rx.injected_drops
        ));
        return Verdict {
            limit: "loss",
            summary: "loss came from the test-mode drop injection".into(),
            reasons,
        };
    }
    if let Some(busy) = rx.rx_cpu_busy_pct {
        reasons.push(format!("receiver CPU use {busy:.0}%"));
        if busy >= 90.0 {
            return Verdict {
                limit: "receiver-cpu",
                summary: "the receiver's CPU was saturated".into(),
                reasons,
            };
        }
    }
    if rx.lost > 0 {
        reasons.push(format!(
            "{} frames lost before reaching this host's XDP hook",
            rx.lost
        ));
        return Verdict {
            limit: "loss",
            summary: "frames were lost upstream (wire, switch or sender)".into(),
            reasons,
        };
    }
    Verdict {
        limit: "sender",
        summary: format!(
            "the receiver kept up at {}: the sender's rate was the limit",
            fmt_rate(rx_pps)
        ),
        reasons,
    }
}

/// "1.23 Mpps" style.
pub fn fmt_rate(pps: f64) -> String {
    if pps >= 1e6 {
        format!("{:.3} Mpps", pps / 1e6)
    } else if pps >= 1e3 {
        format!("{:.1} kpps", pps / 1e3)
    } else if pps >= 10.0 || pps == 0.0 {
        format!("{pps:.0} pps")
    } else {
        // Slow rates keep their fraction: `--rate 0.5` is not "0 pps".
        format!("{pps:.2} pps")
    }
}

fn fmt_bits(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbit/s", bps / 1e9)
    } else {
        format!("{:.1} Mbit/s", bps / 1e6)
    }
}

fn push_latency(out: &mut String, l: &Option<LatencyUs>) {
    if let Some(l) = l {
        let _ = writeln!(
            out,
            "  one-way latency: min {:.1} µs, p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs, max {:.1} µs ({} samples)",
            l.min, l.p50, l.p99, l.p999, l.max, l.samples
        );
    }
}

fn push_cpu(out: &mut String, cpus: &[CpuUsage]) {
    for c in cpus {
        let _ = writeln!(
            out,
            "  cpu{}: busy {:.0}% (user {:.0}%, sys {:.0}%, softirq {:.0}%)",
            c.cpu, c.busy_pct, c.user_pct, c.system_pct, c.softirq_pct
        );
    }
}

fn push_verdict(out: &mut String, v: &Verdict) {
    let _ = writeln!(out, "verdict: {} — {}", v.limit, v.summary);
    for r in &v.reasons {
        let _ = writeln!(out, "  - {r}");
    }
}

impl RxReport {
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "xload pps-rx on {}{}: {} mode, XDP {}{}, queues {:?}, {:.2} s",
            self.dev,
            self.netns
                .as_deref()
                .map(|n| format!(" (netns {n})"))
                .unwrap_or_default(),
            match self.mode {
                crate::program::RxMode::Xsk => "AF_XDP",
                crate::program::RxMode::Count => "count-and-drop",
            },
            match self.attach_mode {
                crate::program::AttachMode::Native => "native",
                crate::program::AttachMode::Generic => "generic",
            },
            self.xsk_mode.map(|m| format!(", {m}")).unwrap_or_default(),
            self.queues,
            self.duration_s
        );
        if let Some(e) = self
            .per_queue
            .iter()
            .find_map(|q| q.zero_copy_error.as_ref())
        {
            let _ = writeln!(o, "  zero-copy unavailable, copy mode used: {e}");
        }
        let opt = |x: Option<u64>| x.map_or("n/a".to_string(), |v| v.to_string());
        let _ = writeln!(
            o,
            "  delivered {}  lost {}  reordered {}  duplicated {}  flows {}",
            self.delivered,
            opt(self.lost),
            opt(self.reordered),
            opt(self.duplicated),
            opt(self.flows)
        );
        let _ = writeln!(
            o,
            "  rate {} ({}){}",
            fmt_rate(self.pps),
            fmt_bits(self.bits_per_s),
            self.line_rate_pct
                .map(|p| format!(", {p:.1}% of line rate"))
                .unwrap_or_default()
        );
        push_latency(&mut o, &self.latency_us);
        if self.foreign > 0 || self.checksum_errors > 0 {
            let _ = writeln!(
                o,
                "  foreign frames {}  checksum errors {}",
                self.foreign, self.checksum_errors
            );
        }
        let s = &self.xdp_statistics;
        let _ = writeln!(
            o,
            "  XDP program: matched {} other {} redirect-failed {} injected-drops {}",
            self.xdp_counters.matched_packets,
            self.xdp_counters.other_packets,
            self.xdp_counters.redirect_failed,
            self.xdp_counters.injected_drops
        );
        if self.xsk_mode.is_some() {
            let _ = writeln!(
                o,
                "  XDP_STATISTICS: rx_dropped {} rx_ring_full {} fill_ring_empty {} rx_invalid {}",
                s.rx_dropped, s.rx_ring_full, s.rx_fill_ring_empty_descs, s.rx_invalid_descs
            );
        }
        let d = &self.interface.delta;
        let _ = writeln!(
            o,
            "  interface {}: rx_packets {} rx_dropped {} rx_missed {} rx_errors {}",
            self.interface.dev, d.rx_packets, d.rx_dropped, d.rx_missed_errors, d.rx_errors
        );
        for q in &self.per_queue {
            let _ = writeln!(
                o,
                "  queue {}{}: frames {} delivered {}, thread CPU {:.0}%",
                q.queue,
                q.cpu.map(|c| format!(" (cpu{c})")).unwrap_or_default(),
                q.frames,
                q.tracker.delivered(),
                q.thread_cpu_pct
            );
        }
        push_cpu(&mut o, &self.cpu);
        push_verdict(&mut o, &self.verdict);
        o
    }
}

impl TxReport {
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "xload pps on {}: {} B frames (IPv{}), {} flows, queues {:?}, AF_XDP {} mode, {:.2} s{}",
            self.dev,
            self.frame_size,
            self.ip_version,
            self.flows,
            self.queues,
            self.xsk_mode,
            self.duration_s,
            if self.interrupted { " (interrupted)" } else { "" }
        );
        if let Some(e) = self
            .per_queue
            .iter()
            .find_map(|q| q.result.zero_copy_error.as_ref())
        {
            let _ = writeln!(o, "  zero-copy unavailable, copy mode used: {e}");
        }
        let _ = writeln!(
            o,
            "  sent {} frames: {} ({}){}{}",
            self.sent,
            fmt_rate(self.pps),
            fmt_bits(self.bits_per_s),
            self.line_rate_pct
                .map(|p| format!(", {p:.1}% of line rate"))
                .unwrap_or_default(),
            self.rate_target
                .map(|r| format!(", target {}", fmt_rate(r)))
                .unwrap_or_default()
        );
        for q in &self.per_queue {
            let r = &q.result;
            let _ = writeln!(
                o,
                "  queue {}{}: {} sent, thread CPU {:.0}%, kicks {} (backpressure {}), starved {}, rate wait {:.0}%",
                r.queue,
                r.cpu.map(|c| format!(" cpu{c}")).unwrap_or_default(),
                fmt_rate(q.pps),
                q.thread_cpu_pct,
                r.kicks,
                r.kick_backpressure,
                r.starved,
                q.rate_wait_pct
            );
        }
        push_cpu(&mut o, &self.cpu);
        let s = &self.xdp_statistics;
        let _ = writeln!(
            o,
            "  XDP_STATISTICS: tx_invalid {} tx_ring_empty {}",
            s.tx_invalid_descs, s.tx_ring_empty_descs
        );
        let d = &self.interface.delta;
        let _ = writeln!(
            o,
            "  interface {}: tx_packets {} tx_dropped {} tx_errors {}",
            self.interface.dev, d.tx_packets, d.tx_dropped, d.tx_errors
        );
        if let Some(rx) = &self.rx {
            o.push_str("receiver:\n");
            for line in rx.to_text().lines() {
                let _ = writeln!(o, "  {line}");
            }
        }
        if let Some(z) = &self.zero_loss {
            let _ = writeln!(
                o,
                "zero-loss search ({} trials of {:.2} s, resolution {}%):",
                z.trials.len(),
                z.trial_s,
                z.resolution_pct
            );
            for t in &z.trials {
                let _ = writeln!(
                    o,
                    "  offered {:>14}  sent {:>10}  delivered {:>10}  lost {:>8}  sent at {}",
                    t.rate_target.map_or("max".to_string(), fmt_rate),
                    t.sent,
                    t.delivered,
                    t.lost,
                    fmt_rate(t.pps)
                );
            }
            match z.bracket_pps.1 {
                Some(hi) => {
                    let _ = writeln!(
                        o,
                        "  zero-loss rate: {} (bracket {} .. {})",
                        fmt_rate(z.rate_pps),
                        fmt_rate(z.bracket_pps.0),
                        fmt_rate(hi)
                    );
                }
                None => {
                    let _ = writeln!(
                        o,
                        "  zero-loss rate: {} — no loss even at the generator's maximum",
                        fmt_rate(z.rate_pps)
                    );
                }
            }
            for n in &z.notes {
                let _ = writeln!(o, "  note: {n}");
            }
        }
        push_verdict(&mut o, &self.verdict);
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_print_with_their_unit_and_slow_ones_with_their_fraction() {
        assert_eq!(fmt_rate(2_500_000.0), "2.500 Mpps");
        assert_eq!(fmt_rate(44_600.0), "44.6 kpps");
        assert_eq!(fmt_rate(250.0), "250 pps");
        assert_eq!(fmt_rate(0.5), "0.50 pps");
        assert_eq!(fmt_rate(0.0), "0 pps");
    }

    #[test]
    fn line_rate_of_64_byte_frames_matches_the_textbook_figures() {
        assert!((line_rate_pps(1000, 64) - 1_488_095.2).abs() < 1.0);
        assert!((line_rate_pps(10_000, 64) - 14_880_952.4).abs() < 1.0);
        assert!((line_rate_pps(10_000, 1518) - 812_743.8).abs() < 1.0);
    }

    #[test]
    fn verdict_prefers_receiver_ring_evidence_over_cpu() {
        let v = verdict(&VerdictInput {
            tx_pps: 1e6,
            tx_cpu_busy_pct: Some(100.0),
            rx: Some(RxFacts {
                lost: 10,
                delivered: 990,
                ring_full: 10,
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(v.limit, "receiver-ring-full");
    }

    #[test]
    fn verdict_names_rate_target_cpu_and_backpressure() {
        let met = verdict(&VerdictInput {
            rate_target: Some(1000.0),
            tx_pps: 999.0,
            ..Default::default()
        });
        assert_eq!(met.limit, "rate-target");
        let late = verdict(&VerdictInput {
            rate_target: Some(1000.0),
            tx_pps: 800.0,
            rate_wait_pct: 70.0,
            ..Default::default()
        });
        assert_eq!(late.limit, "scheduling");
        let cpu = verdict(&VerdictInput {
            tx_pps: 1e6,
            tx_cpu_busy_pct: Some(99.0),
            tx_thread_cpu_pct: 98.0,
            kicks: 100,
            kick_backpressure: 1,
            ..Default::default()
        });
        assert_eq!(cpu.limit, "generator-cpu");
        let bp = verdict(&VerdictInput {
            tx_pps: 1e6,
            tx_cpu_busy_pct: Some(99.0),
            kicks: 100,
            kick_backpressure: 50,
            ..Default::default()
        });
        assert_eq!(bp.limit, "tx-backpressure");
        let full = verdict(&VerdictInput {
            tx_pps: 1.4e6,
            line_rate_pct: Some(99.0),
            ..Default::default()
        });
        assert_eq!(full.limit, "line-rate");
        let drops = verdict(&VerdictInput {
            rx: Some(RxFacts {
                lost: 5,
                delivered: 5,
                rx_dropped: 5,
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(drops.limit, "device-drops");
        // The rate was met, but the sending device dropped what it was given.
        let tx_drops = verdict(&VerdictInput {
            rate_target: Some(1000.0),
            tx_pps: 1000.0,
            sent: 1000,
            tx_dropped: 400,
            ..Default::default()
        });
        assert_eq!(tx_drops.limit, "device-drops");
        assert!(
            tx_drops.reasons[0].contains("40.0% of the 1000 frames"),
            "{:?}",
            tx_drops.reasons
        );
        let few = verdict(&VerdictInput {
            rate_target: Some(1000.0),
            tx_pps: 1000.0,
            sent: 1000,
            tx_dropped: 3,
            ..Default::default()
        });
        assert_eq!(few.limit, "rate-target", "under 1% is no verdict");
    }

    #[test]
    fn a_few_socket_drops_are_no_drain_verdict() {
        let few = RxFacts {
            delivered: 20_007,
            xsk_dropped: 10,
            ..Default::default()
        };
        let v = rx_verdict(&few, 20_000.0);
        assert_eq!(v.limit, "sender", "{v:?}");
        assert!(v.reasons[0].contains("under 0.1%"), "{v:?}");
        let many = RxFacts {
            delivered: 20_007,
            xsk_dropped: 100,
            ..Default::default()
        };
        assert_eq!(rx_verdict(&many, 20_000.0).limit, "receiver-ring-full");
    }

    #[test]
    fn receiver_verdict_does_not_blame_upstream_for_its_own_drops() {
        let v = rx_verdict(
            &RxFacts {
                lost: 15005,
                delivered: 5001,
                redirect_failed: 15005,
                ..Default::default()
            },
            5000.0,
        );
        assert_eq!(v.limit, "receiver-queues", "{v:?}");
        // A startup transient (a receiver started after its sender) is no limit.
        let v = rx_verdict(
            &RxFacts {
                delivered: 20_007,
                redirect_failed: 134,
                xsk_dropped: 10,
                ..Default::default()
            },
            20_000.0,
        );
        assert_eq!(v.limit, "sender", "{v:?}");
        let v = rx_verdict(
            &RxFacts {
                lost: 981,
                delivered: 9019,
                injected_drops: 981,
                ..Default::default()
            },
            9000.0,
        );
        assert_eq!(v.limit, "loss");
        assert!(v.summary.contains("drop injection"), "{v:?}");
    }

    #[test]
    fn receiver_verdict_says_sender_when_nothing_dropped() {
        let v = rx_verdict(&RxFacts::default(), 1000.0);
        assert_eq!(v.limit, "sender");
        let v = rx_verdict(
            &RxFacts {
                ring_full: 3,
                ..Default::default()
            },
            1000.0,
        );
        assert_eq!(v.limit, "receiver-ring-full");
    }
}
