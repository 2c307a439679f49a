//! A host's evidence for one step: the seconds `xtune observe` recorded
//! that fall in the step's measured window (by wall clock), summed, and the
//! verdict that names the server's limiting resource from them. Pure
//! functions of their input; the rules are in docs/capacity.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use xload_probe::observe::ObserveInterval;
use xload_probe::{CpuUsage, NetDevDrops, SockStat};

/// A second belongs to a window when at least this share of it lies inside.
const MIN_OVERLAP: f64 = 0.5;
/// The busiest CPU's softirq share that can be the limit...
pub(crate) const SOFTIRQ_ONE_CPU_MIN_PCT: f64 = 10.0;
/// ...when it is this many times the other CPUs' mean.
pub(crate) const SOFTIRQ_CONCENTRATION: f64 = 2.0;
/// Below this many NET_RX per second the host is too idle for a verdict on them.
const NET_RX_FLOOR_PER_S: f64 = 1000.0;
/// A CPU is busy below this idle percentage.
pub(crate) const BUSY_IDLE_PCT: f64 = 10.0;
/// Retransmitted segments above this share of those sent.
pub(crate) const RETRANS_SHARE: f64 = 0.01;
/// ...and at least this many, so that a handful on a quiet link says nothing.
const RETRANS_MIN: i64 = 100;

/// What a host showed during a step's window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Evidence {
    pub host: String,
    /// Seconds of observation in the window.
    pub seconds: usize,
    /// Length they cover, s.
    pub window_s: f64,
    /// Mean of the seconds, per CPU.
    pub cpus: Vec<CpuUsage>,
    /// NET_RX / NET_TX softirqs per CPU number, summed.
    pub net_rx: Vec<u64>,
    pub net_tx: Vec<u64>,
    /// Device IRQs: name → count per CPU, summed over the busiest of each second.
    pub irqs: BTreeMap<String, Vec<u64>>,
    /// TCP counter deltas, summed.
    pub tcp: BTreeMap<String, i64>,
    /// Interfaces that dropped, summed.
    pub nic_drops: Vec<NetDevDrops>,
    /// Sockets at the last second.
    pub sockstat: SockStat,
    /// Highest run queue seen.
    pub procs_running_max: Option<u64>,
    /// Mean CPU of the followed process, percent of one CPU.
    pub process_cpu_pct: Option<f64>,
    /// The seconds themselves (per-CPU use and NET_RX each second).
    pub per_second: Vec<ObserveInterval>,
}

/// The seconds of `intervals` inside `[start_us, end_us]`, summed.
pub(crate) fn in_window(
    host: &str,
    intervals: &[ObserveInterval],
    start_us: i64,
    end_us: i64,
) -> Evidence {
    let mut e = Evidence {
        host: host.to_string(),
        ..Evidence::default()
    };
    let chosen: Vec<&ObserveInterval> = intervals
        .iter()
        .filter(|iv| {
            let len = (iv.window_s * 1e6) as i64;
            let begin = iv.end_unix_us - len;
            let inside = (iv.end_unix_us.min(end_us) - begin.max(start_us)).max(0);
            len > 0 && inside as f64 >= MIN_OVERLAP * len as f64
        })
        .collect();
    for iv in &chosen {
        e.window_s += iv.window_s;
        add(&mut e.net_rx, &iv.net_rx);
        add(&mut e.net_tx, &iv.net_tx);
        for irq in &iv.irqs {
            let name = format!("{} {}", irq.irq, irq.name);
            add(e.irqs.entry(name).or_default(), &irq.per_cpu);
        }
        for (k, v) in &iv.tcp {
            *e.tcp.entry(k.clone()).or_default() += v;
        }
        for d in &iv.nic_drops {
            match e.nic_drops.iter_mut().find(|x| x.dev == d.dev) {
                Some(x) => {
                    x.rx_dropped += d.rx_dropped;
                    x.rx_fifo += d.rx_fifo;
                    x.tx_dropped += d.tx_dropped;
                }
                None => e.nic_drops.push(d.clone()),
            }
        }
        e.sockstat = iv.sockstat;
        e.procs_running_max = e.procs_running_max.max(iv.procs_running);
    }
    e.seconds = chosen.len();
    e.cpus = mean_cpus(&chosen);
    let pcts: Vec<f64> = chosen.iter().filter_map(|iv| iv.process_cpu_pct).collect();
    e.process_cpu_pct = (!pcts.is_empty()).then(|| pcts.iter().sum::<f64>() / pcts.len() as f64);
    e.per_second = chosen.into_iter().cloned().collect();
    e
}

fn add(sum: &mut Vec<u64>, more: &[u64]) {
    if sum.len() < more.len() {
        sum.resize(more.len(), 0);
    }
    for (s, m) in sum.iter_mut().zip(more) {
        *s += m;
    }
}

