//! `xload pps` and `xload pps-rx`: the command line of the AF_XDP packet
//! generator and receiver (crates/xdp), checked and turned into a run.
//! Exit codes: 0 success, 1 the run could not be done, 2 bad arguments.
//!
//! Ctrl-C (SIGINT) or SIGTERM ends the run early and still prints the
//! report (xload-sys's stop flag) and exits 128 + the signal's number. Either way
//! the XDP program goes away with the process, because it is held only by a
//! bpf_link fd. The report goes to stdout through [`crate::out`]: a reader
//! that goes away (`xload pps … | head -1`) ends nothing but the output.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use xload_xdp::frame::MacAddr;
use xload_xdp::pps::{self, PeerConfig, PpsConfig, PpsRxConfig, SearchConfig};
use xload_xdp::program::RxMode;
use xload_xdp::seq::SeqFault;
use xload_xdp::xsk::BindMode;

/// A run length: above zero (the duration grammar of every xload command).
fn run_duration_arg(s: &str) -> Result<Duration, String> {
    let d = crate::args::parse_duration(s)?;
    if d.is_zero() {
        return Err(format!("duration {s:?} must be above zero"));
    }
    Ok(d)
}

/// Every CPU of a `--cpus`/`--rx-cpus` list must be one this process may run on.
fn check_cpus(opt: &str, cpus: &Option<IdList>) -> Result<(), String> {
    let Some(IdList(list)) = cpus else {
        return Ok(());
    };
    let allowed =
        xload_sys::cpu::allowed_cpus().map_err(|e| format!("{opt}: sched_getaffinity: {e}"))?;
    match list.iter().find(|&&c| !allowed.contains(&(c as usize))) {
        Some(c) => Err(format!("{opt}: CPU {c} is not available to this process")),
        None => Ok(()),
    }
}

/// A parsed index list such as `0-3,6`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IdList(pub(crate) Vec<u32>);

fn list_arg(s: &str) -> Result<IdList, String> {
    parse_list(s).map(IdList).map_err(|e| e.to_string())
}

fn rate_arg(s: &str) -> Result<f64, String> {
    parse_rate(s).map_err(|e| e.to_string())
}

fn mac_arg(s: &str) -> Result<MacAddr, String> {
    s.parse::<MacAddr>().map_err(|e| e.to_string())
}

fn fault_arg(s: &str) -> Result<SeqFault, String> {
    s.parse::<SeqFault>().map_err(|e| e.to_string())
}

/// AF_XDP binding mode on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum XskModeArg {
    /// Zero-copy if the driver supports it, else copy.
    Auto,
    Zerocopy,
    Copy,
}

impl From<XskModeArg> for BindMode {
    fn from(m: XskModeArg) -> Self {
        match m {
            XskModeArg::Auto => BindMode::Auto,
            XskModeArg::Zerocopy => BindMode::ZeroCopy,
            XskModeArg::Copy => BindMode::Copy,
        }
    }
}

/// Receiver mode on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RxModeArg {
    /// AF_XDP sockets: sequence, loss, reordering and latency checks.
    Xsk,
    /// Count and drop in the XDP program (cheapest receiver, counts only).
    Count,
}

impl From<RxModeArg> for RxMode {
    fn from(m: RxModeArg) -> Self {
        match m {
            RxModeArg::Xsk => RxMode::Xsk,
            RxModeArg::Count => RxMode::Count,
        }
    }
}