/// Per CPU, each field's mean over the seconds (weighted by their length).
fn mean_cpus(seconds: &[&ObserveInterval]) -> Vec<CpuUsage> {
    let mut by_cpu: BTreeMap<usize, (CpuUsage, f64)> = BTreeMap::new();
    for iv in seconds {
        for c in &iv.cpus {
            let (acc, w) = by_cpu.entry(c.cpu).or_insert_with(|| {
                (
                    CpuUsage {
                        cpu: c.cpu,
                        ..CpuUsage::default()
                    },
                    0.0,
                )
            });
            let k = iv.window_s;
            acc.usr += c.usr * k;
            acc.nice += c.nice * k;
            acc.sys += c.sys * k;
            acc.irq += c.irq * k;
            acc.softirq += c.softirq * k;
            acc.steal += c.steal * k;
            acc.iowait += c.iowait * k;
            acc.idle += c.idle * k;
            acc.busy += c.busy * k;
            acc.ticks += c.ticks;
            *w += k;
        }
    }
    by_cpu
        .into_values()
        .map(|(mut c, w)| {
            if w > 0.0 {
                for f in [
                    &mut c.usr,
                    &mut c.nice,
                    &mut c.sys,
                    &mut c.irq,
                    &mut c.softirq,
                    &mut c.steal,
                    &mut c.iowait,
                    &mut c.idle,
                    &mut c.busy,
                ] {
                    *f /= w;
                }
            }
            c
        })
        .collect()
}

/// What limited the server in a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Limit {
    /// The accept queue overflowed: ListenOverflows / ListenDrops rose.
    ListenQueue,
    /// An interface dropped packets.
    NicDrops,
    /// One CPU ran most of the receive softirqs.
    SoftirqOneCpu,
    /// Every CPU busy, mostly in user space: the application.
    Application,
    /// Every CPU busy, mostly in the kernel (system, softirq).
    KernelCpu,
    /// Segments were retransmitted.
    Retransmits,
    /// No resource showed saturation: latency or the SLO set the limit.
    None,
}

impl Limit {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Limit::ListenQueue => "listen queue overflow",
            Limit::NicDrops => "NIC drops",
            Limit::SoftirqOneCpu => "receive softirq on one CPU",
            Limit::Application => "application CPU",
            Limit::KernelCpu => "kernel CPU",
            Limit::Retransmits => "retransmits",
            Limit::None => "no saturated resource found",
        }
    }
}

/// The server's verdict for a step: the limit, the evidence that names it,
/// and the profile key (or setting) that would change it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct ServerVerdict {
    pub limit: Limit,
    /// One line: the limit and its numbers.
    pub text: String,
    /// What to change: an xtune profile key or a server setting.
    pub change: String,
    /// The CPU, for a limit on one CPU.
    pub cpu: Option<usize>,
}

fn tcp(e: &Evidence, name: &str) -> i64 {
    e.tcp.get(name).copied().unwrap_or(0)
}