/// Arguments of `xload pps`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct PpsArgs {
    /// Interface to transmit on.
    #[arg(long, value_name = "IF")]
    pub(crate) dev: String,
    /// Destination MAC (default with --rx-dev: that interface's MAC).
    #[arg(long, value_name = "MAC", value_parser = mac_arg)]
    pub(crate) dst_mac: Option<MacAddr>,
    /// Destination IPv4 or IPv6 address.
    #[arg(long, value_name = "IP")]
    pub(crate) dst_ip: IpAddr,
    /// Source address (default 198.18.0.1 or 2001:2::1, benchmarking ranges).
    #[arg(long, value_name = "IP")]
    pub(crate) src_ip: Option<IpAddr>,
    /// Source MAC (default: the interface's).
    #[arg(long, value_name = "MAC", value_parser = mac_arg)]
    pub(crate) src_mac: Option<MacAddr>,
    /// UDP destination port.
    #[arg(long, value_name = "P", default_value_t = 9)]
    pub(crate) dst_port: u16,
    /// First UDP source port; flow i uses P+i.
    #[arg(long, value_name = "P", default_value_t = 10000)]
    pub(crate) src_port: u16,
    /// Number of flows (UDP source ports), spread over the queues (default: one per queue).
    #[arg(long, value_name = "N")]
    pub(crate) flows: Option<u32>,
    /// Frame size on the wire in bytes, including the 4-byte FCS.
    #[arg(long, value_name = "BYTES", default_value_t = 64)]
    pub(crate) size: usize,
    /// Total rate in frames per second (250k, 1.5M); unlimited if absent.
    #[arg(long, value_name = "PPS", value_parser = rate_arg)]
    pub(crate) rate: Option<f64>,
    /// TX queues, one pinned thread each (e.g. 0-3).
    #[arg(long, value_name = "LIST", value_parser = list_arg, default_value = "0")]
    pub(crate) queues: IdList,
    /// CPUs for the queue threads, in queue order, taken again from the first
    /// when the queues outnumber them (default: allowed CPUs).
    #[arg(long, value_name = "LIST", value_parser = list_arg)]
    pub(crate) cpus: Option<IdList>,
    /// Run time (500ms, 10s, 2m).
    #[arg(short = 'd', long = "duration", value_name = "DUR", value_parser = run_duration_arg, default_value = "10s")]
    pub(crate) duration: Duration,
    /// Stop after this many frames in total.
    #[arg(short = 'n', long, value_name = "N")]
    pub(crate) count: Option<u64>,
    /// Frames per TX ring submission.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub(crate) batch: u32,
    /// AF_XDP binding mode.
    #[arg(long, value_enum, default_value_t = XskModeArg::Auto)]
    pub(crate) xsk_mode: XskModeArg,
    /// Write the JSON report here ('-' = stdout).
    #[arg(long, value_name = "PATH")]
    pub(crate) json: Option<PathBuf>,
    /// Receive locally on this interface (started by this command).
    #[arg(long, value_name = "IF")]
    pub(crate) rx_dev: Option<String>,
    /// Network namespace of --rx-dev (as in `ip netns`).
    #[arg(long, value_name = "NAME", alias = "rx-netns", requires = "rx_dev")]
    pub(crate) peer_ns: Option<String>,
    /// Local receiver mode.
    #[arg(long, value_enum, default_value_t = RxModeArg::Xsk)]
    pub(crate) rx_mode: RxModeArg,
    /// Local receiver queues (default: all RX queues of --rx-dev).
    #[arg(long, value_name = "LIST", value_parser = list_arg)]
    pub(crate) rx_queues: Option<IdList>,
    /// CPUs for the local receiver threads (default: allowed CPUs, last first).
    #[arg(long, value_name = "LIST", value_parser = list_arg)]
    pub(crate) rx_cpus: Option<IdList>,
    /// Attach the receiver's XDP program in generic (skb) mode.
    #[arg(long)]
    pub(crate) rx_generic: bool,
    /// Binary-search the highest rate without loss (needs --rx-dev).
    #[arg(long, requires = "rx_dev")]
    pub(crate) find_zero_loss: bool,
    /// Trial window of the zero-loss search.
    #[arg(long, value_name = "DUR", value_parser = run_duration_arg, default_value = "1s")]
    pub(crate) trial: Duration,
    /// Stop the search when the bracket is narrower than this percentage.
    #[arg(long, value_name = "PCT", default_value_t = 1.0)]
    pub(crate) resolution: f64,
    /// Most trials of the search.
    #[arg(long, value_name = "N", default_value_t = 12)]
    pub(crate) max_trials: u32,
    /// Test mode: corrupt the sequence numbers (skip:N, swap:N, dup:N).
    #[arg(long, value_name = "FAULT", value_parser = fault_arg, hide = true)]
    pub(crate) test_seq_fault: Option<SeqFault>,
    /// Test mode: the local receiver's XDP program drops every Nth frame.
    #[arg(long, value_name = "N", hide = true)]
    pub(crate) test_rx_drop_every: Option<u32>,
}

/// Arguments of `xload pps-rx`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct PpsRxArgs {
    /// Interface to receive on.
    #[arg(long, value_name = "IF")]
    pub(crate) dev: String,
    /// RX queues to bind (default: all).
    #[arg(long, value_name = "LIST", value_parser = list_arg)]
    pub(crate) queues: Option<IdList>,
    /// CPUs for the queue threads, in queue order, taken again from the first
    /// when the queues outnumber them (default: allowed CPUs).
    #[arg(long, value_name = "LIST", value_parser = list_arg)]
    pub(crate) cpus: Option<IdList>,
    /// Run time (500ms, 10s, 2m).
    #[arg(short = 'd', long = "duration", value_name = "DUR", value_parser = run_duration_arg, default_value = "10s")]
    pub(crate) duration: Duration,
    /// xsk: AF_XDP with sequence checks; count: count and drop in XDP.
    #[arg(long, value_enum, default_value_t = RxModeArg::Xsk)]
    pub(crate) mode: RxModeArg,
    /// UDP destination port of the xload frames.
    #[arg(long, value_name = "P", default_value_t = 9)]
    pub(crate) dst_port: u16,
    /// AF_XDP binding mode.
    #[arg(long, value_enum, default_value_t = XskModeArg::Auto)]
    pub(crate) xsk_mode: XskModeArg,
    /// Attach the XDP program in generic (skb) mode.
    #[arg(long)]
    pub(crate) generic: bool,
    /// Skip IPv4/UDP checksum verification of received frames.
    #[arg(long)]
    pub(crate) no_verify_checksums: bool,
    /// Write the JSON report here ('-' = stdout).
    #[arg(long, value_name = "PATH")]
    pub(crate) json: Option<PathBuf>,
    /// Test mode: the XDP program drops every Nth xload frame.
    #[arg(long, value_name = "N", hide = true)]
    pub(crate) test_drop_every: Option<u32>,
}

fn to_usize(v: &Option<IdList>) -> Option<Vec<usize>> {
    v.as_ref()
        .map(|l| l.0.iter().map(|&c| c as usize).collect())
}

impl PpsArgs {
    /// Checks the combination of arguments and builds the run.
    pub(crate) fn to_config(&self) -> Result<PpsConfig, String> {
        if self.batch == 0 || self.batch > 1024 {
            return Err(format!("--batch {} must be within 1..=1024", self.batch));
        }
        if !(self.resolution > 0.0 && self.resolution < 100.0) {
            return Err("--resolution must be within (0, 100) percent".into());
        }
        check_cpus("--cpus", &self.cpus)?;
        check_cpus("--rx-cpus", &self.rx_cpus)?;
        let flows = self.flows.unwrap_or(self.queues.0.len() as u32);
        if flows == 0 || flows > 65_536 {
            return Err("--flows must be within 1..=65536".into());
        }
        // Flow f uses source port src_port + f: all of them must be ports.
        if u32::from(self.src_port) + flows - 1 > 65_535 {
            return Err(format!(
                "--flows {flows} from --src-port {} runs past port 65535",
                self.src_port
            ));
        }
        if let Some(0) = self.count {
            return Err("--count must be at least 1".into());
        }
        if self.find_zero_loss && self.rate.is_some() {
            return Err("--find-zero-loss chooses the rates itself; drop --rate".into());
        }
        Ok(PpsConfig {
            dev: self.dev.clone(),
            dst_mac: self.dst_mac,
            src_mac: self.src_mac,
            dst_ip: self.dst_ip,
            src_ip: self.src_ip,
            dst_port: self.dst_port,
            src_port: self.src_port,
            flows,
            wire_size: self.size,
            rate_per_s: self.rate,
            queues: self.queues.0.clone(),
            cpus: to_usize(&self.cpus),
            duration: self.duration,
            count: self.count,
            batch: self.batch,
            bind_mode: self.xsk_mode.into(),
            fault: self.test_seq_fault.unwrap_or_default(),
            peer: self.rx_dev.as_ref().map(|dev| PeerConfig {
                netns: self.peer_ns.clone(),
                dev: dev.clone(),
                mode: self.rx_mode.into(),
                queues: self.rx_queues.as_ref().map(|q| q.0.clone()),
                cpus: to_usize(&self.rx_cpus),
                drop_every: self.test_rx_drop_every.unwrap_or(0),
                force_generic: self.rx_generic,
            }),
            search: self.find_zero_loss.then_some(SearchConfig {
                trial: self.trial,
                resolution_pct: self.resolution,
                max_trials: self.max_trials.max(2),
            }),
        })
    }
}

impl PpsRxArgs {
    pub(crate) fn to_config(&self) -> Result<PpsRxConfig, String> {
        check_cpus("--cpus", &self.cpus)?;
        Ok(PpsRxConfig {
            dev: self.dev.clone(),
            queues: self.queues.as_ref().map(|q| q.0.clone()),
            cpus: to_usize(&self.cpus),
            mode: self.mode.into(),
            dst_port: self.dst_port,
            duration: self.duration,
            drop_every: self.test_drop_every.unwrap_or(0),
            bind_mode: self.xsk_mode.into(),
            force_generic: self.generic,
            verify_checksums: !self.no_verify_checksums,
        })
    }
}

/// Why a command-line value was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ValueError {
    List(String),
    Rate(String),
}

impl std::fmt::Display for ValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValueError::List(s) => {
                write!(f, "invalid list {s:?}: use numbers and ranges, e.g. 0-3,6")
            }
            ValueError::Rate(s) => write!(
                f,
                "invalid rate {s:?}: use a positive number, optionally with k, M or G (e.g. 250k)"
            ),
        }
    }
}