/// Names the server's limiting resource from its evidence; the rules are
/// tried in this order, the first that holds wins.
pub(crate) fn judge(e: &Evidence) -> ServerVerdict {
    let verdict = |limit, text: String, change: &str, cpu| ServerVerdict {
        limit,
        text,
        change: change.to_string(),
        cpu,
    };
    let (overflows, drops) = (tcp(e, "ListenOverflows"), tcp(e, "ListenDrops"));
    if overflows > 0 || drops > 0 {
        return verdict(
            Limit::ListenQueue,
            format!("listen queue overflow: ListenOverflows +{overflows}, ListenDrops +{drops} in {:.1}s", e.window_s),
            "sysctl:net.core.somaxconn and the server's listen backlog (nginx: listen ... backlog=N)",
            None,
        );
    }
    if let Some(d) = e
        .nic_drops
        .iter()
        .find(|d| d.rx_dropped + d.rx_fifo + d.tx_dropped > 0)
    {
        return verdict(
            Limit::NicDrops,
            format!(
                "NIC drops on {}: rx {} (fifo {}), tx {}",
                d.dev, d.rx_dropped, d.rx_fifo, d.tx_dropped
            ),
            "nic ring sizes (profile [nic] rx/tx) and sysctl:net.core.netdev_max_backlog",
            None,
        );
    }
    if let Some(v) = softirq_one_cpu(e) {
        return v;
    }
    let busy: Vec<&CpuUsage> = e.cpus.iter().filter(|c| c.idle < BUSY_IDLE_PCT).collect();
    if !e.cpus.is_empty() && busy.len() == e.cpus.len() {
        let n = e.cpus.len() as f64;
        let usr = e.cpus.iter().map(|c| c.usr + c.nice).sum::<f64>() / n;
        let kernel = e
            .cpus
            .iter()
            .map(|c| c.sys + c.softirq + c.irq)
            .sum::<f64>()
            / n;
        let process = e
            .process_cpu_pct
            .map(|p| format!("; the server process {p:.0}% of a CPU"))
            .unwrap_or_default();
        return if usr >= kernel {
            verdict(
                Limit::Application,
                format!("every CPU busy, mostly in user space: usr {usr:.0}%, kernel {kernel:.0}%{process}"),
                "the application (workers, threads, its own limits), or more CPUs",
                None,
            )
        } else {
            verdict(
                Limit::KernelCpu,
                format!("every CPU busy, mostly in the kernel: sys+softirq+irq {kernel:.0}%, usr {usr:.0}%{process}"),
                "the network stack's cost per request (keep-alive, batching), or more CPUs",
                None,
            )
        };
    }
    let (retrans, out) = (tcp(e, "RetransSegs"), tcp(e, "OutSegs"));
    if retrans >= RETRANS_MIN && out > 0 && retrans as f64 >= RETRANS_SHARE * out as f64 {
        return verdict(
            Limit::Retransmits,
            format!(
                "retransmits: RetransSegs +{retrans} of OutSegs +{out} ({:.1}%)",
                100.0 * retrans as f64 / out as f64
            ),
            "the path (loss, buffers: sysctl:net.ipv4.tcp_rmem / tcp_wmem)",
            None,
        );
    }
    verdict(
        Limit::None,
        "no saturated resource found: the latency limit or the SLO stopped it".into(),
        "the SLO, or what the application waits on",
        None,
    )
}