/// Parses "0-3,6" into [0, 1, 2, 3, 6] (the grammar of
/// [`xload_sys::cpu::parse_list`]; not empty, order kept, duplicates rejected:
/// queue i pairs with CPU i).
pub(crate) fn parse_list(s: &str) -> Result<Vec<u32>, ValueError> {
    let err = || ValueError::List(s.to_string());
    let out = xload_sys::cpu::parse_list(s).map_err(|_| err())?;
    let mut seen = std::collections::BTreeSet::new();
    if out.is_empty() || !out.iter().all(|&i| seen.insert(i)) {
        return Err(err());
    }
    Ok(out)
}

/// Parses a packet rate: "250000", "250k", "1.5M", "2G" (per second).
pub(crate) fn parse_rate(s: &str) -> Result<f64, ValueError> {
    let err = || ValueError::Rate(s.to_string());
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('k') | Some('K') => (&t[..t.len() - 1], 1e3),
        Some('M') | Some('m') => (&t[..t.len() - 1], 1e6),
        Some('G') | Some('g') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| err())?;
    let r = v * mult;
    if !r.is_finite() || r <= 0.0 {
        return Err(err());
    }
    Ok(r)
}

/// Prints the text report on stdout, and the JSON one on stdout (`-`, the
/// text then goes to stderr) or into a file; 1 when the file cannot be written.
fn emit(cmd: &str, text: &str, json: Option<(&PathBuf, String)>) -> i32 {
    match json {
        Some((path, body)) if path.as_os_str() == "-" => {
            eprint!("{text}");
            crate::out(&(body + "\n"));
        }
        Some((path, body)) => {
            crate::out(text);
            if let Err(e) = std::fs::write(path, body + "\n") {
                eprintln!("{cmd}: cannot write {}: {e}", path.display());
                return 1;
            }
        }
        None => crate::out(text),
    }
    0
}

/// Runs `xload pps`; returns the process exit code (0, 1 or 2).
pub(crate) fn main_pps(args: &PpsArgs, stop: Arc<AtomicBool>) -> i32 {
    let cfg = match args.to_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("xload pps: {e}");
            return 2;
        }
    };
    match pps::run_pps(&cfg, &stop) {
        Ok(report) => {
            let json = args.json.as_ref().map(|p| {
                (
                    p,
                    serde_json::to_string_pretty(&report)
                        .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")),
                )
            });
            emit("xload pps", &report.to_text(), json)
        }
        Err(e) => {
            eprintln!("xload pps: {e}");
            e.exit_code()
        }
    }
}

/// Runs `xload pps-rx`; returns the process exit code.
pub(crate) fn main_pps_rx(args: &PpsRxArgs, stop: Arc<AtomicBool>) -> i32 {
    let cfg = match args.to_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("xload pps-rx: {e}");
            return 2;
        }
    };
    match pps::run_pps_rx(&cfg, &stop) {
        Ok(report) => {
            let json = args.json.as_ref().map(|p| {
                (
                    p,
                    serde_json::to_string_pretty(&report)
                        .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")),
                )
            });
            let code = emit("xload pps-rx", &report.to_text(), json);
            if report.delivered == 0 && !stop.load(Ordering::Relaxed) {
                eprintln!("xload pps-rx: no xload frames received");
                return 1;
            }
            code
        }
        Err(e) => {
            eprintln!("xload pps-rx: {e}");
            e.exit_code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_with_units_parse_and_garbage_is_rejected() {
        use crate::args::parse_duration;
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5m").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("100us").unwrap(), Duration::from_micros(100));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        for bad in ["", "s", "ms", "2x", "-1s", "1..2s", "nan", "1e3s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn lists_expand_ranges_and_reject_duplicates() {
        assert_eq!(parse_list("0").unwrap(), vec![0]);
        assert_eq!(parse_list("0-3,6").unwrap(), vec![0, 1, 2, 3, 6]);
        assert_eq!(parse_list("5,1").unwrap(), vec![5, 1]);
        for bad in ["", "a", "3-1", "1,,2", "1,1", "0-2,2", "-1"] {
            assert!(parse_list(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn rates_accept_suffixes() {
        assert_eq!(parse_rate("250000").unwrap(), 250_000.0);
        assert_eq!(parse_rate("250k").unwrap(), 250_000.0);
        assert_eq!(parse_rate("1.5M").unwrap(), 1_500_000.0);
        for bad in ["", "0", "-5", "k", "1.5X"] {
            assert!(parse_rate(bad).is_err(), "{bad:?} accepted");
        }
    }
}