/// One CPU carries the receive path: the most softirq time of all CPUs, at
/// least [`SOFTIRQ_ONE_CPU_MIN_PCT`] and [`SOFTIRQ_CONCENTRATION`] times the
/// others' mean, while packets arrive. Softirq time, not NET_RX counts, is
/// the measure: with RPS the sending CPU raises NET_RX too (to send the IPI)
/// while the steered CPU does the work.
fn softirq_one_cpu(e: &Evidence) -> Option<ServerVerdict> {
    let total: u64 = e.net_rx.iter().sum();
    if e.window_s <= 0.0 || (total as f64) < NET_RX_FLOOR_PER_S * e.window_s || e.cpus.len() < 2 {
        return None;
    }
    let this = e
        .cpus
        .iter()
        .max_by(|a, b| a.softirq.total_cmp(&b.softirq))?;
    let cpu = this.cpu;
    let others: Vec<&CpuUsage> = e.cpus.iter().filter(|c| c.cpu != cpu).collect();
    let others_soft = others.iter().map(|c| c.softirq).sum::<f64>() / others.len() as f64;
    let others_idle = others.iter().map(|c| c.idle).sum::<f64>() / others.len() as f64;
    if this.softirq < SOFTIRQ_ONE_CPU_MIN_PCT || this.softirq < SOFTIRQ_CONCENTRATION * others_soft
    {
        return None;
    }
    let share = e.net_rx.get(cpu).copied().unwrap_or(0) as f64 / total as f64;
    let irq = e
        .irqs
        .iter()
        .filter(|(_, per_cpu)| per_cpu.get(cpu).copied().unwrap_or(0) > 0)
        .max_by_key(|(_, per_cpu)| per_cpu.get(cpu).copied().unwrap_or(0))
        .map(|(name, _)| format!("; its busiest IRQ: {name}"))
        .unwrap_or_default();
    Some(ServerVerdict {
        limit: Limit::SoftirqOneCpu,
        text: format!(
            "receive softirq on cpu{cpu}: softirq {:.0}% (other CPUs {:.0}%, idle {:.0}%), {:.0}% of NET_RX{irq}",
            this.softirq,
            others_soft,
            others_idle,
            share * 100.0
        ),
        change: "rps:DEV:rx-N (rps_cpus over more CPUs) or irq:N affinity (profile [rps]/[irq])".into(),
        cpu: Some(cpu),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(n: usize, usr: f64, sys: f64, softirq: f64) -> CpuUsage {
        CpuUsage {
            cpu: n,
            usr,
            sys,
            softirq,
            idle: (100.0 - usr - sys - softirq).max(0.0),
            busy: usr + sys + softirq,
            ..CpuUsage::default()
        }
    }

    fn second(
        end_us: i64,
        cpus: Vec<CpuUsage>,
        net_rx: Vec<u64>,
        tcp: &[(&str, i64)],
    ) -> ObserveInterval {
        ObserveInterval {
            window_s: 1.0,
            end_unix_us: end_us,
            cpus,
            net_rx,
            tcp: tcp.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..ObserveInterval::default()
        }
    }

    const S: i64 = 1_000_000;

    #[test]
    fn only_seconds_mostly_inside_the_window_count() {
        let ivs: Vec<ObserveInterval> = (1..=6)
            .map(|k| {
                second(
                    k * S,
                    vec![cpu(0, 10.0, 0.0, 0.0)],
                    vec![k as u64],
                    &[("ListenOverflows", 1)],
                )
            })
            .collect();
        // Window [2.3 s, 4.6 s]: seconds ending at 3 (2..3, 70% in), 4, 5 (4..5, 60% in).
        let e = in_window("srv", &ivs, 2 * S + 300_000, 4 * S + 600_000);
        assert_eq!(e.seconds, 3);
        assert_eq!(e.net_rx, vec![3 + 4 + 5]);
        assert_eq!(e.tcp["ListenOverflows"], 3);
    }

    #[test]
    fn listen_overflows_win_and_name_somaxconn() {
        let e = in_window(
            "srv",
            &[second(
                S,
                vec![cpu(0, 90.0, 5.0, 5.0), cpu(1, 90.0, 5.0, 5.0)],
                vec![9000, 9000],
                &[("ListenOverflows", 37), ("ListenDrops", 37)],
            )],
            0,
            S,
        );
        let v = judge(&e);
        assert_eq!(v.limit, Limit::ListenQueue);
        assert!(v.text.contains("ListenOverflows +37"), "{}", v.text);
        assert!(v.change.contains("net.core.somaxconn"));
    }

    #[test]
    fn receive_on_one_cpu_names_that_cpu() {
        let e = in_window(
            "srv",
            &[second(
                S,
                vec![cpu(0, 20.0, 10.0, 3.0), cpu(1, 10.0, 10.0, 45.0)],
                vec![500, 20_000],
                &[],
            )],
            0,
            S,
        );
        let v = judge(&e);
        assert_eq!(
            (v.limit, v.cpu),
            (Limit::SoftirqOneCpu, Some(1)),
            "{}",
            v.text
        );
        assert!(v.text.contains("cpu1") && v.change.contains("rps"), "{v:?}");
        // Spread evenly, it is no longer the limit.
        let even = in_window(
            "srv",
            &[second(
                S,
                vec![cpu(0, 20.0, 10.0, 20.0), cpu(1, 20.0, 10.0, 21.0)],
                vec![10_000, 10_500],
                &[],
            )],
            0,
            S,
        );
        assert_eq!(judge(&even).limit, Limit::None);
    }

    #[test]
    fn every_cpu_busy_is_the_application_or_the_kernel() {
        let app = in_window(
            "srv",
            &[second(
                S,
                vec![cpu(0, 80.0, 10.0, 5.0), cpu(1, 82.0, 10.0, 5.0)],
                vec![10, 10],
                &[],
            )],
            0,
            S,
        );
        assert_eq!(judge(&app).limit, Limit::Application);
        let kernel = in_window(
            "srv",
            &[second(
                S,
                vec![cpu(0, 20.0, 50.0, 25.0), cpu(1, 20.0, 50.0, 25.0)],
                vec![10, 10],
                &[],
            )],
            0,
            S,
        );
        assert_eq!(judge(&kernel).limit, Limit::KernelCpu);
    }

    #[test]
    fn retransmits_and_nothing_found() {
        let r = in_window(
            "srv",
            &[second(
                S,
                vec![cpu(0, 10.0, 5.0, 1.0), cpu(1, 10.0, 5.0, 1.0)],
                vec![10, 10],
                &[("RetransSegs", 500), ("OutSegs", 10_000)],
            )],
            0,
            S,
        );
        assert_eq!(judge(&r).limit, Limit::Retransmits);
        let quiet = in_window(
            "srv",
            &[second(
                S,
                vec![cpu(0, 10.0, 5.0, 1.0), cpu(1, 10.0, 5.0, 1.0)],
                vec![10, 10],
                &[("RetransSegs", 5), ("OutSegs", 10_000)],
            )],
            0,
            S,
        );
        assert_eq!(judge(&quiet).limit, Limit::None);
    }

    #[test]
    fn nic_drops_are_named_with_the_device() {
        let mut iv = second(S, vec![cpu(0, 10.0, 5.0, 1.0)], vec![10], &[]);
        iv.nic_drops = vec![NetDevDrops {
            dev: "eth0".into(),
            rx_dropped: 12,
            rx_fifo: 0,
            tx_dropped: 0,
        }];
        let v = judge(&in_window("srv", &[iv], 0, S));
        assert_eq!(v.limit, Limit::NicDrops);
        assert!(v.text.contains("eth0: rx 12"), "{}", v.text);
    }
}
